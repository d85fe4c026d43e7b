//! After the takeover's PUT: wait for a replaced live holder's fence (ended
//! early by a signal or the console quitting, the lease is left to expire
//! after that fence), then release, hold or hand over as asked.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::outcome_entry;
use super::{holder_sentence, TakeoverError, TakeoverOutcome, TakeoverRequest, Then, WaitControl};
use crate::audit::{AuditEntry, AuditError, AuditLog};
use crate::bucket::{
    BucketLease, Exclusion, FenceClosed, FenceStatus, KeepAlive, LeaseConfig, LeaseRecord,
    ReleaseReport, MAX_SANE_TTL_S,
};
use crate::clock::{ceil_micros, shown, SharedClock};
use crate::store::{ObjectStore, PutCondition, StoreError};
use crate::text::format_secs;
use crate::text::sanitize;

/// A takeover whose record has been written: what [`after_put`] acts on.
pub(super) struct Taken<'a> {
    /// The store written.
    pub store: Arc<dyn ObjectStore>,
    /// The clock.
    pub clock: SharedClock,
    /// The audit log (its intent entry is written).
    pub audit: &'a AuditLog,
    /// The request.
    pub req: &'a TakeoverRequest,
    /// The lease key.
    pub key: String,
    /// The id pairing the audit entries.
    pub id: String,
    /// The record written.
    pub record: LeaseRecord,
    /// Its ETag.
    pub etag: String,
    /// Its TTL, seconds.
    pub(crate) own_ttl_s: u64,
    /// The replaced live holder's fence, from the PUT (`None`: it was not fresh).
    pub(crate) old_fence: Option<Duration>,
    /// When the record was stamped, just before the intent and the PUT (boot-time clock).
    pub(crate) mono: Duration,
    /// When the takeover began (reader's clock, UTC).
    pub now: DateTime<Utc>,
    /// The intent entry (made the outcome entry at the end).
    pub entry: AuditEntry,
    /// The PUT was answered with an error (a refusal to the client's retry,
    /// a lost answer), yet read back the LEASE held exactly our record: what
    /// was answered, for the outcome (`None`: answered as written).
    pub answer_lost: Option<String>,
    /// The write may have replaced a holder unseen (its confirmation could
    /// not count on being seen: `execute::confirm`): every `then` waits out
    /// `old_fence`, then the record is written once more with a fresh
    /// generation.
    pub slow: bool,
}

/// Acts on `t` as `t.req.then` asks — after the replaced holder's fence has
/// closed for a release or hand-over (see [`super::takeover_with`]) — and
/// writes the outcome entry.
pub(super) async fn after_put(
    mut t: Taken<'_>,
    mut wait: WaitControl<'_>,
) -> Result<TakeoverOutcome, TakeoverError> {
    let config = LeaseConfig {
        ttl_s: t.own_ttl_s,
        exclusion: t.req.exclusion,
        record_format: t.req.record_format,
    };
    // The lease just written, as a holder of it (used by release and hold).
    let mut written = BucketLease::from_written(
        t.store.clone(),
        t.clock.clone(),
        t.key.clone(),
        t.record.clone(),
        t.etag.clone(),
        config,
        t.mono,
    );
    // Rounded up to the microsecond, the precision every output writes: the
    // printed, audited and in-memory moment are one, never before the fence.
    let safe_from = t.old_fence.map(|w| {
        written.set_not_before(t.mono + w);
        ceil_micros(
            t.clock.wall()
                + chrono::Duration::from_std(
                    w.saturating_sub(t.clock.mono().saturating_sub(t.mono)),
                )
                .unwrap_or_default(),
        )
    });
    if let Some(at) = safe_from {
        tracing::warn!(key = %t.key, "a live lease was replaced: its holder may write until its fence closes; writes are safe from {}", shown(at));
        t.entry.writes_safe_from = Some(at);
    }
    let mut outcome = TakeoverOutcome {
        written: t.record.clone(),
        replaced_generation: t.req.seen.record().and_then(|r| r.generation),
        record_format: t.req.record_format,
        etag: t.etag.clone(),
        released: None,
        held: None,
        handover_deadline: None,
        writes_safe_from: safe_from,
        audit_entry: t.entry.clone(),
        audit_path: t.audit.path().to_owned(),
        audit_id: t.id.clone(),
        key: t.key.clone(),
        answer_lost: t.answer_lost.clone(),
    };
    // Release and hand-over act only once the old holder's fence has closed;
    // after a slow write, a hold too, with a fresh generation.
    let mut written = match (&t.req.then, safe_from, t.old_fence) {
        (Then::Release | Then::Handover(_), Some(until), Some(w)) => {
            wait_out_old_fence(&mut t, written, until, w, &mut wait).await?
        }
        (Then::Hold, Some(until), Some(w)) if t.slow => {
            wait_out_old_fence(&mut t, written, until, w, &mut wait).await?
        }
        _ => written,
    };
    if t.slow {
        refresh_generation(&mut t, &mut written).await?;
        outcome.written = t.record.clone();
        outcome.etag = t.etag.clone();
    }
    let (result_text, final_etag) = act(&mut t, &mut outcome, written, safe_from).await?;
    // What is stored is what counts; how the PUT was answered is said too.
    let result_text = match &t.answer_lost {
        Some(note) => format!("{result_text} ({note})"),
        None => result_text,
    };
    let out = outcome_entry(&t.clock, t.entry, result_text, Some(final_etag));
    t.audit.append(&out).await?;
    outcome.audit_entry = out;
    Ok(outcome)
}

/// After a slow write's wait: `written` rewritten with a fresh generation,
/// greater than any a holder it may have replaced unseen was handed; `t`'s
/// record and ETag follow. A failure is audited and [`TakeoverError::Store`].
async fn refresh_generation(
    t: &mut Taken<'_>,
    written: &mut BucketLease,
) -> Result<(), TakeoverError> {
    match written.refresh_generation().await {
        Ok(()) => {
            t.record = written.record().clone();
            t.etag = written.etag().to_owned();
            // The outcome entry names the record left at the key.
            if let Some(w) = &mut t.entry.written {
                w.record = t.record.clone();
            }
            Ok(())
        }
        Err(e) => {
            let out = outcome_entry(
                &t.clock,
                t.entry.clone(),
                format!("taken, but the record could not be written with a fresh generation after the wait: {e}"),
                Some(t.etag.clone()),
            );
            t.audit.append(&out).await?;
            Err(TakeoverError::Store(format!(
                "{} was taken, but after waiting out a holder its write may have replaced, the record could not be written with a fresh generation: {e}",
                t.key
            )))
        }
    }
}

/// Waits, renewing `written`, until the replaced holder's fence (`w` after
/// the PUT; `until`, UTC) has closed. Ended early by `wait.stop`, leaves the
/// lease to expire after that fence and returns [`TakeoverError::Interrupted`];
/// a lease lost meanwhile is [`TakeoverError::Store`] (both audited).
async fn wait_out_old_fence(
    t: &mut Taken<'_>,
    written: BucketLease,
    until: DateTime<Utc>,
    w: Duration,
    wait: &mut WaitControl<'_>,
) -> Result<BucketLease, TakeoverError> {
    let key = &t.key;
    let after = match &t.req.then {
        Then::Handover(s) => format!("handing {} over to {}", sanitize(key), sanitize(s)),
        Then::Hold => format!("holding {}", sanitize(key)),
        Then::Release => format!("releasing {}", sanitize(key)),
    };
    (wait.notify)(&format!(
        "waiting until {} ({} from now) for the replaced holder's fence to close before {after}; \
         our record is renewed meanwhile. SIGINT, SIGTERM or SIGHUP ends the wait early: the lease \
         is then left to expire after that fence, never released or handed over before it",
        stamp(until),
        format_secs(
            (until - t.clock.wall())
                .to_std()
                .unwrap_or_default()
                .as_secs_f64()
        ),
    ));
    match wait_for_old_fence(written, wait.stop.as_mut()).await {
        Waited::Open(l) => Ok(l),
        Waited::Stopped(by, lease) => {
            let fence_end = t.mono + w;
            let (text, etag_left, record_left) =
                leave_to_expire(t, lease, fence_end, until, &by).await;
            let mut entry = t.entry.clone();
            if let (Some(w), Some(r)) = (&mut entry.written, record_left) {
                w.record = r;
            }
            let out = outcome_entry(&t.clock, entry, text.clone(), etag_left);
            t.audit.append(&out).await?;
            Err(TakeoverError::Interrupted(format!(
                "{text}\naudit: {} (id {})",
                t.audit.path().display(),
                t.id
            )))
        }
        Waited::Lost(why) => {
            let out = outcome_entry(
                &t.clock,
                t.entry.clone(),
                format!("taken, but lost while waiting for the old holder's fence: {why}"),
                Some(t.etag.clone()),
            );
            t.audit.append(&out).await?;
            Err(TakeoverError::Store(format!(
                "{key} was taken, but lost while waiting for the old holder's fence to close: {why}"
            )))
        }
    }
}

/// Releases, holds or hands over `written` as asked; fills in `outcome`.
/// Returns the outcome sentence and the ETag left at the key.
async fn act(
    t: &mut Taken<'_>,
    outcome: &mut TakeoverOutcome,
    written: BucketLease,
    safe_from: Option<DateTime<Utc>>,
) -> Result<(String, String), TakeoverError> {
    let final_etag = written.etag().to_owned();
    let text = match &t.req.then {
        Then::Release => {
            let r = written.release().await;
            let text = match &r {
                Ok(how) => format!("taken, then released ({how})"),
                Err(e) => format!(
                    "taken, but the release failed ({e}); the lease expires after {} s",
                    t.own_ttl_s
                ),
            };
            outcome.released = r.ok();
            text
        }
        Then::Hold => {
            outcome.held = Some(written);
            match safe_from {
                Some(at) => format!("taken and held by leasectl; writes safe from {}", shown(at)),
                None => "taken and held by leasectl".to_owned(),
            }
        }
        Then::Handover(successor) if safe_from.is_some() => {
            return hand_over(t, outcome, &written, successor).await;
        }
        Then::Handover(successor) => {
            let deadline = t.now + chrono::Duration::seconds(t.req.ttl_s as i64);
            outcome.handover_deadline = Some(deadline);
            format!(
                "taken and handed over to {}; it must start before {}",
                sanitize(successor),
                shown(deadline)
            )
        }
    };
    Ok((text, final_etag))
}

/// Writes `body` over our own record at `lease`'s key: conditional on its
/// ETag (none in best-effort mode). A renewal of ours given up in flight when
/// its keep-alive was stopped (the wait ended, or was ended by a signal, while
/// the renewal awaited its answer) may have landed all the same: the key then
/// holds our own record under an ETag we never heard of, and the write is
/// refused. It is then sent once more on that ETag, when the record read back
/// is provably ours ([`BucketLease::stored_etag_if_ours`]), as a release does.
/// CI: "handing it over failed (precondition failed); the prefix is now held
/// by" the takeover's own id.
///
/// Errors: the last write's [`StoreError`].
async fn put_over_ours(
    store: &dyn ObjectStore,
    lease: &BucketLease,
    exclusion: Exclusion,
    body: &[u8],
) -> Result<Option<String>, StoreError> {
    let key = lease.key();
    if exclusion == Exclusion::BestEffort {
        return store.put(key, body.to_vec(), PutCondition::None).await;
    }
    let put = store
        .put(
            key,
            body.to_vec(),
            PutCondition::IfMatch(lease.etag().to_owned()),
        )
        .await;
    if !matches!(put, Err(StoreError::PreconditionFailed)) {
        return put;
    }
    match lease.stored_etag_if_ours().await {
        Ok(Some(etag)) if etag != lease.etag() => {
            tracing::info!(key = %key, "our record was renewed after all (a renewal given up in flight landed): writing over that one");
            store
                .put(key, body.to_vec(), PutCondition::IfMatch(etag))
                .await
        }
        _ => put,
    }
}

/// The hand-over after a replaced live holder's fence closed: our own record
/// came first (it fenced the old holder out); now the successor's,
/// conditional on ours. A failed write is audited and [`TakeoverError::Store`].
async fn hand_over(
    t: &mut Taken<'_>,
    outcome: &mut TakeoverOutcome,
    written: &BucketLease,
    successor: &str,
) -> Result<(String, String), TakeoverError> {
    let at = t.clock.wall();
    let handed = LeaseRecord {
        instance_id: successor.to_owned(),
        acquired_at: at,
        renewed_at: at,
        ttl_s: t.req.ttl_s,
        // The successor adopts the generation the takeover wrote.
        generation: t.record.generation,
        released_at: None,
    };
    // acquired_at == renewed_at: a hand-over (crate::bucket::own::is_handover).
    let body = handed.to_body();
    let put = put_over_ours(t.store.as_ref(), written, t.req.exclusion, &body).await;
    // No ETag, a refusal or no answer: ours only if the LEASE holds our body.
    let found = match &put {
        Ok(Some(e)) => Ok(e.clone()),
        _ => super::landed(t.store.as_ref(), &t.key, &body).await,
    };
    match found {
        Ok(final_etag) => {
            let deadline = at + chrono::Duration::seconds(t.req.ttl_s as i64);
            outcome.handover_deadline = Some(deadline);
            outcome.written = handed.clone();
            outcome.etag = final_etag.clone();
            if let Some(w) = &mut t.entry.written {
                w.record = handed;
            }
            Ok((
                format!(
                    "taken, then handed over to {} once the old holder's fence closed; it must start before {}",
                    sanitize(successor),
                    shown(deadline)
                ),
                final_etag,
            ))
        }
        Err(not) => {
            let own_ttl_s = t.own_ttl_s;
            let answer = match put {
                Ok(_) => {
                    "it was accepted without an ETag, but read back it is not stored".to_owned()
                }
                Err(e) => e.to_string(),
            };
            // What is stored, as read back.
            let stored = match not {
                super::NotStored::Other(o) if o.etag() == Some(written.etag()) => format!(
                    "our own record is still there and expires after {own_ttl_s} s, renewed by nobody"
                ),
                super::NotStored::Other(o) => format!("the prefix is {}", holder_sentence(&o)),
                super::NotStored::Unknown(why) => format!(
                    "it is unknown what the LEASE holds ({why}); look before starting the successor"
                ),
            };
            let out = outcome_entry(
                &t.clock,
                t.entry.clone(),
                format!("taken, but the hand-over was not stored ({answer}); {stored}"),
                Some(written.etag().to_owned()),
            );
            t.audit.append(&out).await?;
            Err(TakeoverError::Store(format!(
                "{} was taken, but handing it over failed ({answer}); {stored}",
                t.key
            )))
        }
    }
}

/// `Then::Hold` for a command-line holder: keeps `lease` renewed until
/// `stop` completes (a signal) or its fence closes, then stops renewing and
/// releases it. Returns why the fence closed (`None`: stopped as asked) and
/// how the release went.
pub(crate) async fn hold_until(
    lease: BucketLease,
    stop: impl Future<Output = ()>,
) -> (Option<FenceClosed>, ReleaseReport) {
    let keep = KeepAlive::start(lease);
    let lost = tokio::select! {
        _ = stop => None,
        _ = keep.closed() => keep.closed_reason(),
    };
    (lost, keep.stop_and_release().await)
}

/// Appends to `audit` that a held lease ended (`why`, at the reader's clock
/// now): another outcome entry with the id of the takeover's `entry`.
///
/// # Errors
/// The audit log could not be written.
pub(crate) async fn record_loss(
    audit: &AuditLog,
    entry: &AuditEntry,
    clock: &SharedClock,
    why: &str,
) -> Result<(), AuditError> {
    let mut entry = entry.clone();
    entry.time = clock.wall();
    entry.outcome = Some(format!("held lease ended: {why}"));
    audit.append(&entry).await
}

/// A time in the sentences about the wait: UTC, milliseconds.
fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// How the wait for the replaced holder's fence ended.
enum Waited {
    /// The fence opened (the old holder's has closed): the lease, to act on.
    Open(BucketLease),
    /// Ended early by `stop` (what it said) before the fence opened: the
    /// lease, renewed no more, or why it was lost.
    Stopped(String, Result<BucketLease, String>),
    /// The lease was lost meanwhile: why.
    Lost(String),
}

/// Keeps `lease` renewed until its fence opens (the old holder's has closed),
/// or until `stop` completes before that.
async fn wait_for_old_fence(
    lease: BucketLease,
    mut stop: Pin<&mut (dyn Future<Output = String> + Send + '_)>,
) -> Waited {
    let keep = KeepAlive::start(lease);
    loop {
        match keep.status() {
            FenceStatus::Waiting(d) => {
                tokio::select! {
                    // Zero once the wait has run out, until the keep-alive's
                    // read back ends it: look again shortly.
                    _ = tokio::time::sleep(d.clamp(Duration::from_millis(10), Duration::from_millis(200))) => {}
                    by = stop.as_mut() => {
                        // Once the fence is open, finishing as asked is safe.
                        if keep.status().is_open() {
                            break;
                        }
                        return Waited::Stopped(by, keep.stop().await.map_err(|e| e.to_string()));
                    }
                }
            }
            FenceStatus::Open(_) => break,
            FenceStatus::Closed(why) => {
                let _ = keep.stop().await;
                return Waited::Lost(why.to_string());
            }
        }
    }
    match keep.stop().await {
        Ok(l) => Waited::Open(l),
        Err(e) => Waited::Lost(e.to_string()),
    }
}

/// After the wait was ended early by `by`: rewrites our record (conditional
/// on its ETag) so that it stays fresh until the replaced holder's fence has
/// closed (`fence_end`, boot-time clock; `until`, UTC) and then expires,
/// renewed by nobody. Its TTL is 6/5 of the time left plus a second: a
/// contender whose clock is off within the limit the TTL allows still sees
/// it fresh until the fence has closed. Returns the sentence for the operator
/// and the audit log, and the ETag and record left at the key (if known).
/// The store, the clock, the request and the key are the takeover's (`t`).
async fn leave_to_expire(
    t: &Taken<'_>,
    lease: Result<BucketLease, String>,
    fence_end: Duration,
    until: DateTime<Utc>,
    by: &str,
) -> (String, Option<String>, Option<LeaseRecord>) {
    let (store, clock, req, key) = (t.store.as_ref(), &t.clock, t.req, t.key.as_str());
    let not_done = match &req.then {
        Then::Handover(s) => format!("not handed over to {}", sanitize(s)),
        _ => "not released".to_owned(),
    };
    let head = format!(
        "stopped by {by} while waiting for the replaced holder's fence (closing at {}): {not_done}",
        stamp(until)
    );
    let successor = match &req.then {
        Then::Handover(s) => format!(
            " (the successor with `leasectl bucket hold --instance-id {} --wait …`)",
            sanitize(s)
        ),
        _ => String::new(),
    };
    let lease = match lease {
        Ok(l) => l,
        Err(why) => {
            return (
                format!("{head}; our lease was lost meanwhile: {why}"),
                None,
                None,
            )
        }
    };
    let left = fence_end.saturating_sub(clock.mono());
    let ttl_s = ((left.as_secs_f64() * 6.0 / 5.0).ceil() as u64 + 1).clamp(1, MAX_SANE_TTL_S);
    let now = clock.wall();
    let record = LeaseRecord {
        renewed_at: now,
        ttl_s,
        ..lease.record().clone()
    };
    // No ETag, a refusal or no answer: rewritten only if the LEASE holds our body.
    let body = record.to_body();
    let put = put_over_ours(store, &lease, req.exclusion, &body).await;
    let found = match &put {
        Ok(Some(e)) => Ok(e.clone()),
        _ => super::landed(store, key, &body).await,
    };
    match found {
        Ok(etag) => {
            let expires = now + chrono::Duration::seconds(ttl_s as i64);
            (
                format!(
                    "{head}. Our record ({}, ETag {etag}) was rewritten to expire at {} (TTL {ttl_s} s), \
                     after that fence, and is renewed by nobody: from then anyone may take the prefix{successor}",
                    sanitize(&record.instance_id),
                    stamp(expires)
                ),
                Some(etag),
                Some(record),
            )
        }
        Err(not) => {
            let e = match put {
                Ok(_) => "accepted without an ETag, but read back it is not stored".to_owned(),
                Err(e) => e.to_string(),
            };
            let last = lease.record();
            let expires = last.renewed_at + chrono::Duration::seconds(last.ttl_s as i64);
            let early = if expires < until {
                format!(
                    " — before the replaced holder's fence closes at {}: let no writer in before then",
                    stamp(until)
                )
            } else {
                String::new()
            };
            let now_there = match not {
                super::NotStored::Other(o) if o.etag() == Some(lease.etag()) => {
                    "it is still there".to_owned()
                }
                super::NotStored::Other(o) => format!("the prefix is {}", holder_sentence(&o)),
                super::NotStored::Unknown(why) => {
                    format!("it is unknown what the LEASE holds ({why})")
                }
            };
            (
                format!(
                    "{head}; rewriting our record ({}) to expire after that fence failed ({e}); {now_there}. \
                     As last renewed it expires at {}{early}; renewed by nobody",
                    sanitize(&last.instance_id),
                    stamp(expires)
                ),
                Some(lease.etag().to_owned()),
                None,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::takeover_with;
    use super::super::tests::request;
    use super::*;
    use crate::bucket::{read_lease, BucketLease, Exclusion, LeaseConfig, LeaseWatch};
    use crate::clock::SystemClock;
    use crate::store::local::LocalStore;

    /// A forced takeover whose wait for the replaced holder's fence is ended
    /// early (here 3 s into a 6 s holder's, whose fence closes 5 s after its
    /// write) leaves its record to expire after that fence, renewed by
    /// nobody: the record stored is stamped when it was rewritten, with the
    /// TTL (6/5 of the time left, plus a second) and so the expiry the
    /// operator is told, and it expires no earlier than writes are safe.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_ended_early_leaves_a_record_that_outlasts_the_old_fence() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
        let config = LeaseConfig {
            ttl_s: 6,
            ..LeaseConfig::default()
        };
        let holder = BucketLease::acquire(
            store.clone(),
            SystemClock::shared(),
            "db/",
            config,
            &mut LeaseWatch::new(),
        )
        .await
        .unwrap();
        let audit = AuditLog::open(dir.path().join("audit.jsonl")).unwrap();
        let seen = read_lease(store.as_ref(), "db/LEASE", None).await.unwrap();
        let req = request(seen, Then::Release, 6, true, Exclusion::Conditional);
        let wait = WaitControl {
            notify: Box::new(|_| {}),
            stop: Box::pin(async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                "the test".to_owned()
            }),
        };
        let err = takeover_with(store.clone(), SystemClock::shared(), &audit, req, wait)
            .await
            .unwrap_err();
        let TakeoverError::Interrupted(text) = &err else {
            panic!("expected Interrupted, got {err}");
        };
        let left = read_lease(store.as_ref(), "db/LEASE", None).await.unwrap();
        let r = left.record().unwrap();
        assert_ne!(r.instance_id, holder.record().instance_id);
        let expires = r.renewed_at + chrono::Duration::seconds(r.ttl_s as i64);
        assert!(
            text.contains(&format!(
                "to expire at {} (TTL {} s)",
                stamp(expires),
                r.ttl_s
            )),
            "{text}\n{r:?}"
        );
        let entries = AuditLog::read(audit.path()).unwrap();
        let safe = entries[1].writes_safe_from.expect("when writes are safe");
        assert!(expires >= safe, "{expires} >= {safe}");
        // Rewritten once the wait ended, 3 s after the takeover began.
        let began = entries[0].time;
        assert!(
            r.renewed_at >= began + chrono::Duration::seconds(2),
            "{began} {r:?}"
        );
    }
}
