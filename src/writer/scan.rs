//! The pod scanner: who in a pod holds, waits for or ignores the writer lease.
//!
//! [`scan`] reads a `/proc` tree (the root is injectable, see
//! [`ScanOptions::proc_root`]) and returns a [`PodSnapshot`], the `pod`
//! section of the `--json` snapshot (ARCHITECTURE.md; DESIGN.md, "`--json` snapshot").
//! Gathering ([`observe`]) is separate from judging ([`judge`]), which is a
//! pure function of an [`Observed`] value so the verdict rules can be
//! table-tested.
//!
//! Rules implemented (ARCHITECTURE.md; DESIGN.md, "Writer lease semantics"):
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

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use procfs::{FromBufRead, FromRead};
use serde::{Deserialize, Serialize};

use super::error::HolderDesc;
use super::{assess, sanitize, stamp_pid, stamp_verdict, Duty, Enable, StampVerdict, WriterError};
use super::{ENABLE, HELD, LOCK_NAME};

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
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            proc_root: PathBuf::from("/proc"),
            data_dirs: Vec::new(),
            pod_root: None,
        }
    }
}

/// The `pod` section of the `--json` snapshot. All lists are sorted
/// (processes by pid, locks by path, verdicts by kind then pids).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PodSnapshot {
    /// The processes of the pod.
    pub processes: Vec<ProcessInfo>,
    /// The lock files inspected.
    pub locks: Vec<LockInfo>,
    /// What needs attention. Empty means healthy only when the snapshot is
    /// also complete (see [`PodSnapshot::incomplete`]).
    pub verdicts: Vec<Verdict>,
    /// What the scan considered: the selection rule, the processes read and
    /// the lock files asked for. One entry per scan (several when merged).
    #[serde(default)]
    pub scope: Vec<PodScope>,
    /// Processes that could not be inspected (environment or descriptors
    /// unreadable, usually another user's processes), sorted. Their duty or
    /// lock is `unknown`.
    #[serde(default)]
    pub uninspected: Vec<u32>,
    /// Sentences about what this scan could not know (uninspected processes,
    /// lock files whose state is unknown). Non-empty exactly when
    /// [`PodSnapshot::incomplete`] is true.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl PodSnapshot {
    /// Whether some fact could not be gathered: a process could not be
    /// inspected or a lock file's state is unknown. An incomplete pod is never
    /// reported healthy.
    pub fn incomplete(&self) -> bool {
        !self.uninspected.is_empty()
            || !self.notes.is_empty()
            || self.locks.iter().any(|l| l.state == LockFileState::Unknown)
    }

    /// Whether the pod was asked for by its options: a scan of a `--pod-root`
    /// tree, or of given `--data-dir`s.
    pub fn requested(&self) -> bool {
        self.scope
            .iter()
            .any(|s| s.mode != "auto" || s.pod_root.is_some() || !s.data_dirs.is_empty())
    }

    /// Whether the scan found a pod among the processes it could read: a
    /// process in it (one that carries a lease variable, has a lock file open
    /// or is named by `/proc/locks`, or their ancestors), a lock file, or a
    /// verdict.
    pub fn found(&self) -> bool {
        !self.processes.is_empty() || !self.locks.is_empty() || !self.verdicts.is_empty()
    }

    /// The exit code of a pod-only report: 1 when incomplete (could not
    /// gather), else 3 when a verdict needs attention, else 0.
    pub fn exit_code(&self) -> i32 {
        if self.incomplete() {
            1
        } else if !self.verdicts.is_empty() {
            3
        } else {
            0
        }
    }
}

/// What one scan looked at and why (issue 13: the output states its scope).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PodScope {
    /// `pod_root` (a process and its descendants) or `auto` (processes with a
    /// lease variable or a lock file open, plus their ancestors).
    pub mode: String,
    /// The `--pod-root` pid, when given.
    pub pod_root: Option<u32>,
    /// How many processes the proc root listed (kernel threads excluded).
    pub processes_seen: usize,
    /// How many of them were selected as the pod.
    pub processes_selected: usize,
    /// The data directories asked for (escaped); empty when lock files were
    /// auto-detected from open descriptors.
    pub data_dirs: Vec<String>,
    /// One sentence: the rule that selected the processes and lock files.
    pub description: String,
}

/// One process of the pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Process id, as seen in the scanned `/proc`.
    pub pid: u32,
    /// Parent process id (0 for a namespace's init).
    pub ppid: u32,
    /// Command line, arguments joined by spaces, escaped for terminal display;
    /// `[comm]` when the command line is empty (kernel thread, zombie).
    pub command: String,
    /// The duty this process computed at start, from its initial environment.
    pub duty: DutyView,
    /// One sentence explaining `duty`.
    pub duty_reason: String,
    /// The strongest relation to any inspected lock file.
    pub lock: LockState,
    /// Initial value of `CLOUD_WRITER_LEASE` (escaped), if set and readable.
    pub enable: Option<String>,
    /// Initial value of `CLOUD_WRITER_LEASE_HELD` (escaped), if set and readable.
    pub stamp: Option<String>,
    /// Only when `lock` is `open`: seconds since the process started, an upper
    /// bound on how long it has waited for the lock.
    pub waiting_s: Option<u64>,
    /// Why `lock` is `unknown` (its descriptors could not be read); null otherwise.
    #[serde(default)]
    pub lock_reason: Option<String>,
    /// Why this process is part of the pod (e.g. "descendant of pod root 4711").
    #[serde(default)]
    pub included_because: String,
}

/// A process's duty as the scanner sees it: a [`Duty`], or why none could be
/// computed. Serialized as `take|inherit|off|invalid|unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DutyView {
    /// Must hold the lock (pod root).
    Take,
    /// Its parent holds the lock.
    Inherit,
    /// The lease is off for it.
    Off,
    /// `CLOUD_WRITER_LEASE` has an invalid value.
    Invalid,
    /// The environment could not be read.
    Unknown,
}

impl DutyView {
    /// The snake_case name, as in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            DutyView::Take => "take",
            DutyView::Inherit => "inherit",
            DutyView::Off => "off",
            DutyView::Invalid => "invalid",
            DutyView::Unknown => "unknown",
        }
    }
}

impl From<Duty> for DutyView {
    fn from(d: Duty) -> Self {
        match d {
            Duty::Take => DutyView::Take,
            Duty::Inherit => DutyView::Inherit,
            Duty::Off => DutyView::Off,
        }
    }
}

/// A process's relation to the lock file(s). Serialized as
/// `holds|open|none|unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockState {
    /// Holds the flock (alone or sharing the open file description).
    Holds,
    /// Has the lock file open without holding it: waiting.
    Open,
    /// Does not have the lock file open.
    None,
    /// Its descriptors could not be read (see `lock_reason`).
    Unknown,
}

impl LockState {
    /// The snake_case name, as in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockState::Holds => "holds",
            LockState::Open => "open",
            LockState::None => "none",
            LockState::Unknown => "unknown",
        }
    }
}

/// Whether a lock file is locked, as far as this viewer can tell. Serialized
/// snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockFileState {
    /// Locked by a process this scan can see (fdinfo or `/proc/locks`).
    Held,
    /// Locked, but by no process visible here: `/proc/locks` shows nothing and
    /// no `fdinfo` has the lock, yet the kernel refused a shared probe. The
    /// holder is in another PID namespace (or its taker has exited and a
    /// descendant outside this view shares the descriptor).
    HeldOutsideNamespace,
    /// Nobody holds it (or the file does not exist yet).
    Free,
    /// Could not be told (see `state_reason`).
    #[default]
    Unknown,
}

impl LockFileState {
    /// The snake_case name, as in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockFileState::Held => "held",
            LockFileState::HeldOutsideNamespace => "held_outside_namespace",
            LockFileState::Free => "free",
            LockFileState::Unknown => "unknown",
        }
    }
}

/// One lock file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockInfo {
    /// The lock file path (escaped), as given or as the holder's `/proc/PID/fd` shows it.
    pub path: String,
    /// Pids holding the lock, found through `fdinfo` (sorted). May include
    /// processes outside the pod.
    pub holders: Vec<u32>,
    /// Whether the kernel reports the file as flocked (`/proc/locks` or a holder's `fdinfo`).
    pub locked: bool,
    /// The pids `/proc/locks` names for this file: the process that took the
    /// lock, which may have exited since, or 0 when it is in another pid namespace.
    pub proc_locks_pids: Vec<u32>,
    /// Held, held outside this PID namespace, free, or unknown.
    #[serde(default)]
    pub state: LockFileState,
    /// One sentence: how `state` was found out.
    #[serde(default)]
    pub state_reason: String,
}

/// Something about the pod that needs attention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Which rule fired.
    pub kind: VerdictKind,
    /// One sentence for the operator (escaped).
    pub message: String,
    /// The processes concerned, sorted.
    pub pids: Vec<u32>,
}

/// The pod verdicts (ARCHITECTURE.md; DESIGN.md "Writer lease semantics"). Serialized snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// `CLOUD_WRITER_LEASE` has an invalid value somewhere in the pod.
    InvalidEnable,
    /// The lease is on in the pod but no process holds the lock.
    ArmedHoldsNothing,
    /// More than one participant has duty Take (siblings racing for the lock).
    SiblingsRacing,
    /// The lock is held by a process whose duty is not Take.
    HolderNotTake,
    /// A participant's stamp names a pid other than its parent (or a dead pid, or garbage).
    StrayStamp,
    /// A participant has the lock file open without holding it.
    Waiting,
    /// The lock is held by a process outside the pod (or one this scan cannot see).
    HolderOutsidePod,
    /// A process with the lease on whose stamp names a holder that is gone,
    /// running outside every holder's tree (e.g. a daemonized child that
    /// outlived `writer exec`): it may write without the lease.
    OrphanedWriter,
}

impl VerdictKind {
    /// The snake_case name, as in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::InvalidEnable => "invalid_enable",
            VerdictKind::ArmedHoldsNothing => "armed_holds_nothing",
            VerdictKind::SiblingsRacing => "siblings_racing",
            VerdictKind::HolderNotTake => "holder_not_take",
            VerdictKind::StrayStamp => "stray_stamp",
            VerdictKind::Waiting => "waiting",
            VerdictKind::HolderOutsidePod => "holder_outside_pod",
            VerdictKind::OrphanedWriter => "orphaned_writer",
        }
    }
}

/// The environment facts the scanner extracted from `/proc/PID/environ`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvRead {
    /// Read: the raw values of the two lease variables (no other variable).
    Read {
        /// `CLOUD_WRITER_LEASE`, if set.
        enable: Option<String>,
        /// `CLOUD_WRITER_LEASE_HELD`, if set.
        stamp: Option<String>,
    },
    /// Could not be read; the reason (e.g. permission denied).
    Unreadable(String),
}

/// A process as gathered, before judgement.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedProcess {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Escaped command line.
    pub command: String,
    /// The two lease variables of its initial environment.
    pub env: EnvRead,
    /// Indices into [`Observed::locks`] of lock files it has open.
    pub opens: Vec<usize>,
    /// Indices into [`Observed::locks`] of lock files it holds.
    pub holds: Vec<usize>,
    /// Seconds since the process started, if known.
    pub age_s: Option<u64>,
    /// Why its descriptors could not be read (then `opens`/`holds` say
    /// nothing); `None` when they were read.
    pub fds_unreadable: Option<String>,
    /// Why it is part of the pod.
    pub included_because: String,
}

/// A lock file as gathered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedLock {
    /// Escaped path.
    pub path: String,
    /// Every process (in the pod or not) holding it, sorted.
    pub holders: Vec<u32>,
    /// Whether the kernel reports it locked.
    pub locked: bool,
    /// Pids named by `/proc/locks`.
    pub proc_locks_pids: Vec<u32>,
    /// Held, held outside this PID namespace, free or unknown.
    pub state: LockFileState,
    /// How `state` was found out.
    pub state_reason: String,
}

/// Everything [`judge`] needs: the pod's processes, the lock files, and the
/// set of pids alive anywhere in the scanned `/proc` (to tell a stamp naming a
/// dead pid).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observed {
    /// The pod's processes (any order; the snapshot is sorted by pid).
    pub processes: Vec<ObservedProcess>,
    /// The lock files.
    pub locks: Vec<ObservedLock>,
    /// All live pids seen.
    pub alive: BTreeSet<u32>,
    /// Processes in scope whose environment or descriptors could not be read.
    pub uninspected: BTreeSet<u32>,
    /// Those of them whose descriptors could not be read (they may have a
    /// lock file open).
    pub fds_unreadable: BTreeSet<u32>,
    /// What was considered (copied into the snapshot).
    pub scope: Option<PodScope>,
}

/// Scans `/proc` and judges the pod. See the module documentation for the rules.
///
/// # Errors
/// [`WriterError::Proc`] when the proc root cannot be listed, or when
/// `pod_root` names a process that does not exist. Individual processes that
/// vanish or cannot be read never fail the scan.
pub fn scan(opts: &ScanOptions) -> Result<PodSnapshot, WriterError> {
    Ok(judge(&observe(opts)?))
}

/// The gathering half of [`scan`]: reads `/proc`, selects the pod and the
/// lock files, and returns the raw facts.
///
/// # Errors
/// As [`scan`].
pub fn observe(opts: &ScanOptions) -> Result<Observed, WriterError> {
    let root = &opts.proc_root;
    let table = ProcTable::read(root)?;
    let user_pids: Vec<u32> = table
        .procs
        .values()
        .filter(|p| !p.kthread)
        .map(|p| p.pid)
        .collect();

    // The pod by tree, when a root was given: stat alone decides it.
    let tree: Option<BTreeSet<u32>> = match opts.pod_root {
        Some(r) => {
            if !table.procs.contains_key(&r) {
                return Err(WriterError::Proc {
                    path: root.join(r.to_string()),
                    message: format!("pod root pid {r} does not exist"),
                });
            }
            Some(table.descendants(r))
        }
        None => None,
    };

    // Lock files to inspect, keyed by (st_dev, st_ino).
    let mut lock_keys: BTreeMap<(u64, u64), LockTarget> = BTreeMap::new();
    if opts.data_dirs.is_empty() {
        // Auto-detected from open descriptors: the pod's own with --pod-root,
        // everybody's otherwise.
        let owners: Vec<u32> = match &tree {
            Some(t) => t.iter().copied().collect(),
            None => user_pids.clone(),
        };
        for pid in owners {
            for fd in &table.fds(pid).fds {
                lock_keys
                    .entry((fd.dev, fd.ino))
                    .or_insert_with(|| LockTarget {
                        path: fd.path.clone(),
                        probe: vec![fd.link.clone(), fd.target.clone()],
                    });
            }
        }
    } else {
        for dir in &opts.data_dirs {
            // A typo in --data-dir must not read as "free, healthy".
            if !dir.is_dir() {
                return Err(WriterError::Open {
                    path: dir.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "the data directory does not exist or is not a directory",
                    ),
                });
            }
            let path = dir.join(LOCK_NAME);
            let shown = sanitize(&path.to_string_lossy());
            match std::fs::metadata(&path) {
                Ok(md) => {
                    lock_keys
                        .entry((md.dev(), md.ino()))
                        .or_insert_with(|| LockTarget {
                            path: shown,
                            probe: vec![path],
                        });
                }
                // The key (0, n) never matches a real file: n keeps it unique.
                Err(_) => {
                    let n = lock_keys.len() as u64;
                    lock_keys.insert(
                        (0, n),
                        LockTarget {
                            path: shown,
                            probe: Vec::new(),
                        },
                    );
                }
            }
        }
    }

    // Who opens which lock file, and who holds it by fdinfo. The descriptors
    // of every process are read (lazily, once each): a holder or a waiter
    // outside the pod counts too.
    let proc_locks = read_proc_locks(root);
    let mut kernel_ids: BTreeMap<FileKey, BTreeSet<KernelId>> = BTreeMap::new();
    let mut holders: BTreeMap<(u64, u64), BTreeSet<u32>> = BTreeMap::new();
    let mut openers: BTreeMap<(u64, u64), BTreeSet<u32>> = BTreeMap::new();
    for (key, target) in &lock_keys {
        if target.probe.is_empty() {
            continue; // a missing file: nothing can lock it
        }
        kernel_ids.entry(*key).or_default().insert((
            nix::sys::stat::major(key.0) as u32,
            nix::sys::stat::minor(key.0) as u32,
            key.1,
        ));
    }
    if !lock_keys.is_empty() {
        for &pid in &user_pids {
            for fd in &table.fds(pid).fds {
                let key = (fd.dev, fd.ino);
                if !lock_keys.contains_key(&key) {
                    continue;
                }
                openers.entry(key).or_default().insert(pid);
                if !fd.lock_ids.is_empty() {
                    holders.entry(key).or_default().insert(pid);
                    kernel_ids
                        .entry(key)
                        .or_default()
                        .extend(fd.lock_ids.iter().copied());
                }
            }
        }
    }

    // Lock file states, before pod selection: /proc/locks takers are pod seeds.
    let mut locks: Vec<ObservedLock> = Vec::new();
    let mut lock_index: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    let mut ordered: Vec<(&(u64, u64), &LockTarget)> = lock_keys.iter().collect();
    ordered.sort_by(|a, b| a.1.path.cmp(&b.1.path));
    for (key, target) in ordered {
        let ids = kernel_ids.get(key).cloned().unwrap_or_default();
        let mut taken_by = BTreeSet::new();
        let mut in_proc_locks = false;
        for l in &proc_locks {
            if ids.contains(&(l.devmaj, l.devmin, l.inode)) {
                in_proc_locks = true;
                if let Some(pid) = l.pid.and_then(|p| u32::try_from(p).ok()) {
                    taken_by.insert(pid);
                }
            }
        }
        let mut held_by = holders.get(key).cloned().unwrap_or_default();
        // No fdinfo evidence: trust /proc/locks only for a live pid whose
        // descriptors we could not read (otherwise the pid may be reused).
        if held_by.is_empty() {
            for pid in &taken_by {
                if table.procs.contains_key(pid) && table.fds(*pid).unreadable.is_some() {
                    held_by.insert(*pid);
                }
            }
        }
        let (state, state_reason) = if !held_by.is_empty() {
            (
                LockFileState::Held,
                format!(
                    "held by pid {} (fdinfo or /proc/locks shows the lock)",
                    join_set(&held_by)
                ),
            )
        } else if in_proc_locks {
            (
                LockFileState::Held,
                if taken_by.is_empty() {
                    "/proc/locks lists a lock on it whose holder is not visible here".to_string()
                } else {
                    format!(
                        "/proc/locks lists a lock on it taken by pid {}, which no longer has it open; a process sharing that descriptor holds it",
                        join_set(&taken_by)
                    )
                },
            )
        } else if target.probe.is_empty() {
            (
                LockFileState::Free,
                "the file does not exist, so nobody holds it".to_string(),
            )
        } else {
            match probe_locked_any(&target.probe) {
                Ok(true) => (
                    LockFileState::HeldOutsideNamespace,
                    "held by a process outside this PID namespace: /proc/locks and fdinfo show no holder here, yet the kernel refused a non-blocking shared lock".to_string(),
                ),
                Ok(false) => (
                    LockFileState::Free,
                    "nobody holds it: /proc/locks shows no holder and a non-blocking shared lock was granted (and released at once)".to_string(),
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
                    LockFileState::Free,
                    "the file does not exist, so nobody holds it".to_string(),
                ),
                Err(e) => (
                    LockFileState::Unknown,
                    format!(
                        "whether it is locked is unknown: /proc/locks shows no holder here, which proves nothing about other PID namespaces, and the file could not be opened for a probe ({})",
                        io_why(&e)
                    ),
                ),
            }
        };
        lock_index.insert(*key, locks.len());
        locks.push(ObservedLock {
            path: target.path.clone(),
            locked: matches!(
                state,
                LockFileState::Held | LockFileState::HeldOutsideNamespace
            ),
            holders: held_by.into_iter().collect(),
            proc_locks_pids: taken_by.into_iter().collect(),
            state,
            state_reason,
        });
    }

    // Pod selection, with the reason each process is in it.
    let mut included: BTreeMap<u32, String> = BTreeMap::new();
    match (opts.pod_root, &tree) {
        (Some(r), Some(t)) => {
            for &pid in t {
                let why = if pid == r {
                    "the pod root given with --pod-root".to_string()
                } else {
                    let ppid = table.procs.get(&pid).map(|p| p.ppid).unwrap_or(0);
                    format!("a descendant of pod root {r} (its parent is {ppid})")
                };
                included.insert(pid, why);
            }
        }
        _ => {
            let mut seeds: BTreeMap<u32, String> = BTreeMap::new();
            for (key, pids) in &openers {
                let path = &lock_keys[key].path;
                for pid in pids {
                    seeds
                        .entry(*pid)
                        .or_insert_with(|| format!("it has {path} open"));
                }
            }
            for l in &locks {
                for pid in l.holders.iter().chain(&l.proc_locks_pids) {
                    if table.procs.contains_key(pid) {
                        seeds.entry(*pid).or_insert_with(|| {
                            format!(
                                "/proc/locks names it as the taker of the lock on {}",
                                l.path
                            )
                        });
                    }
                }
            }
            for &pid in &user_pids {
                if seeds.contains_key(&pid) {
                    continue;
                }
                if let EnvRead::Read { enable, stamp } = table.env(pid) {
                    if enable.is_some() || stamp.is_some() {
                        seeds.insert(
                            pid,
                            format!("its initial environment sets {ENABLE} or {HELD}"),
                        );
                    }
                }
            }
            included = table.with_ancestors(&seeds);
        }
    }

    // Everything in scope that could not be read. With --pod-root the scope is
    // the tree; auto-detection considered every process.
    let in_scope: Vec<u32> = match &tree {
        Some(t) => t
            .iter()
            .copied()
            .filter(|p| user_pids.contains(p))
            .collect(),
        None => user_pids.clone(),
    };
    let mut uninspected = BTreeSet::new();
    let mut fds_unreadable = BTreeSet::new();
    for pid in in_scope {
        let no_fds = table.fds(pid).unreadable.is_some();
        if no_fds {
            fds_unreadable.insert(pid);
        }
        if no_fds || table.env_denied(pid) {
            uninspected.insert(pid);
        }
    }

    let uptime = procfs::Uptime::from_file(root.join("uptime"))
        .ok()
        .map(|u| u.uptime);
    let tps = procfs::ticks_per_second() as f64;

    let mut processes = Vec::new();
    for (pid, why) in &included {
        let Some(p) = table.procs.get(pid) else {
            continue;
        };
        let fds = table.fds(*pid);
        let mut opens = BTreeSet::new();
        let mut holds = BTreeSet::new();
        for fd in &fds.fds {
            if let Some(&i) = lock_index.get(&(fd.dev, fd.ino)) {
                opens.insert(i);
                if locks[i].holders.contains(pid) {
                    holds.insert(i);
                }
            }
        }
        let age_s = uptime.map(|u| (u - p.starttime as f64 / tps).max(0.0) as u64);
        processes.push(ObservedProcess {
            pid: *pid,
            ppid: p.ppid,
            command: p.command(),
            env: table.env(*pid),
            opens: opens.into_iter().collect(),
            holds: holds.into_iter().collect(),
            age_s,
            fds_unreadable: fds.unreadable.clone(),
            included_because: why.clone(),
        });
    }

    let seen = user_pids.len();
    let data_dirs: Vec<String> = opts
        .data_dirs
        .iter()
        .map(|d| sanitize(&d.to_string_lossy()))
        .collect();
    let locks_rule = if data_dirs.is_empty() {
        format!("lock files: every {LOCK_NAME} that a considered process has open")
    } else {
        format!("lock files: {LOCK_NAME} in {}", data_dirs.join(", "))
    };
    let scope = match opts.pod_root {
        Some(r) => PodScope {
            mode: "pod_root".into(),
            pod_root: Some(r),
            processes_seen: seen,
            processes_selected: processes.len(),
            data_dirs,
            description: format!(
                "pod: pid {r} and its {} descendant(s), out of {seen} processes in this PID namespace; {locks_rule}.",
                processes.len().saturating_sub(1)
            ),
        },
        None => PodScope {
            mode: "auto".into(),
            pod_root: None,
            processes_seen: seen,
            processes_selected: processes.len(),
            data_dirs,
            description: format!(
                "pod auto-detected among {seen} processes in this PID namespace: those with {ENABLE} or {HELD} in their initial environment, a lock file open, or named by /proc/locks, plus their ancestors ({} selected); {locks_rule}.",
                processes.len()
            ),
        },
    };
    Ok(Observed {
        processes,
        locks,
        alive: table.procs.keys().copied().collect(),
        uninspected,
        fds_unreadable,
        scope: Some(scope),
    })
}

/// A file's identity: `(st_dev, st_ino)`.
type FileKey = (u64, u64);

/// A lock's file as the kernel names it in `/proc/locks`: `(major, minor, inode)`.
type KernelId = (u32, u32, u64);

/// A lock file to inspect: its shown path, and the paths to open it by for a
/// probe (the path itself, or the `/proc/PID/fd/N` link of a descriptor on it
/// and the link's target, first that opens wins).
struct LockTarget {
    path: String,
    probe: Vec<PathBuf>,
}

/// Whether the lock file is flocked right now, asked of the kernel without
/// taking part in the contest.
///
/// Opens a **new** open file description read-only and tries
/// `flock(LOCK_SH | LOCK_NB)`:
/// - refused (`EWOULDBLOCK`): someone holds `LOCK_EX` — locked. Nothing was
///   taken and nothing changed, so neither the holder nor a waiter notices.
/// - granted: nobody held it exclusively. The shared lock is dropped at once
///   (`LOCK_UN`, then close). While it existed (two system calls) a
///   concurrent `LOCK_EX | LOCK_NB` attempt would fail with `EWOULDBLOCK` and
///   retry: `writer exec` polls every 100 ms, so a taker arriving in that
///   window starts at most one poll later, and one with `--wait 0` fails
///   closed (never two writers). A *blocked* `LOCK_EX` waiter cannot exist
///   while the file is free, and one that arrives in the window is woken by
///   `LOCK_UN`. The probe never takes `LOCK_EX`, so it never keeps a writer
///   out for longer than the window.
///
/// Why not `fcntl(F_OFD_GETLK)` (which reports a conflict without taking a
/// lock): on Linux, `flock(2)` locks and `fcntl` record locks are separate
/// kinds that never conflict on local file systems, so `F_OFD_GETLK` answers
/// "unlocked" for a file that is flocked (checked on Linux 6.18). It would only
/// see the lock on NFS, where flock is emulated with record locks.
/// And `/proc/locks` cannot answer it either: since Linux 4.12 it hides a lock
/// whose taker is not visible in the reader's PID namespace.
///
/// Assumes writers take `LOCK_EX` only (as `writer exec` and the writerlease
/// package do): a shared holder would read as free.
///
/// # Errors
/// The error of `open` (e.g. permission denied, not found) or of `flock`.
pub fn probe_locked(path: &Path) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)?;
    // SAFETY: flock on a descriptor we own; no memory is passed.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    if r == 0 {
        // SAFETY: as above. Closing would drop the lock anyway.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) };
        return Ok(false);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(true)
    } else {
        Err(e)
    }
}

/// [`probe_locked`] on the first of `paths` that opens.
fn probe_locked_any(paths: &[PathBuf]) -> std::io::Result<bool> {
    let mut last = std::io::Error::from(std::io::ErrorKind::NotFound);
    for p in paths {
        match probe_locked(p) {
            Ok(v) => return Ok(v),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// An I/O error as a short lowercase phrase ("permission denied").
fn io_why(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::NotFound => "not found".to_string(),
        _ => sanitize(&e.to_string()),
    }
}

fn join_set(pids: &BTreeSet<u32>) -> String {
    let v: Vec<String> = pids.iter().map(u32::to_string).collect();
    v.join(", ")
}

/// Finds the processes holding `lock_path` (by inode, through `fdinfo`), for
/// the fail-closed message of [`super::flock::acquire`]. Falls back to the
/// live pids `/proc/locks` names. Best effort: returns an empty list when
/// nothing can be found.
pub fn lock_holders(proc_root: &Path, lock_path: &Path) -> Vec<HolderDesc> {
    let Ok(md) = std::fs::metadata(lock_path) else {
        return Vec::new();
    };
    let Ok(table) = ProcTable::read(proc_root) else {
        return Vec::new();
    };
    let key = (md.dev(), md.ino());
    let mut pids = BTreeSet::new();
    let mut kernel_ids = BTreeSet::new();
    kernel_ids.insert((
        nix::sys::stat::major(key.0) as u32,
        nix::sys::stat::minor(key.0) as u32,
        key.1,
    ));
    for p in table.procs.values().filter(|p| !p.kthread) {
        for fd in table
            .fds(p.pid)
            .fds
            .iter()
            .filter(|fd| (fd.dev, fd.ino) == key)
        {
            if !fd.lock_ids.is_empty() {
                pids.insert(p.pid);
                kernel_ids.extend(fd.lock_ids.iter().copied());
            }
        }
    }
    if pids.is_empty() {
        for l in read_proc_locks(proc_root) {
            if kernel_ids.contains(&(l.devmaj, l.devmin, l.inode)) {
                if let Some(pid) = l.pid.and_then(|p| u32::try_from(p).ok()) {
                    if table.procs.contains_key(&pid) {
                        pids.insert(pid);
                    }
                }
            }
        }
    }
    pids.into_iter()
        .map(|pid| HolderDesc {
            pid,
            command: table
                .procs
                .get(&pid)
                .map(RawProc::command)
                .unwrap_or_default(),
        })
        .collect()
}

/// Builds the snapshot from gathered facts: computes each process's duty and
/// raises the pod verdicts (ARCHITECTURE.md). Pure: no I/O, no clock.
pub fn judge(obs: &Observed) -> PodSnapshot {
    let mut procs: Vec<&ObservedProcess> = obs.processes.iter().collect();
    procs.sort_by_key(|p| p.pid);
    let pod: BTreeSet<u32> = procs.iter().map(|p| p.pid).collect();

    struct Judged<'a> {
        p: &'a ObservedProcess,
        duty: DutyView,
        enable_on: bool,
    }
    let mut judged = Vec::new();
    let mut processes = Vec::new();
    for p in &procs {
        let (duty, reason, enable, stamp, enable_on) = match &p.env {
            EnvRead::Unreadable(why) => (
                DutyView::Unknown,
                format!(
                    "duty unknown: its environment (/proc/{}/environ) could not be read ({}), so whether it must take the lock cannot be computed.",
                    p.pid,
                    sanitize(why)
                ),
                None,
                None,
                false,
            ),
            EnvRead::Read { enable, stamp } => {
                let getenv = |k: &str| match k {
                    ENABLE => enable.clone(),
                    HELD => stamp.clone(),
                    _ => None,
                };
                let on = Enable::parse(enable.as_deref()) == Enable::On;
                let (d, r) = match assess(getenv, p.ppid) {
                    Ok((d, r)) => (DutyView::from(d), r),
                    Err(e) => (DutyView::Invalid, e.to_string()),
                };
                (
                    d,
                    r,
                    enable.as_deref().map(|v| crate::text::sanitize_cut(v, 256)),
                    stamp.as_deref().map(|v| crate::text::sanitize_cut(v, 256)),
                    on,
                )
            }
        };
        let lock_reason = p.fds_unreadable.as_ref().map(|why| {
            let named = obs
                .locks
                .iter()
                .filter(|l| l.proc_locks_pids.contains(&p.pid))
                .map(|l| l.path.as_str())
                .collect::<Vec<_>>();
            let named = if named.is_empty() {
                String::new()
            } else {
                format!(
                    "; /proc/locks names it as the process that took the lock on {}",
                    named.join(", ")
                )
            };
            format!(
                "lock unknown: its descriptors could not be read ({}){named}.",
                sanitize(why)
            )
        });
        let lock = if lock_reason.is_some() {
            LockState::Unknown
        } else if !p.holds.is_empty() {
            LockState::Holds
        } else if !p.opens.is_empty() {
            LockState::Open
        } else {
            LockState::None
        };
        processes.push(ProcessInfo {
            pid: p.pid,
            ppid: p.ppid,
            command: p.command.clone(),
            duty,
            duty_reason: reason,
            lock,
            enable,
            stamp,
            waiting_s: if lock == LockState::Open {
                p.age_s
            } else {
                None
            },
            lock_reason,
            included_because: p.included_because.clone(),
        });
        judged.push(Judged { p, duty, enable_on });
    }

    let mut verdicts = Vec::new();

    // Invalid enable values, one verdict per distinct value.
    let mut invalid: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for j in &judged {
        if j.duty == DutyView::Invalid {
            if let EnvRead::Read {
                enable: Some(v), ..
            } = &j.p.env
            {
                invalid.entry(v.clone()).or_default().push(j.p.pid);
            }
        }
    }
    for (value, pids) in invalid {
        verdicts.push(Verdict {
            kind: VerdictKind::InvalidEnable,
            message: format!(
                "{ENABLE} has the invalid value \"{}\" in {} process(es); writer exec refuses to start with it",
                crate::text::sanitize_cut(&value, 64),
                pids.len()
            ),
            pids,
        });
    }

    // Armed, holds nothing.
    let armed: BTreeSet<u32> = judged
        .iter()
        .filter(|j| j.enable_on)
        .map(|j| j.p.pid)
        .collect();
    // Only on known facts: every lock file known free, and (when there is no
    // lock file at all) every process's descriptors read.
    let all_free = obs.locks.iter().all(|l| l.state == LockFileState::Free);
    let lockless_known = !obs.locks.is_empty() || obs.fds_unreadable.is_empty();
    if !armed.is_empty() && all_free && lockless_known {
        // Name the topmost armed processes: those whose parent is not armed.
        let tops: Vec<u32> = judged
            .iter()
            .filter(|j| j.enable_on && !armed.contains(&j.p.ppid))
            .map(|j| j.p.pid)
            .collect();
        let what = if obs.locks.is_empty() {
            format!("no process has a {LOCK_NAME} open")
        } else {
            let paths: Vec<&str> = obs.locks.iter().map(|l| l.path.as_str()).collect();
            format!("nobody holds {}", paths.join(", "))
        };
        verdicts.push(Verdict {
            kind: VerdictKind::ArmedHoldsNothing,
            message: format!(
                "armed, holds nothing: {ENABLE} is on in this pod but {what}; a second pod could open the same files"
            ),
            pids: tops,
        });
    }

    for (i, lock) in obs.locks.iter().enumerate() {
        let participants: Vec<&Judged> = judged.iter().filter(|j| j.p.opens.contains(&i)).collect();
        let holders_in_pod: Vec<&&Judged> = participants
            .iter()
            .filter(|j| lock.holders.contains(&j.p.pid))
            .collect();

        // Siblings racing: holders share one open file description (the lock is
        // exclusive), so they count as one contender; each Take waiter is one more.
        let take_holders: Vec<u32> = holders_in_pod
            .iter()
            .filter(|j| j.duty == DutyView::Take)
            .map(|j| j.p.pid)
            .collect();
        let take_waiters: Vec<u32> = participants
            .iter()
            .filter(|j| j.duty == DutyView::Take && !lock.holders.contains(&j.p.pid))
            .map(|j| j.p.pid)
            .collect();
        let contenders = take_waiters.len() + usize::from(!take_holders.is_empty());
        if contenders > 1 {
            let mut pids: Vec<u32> = take_holders.iter().chain(&take_waiters).copied().collect();
            pids.sort_unstable();
            let winner = if take_holders.is_empty() {
                "none of them holds it yet".to_string()
            } else {
                format!(
                    "pid {} holds it and the others wait",
                    join_pids(&take_holders)
                )
            };
            verdicts.push(Verdict {
                kind: VerdictKind::SiblingsRacing,
                message: format!(
                    "more than one Take: {} processes in this pod ({}) each decided to take {}; {winner}. Only the pod root should take the lock",
                    pids.len(),
                    join_pids(&pids),
                    lock.path
                ),
                pids,
            });
        }

        // Holder whose duty is not Take.
        for j in &holders_in_pod {
            if !matches!(j.duty, DutyView::Take | DutyView::Unknown) {
                verdicts.push(Verdict {
                    kind: VerdictKind::HolderNotTake,
                    message: format!(
                        "pid {} holds {} but its duty is {}: {}",
                        j.p.pid,
                        lock.path,
                        j.duty.as_str(),
                        processes
                            .iter()
                            .find(|p| p.pid == j.p.pid)
                            .map(|p| p.duty_reason.as_str())
                            .unwrap_or("")
                    ),
                    pids: vec![j.p.pid],
                });
            }
        }

        // Waiting participants.
        for j in participants
            .iter()
            .filter(|j| !lock.holders.contains(&j.p.pid))
        {
            let how_long = match j.p.age_s {
                Some(s) => format!("for up to {s} s (process age)"),
                None => "for an unknown time".to_string(),
            };
            let held_by = if lock.holders.is_empty() {
                match lock.state {
                    LockFileState::HeldOutsideNamespace => {
                        "a process outside this PID namespace".to_string()
                    }
                    LockFileState::Held => "a process this scan cannot see".to_string(),
                    LockFileState::Free => "nobody right now".to_string(),
                    LockFileState::Unknown => "an unknown process, if any".to_string(),
                }
            } else {
                format!("pid {}", join_pids(&lock.holders))
            };
            verdicts.push(Verdict {
                kind: VerdictKind::Waiting,
                message: format!(
                    "pid {} has {} open without holding it, waiting {how_long}; held by {held_by}",
                    j.p.pid, lock.path
                ),
                pids: vec![j.p.pid],
            });
        }

        // Holder outside the pod.
        let outside: Vec<u32> = lock
            .holders
            .iter()
            .copied()
            .filter(|pid| !pod.contains(pid))
            .collect();
        if !outside.is_empty() {
            verdicts.push(Verdict {
                kind: VerdictKind::HolderOutsidePod,
                message: format!(
                    "{} is held by pid {}, outside this pod",
                    lock.path,
                    join_pids(&outside)
                ),
                pids: outside,
            });
        } else if lock.state == LockFileState::HeldOutsideNamespace {
            let more = if obs.uninspected.is_empty() {
                String::new()
            } else {
                format!(
                    " (or by one of the {} processes this scan could not inspect)",
                    obs.uninspected.len()
                )
            };
            verdicts.push(Verdict {
                kind: VerdictKind::HolderOutsidePod,
                message: format!(
                    "{} is held by a process outside this PID namespace{more}: /proc/locks and fdinfo show no holder here, yet the kernel refuses a shared lock on it",
                    lock.path
                ),
                pids: Vec::new(),
            });
        } else if lock.locked && lock.holders.is_empty() {
            let named = if lock.proc_locks_pids.is_empty() {
                String::new()
            } else {
                format!(
                    " (/proc/locks names pid {}, which is gone or hidden)",
                    join_pids(&lock.proc_locks_pids)
                )
            };
            verdicts.push(Verdict {
                kind: VerdictKind::HolderOutsidePod,
                message: format!(
                    "{} is locked by a process this scan cannot see{named}",
                    lock.path
                ),
                pids: Vec::new(),
            });
        }
    }

    // Stray stamps on participants (only where the lease is on: with it off
    // the stamp decides nothing).
    for j in judged
        .iter()
        .filter(|j| !j.p.opens.is_empty() && j.enable_on)
    {
        let EnvRead::Read {
            stamp: Some(stamp), ..
        } = &j.p.env
        else {
            continue;
        };
        if let StampVerdict::Ignored(why) = stamp_verdict(Some(stamp), j.p.ppid) {
            let dead = match stamp_pid(stamp) {
                Some(pid) if pid != 0 && !obs.alive.contains(&pid) => {
                    format!("; pid {pid} is not running")
                }
                _ => String::new(),
            };
            verdicts.push(Verdict {
                kind: VerdictKind::StrayStamp,
                message: format!(
                    "pid {} (parent {}): {why}{dead}; it therefore takes the lock itself",
                    j.p.pid, j.p.ppid
                ),
                pids: vec![j.p.pid],
            });
        }
    }

    // Orphaned writers: the lease is on, the stamp names a pid that is gone,
    // and neither the process nor any ancestor holds a lock file. Participants
    // are covered by the stray-stamp verdict above.
    let parent_of: BTreeMap<u32, u32> = procs.iter().map(|p| (p.pid, p.ppid)).collect();
    let all_holders: BTreeSet<u32> = obs
        .locks
        .iter()
        .flat_map(|l| l.holders.iter().copied())
        .collect();
    for j in judged
        .iter()
        .filter(|j| j.enable_on && j.p.opens.is_empty() && j.p.fds_unreadable.is_none())
    {
        let EnvRead::Read {
            stamp: Some(stamp), ..
        } = &j.p.env
        else {
            continue;
        };
        let Some(holder) = stamp_pid(stamp).filter(|pid| *pid != 0) else {
            continue;
        };
        if obs.alive.contains(&holder) {
            continue;
        }
        // Walk up the known ancestors (bounded: a ppid loop cannot hang us).
        let mut under_holder = false;
        let mut pid = j.p.pid;
        for _ in 0..=procs.len() {
            if all_holders.contains(&pid) {
                under_holder = true;
                break;
            }
            match parent_of.get(&pid) {
                Some(&pp) if pp != 0 && pp != pid => pid = pp,
                _ => break,
            }
        }
        if under_holder {
            continue;
        }
        verdicts.push(Verdict {
            kind: VerdictKind::OrphanedWriter,
            message: format!(
                "orphaned writer: pid {} (parent {}) was started under the lock holder {HELD}={holder}, but pid {holder} is gone and no ancestor of pid {} holds a lock; it may still be writing without the lease (e.g. a daemonized child that outlived writer exec)",
                j.p.pid, j.p.ppid, j.p.pid
            ),
            pids: vec![j.p.pid],
        });
    }

    // What this scan could not know.
    let mut notes = Vec::new();
    if !obs.uninspected.is_empty() {
        let n = obs.uninspected.len();
        let auto = obs.scope.as_ref().is_none_or(|s| s.mode == "auto");
        // Auto-detection that found nothing among the readable processes says
        // so: whether the hidden ones form a pod is unknown, and the caller
        // decides whether that matters (Snapshot::pod_in_question).
        let none_found = auto && obs.locks.is_empty() && procs.is_empty();
        let rest = obs
            .scope
            .as_ref()
            .map_or(0, |s| s.processes_seen.saturating_sub(n));
        if none_found {
            notes.push(format!(
                "{n} process{} could not be inspected (run as their owner or root), and no pod was found among the {rest} that could: none of them carries {ENABLE} or {HELD} or has a {LOCK_NAME} open. Whether the hidden ones form a pod is unknown; give --pod-root or --data-dir to have it judged.",
                if n == 1 { "" } else { "es" },
            ));
        } else {
            notes.push(format!(
                "{n} process{} could not be inspected (run as their owner or root): {} duty or lock is unknown and no verdict is built on {}.",
                if n == 1 { "" } else { "es" },
                if n == 1 { "its" } else { "their" },
                if n == 1 { "it" } else { "them" },
            ));
        }
    }
    for l in obs
        .locks
        .iter()
        .filter(|l| l.state == LockFileState::Unknown)
    {
        notes.push(format!("{}: {}.", l.path, l.state_reason));
    }

    let mut locks: Vec<LockInfo> = obs
        .locks
        .iter()
        .map(|l| LockInfo {
            path: l.path.clone(),
            holders: l.holders.clone(),
            locked: l.locked,
            proc_locks_pids: l.proc_locks_pids.clone(),
            state: l.state,
            state_reason: l.state_reason.clone(),
        })
        .collect();
    locks.sort_by(|a, b| a.path.cmp(&b.path));
    verdicts.sort_by(|a, b| (a.kind, &a.pids, &a.message).cmp(&(b.kind, &b.pids, &b.message)));
    PodSnapshot {
        processes,
        locks,
        verdicts,
        scope: obs.scope.iter().cloned().collect(),
        uninspected: obs.uninspected.iter().copied().collect(),
        notes,
    }
}

fn join_pids(pids: &[u32]) -> String {
    let v: Vec<String> = pids.iter().map(u32::to_string).collect();
    v.join(", ")
}

/// A descriptor on a file named `.writer.lock`.
#[derive(Debug, Clone)]
struct LockFd {
    dev: u64,
    ino: u64,
    /// The escaped path, as the link shows it.
    path: String,
    /// `{root}/PID/fd/N`: opening it opens the same file (for the probe).
    link: PathBuf,
    /// The link's target, unescaped.
    target: PathBuf,
    /// `(maj, min, inode)` of each FLOCK `lock:` line in this fd's fdinfo.
    lock_ids: Vec<(u32, u32, u64)>,
}

/// A process's descriptors on lock files, or why they could not be read.
#[derive(Debug, Default)]
struct FdsRead {
    fds: Vec<LockFd>,
    /// Why the table (or a lock file's fdinfo) could not be read.
    unreadable: Option<String>,
}

/// Linux `PF_KTHREAD` in the `flags` field of `/proc/PID/stat`.
const PF_KTHREAD: u32 = 0x0020_0000;

#[derive(Debug)]
struct RawProc {
    pid: u32,
    ppid: u32,
    /// `comm` from `stat`; the command line is read only for the processes
    /// shown (see [`RawProc::command`]).
    comm: String,
    starttime: u64,
    /// A kernel thread: no environment, no descriptors, never in a pod.
    kthread: bool,
    /// `{root}/PID`.
    dir: PathBuf,
}

impl RawProc {
    /// The command line, escaped (`[comm]` when empty). Read on demand: reading
    /// another process's `cmdline` copies from its memory, and most processes
    /// of a machine are not in the pod.
    fn command(&self) -> String {
        read_command(&self.dir, &self.comm)
    }
}

/// A one-pass read of every process's `stat` under the proc root; the
/// environment and the descriptors are read on demand, once each.
struct ProcTable {
    root: PathBuf,
    procs: BTreeMap<u32, RawProc>,
    env_cache: std::cell::RefCell<BTreeMap<u32, (EnvRead, bool)>>,
    fd_cache: std::cell::RefCell<BTreeMap<u32, std::rc::Rc<FdsRead>>>,
}

impl ProcTable {
    fn read(root: &Path) -> Result<ProcTable, WriterError> {
        let iter = std::fs::read_dir(root).map_err(|e| WriterError::Proc {
            path: root.to_path_buf(),
            message: sanitize(&e.to_string()),
        })?;
        let mut procs = BTreeMap::new();
        let mut buf = Vec::with_capacity(1024);
        for entry in iter.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let dir = root.join(name);
            // Gone meanwhile, or not a process directory.
            if read_proc(&dir.join("stat"), &mut buf).is_err() {
                continue;
            }
            let Some(stat) = parse_stat(&buf) else {
                continue;
            };
            procs.insert(
                pid,
                RawProc {
                    pid,
                    ppid: stat.ppid,
                    comm: stat.comm,
                    starttime: stat.starttime,
                    kthread: stat.flags & PF_KTHREAD != 0,
                    dir,
                },
            );
        }
        Ok(ProcTable {
            root: root.to_path_buf(),
            procs,
            env_cache: Default::default(),
            fd_cache: Default::default(),
        })
    }

    /// The two lease variables of a process's initial environment (cached).
    fn env(&self, pid: u32) -> EnvRead {
        self.env_entry(pid).0
    }

    /// Whether reading the environment was refused (not: the process exited).
    fn env_denied(&self, pid: u32) -> bool {
        self.env_entry(pid).1
    }

    fn env_entry(&self, pid: u32) -> (EnvRead, bool) {
        if let Some(e) = self.env_cache.borrow().get(&pid) {
            return e.clone();
        }
        let e = match self.procs.get(&pid) {
            Some(p) if p.kthread => (
                EnvRead::Read {
                    enable: None,
                    stamp: None,
                },
                false,
            ),
            Some(p) => read_lease_env(&p.dir),
            None => (EnvRead::Unreadable("the process exited".into()), false),
        };
        self.env_cache.borrow_mut().insert(pid, e.clone());
        e
    }

    /// The descriptors of `pid` on lock files (cached).
    fn fds(&self, pid: u32) -> std::rc::Rc<FdsRead> {
        if let Some(f) = self.fd_cache.borrow().get(&pid) {
            return std::rc::Rc::clone(f);
        }
        let f = std::rc::Rc::new(match self.procs.get(&pid) {
            Some(p) if !p.kthread => lock_fds(&self.root, pid),
            _ => FdsRead::default(),
        });
        self.fd_cache
            .borrow_mut()
            .insert(pid, std::rc::Rc::clone(&f));
        f
    }

    fn descendants(&self, root: u32) -> BTreeSet<u32> {
        let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for p in self.procs.values() {
            children.entry(p.ppid).or_default().push(p.pid);
        }
        let mut out = BTreeSet::new();
        let mut stack = vec![root];
        while let Some(pid) = stack.pop() {
            if out.insert(pid) {
                if let Some(c) = children.get(&pid) {
                    stack.extend(c);
                }
            }
        }
        out
    }

    /// The seeds with their reasons, plus their ancestors ("an ancestor of
    /// pid N").
    fn with_ancestors(&self, seeds: &BTreeMap<u32, String>) -> BTreeMap<u32, String> {
        let mut out = seeds.clone();
        for &s in seeds.keys() {
            let mut pid = s;
            loop {
                match self.procs.get(&pid) {
                    Some(p) if p.ppid != 0 && self.procs.contains_key(&p.ppid) => {
                        pid = p.ppid;
                        if out.contains_key(&pid) {
                            break;
                        }
                        out.insert(pid, format!("an ancestor of pid {s}"));
                    }
                    _ => break,
                }
            }
        }
        out
    }
}

fn read_command(dir: &Path, comm: &str) -> String {
    let mut buf = Vec::new();
    let ok = read_proc(&dir.join("cmdline"), &mut buf).is_ok();
    let args: Vec<String> = if ok {
        buf.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| sanitize(&String::from_utf8_lossy(a)))
            .collect()
    } else {
        Vec::new()
    };
    if args.is_empty() {
        format!("[{}]", sanitize(comm))
    } else {
        args.join(" ")
    }
}

/// The fields of `/proc/PID/stat` the scanner uses.
struct Stat {
    ppid: u32,
    comm: String,
    flags: u32,
    starttime: u64,
}

/// Parses `/proc/PID/stat`: `pid (comm) state ppid … flags … starttime …`.
/// The command name may contain spaces and parentheses, so it ends at the
/// *last* `)`.
fn parse_stat(buf: &[u8]) -> Option<Stat> {
    let open = buf.iter().position(|b| *b == b'(')?;
    let close = buf.iter().rposition(|b| *b == b')')?;
    let comm = String::from_utf8_lossy(buf.get(open + 1..close)?).into_owned();
    let rest = std::str::from_utf8(buf.get(close + 1..)?).ok()?;
    // After ") ": state(0) ppid(1) pgrp session tty_nr tpgid flags(6) minflt
    // cminflt majflt cmajflt utime stime cutime cstime priority nice
    // num_threads itrealvalue starttime(19).
    let f: Vec<&str> = rest.split_ascii_whitespace().take(20).collect();
    Some(Stat {
        ppid: f.get(1)?.parse().ok()?,
        comm,
        flags: f.get(6)?.parse().ok()?,
        starttime: f.get(19)?.parse().ok()?,
    })
}

/// Reads a small `/proc` file into `buf` (cleared first): `openat`, as few
/// `read`s as the size needs, `close`. A short read is taken as the end: for
/// `stat`, `cmdline` and `environ` the kernel fills the whole buffer unless
/// the content ends, so the extra `read` returning 0 is saved.
fn read_proc(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.clear();
    if buf.capacity() < 4096 {
        buf.reserve(4096);
    }
    let mut f = std::fs::File::open(path)?;
    loop {
        let len = buf.len();
        let cap = buf.capacity();
        buf.resize(cap, 0);
        let n = match f.read(&mut buf[len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                buf.truncate(len);
                continue;
            }
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        };
        buf.truncate(len + n);
        if n == 0 || len + n < cap {
            return Ok(());
        }
        buf.reserve(cap);
    }
}

/// Reads `/proc/PID/environ` and keeps only the two lease variables. The raw
/// buffer is overwritten before it is dropped. The flag is true when the read
/// was refused (another user's process), false when it worked or the process
/// exited meanwhile.
fn read_lease_env(dir: &Path) -> (EnvRead, bool) {
    let mut buf = Vec::with_capacity(16 * 1024);
    let res = read_proc(&dir.join("environ"), &mut buf);
    let out = match res {
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ESRCH) =>
        {
            (EnvRead::Unreadable("the process exited".into()), false)
        }
        Err(e) => (EnvRead::Unreadable(io_why(&e)), true),
        Ok(()) => {
            let mut enable = None;
            let mut stamp = None;
            for entry in buf.split(|b| *b == 0) {
                if let Some(v) = entry.strip_prefix(format!("{ENABLE}=").as_bytes()) {
                    enable = Some(String::from_utf8_lossy(v).into_owned());
                } else if let Some(v) = entry.strip_prefix(format!("{HELD}=").as_bytes()) {
                    stamp = Some(String::from_utf8_lossy(v).into_owned());
                }
            }
            (EnvRead::Read { enable, stamp }, false)
        }
    };
    // Overwrite everything the buffer ever held, not just its length.
    let cap = buf.capacity();
    buf.clear();
    buf.resize(cap, 0);
    out
}

/// The descriptors of `pid` on a file named `.writer.lock`. One `readlink`
/// per descriptor (procfs's `Process::fd` spends four syscalls on each).
/// A refused read (another user's process) is reported in `unreadable`; a
/// process or descriptor that vanished meanwhile is simply absent.
fn lock_fds(root: &Path, pid: u32) -> FdsRead {
    let dir = root.join(pid.to_string()).join("fd");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FdsRead::default(),
        Err(e) => {
            return FdsRead {
                fds: Vec::new(),
                unreadable: Some(format!("/proc/{pid}/fd: {}", io_why(&e))),
            }
        }
    };
    let mut out = FdsRead::default();
    for e in entries.flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let target = match std::fs::read_link(e.path()) {
            Ok(t) => t,
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
                out.unreadable = Some(format!("/proc/{pid}/fd/{fd}: permission denied"));
                continue;
            }
            // Gone meanwhile.
            Err(_) => continue,
        };
        // Not a path (socket, pipe, anon inode).
        if !target.is_absolute() {
            continue;
        }
        match lock_fd(root, pid, fd, &target) {
            Ok(Some(l)) => out.fds.push(l),
            Ok(None) => {}
            Err(why) => out.unreadable = Some(why),
        }
    }
    out
}

/// If descriptor `fd` (pointing at `target`) is on a file named
/// `.writer.lock`, its identity and the FLOCK lines of its fdinfo. An error
/// says what could not be read.
fn lock_fd(root: &Path, pid: u32, fd: i32, target: &Path) -> Result<Option<LockFd>, String> {
    let shown = target.to_string_lossy();
    let trimmed = shown.strip_suffix(" (deleted)").unwrap_or(&shown);
    if Path::new(trimmed)
        .file_name()
        .is_none_or(|n| n != LOCK_NAME)
    {
        return Ok(None);
    }
    let link = root.join(pid.to_string()).join("fd").join(fd.to_string());
    let md = match std::fs::metadata(&link) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(format!("/proc/{pid}/fd/{fd}: permission denied"))
        }
        Err(_) => return Ok(None),
    };
    let fdinfo = root
        .join(pid.to_string())
        .join("fdinfo")
        .join(fd.to_string());
    let f = match std::fs::File::open(fdinfo) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("/proc/{pid}/fdinfo/{fd}: {}", io_why(&e))),
    };
    let lines: String = std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix("lock:").map(|s| s.trim().to_string()))
        .map(|l| l + "\n")
        .collect();
    let lock_ids = procfs::Locks::from_buf_read(lines.as_bytes())
        .map(|parsed| {
            parsed
                .0
                .into_iter()
                .filter(|l| l.lock_type == procfs::LockType::FLock)
                .map(|l| (l.devmaj, l.devmin, l.inode))
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(LockFd {
        dev: md.dev(),
        ino: md.ino(),
        path: sanitize(&shown),
        link,
        target: PathBuf::from(trimmed),
        lock_ids,
    }))
}

/// Granted FLOCK entries of `{root}/locks`. Lines starting `->` are blocked
/// requests, not holders, and are dropped before parsing.
fn read_proc_locks(root: &Path) -> Vec<procfs::Lock> {
    let Ok(text) = std::fs::read_to_string(root.join("locks")) else {
        return Vec::new();
    };
    let granted: String = text
        .lines()
        .filter(|l| !l.contains(" -> ") && !l.contains(":->"))
        .map(|l| format!("{}\n", l.trim()))
        .collect();
    procfs::Locks::from_buf_read(granted.as_bytes())
        .map(|l| l.0)
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l.lock_type == procfs::LockType::FLock)
        .collect()
}

/// Scans several pods (each with its own options) and merges the results
/// into one `pod` section: processes by pid, locks by path, verdicts by kind
/// then pids, as one scan orders them.
///
/// Errors: the first scan's error.
pub fn scan_all(scans: &[ScanOptions]) -> Result<PodSnapshot, WriterError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_stat_takes_comm_up_to_the_last_paren() {
        let line =
            b"4711 (a) b (c) S 42 4711 4711 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 0 0\n";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.comm, "a) b (c");
        assert_eq!(s.ppid, 42);
        assert_eq!(s.flags, 4194560);
        assert_eq!(s.starttime, 123456);
        assert!(parse_stat(b"4711 (x) S 42").is_none());
        assert!(parse_stat(b"garbage").is_none());
    }

    #[test]
    fn read_proc_reads_files_larger_than_the_first_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let mut buf = Vec::new();
        read_proc(&p, &mut buf).unwrap();
        assert_eq!(buf, data);
        // And /proc itself: our own stat parses, with our own pid's parent.
        read_proc(Path::new("/proc/self/stat"), &mut buf).unwrap();
        let s = parse_stat(&buf).unwrap();
        assert_eq!(s.ppid, nix::unistd::getppid().as_raw() as u32);
    }
}
