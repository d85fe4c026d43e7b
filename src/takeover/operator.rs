//! The command line's takeover, as an operator runs it: look, show,
//! confirm (the typed prefix), then the audited takeover, and its report
//! with the exit code. The console takes the same steps through its dialog.

use std::sync::Arc;
use std::time::Duration;

use crate::audit::{AuditLog, AuditTarget};
use crate::bucket::{
    fmt_generation, judge, lease_key, read_lease, Exclusion, LeaseRecord, Observed, RecordFormat,
};
use crate::clock::{shown, SharedClock};
use crate::exit::{say, Exit};
use crate::hold::log_release;
use crate::store::{normalize_etag, ObjectStore};
use crate::supervise;
use crate::takeover::{check_store, typed_confirms, TakeoverError, TakeoverOutcome, Then};
use crate::text::{format_secs, lookalike_note, sanitize, sanitize_message};

/// The takeover an operator asked `leasectl takeover` for (its command line
/// resolved: the prefix's TARGET, the context's TTL and record format),
/// everything [`takeover_cmd`] needs besides the store. It becomes the
/// executor's [`crate::takeover::TakeoverRequest`] once looked at, guarded
/// and confirmed.
pub(crate) struct OperatorTakeover {
    /// The prefix inside the store.
    pub prefix: String,
    /// The URL as given (shown and audited).
    pub url: String,
    /// Bucket, for S3.
    pub bucket: Option<String>,
    /// `--reason`.
    pub reason: String,
    /// `--expect-etag`.
    pub(crate) expect_etag: Option<String>,
    /// `--then`.
    pub then: Then,
    /// `--force`.
    pub force: bool,
    /// `--yes`.
    pub(crate) yes: bool,
    /// `--ttl` in seconds.
    pub ttl_s: u64,
    /// Conditional or best-effort.
    pub exclusion: Exclusion,
    /// `--record-format` (or the context's `record_format`).
    pub record_format: RecordFormat,
}

/// `leasectl takeover`: look, show, confirm, then the audited takeover; a
/// write refused because the holder only renewed meanwhile (same holder and
/// generation) is looked at again and retried, at most [`LOOK_AGAIN`] times,
/// never with `--expect-etag`. Returns the exit code (0 taken, 4 refused — an absent LEASE too, 5 a held
/// lease lost, 6 a forced takeover's wait ended by a signal, 1 failed, 2 usage).
///
/// The console's steps: [`crate::takeover::check_request`] and
/// [`crate::takeover::preflight`] (the guards),
/// [`crate::takeover::watch_one_ttl`] (a suspect or malformed record),
/// [`crate::takeover::typed_confirms`] (the typed prefix) and
/// [`crate::takeover::takeover_with`] (the executor, which runs the store's
/// checks between the look and the write; this command runs them before its
/// look, [`crate::takeover::check_store`]).
pub(crate) async fn takeover_cmd(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    audit: &AuditLog,
    a: OperatorTakeover,
    out: &mut (impl std::io::Write + Send),
) -> Exit {
    use crate::takeover::{check_request, TakeoverError};

    match check_request(&a.reason, a.ttl_s) {
        Err(TakeoverError::NoReason) => {
            say("a reason is required (--reason)");
            return Exit::Usage;
        }
        Err(e) => {
            say(format!("refused: {}", sanitize_message(&e.to_string())));
            return Exit::Refused;
        }
        Ok(()) => {}
    }
    // The store's checks first (seconds on a slow or loaded store): the
    // LEASE is read after them, so that a holder renewing every few seconds
    // has not changed the ETag by the time the write is sent.
    let mut signals = supervise::Signals::new();
    if let Err(e) = check_store(store.as_ref(), clock.as_ref(), a.exclusion, &a.prefix).await {
        return takeover_report(Err(e), &clock, audit, &mut signals, out).await;
    }
    let mut looked_again = 0;
    loop {
        let (seen, watched_for) = match look_and_guard(store.as_ref(), &clock, &a, out).await {
            Ok(looked) => looked,
            Err(code) => return code,
        };
        if !a.yes && looked_again == 0 {
            if let Err(code) = confirm_typed(&a, out) {
                return code;
            }
        }
        let before = seen.record().cloned();
        let result = execute_takeover(
            store.clone(),
            &clock,
            audit,
            &a,
            Looked { seen, watched_for },
            &mut signals,
            out,
        )
        .await;
        // The holder renewed between the look and the write (the same holder
        // under the same generation: nothing the operator decided on has
        // changed): look again and retry, a few times, saying so. Never with
        // --expect-etag, which names the one record to replace.
        if let Err(TakeoverError::Changed {
            record: Some(now), ..
        }) = &result
        {
            if a.expect_etag.is_none()
                && looked_again < LOOK_AGAIN
                && before.as_ref().is_some_and(|b| only_renewed(b, now))
            {
                looked_again += 1;
                let _ = writeln!(
                    out,
                    "{} renewed its lease (generation {}) between the look and the write: looking again ({looked_again} of {LOOK_AGAIN})",
                    sanitize(&now.instance_id),
                    fmt_generation(now.generation)
                );
                continue;
            }
        }
        return takeover_report(result, &clock, audit, &mut signals, out).await;
    }
}

/// How many times `leasectl takeover` looks again and retries when the
/// holder only renewed between its look and its write.
pub(crate) const LOOK_AGAIN: u32 = 3;

/// Whether `now` is `before` renewed: the same holder under the same
/// generation (known), still held (not released).
fn only_renewed(before: &LeaseRecord, now: &LeaseRecord) -> bool {
    before.instance_id == now.instance_id
        && before.generation.is_some()
        && before.generation == now.generation
        && before.released_at.is_none()
        && now.released_at.is_none()
}

/// Reads the LEASE, shows it, and applies the guards (the console's
/// preflight, `--expect-etag`); watches a suspect or malformed record for one
/// TTL. Returns what was seen and how long it was watched, or the exit code.
async fn look_and_guard(
    store: &dyn ObjectStore,
    clock: &SharedClock,
    a: &OperatorTakeover,
    out: &mut (impl std::io::Write + Send),
) -> Result<(Observed, Duration), Exit> {
    use crate::takeover::{preflight, watch_one_ttl, TakeoverError, Watched};

    let key = lease_key(&a.prefix);
    let seen = match read_lease(store, &key, None).await {
        Ok(o) => o,
        Err(e) => {
            say(format!("cannot read {key}: {e}"));
            return Err(Exit::Failed);
        }
    };
    let now = clock.wall();
    describe_lease(&seen, now, &key, &a.url, out);
    if a.record_format == RecordFormat::Seed {
        let _ = writeln!(
            out,
            "format   record format seed: no generation will be written (the seed's four fields)"
        );
    }
    let guard = preflight(
        &a.prefix,
        &seen,
        Duration::ZERO,
        &a.reason,
        a.ttl_s,
        a.force,
        now,
    );
    if let Err(e @ (TakeoverError::Absent { .. } | TakeoverError::Released { .. })) = &guard {
        say(format!("refused: {}", sanitize_message(&e.to_string())));
        return Err(Exit::Refused);
    }
    if let Some(want) = &a.expect_etag {
        if seen.etag() != Some(normalize_etag(want).as_str()) {
            say(format!(
                "refused: the LEASE's ETag is {} but --expect-etag is {}; look again",
                seen.etag().unwrap_or("(none)"),
                sanitize(want)
            ));
            return Err(Exit::Refused);
        }
    }
    match guard {
        Ok(_) => Ok((seen, Duration::ZERO)),
        Err(TakeoverError::Fresh { .. }) => {
            say(
                "refused: the lease is fresh (a live holder). Use --force only if you know it is gone.",
            );
            Err(Exit::Refused)
        }
        // Suspect and malformed records must be seen unchanged for one TTL.
        Err(TakeoverError::UnderWatch { state, .. }) => {
            let ttl = Duration::from_secs(a.ttl_s);
            let _ = writeln!(
                out,
                "watching the {state} record for {} before taking it over…",
                format_secs(ttl.as_secs_f64())
            );
            let _ = out.flush();
            match watch_one_ttl(store, &key, seen, ttl, clock).await {
                Watched::Unchanged { seen, for_ } => Ok((seen, for_)),
                Watched::Changed(st) => {
                    say(format!(
                        "refused: the record changed while watched; it is now {st}. Look again."
                    ));
                    Err(Exit::Refused)
                }
                Watched::Unreadable(e) => {
                    say(format!("cannot read {key}: {e}"));
                    Err(Exit::Failed)
                }
            }
        }
        Err(e) => {
            say(format!("refused: {}", sanitize_message(&e.to_string())));
            Err(Exit::Refused)
        }
    }
}

/// The lease as `leasectl takeover` shows it before asking: key and URL,
/// state (judged at `now`), holder, renewal, generation, ETag.
fn describe_lease(
    obs: &Observed,
    now: chrono::DateTime<chrono::Utc>,
    key: &str,
    url: &str,
    out: &mut (impl std::io::Write + Send),
) {
    let j = judge(obs, now);
    let _ = writeln!(out, "lease    {} ({})", sanitize(key), sanitize(url));
    if let Some(n) = lookalike_note(url) {
        let _ = writeln!(out, "warning  {n}");
    }
    let sentence = j.sentence();
    let rest = sentence
        .strip_prefix(&format!("{}: ", j.state))
        .unwrap_or(&sentence);
    let _ = writeln!(out, "state    {}: {rest}", j.state);
    if let Some(r) = obs.record() {
        let _ = writeln!(out, "holder   {}", sanitize(&r.instance_id));
        let _ = writeln!(out, "renewed  {} (TTL {} s)", shown(r.renewed_at), r.ttl_s);
        let _ = writeln!(
            out,
            "generation {}{}",
            fmt_generation(r.generation),
            if r.generation.is_none() {
                " (unknown: the record has no generation field)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        out,
        "ETag     {}",
        obs.etag().unwrap_or("(none: no LEASE object)")
    );
}

/// Asks on the terminal for the prefix (named in the question; its URL is
/// accepted too; the URL when the prefix is empty), judged by the console's rule
/// ([`crate::takeover::typed_confirms`]: the URL or prefix as given,
/// percent-decoded, or as shown escaped). `Err` is the exit code: 2 without a
/// terminal, 4 not confirmed.
fn confirm_typed(a: &OperatorTakeover, out: &mut (impl std::io::Write + Send)) -> Result<(), Exit> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        say("not a terminal: confirm interactively or pass --yes");
        return Err(Exit::Usage);
    }
    // What to type is named: the prefix as the console shows it (its URL
    // is accepted too), or the URL of a TARGET that is the lease's own
    // directory (no prefix inside its store).
    let (what, name) = if a.prefix.is_empty() {
        ("URL", &a.url)
    } else {
        ("prefix", &a.prefix)
    };
    let _ = write!(
        out,
        "This replaces the lease above ({}, then {}). Type the {what} ({}) to confirm: ",
        if a.force { "FORCED" } else { "guarded" },
        a.then,
        sanitize(name)
    );
    let _ = out.flush();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    // The URL may be shown percent-encoded (`%E2%80%8B`) where the console
    // shows the name escaped (`\u{200b}`): both are accepted.
    let decoded = percent_encoding::percent_decode_str(&a.url)
        .decode_utf8_lossy()
        .into_owned();
    if !typed_confirms(&line, &[&a.url, &a.prefix, &decoded]) {
        say("refused: not confirmed; nothing written");
        return Err(Exit::Refused);
    }
    Ok(())
}

/// What the look found and the guards let through, for [`execute_takeover`].
struct Looked {
    /// The LEASE as seen.
    seen: Observed,
    /// How long its ETag was watched unchanged.
    watched_for: Duration,
}

/// The confirmed takeover, through the console's executor. From the intent
/// on, a signal never kills the takeover half-way: a forced one's wait for
/// the replaced holder's fence ends early and says what it left (`--then
/// release`, `handover`); `--then hold` releases.
async fn execute_takeover(
    store: Arc<dyn ObjectStore>,
    clock: &SharedClock,
    audit: &AuditLog,
    a: &OperatorTakeover,
    looked: Looked,
    signals: &mut supervise::Signals,
    out: &mut (impl std::io::Write + Send),
) -> Result<TakeoverOutcome, TakeoverError> {
    use crate::takeover::{takeover_checked, StoreChecks, TakeoverRequest, WaitControl};
    let Looked { seen, watched_for } = looked;
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
        record_format: a.record_format,
        target: AuditTarget {
            endpoint: info.url,
            region: info.region,
            addressing_style: info.addressing_style,
            bucket: a.bucket.clone(),
            key: lease_key(&a.prefix),
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
    takeover_checked(store, clock.clone(), audit, req, wait, StoreChecks::Done).await
}

/// Prints the takeover's result and returns the exit code; with `--then
/// hold`, holds the lease until a signal (exit 0) or its loss (audited, 5).
async fn takeover_report(
    result: Result<TakeoverOutcome, TakeoverError>,
    clock: &SharedClock,
    audit: &AuditLog,
    signals: &mut supervise::Signals,
    out: &mut (impl std::io::Write + Send),
) -> Exit {
    use crate::takeover::{hold_until, record_loss, TakeoverError};
    match result {
        Ok(done) => {
            let _ = writeln!(out, "{done}");
            if let Some(lease) = done.held {
                let _ = writeln!(
                    out,
                    "holding the lease; Ctrl-C or SIGTERM releases it (before writes are safe, it is left to expire instead)"
                );
                let _ = out.flush();
                let (lost, released) = hold_until(lease, async {
                    signals.recv().await;
                })
                .await;
                log_release(released);
                if let Some(why) = lost {
                    say(format!("the held lease ended: {why}"));
                    let why = why.to_string();
                    if let Err(e) = record_loss(audit, &done.audit_entry, clock, &why).await {
                        say(format!("audit: could not record the loss: {e}"));
                    }
                    return Exit::Fenced;
                }
            }
            Exit::Ok
        }
        Err(e @ TakeoverError::Interrupted(_)) => {
            say(format!("interrupted: {e}"));
            Exit::Interrupted
        }
        Err(e @ TakeoverError::Changed { .. }) => {
            say(format!("refused: {}", sanitize_message(&e.to_string())));
            Exit::Refused
        }
        Err(e) if e.is_refusal() => {
            say(format!("refused: {}", sanitize_message(&e.to_string())));
            Exit::Refused
        }
        Err(e) => {
            say(format!("failed: {e}"));
            Exit::Failed
        }
    }
}
