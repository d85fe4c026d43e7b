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

/// A lock file to inspect: its shown path, and the paths to open it by for a
/// probe (the path itself, or the `/proc/PID/fd/N` link of a descriptor on it
/// and the link's target, first that opens wins).
pub(super) struct LockTarget {
    pub(super) path: String,
    probe: Vec<PathBuf>,
    /// Why it is not a lock file at all (a symbolic link, a directory…):
    /// its state is then unknown, never free.
    not_a_lock: Option<&'static str>,
}

/// The lock files to inspect, keyed by [`FileKey`]: those in `opts.data_dirs`,
/// or (none given) every lock file that a process of `owners` has open.
///
/// # Errors
/// [`WriterError::Open`] when a given data directory is not a directory: a
/// typo in `--data-dir` must not read as "free, healthy".
pub(super) fn lock_targets(
    table: &ProcTable,
    opts: &ScanOptions,
    owners: &[u32],
) -> Result<BTreeMap<FileKey, LockTarget>, WriterError> {
    let mut lock_keys: BTreeMap<FileKey, LockTarget> = BTreeMap::new();
    if opts.data_dirs.is_empty() {
        for &pid in owners {
            for fd in &table.fds(pid).fds {
                lock_keys
                    .entry((fd.dev, fd.ino))
                    .or_insert_with(|| LockTarget {
                        path: fd.path.clone(),
                        probe: vec![fd.link.clone(), fd.target.clone()],
                        not_a_lock: None,
                    });
            }
        }
        return Ok(lock_keys);
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
        // A lock file removed while held stays locked, under its old name
        // with " (deleted)": its holders' descriptors show it.
        let canonical = std::fs::canonicalize(dir).map(|d| d.join(LOCK_NAME)).ok();
        let current = std::fs::symlink_metadata(&path)
            .map(|m| (m.dev(), m.ino()))
            .ok();
        for &pid in owners {
            for fd in &table.fds(pid).fds {
                if Some(&fd.target) == canonical.as_ref() && Some((fd.dev, fd.ino)) != current {
                    lock_keys
                        .entry((fd.dev, fd.ino))
                        .or_insert_with(|| LockTarget {
                            path: fd.path.clone(),
                            probe: vec![fd.link.clone()],
                            not_a_lock: None,
                        });
                }
            }
        }
        match std::fs::symlink_metadata(&path) {
            // A link, a directory, a FIFO…: `writer exec` refuses it, and it
            // is never opened here either (a link could point anywhere).
            Ok(md) if !md.file_type().is_file() => {
                let what = crate::writer::not_regular(&md.file_type()).unwrap_or("not a file");
                lock_keys
                    .entry((md.dev(), md.ino()))
                    .or_insert_with(|| LockTarget {
                        path: format!("{shown} ({what}, not a lock file: writer exec refuses it)"),
                        probe: Vec::new(),
                        not_a_lock: Some(what),
                    });
            }
            Ok(md) => {
                lock_keys
                    .entry((md.dev(), md.ino()))
                    .or_insert_with(|| LockTarget {
                        path: shown,
                        probe: vec![path],
                        not_a_lock: None,
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
                        not_a_lock: None,
                    },
                );
            }
        }
    }
    Ok(lock_keys)
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
            if target.probe.is_empty() {
                continue; // a missing file: nothing can lock it
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
    for (key, target) in ordered {
        lock_index.insert(*key, locks.len());
        locks.push(lock_state(table, key, target, ev, proc_locks));
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
    } else if let Some(what) = target.not_a_lock {
        (
            LockFileState::Unknown,
            format!("it is {what}, not a regular file: no writer can lock it (writer exec refuses it), and it is not opened here"),
        )
    } else if target.probe.is_empty() {
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
            LockFileState::Held | LockFileState::HeldOutsideNamespace
        ),
        holders: held_by.into_iter().collect(),
        proc_locks_pids: taken_by.into_iter().collect(),
        state,
        state_reason,
    }
}

/// The state of a lock file no visible process shows locked, from the
/// kernel's answer to [`probe_locked`] on the first of `paths` that opens.
fn probed_state(paths: &[PathBuf]) -> (LockFileState, String) {
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

/// The pids, joined by ", ".
fn join_set(pids: &BTreeSet<u32>) -> String {
    let v: Vec<String> = pids.iter().map(u32::to_string).collect();
    v.join(", ")
}

/// `pids` with their command lines, for messages.
fn describe_pids(table: &ProcTable, pids: BTreeSet<u32>) -> Vec<HolderDesc> {
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

/// Finds the processes holding a flock on a file that was `lock_path` and has
/// been removed since (its descriptor's link reads `… (deleted)`, or the path
/// now names another file): orphaned holders, who still believe they are the
/// writer. Best effort, by what this `/proc` shows (a holder in another PID
/// or mount namespace is not seen).
pub fn orphaned_lock_holders(proc_root: &Path, lock_path: &Path) -> Vec<HolderDesc> {
    let current = std::fs::symlink_metadata(lock_path)
        .map(|m| (m.dev(), m.ino()))
        .ok();
    // Descriptors name the file by its absolute, resolved path.
    let lock_path = &lock_path
        .parent()
        .and_then(|d| std::fs::canonicalize(d).ok())
        .map_or_else(|| lock_path.to_owned(), |d| d.join(LOCK_NAME));
    let Ok(table) = ProcTable::read(proc_root) else {
        return Vec::new();
    };
    let mut pids = BTreeSet::new();
    for p in table.procs.values().filter(|p| !p.kthread) {
        let fds = table.fds(p.pid);
        if fds.fds.iter().any(|fd| {
            fd.target == *lock_path && Some((fd.dev, fd.ino)) != current && !fd.lock_ids.is_empty()
        }) {
            pids.insert(p.pid);
        }
    }
    describe_pids(&table, pids)
}

/// Finds the processes holding `lock_path` (by inode, through `fdinfo`), for
/// the fail-closed message of [`crate::writer::flock::acquire`]. Falls back to the
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
    describe_pids(&table, pids)
}
