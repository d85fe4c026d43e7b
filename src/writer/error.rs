//! Errors of the writer-lease module.

use std::path::PathBuf;
use std::time::Duration;

use super::{sanitize, ENABLE};
use crate::exit::Exit;
use crate::text::sanitize_cut;

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
    #[error("{ENABLE} has the invalid value \"{}\"; use one of 1 t T TRUE true True (on) or 0 f F FALSE false False (off), or leave it unset", sanitize_cut(.0, 64))]
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

    /// A process holds a flock on a deleted `.writer.lock` of the same data
    /// directory (the file was removed or replaced while held), so a lock on
    /// the file the path names now would not exclude it: fail closed once
    /// `waited` has passed. `holders` names them (pid and escaped command).
    #[error("{} was removed (deleted or replaced) while held: {} still holds a flock on the deleted file and may still be writing, so a lock on the file the path names now would not exclude it; waited {} for it to exit; refusing to start (fail closed). Stop that process (or make sure it no longer writes to this directory), then start again; never delete a held lock file", sanitize(&.path.to_string_lossy()), describe_list(.holders), humantime::format_duration(*.waited))]
    OrphanedLock {
        /// The lock file path.
        path: PathBuf,
        /// How long we polled.
        waited: Duration,
        /// The processes holding a flock on a deleted lock file of the directory.
        holders: Vec<HolderDesc>,
    },

    /// The lock file is not one `writer exec` may take: not a regular file
    /// (a symbolic link, a FIFO, a device, a directory), owned by another
    /// user, or with more than one hard link. `why` is the sentence saying
    /// which and what to do. Nothing was opened through it and nothing was
    /// created.
    #[error("refusing the lock file {}: {why}", sanitize(&.path.to_string_lossy()))]
    LockFileRefused {
        /// The lock file path.
        path: PathBuf,
        /// What it is and what to do (already escaped).
        why: String,
    },

    /// The lock file was removed or replaced every time it was locked, too
    /// many times in a row: something keeps replacing it.
    #[error("{} was removed or replaced {tries} times in a row just as it was locked: something keeps replacing the lock file; refusing to start (fail closed). Find what deletes or renames it", sanitize(&.path.to_string_lossy()))]
    LockFileUnstable {
        /// The lock file path.
        path: PathBuf,
        /// How many times in a row.
        tries: u32,
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
    pub fn exit_code(&self) -> Exit {
        use crate::exit::Exit;
        match self {
            WriterError::Spawn { source, .. } => Exit::spawn_failed(source),
            _ => Exit::CannotStart,
        }
    }
}

fn describe_holders(holders: &[HolderDesc]) -> String {
    if holders.is_empty() {
        return "the holder could not be identified (it may be in another pid namespace or not visible to us)".to_string();
    }
    format!("held by {}", describe_list(holders))
}

/// `pid N (command), …`; the commands are escaped already.
fn describe_list(holders: &[HolderDesc]) -> String {
    let list: Vec<String> = holders
        .iter()
        .map(|h| format!("pid {} ({})", h.pid, h.command))
        .collect();
    list.join(", ")
}
