//! The lock files of a pod scan: which `.writer.lock` files to inspect, who
//! opens and who holds each (by `fdinfo`, then `/proc/locks`), and whether
//! each is locked at all, asking the kernel with [`probe_locked`] when no
//! process visible here shows the lock. Also [`lock_holders`], the
//! fail-closed message's view of one lock file.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::model::ObservedLock;
use super::proc::{io_why, read_proc_locks, ProcTable, RawProc};
use super::{LockFileState, ScanOptions};
use crate::writer::error::HolderDesc;
use crate::writer::{sanitize, WriterError, LOCK_NAME};

/// A file's identity: `(st_dev, st_ino)`.
pub(super) type FileKey = (u64, u64);

/// A lock's file as the kernel names it in `/proc/locks`: `(major, minor, inode)`.
type KernelId = (u32, u32, u64);

/// A lock file to inspect: its shown path, what it is, and the paths to
/// open it by for a probe (the path itself, or the `/proc/PID/fd/N` link of
/// a descriptor on it and the link's target, first that opens wins; the flag
/// says whether the last component may be followed, true only for the
/// `/proc` link).
pub(super) struct LockTarget {
    pub(super) path: String,
    probe: Vec<(PathBuf, bool)>,
    kind: TargetKind,
}

/// What a lock file to inspect is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TargetKind {
    /// A file the path names (or a descriptor on one).
    Present,
    /// The path names no file.
    Missing,
    /// The path names something that is not a regular file; the words say
    /// what ("a symbolic link to \"/etc/nologin\"").
    NotRegular(String),
    /// A deleted `.writer.lock` that a process still holds flocked; `current`
    /// is the target the path names now, when it is inspected too.
    Deleted { current: Option<FileKey> },
}

/// The lock files to inspect, keyed by [`FileKey`]: those in `opts.data_dirs`,
/// or (none given) every lock file that a process of `owners` has open; and,
/// for each directory of them, every *deleted* `.writer.lock` of it that a
/// process of `user_pids` still holds flocked (an orphaned lock: the file
/// was removed or replaced while held).
///
/// # Errors
/// [`WriterError::Open`] when a given data directory is not a directory: a
/// typo in `--data-dir` must not read as "free, healthy".
pub(super) fn lock_targets(
    table: &ProcTable,
    opts: &ScanOptions,
    owners: &[u32],
    user_pids: &[u32],
) -> Result<BTreeMap<FileKey, LockTarget>, WriterError> {
    let mut lock_keys: BTreeMap<FileKey, LockTarget> = BTreeMap::new();
    // The path each inspected lock file has, as the kernel names it, with
    // its device and key: where orphaned locks are looked for.
    let mut homes: Vec<(PathBuf, u64, FileKey)> = Vec::new();
    if opts.data_dirs.is_empty() {
        for &pid in owners {
            for fd in &table.fds(pid).fds {
                if fd.deleted {
                    // Only a held deleted file matters (see below).
                    if !fd.lock_ids.is_empty() {
                        lock_keys
                            .entry((fd.dev, fd.ino))
                            .or_insert_with(|| LockTarget {
                                path: fd.path.clone(),
                                probe: Vec::new(),
                                kind: TargetKind::Deleted { current: None },
                            });
                    }
                    continue;
                }
                lock_keys
                    .entry((fd.dev, fd.ino))
                    .or_insert_with(|| LockTarget {
                        path: fd.path.clone(),
                        probe: vec![(fd.link.clone(), true), (fd.target.clone(), false)],
                        kind: TargetKind::Present,
                    });
                homes.push((fd.target.clone(), fd.dev, (fd.dev, fd.ino)));
            }
        }
    }
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
        // The key (0, n) never matches a real file: n keeps it unique.
        let synthetic = (0, lock_keys.len() as u64);
        let (key, target) = match std::fs::symlink_metadata(&path) {
            Ok(md) if md.file_type().is_file() => (
                (md.dev(), md.ino()),
                LockTarget {
                    path: shown,
                    probe: vec![(path.clone(), false)],
                    kind: TargetKind::Present,
                },
            ),
            // Never opened nor followed: a symbolic link may name anything.
            Ok(md) => (
                synthetic,
                LockTarget {
                    path: shown,
                    probe: Vec::new(),
                    kind: TargetKind::NotRegular(what_it_is(&path, &md)),
                },
            ),
            Err(_) => (
                synthetic,
                LockTarget {
                    path: shown,
                    probe: Vec::new(),
                    kind: TargetKind::Missing,
                },
            ),
        };
        let key = match lock_keys.get(&key) {
            Some(_) => key,
            None => {
                lock_keys.insert(key, target);
                key
            }
        };
        // Orphans are looked for by the path the kernel shows, which
        // resolves every symbolic link of the directory.
        if let (Ok(real), Ok(md)) = (std::fs::canonicalize(dir), std::fs::metadata(dir)) {
            homes.push((real.join(LOCK_NAME), md.dev(), key));
        }
    }
    add_orphans(table, user_pids, &homes, &mut lock_keys);
    Ok(lock_keys)
}

/// Adds to `lock_keys` every deleted `.writer.lock` that a process of
/// `pids` holds flocked and that was at one of `homes` (its path, as the
/// kernel shows it, and its device), with the key of the lock file that
/// path names now.
fn add_orphans(
    table: &ProcTable,
    pids: &[u32],
    homes: &[(PathBuf, u64, FileKey)],
    lock_keys: &mut BTreeMap<FileKey, LockTarget>,
) {
    if homes.is_empty() {
        return;
    }
    // Every process's descriptors are read: side by side when there are many.
    table.prefetch(pids, &[]);
    for &pid in pids {
        for fd in table
            .fds(pid)
            .fds
            .iter()
            .filter(|fd| fd.deleted && !fd.lock_ids.is_empty())
        {
            let Some((_, _, current)) = homes
                .iter()
                .find(|(at, dev, _)| *dev == fd.dev && *at == fd.target)
            else {
                continue;
            };
            let t = lock_keys
                .entry((fd.dev, fd.ino))
                .or_insert_with(|| LockTarget {
                    path: fd.path.clone(),
                    probe: Vec::new(),
                    kind: TargetKind::Deleted { current: None },
                });
            if let TargetKind::Deleted { current: c @ None } = &mut t.kind {
                *c = Some(*current);
            }
        }
    }
}

/// What a path that is not a regular file is, in words: "a symbolic link
/// to \"…\"", "a FIFO", "a directory" (escaped).
fn what_it_is(path: &Path, md: &std::fs::Metadata) -> String {
    let ft = md.file_type();
    if ft.is_symlink() {
        match std::fs::read_link(path) {
            Ok(t) => format!("a symbolic link to \"{}\"", sanitize(&t.to_string_lossy())),
            Err(_) => "a symbolic link".to_string(),
        }
    } else {
        crate::writer::not_regular(&ft)
            .unwrap_or("not a regular file")
            .to_string()
    }
}

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
            if matches!(target.kind, TargetKind::Missing | TargetKind::NotRegular(_)) {
                continue; // no file, or one never followed: nothing to match
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
    let (state, state_reason) = if let TargetKind::NotRegular(what) = &target.kind {
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
        probed_state(&target.probe)
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
/// kernel's answer to [`probe_locked`] on the first of `paths` that opens.
fn probed_state(paths: &[(PathBuf, bool)]) -> (LockFileState, String) {
    match probe_locked_any(paths) {
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
/// A symbolic link is not followed (`O_NOFOLLOW`, so `ELOOP`) and anything
/// but a regular file is not asked about: the probe never opens, through a
/// link planted as the lock file, a file it was not asked about.
///
/// # Errors
/// The error of `open` (e.g. permission denied, not found, `ELOOP` for a
/// symbolic link), an error for a file that is not a regular file, or the
/// error of `flock`.
pub fn probe_locked(path: &Path) -> std::io::Result<bool> {
    probe_locked_at(path, false)
}

/// [`probe_locked`], following a symbolic link as the last component only
/// when `follow` (for the `/proc/PID/fd/N` links, which are such links).
fn probe_locked_at(path: &Path, follow: bool) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK | nofollow)
        .open(path)?;
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
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

/// [`probe_locked`] on the first of `paths` that opens, following the last
/// component only where its flag says so (a `/proc/PID/fd/N` link).
fn probe_locked_any(paths: &[(PathBuf, bool)]) -> std::io::Result<bool> {
    let mut last = std::io::Error::from(std::io::ErrorKind::NotFound);
    for (p, follow) in paths {
        match probe_locked_at(p, *follow) {
            Ok(v) => return Ok(v),
            Err(e) => last = e,
        }
    }
    Err(last)
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
/// `fdinfo` shows a FLOCK `lock:` line. Invisible here: holders in another
/// PID namespace (no `/proc/PID`), in another mount namespace (the link
/// shows another path), processes whose descriptors may not be read (counted
/// in [`Orphans::unknown`]), and a lock file renamed away (not deleted).
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
    for &pid in &users {
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
