//! The signals a supervisor passes on to its command.

use nix::sys::signal::Signal;

/// The signals forwarded to a supervised command (`writer exec`, `bucket
/// hold`), and that end `leasectl takeover`'s waits.
pub const FORWARDED: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// `SIGTERM`, `SIGINT`, … for a signal number.
pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// The [`FORWARDED`] signals, received on the tokio runtime (installing the
/// handlers stops them from ending this process).
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers. Must run inside a tokio runtime.
    ///
    /// # Panics
    /// When a handler cannot be installed (only outside a runtime).
    pub fn new() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        let mk = |k| signal(k).expect("installing a signal handler");
        Self {
            term: mk(SignalKind::terminate()),
            int: mk(SignalKind::interrupt()),
            hup: mk(SignalKind::hangup()),
            quit: mk(SignalKind::quit()),
        }
    }

    /// The next signal received, as its number.
    pub async fn recv(&mut self) -> Option<i32> {
        tokio::select! {
            _ = self.term.recv() => Some(libc::SIGTERM),
            _ = self.int.recv() => Some(libc::SIGINT),
            _ = self.hup.recv() => Some(libc::SIGHUP),
            _ = self.quit.recv() => Some(libc::SIGQUIT),
        }
    }
}

impl Default for Signals {
    fn default() -> Self {
        Self::new()
    }
}
