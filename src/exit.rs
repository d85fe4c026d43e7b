//! Every exit code leasectl uses, in one place (README: the exit-code tables
//! of `--json`, `probe`, `bucket hold`, `takeover` and `writer exec`).
//! `leasectl check` alone follows another convention, the monitoring
//! plugins' (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN): see [`Exit::Check`].
//! A closed stdout ends the printing commands with 141 (128 + SIGPIPE), as a
//! shell pipeline expects: [`Exit::ClosedPipe`].
//!
//! A command returns an [`Exit`]; `main` turns it into the process status.
//! A command that runs a child (`bucket hold`, `writer exec`) passes the
//! child's own status through instead ([`Exit::Child`]).

/// Why leasectl exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done; `--json`: every target gathered and healthy; `probe`: conditional.
    Ok,
    /// 1: something could not be done or gathered (store unreachable, audit
    /// log not writable, a lease's age unknown, a pod scan that failed).
    Failed,
    /// 2: usage (a bad flag, TARGET URL, duration, environment).
    Usage,
    /// 3: `--json`: gathered, and something needs attention; `probe`: the
    /// service ignores (or does not implement) a precondition.
    Attention,
    /// 4: refused, nothing written: `takeover` guards, `bucket hold` could not
    /// acquire.
    Refused,
    /// 5: the lease was lost or its fence closed: the command was stopped
    /// (`bucket hold`, `takeover --then hold`).
    Fenced,
    /// 6: `takeover --force --then release|handover:ID`: a signal ended the
    /// wait for the replaced holder's fence; nothing was released or handed
    /// over early, the lease was left to expire after that fence (audited).
    Interrupted,
    /// 125: `writer exec` refused to start (an invalid CLOUD_WRITER_LEASE,
    /// the lock still held after `--wait`, a lock file that cannot be
    /// opened), as `env(1)` and `timeout(1)` say; also when it could not
    /// tell how its command ended (a wait status neither an exit nor a
    /// signal).
    CannotStart,
    /// 126: the command to run exists but cannot be run (not executable, a
    /// directory, permission denied), as shells say.
    CannotRun,
    /// 127: the command to run was not found.
    NotFound,
    /// 141 (128 + SIGPIPE): stdout's reader went away (`leasectl --json |
    /// head -1`); the command ends quietly.
    ClosedPipe,
    /// `leasectl check`: a monitoring-plugin status.
    Check(CheckStatus),
    /// The child's own exit status (128 + N when killed by signal N).
    Child(i32),
}

/// `leasectl check` follows the monitoring-plugin convention (Nagios, Icinga,
/// Sensu), not the rest of [`Exit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    /// 0 OK.
    Ok,
    /// 1 WARNING (a threshold crossed, or a lease needing attention whose
    /// state is not in `--crit-state`).
    Warning,
    /// 2 CRITICAL (a state in `--crit-state`, `--crit-age`, a pod verdict).
    Critical,
    /// 3 UNKNOWN (something could not be gathered or judged, or bad usage:
    /// for a plugin, a usage error is UNKNOWN, never CRITICAL).
    Unknown,
}

impl Exit {
    /// The process exit status.
    pub const fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Attention => 3,
            Exit::Refused => 4,
            Exit::Fenced => 5,
            Exit::Interrupted => 6,
            Exit::CannotStart => 125,
            Exit::CannotRun => 126,
            Exit::NotFound => 127,
            Exit::ClosedPipe => 141,
            Exit::Check(CheckStatus::Ok) => 0,
            Exit::Check(CheckStatus::Warning) => 1,
            Exit::Check(CheckStatus::Critical) => 2,
            Exit::Check(CheckStatus::Unknown) => 3,
            Exit::Child(c) => c,
        }
    }
}

impl Exit {
    /// The status of a command that signal `sig` killed: 128 + `sig`, as
    /// shells report it.
    pub const fn killed_by(sig: i32) -> Exit {
        Exit::Child(128 + sig)
    }

    /// The status for a command that could not be started (`bucket hold`,
    /// `writer exec`): 127 when it was not found, 126 otherwise.
    pub fn spawn_failed(e: &std::io::Error) -> Exit {
        if e.kind() == std::io::ErrorKind::NotFound {
            Exit::NotFound
        } else {
            Exit::CannotRun
        }
    }
}
