//! Logging to a file, for the modes that own the terminal (the console, the demo).

use std::path::Path;

/// Opens `path` for appending, private (0600; one created by an older
/// version is made private too; parent directories created): log lines name
/// hosts, buckets and holders.
///
/// # Errors
/// The file cannot be created or opened.
pub fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    Ok(file)
}

/// Sends this process's logs to `path` (appended, private). Honours
/// `LEASECTL_LOG` (default `info`, the AWS SDK's own chatter at `error`). If
/// the file cannot be opened nothing is logged: a log line must never land
/// on the console's screen.
pub fn init(path: &Path) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("LEASECTL_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,aws_config=error,aws_smithy_runtime=error"));
    init_at(path, filter);
}

/// Sends this process's logs that pass `filter` to `path` (appended,
/// private); nothing is logged when it cannot be opened.
pub fn init_at(path: &Path, filter: tracing_subscriber::EnvFilter) {
    let Ok(file) = open_private(path) else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_target(false)
        .try_init();
}

/// Warns once per path (stderr, one sentence) when `md` (the file at `path`)
/// is writable by every user, as ssh and kubectl warn about their files:
/// `risk` says what such a user could do; the fix is `chmod go-w PATH`.
pub fn warn_if_world_writable(path: &std::path::Path, md: &std::fs::Metadata, risk: &str) {
    use std::os::unix::fs::PermissionsExt;
    static WARNED: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mode = md.permissions().mode();
    if mode & 0o002 == 0 {
        return;
    }
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.iter().any(|p| p == path) {
        return;
    }
    warned.push(path.to_owned());
    drop(warned);
    let shown = crate::text::sanitize(&path.display().to_string());
    eprintln!(
        "leasectl: warning: {shown} is writable by every user (mode {:04o}): {risk}. Fix it with: chmod go-w {shown}",
        mode & 0o7777
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_log_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("console.log");
        std::fs::write(&path, "old\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        super::init(&path);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
