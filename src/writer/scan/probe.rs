//! The kernel's probe of a lock file ([`probe_locked`]): is it flocked
//! right now, asked without taking part in the contest; and the opening of a
//! lock file for it by one of a target's ways, checked to be the file meant.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::target::{FileKey, Probe};
use crate::writer::LOCK_NAME;

/// Opens the lock file `key` by the first of `probes` that opens it and asks
/// the kernel whether it is locked ([`probe_locked`]); with the network file
/// system it is on, if it is on one.
///
/// # Errors
/// The last way's error: it did not open, or opened another file.
pub(super) fn probe_target(
    proc_root: &Path,
    key: FileKey,
    probes: &[Probe],
) -> std::io::Result<(bool, Option<&'static str>)> {
    let mut last = std::io::Error::from(std::io::ErrorKind::NotFound);
    for p in probes {
        match open_probe(proc_root, p).and_then(|f| same_file(f, key)) {
            Ok(f) => return Ok((probe_open(&f)?, network_fs(&f))),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The network file system `f` is on (`NFS`, `SMB`, `CephFS`, `FUSE`), whose
/// locks another node may hold: this node's `/proc` shows only its own.
fn network_fs(f: &std::fs::File) -> Option<&'static str> {
    let t = nix::sys::statfs::fstatfs(f).ok()?.filesystem_type().0 as i64;
    network_fs_name(t)
}

/// The name of a network file system by its `statfs` magic number.
fn network_fs_name(magic: i64) -> Option<&'static str> {
    match magic {
        0x6969 => Some("NFS"),
        0xFF53_4D42 | 0xFE53_4D42 | 0x517B => Some("SMB"),
        0x00C3_6400 => Some("CephFS"),
        0x6573_5546 => Some("FUSE"),
        _ => None,
    }
}

/// `f` when it is the regular file `key`.
///
/// # Errors
/// Not a regular file, or another file than `key` (a path that names
/// another file in this view of the file system).
fn same_file(f: std::fs::File, key: FileKey) -> std::io::Result<std::fs::File> {
    let md = f.metadata()?;
    if !md.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if key.0 != 0 && (md.dev(), md.ino()) != key {
        return Err(std::io::Error::other(
            "the path names another file than the one its holder has open",
        ));
    }
    Ok(f)
}

/// Opens one way of `probes` read-only, without following a last symbolic
/// link (but the `/proc/PID/fd/N` link itself) and without blocking.
fn open_probe(proc_root: &Path, p: &Probe) -> std::io::Result<std::fs::File> {
    use nix::fcntl::OFlag;
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = match p {
        Probe::FdLink(link) => return open_read(link, true),
        Probe::Path(path) => return open_read(path, false),
        Probe::InRoot { pid, path } => {
            let root = super::ns::open_root(proc_root, *pid)?;
            super::ns::open_in_root(&root, path, flags)?
        }
        Probe::InDir(dir) => nix::fcntl::openat(
            dir.as_ref(),
            LOCK_NAME,
            flags | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(std::io::Error::from)?,
    };
    Ok(std::fs::File::from(fd))
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
    let f = open_read(path, follow)?;
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    probe_open(&f)
}

/// Opens `path` read-only without blocking, following a symbolic link as
/// the last component only when `follow`.
fn open_read(path: &Path, follow: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK | nofollow)
        .open(path)
}

/// The kernel's answer for the open regular file `f` (see [`probe_locked`]).
fn probe_open(f: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
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

#[cfg(test)]
mod tests {
    #[test]
    fn network_file_systems_by_magic() {
        use super::network_fs_name as n;
        assert_eq!(n(0x6969), Some("NFS"));
        assert_eq!(n(0xFE53_4D42), Some("SMB"));
        assert_eq!(n(0x00C3_6400), Some("CephFS"));
        // ext4, tmpfs, overlayfs: local.
        assert_eq!(n(0xEF53), None);
        assert_eq!(n(0x0102_1994), None);
        assert_eq!(n(0x794C_7630), None);
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert_eq!(super::network_fs(&f), None);
    }
}
