//! Every exit code leasectl uses, in one place, and what each means for
//! every command ([`EXIT_TABLE`]: docs/exit-codes.md and the man page's EXIT
//! STATUS are made from it).
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
    pub(crate) const fn killed_by(sig: i32) -> Exit {
        Exit::Child(128 + sig)
    }

    /// The status for a command that could not be started (`bucket hold`,
    /// `writer exec`): 127 when it was not found, 126 otherwise.
    pub(crate) fn spawn_failed(e: &std::io::Error) -> Exit {
        if e.kind() == std::io::ErrorKind::NotFound {
            Exit::NotFound
        } else {
            Exit::CannotRun
        }
    }
}

/// Whether this process has said on stderr why it ends with a status other
/// than 0 ([`say`], [`mark_said`]). Read once, by `main`, at the end.
static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says `why` on stderr as one line, `leasectl: WHY` (line breaks become
/// spaces), and records that a reason was given: every exit other than 0
/// says why on stderr, here or, when nothing did, in `main` from
/// [`Exit::fallback_reason`] (the one place that guarantees the line).
pub fn say(why: impl std::fmt::Display) {
    let line = why.to_string().replace(['\n', '\r'], " ");
    tell(line);
    mark_said();
}

/// Writes `leasectl: LINE` and a line break on stderr with one `write(2)`,
/// so a line is never torn by another process writing to the same
/// terminal or pipe (a shell's prompt, a second job): `eprintln!` writes
/// each piece of its format separately on the unbuffered stderr. Every
/// line leasectl itself writes on stderr goes through here (the log's
/// lines are written whole by `tracing`).
pub fn tell(line: impl std::fmt::Display) {
    use std::io::Write;
    let whole = format!("leasectl: {line}\n");
    let _ = std::io::stderr().lock().write_all(whole.as_bytes());
}

/// Records that a reason was said on stderr in a form of its own (clap's
/// usage errors, an error report, an error-level log line).
pub(crate) fn mark_said() {
    SAID.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether a reason has been said on stderr ([`say`], [`mark_said`]).
pub fn said() -> bool {
    SAID.load(std::sync::atomic::Ordering::Relaxed)
}

impl Exit {
    /// Whether this exit must say why on stderr: any status other than 0,
    /// except `check`'s (a monitoring plugin says it in its status line on
    /// stdout, as the convention wants) and a closed stdout (141: a pipeline
    /// whose reader left; the command ends quietly, as `yes | head` does).
    pub fn needs_reason(self) -> bool {
        self.code() != 0 && !matches!(self, Exit::Check(_) | Exit::ClosedPipe)
    }

    /// The line `main` says when a command ends with this exit and nothing
    /// said why: what the code means for `column` of [`EXIT_TABLE`] (`None`:
    /// a command without a column there, e.g. the console), else in general.
    pub fn fallback_reason(self, column: Option<usize>) -> String {
        let code = self.code();
        if let Exit::Child(c) = self {
            return if c > 128 && c < 128 + 65 {
                format!("the command was killed by signal {} (exit {c})", c - 128)
            } else {
                format!("the command exited with status {c}")
            };
        }
        let cell = column.and_then(|col| {
            EXIT_TABLE
                .iter()
                .find(|(c, _)| *c == code)
                .and_then(|(_, cells)| cells.get(col))
                .filter(|cell| **cell != "—")
        });
        let meaning = match (cell, self) {
            (Some(cell), _) => cell.replace('`', ""),
            (None, Exit::Failed) => "something could not be done or read completely".into(),
            (None, Exit::Usage) => "usage error".into(),
            (None, Exit::Attention) => "something needs attention".into(),
            (None, Exit::Refused) => "refused; nothing was written".into(),
            (None, Exit::Fenced) => "the lease was lost or its fence closed".into(),
            (None, Exit::Interrupted) => "a signal ended the wait".into(),
            (None, Exit::CannotStart) => "refused to start".into(),
            (None, Exit::CannotRun) => "the command cannot be run".into(),
            (None, Exit::NotFound) => "the command was not found".into(),
            (None, _) => "see docs/exit-codes.md".into(),
        };
        format!("exit {code}: {meaning}")
    }
}

/// What the exit codes' table does not say in a cell (Markdown): read before
/// the table.
pub const EXIT_INTRO: &str = "A dash: the command never exits with that code. `check` follows the \
Nagios plugin convention; `bucket hold` and `writer exec` exit with their command's own status \
when it ran (128 + N when signal N killed it), and with 152 or 153 (128 + SIGXCPU or SIGXFSZ) \
when leasectl's own CPU-time or file-size limit ended the hold (the command stopped, the lease \
or lock released). Every exit other than 0 says why on stderr, in a line that starts \
`leasectl: ` (a script that keeps only stdout still has the reason), except `check`, whose status \
line on stdout says it, and 141, which ends quietly.";

/// The commands the table has no column for (Markdown): read after the table.
pub const EXIT_OTHERS: &str = "The console (`leasectl [TARGET]…` without `--json`) exits 0 when \
quit, 1 when it cannot start (no terminal, a target that cannot be opened), 2 on usage. `serve` \
runs until stopped (0), 1 when it cannot listen. `audit` exits 0 (unreadable lines are named on \
stderr), 1 when the log cannot be read. `config path` exits 0; `config view` exits 2 when the \
file is missing or invalid.";

/// The columns of [`EXIT_TABLE`]: the commands (or groups of them) whose codes it gives.
pub const EXIT_COLUMNS: [&str; 8] = [
    "`--json`, `-o`, `--watch`, `pod-scan`",
    "`check`",
    "`probe`",
    "`timeline`",
    "`bucket hold`",
    "`bucket fence-check`",
    "`takeover`",
    "`writer exec`",
];

/// Every command's exit codes, one row per code: what the code means for
/// each column of [`EXIT_COLUMNS`] (Markdown; `—`: the command never exits
/// with it). The one source of docs/exit-codes.md's table (a test compares
/// them cell by cell) and of the man page's EXIT STATUS section; a test checks
/// that each code is in its command's `--help`.
pub const EXIT_TABLE: &[(i32, [&str; 8])] = &[
    (
        0,
        [
            "every target gathered, nothing needs attention",
            "OK",
            "the service honours the preconditions",
            "nothing wrong found",
            "the command's own 0",
            "the fence is open: a write may start",
            "taken (and released, held until Ctrl-C, or handed over)",
            "the command's own 0",
        ],
    ),
    (
        1,
        [
            "a target, prefix, the pod scan or a requested audit log could not be read completely",
            "WARNING: an age over `--warn-age`, a state needing attention that `--crit-state` does not name, a record with a problem noted, every prefix absent while LEASE keys lie deeper than `--depth`",
            "the probe failed (store error)",
            "a source could not be read completely (a version inferred by `--bisect` rather than read among them: the history is not known), or no source holds the history",
            "other failures (store unreachable at start)",
            "the descriptor could not be polled",
            "failed: audit log not writable (nothing sent), store error",
            "—",
        ],
    ),
    (
        2,
        [
            "usage",
            "CRITICAL: a state in `--crit-state`, an age over `--crit-age`, fewer than `--min-leases`, a pod verdict",
            "usage",
            "usage",
            "usage (bad flag, `--ttl` outside 3 s – 1 h, bad URL)",
            "usage: not run under `bucket hold`",
            "usage (empty `--reason`, no terminal and no `--yes`)",
            "usage (no command, bad flag)",
        ],
    ),
    (
        3,
        [
            "gathered, and something needs attention: stale, suspect, malformed, a problem noted, a pod verdict, every prefix absent while LEASE keys lie deeper than `--depth` (`--json`, `-o table`)",
            "UNKNOWN: something not gathered or judged, no answer within `--timeout`, or bad usage",
            "the service deviates (a precondition ignored, an unusable ETag), or `--race` found it not atomic",
            "an overlap (two holders could both write) or a generation that went back",
            "—",
            "—",
            "—",
            "—",
        ],
    ),
    (
        4,
        [
            "—",
            "—",
            "—",
            "—",
            "the lease was not acquired (held, held under the same `--instance-id`, under watch, preconditions ignored or not atomic, this host's clock too far off, a `--ttl` too short for the store's confirmation, its record not confirmed)",
            "—",
            "refused, nothing written (no LEASE, fresh without `--force`, changed since seen, under watch, preconditions ignored, not confirmed)",
            "—",
        ],
    ),
    (
        5,
        [
            "—",
            "—",
            "—",
            "—",
            "the lease was lost or its fence closed: the command was stopped",
            "the fence has closed: start no more writes",
            "`--then hold`: the held lease was lost or its fence closed",
            "—",
        ],
    ),
    (
        6,
        [
            "—",
            "—",
            "—",
            "—",
            "—",
            "—",
            "`--force` with `--then release` or `handover:ID`: a signal ended the wait for the old holder's fence (the lease is left to expire after it)",
            "—",
        ],
    ),
    (
        125,
        [
            "—",
            "—",
            "—",
            "—",
            "`--containment require` and the kernel refused a PID namespace, or the containment could not start (nothing acquired)",
            "—",
            "—",
            "refused to start: invalid `CLOUD_WRITER_LEASE`, lock still held after `--wait`, lock file refused or cannot be opened",
        ],
    ),
    (
        126,
        [
            "—",
            "—",
            "—",
            "—",
            "the command cannot be run (not executable)",
            "—",
            "—",
            "the command cannot be run",
        ],
    ),
    (
        127,
        [
            "—",
            "—",
            "—",
            "—",
            "the command was not found",
            "—",
            "—",
            "the command was not found",
        ],
    ),
    (
        141,
        [
            "stdout closed (a pipe whose reader went away)",
            "—",
            "—",
            "—",
            "—",
            "—",
            "—",
            "—",
        ],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The line `main` says when nothing else did: the command's cell of the
    /// exit codes' table, else what the code means in general.
    #[test]
    fn the_fallback_reason_says_what_the_code_means() {
        assert_eq!(
            Exit::Refused.fallback_reason(Some(6)),
            "exit 4: refused, nothing written (no LEASE, fresh without --force, changed since seen, under watch, preconditions ignored, not confirmed)"
        );
        assert_eq!(
            Exit::Failed.fallback_reason(None),
            "exit 1: something could not be done or read completely"
        );
        assert_eq!(
            Exit::Child(137).fallback_reason(Some(4)),
            "the command was killed by signal 9 (exit 137)"
        );
        assert!(!Exit::Check(CheckStatus::Critical).needs_reason());
        assert!(!Exit::ClosedPipe.needs_reason());
        assert!(!Exit::Ok.needs_reason());
        assert!(Exit::Child(1).needs_reason());
    }
}
