//! The synchronous supervisor (`writer exec`, no async runtime): signals
//! forwarded from a `sigwait` thread, and every child reaped, adopted ones
//! included, before the caller lets go of its lock.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use nix::sys::signal::SigSet;
use nix::unistd::Pid;

use super::descendants;
use crate::exit::Exit;

/// How a child ended, as `waitpid(2)` says, whatever the signal: nix's
/// `WaitStatus` names no real-time signal, and its `waitpid` reaps a child
/// killed by one and then fails, losing its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// This signal killed it.
    Signaled(i32),
}

impl Ended {
    /// The child's end as an [`Exit`]: its code, or 128 + the signal.
    pub fn exit(self) -> Exit {
        match self {
            Ended::Exited(code) => Exit::Child(code),
            Ended::Signaled(sig) => Exit::killed_by(sig),
        }
    }
}

/// `waitpid(pid, flags)` (`pid` -1: any child): the child reaped and how it
/// ended; `None` when nothing ended (`WNOHANG`) or the change was not an end
/// (stopped, continued).
///
/// # Errors
/// `waitpid`'s (`ECHILD`: no child left; `EINTR`).
pub fn wait_pid(pid: i32, flags: i32) -> nix::Result<Option<(i32, Ended)>> {
    let mut status = 0;
    // SAFETY: waitpid with a valid out-parameter.
    let r = unsafe { libc::waitpid(pid, &mut status, flags) };
    if r < 0 {
        return Err(nix::Error::last());
    }
    if r == 0 {
        return Ok(None);
    }
    Ok(if libc::WIFEXITED(status) {
        Some((r, Ended::Exited(libc::WEXITSTATUS(status))))
    } else if libc::WIFSIGNALED(status) {
        Some((r, Ended::Signaled(libc::WTERMSIG(status))))
    } else {
        None
    })
}

/// The pid of a child that has ended, left a zombie (`waitid` with
/// `WNOWAIT`), so its pid cannot be reused while it is signalled.
fn wait_ended() -> nix::Result<i32> {
    // SAFETY: a zeroed siginfo is a valid out-parameter; si_pid is set for
    // a child's state change.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        if libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) < 0 {
            return Err(nix::Error::last());
        }
        Ok(info.si_pid())
    }
}

/// Starts the thread that passes on the signals of `set` (blocked in every
/// thread, so delivered only to its `sigwait`) to `child` and then to every
/// other descendant of this process (a daemon in its own session gets no
/// terminal signal otherwise): a signal that ends the hold
/// ([`super::signals::ENDING`]) is recorded in `ended` and sent on as
/// SIGTERM; the others as they are. `reaping` is held while signalling; once
/// it reads true (all reaped) the thread ends at the next signal. Without a
/// thread, says so in the log: signals then do not reach the child.
pub fn forward_signals(set: SigSet, child: Pid, reaping: Arc<Mutex<bool>>, ended: Arc<AtomicI32>) {
    let me = std::process::id() as i32;
    let forwarder = std::thread::Builder::new()
        .name("signal-forwarder".into())
        .spawn(move || loop {
            let got = super::signals::wait(&set);
            let done = reaping.lock().unwrap_or_else(|e| e.into_inner());
            if *done {
                return;
            }
            let sig = if super::signals::ends_hold(got) {
                tracing::warn!(
                    "{} received ({}): ending the hold: SIGTERM to the command, the lock released once every process is gone",
                    super::signal_name(got),
                    if got == libc::SIGXCPU { "leasectl's CPU-time limit" } else { "leasectl's file-size limit" }
                );
                let _ = ended.compare_exchange(0, got, Ordering::SeqCst, Ordering::SeqCst);
                libc::SIGTERM
            } else {
                got
            };
            // The child first, then every other descendant (a daemon in its
            // own session gets no terminal signal otherwise).
            // SAFETY: kill(2); the child is not reaped while `reaping` is held.
            unsafe { libc::kill(child.as_raw(), sig) };
            let others: Vec<i32> = descendants(me)
                .into_iter()
                .filter(|p| *p != child.as_raw())
                .collect();
            tracing::info!(
                signal = %super::signal_name(sig),
                child = child.as_raw(),
                others = others.len(),
                "forwarding signal to the command and its descendants"
            );
            for pid in others {
                // SAFETY: kill(2) of a descendant, not reaped while `reaping` is held.
                unsafe { libc::kill(pid, sig) };
            }
        });
    if let Err(e) = forwarder {
        // Never return (and so release the lock) while the child runs.
        tracing::warn!("cannot start the signal forwarder, signals will not reach the child: {e}");
    }
}

/// Reaps every descendant, not just `child`: as a child subreaper this
/// process adopts what the command orphans (a daemonized writer), and the
/// caller's lock is released only when the last of them is gone (seed:
/// release after the last child). `reaping` is held while reaping, so a
/// signal never reaches a pid recycled after our reap; it is set true at the
/// end. Returns how `child` ended (`None` if it was never seen to end),
/// whatever signal killed it.
///
/// # Errors
/// `waitpid` failing before `child` was reaped. Failing after, the
/// leftovers are SIGKILLed and `child`'s status returned.
pub fn reap_all(child: Pid, reaping: &Mutex<bool>) -> nix::Result<Option<Ended>> {
    let me = std::process::id() as i32;
    let child = child.as_raw();
    let mut status: Option<Ended> = None;
    loop {
        // Wait until some child has exited but leave it a zombie, so its pid
        // cannot be reused while the forwarder might still signal it.
        let exited = match wait_ended() {
            Err(nix::Error::EINTR) => continue,
            Err(nix::Error::ECHILD) => None,
            Ok(pid) => Some(pid),
            Err(e) => {
                tracing::warn!("waitid failed ({e}); falling back to waitpid");
                None
            }
        };
        let mut done = reaping.lock().unwrap_or_else(|e| e.into_inner());
        let reaped = loop {
            match wait_pid(exited.unwrap_or(-1), 0) {
                Err(nix::Error::EINTR) => continue,
                other => break other,
            }
        };
        match reaped {
            Ok(Some((pid, end))) if pid == child => {
                status = Some(end);
                let left = descendants(me);
                if !left.is_empty() {
                    tracing::warn!(
                        left = left.len(),
                        "the command exited but left {} process(es) running (e.g. daemonized); holding the writer lock until the last one exits",
                        left.len()
                    );
                }
            }
            Ok(_) => {}
            Err(nix::Error::ECHILD) => {
                *done = true;
                return Ok(status);
            }
            Err(source) => {
                *done = true;
                if status.is_none() {
                    return Err(source);
                }
                // Cannot wait any more: leftovers are killed before release.
                for pid in descendants(me) {
                    // SAFETY: kill(2) of a descendant.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                return Ok(status);
            }
        }
    }
}
