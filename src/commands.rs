//! The one-shot commands `probe` and `bucket hold`, on top of the engine.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::bucket::probe::{probe_scratch, PreconditionReport};
use crate::bucket::race::{RaceReport, BEST_EFFORT, FAIL_CLOSED, PROBE_ROUNDS};
use crate::bucket::{
    new_instance_id, BucketLease, Exclusion, KeepAlive, LeaseConfig, LeaseError, LeaseWatch,
    ReleaseReport, Released,
};
use crate::clock::SharedClock;
use crate::exit::Exit;
use crate::store::{ObjectStore, StoreError};
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
    scratch_key: &'a str,
    /// `conditional`, `not_conditional`, `unsupported`, `not_permitted`, `failed`.
    verdict: &'static str,
    exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<&'a PreconditionReport>,
    /// `--race`: each primitive's rounds, winners per round, verdict; cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    race: Option<&'a RaceReport>,
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
    probe_race(store, root, json, None, out).await
}

/// [`probe`], then with `race = Some(n)` (and only when the steps pass) the
/// race probe ([`crate::bucket::race`]: [`PROBE_ROUNDS`] rounds of `n`
/// concurrent requests per primitive). Two winners in a round: verdict
/// `not_atomic`, exit 3. Interrupted (SIGINT, SIGTERM, SIGHUP), it removes its
/// scratch keys and returns 128 + the signal.
pub async fn probe_race(
    store: &dyn ObjectStore,
    root: &str,
    json: bool,
    race: Option<usize>,
    out: &mut impl std::io::Write,
) -> i32 {
    let key = crate::bucket::probe::scratch_key(root);
    if !json {
        let _ = writeln!(out, "probing {} with scratch key {key}", store.describe());
    }
    let work = async {
        let result = probe_scratch(store, &key).await;
        let raced = match (&result, race) {
            (Ok(r), Some(n)) if r.conditional() => {
                Some(crate::bucket::race::race(store, &key, n, PROBE_ROUNDS).await)
            }
            _ => None,
        };
        (result, raced)
    };
    let (result, raced) = tokio::select! {
        done = work => done,
        sig = interrupted() => {
            // The probe's requests were dropped mid-way: remove whatever it may have written.
            let mut left = Vec::new();
            let absent = format!("{key}.absent");
            let race_key = crate::bucket::race::race_key(&key);
            for k in [key.as_str(), absent.as_str(), race_key.as_str()] {
                if let Err(e) = store.delete(k, None).await {
                    left.push(format!("{} ({e})", sanitize(k)));
                }
            }
            if left.is_empty() {
                eprintln!("leasectl: probe interrupted; its scratch keys were removed");
            } else {
                eprintln!(
                    "leasectl: probe interrupted; could not remove {} (a later probe removes \
                     scratch keys older than 10 minutes)",
                    left.join(", ")
                );
            }
            return 128 + sig;
        }
    };
    let (result, raced) = match (result, raced) {
        (Ok(r), Some(Err(e))) => (Ok(r), Err(e)),
        (r, Some(Ok(x))) => (r, Ok(Some(x))),
        (r, _) => (r, Ok(None)),
    };
    let race_finding = raced.as_ref().ok().and_then(|x| x.as_ref()?.finding());
    let (verdict, code, text, error) = match &result {
        Ok(_) if race_finding.is_some() => (
            "not_atomic",
            EXIT_NOT_CONDITIONAL,
            format!(
                "not atomic — {}: a lease here excludes nobody, and an acquire refuses it \
                 ({FAIL_CLOSED}). {BEST_EFFORT}",
                race_finding.clone().unwrap_or_default()
            ),
            None,
        ),
        Ok(_) if raced.is_err() => {
            let e = raced
                .as_ref()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            (
                "failed",
                Exit::Failed.code(),
                format!("race probe failed: {e}"),
                Some(e),
            )
        }
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
        let doc = ProbeJson {
            schema: "leasectl-probe/1",
            service: store.describe(),
            scratch_key: &key,
            verdict,
            exit_code: code,
            report: result.as_ref().ok(),
            race: raced.as_ref().ok().and_then(|x| x.as_ref()),
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
    if let Ok(Some(r)) = &raced {
        print_race(r, out);
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

fn print_race(r: &RaceReport, out: &mut impl std::io::Write) {
    let _ = writeln!(
        out,
        "  race:      {} rounds of {} concurrent requests per primitive ({})",
        r.rounds,
        r.contenders,
        r.cost()
    );
    for x in &r.races {
        let _ = writeln!(out, "    {}", x.line());
    }
    for c in &r.changed {
        let _ = writeln!(out, "  changed:   {c}");
    }
}

/// Resolves with the number of the first SIGINT, SIGTERM or SIGHUP.
async fn interrupted() -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => libc::SIGINT,
        _ = term.recv() => libc::SIGTERM,
        _ = hup.recv() => libc::SIGHUP,
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
                    LeaseError::Store(_) => Exit::Failed.code(),
                    _ => EXIT_NOT_ACQUIRED,
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

async fn finish(keep: KeepAlive) {
    match keep.stop_and_release().await {
        r @ ReleaseReport::Released(Released::NotOurs(_)) => tracing::warn!("lease {r}"),
        r @ ReleaseReport::Released(_) => tracing::info!("lease {r}"),
        r => tracing::warn!("lease {r}"),
    }
}

fn exit_code(status: std::io::Result<std::process::ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => Exit::Failed.code(),
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
pub const EXIT_REFUSED: i32 = Exit::Refused.code();

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
        return Exit::Usage.code();
    }
    let key = lease_key(&a.prefix);
    let look = |store: Arc<dyn ObjectStore>, key: String| async move {
        crate::bucket::read_lease(store.as_ref(), &key, None).await
    };
    let mut seen = match look(store.clone(), key.clone()).await {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(out, "leasectl: cannot read {key}: {e}");
            return Exit::Failed.code();
        }
    };
    let describe = |obs: &Observed, out: &mut (dyn std::io::Write + Send)| {
        let j = judge(obs, clock.wall());
        let _ = writeln!(out, "lease    {} ({})", sanitize(&key), sanitize(&a.url));
        if let Some(n) = crate::text::lookalike_note(&a.url) {
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
                    return Exit::Failed.code();
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
            return Exit::Usage.code();
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
        // The URL or prefix as given, or as shown (escaped): a name holding a
        // control or invisible character can always be typed.
        let accepted = [a.url.as_str(), a.prefix.as_str()]
            .into_iter()
            .flat_map(|s| [s.to_owned(), sanitize(s)])
            .any(|s| typed == s.trim().trim_end_matches('/'));
        if typed.is_empty() || !accepted {
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
    match takeover(store, clock.clone(), audit, req).await {
        Ok(done) => {
            let _ = writeln!(out, "{done}");
            if let Some(lease) = done.held {
                let _ = writeln!(out, "holding the lease; Ctrl-C or SIGTERM releases it");
                let _ = out.flush();
                let keep = KeepAlive::start(lease);
                let mut signals = Signals::new();
                let lost = tokio::select! {
                    _ = signals.recv() => None,
                    _ = keep.closed() => keep.closed_reason(),
                };
                finish(keep).await;
                if let Some(why) = lost {
                    let _ = writeln!(out, "the held lease ended: {why}");
                    let mut entry = done.audit_entry.clone();
                    entry.time = clock.wall();
                    entry.outcome = Some(format!("held lease ended: {why}"));
                    if let Err(e) = audit.append(&entry).await {
                        let _ = writeln!(out, "audit: could not record the loss: {e}");
                    }
                    return EXIT_FENCED;
                }
            }
            Exit::Ok.code()
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
            Exit::Ok.code()
        }
        Err(e) => {
            let _ = writeln!(out, "leasectl: {e}");
            Exit::Failed.code()
        }
    }
}
