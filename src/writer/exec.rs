//! `leasectl writer exec`: the writer-lease rules as a pod entrypoint wrapper.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::SigSet;
use nix::unistd::Pid;

use super::flock::{acquire, real_getenv};
use super::{assess, sanitize, Duty, WriterError, HELD};
use crate::exit::Exit;
use crate::supervise;

/// Runs `cmd` under the writer-lease rules (ARCHITECTURE.md;
/// docs/writer-leases.md; seed `writerlease-package.txt`), supervised by
/// [`crate::supervise`].
///
/// Logs the duty sentence (tracing, info) first. Then, by duty:
/// - **Take**: polls the lock of `data_dir` for up to `wait`, failing closed
///   with an error naming the holder; spawns `cmd` with
///   `CLOUD_WRITER_LEASE_HELD=<own pid>` and `PR_SET_PDEATHSIG(SIGKILL)`;
///   becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`), so descendants the
///   command orphans (a daemonized writer) are adopted; forwards every
///   signal of [`supervise::signals::forwarded`] (SIGTERM, SIGINT, SIGHUP,
///   SIGQUIT, SIGUSR1, …) to the child and every other descendant, and on
///   SIGXCPU or SIGXFSZ (its own limits) sends them SIGTERM and ends with
///   128 + that signal; reaps every child, adopted ones included, and
///   releases the lock only after the last one is gone; returns
///   [`Exit::Child`] with the child's exit code, or 128 + signal number when
///   a signal killed it (real-time signals included)
///   ([`Exit::CannotStart`], 125, for a wait status that is neither).
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
pub fn writer_exec(data_dir: &Path, wait: Duration, cmd: &[OsString]) -> Result<Exit, WriterError> {
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
) -> Result<Exit, WriterError> {
    let lock = acquire(data_dir, wait)?;
    let me = std::process::id();
    tracing::info!(path = %lock.path().display(), pid = me, "holding the writer lock");

    // Block the signals it passes on or ends on (supervise::signals) in this
    // thread before any other thread exists, so they are delivered only
    // through sigwait in the forwarder.
    let set: SigSet = supervise::signals::sigset(&supervise::signals::caught());
    set.thread_block().map_err(|source| WriterError::Sys {
        what: "pthread_sigmask",
        source,
    })?;

    // Orphans of the command (a daemonized writer) become our children, so
    // the lock is held until they are gone too.
    if let Err(source) = supervise::become_subreaper() {
        let _ = set.thread_unblock();
        let _ = lock.release();
        return Err(WriterError::Sys {
            what: "prctl(PR_SET_CHILD_SUBREAPER)",
            source,
        });
    }

    let mut command = Command::new(program);
    command.args(args).env(HELD, me.to_string());
    // SAFETY: the hook runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid, sigprocmask).
    unsafe {
        command.pre_exec(supervise::die_with_parent(me, Some(set)));
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

    // Reap every descendant, not just the child (adopted orphans too);
    // `reaping` is held while signalling and while reaping, so a signal never
    // reaches a pid recycled after our reap.
    let reaping = Arc::new(Mutex::new(false));
    let ended = Arc::new(std::sync::atomic::AtomicI32::new(0));
    supervise::forward_signals(set, child_pid, Arc::clone(&reaping), Arc::clone(&ended));
    let status = supervise::reap_all(child_pid, &reaping).map_err(|source| WriterError::Sys {
        what: "waitpid",
        source,
    })?;
    drop(child);
    let exit = match (status, ended.load(std::sync::atomic::Ordering::SeqCst)) {
        // The hold was ended by leasectl's own limit: said as that signal.
        (Some(_), sig) if sig != 0 => Exit::killed_by(sig),
        (Some(end), _) => end.exit(),
        (None, _) => {
            tracing::warn!("the command was never seen to end");
            Exit::CannotStart
        }
    };
    let path = lock.path().to_path_buf();
    if let Err(e) = lock.release() {
        // Closing the descriptor (done by release either way) drops the lock.
        tracing::warn!("{e}");
    }
    tracing::info!(path = %path.display(), exit_code = exit.code(), "the command and every descendant are gone; released the writer lock");
    Ok(exit)
}
