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
) -> i32 {
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

/// `leasectl takeover` exit code: refused by a guard (nothing written to the lease).
pub const EXIT_REFUSED: i32 = 4;

/// Everything `leasectl takeover` needs besides the store.
pub struct TakeoverArgs {
    /// The prefix inside the store.
    pub prefix: String,
    /// The URL as given (shown and audited).
    pub url: String,
    /// Endpoint, for the audit entry.
    pub endpoint: String,
    /// Bucket, for S3.
    pub bucket: Option<String>,
    /// `--reason`.
    pub reason: String,
    /// `--expect-etag`.
    pub expect_etag: Option<String>,
    /// `--then`.
    pub then: crate::takeover::Then,
    /// `--force`.
    pub force: bool,
    /// `--yes`.
    pub yes: bool,
    /// `--ttl` in seconds.
    pub ttl_s: u64,
    /// Conditional or best-effort.
    pub exclusion: Exclusion,
}

/// `leasectl takeover`: look, show, confirm, then the audited takeover.
/// Returns the exit code (0 taken, 4 refused, 1 failed, 2 usage).
pub async fn takeover_cmd(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    audit: &crate::audit::AuditLog,
    a: TakeoverArgs,
    out: &mut (impl std::io::Write + Send),
) -> i32 {
    use crate::bucket::{judge, lease_key, LeaseState, Observed};
    use crate::takeover::{takeover, TakeoverError, TakeoverRequest};

    if a.reason.trim().is_empty() {
        let _ = writeln!(out, "leasectl: a reason is required (--reason)");
        return 2;
    }
    let key = lease_key(&a.prefix);
    let look = |store: Arc<dyn ObjectStore>, key: String| async move {
        crate::bucket::lease::read(store.as_ref(), &key).await
    };
    let mut seen = match look(store.clone(), key.clone()).await {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(out, "leasectl: cannot read {key}: {e}");
            return 1;
        }
    };
    let describe = |obs: &Observed, out: &mut (dyn std::io::Write + Send)| {
        let j = judge(obs, clock.wall());
        let _ = writeln!(out, "lease    {} ({})", key, a.url);
        let sentence = j.sentence();
        let rest = sentence
            .strip_prefix(&format!("{}: ", j.state))
            .unwrap_or(&sentence);
        let _ = writeln!(out, "state    {}: {rest}", j.state);
        if let Some(r) = obs.record() {
            let _ = writeln!(out, "holder   {}", sanitize(&r.instance_id));
            let _ = writeln!(
                out,
                "renewed  {} (TTL {} s)",
                r.renewed_at.to_rfc3339(),
                r.ttl_s
            );
        }
        let _ = writeln!(
            out,
            "ETag     {}",
            obs.etag().unwrap_or("(none: no LEASE object)")
        );
        j.state
    };
    let state = describe(&seen, out);
    if let Some(want) = &a.expect_etag {
        if seen.etag() != Some(crate::store::normalize_etag(want).as_str()) {
            let _ = writeln!(
                out,
                "refused: the LEASE's ETag is {} but --expect-etag is {}; look again",
                seen.etag().unwrap_or("(none)"),
                sanitize(want)
            );
            return EXIT_REFUSED;
        }
    }
    if state == LeaseState::Fresh && !a.force {
        let _ = writeln!(
            out,
            "refused: the lease is fresh (a live holder). Use --force only if you know it is gone."
        );
        return EXIT_REFUSED;
    }
    // Suspect and malformed records must be seen unchanged for one TTL.
    let mut watched_for = Duration::ZERO;
    if matches!(state, LeaseState::Suspect | LeaseState::Malformed) {
        let ttl = Duration::from_secs(a.ttl_s);
        let mut watch = LeaseWatch::new();
        let _ = writeln!(
            out,
            "watching the {state} record for {} before taking it over…",
            crate::bucket::format_secs(ttl.as_secs_f64())
        );
        let _ = out.flush();
        let step = (ttl / 6).clamp(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            let etag = seen.etag().unwrap_or("").to_owned();
            watched_for = watch.observe(&etag, clock.mono());
            if watched_for >= ttl {
                break;
            }
            tokio::time::sleep(step.min(ttl - watched_for)).await;
            seen = match look(store.clone(), key.clone()).await {
                Ok(o) => o,
                Err(e) => {
                    let _ = writeln!(out, "leasectl: cannot read {key}: {e}");
                    return 1;
                }
            };
            let st = judge(&seen, clock.wall()).state;
            if !matches!(st, LeaseState::Suspect | LeaseState::Malformed) {
                let _ = writeln!(
                    out,
                    "the record changed while watched; it is now {st}. Look again."
                );
                return EXIT_REFUSED;
            }
        }
    }
    if !a.yes {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() {
            let _ = writeln!(
                out,
                "leasectl: not a terminal: confirm interactively or pass --yes"
            );
            return 2;
        }
        let _ = write!(
            out,
            "This replaces the lease above ({}, then {}). Type the prefix URL to confirm: ",
            if a.force { "FORCED" } else { "guarded" },
            a.then
        );
        let _ = out.flush();
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        let typed = line.trim().trim_end_matches('/');
        if typed.is_empty()
            || (typed != a.url.trim().trim_end_matches('/')
                && typed != a.prefix.trim().trim_end_matches('/'))
        {
            let _ = writeln!(out, "not confirmed; nothing written");
            return EXIT_REFUSED;
        }
    }
    let req = TakeoverRequest {
        prefix: a.prefix.clone(),
        seen,
        watched_for,
        reason: a.reason.clone(),
        then: a.then.clone(),
        force: a.force,
        ttl_s: a.ttl_s,
        exclusion: a.exclusion,
        target: crate::audit::AuditTarget {
            endpoint: a.endpoint.clone(),
            bucket: a.bucket.clone(),
            key: key.clone(),
            url: a.url.clone(),
        },
    };
    match takeover(store, clock, audit, req).await {
        Ok(done) => {
            let _ = writeln!(
                out,
                "taken: {} now names {} (ETag {})",
                key,
                sanitize(&done.written.instance_id),
                done.etag
            );
            if let Some(r) = &done.released {
                let _ = writeln!(out, "released: {r:?}; the prefix is free");
            }
            if let Some(d) = done.handover_deadline {
                let _ = writeln!(
                    out,
                    "handed over: the successor must start (acquire_as its id) before {}",
                    d.to_rfc3339()
                );
            }
            let _ = writeln!(
                out,
                "audit: {} (id {})",
                done.audit_path.display(),
                done.audit_id
            );
            if let Some(lease) = done.held {
                let _ = writeln!(out, "holding the lease; Ctrl-C or SIGTERM releases it");
                let _ = out.flush();
                let keep = KeepAlive::start(lease);
                let mut fence = keep.fence();
                let mut signals = Signals::new();
                tokio::select! {
                    _ = signals.recv() => {}
                    _ = fence.wait_for(|open| !open) => {
                        let _ = writeln!(out, "the held lease was lost or could not be renewed");
                    }
                }
                finish(keep).await;
            }
            0
        }
        Err(e @ TakeoverError::Changed { .. }) => {
            let _ = writeln!(out, "refused: {e}");
            EXIT_REFUSED
        }
        Err(e) if e.is_refusal() => {
            let _ = writeln!(out, "refused: {e}");
            EXIT_REFUSED
        }
        Err(e) => {
            let _ = writeln!(out, "failed: {e}");
            1
        }
    }
}

/// `leasectl audit`: the log newest first, as text or one JSON array.
pub fn audit_list(path: &std::path::Path, json: bool, out: &mut impl std::io::Write) -> i32 {
    match crate::audit::AuditLog::read(path) {
        Ok(mut entries) => {
            entries.reverse();
            if json {
                let _ = writeln!(
                    out,
                    "{}",
                    crate::text::to_json_pretty(&entries).unwrap_or_default()
                );
            } else if entries.is_empty() {
                let _ = writeln!(out, "no audit entries in {}", path.display());
            } else {
                for e in &entries {
                    let _ = writeln!(
                        out,
                        "{}  {:<7}  {}  {}  {}  reason: {}{}",
                        crate::audit::fmt_time(&e.time),
                        e.phase,
                        sanitize(&e.operator),
                        sanitize(&e.target.url),
                        e.observed.judgement,
                        sanitize(&e.reason),
                        e.outcome
                            .as_deref()
                            .map(|o| format!("  → {}", sanitize(o)))
                            .unwrap_or_default()
                    );
                }
            }
            0
        }
        Err(e) => {
            let _ = writeln!(out, "leasectl: {e}");
            1
        }
    }
}
