//! Every exit code leasectl uses, in one place (README: the exit-code tables
//! of `--json`, `probe`, `bucket hold`, `takeover` and `writer exec`).
//! `leasectl check` alone follows another convention, the monitoring
//! plugins' (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN): see [`CHECK_OK`] and
//! the constants after it. A closed stdout ends the printing commands with
//! 141 (128 + SIGPIPE), as a shell pipeline expects.
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
    /// 126: the command to run exists but cannot be run (not executable, a
    /// directory, permission denied), as shells say.
    CannotRun,
    /// 127: the command to run was not found.
    NotFound,
    /// The child's own exit status (128 + N when killed by signal N).
    Child(i32),
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
            Exit::CannotRun => 126,
            Exit::NotFound => 127,
            Exit::Child(c) => c,
        }
    }
}

impl Exit {
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

impl From<Exit> for i32 {
    fn from(e: Exit) -> i32 {
        e.code()
    }
}

/// `leasectl check` follows the monitoring-plugin convention (Nagios, Icinga,
/// Sensu), not [`Exit`]: 0 OK.
pub const CHECK_OK: i32 = 0;
/// `check`: 1 WARNING (a threshold crossed, or a lease needing attention
/// whose state is not in `--crit-state`).
pub const CHECK_WARNING: i32 = 1;
/// `check`: 2 CRITICAL (a state in `--crit-state`, `--crit-age`, a pod verdict).
pub const CHECK_CRITICAL: i32 = 2;
/// `check`: 3 UNKNOWN (something could not be gathered or judged, or bad
/// usage: for a plugin, a usage error is UNKNOWN, never CRITICAL).
pub const CHECK_UNKNOWN: i32 = 3;
