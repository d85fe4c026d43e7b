//! Where logs go: the terminal belongs to the console, which logs to a file
//! (the demo to one in its directory); every other command logs to stderr.

/// Installs the error report hook: colours only for a person at a terminal
/// that wants them, and no environment section.
///
/// # Errors
/// A hook installed already.
pub fn install_error_hook() -> color_eyre::Result<()> {
    use std::io::IsTerminal;
    let mut hook = color_eyre::config::HookBuilder::default().display_env_section(false);
    if !std::io::stderr().is_terminal() || std::env::var_os("NO_COLOR").is_some() {
        hook = hook.theme(color_eyre::config::Theme::new());
    }
    hook.install()
}

/// Logs to stderr: `warn` and up when `quiet`, else `info` and up;
/// `LEASECTL_LOG` overrides.
pub fn init_logging(quiet: bool) {
    use tracing_subscriber::EnvFilter;
    // The AWS SDK's own WARN lines (e.g. each credential provider it tried) are
    // noise for an operator; the error that matters reaches us as a value.
    let default = if quiet {
        "warn,aws_config=error,aws_smithy_runtime=error"
    } else {
        "info,aws_config=error,aws_smithy_runtime=error"
    };
    let filter =
        EnvFilter::try_from_env("LEASECTL_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// The console's log file: `{data dir}/leasectl/console.log` (nothing may be
/// written to the console's terminal).
pub fn init_console_logging() {
    if let Some(d) = directories::ProjectDirs::from("", "", "leasectl") {
        crate::logfile::init(&d.data_dir().join("console.log"));
    }
}
