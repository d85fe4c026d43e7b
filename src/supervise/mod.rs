//! Running a command under a lease: the one home of process supervision,
//! used by `bucket hold` (an S3 lease) and `writer exec` (the pod's writer lock).
//!
//! - [`become_subreaper`]: what the command orphans (a daemonized writer)
//!   becomes our child, so it can be found, waited for and stopped;
//! - [`die_with_parent`]: the child is SIGKILLed by the kernel if this
//!   process dies, so a crashed supervisor leaves no writer behind;
//! - [`ChildHandle`]: the child addressed by a pidfd, so a signal never
//!   reaches a process that reused its pid;
//! - [`FencePipe`] / [`fence_state`]: the fence fd (`LEASECTL_FENCE_FD`),
//!   a pipe whose write end only leasectl holds, closed when the fence closes;
//! - [`signals`]: every signal whose default action ends a process, and its
//!   fate: [`forwarded`] to the command, [`ENDING`] the hold (the command
//!   stopped, the lease released), or left as it is; [`Signals`] receives
//!   them on the runtime;
//! - [`kill_tree`] / [`kill_descendants`]: stopping the command and all it left;
//! - [`status_exit`] / [`Ended::exit`]: a status as an [`Exit`], 128 +
//!   the signal number when a signal killed the command (real-time signals
//!   included: [`wait_pid`]);
//! - [`descendants`] / [`descendants_in`]: the one `/proc` walk, its proc
//!   root injectable;
//! - [`forward_signals`] and [`reap_all`]: the synchronous supervisor of
//!   `writer exec` (a `sigwait` thread; every child reaped before release);
//! - [`contain`]: `bucket hold`'s command in a PID namespace of its own, so
//!   the kernel ends all of it when leasectl dies ([`ContainmentMode`],
//!   [`Containment`]).

pub mod contain;
mod fence_fd;
mod handle;
mod proc;
mod reap;
pub(crate) mod signals;

pub(crate) use contain::{Containment, ContainmentMode};
pub(crate) use fence_fd::{
    fence_state_from_env, FenceFdState, FencePipe, FenceWriter, FENCE_FD_ENV, FENCE_PIPE_ENV,
};
pub use handle::send;
pub(crate) use handle::{kill_descendants, kill_tree, ChildHandle};
pub(crate) use proc::descendants;
pub(crate) use reap::{forward_signals, reap_all};
pub(crate) use signals::Signals;
pub use signals::{forwarded, signal_name, ENDING};

use nix::sys::signal::SigSet;

use crate::exit::Exit;

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): the
/// descendants its command orphans are re-parented to it, not to init.
///
/// # Errors
/// The `prctl` error (only on kernels before 3.4).
pub(crate) fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// The `pre_exec` hook of a supervised command: `PR_SET_PDEATHSIG(SIGKILL)`,
/// so the kernel kills the command if `parent` (this process's pid) dies;
/// fails the spawn if `parent` died before that (nobody would kill it then);
/// unblocks `unblock` (signals the supervisor blocked for itself) in the child.
///
/// The closure runs in the forked child before exec and calls only
/// async-signal-safe functions (prctl, getppid, sigprocmask).
pub(crate) fn die_with_parent(
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

/// A command's end as an [`Exit`]: [`Exit::Child`] with its own code, or
/// with 128 plus the signal number when a signal killed it (as a shell
/// reports it); [`Exit::Failed`] when waiting for it failed.
pub(crate) fn status_exit(status: std::io::Result<std::process::ExitStatus>) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match s.code() {
            Some(code) => Exit::Child(code),
            None => Exit::killed_by(s.signal().unwrap_or(0)),
        },
        Err(_) => Exit::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::FORKS;

    #[test]
    fn a_signal_is_128_plus_its_number_and_a_code_is_itself() {
        let _forks = FORKS.read().unwrap_or_else(|e| e.into_inner());
        let killed = std::process::Command::new("sh")
            .args(["-c", "kill -TERM $$"])
            .status();
        assert_eq!(status_exit(killed).code(), 128 + libc::SIGTERM);
        let seven = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .status();
        assert_eq!(status_exit(seven).code(), 7);
        assert_eq!(status_exit(Err(std::io::Error::other("x"))), Exit::Failed);
    }
}
