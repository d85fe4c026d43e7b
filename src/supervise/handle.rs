//! Signalling the supervised command and what it left behind.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

/// A child process addressed by a pidfd (Linux 5.3+): signals reach that
/// process or nobody, never a process that reused its pid after it was reaped.
/// Falls back to the pid where pidfd is unavailable. Clones share the pidfd.
#[derive(Clone)]
pub(crate) struct ChildHandle(Arc<ChildFd>);

struct ChildFd {
    pid: i32,
    fd: Option<OwnedFd>,
}

impl ChildHandle {
    /// Opens a pidfd for `pid` (a child of this process, not yet reaped); a
    /// handle by pid alone where the kernel has no pidfd.
    ///
    /// # Errors
    /// None today (kept so that callers handle a future failure).
    pub(crate) fn open(pid: i32) -> std::io::Result<Self> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // SAFETY: a new descriptor that nothing else owns.
        let fd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) });
        Ok(Self(Arc::new(ChildFd { pid, fd })))
    }

    /// Sends `sig` (a signal number) to the process; errors are ignored (it
    /// may have exited).
    pub(crate) fn signal(&self, sig: i32) {
        match &self.0.fd {
            // SAFETY: a valid pidfd, a plain signal number, no siginfo.
            Some(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    sig,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            },
            None => send(self.0.pid, sig),
        }
    }

    /// True once the process has exited (a pidfd polls readable then);
    /// always false without a pidfd.
    pub(crate) fn has_exited(&self) -> bool {
        match &self.0.fd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, zero timeout.
                unsafe { libc::poll(&mut p, 1, 0) > 0 }
            }
            None => false,
        }
    }
}

/// Sends `sig` (a signal number) to `pid`; errors are ignored.
pub fn send(pid: i32, sig: i32) {
    // SAFETY: kill(2) with a pid and a plain signal number.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// SIGKILLs the command and then every other descendant of this process (a
/// child subreaper, so even a daemonized grandchild stays one). Returns how
/// many processes were signalled.
pub(crate) fn kill_tree(target: &ChildHandle) -> usize {
    target.signal(libc::SIGKILL);
    1 + kill_descendants(libc::SIGKILL)
}

/// Sends `sig` to every descendant of this process; returns how many there were.
pub(crate) fn kill_descendants(sig: i32) -> usize {
    let others = super::descendants(std::process::id() as i32);
    for &pid in &others {
        send(pid, sig);
    }
    others.len()
}
