//! Logging to a file, for the modes that own the terminal (the console, the demo),
//! and the one rule for every file leasectl appends to or locks by its path
//! ([`sole_regular_file`]).

use crate::exit::tell;
use crate::text::sanitize;
use std::path::Path;

/// Why a path cannot be a file leasectl appends to or locks ([`sole_regular_file`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotSole {
    /// Not a regular file (a symbolic link, FIFO, socket, device or directory).
    NotRegular(std::fs::FileType),
    /// A regular file with this many hard links (more than one).
    Links(u64),
}

impl std::fmt::Display for NotSole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotSole::NotRegular(_) => f.write_str("it is not a regular file"),
            NotSole::Links(n) => write!(f, "it has {n} hard links, so it is also another file"),
        }
    }
}

/// The one rule for every file leasectl appends to or locks by its path —
/// its log file, the audit log (`takeover --audit-log`), a writer lock file
/// (`.writer.lock`): a regular file with one name. Not a symbolic link
/// (never followed), FIFO, socket, device or directory; and not a file with
/// more than one hard link, which is also another file, the one whoever made
/// the link chose (appending to it writes there; locking it is locking that).
/// Checked on `lstat`'s metadata before the open, when something is there,
/// and on `fstat`'s after, so a swap in between is caught.
///
/// Errors: what `md` is instead ([`NotSole`]).
pub(crate) fn sole_regular_file(md: &std::fs::Metadata) -> Result<(), NotSole> {
    use std::os::unix::fs::MetadataExt;
    if !md.file_type().is_file() {
        return Err(NotSole::NotRegular(md.file_type()));
    }
    match md.nlink() {
        0 | 1 => Ok(()),
        n => Err(NotSole::Links(n)),
    }
}

/// Opens the log file `path` for appending, private (0600; one created by
/// an older version is made private too; parent directories created): log
/// lines name hosts, buckets and holders. A link, a FIFO or a file with
/// another name is never written through ([`sole_regular_file`]).
///
/// # Errors
/// The file cannot be created or opened; it is not a regular file with one
/// name (the error says which).
pub(crate) fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let refused =
        |why: NotSole| std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string());
    if let Ok(md) = std::fs::symlink_metadata(path) {
        sole_regular_file(&md).map_err(refused)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    sole_regular_file(&file.metadata()?).map_err(refused)?;
    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    Ok(file)
}

/// Sends this process's logs to `path` (appended, private). Honours
/// `LEASECTL_LOG` (default `info`, the AWS SDK's own chatter at `error`). If
/// the file cannot be opened nothing is logged: a log line must never land
/// on the console's screen.
pub(crate) fn init(path: &Path) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("LEASECTL_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,aws_config=error,aws_smithy_runtime=error"));
    init_at(path, filter);
}

/// Sends this process's logs that pass `filter` to `path` (appended,
/// private); nothing is logged when it cannot be opened.
pub(crate) fn init_at(path: &Path, filter: tracing_subscriber::EnvFilter) {
    let file = match open_private(path) {
        Ok(f) => f,
        // A file that is not one to write through is said (before the
        // console owns the terminal); one that cannot be opened is not.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            // (a warning, not the reason for an exit: not `exit::say`)
            tell(format_args!(
                "not logging to {}: {}",
                sanitize(&path.display().to_string()),
                sanitize(&e.to_string())
            ));
            return;
        }
        Err(_) => return,
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
pub(crate) fn warn_if_world_writable(path: &std::path::Path, md: &std::fs::Metadata, risk: &str) {
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
    let shown = sanitize(&path.display().to_string());
    tell(format_args!(
        "warning: {shown} is writable by every user (mode {:04o}): {risk}. Fix it with: chmod go-w {shown}",
        mode & 0o7777
    ));
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

    #[test]
    fn a_file_appended_to_or_locked_is_a_regular_file_with_one_name() {
        use super::{sole_regular_file, NotSole};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("log");
        std::fs::write(&file, "x").unwrap();
        let lstat = |p: &std::path::Path| std::fs::symlink_metadata(p).unwrap();
        assert_eq!(sole_regular_file(&lstat(&file)), Ok(()));
        std::fs::hard_link(&file, dir.path().join("second")).unwrap();
        assert_eq!(sole_regular_file(&lstat(&file)), Err(NotSole::Links(2)));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        assert!(matches!(
            sole_regular_file(&lstat(&link)),
            Err(NotSole::NotRegular(t)) if t.is_symlink()
        ));
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(matches!(
            sole_regular_file(&lstat(&fifo)),
            Err(NotSole::NotRegular(_))
        ));
    }
}
