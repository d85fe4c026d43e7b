//! Where logs go. A person at stderr reads sentences: a warning or an error
//! as `leasectl: …`, one line, no timestamp or level. The log (every step,
//! timestamped) is for whoever asks for it: on stderr with `-v` or
//! `LEASECTL_LOG`, in a file with `--log-file`. The terminal belongs to the
//! console, which logs to a file (the demo to one in its directory).

use std::fmt::Write as _;
use std::path::Path;

use tracing::field::{Field, Visit};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

use crate::cli::LogArgs;

/// The AWS SDK's own WARN lines (e.g. each credential provider it tried) are
/// noise for an operator; the error that matters reaches us as a value.
const QUIET_SDK: &str = "aws_config=error,aws_smithy_runtime=error";

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

/// The log's filter: `LEASECTL_LOG` when set, else the level `-v` asks for
/// (`info` without it, `debug` with `-vv`, `trace` with `-vvv`).
fn log_filter(verbose: u8) -> EnvFilter {
    EnvFilter::try_from_env("LEASECTL_LOG").unwrap_or_else(|_| {
        let level = match verbose {
            0 | 1 => "info",
            2 => "debug",
            _ => "trace",
        };
        EnvFilter::new(format!("{level},{QUIET_SDK}"))
    })
}

/// Whether stderr gets the log rather than sentences: `-v`, or
/// `LEASECTL_LOG` in the environment.
pub fn log_on_stderr(log: &LogArgs) -> bool {
    log.verbose > 0 || std::env::var_os("LEASECTL_LOG").is_some()
}

/// Sets up stderr and the log for a command that does not own the terminal:
/// sentences on stderr (warnings and errors), or the log with `-v` /
/// `LEASECTL_LOG`; the log also in `--log-file` when given (a file that
/// cannot be opened is said on stderr, and the command goes on).
pub fn init_logging(log: &LogArgs) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let stderr = if log_on_stderr(log) {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_target(false)
            .with_filter(log_filter(log.verbose))
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .event_format(Sentences)
            .with_writer(std::io::stderr)
            .with_filter(EnvFilter::new(format!("warn,{QUIET_SDK}")))
            .boxed()
    };
    let file = log.log_file.as_deref().and_then(|p| {
        let f = open_or_say(p)?;
        Some(
            tracing_subscriber::fmt::layer()
                .with_writer(std::sync::Mutex::new(f))
                .with_ansi(false)
                .with_target(false)
                .with_filter(log_filter(log.verbose)),
        )
    });
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(file)
        .try_init();
}

/// Opens `--log-file` (private), or says on stderr why it cannot.
fn open_or_say(path: &Path) -> Option<std::fs::File> {
    match crate::logfile::open_private(path) {
        Ok(f) => Some(f),
        Err(e) => {
            crate::exit::say(format!(
                "cannot open the log file {}: {}; nothing is logged there",
                crate::text::sanitize(&path.display().to_string()),
                crate::text::sanitize(&e.to_string())
            ));
            None
        }
    }
}

/// The console's log file: `--log-file`, else `{data dir}/leasectl/console.log`
/// (nothing may be written to the console's terminal), at the level `-v`
/// or `LEASECTL_LOG` asks for.
pub fn init_console_logging(log: &LogArgs) {
    let path = log.log_file.clone().or_else(|| {
        directories::ProjectDirs::from("", "", "leasectl").map(|d| d.data_dir().join("console.log"))
    });
    if let Some(p) = path {
        crate::logfile::init_at(&p, log_filter(log.verbose));
    }
}

/// A warning or an error as a sentence for a person: `leasectl: MESSAGE`,
/// then `: ERROR` when the event has an `error` field, then its other fields
/// in parentheses (`(key db1/LEASE)`); no timestamp, no level, one line.
struct Sentences;

impl<S, N> FormatEvent<S, N> for Sentences
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = SentenceFields::default();
        event.record(&mut fields);
        // An error said this way is the reason a command fails.
        if *event.metadata().level() == tracing::Level::ERROR {
            crate::exit::mark_said();
        }
        writeln!(w, "{}", fields.sentence())
    }
}

/// An event's fields, gathered for [`Sentences`].
#[derive(Default)]
struct SentenceFields {
    message: String,
    error: Option<String>,
    others: Vec<String>,
}

impl SentenceFields {
    /// `leasectl: MESSAGE[: ERROR][ (k v, …)]`, on one line.
    fn sentence(&self) -> String {
        let mut s = format!("leasectl: {}", self.message);
        if let Some(e) = &self.error {
            let _ = write!(s, ": {e}");
        }
        if !self.others.is_empty() {
            let _ = write!(s, " ({})", self.others.join(", "));
        }
        s.replace(['\n', '\r'], " ")
    }
}

impl Visit for SentenceFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%x` fields and the message arrive here and print as Display.
        self.put(field, format!("{value:?}"));
    }
}

impl SentenceFields {
    fn put(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = value,
            "error" => self.error = Some(value),
            name => self
                .others
                .push(format!("{} {value}", name.replace('_', " "))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A warning with an error and a key reads as one sentence: no
    /// timestamp, no level, the fields after it.
    #[test]
    fn a_warning_is_a_sentence() {
        let f = SentenceFields {
            message: "renewal failed; retrying".into(),
            error: Some("connection refused by 127.0.0.1".into()),
            others: vec!["key db1/LEASE".into()],
        };
        assert_eq!(
            f.sentence(),
            "leasectl: renewal failed; retrying: connection refused by 127.0.0.1 (key db1/LEASE)"
        );
    }
}
