//! Taking and holding the pod writer lock: `flock(2)` on `{data_dir}/.writer.lock`.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::scan::orphaned_holders;
use super::{WriterError, LOCK_NAME};
use crate::logfile::{sole_regular_file, NotSole};
use crate::text::sanitize;

/// How often [`acquire`] retries a non-blocking flock: 100 ms.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The held writer lock. Dropping it releases the lock (the descriptor is
/// closed); [`WriterLock::release`] does the same and reports errors.
#[derive(Debug)]
pub(crate) struct WriterLock {
    path: PathBuf,
    lock: Flock<File>,
}

impl WriterLock {
    /// The lock file path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Unlocks and closes the lock file.
    ///
    /// # Errors
    /// [`WriterError::Flock`] if `flock(LOCK_UN)` fails (the descriptor is
    /// closed anyway, which also releases the lock).
    pub(crate) fn release(self) -> Result<(), WriterError> {
        let path = self.path;
        match self.lock.unlock() {
            Ok(_file) => Ok(()),
            Err((_lock, errno)) => Err(WriterError::Flock {
                path,
                source: errno,
            }),
        }
    }
}

/// How often [`acquire`] looks again while a holder of a deleted lock file
/// keeps it out: 1 s (each look reads every process's descriptors in `/proc`).
pub(crate) const ORPHAN_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How many times in a row [`acquire`] reopens a lock file that was removed
/// or replaced just as it was locked before it gives up: 20.
pub(crate) const MAX_REPLACED: u32 = 20;

/// Takes the exclusive writer lock of `data_dir`.
///
/// Opens `{data_dir}/.writer.lock` with `O_NOFOLLOW` (creating it, zero
/// length, mode 0644, when absent; close-on-exec, so spawned commands never
/// inherit it) and refuses it unless it is a regular file with one link,
/// owned by root or by this process's effective uid ([`open_lock_file`]).
/// Then retries a non-blocking `flock(LOCK_EX|LOCK_NB)` every
/// [`POLL_INTERVAL`] until it succeeds or `timeout` has passed (`timeout`
/// zero: one attempt).
///
/// A lock is only as good as the path naming the file locked, so:
/// - after each granted flock the path is checked to still name the locked
///   file (`fstat` of the descriptor against `lstat` of the path, device and
///   inode); when the file was removed or replaced meanwhile, the lock is
///   dropped and the file the path names now is opened and locked instead
///   (the local store's `lock_key` does the same);
/// - while polling, a path that no longer names the polled file is reopened;
/// - a granted lock is kept only when no process visible in `/proc` holds a
///   flock on a *deleted* `.writer.lock` of the same directory
///   ([`orphaned_holders`]): such a holder was never excluded by the new
///   file, so it counts as a holder, and the lock is dropped and polled
///   again (every [`ORPHAN_POLL_INTERVAL`]) until it is gone or `timeout`
///   passes.
///
/// # Errors
/// - [`WriterError::Timeout`] when the lock stayed held: the caller must fail
///   closed (seed: `Acquire`). The error names the holder pid(s) and command
///   lines when `/proc` shows them.
/// - [`WriterError::OrphanedLock`] when a process held a flock on a deleted
///   lock file of the directory for the whole wait (fail closed), naming it.
/// - [`WriterError::LockFileRefused`] for a lock file that is a symbolic
///   link, not a regular file, owned by another user or hard-linked.
/// - [`WriterError::LockFileUnstable`] when the file was replaced just as it
///   was locked [`MAX_REPLACED`] times in a row.
/// - [`WriterError::Open`] / [`WriterError::Flock`] on I/O errors.
pub(crate) fn acquire(data_dir: &Path, timeout: Duration) -> Result<WriterLock, WriterError> {
    let path = data_dir.join(LOCK_NAME);
    let start = Instant::now();
    let mut file = open_lock_file(&path)?;
    let mut replaced = 0u32;
    loop {
        // Who kept us out this round: a holder of the file (empty) or the
        // holders of a deleted lock file of the directory.
        let mut orphans = Vec::new();
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => {
                if !names_file(&path, &lock)? {
                    // Removed or replaced between the open and the flock: the
                    // lock excludes nobody who opens the path now.
                    drop(lock);
                    replaced += 1;
                    if replaced >= MAX_REPLACED {
                        return Err(WriterError::LockFileUnstable {
                            path,
                            tries: replaced,
                        });
                    }
                    file = open_lock_file(&path)?;
                    continue;
                }
                let found = orphaned_holders(Path::new("/proc"), data_dir, &lock);
                if found.holders.is_empty() {
                    if let Some(why) = &found.unknown {
                        tracing::warn!(
                            "{why}: whether a process there still holds a flock on a deleted {LOCK_NAME} of {} is unknown (see docs/writer-leases.md, \"What the pod view cannot know\")",
                            sanitize(&data_dir.to_string_lossy())
                        );
                    }
                    return Ok(WriterLock { path, lock });
                }
                orphans = found.holders;
                file = match lock.unlock() {
                    Ok(f) => f,
                    Err((_lock, errno)) => {
                        return Err(WriterError::Flock {
                            path,
                            source: errno,
                        })
                    }
                };
            }
            Err((f, Errno::EWOULDBLOCK)) | Err((f, Errno::EINTR)) => file = f,
            Err((_f, errno)) => {
                return Err(WriterError::Flock {
                    path,
                    source: errno,
                })
            }
        }
        replaced = 0;
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            if !orphans.is_empty() {
                return Err(WriterError::OrphanedLock {
                    path,
                    waited: timeout,
                    holders: orphans,
                });
            }
            let holders = super::scan::lock_holders(Path::new("/proc"), &file);
            return Err(WriterError::Timeout {
                path,
                waited: timeout,
                holders,
            });
        }
        let pause = if orphans.is_empty() {
            POLL_INTERVAL
        } else {
            ORPHAN_POLL_INTERVAL
        };
        std::thread::sleep(pause.min(timeout - elapsed));
        // The file may have been removed or replaced while we polled it: a
        // lock on it would exclude nobody who opens the path now.
        if !names_file(&path, &file)? {
            file = open_lock_file(&path)?;
        }
    }
}

/// Opens (creating it when absent) the lock file at `path` for [`acquire`],
/// refusing anything but a regular file with one link owned by root or by
/// this process's effective uid, the owners `writer exec` itself gives it.
///
/// Anything else is refused before it is opened, where `lstat` can tell,
/// and after, from the descriptor (`O_NOFOLLOW` keeps a symbolic link from
/// being followed; `O_NONBLOCK` and `O_NOCTTY` keep a FIFO or terminal
/// swapped in between from blocking or becoming ours). So a symbolic link
/// planted as `.writer.lock` never makes this process create or lock the
/// file it points to.
///
/// # Errors
/// [`WriterError::LockFileRefused`] with the sentence saying what the file is
/// and what to do; [`WriterError::Open`] on other I/O errors.
pub(crate) fn open_lock_file(path: &Path) -> Result<File, WriterError> {
    if let Ok(md) = std::fs::symlink_metadata(path) {
        refuse_unless_lock_file(path, &md)?;
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        // std adds O_CLOEXEC to every open.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            // ELOOP: a symbolic link; ENXIO: a socket, or a FIFO nobody reads.
            Some(libc::ELOOP | libc::ENXIO) => match std::fs::symlink_metadata(path) {
                Ok(md) => match refuse_unless_lock_file(path, &md) {
                    Err(e) => e,
                    Ok(()) => WriterError::Open {
                        path: path.to_path_buf(),
                        source,
                    },
                },
                Err(_) => WriterError::Open {
                    path: path.to_path_buf(),
                    source,
                },
            },
            _ => WriterError::Open {
                path: path.to_path_buf(),
                source,
            },
        })?;
    let md = file.metadata().map_err(|source| WriterError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    refuse_unless_lock_file(path, &md)?;
    Ok(file)
}

/// Refuses `md` (of `path`, from `lstat` or `fstat`) unless it is a regular
/// file with at most one link owned by root or by the effective uid.
fn refuse_unless_lock_file(path: &Path, md: &std::fs::Metadata) -> Result<(), WriterError> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| {
        Err(WriterError::LockFileRefused {
            path: path.to_path_buf(),
            why,
        })
    };
    let ft = md.file_type();
    if ft.is_symlink() {
        let to = std::fs::read_link(path)
            .map(|t| format!(" to \"{}\"", sanitize(&t.to_string_lossy())))
            .unwrap_or_default();
        return refuse(format!(
            "it is a symbolic link{to}, and the writer lock file must be a regular file (following the link would create and lock whatever it names, as this user). Remove the link; writer exec then creates a regular lock file"
        ));
    }
    // The rule every file leasectl appends to or locks by name keeps.
    let sole = sole_regular_file(md);
    if let Err(NotSole::NotRegular(ft)) = sole {
        let what = super::not_regular(&ft).unwrap_or("not a regular file");
        return refuse(format!(
            "it is {what}, not a regular file. Move it away; writer exec then creates a regular lock file"
        ));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if md.uid() != 0 && md.uid() != euid {
        return refuse(format!(
            "it is owned by uid {}, and writer exec takes only a lock file owned by root or by the user it runs as (uid {euid}), as it creates it itself. Check who put it there; if no process holds it, remove it (writer exec creates it afresh) or chown it to uid {euid}",
            md.uid()
        ));
    }
    if let Err(NotSole::Links(n)) = sole {
        return refuse(format!(
            "it has {n} hard links, so it is also another file, and the writer lock file has one name only. Check what else it is; if no process holds it, remove it and writer exec creates it afresh"
        ));
    }
    Ok(())
}

/// Whether `path` still names the file open as `file` (same device and
/// inode, the link itself not followed). False when the path is gone.
///
/// # Errors
/// [`WriterError::Open`] when either cannot be examined for another reason.
pub(crate) fn names_file(path: &Path, file: &File) -> Result<bool, WriterError> {
    use std::os::unix::fs::MetadataExt;
    let ours = file.metadata().map_err(|source| WriterError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    match std::fs::symlink_metadata(path) {
        Ok(now) => Ok(now.dev() == ours.dev() && now.ino() == ours.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(WriterError::Open {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads a variable from the real process environment (lossy for non-UTF-8,
/// so a garbage value is still seen and judged rather than treated as unset).
pub(crate) fn real_getenv(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::FORKS;

    /// The re-check of [`acquire`]: a descriptor stops naming the lock file
    /// once the path is removed, replaced by a new file, or renamed over.
    #[test]
    fn names_file_sees_a_removed_or_replaced_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_NAME);
        let first = open_lock_file(&path).unwrap();
        assert!(names_file(&path, &first).unwrap());
        std::fs::remove_file(&path).unwrap();
        assert!(!names_file(&path, &first).unwrap(), "removed");
        let second = open_lock_file(&path).unwrap();
        assert!(names_file(&path, &second).unwrap());
        assert!(
            !names_file(&path, &first).unwrap(),
            "replaced by a new file"
        );
        let other = dir.path().join("other");
        std::fs::write(&other, b"").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(!names_file(&path, &second).unwrap(), "renamed over");
    }

    /// A lock file taken while this very process holds a flock on a deleted
    /// one of the same directory is refused: the holder of the deleted file
    /// (here, us) was never excluded by the new one.
    #[test]
    fn acquire_refuses_beside_a_flock_on_a_deleted_lock_file() {
        // No other test's child, between its fork and exec, holds our flock too.
        let _forks = FORKS.write().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let old = acquire(dir.path(), Duration::ZERO).unwrap();
        std::fs::remove_file(dir.path().join(LOCK_NAME)).unwrap();
        let err = acquire(dir.path(), Duration::ZERO).unwrap_err();
        match &err {
            WriterError::OrphanedLock { holders, .. } => {
                assert_eq!(
                    holders.iter().map(|h| h.pid).collect::<Vec<_>>(),
                    vec![std::process::id()],
                    "{err}"
                );
            }
            other => panic!("not an orphaned lock: {other}"),
        }
        old.release().unwrap();
        // Released: the new file is taken.
        acquire(dir.path(), Duration::ZERO)
            .unwrap()
            .release()
            .unwrap();
    }
}
