//! Every exit code leasectl uses, in one place (README: the exit-code tables
//! of `--json`, `probe`, `bucket hold`, `takeover` and `writer exec`).
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
            Exit::NotFound => 127,
            Exit::Child(c) => c,
        }
    }
}

impl From<Exit> for i32 {
    fn from(e: Exit) -> i32 {
        e.code()
    }
}
