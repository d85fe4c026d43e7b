//! The lock files a pod scan inspects ([`lock_targets`]): a data
//! directory's `.writer.lock`, resolved where the pod sees it ([`Place`]),
//! or every `.writer.lock` a process has open, each with the ways to open it
//! for the kernel's probe; and the deleted lock files still held flocked
//! in their directories (orphaned locks).

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::io_why;
use super::model::NsRelation;
use super::ns::ViewerFacts;
use super::proc::{ProcTable, Want};
use super::ScanOptions;
use crate::writer::{sanitize, WriterError, LOCK_NAME};

/// A file's identity: `(st_dev, st_ino)`.
pub(super) type FileKey = (u64, u64);

/// A lock file to inspect: its shown path, what it is, and the ways to open
/// it for a probe (first that opens the file itself wins).
pub(super) struct LockTarget {
    pub(super) path: String,
    pub(super) probe: Vec<Probe>,
    pub(super) kind: TargetKind,
    /// Found through a process's descriptor (not a data directory): a probe
    /// that cannot reach it does not make it free.
    pub(super) by_fd: bool,
}

/// A way to open a lock file for the probe ([`super::probe::probe_locked`]);
/// what opens is checked to be the file the target is (device and inode).
pub(super) enum Probe {
    /// A `/proc/PID/fd/N` link (its last component followed).
    FdLink(PathBuf),
    /// A path in the viewer's own view of the file system, which is the
    /// process's (never followed).
    Path(PathBuf),
    /// A process's path, resolved in its root (`/proc/PID/root`).
    InRoot { pid: u32, path: PathBuf },
    /// `.writer.lock` in an open data directory (never followed).
    InDir(Arc<OwnedFd>),
}

/// What a lock file to inspect is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TargetKind {
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
    /// A data directory of the pod that could not be resolved in the pod's
    /// mount namespace; the sentence says why.
    Unresolved(String),
}

/// Where `--data-dir` paths are resolved: in the viewer's own view of the
/// file system (no `--pod-root`, or a pod root that shares it), or in pod
/// root PID's, through `/proc/PID/root` (see [`super::ns`]).
pub(super) enum Place {
    /// The viewer's view.
    Viewer,
    /// Process `pid`'s, with its root opened (or why it could not be).
    /// `also`: one more place of an auto-detected pod (a process with a
    /// lease variable in another mount namespace), where the directory may
    /// be missing and the lock file's path says whose it is.
    PodRoot {
        pid: u32,
        root: Result<OwnedFd, std::io::Error>,
        also: bool,
    },
}

impl Place {
    /// The places for `opts`: pod root R's view unless R shares the
    /// viewer's; without a pod root, the viewer's and, when data directories
    /// are given, that of one process with a lease variable of each other
    /// mount namespace among `user_pids` (the pod's paths are its own, and a
    /// process seen in another namespace may hold the lock file its path
    /// names there).
    pub(super) fn of(table: &ProcTable, opts: &ScanOptions, user_pids: &[u32]) -> Vec<Place> {
        let at = |pid: u32, also: bool| Place::PodRoot {
            pid,
            root: super::ns::open_root(table.root(), pid),
            also,
        };
        match opts.pod_root {
            Some(r) if table.mount_relation(r).0 != NsRelation::Same => vec![at(r, false)],
            Some(_) => vec![Place::Viewer],
            None if opts.data_dirs.is_empty() => vec![Place::Viewer],
            None => {
                let mut places = vec![Place::Viewer];
                let mut seen = std::collections::BTreeSet::new();
                for &pid in user_pids {
                    let leased = matches!(
                        table.env(pid),
                        super::EnvRead::Read {
                            enable: Some(_),
                            ..
                        } | super::EnvRead::Read { stamp: Some(_), .. }
                    );
                    if !leased || table.mount_relation(pid).0 == NsRelation::Same {
                        continue;
                    }
                    // One process per namespace (unknown ones each count).
                    let id = table.mnt_id(pid);
                    if id.is_none() || seen.insert(id) {
                        places.push(at(pid, true));
                    }
                }
                places
            }
        }
    }

    /// The mount namespace paths are resolved in, by its `ns/mnt` link.
    fn mnt_id(&self, table: &ProcTable) -> Option<std::ffi::OsString> {
        match self {
            Place::Viewer => table.mnt_id(0),
            Place::PodRoot { pid, .. } => table.mnt_id(*pid),
        }
    }
}

/// Where a live lock file is, as the kernel shows its path: for finding the
/// processes that hold a deleted one there.
struct Home {
    /// The lock file's path, in the mount namespace `ns`.
    at: PathBuf,
    /// The device of its directory.
    dev: u64,
    /// The mount namespace `at` is a path of (`None`: not readable).
    ns: Option<std::ffi::OsString>,
    /// The lock file.
    key: FileKey,
}

/// The lock files to inspect, keyed by [`FileKey`]: those in `opts.data_dirs`
/// (resolved at `place`), or (none given) every lock file that a process of
/// `owners` has open; and, for each directory of them, every *deleted*
/// `.writer.lock` of it that a process of `user_pids` still holds flocked
/// (an orphaned lock: the file was removed or replaced while held).
///
/// # Errors
/// [`WriterError::Open`] when a given data directory is not a directory: a
/// typo in `--data-dir` must not read as "free, healthy".
pub(super) fn lock_targets(
    table: &ProcTable,
    opts: &ScanOptions,
    places: &[Place],
    owners: &[u32],
    user_pids: &[u32],
) -> Result<BTreeMap<FileKey, LockTarget>, WriterError> {
    let mut lock_keys: BTreeMap<FileKey, LockTarget> = BTreeMap::new();
    let mut homes: Vec<Home> = Vec::new();
    if opts.data_dirs.is_empty() {
        for &pid in owners {
            fd_targets(table, pid, &mut lock_keys, &mut homes);
        }
    }
    for dir in &opts.data_dirs {
        for place in places {
            // The key (0, n) never matches a real file: n keeps it unique.
            let synthetic = (0, lock_keys.len() as u64);
            let Some((key, target, home)) = data_dir_target(dir, place, synthetic)? else {
                continue;
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
            if let Some((at, dev)) = home {
                homes.push(Home {
                    at,
                    dev,
                    ns: place.mnt_id(table),
                    key,
                });
            }
        }
    }
    add_orphans(table, user_pids, &homes, &mut lock_keys);
    Ok(lock_keys)
}

/// The lock files process `pid` has open, as targets, with their homes. A
/// file's path is the process's: the probe opens it by the descriptor, else
/// by that path in the process's root (in the viewer's own view only where
/// the process shares it).
fn fd_targets(
    table: &ProcTable,
    pid: u32,
    lock_keys: &mut BTreeMap<FileKey, LockTarget>,
    homes: &mut Vec<Home>,
) {
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
                        by_fd: true,
                    });
            }
            continue;
        }
        lock_keys.entry((fd.dev, fd.ino)).or_insert_with(|| {
            let by_path = if table.mount_relation(pid).0 == NsRelation::Same {
                Probe::Path(fd.target.clone())
            } else {
                Probe::InRoot {
                    pid,
                    path: fd.target.clone(),
                }
            };
            LockTarget {
                path: fd.path.clone(),
                probe: vec![Probe::FdLink(fd.link.clone()), by_path],
                kind: TargetKind::Present,
                by_fd: true,
            }
        });
        homes.push(Home {
            at: fd.target.clone(),
            dev: fd.dev,
            ns: table.mnt_id(pid),
            key: (fd.dev, fd.ino),
        });
    }
}

/// The target of data directory `dir` resolved at `place` (its key, or
/// `synthetic` when it names no file), and the path and device of its lock
/// file as the kernel shows them (for orphans); `None` for a directory
/// missing at one more place of an auto-detected pod.
///
/// # Errors
/// [`WriterError::Open`] when `dir` names no directory where it must.
fn data_dir_target(
    dir: &Path,
    place: &Place,
    synthetic: FileKey,
) -> Result<Option<DirTarget>, WriterError> {
    use nix::fcntl::OFlag;
    let mut shown = sanitize(&dir.join(LOCK_NAME).to_string_lossy());
    if let Place::PodRoot {
        pid, also: true, ..
    } = place
    {
        shown = format!("{shown} (in pid {pid}'s mount namespace)");
    }
    let unresolved = |why: String| {
        let t = LockTarget {
            path: shown.clone(),
            probe: Vec::new(),
            kind: TargetKind::Unresolved(why),
            by_fd: false,
        };
        Ok(Some((synthetic, t, None)))
    };
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let opened = match place {
        Place::Viewer => nix::fcntl::open(dir, flags, nix::sys::stat::Mode::empty())
            .map_err(std::io::Error::from),
        Place::PodRoot { root: Ok(r), .. } => {
            super::ns::open_in_root(r, &std::path::absolute(dir).unwrap_or(dir.into()), flags)
        }
        // A process of an auto-detected pod that ended while it was scanned:
        // its mount namespace is no place of the pod any more (its locks went
        // with it, or live on in processes that are places of their own).
        Place::PodRoot {
            root: Err(e),
            also: true,
            ..
        } if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Place::PodRoot {
            pid, root: Err(e), ..
        } => {
            return unresolved(format!(
                "--data-dir {} is a path of pid {pid}'s mount namespace, and /proc/{pid}/root could not be opened to resolve it there ({}): {}",
                sanitize(&dir.to_string_lossy()),
                io_why(e),
                ViewerFacts::current().remedy()
            ))
        }
    };
    let dirfd = match (opened, place) {
        (Ok(d), _) => d,
        (Err(e), Place::PodRoot { pid, .. }) if super::ns::denied(&e) => {
            return unresolved(format!(
                "--data-dir {} could not be resolved in pid {pid}'s mount namespace ({})",
                sanitize(&dir.to_string_lossy()),
                io_why(&e)
            ));
        }
        (Err(_), Place::PodRoot { also: true, .. }) => return Ok(None),
        // A typo in --data-dir must not read as "free, healthy".
        (Err(_), _) => {
            let what = match place {
                Place::Viewer => {
                    "the data directory does not exist or is not a directory".to_string()
                }
                Place::PodRoot { pid, .. } => format!(
                    "the data directory does not exist or is not a directory in pod root {pid}'s mount namespace (resolved through /proc/{pid}/root: give the path as the pod sees it)"
                ),
            };
            return Err(WriterError::Open {
                path: dir.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, what),
            });
        }
    };
    let home = match (super::ns::fd_path(&dirfd), nix::sys::stat::fstat(&dirfd)) {
        (Some(real), Ok(st)) => Some((real.join(LOCK_NAME), st.st_dev)),
        _ => None,
    };
    use nix::sys::stat::{fstatat, SFlag};
    let (key, kind, probe) =
        match fstatat(&dirfd, LOCK_NAME, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG => (
                (st.st_dev, st.st_ino),
                TargetKind::Present,
                vec![Probe::InDir(Arc::new(dirfd))],
            ),
            // Never opened nor followed: a symbolic link may name anything.
            Ok(st) => (
                synthetic,
                TargetKind::NotRegular(what_it_is(&dirfd, st.st_mode)),
                Vec::new(),
            ),
            Err(_) => (synthetic, TargetKind::Missing, Vec::new()),
        };
    let target = LockTarget {
        path: shown,
        probe,
        kind,
        by_fd: false,
    };
    Ok(Some((key, target, home)))
}

/// A data directory's lock file: its key, its target, and where it is as
/// the kernel shows it (path and device).
type DirTarget = (FileKey, LockTarget, Option<(PathBuf, u64)>);

/// Adds to `lock_keys` every deleted `.writer.lock` that a process of
/// `pids` holds flocked and that was at one of `homes` (its path, as the
/// kernel shows it, and its device), with the key of the lock file that
/// path names now.
fn add_orphans(
    table: &ProcTable,
    pids: &[u32],
    homes: &[Home],
    lock_keys: &mut BTreeMap<FileKey, LockTarget>,
) {
    if homes.is_empty() {
        return;
    }
    // Every process's descriptors are read: side by side when there are many.
    table.prefetch(pids, Want::FDS);
    for &pid in pids {
        for fd in table
            .fds(pid)
            .fds
            .iter()
            .filter(|fd| fd.deleted && !fd.lock_ids.is_empty())
        {
            // A path is a path of one mount namespace: the same words in
            // another (another pod's emptyDir on the same disk) name another
            // directory.
            let ns = table.mnt_id(pid);
            let Some(home) = homes.iter().find(|h| {
                h.dev == fd.dev
                    && h.at == fd.target
                    && (h.ns.is_none() || ns.is_none() || h.ns == ns)
            }) else {
                continue;
            };
            let t = lock_keys
                .entry((fd.dev, fd.ino))
                .or_insert_with(|| LockTarget {
                    path: fd.path.clone(),
                    probe: Vec::new(),
                    kind: TargetKind::Deleted { current: None },
                    by_fd: true,
                });
            if let TargetKind::Deleted { current: c @ None } = &mut t.kind {
                *c = Some(home.key);
            }
        }
    }
}

/// What the lock file of the open directory `dir`, of mode `mode`, is when
/// it is not a regular file, in words: "a symbolic link to \"…\"", "a FIFO",
/// "a directory" (escaped), as [`crate::writer::not_regular`] names them.
fn what_it_is(dir: &OwnedFd, mode: u32) -> String {
    use nix::sys::stat::SFlag;
    let t = SFlag::from_bits_truncate(mode) & SFlag::S_IFMT;
    if t == SFlag::S_IFLNK {
        match nix::fcntl::readlinkat(dir, LOCK_NAME) {
            Ok(t) => format!("a symbolic link to \"{}\"", sanitize(&t.to_string_lossy())),
            Err(_) => "a symbolic link".to_string(),
        }
    } else if t == SFlag::S_IFDIR {
        "a directory".to_string()
    } else if t == SFlag::S_IFIFO {
        "a FIFO".to_string()
    } else if t == SFlag::S_IFSOCK {
        "a socket".to_string()
    } else {
        "a device or other special file".to_string()
    }
}
