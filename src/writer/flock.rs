//! Taking and holding the pod writer lock: `flock(2)` on `{data_dir}/.writer.lock`.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::{assess, Duty, WriterError, HELD, LOCK_NAME};

/// How often [`acquire`] retries a non-blocking flock: 100 ms.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The held writer lock. Dropping it releases the lock (the descriptor is
/// closed); [`WriterLock::release`] does the same and reports errors.
#[derive(Debug)]
pub struct WriterLock {
    path: PathBuf,
    lock: Flock<File>,
}

impl WriterLock {
    /// The lock file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unlocks and closes the lock file.
    ///
    /// # Errors
    /// [`WriterError::Flock`] if `flock(LOCK_UN)` fails (the descriptor is
    /// closed anyway, which also releases the lock).
    pub fn release(self) -> Result<(), WriterError> {
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

/// Takes the exclusive writer lock of `data_dir`.
///
/// Creates `{data_dir}/.writer.lock` if needed (zero length, mode 0644, opened
/// close-on-exec so spawned commands never inherit it), then retries a
/// non-blocking `flock(LOCK_EX|LOCK_NB)` every [`POLL_INTERVAL`] until it
/// succeeds or `timeout` has passed (`timeout` zero: one attempt).
///
/// # Errors
/// - [`WriterError::Timeout`] when the lock stayed held: the caller must fail
///   closed (seed: `Acquire`). The error names the holder pid(s) and command
///   lines when `/proc` shows them.
/// - [`WriterError::Open`] / [`WriterError::Flock`] on I/O errors.
pub fn acquire(data_dir: &Path, timeout: Duration) -> Result<WriterLock, WriterError> {
    let path = data_dir.join(LOCK_NAME);
    let start = Instant::now();
    // Kept open while waiting: a waiter is seen (it has the file open).
    let mut file = open_lock_file(&path)?;
    loop {
        let opened = file.metadata().map(|m| (m.dev(), m.ino())).ok();
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => {
                // The path must still name the file locked: one unlinked or
                // replaced since our open is a lock nobody else will ask for.
                // Open again.
                let now = std::fs::symlink_metadata(&path)
                    .map(|m| (m.dev(), m.ino()))
                    .ok();
                if now.is_none() || now != opened {
                    drop(lock);
                    file = open_lock_file(&path)?;
                    continue;
                }
                // A process still holding a flock on a removed `.writer.lock`
                // of this directory believes it is the writer.
                let orphans = super::scan::orphaned_lock_holders(Path::new("/proc"), &path);
                if orphans.is_empty() {
                    return Ok(WriterLock { path, lock });
                }
                file = match lock.unlock() {
                    Ok(f) => f,
                    Err((_, errno)) => {
                        return Err(WriterError::Flock {
                            path,
                            source: errno,
                        })
                    }
                };
                let elapsed = start.elapsed();
                if elapsed >= timeout {
                    return Err(WriterError::OrphanedHolder {
                        path,
                        waited: timeout,
                        holders: orphans,
                    });
                }
                std::thread::sleep(POLL_INTERVAL.min(timeout - elapsed));
            }
            Err((f, Errno::EWOULDBLOCK)) | Err((f, Errno::EINTR)) => {
                file = f;
                let elapsed = start.elapsed();
                if elapsed >= timeout {
                    let holders = super::scan::lock_holders(Path::new("/proc"), &path);
                    return Err(WriterError::Timeout {
                        path,
                        waited: timeout,
                        holders,
                    });
                }
                std::thread::sleep(POLL_INTERVAL.min(timeout - elapsed));
            }
            Err((_f, errno)) => {
                return Err(WriterError::Flock {
                    path,
                    source: errno,
                })
            }
        }
    }
}

/// Opens (creating if absent: zero length, mode 0644, close-on-exec) the lock
/// file at `path` without following a symbolic link, and only if it is a
/// regular file owned by this process's user or by root.
///
/// # Errors
/// [`WriterError::NotRegular`] (a symbolic link, directory, FIFO, socket or
/// device: nothing is opened or created through it),
/// [`WriterError::ForeignOwner`], [`WriterError::Open`].
fn open_lock_file(path: &Path) -> Result<File, WriterError> {
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if let Some(what) = super::not_regular(&md.file_type()) {
            return Err(WriterError::NotRegular {
                path: path.to_owned(),
                what,
            });
        }
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            // O_NOFOLLOW on a link (put there since the check above).
            Some(libc::ELOOP) => WriterError::NotRegular {
                path: path.to_owned(),
                what: "a symbolic link",
            },
            _ => WriterError::Open {
                path: path.to_owned(),
                source,
            },
        })?;
    let md = file.metadata().map_err(|source| WriterError::Open {
        path: path.to_owned(),
        source,
    })?;
    if let Some(what) = super::not_regular(&md.file_type()) {
        return Err(WriterError::NotRegular {
            path: path.to_owned(),
            what,
        });
    }
    let euid = nix::unistd::geteuid().as_raw();
    if md.uid() != euid && md.uid() != 0 {
        return Err(WriterError::ForeignOwner {
            path: path.to_owned(),
            uid: md.uid(),
            euid,
        });
    }
    Ok(file)
}

/// The release handle [`hold`] always returns.
#[derive(Debug)]
pub struct Hold {
    duty: Duty,
    sentence: String,
    lock: Option<WriterLock>,
}

impl Hold {
    /// The duty that was assessed.
    pub fn duty(&self) -> Duty {
        self.duty
    }

    /// The sentence explaining the duty (already logged by [`hold`]).
    pub fn sentence(&self) -> &str {
        &self.sentence
    }

    /// The held lock, when the duty was Take.
    pub fn lock(&self) -> Option<&WriterLock> {
        self.lock.as_ref()
    }

    /// Releases the lock if one is held; a no-op for Inherit and Off. Call it
    /// only once the stores are closed and every child is gone: a successor
    /// may open the volume the moment the lock is withdrawn.
    ///
    /// # Errors
    /// As [`WriterLock::release`].
    pub fn release(self) -> Result<(), WriterError> {
        match self.lock {
            Some(lock) => lock.release(),
            None => Ok(()),
        }
    }
}

/// The one call a pod entrypoint makes (seed: `Hold`).
///
/// Assesses this process's duty from its real environment and its real parent
/// pid, logs the sentence (tracing, info), and on Take acquires the lock
/// (waiting up to `timeout`) and sets `CLOUD_WRITER_LEASE_HELD=<own pid>` in
/// the process environment so every child spawned afterwards inherits.
/// Always returns a release handle, which is a no-op for Inherit and Off.
///
/// Call it before any thread is started: it modifies the process environment.
///
/// # Errors
/// [`WriterError::InvalidEnable`] for an invalid `CLOUD_WRITER_LEASE`, and
/// the errors of [`acquire`].
pub fn hold(data_dir: &Path, timeout: Duration) -> Result<Hold, WriterError> {
    let parent = nix::unistd::getppid().as_raw() as u32;
    let (duty, sentence) = assess(real_getenv, parent)?;
    tracing::info!(duty = %duty, "{sentence}");
    let lock = match duty {
        Duty::Take => {
            let lock = acquire(data_dir, timeout)?;
            std::env::set_var(HELD, std::process::id().to_string());
            tracing::info!(path = %lock.path().display(), "holding the writer lock");
            Some(lock)
        }
        Duty::Inherit | Duty::Off => None,
    };
    Ok(Hold {
        duty,
        sentence,
        lock,
    })
}

/// Reads a variable from the real process environment (lossy for non-UTF-8,
/// so a garbage value is still seen and judged rather than treated as unset).
pub(crate) fn real_getenv(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}
