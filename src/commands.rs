//! The one-shot commands `probe` and `bucket hold`, on top of the engine.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::bucket::probe::{probe_scratch, Honoured, PreconditionReport};
use crate::bucket::{
    new_instance_id, BucketLease, Exclusion, KeepAlive, LeaseConfig, LeaseError, LeaseWatch,
    Released,
};
use crate::clock::SharedClock;
use crate::store::{ObjectStore, StoreError};
use crate::text::sanitize;

/// `bucket hold` exit code: the lease could not be acquired.
pub const EXIT_NOT_ACQUIRED: i32 = 4;
/// `bucket hold` exit code: the lease was lost or its fence closed; CMD was stopped.
pub const EXIT_FENCED: i32 = 5;

/// Runs the probe on the scratch key under `root` and prints the findings.
/// Returns the exit code: 0 conditional, 3 a precondition ignored, 1 not
/// permitted or unreachable.
pub async fn probe(store: &dyn ObjectStore, root: &str, out: &mut impl std::io::Write) -> i32 {
    let key = format!("{root}.leasectl-probe/{}", new_instance_id());
    let _ = writeln!(out, "probing {} with scratch key {key}", store.describe());
    match probe_scratch(store, &key).await {
        Ok(report) => {
            print_report(&report, out);
            if report.conditional() {
                0
            } else {
                3
            }
        }
        Err(StoreError::AccessDenied(m)) => {
            let _ = writeln!(
                out,
                "verdict: not permitted — the credentials may not write {key} ({})",
                sanitize(&m)
            );
            1
        }
        Err(StoreError::NotImplemented(m)) => {
            let _ = writeln!(
                out,
                "verdict: conditional writes not implemented by the service ({})",
                sanitize(&m)
            );
            3
        }
        Err(e) => {
            let _ = writeln!(out, "verdict: probe failed: {e}");
            1
        }
    }
}

fn print_report(r: &PreconditionReport, out: &mut impl std::io::Write) {
    let word = |h: Honoured| match h {
        Honoured::Yes => "honoured",
        Honoured::Ignored => "IGNORED",
        Honoured::Unsupported => "not implemented",
    };
    let _ = writeln!(out, "  If-None-Match: *        {}", word(r.if_none_match));
    let _ = writeln!(out, "  If-Match (made-up ETag) {}", word(r.if_match));
    if let Some(d) = r.conditional_delete {
        let _ = writeln!(out, "  DELETE If-Match         {}", word(d));
    }
    let verdict = match r.ignored_header() {
        None => "conditional — a lease here excludes a second writer".to_owned(),
        Some(h) => format!(
            "ignores {h} — a lease here excludes nobody; only best-effort mode ({}) can run",
            crate::bucket::CONDITIONAL_SWITCH
        ),
    };
    let _ = writeln!(out, "verdict: {verdict}");
}

/// `bucket hold`: acquire the lease on `prefix`, run `command` while it is
/// held, stop it when the fence closes. Returns the process exit code.
pub async fn hold(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    prefix: &str,
    config: LeaseConfig,
    wait: Duration,
    grace: Duration,
    command: &[OsString],
) -> i32 {
    let id = new_instance_id();
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
                    LeaseError::Store(_) => 1,
                    _ => EXIT_NOT_ACQUIRED,
                };
            }
        }
    };
    tracing::info!(
        key = %lease.key(),
        instance_id = %lease.record().instance_id,
        exclusion = ?lease.exclusion(),
        ttl_s = config.ttl_s,
        "lease held; starting the command"
    );
    let key = lease.key().to_owned();
    let keep = KeepAlive::start(lease);
    let mut fence = keep.fence();

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
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(
                "cannot run {}: {e}",
                sanitize(&command[0].to_string_lossy())
            );
            finish(keep).await;
            return 127;
        }
    };
    let pid = child.id().map(|p| p as i32);
    let mut signals = Signals::new();
    let code = loop {
        tokio::select! {
            status = child.wait() => {
                let code = exit_code(status);
                finish(keep).await;
                break code;
            }
            r = fence.wait_for(|open| !open) => {
                let _ = r;
                tracing::error!(key = %key, "fence closed (lease lost or not renewed for 2/3 of a TTL): stopping the command");
                if let Some(pid) = pid {
                    send(pid, libc::SIGTERM);
                }
                if tokio::time::timeout(grace, child.wait()).await.is_err() {
                    tracing::error!("the command ignored SIGTERM for {grace:?}: SIGKILL");
                    let _ = child.kill().await;
                }
                let _ = child.wait().await;
                finish(keep).await;
                break EXIT_FENCED;
            }
            sig = signals.recv() => {
                if let (Some(pid), Some(sig)) = (pid, sig) {
                    send(pid, sig);
                }
            }
        }
    };
    code
}

async fn finish(keep: KeepAlive) {
    match keep.stop().await {
        Ok(lease) => match lease.release().await {
            Ok(Released::NotOurs(r)) => tracing::warn!(
                "not released: the lease is now held by {}",
                sanitize(&r.instance_id)
            ),
            Ok(how) => tracing::info!("lease released ({how:?})"),
            Err(e) => tracing::warn!("release failed (the lease expires after one TTL): {e}"),
        },
        Err(e) => tracing::warn!("lease already gone: {e}"),
    }
}

fn exit_code(status: std::io::Result<std::process::ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 1,
    }
}

fn send(pid: i32, sig: i32) {
    // SAFETY: kill(2) with a pid we spawned and a plain signal number.
    unsafe {
        libc::kill(pid, sig);
    }
}

struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        let mk = |k| signal(k).expect("installing a signal handler");
        Self {
            term: mk(SignalKind::terminate()),
            int: mk(SignalKind::interrupt()),
            hup: mk(SignalKind::hangup()),
            quit: mk(SignalKind::quit()),
        }
    }

    async fn recv(&mut self) -> Option<i32> {
        tokio::select! {
            _ = self.term.recv() => Some(libc::SIGTERM),
            _ = self.int.recv() => Some(libc::SIGINT),
            _ = self.hup.recv() => Some(libc::SIGHUP),
            _ = self.quit.recv() => Some(libc::SIGQUIT),
        }
    }
}

/// The exclusion asked for on the command line / environment.
pub fn exclusion_from(conditional_off: bool) -> Exclusion {
    if conditional_off {
        Exclusion::BestEffort
    } else {
        Exclusion::Conditional
    }
}
