//! The fence fd: how `bucket hold` tells its command, without a signal and
//! without polling the store, that the fence has closed.
//!
//! [`FencePipe::new`] makes a pipe with both ends close-on-exec. The command
//! alone inherits the read end ([`FencePipe::inherit_in_child`] clears its
//! close-on-exec flag in the forked child, just before `exec`), and finds its
//! number in [`FENCE_FD_ENV`]. The write end stays in leasectl, close-on-exec,
//! so no other process leasectl starts (a credential helper of the SDK, say)
//! ever holds it; nothing is ever written to it. It is closed ([`FenceWriter`])
//! by the fence's close hook, on the thread that closes the fence, before the
//! command is signalled; when leasectl lets go of the lease; and by the kernel
//! when leasectl exits in any way. The read end then polls readable and
//! hung-up (`POLLIN | POLLHUP`) and a read returns 0 (end of file): the fence
//! is closed, for good.
//!
//! [`fence_state`] and [`fence_state_from_env`] are the command's side, for
//! `leasectl bucket fence-check`.

use crate::text::{quote_shown, sanitize_cut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The variable naming the fence fd in `bucket hold`'s command.
pub(crate) const FENCE_FD_ENV: &str = "LEASECTL_FENCE_FD";

/// The fence pipe's identity, `DEV:INODE` of its read end, set beside
/// [`FENCE_FD_ENV`]: `bucket fence-check` answers only for that pipe, so an
/// unrelated descriptor (stdin, any idle pipe) is never taken for an open fence.
pub(crate) const FENCE_PIPE_ENV: &str = "LEASECTL_FENCE_PIPE";

/// `DEV:INODE` of the file open as `fd`, or `None` when it cannot be asked.
fn identity(fd: RawFd) -> Option<String> {
    // SAFETY: an all-zero `stat` is a valid value to be overwritten; fstat
    // on a number is at worst EBADF.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some(format!("{}:{}", st.st_dev, st.st_ino))
}

/// A fresh fence pipe, both ends close-on-exec in this process.
pub(crate) struct FencePipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl FencePipe {
    /// Creates the pipe (`pipe2(O_CLOEXEC)`).
    ///
    /// # Errors
    /// The `pipe2` error (e.g. too many open files).
    pub(crate) fn new() -> std::io::Result<Self> {
        let mut fds = [-1; 2];
        // SAFETY: pipe2 writes two new descriptors into a 2-element array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: two new descriptors that nothing else owns. Rust's runtime
        // keeps fds 0-2 open, so neither is a standard stream.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Self { read, write })
    }

    /// The read end's number: the value of [`FENCE_FD_ENV`] for the command.
    pub(crate) fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// The pipe's identity: the value of [`FENCE_PIPE_ENV`] for the command.
    pub(crate) fn identity(&self) -> String {
        identity(self.read_fd()).unwrap_or_default()
    }

    /// The `pre_exec` hook that lets the command inherit the read end: clears
    /// its close-on-exec flag in the forked child (only there; in leasectl it
    /// stays set). Calls only `fcntl`, which is async-signal-safe.
    pub(crate) fn inherit_in_child(
        &self,
    ) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
        let fd = self.read_fd();
        move || {
            // SAFETY: fcntl on a descriptor this process holds (the fork copied it).
            if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        }
    }

    /// Once the command has started: closes leasectl's copy of the read end
    /// (only the command and what it starts hold it) and returns the write end.
    pub(crate) fn into_writer(self) -> FenceWriter {
        drop(self.read);
        FenceWriter(self.write)
    }
}

/// The write end of the fence pipe. Closing it (or dropping it) is what the
/// command sees as "the fence closed".
pub(crate) struct FenceWriter(OwnedFd);

impl FenceWriter {
    /// Closes the write end now: one `close(2)`, no lock, no I/O, no await.
    pub(crate) fn close(self) {
        drop(self.0);
    }
}

/// Where the fence stands, as the command sees it through the fence fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FenceFdState {
    /// Nothing to read and not hung up: the fence is open.
    Open,
    /// End of file (hung up or readable): the fence has closed, for good.
    Closed,
}

/// Why the fence fd cannot be asked: the process is not a `bucket hold`
/// command (or the fd was closed or replaced on the way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FenceFdError {
    /// [`FENCE_FD_ENV`] is not set.
    Unset,
    /// Its value (escaped, cut) is not a descriptor number.
    NotANumber(String),
    /// No open descriptor has that number.
    NotOpen(RawFd),
    /// The descriptor is open but is not the read end of a pipe: what kind it is.
    NotAFencePipe(RawFd, &'static str),
    /// [`FENCE_PIPE_ENV`] is not set, or names another pipe than the descriptor.
    OtherPipe(RawFd),
    /// `poll` itself failed (not a usage error).
    Poll(RawFd, String),
}

impl FenceFdError {
    /// True for every error but [`FenceFdError::Poll`]: the caller is not
    /// running under `bucket hold` as far as it can tell (exit 2).
    pub(crate) fn is_usage(&self) -> bool {
        !matches!(self, FenceFdError::Poll(..))
    }
}

impl std::fmt::Display for FenceFdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const RUN: &str = "this asks the fence of a lease held by `leasectl bucket hold`; run it from the command that `leasectl bucket hold PREFIX_URL -- CMD` starts (or a child of it that kept the descriptor)";
        match self {
            FenceFdError::Unset => write!(f, "{FENCE_FD_ENV} is not set: {RUN}"),
            FenceFdError::NotANumber(v) => {
                write!(
                    f,
                    "{FENCE_FD_ENV} is {}, not a file descriptor number: {RUN}",
                    quote_shown(v)
                )
            }
            FenceFdError::NotOpen(fd) => write!(
                f,
                "{FENCE_FD_ENV} names descriptor {fd}, which is not open in this process (closed on the way, e.g. by Python's subprocess without pass_fds): {RUN}"
            ),
            FenceFdError::NotAFencePipe(fd, what) => write!(
                f,
                "{FENCE_FD_ENV} names descriptor {fd}, which is {what}, not the read end of the fence pipe: {RUN}"
            ),
            FenceFdError::OtherPipe(fd) => write!(
                f,
                "{FENCE_FD_ENV} names descriptor {fd}, which is not the fence pipe {FENCE_PIPE_ENV} names (or {FENCE_PIPE_ENV} is not set): {RUN}"
            ),
            FenceFdError::Poll(fd, e) => {
                write!(f, "cannot poll the fence descriptor {fd} ({FENCE_FD_ENV}): {e}")
            }
        }
    }
}

/// The fence as [`FENCE_FD_ENV`] names it (see [`fence_state`]).
///
/// # Errors
/// [`FenceFdError::Unset`], [`FenceFdError::NotANumber`] and those of [`fence_state`].
pub(crate) fn fence_state_from_env() -> Result<FenceFdState, FenceFdError> {
    let Some(raw) = std::env::var_os(FENCE_FD_ENV) else {
        return Err(FenceFdError::Unset);
    };
    let text = raw.to_string_lossy();
    let fd = (!text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<RawFd>().ok())
        .flatten()
        .ok_or_else(|| FenceFdError::NotANumber(sanitize_cut(&text, 40)))?;
    let state = fence_state(fd)?;
    // The pipe bucket hold made, not any descriptor that happens to be a
    // pipe's read end (`LEASECTL_FENCE_FD=0` with a pipe on stdin).
    let want = std::env::var_os(FENCE_PIPE_ENV);
    if want.is_none() || want.map(|w| w.to_string_lossy().into_owned()) != identity(fd) {
        return Err(FenceFdError::OtherPipe(fd));
    }
    Ok(state)
}

/// Asks the descriptor `fd`, without blocking (a zero-timeout `poll`),
/// whether the fence pipe's write end is still open.
///
/// # Errors
/// [`FenceFdError::NotOpen`] (no such descriptor), [`FenceFdError::NotAFencePipe`]
/// (not a pipe, or a pipe's write end), [`FenceFdError::Poll`].
pub(crate) fn fence_state(fd: RawFd) -> Result<FenceFdState, FenceFdError> {
    // SAFETY: fcntl and fstat on a number: at worst EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags == -1 {
        return Err(FenceFdError::NotOpen(fd));
    }
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(FenceFdError::NotOpen(fd));
    }
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFIFO => None,
        libc::S_IFREG => Some("a regular file"),
        libc::S_IFCHR => Some("a character device (a terminal or /dev/null?)"),
        libc::S_IFSOCK => Some("a socket"),
        libc::S_IFDIR => Some("a directory"),
        _ => Some("neither a pipe nor a file"),
    };
    if let Some(what) = kind {
        return Err(FenceFdError::NotAFencePipe(fd, what));
    }
    if flags & libc::O_ACCMODE != libc::O_RDONLY {
        return Err(FenceFdError::NotAFencePipe(fd, "a pipe's write end"));
    }
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd, zero timeout: never blocks.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n >= 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(FenceFdError::Poll(fd, e.to_string()));
        }
    }
    if p.revents & libc::POLLNVAL != 0 {
        return Err(FenceFdError::NotOpen(fd));
    }
    // leasectl never writes into the pipe: readable means end of file.
    if p.revents & (libc::POLLHUP | libc::POLLIN | libc::POLLERR) != 0 {
        Ok(FenceFdState::Closed)
    } else {
        Ok(FenceFdState::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_until_the_write_end_closes_then_closed_for_good() {
        let pipe = FencePipe::new().unwrap();
        let fd = pipe.read_fd();
        // Both ends are close-on-exec here.
        // SAFETY: fcntl on descriptors this test holds.
        assert_ne!(
            unsafe { libc::fcntl(fd, libc::F_GETFD) } & libc::FD_CLOEXEC,
            0
        );
        assert_ne!(
            unsafe { libc::fcntl(pipe.write.as_raw_fd(), libc::F_GETFD) } & libc::FD_CLOEXEC,
            0
        );
        assert_eq!(fence_state(fd), Ok(FenceFdState::Open));
        let write_fd = pipe.write.as_raw_fd();
        assert_eq!(
            fence_state(write_fd),
            Err(FenceFdError::NotAFencePipe(write_fd, "a pipe's write end"))
        );
        // Keep a read end to ask after `into_writer` closed ours.
        // SAFETY: dup of a descriptor this test holds.
        let keep = unsafe { OwnedFd::from_raw_fd(libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3)) };
        let w = pipe.into_writer();
        assert_eq!(fence_state(keep.as_raw_fd()), Ok(FenceFdState::Open));
        w.close();
        assert_eq!(fence_state(keep.as_raw_fd()), Ok(FenceFdState::Closed));
        assert_eq!(fence_state(keep.as_raw_fd()), Ok(FenceFdState::Closed));
    }

    #[test]
    fn not_a_fence_is_a_usage_error_that_says_where_to_run() {
        let f = tempfile::tempfile().unwrap();
        let e = fence_state(f.as_raw_fd()).unwrap_err();
        assert!(
            matches!(e, FenceFdError::NotAFencePipe(_, "a regular file")),
            "{e:?}"
        );
        assert!(e.is_usage());
        assert!(e.to_string().contains("leasectl bucket hold"), "{e}");
        let e = fence_state(999_999).unwrap_err();
        assert_eq!(e, FenceFdError::NotOpen(999_999));
        assert!(FenceFdError::Unset
            .to_string()
            .contains("LEASECTL_FENCE_FD is not set"));
    }
}
