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

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use procfs::process::Process;
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
    /// What needs attention; empty when the pod is healthy.
    pub verdicts: Vec<Verdict>,
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

/// A process's relation to the lock file(s). Serialized as `holds|open|none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockState {
    /// Holds the flock (alone or sharing the open file description).
    Holds,
    /// Has the lock file open without holding it: waiting.
    Open,
    /// Does not have the lock file open.
    None,
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

    // Lock files to inspect, keyed by (st_dev, st_ino).
    let mut lock_keys: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut missing_paths: Vec<String> = Vec::new();
    if opts.data_dirs.is_empty() {
        for p in table.procs.values() {
            for fd in &p.lock_fds {
                lock_keys
                    .entry((fd.dev, fd.ino))
                    .or_insert_with(|| fd.path.clone());
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
            match std::fs::metadata(&path) {
                Ok(md) => {
                    lock_keys
                        .entry((md.dev(), md.ino()))
                        .or_insert_with(|| sanitize(&path.to_string_lossy()));
                }
                Err(_) => missing_paths.push(sanitize(&path.to_string_lossy())),
            }
        }
    }

    // Pod selection.
    let pod: BTreeSet<u32> = match opts.pod_root {
        Some(r) => {
            if !table.procs.contains_key(&r) {
                return Err(WriterError::Proc {
                    path: root.join(r.to_string()),
                    message: format!("pod root pid {r} does not exist"),
                });
            }
            table.descendants(r)
        }
        None => {
            let mut seeds = BTreeSet::new();
            for p in table.procs.values() {
                let opens_lock = p
                    .lock_fds
                    .iter()
                    .any(|fd| lock_keys.contains_key(&(fd.dev, fd.ino)));
                let has_var = matches!(table.env(p.pid), EnvRead::Read { enable, stamp } if enable.is_some() || stamp.is_some());
                if opens_lock || has_var {
                    seeds.insert(p.pid);
                }
            }
            table.with_ancestors(&seeds)
        }
    };

    // With --pod-root and auto-detection, only lock files the pod has open.
    if opts.pod_root.is_some() && opts.data_dirs.is_empty() {
        let used: BTreeSet<(u64, u64)> = pod
            .iter()
            .filter_map(|pid| table.procs.get(pid))
            .flat_map(|p| p.lock_fds.iter().map(|fd| (fd.dev, fd.ino)))
            .collect();
        lock_keys.retain(|k, _| used.contains(k));
    }

    // Order lock files by path for a deterministic index.
    let mut ordered: Vec<((u64, u64), String)> = lock_keys.into_iter().collect();
    ordered.sort_by(|a, b| a.1.cmp(&b.1));
    let index: BTreeMap<(u64, u64), usize> = ordered
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (*k, i))
        .collect();

    let proc_locks = read_proc_locks(root);
    let mut locks: Vec<ObservedLock> = Vec::new();
    for (key, path) in &ordered {
        // Kernel ids of this file: from stat, and from holders' fdinfo lines.
        let mut kernel_ids: BTreeSet<(u32, u32, u64)> = BTreeSet::new();
        kernel_ids.insert((
            nix::sys::stat::major(key.0) as u32,
            nix::sys::stat::minor(key.0) as u32,
            key.1,
        ));
        let mut holders = BTreeSet::new();
        for p in table.procs.values() {
            for fd in p.lock_fds.iter().filter(|fd| (fd.dev, fd.ino) == *key) {
                if !fd.lock_ids.is_empty() {
                    holders.insert(p.pid);
                    kernel_ids.extend(fd.lock_ids.iter().copied());
                }
            }
        }
        let mut proc_locks_pids = BTreeSet::new();
        let mut in_proc_locks = false;
        for l in &proc_locks {
            if kernel_ids.contains(&(l.devmaj, l.devmin, l.inode)) {
                in_proc_locks = true;
                if let Some(pid) = l.pid.and_then(|p| u32::try_from(p).ok()) {
                    proc_locks_pids.insert(pid);
                }
            }
        }
        // No fdinfo evidence: trust /proc/locks only for a live pid whose
        // descriptors we could not read (otherwise the pid may be reused).
        if holders.is_empty() {
            for pid in &proc_locks_pids {
                if table.procs.get(pid).is_some_and(|p| !p.fds_readable) {
                    holders.insert(*pid);
                }
            }
        }
        locks.push(ObservedLock {
            path: path.clone(),
            locked: in_proc_locks || !holders.is_empty(),
            holders: holders.into_iter().collect(),
            proc_locks_pids: proc_locks_pids.into_iter().collect(),
        });
    }
    for path in missing_paths {
        locks.push(ObservedLock {
            path,
            holders: Vec::new(),
            locked: false,
            proc_locks_pids: Vec::new(),
        });
    }

    let uptime = procfs::Uptime::from_file(root.join("uptime"))
        .ok()
        .map(|u| u.uptime);
    let tps = procfs::ticks_per_second() as f64;

    let mut processes = Vec::new();
    for pid in &pod {
        let Some(p) = table.procs.get(pid) else {
            continue;
        };
        let mut opens = BTreeSet::new();
        let mut holds = BTreeSet::new();
        for fd in &p.lock_fds {
            if let Some(&i) = index.get(&(fd.dev, fd.ino)) {
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
        });
    }
    Ok(Observed {
        processes,
        locks,
        alive: table.procs.keys().copied().collect(),
    })
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
    for p in table.procs.values() {
        for fd in p.lock_fds.iter().filter(|fd| (fd.dev, fd.ino) == key) {
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
                format!("environment unreadable: {}", sanitize(why)),
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
        let lock = if !p.holds.is_empty() {
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
    if !armed.is_empty() && !obs.locks.iter().any(|l| l.locked) {
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
                if lock.locked {
                    "a process this scan cannot see".to_string()
                } else {
                    "nobody right now".to_string()
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

    let mut locks: Vec<LockInfo> = obs
        .locks
        .iter()
        .map(|l| LockInfo {
            path: l.path.clone(),
            holders: l.holders.clone(),
            locked: l.locked,
            proc_locks_pids: l.proc_locks_pids.clone(),
        })
        .collect();
    locks.sort_by(|a, b| a.path.cmp(&b.path));
    verdicts.sort_by(|a, b| (a.kind, &a.pids, &a.message).cmp(&(b.kind, &b.pids, &b.message)));
    PodSnapshot {
        processes,
        locks,
        verdicts,
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
    path: String,
    /// `(maj, min, inode)` of each FLOCK `lock:` line in this fd's fdinfo.
    lock_ids: Vec<(u32, u32, u64)>,
}

#[derive(Debug)]
struct RawProc {
    pid: u32,
    ppid: u32,
    /// `comm` from `stat`; the command line is read only for the processes
    /// shown (see [`RawProc::command`]).
    comm: String,
    starttime: u64,
    lock_fds: Vec<LockFd>,
    fds_readable: bool,
    handle: Process,
}

impl RawProc {
    /// The command line, escaped (`[comm]` when empty). Read on demand: reading
    /// another process's `cmdline` copies from its memory, and most processes
    /// of a machine are not in the pod.
    fn command(&self) -> String {
        read_command(&self.handle, &self.comm)
    }
}

/// A one-pass read of every process under the proc root.
struct ProcTable {
    procs: BTreeMap<u32, RawProc>,
    env_cache: std::cell::RefCell<BTreeMap<u32, EnvRead>>,
}

impl ProcTable {
    fn read(root: &Path) -> Result<ProcTable, WriterError> {
        let iter =
            procfs::process::all_processes_with_root(root).map_err(|e| WriterError::Proc {
                path: root.to_path_buf(),
                message: e.to_string(),
            })?;
        let mut procs = BTreeMap::new();
        for handle in iter.flatten() {
            let Ok(stat) = handle.stat() else { continue };
            let Ok(pid) = u32::try_from(stat.pid) else {
                continue;
            };
            let (lock_fds, fds_readable) = match lock_fds(root, pid, &handle) {
                Some(fds) => (fds, true),
                None => (Vec::new(), false),
            };
            procs.insert(
                pid,
                RawProc {
                    pid,
                    ppid: u32::try_from(stat.ppid).unwrap_or(0),
                    comm: stat.comm,
                    starttime: stat.starttime,
                    lock_fds,
                    fds_readable,
                    handle,
                },
            );
        }
        Ok(ProcTable {
            procs,
            env_cache: Default::default(),
        })
    }

    /// The two lease variables of a process's initial environment (cached).
    fn env(&self, pid: u32) -> EnvRead {
        if let Some(e) = self.env_cache.borrow().get(&pid) {
            return e.clone();
        }
        let e = match self.procs.get(&pid) {
            Some(p) => read_lease_env(&p.handle),
            None => EnvRead::Unreadable("process vanished".into()),
        };
        self.env_cache.borrow_mut().insert(pid, e.clone());
        e
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

    fn with_ancestors(&self, seeds: &BTreeSet<u32>) -> BTreeSet<u32> {
        let mut out = BTreeSet::new();
        for &s in seeds {
            let mut pid = s;
            while out.insert(pid) {
                match self.procs.get(&pid) {
                    Some(p) if p.ppid != 0 && self.procs.contains_key(&p.ppid) => pid = p.ppid,
                    _ => break,
                }
            }
        }
        out
    }
}

fn read_command(handle: &Process, comm: &str) -> String {
    let mut buf = Vec::new();
    let ok = handle
        .open_relative("cmdline")
        .and_then(|f| read_proc_file(f, &mut buf).map_err(Into::into))
        .is_ok();
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

/// Reads `/proc/PID/environ` and keeps only the two lease variables. The raw
/// buffer is overwritten before it is dropped.
fn read_lease_env(handle: &Process) -> EnvRead {
    let mut buf = Vec::new();
    let res = handle
        .open_relative("environ")
        .and_then(|f| read_proc_file(f, &mut buf).map_err(Into::into));
    let out = match res {
        Err(e) => EnvRead::Unreadable(e.to_string()),
        Ok(_) => {
            let mut enable = None;
            let mut stamp = None;
            for entry in buf.split(|b| *b == 0) {
                if let Some(v) = entry.strip_prefix(format!("{ENABLE}=").as_bytes()) {
                    enable = Some(String::from_utf8_lossy(v).into_owned());
                } else if let Some(v) = entry.strip_prefix(format!("{HELD}=").as_bytes()) {
                    stamp = Some(String::from_utf8_lossy(v).into_owned());
                }
            }
            EnvRead::Read { enable, stamp }
        }
    };
    buf.iter_mut().for_each(|b| *b = 0);
    out
}

/// Reads a whole `/proc` file in as few reads as possible. `File::read_to_end`
/// would ask for the size and position first (two syscalls wasted: `/proc`
/// sizes are 0), then probe with 32-byte reads, each of which copies from the
/// other process's memory for `environ` and `cmdline`.
fn read_proc_file(f: std::fs::File, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    buf.reserve(16 * 1024);
    f.take(u64::MAX).read_to_end(buf)
}

/// The descriptors of `pid` on a file named `.writer.lock`, or `None` when its
/// descriptor table cannot be read. One `readlink` per descriptor (procfs's
/// `Process::fd` spends four syscalls on each), as every process is listed.
fn lock_fds(root: &Path, pid: u32, handle: &Process) -> Option<Vec<LockFd>> {
    let entries = std::fs::read_dir(root.join(pid.to_string()).join("fd")).ok()?;
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // Gone meanwhile, or not a path (socket, pipe, anon inode).
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if !target.is_absolute() {
            continue;
        }
        out.extend(lock_fd(root, pid, handle, fd, &target));
    }
    Some(out)
}

/// If descriptor `fd` (pointing at `target`) is on a file named
/// `.writer.lock`, its identity and the FLOCK lines of its fdinfo.
fn lock_fd(root: &Path, pid: u32, handle: &Process, fd: i32, target: &Path) -> Option<LockFd> {
    let shown = target.to_string_lossy();
    let trimmed = shown.strip_suffix(" (deleted)").unwrap_or(&shown);
    if Path::new(trimmed).file_name()? != LOCK_NAME {
        return None;
    }
    let md = std::fs::metadata(root.join(pid.to_string()).join("fd").join(fd.to_string())).ok()?;
    let mut lock_ids = Vec::new();
    if let Ok(f) = handle.open_relative(format!("fdinfo/{fd}")) {
        let lines: String = std::io::BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| l.strip_prefix("lock:").map(|s| s.trim().to_string()))
            .map(|l| l + "\n")
            .collect();
        if let Ok(parsed) = procfs::Locks::from_buf_read(lines.as_bytes()) {
            lock_ids = parsed
                .0
                .into_iter()
                .filter(|l| l.lock_type == procfs::LockType::FLock)
                .map(|l| (l.devmaj, l.devmin, l.inode))
                .collect();
        }
    }
    Some(LockFd {
        dev: md.dev(),
        ino: md.ino(),
        path: sanitize(&shown),
        lock_ids,
    })
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
    }
    out.processes.sort_by_key(|p| p.pid);
    out.processes.dedup_by_key(|p| p.pid);
    out.locks.sort_by(|a, b| a.path.cmp(&b.path));
    out.locks.dedup_by(|a, b| a.path == b.path);
    out.verdicts
        .sort_by(|a, b| (a.kind, &a.pids).cmp(&(b.kind, &b.pids)));
    out
}
