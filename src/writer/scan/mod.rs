//! The pod scanner: who in a pod holds, waits for or ignores the writer lease.
//!
//! [`scan`] reads a `/proc` tree (the root is injectable, see
//! [`ScanOptions::proc_root`]) and returns a [`PodSnapshot`], the `pod`
//! section of the `--json` snapshot (ARCHITECTURE.md; README.md, "`--json` snapshot").
//! Gathering ([`observe()`]) is separate from judging ([`judge()`]), which is a
//! pure function of an [`Observed`] value so the verdict rules can be
//! table-tested.
//!
//! Rules implemented (ARCHITECTURE.md; README.md, "Pod writer leases"; the seed
//! `writerlease-package.txt`):
//! - each process's duty comes from its *initial* environment
//!   (`/proc/PID/environ`) and its parent pid; an unreadable environment gives
//!   duty `unknown` with the reason;
//! - only `CLOUD_WRITER_LEASE` and `CLOUD_WRITER_LEASE_HELD` are extracted from
//!   an environment: no other value is kept, logged or printed;
//! - lock holders are found by file, not by pid: a process holds the lock when
//!   the `fdinfo` of one of its descriptors on the lock file shows a `lock:`
//!   line (true for every process sharing the locked open file description
//!   after `fork`). `/proc/locks` (FLOCK entries, `maj:min:inode`) tells
//!   whether the file is locked at all, and by which pid it was taken, which may
//!   be dead or 0;
//! - participants are the processes that have the lock file open; only they
//!   count for the racing, holder and stamp verdicts.
//!
//! Waiting time: Linux does not record when a descriptor was opened, so
//! `waiting_s` is the age of the waiting process (seconds since it started),
//! an upper bound on how long it has waited.
//!
//! Unknown is not healthy. A viewer that may not read another user's
//! `/proc/PID/environ` or `/proc/PID/fd` learns nothing about that process's
//! duty or descriptors: the process gets duty `unknown` and lock `unknown`,
//! its pid is listed in [`PodSnapshot::uninspected`], a note says how many
//! processes could not be inspected, and no verdict is built on the missing
//! facts (the snapshot is *incomplete*, exit code 1). Kernel threads are never
//! counted: they hold no descriptors and have no environment.
//!
//! PID namespaces. Since Linux 4.12 `/proc/locks` hides every lock whose
//! taker is not visible in the reader's PID namespace (and every lock whose
//! taker has exited), and a holder in another namespace has no `/proc/PID`
//! here. So when neither `/proc/locks` nor any `fdinfo` shows a lock, the
//! scanner asks the kernel directly with [`probe_locked`]: a non-blocking
//! *shared* flock on a new open of the file, released at once. See that
//! function for why this never disturbs a holder or a waiter, and why
//! `fcntl(F_OFD_GETLK)` cannot answer the question.
//!
//! Layout: this module holds the options and the entry points ([`scan`],
//! [`scan_all`], [`merge`]); `model` the `pod` section's types; `proc` the
//! reading of the `/proc` tree; `lock` the lock files and the kernel probe;
//! `observe` the pod selection ([`observe()`], [`Observed`]); `judge` one
//! function per verdict kind ([`judge()`] composes them); `notes` what the
//! scan could not know.

mod judge;
pub mod kube;
mod lock;
mod model;
pub(crate) mod node;
mod notes;
pub mod ns;
mod observe;
mod probe;
mod proc;
mod target;

use std::path::PathBuf;

pub use judge::judge;
pub use kube::KubePod;
pub(crate) use lock::{lock_holders, orphaned_holders};
pub(crate) use model::LockInfo;
pub(crate) use model::PodState;
pub use model::{
    DutyView, LockFileState, LockState, PodScope, PodSnapshot, ProcessInfo, Verdict, VerdictKind,
};
pub use model::{EnvRead, ObservedLock};
pub use model::{NodeSummary, NodeView};
pub use observe::{observe, Observed, ObservedProcess};
pub use probe::probe_locked;

use super::{sanitize, WriterError};

/// What to scan.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// The proc filesystem to read. Production: `/proc`.
    pub proc_root: PathBuf,
    /// Data directories whose `.writer.lock` to inspect. Empty: auto-detect
    /// every open descriptor whose path ends in `/.writer.lock`.
    pub data_dirs: Vec<PathBuf>,
    /// Restrict the pod to this process and its descendants. `None`: the pod
    /// is every process that has a lease variable in its environment or a lock
    /// file open, plus their ancestors.
    pub pod_root: Option<u32>,
    /// The node view: every pod of the node, grouped by the pod its
    /// processes' cgroups name ([`node::scan_node`]); `data_dirs` and
    /// `pod_root` are then ignored.
    pub node: bool,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            proc_root: PathBuf::from("/proc"),
            data_dirs: Vec::new(),
            pod_root: None,
            node: false,
        }
    }
}

/// Scans `/proc` and judges the pod. See the module documentation for the rules.
///
/// # Errors
/// [`WriterError::Proc`] when the proc root cannot be listed, or when
/// `pod_root` names a process that does not exist. Individual processes that
/// vanish or cannot be read never fail the scan.
pub fn scan(opts: &ScanOptions) -> Result<PodSnapshot, WriterError> {
    let read = || {
        if opts.node {
            node::scan_node(opts)
        } else {
            Ok(judge(&observe(opts)?))
        }
    };
    let mut snap = read()?;
    // A scan reads /proc/locks first and asks the kernel last: a lock taken
    // in between (a pod root starting) reads as held by nobody it can see.
    // Read again; a holder really out of sight stays so.
    for _ in 0..REREADS {
        if !snap
            .locks
            .iter()
            .any(|l| l.state == LockFileState::HeldOutsideNamespace)
        {
            break;
        }
        snap = read()?;
    }
    Ok(snap)
}

/// How many times a scan is read again while a lock file reads as held by
/// no process it saw ([`scan`]).
const REREADS: usize = 2;

/// Scans several pods (each with its own options) and merges the results
/// into one `pod` section: processes by pid, locks by path, verdicts by kind
/// then pids, as one scan orders them.
///
/// Errors: the first scan's error.
pub(crate) fn scan_all(scans: &[ScanOptions]) -> Result<PodSnapshot, WriterError> {
    let mut parts = Vec::new();
    for s in scans {
        parts.push(scan(s)?);
    }
    Ok(merge(parts))
}

/// Merges the snapshots of separate pods into one `pod` section.
pub fn merge(parts: Vec<PodSnapshot>) -> PodSnapshot {
    let mut out = PodSnapshot::default();
    for p in parts {
        out.processes.extend(p.processes);
        out.locks.extend(p.locks);
        out.verdicts.extend(p.verdicts);
        out.scope.extend(p.scope);
        out.uninspected.extend(p.uninspected);
        out.notes.extend(p.notes);
        out.viewer = out.viewer.or(p.viewer);
        out.kubernetes = out.kubernetes.or(p.kubernetes);
        out.node = out.node.or(p.node);
    }
    out.processes.sort_by_key(|p| p.pid);
    out.processes.dedup_by_key(|p| p.pid);
    out.locks.sort_by(|a, b| a.path.cmp(&b.path));
    out.locks.dedup_by(|a, b| a.path == b.path);
    out.verdicts
        .sort_by(|a, b| (a.kind, &a.pids).cmp(&(b.kind, &b.pids)));
    out.uninspected.sort_unstable();
    out.uninspected.dedup();
    out
}

/// An I/O error as a short lowercase phrase ("permission denied").
fn io_why(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::NotFound => "not found".to_string(),
        _ => sanitize(&e.to_string()),
    }
}
