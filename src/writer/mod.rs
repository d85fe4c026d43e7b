//! Pod writer lease: who in a pod must take `flock(2)` on `{data_dir}/.writer.lock`.
//!
//! The lease claims a volume for one pod, but the primitive is per process, so
//! exactly one process per pod may reach for the lock: the pod's root. This
//! module decides a process's [`Duty`] from its own environment and its parent
//! pid ([`assess`]), takes the lock ([`flock::acquire`]), wraps a command
//! as a pod entrypoint that holds it ([`exec::writer_exec`]) and inspects a running pod through `/proc`
//! ([`scan::scan`], with verdicts from [`scan::judge`]).
//!
//! Rules come from docs/writer-leases.md (ARCHITECTURE.md maps them), and the
//! `writerlease` seed specification (`writerlease-package.txt`).

pub(crate) mod error;
pub(crate) mod exec;
pub(crate) mod flock;
pub mod scan;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use error::WriterError;

/// Name of the operator switch variable. Unset or empty means the lease is off.
pub const ENABLE: &str = "CLOUD_WRITER_LEASE";

/// Name of the stamp variable: the pid of the process that holds the lock for
/// its children. A stamp counts only when it names the reader's own parent.
pub const HELD: &str = "CLOUD_WRITER_LEASE_HELD";

/// File name of the flock anchor inside a data directory. Always zero length.
pub(crate) const LOCK_NAME: &str = ".writer.lock";

/// What one process must do about the pod's writer lease.
///
/// Serialized as `off`, `take`, `inherit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Duty {
    /// The deployment asked for no lease ([`ENABLE`] unset, empty or false).
    Off,
    /// This process is the pod's root: take the lock before spawning anything,
    /// release it after the last child is gone.
    Take,
    /// The parent holds the lock for the pod (the stamp names the parent): do
    /// not touch it.
    Inherit,
}

impl Duty {
    /// The lowercase name used in logs and JSON (`off`, `take`, `inherit`).
    pub fn as_str(self) -> &'static str {
        match self {
            Duty::Off => "off",
            Duty::Take => "take",
            Duty::Inherit => "inherit",
        }
    }
}

impl fmt::Display for Duty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The parsed value of [`ENABLE`].
///
/// Unset or empty: `Off`. `1 t T TRUE true True`: `On`. `0 f F FALSE false
/// False`: `Off`. Anything else: `Invalid` carrying the raw value
/// (docs/writer-leases.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enable {
    /// No lease.
    Off,
    /// The lease is required.
    On,
    /// A value that is neither true nor false; `writer exec` refuses to start.
    Invalid(String),
}

impl Enable {
    /// Parses the variable's value; `None` means unset.
    pub fn parse(value: Option<&str>) -> Enable {
        match value {
            None | Some("") => Enable::Off,
            Some("1" | "t" | "T" | "TRUE" | "true" | "True") => Enable::On,
            Some("0" | "f" | "F" | "FALSE" | "false" | "False") => Enable::Off,
            Some(other) => Enable::Invalid(other.to_string()),
        }
    }
}

/// Decides this process's duty from its environment and its parent pid.
///
/// `getenv` looks up one variable (only [`ENABLE`] and [`HELD`] are asked
/// for); `parent_pid` is the caller's real parent pid (`getppid()`, or the
/// `ppid` field of `/proc/PID/stat` when judging another process).
///
/// Returns the duty and one sentence explaining it, meant for the boot log:
/// when a stamp was present but did not count, the sentence names it and says
/// why (not a pid, pid 0, or a pid other than the parent).
///
/// # Errors
/// [`WriterError::InvalidEnable`] when [`ENABLE`] is neither true nor false.
pub fn assess(
    getenv: impl Fn(&str) -> Option<String>,
    parent_pid: u32,
) -> Result<(Duty, String), WriterError> {
    let enable_raw = getenv(ENABLE);
    let stamp = getenv(HELD);
    match Enable::parse(enable_raw.as_deref()) {
        Enable::Invalid(value) => Err(WriterError::InvalidEnable(value)),
        Enable::Off => {
            let why = match enable_raw.as_deref() {
                None => format!("{ENABLE} is unset"),
                Some("") => format!("{ENABLE} is empty"),
                Some(v) => format!("{ENABLE}={}", sanitize_cut(v, 64)),
            };
            let stamp_note = match stamp.as_deref() {
                Some(s) if !s.is_empty() => {
                    format!(" (the stamp {HELD}={} is irrelevant)", sanitize_cut(s, 64))
                }
                _ => String::new(),
            };
            Ok((
                Duty::Off,
                format!("writer lease off: {why}, so this deployment asked for no lease{stamp_note}."),
            ))
        }
        Enable::On => Ok(match stamp_verdict(stamp.as_deref(), parent_pid) {
            StampVerdict::Absent => (
                Duty::Take,
                format!(
                    "writer lease take: {ENABLE} is on and no {HELD} stamp is set, so this process is the pod root."
                ),
            ),
            StampVerdict::Parent => (
                Duty::Inherit,
                format!(
                    "writer lease inherit: {HELD}={parent_pid} names our parent, which holds the lock for the pod."
                ),
            ),
            StampVerdict::Ignored(why) => (
                Duty::Take,
                format!("writer lease take: {ENABLE} is on and {why}, so this process is the pod root."),
            ),
        }),
    }
}

/// How a [`HELD`] stamp relates to a parent pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StampVerdict {
    /// No stamp (unset or empty).
    Absent,
    /// The stamp names the parent: it counts.
    Parent,
    /// The stamp was ignored; the text says which stamp and why.
    Ignored(String),
}

/// Checks a stamp against a parent pid (see [`assess`]).
pub(crate) fn stamp_verdict(stamp: Option<&str>, parent_pid: u32) -> StampVerdict {
    let Some(raw) = stamp.filter(|s| !s.is_empty()) else {
        return StampVerdict::Absent;
    };
    match stamp_pid(raw) {
        None => StampVerdict::Ignored(format!(
            "the stamp {HELD}=\"{}\" was ignored because it is not a pid",
            sanitize_cut(raw, 64)
        )),
        Some(0) => StampVerdict::Ignored(format!(
            "the stamp {HELD}=0 was ignored because pid 0 never holds the lock"
        )),
        Some(pid) if pid == parent_pid => StampVerdict::Parent,
        Some(pid) => StampVerdict::Ignored(format!(
            "the stamp {HELD}={pid} was ignored because it names pid {pid}, not our parent {parent_pid}"
        )),
    }
}

/// Parses a stamp as a pid: ASCII digits only, no sign, no blanks.
pub(crate) fn stamp_pid(raw: &str) -> Option<u32> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok()
}

pub use crate::text::sanitize;
use crate::text::sanitize_cut;

/// What a file type is when it is not a regular file.
pub(crate) fn not_regular(t: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        None
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("a device or other special file")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_pid_is_strict() {
        assert_eq!(stamp_pid("42"), Some(42));
        assert_eq!(stamp_pid(" 42"), None);
        assert_eq!(stamp_pid("+42"), None);
        assert_eq!(stamp_pid("-1"), None);
        assert_eq!(stamp_pid("99999999999"), None);
    }
}
