//! The one-shot commands `probe` and `bucket hold`, on top of the engine.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::bucket::probe::{probe_scratch, PreconditionReport};
use crate::bucket::{
    new_instance_id, BucketLease, Exclusion, KeepAlive, LeaseConfig, LeaseError, LeaseWatch,
    ReleaseReport, Released,
};
use crate::clock::SharedClock;
use crate::exit::Exit;
use crate::store::{ObjectStore, StoreError};
use crate::supervise;
use crate::text::sanitize;

/// `bucket hold` exit code: the lease could not be acquired.
pub const EXIT_NOT_ACQUIRED: i32 = Exit::Refused.code();
/// `bucket hold` exit code: the lease was lost or its fence closed; CMD was stopped.
pub const EXIT_FENCED: i32 = Exit::Fenced.code();

/// Exit code of `probe`: the service cannot give exclusion (a precondition
/// ignored, or conditional writes not supported).
pub const EXIT_NOT_CONDITIONAL: i32 = Exit::Attention.code();

/// `leasectl probe --json`: the document printed.
#[derive(serde::Serialize)]
struct ProbeJson<'a> {
    schema: &'static str,
    service: String,
    /// The endpoint URL (credentials `***`); null for AWS's own endpoint of
    /// `region`, and for a local store.
    endpoint: Option<String>,
    /// The region requests are signed for (null for a local store).
    region: Option<String>,
    /// `path` or `virtual_host` (null for a local store).
    addressing_style: Option<crate::store::AddressingStyle>,
    scratch_key: &'a str,
    /// `conditional`, `not_conditional`, `unsupported`, `not_permitted`, `failed`.
    verdict: &'static str,
    exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<&'a PreconditionReport>,
    adaptations: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs the probe on the scratch key under `root` and prints the findings
/// (as text, or as one JSON document with `json`). Returns the exit code: 0
/// conditional (perhaps with adaptations, each named), 3 a precondition
/// ignored or conditional writes not supported, 1 not permitted or unreachable.
pub async fn probe(
    store: &dyn ObjectStore,
    root: &str,
    json: bool,
    out: &mut impl std::io::Write,
) -> i32 {
    let key = crate::bucket::probe::scratch_key(root);
    if !json {
        let _ = writeln!(out, "probing {} with scratch key {key}", store.describe());
    }
    let result = probe_scratch(store, &key, &crate::clock::SystemClock::new()).await;
    let (verdict, code, text, error) = match &result {
        Ok(report) => {
            let (v, c, t) = if let Some(h) = report.unsupported() {
                (
                    "unsupported",
                    EXIT_NOT_CONDITIONAL,
                    format!(
                        "this service does not support conditional writes (it refuses {h} itself) — \
                         a lease here excludes nobody; only best-effort mode ({}) can run",
                        crate::bucket::CONDITIONAL_SWITCH
                    ),
                )
            } else if let Some(h) = report.ignored_header() {
                (
                    "not_conditional",
                    EXIT_NOT_CONDITIONAL,
                    format!(
                        "ignores {h} — a lease here excludes nobody; only best-effort mode ({}) can run",
                        crate::bucket::CONDITIONAL_SWITCH
                    ),
                )
            } else if report.adaptations().is_empty() {
                (
                    "conditional",
                    Exit::Ok.code(),
                    "conditional — a lease here excludes a second writer".to_owned(),
                )
            } else {
                (
                    "conditional",
                    Exit::Ok.code(),
                    "conditional with the adaptations above — a lease here excludes a second writer"
                        .to_owned(),
                )
            };
            (v, c, t, None)
        }
        Err(StoreError::AccessDenied(m)) => (
            "not_permitted",
            Exit::Failed.code(),
            format!(
                "not permitted — the credentials may not write {key} ({})",
                sanitize(m)
            ),
            Some(format!("access denied: {}", sanitize(m))),
        ),
        Err(StoreError::NotImplemented(m)) => (
            "unsupported",
            EXIT_NOT_CONDITIONAL,
            format!(
                "this service does not support conditional writes ({})",
                sanitize(m)
            ),
            Some(format!("not implemented: {}", sanitize(m))),
        ),
        Err(e) => (
            "failed",
            Exit::Failed.code(),
            format!("probe failed: {e}"),
            Some(e.to_string()),
        ),
    };
    if json {
        let info = store.endpoint_info();
        let doc = ProbeJson {
            schema: "leasectl-probe/1",
            service: store.describe(),
            endpoint: info.url,
            region: info.region,
            addressing_style: info.addressing_style,
            scratch_key: &key,
            verdict,
            exit_code: code,
            report: result.as_ref().ok(),
            adaptations: result.as_ref().map(|r| r.adaptations()).unwrap_or_default(),
            error,
        };
        match crate::text::to_json_pretty(&doc) {
            Ok(t) => {
                let _ = writeln!(out, "{t}");
            }
            Err(e) => {
                let _ = writeln!(out, "{{\"error\": \"{e}\"}}");
                return Exit::Failed.code();
            }
        }
        return code;
    }
    if let Ok(report) = &result {
        print_report(report, out);
    }
    let _ = writeln!(out, "verdict: {text}");
    code
}

fn print_report(r: &PreconditionReport, out: &mut impl std::io::Write) {
    for (i, s) in r.steps.iter().enumerate() {
        let _ = writeln!(out, "  {}. {}", i + 1, s.line());
    }
    let _ = writeln!(out, "  etag_form: {}", r.etag_form.as_str());
    let _ = writeln!(out, "  release:   {}", r.release);
    for a in r.adaptations() {
        let _ = writeln!(out, "  adapted:   {a}");
    }
    for c in &r.changed {
        let _ = writeln!(out, "  changed:   {c}");
    }
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
        "lease held; starting the command"
    );
    let key = lease.key().to_owned();
    let grace = effective_grace(grace, config.ttl());
    let fence_clock = clock.clone();
    let keep = KeepAlive::start(lease);

    // Descendants that CMD orphans (a daemonized writer) become our children,
    // so the fence can find and stop them too.
    let _ = supervise::become_subreaper();
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("LEASECTL_LEASE_KEY", &key)
        .env("LEASECTL_INSTANCE_ID", &id)
        .stdin(Stdio::inherit());
    // SAFETY: the hook calls only async-signal-safe functions; a crashed
    // holder leaves no writer behind.
    unsafe {
        cmd.pre_exec(supervise::die_with_parent(std::process::id(), None));
    }
    if !keep.status().is_open() {
        tracing::error!(key = %key, "the fence closed before the command could start; not starting it");
        finish(keep).await;
        return EXIT_FENCED;
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(
                "cannot run {}: {e}",
                sanitize(&command[0].to_string_lossy())
            );
            finish(keep).await;
            return Exit::spawn_failed(&e).code();
        }
    };
    let target = child
        .id()
        .and_then(|pid| supervise::ChildHandle::open(pid as i32).ok());
    // The fence is enforced off the async runtime: the watchdog thread that
    // closes it also starts the stop sequence, so a stuck renewal or a busy
    // runtime cannot delay SIGTERM or SIGKILL.
    if let Some(t) = &target {
        let t = t.clone();
        keep.on_close(move |close| stop_command(t, close, grace, fence_clock));
    }
    let mut signals = supervise::Signals::new();
    let mut fenced = false;
    loop {
        tokio::select! {
            status = child.wait() => {
                let code = supervise::status_exit(status).code();
                reap_leftovers();
                // Whether the fence closed before CMD exited decides the exit code.
                fenced |= keep.closed_reason().is_some();
                finish(keep).await;
                break if fenced { EXIT_FENCED } else { code };
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

/// Acquires the lease on `prefix` as `id`, retrying for `wait` while another
/// holder has it (or it is under watch). `Err` is `bucket hold`'s exit code.
async fn acquire_waiting(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    prefix: &str,
    id: &str,
    config: &LeaseConfig,
    wait: Duration,
) -> Result<BucketLease, i32> {
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
                    LeaseError::Store(_) => Exit::Failed.code(),
                    _ => EXIT_NOT_ACQUIRED,
                });
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
    target: supervise::ChildHandle,
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
        let n = supervise::kill_tree(&target);
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

async fn finish(keep: KeepAlive) {
    log_release(keep.stop_and_release().await);
}

/// Logs how a lease's release went (a warning unless released as ours).
fn log_release(report: ReleaseReport) {
    match report {
        r @ ReleaseReport::Released(Released::NotOurs(_)) => tracing::warn!("lease {r}"),
        r @ ReleaseReport::Released(_) => tracing::info!("lease {r}"),
        r => tracing::warn!("lease {r}"),
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
pub const EXIT_REFUSED: i32 = Exit::Refused.code();
/// `leasectl takeover` exit code: a signal ended the wait for the replaced
/// holder's fence; nothing was released or handed over early (audited).
pub const EXIT_INTERRUPTED: i32 = Exit::Interrupted.code();

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
/// Returns the exit code (0 taken, 4 refused — an absent LEASE too, 5 a held
/// lease lost, 6 a forced takeover's wait ended by a signal, 1 failed, 2 usage).
///
/// The console's steps: [`crate::takeover::check_request`] and
/// [`crate::takeover::preflight`] (the guards),
/// [`crate::takeover::watch_one_ttl`] (a suspect or malformed record),
/// [`crate::takeover::typed_confirms`] (the typed prefix) and
/// [`crate::takeover::takeover_with`] (the executor).
pub async fn takeover_cmd(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    audit: &crate::audit::AuditLog,
    a: TakeoverArgs,
    out: &mut (impl std::io::Write + Send),
) -> i32 {
    use crate::takeover::{check_request, TakeoverError};

    match check_request(&a.reason, a.ttl_s) {
        Err(TakeoverError::NoReason) => {
            let _ = writeln!(out, "leasectl: a reason is required (--reason)");
            return Exit::Usage.code();
        }
        Err(e) => {
            let _ = writeln!(out, "refused: {e}");
            return EXIT_REFUSED;
        }
        Ok(()) => {}
    }
    let (seen, watched_for) = match look_and_guard(store.as_ref(), &clock, &a, out).await {
        Ok(looked) => looked,
        Err(code) => return code,
    };
    if !a.yes {
        if let Err(code) = confirm_typed(&a, out) {
            return code;
        }
    }
    let mut signals = supervise::Signals::new();
    let result = execute_takeover(
        store,
        &clock,
        audit,
        &a,
        seen,
        watched_for,
        &mut signals,
        out,
    )
    .await;
    takeover_report(result, &clock, audit, &mut signals, out).await
}

/// Reads the LEASE, shows it, and applies the guards (the console's
/// preflight, `--expect-etag`); watches a suspect or malformed record for one
/// TTL. Returns what was seen and how long it was watched, or the exit code.
async fn look_and_guard(
    store: &dyn ObjectStore,
    clock: &SharedClock,
    a: &TakeoverArgs,
    out: &mut (impl std::io::Write + Send),
) -> Result<(crate::bucket::Observed, Duration), i32> {
    use crate::takeover::{preflight, watch_one_ttl, TakeoverError, Watched};

    let key = crate::bucket::lease_key(&a.prefix);
    let seen = match crate::bucket::read_lease(store, &key, None).await {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(out, "leasectl: cannot read {key}: {e}");
            return Err(Exit::Failed.code());
        }
    };
    let now = clock.wall();
    describe_lease(&seen, now, &key, &a.url, out);
    let guard = preflight(
        &a.prefix,
        &seen,
        Duration::ZERO,
        &a.reason,
        a.ttl_s,
        a.force,
        now,
    );
    if let Err(TakeoverError::Absent { .. }) = guard {
        let _ = writeln!(
            out,
            "refused: {} does not exist: there is nothing to take over (the prefix is free); nothing was written",
            sanitize(&key)
        );
        return Err(EXIT_REFUSED);
    }
    if let Some(want) = &a.expect_etag {
        if seen.etag() != Some(crate::store::normalize_etag(want).as_str()) {
            let _ = writeln!(
                out,
                "refused: the LEASE's ETag is {} but --expect-etag is {}; look again",
                seen.etag().unwrap_or("(none)"),
                sanitize(want)
            );
            return Err(EXIT_REFUSED);
        }
    }
    match guard {
        Ok(_) => Ok((seen, Duration::ZERO)),
        Err(TakeoverError::Fresh { .. }) => {
            let _ = writeln!(
                out,
                "refused: the lease is fresh (a live holder). Use --force only if you know it is gone."
            );
            Err(EXIT_REFUSED)
        }
        // Suspect and malformed records must be seen unchanged for one TTL.
        Err(TakeoverError::UnderWatch { state, .. }) => {
            let ttl = Duration::from_secs(a.ttl_s);
            let _ = writeln!(
                out,
                "watching the {state} record for {} before taking it over…",
                crate::bucket::format_secs(ttl.as_secs_f64())
            );
            let _ = out.flush();
            match watch_one_ttl(store, &key, seen, ttl, clock).await {
                Watched::Unchanged { seen, for_ } => Ok((seen, for_)),
                Watched::Changed(st) => {
                    let _ = writeln!(
                        out,
                        "the record changed while watched; it is now {st}. Look again."
                    );
                    Err(EXIT_REFUSED)
                }
                Watched::Unreadable(e) => {
                    let _ = writeln!(out, "leasectl: cannot read {key}: {e}");
                    Err(Exit::Failed.code())
                }
            }
        }
        Err(e) => {
            let _ = writeln!(out, "refused: {e}");
            Err(EXIT_REFUSED)
        }
    }
}

/// The lease as `leasectl takeover` shows it before asking: key and URL,
/// state (judged at `now`), holder, renewal, ETag.
fn describe_lease(
    obs: &crate::bucket::Observed,
    now: chrono::DateTime<chrono::Utc>,
    key: &str,
    url: &str,
    out: &mut (impl std::io::Write + Send),
) {
    let j = crate::bucket::judge(obs, now);
    let _ = writeln!(out, "lease    {} ({})", sanitize(key), sanitize(url));
    if let Some(n) = crate::text::lookalike_note(url) {
        let _ = writeln!(out, "warning  {n}");
    }
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
}

/// Asks on the terminal for the prefix URL, judged by the console's rule
/// ([`crate::takeover::typed_confirms`]: the URL or prefix as given,
/// percent-decoded, or as shown escaped). `Err` is the exit code: 2 without a
/// terminal, 4 not confirmed.
fn confirm_typed(a: &TakeoverArgs, out: &mut (impl std::io::Write + Send)) -> Result<(), i32> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        let _ = writeln!(
            out,
            "leasectl: not a terminal: confirm interactively or pass --yes"
        );
        return Err(Exit::Usage.code());
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
    // The URL may be shown percent-encoded (`%E2%80%8B`) where the console
    // shows the name escaped (`\u{200b}`): both are accepted.
    let decoded = percent_encoding::percent_decode_str(&a.url)
        .decode_utf8_lossy()
        .into_owned();
    if !crate::takeover::typed_confirms(&line, &[&a.url, &a.prefix, &decoded]) {
        let _ = writeln!(out, "not confirmed; nothing written");
        return Err(EXIT_REFUSED);
    }
    Ok(())
}

/// The confirmed takeover, through the console's executor. From the intent
/// on, a signal never kills the takeover half-way: a forced one's wait for
/// the replaced holder's fence ends early and says what it left (`--then
/// release`, `handover`); `--then hold` releases.
#[allow(clippy::too_many_arguments)]
async fn execute_takeover(
    store: Arc<dyn ObjectStore>,
    clock: &SharedClock,
    audit: &crate::audit::AuditLog,
    a: &TakeoverArgs,
    seen: crate::bucket::Observed,
    watched_for: Duration,
    signals: &mut supervise::Signals,
    out: &mut (impl std::io::Write + Send),
) -> Result<crate::takeover::TakeoverOutcome, crate::takeover::TakeoverError> {
    use crate::takeover::{takeover_with, TakeoverRequest, WaitControl};
    let info = store.endpoint_info();
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
            endpoint: info.url,
            region: info.region,
            addressing_style: info.addressing_style,
            bucket: a.bucket.clone(),
            key: crate::bucket::lease_key(&a.prefix),
            url: a.url.clone(),
        },
    };
    let wait = WaitControl {
        notify: Box::new(|s: &str| {
            let _ = writeln!(out, "{s}");
            let _ = out.flush();
        }),
        stop: Box::pin(async {
            match signals.recv().await {
                Some(sig) => supervise::signal_name(sig),
                None => std::future::pending().await,
            }
        }),
    };
    takeover_with(store, clock.clone(), audit, req, wait).await
}

/// Prints the takeover's result and returns the exit code; with `--then
/// hold`, holds the lease until a signal (exit 0) or its loss (audited, 5).
async fn takeover_report(
    result: Result<crate::takeover::TakeoverOutcome, crate::takeover::TakeoverError>,
    clock: &SharedClock,
    audit: &crate::audit::AuditLog,
    signals: &mut supervise::Signals,
    out: &mut (impl std::io::Write + Send),
) -> i32 {
    use crate::takeover::{hold_until, record_loss, TakeoverError};
    match result {
        Ok(done) => {
            let _ = writeln!(out, "{done}");
            if let Some(lease) = done.held {
                let _ = writeln!(out, "holding the lease; Ctrl-C or SIGTERM releases it");
                let _ = out.flush();
                let (lost, released) = hold_until(lease, async {
                    signals.recv().await;
                })
                .await;
                log_release(released);
                if let Some(why) = lost {
                    let _ = writeln!(out, "the held lease ended: {why}");
                    let why = why.to_string();
                    if let Err(e) = record_loss(audit, &done.audit_entry, clock, &why).await {
                        let _ = writeln!(out, "audit: could not record the loss: {e}");
                    }
                    return EXIT_FENCED;
                }
            }
            Exit::Ok.code()
        }
        Err(e @ TakeoverError::Interrupted(_)) => {
            let _ = writeln!(out, "interrupted: {e}");
            EXIT_INTERRUPTED
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
            Exit::Failed.code()
        }
    }
}

/// `leasectl audit`: the log newest first, as text or one JSON array. Each
/// line that is not an entry (torn by a crash, edited) is named on stderr
/// (its number and byte offset) and skipped; the rest is listed (exit 0).
pub fn audit_list(path: &std::path::Path, json: bool, out: &mut impl std::io::Write) -> i32 {
    match crate::audit::AuditLog::read_report(path) {
        Ok(report) => {
            let mut entries = report.entries;
            entries.reverse();
            for u in &report.unreadable {
                eprintln!(
                    "leasectl: audit log {}: {u}",
                    sanitize(&path.display().to_string())
                );
            }
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
            Exit::Ok.code()
        }
        Err(e) => {
            let _ = writeln!(out, "leasectl: {e}");
            Exit::Failed.code()
        }
    }
}
