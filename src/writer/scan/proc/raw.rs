//! Reading `/proc` without the standard library's per-entry allocations:
//! a directory's entries by `getdents64` into a reused buffer, and a file
//! read whole into a reused buffer.

use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// An 8-byte-aligned buffer for `getdents64` records.
pub(super) struct DirentBuf(Vec<u64>);

impl DirentBuf {
    pub(super) fn new() -> Self {
        DirentBuf(vec![0; 1024])
    }
}

/// Opens a directory for reading its entries (`O_DIRECTORY`, close-on-exec).
pub(super) fn open_dir(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    open_at(None, &c, DIR_FLAGS)
}

/// Opens `name` under the open directory `at` (the current directory for
/// `None`) for reading its entries, as [`open_dir`].
pub(super) fn open_dir_at(
    at: Option<BorrowedFd>,
    name: &std::ffi::CStr,
) -> std::io::Result<std::os::fd::OwnedFd> {
    open_at(at, name, DIR_FLAGS)
}

/// How a directory is opened for its entries.
const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NONBLOCK;

/// Opens the proc root itself, to open its files relative to it
/// (`O_PATH`: no reading of its own).
pub(super) fn open_root(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    open_at(None, &c, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
}

/// `openat(at, name, flags)` (close-on-exec added).
fn open_at(
    at: Option<BorrowedFd>,
    name: &std::ffi::CStr,
    flags: libc::c_int,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let dirfd = at.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `name` is NUL-terminated; the descriptor returned is owned by
    // nobody else.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is not owned elsewhere.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Calls `f` with the name of every entry of the open directory `dir`
/// (`.` and `..` left out), read with raw `getdents64` into `buf`: no
/// `fstat` and no allocation per entry, as `std::fs::read_dir` spends. For
/// the `/proc` directories it reads (which fill the buffer while entries
/// fit), a call that leaves room for one more record is the last.
///
/// # Errors
/// The first `getdents64` failure (a process that exited meanwhile gives
/// `ENOENT`); the entries before it were given to `f`.
pub(super) fn each_entry(
    dir: &std::os::fd::OwnedFd,
    buf: &mut DirentBuf,
    mut f: impl FnMut(&std::ffi::CStr),
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let bytes_len = buf.0.len() * 8;
    loop {
        // SAFETY: the kernel writes at most `bytes_len` bytes into the buffer.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.0.as_mut_ptr(),
                bytes_len,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Ok(());
        }
        // SAFETY: the first `n` bytes were written by the kernel.
        let bytes = unsafe { std::slice::from_raw_parts(buf.0.as_ptr().cast::<u8>(), n as usize) };
        // procfs fills the buffer while entries fit: room left for the
        // largest record (19 bytes, a 255-byte name, its NUL, padding) means
        // the directory ended, and the call that would return 0 is saved.
        let ended = (n as usize) + MAX_RECORD <= bytes_len;
        // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type
        // u8, then the NUL-terminated name.
        let mut off = 0;
        while off + 19 < bytes.len() {
            let reclen = u16::from_ne_bytes([bytes[off + 16], bytes[off + 17]]) as usize;
            if reclen < 20 || off + reclen > bytes.len() {
                break;
            }
            if let Ok(name) = std::ffi::CStr::from_bytes_until_nul(&bytes[off + 19..off + reclen]) {
                if name != c"." && name != c".." {
                    f(name);
                }
            }
            off += reclen;
        }
        if ended {
            return Ok(());
        }
    }
}

/// The largest `linux_dirent64` record: 19 bytes of header, a name of 255
/// bytes and its NUL, padded to 8.
const MAX_RECORD: usize = 280;

/// Reads a small `/proc` file into `buf` (cleared first): `openat`, as few
/// `read`s as the size needs, `close`. A short read is taken as the end: for
/// `stat`, `cmdline` and `environ` the kernel fills the whole buffer unless
/// the content ends, so the extra `read` returning 0 is saved. The bytes are
/// read into the buffer's spare capacity, which is never zero-filled first.
pub(super) fn read_proc(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    read_proc_at(None, &c, buf)
}

/// [`read_proc`] of `name` under the open directory `at` (the current
/// directory for `None`).
pub(super) fn read_proc_at(
    at: Option<BorrowedFd>,
    name: &std::ffi::CStr,
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    buf.clear();
    if buf.capacity() < 4096 {
        buf.reserve(4096);
    }
    let f = open_at(at, name, libc::O_RDONLY)?;
    loop {
        let spare = buf.spare_capacity_mut();
        let cap = spare.len();
        // SAFETY: the kernel writes at most `cap` bytes into the spare capacity.
        let n = unsafe { libc::read(f.as_raw_fd(), spare.as_mut_ptr().cast(), cap) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = n as usize;
        // SAFETY: `n` more bytes were written and are initialised.
        unsafe { buf.set_len(buf.len() + n) };
        if n == 0 || n < cap {
            return Ok(());
        }
        buf.reserve(buf.len());
    }
}
