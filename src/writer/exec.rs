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
///   forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to it; releases the lock
///   only after the child has been reaped; returns the child's exit code, or
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

    // `reaped` guards against signalling a recycled pid: it is set while the
    // child is still a zombie (waitid WNOWAIT), before the real reap.
    let reaped = Arc::new(Mutex::new(false));
    let reaped_fwd = Arc::clone(&reaped);
    let forwarder = std::thread::Builder::new()
        .name("signal-forwarder".into())
        .spawn(move || loop {
            let Ok(sig) = set.wait() else { continue };
            let done = reaped_fwd.lock().unwrap_or_else(|e| e.into_inner());
            if *done {
                return;
            }
            tracing::info!(signal = %sig, child = child_pid.as_raw(), "forwarding signal");
            let _ = kill(child_pid, sig);
        });
    if let Err(e) = forwarder {
        // Never return (and so release the lock) while the child runs.
        tracing::warn!("cannot start the signal forwarder, signals will not reach the child: {e}");
    }

    // Wait until the child has exited but leave it a zombie, so its pid
    // cannot be reused while the forwarder might still signal it.
    loop {
        match waitid(
            Id::Pid(child_pid),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
        ) {
            Err(nix::Error::EINTR) => continue,
            Ok(_) => break,
            Err(e) => {
                tracing::warn!("waitid failed ({e}); falling back to waitpid");
                break;
            }
        }
    }
    let status = {
        let mut done = reaped.lock().unwrap_or_else(|e| e.into_inner());
        *done = true;
        loop {
            match waitpid(child_pid, None) {
                Err(nix::Error::EINTR) => continue,
                other => break other,
            }
        }
    };
    drop(child);
    let code = match status {
        Ok(WaitStatus::Exited(_, code)) => code,
        Ok(WaitStatus::Signaled(_, sig, _)) => 128 + sig as i32,
        Ok(other) => {
            tracing::warn!(?other, "unexpected wait status");
            125
        }
        Err(source) => {
            return Err(WriterError::Sys {
                what: "waitpid",
                source,
            })
        }
    };
    let path = lock.path().to_path_buf();
    if let Err(e) = lock.release() {
        // Closing the descriptor (done by release either way) drops the lock.
        tracing::warn!("{e}");
    }
    tracing::info!(path = %path.display(), exit_code = code, "child reaped; released the writer lock");
    Ok(code)
}
