//! The hold engine of `leasectl bucket hold`: acquire the bucket lease, run
//! a command while it is held, stop the command when the fence closes, and
//! release the lease only after the command and all it left are gone.
//!
//! The command runs in the containment [`crate::supervise::contain`] chooses
//! (a PID namespace of its own where the kernel allows one), so that nothing
//! of it outlives leasectl, however leasectl dies.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::bucket::fence::{clock_offset_limit_s, WATCHDOG_TICK};
use crate::bucket::FenceClose;
use crate::bucket::{
    new_instance_id, BucketLease, KeepAlive, LeaseConfig, LeaseError, LeaseWatch, ReleaseReport,
    Released,
};
use crate::clock::SharedClock;
use crate::exit::Exit;
use crate::store::ObjectStore;
use crate::supervise;
use crate::text::format_secs;
use crate::text::sanitize;

/// The variable holding the held lease's generation (its fencing token) in
/// the command's environment; unset when the record carries none.
pub(crate) const GENERATION_ENV: &str = "LEASECTL_GENERATION";

/// How `bucket hold` runs.
pub(crate) struct HoldOptions {
    /// The lease (TTL, exclusion).
    pub config: LeaseConfig,
    /// Take the lease as this id (default: a new random one).
    pub instance_id: Option<String>,
    /// Keep retrying the acquire for this long.
    pub wait: Duration,
    /// Time between SIGTERM and SIGKILL when the fence closes.
    pub(crate) grace: Option<Duration>,
    /// `--containment`: a PID namespace for the command, or why not.
    pub containment: supervise::ContainmentMode,
}

/// `bucket hold`: acquire the lease on `prefix`, run `command` while it is
/// held, stop it when the fence closes. Returns the process exit code.
///
/// The command's environment: `LEASECTL_LEASE_KEY`, `LEASECTL_INSTANCE_ID`,
/// [`GENERATION_ENV`] (when the record has a generation) and
/// [`supervise::FENCE_FD_ENV`], the read end of a pipe whose write end is
/// closed the instant the fence closes, before SIGTERM.
pub(crate) async fn hold(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    prefix: &str,
    opts: HoldOptions,
    command: &[OsString],
) -> Exit {
    let HoldOptions {
        config,
        instance_id,
        wait,
        grace,
        containment,
    } = opts;
    let id = instance_id.unwrap_or_else(new_instance_id);
    // The fence fd's pipe, before anything is acquired: without it the
    // command could not hear the fence, so it does not run.
    let pipe = match supervise::FencePipe::new() {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("cannot create the fence pipe ({e}); nothing was acquired, the command was not started");
            return Exit::Failed;
        }
    };
    let containment = match choose_containment(containment) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    warn_without_service_clock(store.as_ref(), &config);
    let lease =
        match acquire_waiting(store.clone(), clock.clone(), prefix, &id, &config, wait).await {
            Ok(l) => l,
            Err(code) => return code,
        };
    tracing::info!(
        key = %lease.key(),
        instance_id = %sanitize(&lease.record().instance_id),
        exclusion = %lease.exclusion().as_str(),
        ttl_s = config.ttl_s,
        containment = %containment,
        "lease held; starting the command"
    );
    let key = lease.key().to_owned();
    // A renewal keeps the generation: the acquire's is the holding's.
    let generation = lease.record().generation;
    let grace = effective_grace(grace, config.ttl());
    let keep = KeepAlive::start(lease);

    // Descendants that CMD orphans (a daemonized writer) become our children,
    // so the fence can find and stop them too.
    let _ = supervise::become_subreaper();
    // The handlers before the command: a signal sent once it runs (it may
    // say it is ready at once) is passed on, never left to its default
    // action, which would end leasectl with the lease held.
    let signals = supervise::Signals::new();
    let cmd = command_for(command, &key, &id, &pipe, generation, containment);
    let (child, target) = match start_command(cmd, &keep, &key, containment, command) {
        Ok(started) => started,
        Err(exit) => {
            finish(keep).await;
            return exit;
        }
    };
    arm_fence(
        &keep,
        pipe.into_writer(),
        target.clone(),
        grace,
        clock.clone(),
    );
    supervise_until_exit(child, target, signals, keep, &key, grace, clock).await
}

/// The containment for `mode`, decided before anything is acquired:
/// `require` refuses with nothing to release, and a refusal under `auto` is
/// said once, at start, with what is lost. `Err` is the exit code (125).
fn choose_containment(mode: supervise::ContainmentMode) -> Result<supervise::Containment, Exit> {
    match supervise::contain::choose(mode) {
        Ok((c, None)) => Ok(c),
        Ok((c, Some(refused))) => {
            tracing::warn!("{}", supervise::contain::what_is_lost(&refused));
            Ok(c)
        }
        Err(refused) => {
            tracing::error!("{refused}; --containment require: not starting (nothing was acquired, the command was not started)");
            Err(Exit::CannotStart)
        }
    }
}

/// Said once, at start, for a store without a clock of its own (a local
/// directory): nothing can check this host's clock against the others'.
fn warn_without_service_clock(store: &dyn ObjectStore, config: &LeaseConfig) {
    if !store.has_clock() {
        tracing::warn!(
            "{} is a local directory: it has no clock of its own, so this host's clock is not checked against the other holders'. If the directory is shared between hosts (NFS), keep their clocks within {} of each other (NTP): a holder whose clock runs slow writes past its lease's end",
            sanitize(&store.describe()),
            format_secs(clock_offset_limit_s(config.ttl_s))
        );
    }
}

/// Starts `cmd` unless the fence closed first. `Err` is the exit code (the
/// lease still to be released by the caller): 5 fenced, 125 containment
/// that did not start, 126/127 a command that cannot be run.
fn start_command(
    mut cmd: tokio::process::Command,
    keep: &KeepAlive,
    key: &str,
    containment: supervise::Containment,
    command: &[OsString],
) -> Result<(tokio::process::Child, Option<supervise::ChildHandle>), Exit> {
    if !keep.status().is_open() {
        tracing::error!(key = %key, "the fence closed before the command could start; not starting it");
        return Err(Exit::Fenced);
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if containment.is_contained() => {
            // The shim (this binary) did not start: the namespace or /proc/self/exe.
            tracing::error!("cannot start the command's containment ({containment}): {e}; --containment off runs it without");
            return Err(Exit::CannotStart);
        }
        Err(e) => {
            tracing::error!(
                "cannot run {}: {e}",
                sanitize(&command[0].to_string_lossy())
            );
            return Err(Exit::spawn_failed(&e));
        }
    };
    let target = child
        .id()
        .and_then(|pid| supervise::ChildHandle::open(pid as i32).ok());
    Ok((child, target))
}

/// Hooks the stop sequence onto the fence's close. The fence is enforced off
/// the async runtime: the watchdog thread that closes it also closes the
/// fence fd and then starts the stop sequence, so a stuck renewal or a busy
/// runtime cannot delay either. A hook that never runs (renewals stopped) is
/// dropped, which closes the fd too.
fn arm_fence(
    keep: &KeepAlive,
    fence_writer: supervise::FenceWriter,
    target: Option<supervise::ChildHandle>,
    grace: Duration,
    clock: SharedClock,
) {
    keep.on_close(move |close| {
        // The fence fd first: a command that polls it hears the close before
        // any signal reaches it.
        fence_writer.close();
        if let Some(t) = target {
            stop_command(t, close, grace, clock);
        }
    });
}

/// Waits for the command, passing `signals` (installed before it started) on
/// to it ([`supervise::signals`]),
/// and says when the fence closes; then kills its leftovers and releases the
/// lease. A signal that ends the hold (leasectl's own CPU-time or file-size
/// limit) stops the command as the fence's close does (SIGTERM, SIGKILL after
/// `grace`). Returns the command's exit code, 5 when the fence closed before
/// it exited, or 128 + the signal that ended the hold.
async fn supervise_until_exit(
    mut child: tokio::process::Child,
    target: Option<supervise::ChildHandle>,
    mut signals: supervise::Signals,
    keep: KeepAlive,
    key: &str,
    grace: Duration,
    clock: SharedClock,
) -> Exit {
    let mut fenced = false;
    let mut ended: Option<i32> = None;
    loop {
        tokio::select! {
            status = child.wait() => {
                let code = supervise::status_exit(status);
                reap_leftovers();
                // Whether the fence closed before CMD exited decides the exit code.
                fenced |= keep.closed_reason().is_some();
                finish(keep).await;
                break match ended {
                    _ if fenced => Exit::Fenced,
                    Some(sig) => Exit::killed_by(sig),
                    None => code,
                };
            }
            _ = keep.closed(), if !fenced => {
                fenced = true;
                let why = keep.closed_reason().map(|r| r.to_string()).unwrap_or_default();
                tracing::error!(key = %key, "fence closed ({why}): stopping the command (SIGTERM, then SIGKILL within {})", format_secs(grace.as_secs_f64()));
                if target.is_none() {
                    let _ = child.start_kill();
                }
            }
            Some(sig) = signals.recv() => {
                if !supervise::signals::ends_hold(sig) {
                    if let Some(t) = &target {
                        t.signal(sig);
                    }
                } else if ended.is_none() {
                    ended = Some(sig);
                    tracing::error!(key = %key, "{} received (leasectl's own {} limit): ending the hold: stopping the command (SIGTERM, then SIGKILL within {}), then releasing the lease", supervise::signal_name(sig), if sig == libc::SIGXCPU { "CPU-time" } else { "file-size" }, format_secs(grace.as_secs_f64()));
                    match &target {
                        Some(t) => term_then_kill(t.clone(), clock.mono() + grace, clock.clone()),
                        None => {
                            let _ = child.start_kill();
                        }
                    }
                }
            }
        }
    }
}

/// The command `bucket hold` runs: `command` with the lease's environment
/// (`LEASECTL_LEASE_KEY`, `LEASECTL_INSTANCE_ID`, `LEASECTL_FENCE_FD`, and
/// `LEASECTL_GENERATION` when the record has one, removed otherwise), the
/// parent-death hook, and the fence pipe's read end inherited by it alone.
/// Contained, the process spawned is the shim ([`supervise::contain`]),
/// which runs `command` as the namespace's pid 2 with the same environment,
/// descriptors and terminal.
fn command_for(
    command: &[OsString],
    key: &str,
    id: &str,
    pipe: &supervise::FencePipe,
    generation: Option<u64>,
    containment: supervise::Containment,
) -> tokio::process::Command {
    let mut cmd = if containment.is_contained() {
        supervise::contain::shim_command(command)
    } else {
        let mut cmd = tokio::process::Command::new(&command[0]);
        cmd.args(&command[1..]);
        cmd
    };
    cmd.env("LEASECTL_LEASE_KEY", key)
        .env("LEASECTL_INSTANCE_ID", id)
        .env(supervise::FENCE_FD_ENV, pipe.read_fd().to_string())
        .env(supervise::FENCE_PIPE_ENV, pipe.identity())
        .stdin(Stdio::inherit());
    // Never a value inherited from our own environment: unknown is unset.
    match generation {
        Some(g) => cmd.env(GENERATION_ENV, g.to_string()),
        None => {
            tracing::info!("the lease record carries no generation: {GENERATION_ENV} is not set for the command");
            cmd.env_remove(GENERATION_ENV)
        }
    };
    // SAFETY: the hooks call only async-signal-safe functions; a crashed
    // holder leaves no writer behind; the command alone inherits the fence fd.
    // The namespace first: entering a user namespace clears the parent-death
    // signal, so it is set after.
    unsafe {
        if containment.is_contained() {
            cmd.pre_exec(supervise::contain::enter_hook(containment));
        }
        cmd.pre_exec(supervise::die_with_parent(std::process::id(), None));
        cmd.pre_exec(pipe.inherit_in_child());
    }
    cmd
}

/// Acquires the lease on `prefix` as `id`, retrying for `wait` while another
/// holder has it (or it is under watch). `Err` is `bucket hold`'s exit code.
async fn acquire_waiting(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    prefix: &str,
    id: &str,
    config: &LeaseConfig,
    wait: Duration,
) -> Result<BucketLease, Exit> {
    let mut watch = LeaseWatch::new();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match BucketLease::acquire_as(
            store.clone(),
            clock.clone(),
            prefix,
            id,
            config.clone(),
            &mut watch,
        )
        .await
        {
            Ok(l) => return Ok(l),
            Err(e @ (LeaseError::HeldByOther { .. } | LeaseError::UnderWatch { .. }))
                if tokio::time::Instant::now() < deadline =>
            {
                tracing::info!("{e}; retrying");
                let pause = config.ttl() / 3;
                tokio::time::sleep(
                    pause
                        .min(deadline - tokio::time::Instant::now())
                        .max(Duration::from_millis(100)),
                )
                .await;
            }
            Err(e) => {
                tracing::error!("lease not acquired: {e}");
                return Err(match e {
                    LeaseError::Store(_) => Exit::Failed,
                    _ => Exit::Refused,
                });
            }
        }
    }
}

/// `--grace` when not given, seconds.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// The grace CMD gets: `grace` as given (`None`: [`DEFAULT_GRACE`]), at most
/// a sixth of the TTL. With it CMD is killed at most five sixths of a TTL
/// after the last renewal began, a sixth of a TTL before any contender may
/// take the lease (that sixth absorbs clock offsets). Only a `--grace` the
/// operator gave is warned about when cut (issue 35 trip 11).
pub(crate) fn effective_grace(grace: Option<Duration>, ttl: Duration) -> Duration {
    let cap = ttl / 6;
    let asked = grace.unwrap_or(DEFAULT_GRACE);
    if asked > cap {
        if let Some(grace) = grace {
            tracing::warn!(
            "--grace {} is longer than a sixth of the TTL: CMD will be killed {} after SIGTERM, before the lease can be taken over",
                format_secs(grace.as_secs_f64()),
                format_secs(cap.as_secs_f64())
            );
        }
        cap
    } else {
        asked
    }
}

/// The stop sequence, run off the async runtime when the fence closes:
/// SIGTERM now, SIGKILL `grace` later but no later than the last renewal +
/// the fence window + `grace` on the boot-time clock — at once, without
/// SIGTERM, if that moment has already passed (the process was paused or the
/// host suspended past it).
fn stop_command(
    target: supervise::ChildHandle,
    close: FenceClose,
    grace: Duration,
    clock: SharedClock,
) {
    // SIGKILL `grace` after SIGTERM, and never later than `grace` after the
    // deadline itself (measured from the last renewal, not from when this
    // process got to run again).
    let now = clock.mono();
    let kill_at = (now + grace).min(close.deadline.renewed_mono + close.deadline.window + grace);
    if now >= close.deadline.renewed_mono + close.deadline.window + grace {
        // Late (paused or suspended past it): no grace, and no thread to
        // start first — every microsecond here is one the command may write in.
        let n = supervise::kill_tree(&target);
        tracing::error!("the fence closed late (this process was paused or the host suspended): SIGKILL at once ({n} processes)");
        return;
    }
    term_then_kill(target, kill_at, clock);
}

/// SIGTERM to the command now, SIGKILL to all of it at `kill_at` (boot-time
/// clock) unless it has exited, from a thread of its own (at once when no
/// thread can be started).
fn term_then_kill(target: supervise::ChildHandle, kill_at: Duration, clock: SharedClock) {
    target.signal(libc::SIGTERM);
    let fallback = target.clone();
    let run = move || {
        loop {
            let now = clock.mono();
            if now >= kill_at {
                break;
            }
            if target.has_exited() {
                return;
            }
            std::thread::sleep((kill_at - now).min(WATCHDOG_TICK));
        }
        if !target.has_exited() {
            let n = supervise::kill_tree(&target);
            tracing::error!("the command did not stop after SIGTERM: SIGKILL ({n} processes)");
        }
    };
    if std::thread::Builder::new()
        .name("leasectl-stop".into())
        .spawn(run)
        .is_err()
    {
        // No thread to wait the grace out: kill at once rather than late.
        supervise::kill_tree(&fallback);
    }
}

/// Kills what CMD left running after it exited (daemonized descendants)
/// before the lease is released; says so when it finds any.
fn reap_leftovers() {
    let left = supervise::kill_descendants(libc::SIGKILL);
    if left > 0 {
        tracing::warn!(
            "the command exited but left {left} process(es) running (e.g. daemonized); they were killed before the lease was released"
        );
    }
}

/// Stops renewing and releases the lease, saying how the release went.
pub(crate) async fn finish(keep: KeepAlive) {
    log_release(keep.stop_and_release().await);
}

/// Logs how a lease's release went (a warning unless released as ours).
pub(crate) fn log_release(report: ReleaseReport) {
    match report {
        r @ ReleaseReport::Released(Released::NotOurs(_) | Released::LeftToExpire { .. }) => {
            tracing::warn!("lease {r}")
        }
        r @ ReleaseReport::Released(_) => tracing::info!("lease {r}"),
        r => tracing::warn!("lease {r}"),
    }
}
