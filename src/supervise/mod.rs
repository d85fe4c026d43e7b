//! Running a command under a lease: the one home of process supervision,
//! used by `bucket hold` (an S3 lease) and `writer exec` (the pod's writer lock).
//!
//! - [`become_subreaper`]: what the command orphans (a daemonized writer)
//!   becomes our child, so it can be found, waited for and stopped;
//! - [`die_with_parent`]: the child is SIGKILLed by the kernel if this
//!   process dies, so a crashed supervisor leaves no writer behind;
//! - [`ChildHandle`]: the child addressed by a pidfd, so a signal never
//!   reaches a process that reused its pid;
//! - [`FORWARDED`] and [`Signals`]: the signals passed on to the command;
//! - [`kill_tree`] / [`kill_descendants`]: stopping the command and all it left;
//! - [`status_code`] / [`wait_status_code`]: a status as an exit code, 128 +
//!   the signal number when a signal killed the command;
//! - [`descendants`] / [`descendants_in`]: the one `/proc` walk, its proc
//!   root injectable;
//! - [`forward_signals`] and [`reap_all`]: the synchronous supervisor of
//!   `writer exec` (a `sigwait` thread; every child reaped before release).

mod handle;
mod proc;
mod reap;
mod signals;

pub use handle::{kill_descendants, kill_tree, send, ChildHandle};
pub use proc::{descendants, descendants_in};
pub use reap::{forward_signals, reap_all};
pub use signals::{signal_name, Signals, FORWARDED};

use nix::sys::signal::SigSet;

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): the
/// descendants its command orphans are re-parented to it, not to init.
///
/// # Errors
/// The `prctl` error (only on kernels before 3.4).
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// The `pre_exec` hook of a supervised command: `PR_SET_PDEATHSIG(SIGKILL)`,
/// so the kernel kills the command if `parent` (this process's pid) dies;
/// fails the spawn if `parent` died before that (nobody would kill it then);
/// unblocks `unblock` (signals the supervisor blocked for itself) in the child.
///
/// The closure runs in the forked child before exec and calls only
/// async-signal-safe functions (prctl, getppid, sigprocmask).
pub fn die_with_parent(
    parent: u32,
    unblock: Option<SigSet>,
) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    move || {
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
        // The parent may have died before prctl: then nobody would kill us.
        if nix::unistd::getppid().as_raw() as u32 != parent {
            return Err(std::io::Error::other("writer exec parent died before exec"));
        }
        if let Some(set) = &unblock {
            set.thread_unblock()?;
        }
        Ok(())
    }
}

/// The exit code for a command's end: its own code, or 128 + the signal
/// number when a signal killed it (as a shell reports it); 1 when waiting
/// for it failed.
pub fn status_code(status: std::io::Result<std::process::ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => s
            .code()
            .unwrap_or_else(|| signalled(s.signal().unwrap_or(0))),
        Err(_) => crate::exit::Exit::Failed.code(),
    }
}

/// [`status_code`] for a status from `waitpid`: `None` for a status that is
/// not an end (stopped, continued).
pub fn wait_status_code(status: nix::sys::wait::WaitStatus) -> Option<i32> {
    use nix::sys::wait::WaitStatus;
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(signalled(sig as i32)),
        _ => None,
    }
}

/// 128 + the signal number: the status of a command a signal killed.
fn signalled(sig: i32) -> i32 {
    128 + sig
}
