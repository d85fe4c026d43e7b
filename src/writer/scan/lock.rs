//! The lock files of a pod scan: which `.writer.lock` files to inspect, who
//! opens and who holds each (by `fdinfo`, then `/proc/locks`), and whether
//! each is locked at all, asking the kernel with [`probe_locked`] when no
//! process visible here shows the lock. Also [`lock_holders`], the
//! fail-closed message's view of one lock file.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::io_why;
use super::model::ObservedLock;
use super::probe::probe_target;
use super::proc::{read_proc_locks, ProcTable, RawProc};
use super::target::{FileKey, LockTarget, TargetKind};
use super::LockFileState;
use crate::writer::error::HolderDesc;
use crate::writer::LOCK_NAME;

/// A lock's file as the kernel names it in `/proc/locks`: `(major, minor, inode)`.
type KernelId = (u32, u32, u64);

/// Who opens which lock file, and who holds it by `fdinfo`, over every
/// process (a holder or a waiter outside the pod counts too).
#[derive(Default)]
pub(super) struct LockEvidence {
    /// The kernel's names of each lock file (its own, and those in holders' fdinfo).
    kernel_ids: BTreeMap<FileKey, BTreeSet<KernelId>>,
    /// The pids whose fdinfo shows a lock on each file.
    holders: BTreeMap<FileKey, BTreeSet<u32>>,
    /// The pids that have each file open.
    pub(super) openers: BTreeMap<FileKey, BTreeSet<u32>>,
}

impl LockEvidence {
    /// Reads the descriptors of every process of `user_pids` (lazily, once
    /// each) for the lock files of `lock_keys`.
    pub(super) fn gather(
        table: &ProcTable,
        lock_keys: &BTreeMap<FileKey, LockTarget>,
        user_pids: &[u32],
    ) -> LockEvidence {
        let mut ev = LockEvidence::default();
        for (key, target) in lock_keys {
            if matches!(
                target.kind,
                TargetKind::Missing | TargetKind::NotRegular(_) | TargetKind::Unresolved(_)
            ) {
                continue; // no file, or one never followed or found: nothing to match
            }
            ev.kernel_ids
                .entry(*key)
                .or_default()
                .insert(kernel_id(*key));
        }
        if lock_keys.is_empty() {
            return ev;
        }
        for &pid in user_pids {
            for fd in &table.fds(pid).fds {
                let key = (fd.dev, fd.ino);
                if !lock_keys.contains_key(&key) {
                    continue;
                }
                ev.openers.entry(key).or_default().insert(pid);
                if !fd.lock_ids.is_empty() {
                    ev.holders.entry(key).or_default().insert(pid);
                    ev.kernel_ids
                        .entry(key)
                        .or_default()
                        .extend(fd.lock_ids.iter().copied());
                }
            }
        }
        ev
    }
}

/// The kernel's name of the file `key`, as `/proc/locks` shows it.
fn kernel_id(key: FileKey) -> KernelId {
    (
        nix::sys::stat::major(key.0) as u32,
        nix::sys::stat::minor(key.0) as u32,
        key.1,
    )
}

/// The state of every lock file, sorted by path, and the index of each
/// file's entry by [`FileKey`]. Computed before pod selection: the takers
/// `/proc/locks` names are pod seeds.
pub(super) fn lock_states(
    table: &ProcTable,
    lock_keys: &BTreeMap<FileKey, LockTarget>,
    ev: &LockEvidence,
    proc_locks: &[procfs::Lock],
) -> (Vec<ObservedLock>, BTreeMap<FileKey, usize>) {
    let mut locks: Vec<ObservedLock> = Vec::new();
    let mut lock_index: BTreeMap<FileKey, usize> = BTreeMap::new();
    let mut ordered: Vec<(&FileKey, &LockTarget)> = lock_keys.iter().collect();
    ordered.sort_by(|a, b| a.1.path.cmp(&b.1.path));
    for (key, target) in &ordered {
        lock_index.insert(**key, locks.len());
        locks.push(lock_state(table, key, target, ev, proc_locks));
    }
    // An orphaned lock names the lock file its path names now.
    for (i, (_, target)) in ordered.iter().enumerate() {
        if let TargetKind::Deleted {
            current: Some(current),
        } = &target.kind
        {
            locks[i].current = lock_index.get(current).copied();
        }
    }
    (locks, lock_index)
}

/// One lock file's state: its holders by fdinfo (or, without fdinfo
/// evidence, the live unreadable takers `/proc/locks` names), else the
/// `/proc/locks` lines, else the kernel's answer to a shared probe.
fn lock_state(
    table: &ProcTable,
    key: &FileKey,
    target: &LockTarget,
    ev: &LockEvidence,
    proc_locks: &[procfs::Lock],
) -> ObservedLock {
    let ids = ev.kernel_ids.get(key).cloned().unwrap_or_default();
    let mut taken_by = BTreeSet::new();
    let mut in_proc_locks = false;
    for l in proc_locks {
        if ids.contains(&(l.devmaj, l.devmin, l.inode)) {
            in_proc_locks = true;
            if let Some(pid) = l.pid.and_then(|p| u32::try_from(p).ok()) {
                taken_by.insert(pid);
            }
        }
    }
    let mut held_by = ev.holders.get(key).cloned().unwrap_or_default();
    // No fdinfo evidence: trust /proc/locks only for a live pid whose
    // descriptors we could not read (otherwise the pid may be reused).
    if held_by.is_empty() {
        for pid in &taken_by {
            if table.procs.contains_key(pid) && table.fds(*pid).unreadable.is_some() {
                held_by.insert(*pid);
            }
        }
    }
    let (state, state_reason) = if let TargetKind::Unresolved(why) = &target.kind {
        (
            LockFileState::Unknown,
            format!("whether it is locked is unknown: {why}"),
        )
    } else if let TargetKind::NotRegular(what) = &target.kind {
        (
            LockFileState::NotRegular,
            format!(
                "it is {what}, not a regular file: writer exec refuses to take a lock through it, so whether it is locked is not asked"
            ),
        )
    } else if matches!(target.kind, TargetKind::Deleted { .. }) {
        if held_by.is_empty() && !in_proc_locks {
            (
                LockFileState::Free,
                "deleted, and no process holds a lock on it any more".to_string(),
            )
        } else {
            let who = if held_by.is_empty() {
                "a process this scan cannot see".to_string()
            } else {
                format!("pid {}", join_set(&held_by))
            };
            (
                LockFileState::Orphaned,
                format!(
                    "deleted while held: {who} still holds a flock on it, but the path no longer names this file, so a new taker gets a lock on another file that does not exclude {who}"
                ),
            )
        }
    } else if !held_by.is_empty() {
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
    } else if target.kind == TargetKind::Missing {
        (
            LockFileState::Free,
            "the file does not exist, so nobody holds it".to_string(),
        )
    } else {
        probed_state(table.root(), key, target)
    };
    ObservedLock {
        path: target.path.clone(),
        locked: matches!(
            state,
            LockFileState::Held | LockFileState::HeldOutsideNamespace | LockFileState::Orphaned
        ),
        holders: held_by.into_iter().collect(),
        proc_locks_pids: taken_by.into_iter().collect(),
        state,
        state_reason,
        deleted: matches!(target.kind, TargetKind::Deleted { .. }),
        current: None,
    }
}

/// The state of a lock file no visible process shows locked, from the
/// kernel's answer to [`probe_locked`] on the first of the target's ways to
/// open it that opens the file `key` itself.
fn probed_state(proc_root: &Path, key: &FileKey, target: &LockTarget) -> (LockFileState, String) {
    match probe_target(proc_root, *key, &target.probe) {
        Ok((true, None)) => (
            LockFileState::HeldOutsideNamespace,
            "held by a process outside this PID namespace: /proc/locks and fdinfo show no holder here, yet the kernel refused a non-blocking shared lock".to_string(),
        ),
        // A network file system's locks are its server's: a holder on
        // another node is in no /proc of this one.
        Ok((true, Some(fs))) => (
            LockFileState::HeldOutsideNamespace,
            format!(
                "held by a process outside this PID namespace or on another node: it is on {fs}, /proc/locks and fdinfo show no holder here, yet a non-blocking shared lock was refused"
            ),
        ),
        Ok((false, None)) => (
            LockFileState::Free,
            "nobody holds it: /proc/locks shows no holder and a non-blocking shared lock was granted (and released at once)".to_string(),
        ),
        Ok((false, Some(fs))) => (
            LockFileState::Free,
            format!(
                "nobody holds it: /proc/locks shows no holder and a non-blocking shared lock was granted (and released at once); it is on {fs}, whose server answered for every node unless the volume is mounted with local_lock=flock or all (then only this node was asked)"
            ),
        ),
        // A data directory's lock file removed since it was looked at: no
        // file, so nobody holds it. One a process has open exists.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !target.by_fd => (
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
}

/// The pids, joined by ", ".
fn join_set(pids: &BTreeSet<u32>) -> String {
    let v: Vec<String> = pids.iter().map(u32::to_string).collect();
    v.join(", ")
}

/// Finds the processes holding the file open as `lock` (by inode, through
/// `fdinfo`), for the fail-closed message of
/// [`crate::writer::flock::acquire`]. Falls back to the live pids
/// `/proc/locks` names. Best effort: returns an empty list when nothing can
/// be found.
pub fn lock_holders(proc_root: &Path, lock: &std::fs::File) -> Vec<HolderDesc> {
    let Ok(md) = lock.metadata() else {
        return Vec::new();
    };
    let Ok(table) = ProcTable::read(proc_root) else {
        return Vec::new();
    };
    let key = (md.dev(), md.ino());
    let mut pids = BTreeSet::new();
    let mut kernel_ids = BTreeSet::new();
    kernel_ids.insert(kernel_id(key));
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
    describe(&table, pids)
}

/// The processes holding a flock on a deleted `.writer.lock` of one
/// directory, as [`orphaned_holders`] found them.
#[derive(Debug, Default)]
pub struct Orphans {
    /// The holders (pid and escaped command line), sorted by pid.
    pub holders: Vec<HolderDesc>,
    /// What could not be looked at, as a sentence (processes whose
    /// descriptors could not be read, or `/proc` itself); `None` when
    /// every process was inspected.
    pub unknown: Option<String>,
}

/// The processes visible in `proc_root` that hold a flock on a **deleted**
/// `.writer.lock` of `data_dir`: the lock file was removed or replaced while
/// they held it, so they were never excluded by the file the path names now
/// (`ours`, the descriptor of that file). [`crate::writer::flock::acquire`]
/// treats them as holders.
///
/// A descriptor counts when its `/proc/PID/fd/N` link reads
/// `DIR/.writer.lock (deleted)` with `DIR` the directory's real path, its
/// file has no link left and sits on the directory's device, and its
/// `fdinfo` shows a FLOCK `lock:` line, and the process is in this
/// process's mount namespace (its `ns/mnt` link; where either link may not
/// be read, the path alone decides). Invisible here: holders in another PID
/// namespace (no `/proc/PID`), in another mount namespace (the same path
/// there names another directory, e.g. another pod's emptyDir on the same
/// disk), processes whose descriptors may not be read (counted in
/// [`Orphans::unknown`]), and a lock file renamed away (not deleted).
pub fn orphaned_holders(proc_root: &Path, data_dir: &Path, ours: &std::fs::File) -> Orphans {
    let mut out = Orphans::default();
    let (Ok(real), Ok(md)) = (std::fs::canonicalize(data_dir), ours.metadata()) else {
        out.unknown = Some("the data directory could not be resolved".to_string());
        return out;
    };
    let at = real.join(LOCK_NAME);
    let (dev, ino) = (md.dev(), md.ino());
    let table = match ProcTable::read(proc_root) {
        Ok(t) => t,
        Err(e) => {
            out.unknown = Some(e.to_string());
            return out;
        }
    };
    let users: Vec<u32> = table
        .procs
        .values()
        .filter(|p| !p.kthread)
        .map(|p| p.pid)
        .collect();
    table.prefetch(&users, &[]);
    let mut pids = BTreeSet::new();
    let mut unreadable = 0usize;
    // A path is one mount namespace's: a process in another sees other
    // directories under the same words.
    let ours = table.mnt_id(0);
    for &pid in &users {
        let theirs = table.mnt_id(pid);
        if ours.is_some() && theirs.is_some() && theirs != ours {
            continue;
        }
        let fds = table.fds(pid);
        if fds.unreadable.is_some() {
            unreadable += 1;
        }
        if fds.fds.iter().any(|fd| {
            fd.deleted
                && !fd.lock_ids.is_empty()
                && fd.dev == dev
                && fd.ino != ino
                && fd.target == at
        }) {
            pids.insert(pid);
        }
    }
    if unreadable > 0 {
        out.unknown = Some(format!(
            "{unreadable} process(es) could not be inspected ({})",
            super::notes::how_to_see()
        ));
    }
    out.holders = describe(&table, pids);
    out
}

/// Each pid with its escaped command line.
fn describe(table: &ProcTable, pids: BTreeSet<u32>) -> Vec<HolderDesc> {
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
