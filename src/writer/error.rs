//! Errors of the writer-lease module.

use std::path::PathBuf;
use std::time::Duration;

use super::{sanitize, ENABLE};

/// A pid and command line of a process found holding a lock file, for error
/// messages. The command is already escaped for terminal display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderDesc {
    /// Process id as seen in the scanned `/proc`.
    pub pid: u32,
    /// Escaped command line (or `[comm]` when the command line is empty).
    pub command: String,
}

/// Everything that can go wrong taking, holding or inspecting a writer lease.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// `CLOUD_WRITER_LEASE` has a value that is neither true nor false. The
    /// value is carried raw and escaped when displayed.
    #[error("{ENABLE} has the invalid value \"{}\"; use one of 1 t T TRUE true True (on) or 0 f F FALSE false False (off), or leave it unset", crate::text::sanitize_cut(.0, 64))]
    InvalidEnable(String),

    /// The lock stayed held for the whole wait: fail closed. `holders` lists
    /// the processes found holding it (empty when none could be found, e.g.
    /// the holder lives in another pid namespace).
    #[error("{} is still held after waiting {}: {}; refusing to start (fail closed)", .path.display(), humantime::format_duration(*.waited), describe_holders(.holders))]
    Timeout {
        /// The lock file.
        path: PathBuf,
        /// How long we polled.
        waited: Duration,
        /// Processes seen holding it.
        holders: Vec<HolderDesc>,
    },

    /// A process holds a flock on this data directory's `.writer.lock` after
    /// that file was removed (unlinked or replaced): it still believes it is
    /// the writer, and a lock on the new file would make a second one.
    #[error("{} was removed while {} held a flock on it (the lock is on the deleted file); still so after waiting {}: refusing to start (fail closed). Stop that process, then start again", .path.display(), describe_orphans(.holders), humantime::format_duration(*.waited))]
    OrphanedHolder {
        /// The lock file path.
        path: PathBuf,
        /// How long we polled.
        waited: Duration,
        /// The processes holding a flock on the deleted file.
        holders: Vec<HolderDesc>,
    },

    /// The lock file is not a regular file (a symbolic link, a directory, a
    /// FIFO, a device): it is not opened, let alone created through a link.
    #[error("{} is {what}, not a regular file: the writer lock is not taken through it (a link could make this process create or lock a file elsewhere). Remove it (rm {}) and start again", .path.display(), .path.display())]
    NotRegular {
        /// The lock file path.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },

    /// The lock file belongs to another user (neither this process's user nor root).
    #[error("{} is owned by uid {uid}, not by this process's user ({euid}) or root: refusing to lock a file another user controls. Fix its owner (chown) or remove it, then start again", .path.display())]
    ForeignOwner {
        /// The lock file path.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// This process's effective uid.
        euid: u32,
    },

    /// Creating or opening the lock file failed.
    #[error("cannot open lock file {}: {source}", .path.display())]
    Open {
        /// The lock file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },

    /// `flock(2)` failed for a reason other than "held by someone else".
    #[error("flock on {} failed: {source}", .path.display())]
    Flock {
        /// The lock file.
        path: PathBuf,
        /// The errno.
        source: nix::Error,
    },

    /// The command given to `writer exec` could not be started.
    #[error("cannot run {}: {source}", sanitize(.command))]
    Spawn {
        /// The program name, raw.
        command: String,
        /// The underlying error.
        source: std::io::Error,
    },

    /// `writer exec` was given no command.
    #[error("no command given to run")]
    NoCommand,

    /// A system call needed to supervise the child failed.
    #[error("{what} failed: {source}")]
    Sys {
        /// Which call.
        what: &'static str,
        /// The errno.
        source: nix::Error,
    },

    /// Reading `/proc` failed as a whole (a single unreadable process is not
    /// an error: it is shown with duty `unknown`).
    #[error("cannot read {}: {message}", .path.display())]
    Proc {
        /// The proc root or file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl WriterError {
    /// Exit code `writer exec` uses for its own failures: 127 when the command
    /// was not found, 126 when it could not be run, 125 for everything else
    /// (the convention of `env(1)` and `timeout(1)`).
    pub fn exit_code(&self) -> crate::exit::Exit {
        use crate::exit::Exit;
        match self {
            WriterError::Spawn { source, .. } => Exit::spawn_failed(source),
            _ => Exit::CannotStart,
        }
    }
}

fn describe_orphans(holders: &[HolderDesc]) -> String {
    let list: Vec<String> = holders
        .iter()
        .map(|h| format!("pid {} ({})", h.pid, h.command))
        .collect();
    list.join(", ")
}

fn describe_holders(holders: &[HolderDesc]) -> String {
    if holders.is_empty() {
        return "the holder could not be identified (it may be in another pid namespace or not visible to us)".to_string();
    }
    let list: Vec<String> = holders
        .iter()
        .map(|h| format!("pid {} ({})", h.pid, h.command))
        .collect();
    format!("held by {}", list.join(", "))
}
