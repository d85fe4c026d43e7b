//! `leasectl bucket hold`: run a command while holding the bucket lease,
//! and the supervision of that command while it runs.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::app::Context;
use crate::bucket::{
    new_instance_id, BucketLease, KeepAlive, LeaseConfig, LeaseError, LeaseWatch, ReleaseReport,
    Released,
};
use crate::cli::HoldArgs;
use crate::clock::{SharedClock, SystemClock};
use crate::exit::Exit;
use crate::store::ObjectStore;
use crate::text::sanitize;

/// `leasectl bucket hold PREFIX_URL -- CMD`: each request's deadline is at
/// most a third of the TTL.
pub async fn run(a: &HoldArgs, ctx: &Context) -> Exit {
    let target = match crate::app::target_or_usage(&a.prefix_url) {
        Ok(t) => t,
        Err(exit) => return exit,
    };
    let connector = ctx.connector_with_timeout(ctx.s3.timeout.min(a.ttl / 3));
    crate::app::announce("bucket hold", &connector, &target).await;
    let store = match connector.open(&target).await {
        Ok(s) => s,
        Err(e) => return crate::app::fail(&color_eyre::eyre::eyre!("{target}: {e}")),
    };
    let config = LeaseConfig {
        ttl_s: a.ttl.as_secs(),
        exclusion: ctx.exclusion(),
    };
    hold(
        store,
        SystemClock::shared(),
        target.prefix(),
        HoldOptions {
            config,
            instance_id: a.instance_id.clone(),
            wait: a.wait,
            grace: a.grace,
        },
        &a.command,
    )
    .await
}

/// How `bucket hold` runs.
pub struct HoldOptions {
    /// The lease (TTL, exclusion).
    pub config: LeaseConfig,
    /// Take the lease as this id (default: a new random one).
    pub instance_id: Option<String>,
    /// Keep retrying the acquire for this long.
    pub wait: Duration,
    /// Time between SIGTERM and SIGKILL when the fence closes.
    pub grace: Duration,
}

/// `bucket hold`: acquire the lease on `prefix`, run `command` while it is
/// held, stop it when the fence closes. Returns the process exit code.
pub async fn hold(
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
    } = opts;
    let id = instance_id.unwrap_or_else(new_instance_id);
    let mut watch = LeaseWatch::new();
    let deadline = tokio::time::Instant::now() + wait;
    let lease = loop {
        match BucketLease::acquire_as(
            store.clone(),
            clock.clone(),
            prefix,
            &id,
            config.clone(),
            &mut watch,
        )
        .await
        {
            Ok(l) => break l,
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
                return match e {
                    LeaseError::Store(_) => Exit::Failed,
                    _ => Exit::Refused,
                };
            }
        }
    };
    tracing::info!(
        key = %lease.key(),
        instance_id = %sanitize(&lease.record().instance_id),
        exclusion = %lease.exclusion().as_str(),
        ttl_s = config.ttl_s,
        "lease held; starting the command"
    );
    let key = lease.key().to_owned();
    let grace = effective_grace(grace, config.ttl());
    let fence_clock = clock.clone();
    let keep = KeepAlive::start(lease);

    // Descendants that CMD orphans (a daemonized writer) become our children,
    // so the fence can find and stop them too.
    // SAFETY: prctl with an integer argument; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("LEASECTL_LEASE_KEY", &key)
        .env("LEASECTL_INSTANCE_ID", &id)
        .stdin(Stdio::inherit());
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to signal the
    // child if this process dies, so a crashed holder leaves no writer behind.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    if !keep.status().is_open() {
        tracing::error!(key = %key, "the fence closed before the command could start; not starting it");
        finish(keep).await;
        return Exit::Fenced;
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(
                "cannot run {}: {e}",
                sanitize(&command[0].to_string_lossy())
            );
            finish(keep).await;
            return Exit::spawn_failed(&e);
        }
    };
    let target = child
        .id()
        .and_then(|pid| ChildHandle::open(pid as i32).ok());
    // The fence is enforced off the async runtime: the watchdog thread that
    // closes it also starts the stop sequence, so a stuck renewal or a busy
    // runtime cannot delay SIGTERM or SIGKILL.
    if let Some(t) = &target {
        let t = t.clone();
        keep.on_close(move |close| stop_command(t, close, grace, fence_clock));
    }
    let mut signals = Signals::new();
    let mut fenced = false;
    loop {
        tokio::select! {
            status = child.wait() => {
                let code = exit_code(status);
                reap_leftovers();
                // Whether the fence closed before CMD exited decides the exit code.
                fenced |= keep.closed_reason().is_some();
                finish(keep).await;
                break if fenced { Exit::Fenced } else { code };
            }
            _ = keep.closed(), if !fenced => {
                fenced = true;
                let why = keep.closed_reason().map(|r| r.to_string()).unwrap_or_default();
                tracing::error!(key = %key, "fence closed ({why}): stopping the command (SIGTERM, then SIGKILL within {})", crate::bucket::format_secs(grace.as_secs_f64()));
                if target.is_none() {
                    let _ = child.start_kill();
                }
            }
            sig = signals.recv() => {
                if let (Some(t), Some(sig)) = (&target, sig) {
                    t.signal(sig);
                }
            }
        }
    }
}

/// The longest `--grace` honoured: a sixth of the TTL. With it CMD is killed
/// at most five sixths of a TTL after the last renewal began, a sixth of a TTL
/// before any contender may take the lease (that sixth absorbs clock offsets).
pub fn effective_grace(grace: Duration, ttl: Duration) -> Duration {
    let cap = ttl / 6;
    if grace > cap {
        tracing::warn!(
            "--grace {} is longer than a sixth of the TTL: CMD will be killed {} after SIGTERM, before the lease can be taken over",
            crate::bucket::format_secs(grace.as_secs_f64()),
            crate::bucket::format_secs(cap.as_secs_f64())
        );
        cap
    } else {
        grace
    }
}

/// The stop sequence, run off the async runtime when the fence closes:
/// SIGTERM now, SIGKILL `grace` later but no later than the last renewal +
/// the fence window + `grace` on the boot-time clock — at once, without
/// SIGTERM, if that moment has already passed (the process was paused or the
/// host suspended past it).
fn stop_command(
    target: ChildHandle,
    close: crate::bucket::FenceClose,
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
        let n = kill_tree(&target);
        tracing::error!("the fence closed late (this process was paused or the host suspended): SIGKILL at once ({n} processes)");
        return;
    }
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
            std::thread::sleep((kill_at - now).min(crate::bucket::fence::WATCHDOG_TICK));
        }
        if !target.has_exited() {
            let n = kill_tree(&target);
            tracing::error!("the command did not stop after SIGTERM: SIGKILL ({n} processes)");
        }
    };
    if std::thread::Builder::new()
        .name("leasectl-stop".into())
        .spawn(run)
        .is_err()
    {
        // No thread to wait the grace out: kill at once rather than late.
        kill_tree(&fallback);
    }
}

/// SIGKILLs the command and then every other descendant of this process
/// (`bucket hold` is a child subreaper, so even a daemonized grandchild stays
/// one). Returns how many processes were signalled.
fn kill_tree(target: &ChildHandle) -> usize {
    target.signal(libc::SIGKILL);
    let others = crate::writer::exec::descendants(std::process::id() as i32);
    for &pid in &others {
        send(pid, libc::SIGKILL);
    }
    1 + others.len()
}

/// Kills what CMD left running after it exited (daemonized descendants)
/// before the lease is released; says so when it finds any.
fn reap_leftovers() {
    let left = crate::writer::exec::descendants(std::process::id() as i32);
    if !left.is_empty() {
        for &pid in &left {
            send(pid, libc::SIGKILL);
        }
        tracing::warn!(
            "the command exited but left {} process(es) running (e.g. daemonized); they were killed before the lease was released",
            left.len()
        );
    }
}

/// A child process addressed by a pidfd (Linux 5.3+): signals reach that
/// process or nobody, never a process that reused its pid after it was reaped.
/// Falls back to the pid where pidfd is unavailable.
#[derive(Clone)]
struct ChildHandle(Arc<ChildFd>);

struct ChildFd {
    pid: i32,
    fd: Option<std::os::fd::OwnedFd>,
}

impl ChildHandle {
    fn open(pid: i32) -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let fd = (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) });
        Ok(Self(Arc::new(ChildFd { pid, fd })))
    }

    fn signal(&self, sig: i32) {
        use std::os::fd::AsRawFd;
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

    /// True once the process has exited (a pidfd polls readable then).
    fn has_exited(&self) -> bool {
        use std::os::fd::AsRawFd;
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

pub(super) async fn finish(keep: KeepAlive) {
    match keep.stop_and_release().await {
        r @ ReleaseReport::Released(Released::NotOurs(_)) => tracing::warn!("lease {r}"),
        r @ ReleaseReport::Released(_) => tracing::info!("lease {r}"),
        r => tracing::warn!("lease {r}"),
    }
}

fn exit_code(status: std::io::Result<std::process::ExitStatus>) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => Exit::Child(s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))),
        Err(_) => Exit::Failed,
    }
}

fn send(pid: i32, sig: i32) {
    // SAFETY: kill(2) with a pid we spawned and a plain signal number.
    unsafe {
        libc::kill(pid, sig);
    }
}

pub(super) struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    pub(super) fn new() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        let mk = |k| signal(k).expect("installing a signal handler");
        Self {
            term: mk(SignalKind::terminate()),
            int: mk(SignalKind::interrupt()),
            hup: mk(SignalKind::hangup()),
            quit: mk(SignalKind::quit()),
        }
    }

    pub(super) async fn recv(&mut self) -> Option<i32> {
        tokio::select! {
            _ = self.term.recv() => Some(libc::SIGTERM),
            _ = self.int.recv() => Some(libc::SIGINT),
            _ = self.hup.recv() => Some(libc::SIGHUP),
            _ = self.quit.recv() => Some(libc::SIGQUIT),
        }
    }
}
