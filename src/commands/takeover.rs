//! `leasectl takeover`: look, show, confirm, then the audited takeover
//! (module `crate::takeover`).

use std::sync::Arc;
use std::time::Duration;

use super::bucket_hold::{finish, Signals};
use crate::app::Context;
use crate::bucket::{Exclusion, KeepAlive, LeaseWatch};
use crate::cli::ThenArg;
use crate::clock::{SharedClock, SystemClock};
use crate::exit::Exit;
use crate::store::ObjectStore;
use crate::text::sanitize;

/// `leasectl takeover PREFIX_URL --reason WHY`: the audit log is opened
/// before anything else (no log, no write); then [`takeover_cmd`].
pub async fn run(a: &crate::cli::TakeoverArgs, ctx: &Context) -> Exit {
    let target = match crate::app::target_or_usage(&a.prefix_url) {
        Ok(t) => t,
        Err(exit) => return exit,
    };
    let connector = &ctx.connector;
    crate::app::announce("takeover", connector, &target).await;
    let log = match crate::app::open_audit(connector, &a.audit).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("leasectl: {e}; nothing was sent");
            return Exit::Failed;
        }
    };
    let store = match connector.open(&target).await {
        Ok(s) => s,
        Err(e) => return crate::app::fail(&color_eyre::eyre::eyre!("{target}: {e}")),
    };
    let args = TakeoverArgs {
        prefix: target.prefix().to_owned(),
        url: target.to_string(),
        endpoint: connector.endpoint(&target).await,
        bucket: target.bucket().map(str::to_owned),
        reason: a.reason.clone(),
        expect_etag: a.expect_etag.clone(),
        then: then_of(&a.then),
        force: a.force,
        yes: a.yes,
        ttl_s: ctx.applied.ttl.unwrap_or(a.ttl).as_secs().max(1),
        exclusion: ctx.exclusion(),
    };
    takeover_cmd(
        store,
        SystemClock::shared(),
        &log,
        args,
        &mut std::io::stdout(),
    )
    .await
}

/// The takeover's `Then` for `--then`.
fn then_of(t: &ThenArg) -> crate::takeover::Then {
    match t {
        ThenArg::Release => crate::takeover::Then::Release,
        ThenArg::Hold => crate::takeover::Then::Hold,
        ThenArg::Handover(id) => crate::takeover::Then::Handover(id.clone()),
    }
}

/// `SIGTERM`, `SIGINT`, … for a signal number.
fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

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
pub async fn takeover_cmd(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    audit: &crate::audit::AuditLog,
    a: TakeoverArgs,
    out: &mut (impl std::io::Write + Send),
) -> Exit {
    use crate::bucket::{judge, lease_key, LeaseState, Observed};
    use crate::takeover::{takeover_with, TakeoverError, TakeoverRequest, WaitControl};

    if a.reason.trim().is_empty() {
        let _ = writeln!(out, "leasectl: a reason is required (--reason)");
        return Exit::Usage;
    }
    let key = lease_key(&a.prefix);
    let look = |store: Arc<dyn ObjectStore>, key: String| async move {
        crate::bucket::read_lease(store.as_ref(), &key, None).await
    };
    let mut seen = match look(store.clone(), key.clone()).await {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(out, "leasectl: cannot read {key}: {e}");
            return Exit::Failed;
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
    if state == LeaseState::Absent {
        let _ = writeln!(
            out,
            "refused: {} does not exist: there is nothing to take over (the prefix is free); nothing was written",
            sanitize(&key)
        );
        return Exit::Refused;
    }
    if let Some(want) = &a.expect_etag {
        if seen.etag() != Some(crate::store::normalize_etag(want).as_str()) {
            let _ = writeln!(
                out,
                "refused: the LEASE's ETag is {} but --expect-etag is {}; look again",
                seen.etag().unwrap_or("(none)"),
                sanitize(want)
            );
            return Exit::Refused;
        }
    }
    if state == LeaseState::Fresh && !a.force {
        let _ = writeln!(
            out,
            "refused: the lease is fresh (a live holder). Use --force only if you know it is gone."
        );
        return Exit::Refused;
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
                    return Exit::Failed;
                }
            };
            let st = judge(&seen, clock.wall()).state;
            if !matches!(st, LeaseState::Suspect | LeaseState::Malformed) {
                let _ = writeln!(
                    out,
                    "the record changed while watched; it is now {st}. Look again."
                );
                return Exit::Refused;
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
            return Exit::Usage;
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
        // The URL may be shown percent-encoded (`%E2%80%8B`) where the
        // console shows the name escaped (`\u{200b}`): both are accepted.
        let decoded = percent_encoding::percent_decode_str(&a.url)
            .decode_utf8_lossy()
            .into_owned();
        let accepted = [a.url.as_str(), a.prefix.as_str(), decoded.as_str()]
            .into_iter()
            .flat_map(|s| [s.to_owned(), sanitize(s)])
            .any(|s| typed == s.trim().trim_end_matches('/'));
        if typed.is_empty() || !accepted {
            let _ = writeln!(out, "not confirmed; nothing written");
            return Exit::Refused;
        }
    }
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
            key: key.clone(),
            url: a.url.clone(),
        },
    };
    // From the intent on, a signal never kills the takeover half-way: a
    // forced one's wait for the replaced holder's fence ends early and says
    // what it left (`--then release`, `handover`); `--then hold` releases.
    let mut signals = Signals::new();
    let result = {
        let wait = WaitControl {
            notify: Box::new(|s: &str| {
                let _ = writeln!(out, "{s}");
                let _ = out.flush();
            }),
            stop: Box::pin(async {
                match signals.recv().await {
                    Some(sig) => signal_name(sig),
                    None => std::future::pending().await,
                }
            }),
        };
        takeover_with(store, clock.clone(), audit, req, wait).await
    };
    match result {
        Ok(done) => {
            let _ = writeln!(out, "{done}");
            if let Some(lease) = done.held {
                let _ = writeln!(out, "holding the lease; Ctrl-C or SIGTERM releases it");
                let _ = out.flush();
                let keep = KeepAlive::start(lease);
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
                    return Exit::Fenced;
                }
            }
            Exit::Ok
        }
        Err(e @ TakeoverError::Interrupted(_)) => {
            let _ = writeln!(out, "interrupted: {e}");
            Exit::Interrupted
        }
        Err(e @ TakeoverError::Changed { .. }) => {
            let _ = writeln!(out, "refused: {e}");
            Exit::Refused
        }
        Err(e) if e.is_refusal() => {
            let _ = writeln!(out, "refused: {e}");
            Exit::Refused
        }
        Err(e) => {
            let _ = writeln!(out, "failed: {e}");
            Exit::Failed
        }
    }
}
