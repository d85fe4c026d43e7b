//! `leasectl writer exec`: the writer-lease rules as a pod entrypoint wrapper.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::flock::{acquire, real_getenv};
use super::{assess, sanitize, Duty, WriterError, HELD};

/// The signals `writer exec` forwards to its child when it holds the lock.
pub const FORWARDED: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Runs `cmd` under the writer-lease rules (ARCHITECTURE.md; DESIGN.md, "Writer lease
/// semantics", `writer exec`).
///
/// Logs the duty sentence (tracing, info) first. Then, by duty:
/// - **Take**: polls the lock of `data_dir` for up to `wait`, failing closed
///   with an error naming the holder; spawns `cmd` with
///   `CLOUD_WRITER_LEASE_HELD=<own pid>` and `PR_SET_PDEATHSIG(SIGKILL)`;
///   becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`), so descendants the
///   command orphans (a daemonized writer) are adopted; forwards SIGTERM,
///   SIGINT, SIGHUP and SIGQUIT to the child and every other descendant;
///   reaps every child, adopted ones included, and releases the lock only
///   after the last one is gone; returns the child's exit code, or
///   128 + signal number when a signal killed it.
/// - **Inherit** and **Off**: replaces this process with `cmd` (`execvp`);
///   returns only on failure.
///
/// `cmd[0]` is looked up in `PATH`.
///
/// # Errors
/// [`WriterError::InvalidEnable`] (refuses to start), [`WriterError::NoCommand`],
/// [`WriterError::Timeout`] (fail closed), [`WriterError::Spawn`] when the
/// command cannot be run, and I/O errors of the lock. See
/// [`WriterError::exit_code`] for the exit code to use.
pub fn writer_exec(data_dir: &Path, wait: Duration, cmd: &[OsString]) -> Result<i32, WriterError> {
    let (program, args) = cmd.split_first().ok_or(WriterError::NoCommand)?;
    let parent = nix::unistd::getppid().as_raw() as u32;
    let (duty, sentence) = assess(real_getenv, parent)?;
    tracing::info!(duty = %duty, pid = std::process::id(), "{sentence}");
    match duty {
        Duty::Inherit | Duty::Off => {
            let err = Command::new(program).args(args).exec();
            Err(WriterError::Spawn {
                command: program.to_string_lossy().into_owned(),
                source: err,
            })
        }
        Duty::Take => run_holding(data_dir, wait, program, args),
    }
}

fn run_holding(
    data_dir: &Path,
    wait: Duration,
    program: &OsString,
    args: &[OsString],
) -> Result<i32, WriterError> {
    let lock = acquire(data_dir, wait)?;
    let me = std::process::id();
    tracing::info!(path = %lock.path().display(), pid = me, "holding the writer lock");

    // Block the forwarded signals in this thread before any other thread
    // exists, so they are delivered only through sigwait in the forwarder.
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(s);
    }
    set.thread_block().map_err(|source| WriterError::Sys {
        what: "pthread_sigmask",
        source,
    })?;

    // Orphans of the command (a daemonized writer) become our children, so
    // the lock is held until they are gone too.
    if let Err(source) = nix::sys::prctl::set_child_subreaper(true) {
        let _ = set.thread_unblock();
        let _ = lock.release();
        return Err(WriterError::Sys {
            what: "prctl(PR_SET_CHILD_SUBREAPER)",
            source,
        });
    }

    let child_set = set;
    let mut command = Command::new(program);
    command.args(args).env(HELD, me.to_string());
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid, sigprocmask).
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The parent may have died before prctl: then nobody would kill us.
            if nix::unistd::getppid().as_raw() as u32 != me {
                return Err(std::io::Error::other("writer exec parent died before exec"));
            }
            child_set.thread_unblock()?;
            Ok(())
        });
    }
    let child = match command.spawn() {
        Ok(c) => c,
        Err(source) => {
            let _ = set.thread_unblock();
            let _ = lock.release();
            return Err(WriterError::Spawn {
                command: program.to_string_lossy().into_owned(),
                source,
            });
        }
    };
    let child_pid = Pid::from_raw(child.id() as i32);
    tracing::info!(
        child = child_pid.as_raw(),
        command = %sanitize(&program.to_string_lossy()),
        "started child"
    );

    // Reap every descendant, not just the child: as a child subreaper this
    // process adopts what the command orphans (a daemonized writer), and the
    // lock is released only when the last of them is gone (seed: release
    // after the last child). `reaping` is held while signalling and while
    // reaping, so a signal never reaches a pid recycled after our reap.
    let reaping = Arc::new(Mutex::new(false));
    let reaping_fwd = Arc::clone(&reaping);
    let forwarder = std::thread::Builder::new()
        .name("signal-forwarder".into())
        .spawn(move || loop {
            let Ok(sig) = set.wait() else { continue };
            let done = reaping_fwd.lock().unwrap_or_else(|e| e.into_inner());
            if *done {
                return;
            }
            // The child first, then every other descendant (a daemon in its
            // own session gets no terminal signal otherwise).
            let _ = kill(child_pid, sig);
            let others: Vec<i32> = descendants(me as i32)
                .into_iter()
                .filter(|p| *p != child_pid.as_raw())
                .collect();
            tracing::info!(
                signal = %sig,
                child = child_pid.as_raw(),
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
            Ok(st) if st.pid() == Some(child_pid) => {
                status = Some(st);
                let left = descendants(me as i32);
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
                break;
            }
            Err(source) => {
                if status.is_none() {
                    *done = true;
                    return Err(WriterError::Sys {
                        what: "waitpid",
                        source,
                    });
                }
                // Cannot wait any more: leftovers are killed before release.
                for pid in descendants(me as i32) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
                *done = true;
                break;
            }
        }
    }
    drop(child);
    let code = match status {
        Some(WaitStatus::Exited(_, code)) => code,
        Some(WaitStatus::Signaled(_, sig, _)) => 128 + sig as i32,
        other => {
            tracing::warn!(?other, "unexpected wait status");
            125
        }
    };
    let path = lock.path().to_path_buf();
    if let Err(e) = lock.release() {
        // Closing the descriptor (done by release either way) drops the lock.
        tracing::warn!("{e}");
    }
    tracing::info!(path = %path.display(), exit_code = code, "the command and every descendant are gone; released the writer lock");
    Ok(code)
}

/// Every process whose chain of parents reaches `root` (not `root` itself),
/// from `/proc`. Processes that vanish meanwhile are skipped. Used by
/// `writer exec` and `bucket hold`, both child subreapers.
pub fn descendants(root: i32) -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let mut children: std::collections::BTreeMap<i32, Vec<i32>> = Default::default();
    for p in all.flatten() {
        if let Ok(s) = p.stat() {
            children.entry(s.ppid).or_default().push(s.pid);
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Some(c) = children.get(&pid) {
            for &k in c {
                if !out.contains(&k) && k != root {
                    out.push(k);
                    stack.push(k);
                }
            }
        }
    }
    out
}
