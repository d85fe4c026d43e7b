//! The synchronous supervisor (`writer exec`, no async runtime): signals
//! forwarded from a `sigwait` thread, and every child reaped, adopted ones
//! included, before the caller lets go of its lock.

use std::sync::{Arc, Mutex};

use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::descendants;

/// Starts the thread that forwards the signals of `set` (blocked in every
/// thread, so delivered only to its `sigwait`) to `child` and then to every
/// other descendant of this process (a daemon in its own session gets no
/// terminal signal otherwise). `reaping` is held while signalling; once it
/// reads true (all reaped) the thread ends at the next signal. Without a
/// thread, says so in the log: signals then do not reach the child.
pub fn forward_signals(set: SigSet, child: Pid, reaping: Arc<Mutex<bool>>) {
    let me = std::process::id() as i32;
    let forwarder = std::thread::Builder::new()
        .name("signal-forwarder".into())
        .spawn(move || loop {
            let Ok(sig) = set.wait() else { continue };
            let done = reaping.lock().unwrap_or_else(|e| e.into_inner());
            if *done {
                return;
            }
            // The child first, then every other descendant (a daemon in its
            // own session gets no terminal signal otherwise).
            let _ = kill(child, sig);
            let others: Vec<i32> = descendants(me)
                .into_iter()
                .filter(|p| *p != child.as_raw())
                .collect();
            tracing::info!(
                signal = %sig,
                child = child.as_raw(),
                others = others.len(),
                "forwarding signal to the command and its descendants"
            );
            for pid in others {
                let _ = kill(Pid::from_raw(pid), sig);
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
/// end. Returns `child`'s status (`None` if it was never seen to end).
///
/// # Errors
/// `waitpid` failing before `child` was reaped. Failing after, the
/// leftovers are SIGKILLed and `child`'s status returned.
pub fn reap_all(child: Pid, reaping: &Mutex<bool>) -> nix::Result<Option<WaitStatus>> {
    let me = std::process::id() as i32;
    let mut status: Option<WaitStatus> = None;
    loop {
        // Wait until some child has exited but leave it a zombie, so its pid
        // cannot be reused while the forwarder might still signal it.
        let exited = match waitid(Id::All, WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Err(nix::Error::EINTR) => continue,
            Err(nix::Error::ECHILD) => None,
            Ok(st) => st.pid(),
            Err(e) => {
                tracing::warn!("waitid failed ({e}); falling back to waitpid");
                None
            }
        };
        let mut done = reaping.lock().unwrap_or_else(|e| e.into_inner());
        let reaped = loop {
            let r = match exited {
                Some(pid) => waitpid(pid, None),
                None => waitpid(Pid::from_raw(-1), None),
            };
            match r {
                Err(nix::Error::EINTR) => continue,
                other => break other,
            }
        };
        match reaped {
            Ok(st) if st.pid() == Some(child) => {
                status = Some(st);
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
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
                return Ok(status);
            }
        }
    }
}
