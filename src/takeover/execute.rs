//! The takeover itself: guards → precondition probe → clock check → audit
//! intent → conditional PUT → diagnosis of a refused or failed PUT; then
//! [`super::then`] acts as asked.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::then::{after_put, Taken};
use super::{
    holder_sentence, landed, outcome_entry, preflight, NotStored, TakeoverError, TakeoverOutcome,
    TakeoverRequest, Then, WaitControl,
};
use crate::audit;
use crate::audit::{AuditEntry, AuditLog, AuditObserved, AuditWritten};
use crate::bucket::fence::{check_holder_clock, clock_offset_limit_s, offset_beyond_limit};
use crate::bucket::probe::{probe_scratch, scratch_key};
use crate::bucket::race::Broken;
use crate::bucket::{
    lease_key, new_instance_id, race, read_lease, Exclusion, Judgement, LeaseError, LeaseRecord,
    LeaseState, Observed, MAX_SANE_TTL_S,
};
use crate::clock::{Clock, SharedClock};
use crate::store::{ObjectStore, PutCondition, StoreError};
use crate::text::sanitize;

#[cfg(feature = "sim")]
use crate::bucket::defect::{self, Defect};

/// Performs the takeover (see the module docs for the order of steps).
///
/// Errors: guards ([`TakeoverError::Fresh`], [`TakeoverError::UnderWatch`],
/// [`TakeoverError::GenerationExhausted`],
/// [`TakeoverError::PreconditionsIgnored`], [`TakeoverError::NoReason`]) refuse
/// before anything is written; [`TakeoverError::Audit`] refuses before the
/// PUT; [`TakeoverError::Changed`] is the conditional PUT refused (audited);
/// [`TakeoverError::Store`] a failure (audited, with a re-read when possible).
/// The wait for a replaced holder's fence is told to the log and never ended
/// early: see [`takeover_with`].
pub async fn takeover(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    audit: &AuditLog,
    req: TakeoverRequest,
) -> Result<TakeoverOutcome, TakeoverError> {
    takeover_with(store, clock, audit, req, WaitControl::default()).await
}

/// [`takeover`], with the wait for a replaced holder's fence (a forced
/// takeover with `Then::Release` or `Then::Handover`) told to `wait.notify`
/// and ended early when `wait.stop` completes. Ended early, nothing is
/// released or handed over before that fence has closed: our record is
/// rewritten (conditional on its ETag) to expire after it, renewed by nobody,
/// so that the prefix may be taken by anyone (the successor included) once
/// the replaced holder can no longer write; the outcome entry says so, and
/// the result is [`TakeoverError::Interrupted`]. A stop that comes once the
/// fence has closed finishes the release or hand-over as asked.
///
/// Errors: as [`takeover`], and [`TakeoverError::Interrupted`].
pub async fn takeover_with(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    audit: &AuditLog,
    req: TakeoverRequest,
    wait: WaitControl<'_>,
) -> Result<TakeoverOutcome, TakeoverError> {
    takeover_checked(store, clock, audit, req, wait, StoreChecks::ToRun).await
}

/// Whether a takeover still runs the store's checks ([`check_store`]), or
/// its caller ran them before it read the LEASE it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreChecks {
    /// Run them, between the look and the write (the console's dialog).
    ToRun,
    /// Ran before the look: the ETag read is as fresh as it can be when the
    /// write is sent (`leasectl takeover`: a lease renewed every two seconds
    /// changed its ETag during checks of 2.6 s on Ceph RGW under CI's load).
    Done,
}

/// [`takeover_with`], with the store's checks run here or not (`checks`).
///
/// Errors: as [`takeover_with`].
pub(crate) async fn takeover_checked(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    audit: &AuditLog,
    req: TakeoverRequest,
    wait: WaitControl<'_>,
    checks: StoreChecks,
) -> Result<TakeoverOutcome, TakeoverError> {
    let key = lease_key(&req.prefix);
    let now = clock.wall();
    let j = preflight(
        &req.prefix,
        &req.seen,
        req.watched_for,
        &req.reason,
        req.ttl_s,
        req.force,
        now,
    )?;
    let replaced = req.seen.record().and_then(|r| r.generation);
    if let Some(why) = req.record_format.cannot_replace(replaced) {
        return Err(TakeoverError::GenerationExhausted { key, why });
    }
    if checks == StoreChecks::ToRun {
        check_store(store.as_ref(), clock.as_ref(), req.exclusion, &req.prefix).await?;
    }
    check_clocks(store.as_ref(), &clock, &req, &j, &key)?;
    let old_fence = old_fence(&req, &j);
    let own_ttl_s = own_ttl_s(&req, old_fence, &key);

    let id = new_instance_id();
    let holder_id = match id_of_successor(&req.then, old_fence) {
        "" => new_instance_id(),
        successor => successor.to_owned(),
    };
    // The record is stamped now, after the service checks (a second or more
    // on some services), with the boot-time reading its fence counts from:
    // stamped at the look instead, the fence would see the wall clock run
    // ahead of the boot-time one by the checks' duration (a "step") and close.
    let stamp = clock.wall();
    let mono = clock.mono();
    // The PUT is conditional on the record seen: its generation is the one replaced.
    let record = LeaseRecord {
        instance_id: holder_id,
        acquired_at: stamp,
        renewed_at: stamp,
        ttl_s: own_ttl_s,
        generation: req.record_format.generation(replaced, stamp),
        released_at: None,
    };
    let entry = intent_entry(&req, &j, &id, &record, now);
    audit.append(&entry).await?;
    // A step of the log, not news for the operator (who sees the result).
    tracing::info!(key = %key, reason = %sanitize(&req.reason), "takeover: intent recorded, writing");

    let body = record.to_body();
    let read_sent = clock.mono();
    let (put, read_fresh) = put_record(store.as_ref(), &req, &key, body.clone()).await;
    let answered = clock.mono();
    let (etag, answer_lost) = match put {
        Ok(Some(etag)) => (etag, None),
        // No ETag in the answer, a refusal or no answer: a refusal may answer
        // the client's retry of a write that landed, and a write that landed
        // may have been replaced at once. Read back; only our exact body is ours.
        put => {
            let answer = put.err();
            match landed(store.as_ref(), &key, &body).await {
                Ok(etag) => {
                    let note = answer.map(|e| {
                        tracing::warn!(key = %key, "takeover: the PUT was answered {e}, but the LEASE holds the record this takeover wrote (its first answer was lost)");
                        format!(
                            "the PUT was answered \"{e}\", but read back the LEASE holds the record \
                             this takeover wrote: an earlier answer was lost"
                        )
                    });
                    (etag, note)
                }
                Err(found) => {
                    return Err(
                        diagnose(&clock, audit, entry, &key, &req.then, answer, found).await,
                    )
                }
            }
        }
    };
    let times = (read_sent, answered, answer_lost.is_some(), read_fresh);
    let (etag, old_fence, slow) = match confirm(&store, &clock, &req, &key, &body, times).await {
        Ok(Confirmed { etag: e, slow_wait }) => {
            // Counted from the stamp (`mono`), as the replaced holder's is.
            let wait = slow_wait.map(|w| w + answered.saturating_sub(mono));
            (e.unwrap_or(etag), old_fence.max(wait), wait.is_some())
        }
        Err(found) => {
            return Err(diagnose(&clock, audit, entry, &key, &req.then, None, found).await)
        }
    };
    let taken = Taken {
        store,
        clock,
        audit,
        req: &req,
        key,
        id,
        record,
        etag,
        own_ttl_s,
        old_fence,
        mono,
        now,
        entry,
        answer_lost,
        slow,
    };
    after_put(taken, wait).await
}

/// The store's checks before a takeover writes anything (conditional
/// exclusion only; nothing to do for best-effort): the precondition probe on
/// a scratch key next to the lease at `prefix`, then the race check (once per
/// store per process, as at acquire; a store this process caught before is
/// refused at once). None of it reads the LEASE: `leasectl takeover` runs it
/// before its look, so that the ETag it writes on is fresh.
///
/// Errors: [`TakeoverError::PreconditionsIgnored`],
/// [`TakeoverError::NotAtomic`], [`TakeoverError::Store`] (a check failed).
pub(crate) async fn check_store(
    store: &dyn ObjectStore,
    clock: &dyn Clock,
    exclusion: Exclusion,
    prefix: &str,
) -> Result<(), TakeoverError> {
    if exclusion == Exclusion::Conditional {
        let scratch = scratch_key(prefix);
        match probe_scratch(store, &scratch, clock).await {
            Ok(report) => {
                if let Some(header) = report.ignored_header().or(report.unsupported()) {
                    return Err(TakeoverError::PreconditionsIgnored {
                        header,
                        service: store.describe(),
                    });
                }
                if let Some(finding) = report.not_atomic() {
                    race::caught(store, Broken::NotAtomic(finding.clone()));
                    return Err(TakeoverError::NotAtomic {
                        finding,
                        service: store.describe(),
                    });
                }
                // Once per store per process, as at acquire: atomic under concurrency?
                // (A store this process caught before is refused at once.)
                let known = race::broken(store);
                let found = match known {
                    Some(b) => Ok(Some(b)),
                    None => race::check_once(store, &scratch).await.map(|r| r.broken()),
                };
                match found {
                    Ok(None) => {}
                    Ok(Some(Broken::Ignores(header))) => {
                        return Err(TakeoverError::PreconditionsIgnored {
                            header,
                            service: store.describe(),
                        });
                    }
                    Ok(Some(Broken::NotAtomic(finding))) => {
                        return Err(TakeoverError::NotAtomic {
                            finding,
                            service: store.describe(),
                        });
                    }
                    Err(e) => {
                        return Err(TakeoverError::Store(format!(
                            "race check of the preconditions failed: {e}"
                        )))
                    }
                }
            }
            Err(e) => {
                return Err(TakeoverError::Store(format!(
                    "precondition probe failed: {e}"
                )))
            }
        }
    }
    Ok(())
}

/// The clock checks before a takeover writes: that this host's clock is
/// near enough the service's for the record it writes to be judged right by
/// others (any takeover), and for a lease judged stale, near enough to
/// judge it so.
///
/// Errors: [`TakeoverError::ReaderClock`].
fn check_clocks(
    store: &dyn ObjectStore,
    clock: &SharedClock,
    req: &TakeoverRequest,
    j: &Judgement,
    key: &str,
) -> Result<(), TakeoverError> {
    // A record written by a clock that is off would be misjudged by everyone
    // else (whatever is taken over, forced or not).
    if let Err(e) = check_holder_clock(store.server_offset(), clock.as_ref(), key, req.ttl_s) {
        return Err(TakeoverError::ReaderClock(e.to_string()));
    }
    // A lease judged stale by a clock that is off cannot be trusted to be stale.
    if j.state == LeaseState::Stale {
        if let (Some(o), Some(r)) = (store.server_offset(), req.seen.record()) {
            if let Some(off) = offset_beyond_limit(&o, clock.as_ref(), r.ttl_s) {
                return Err(TakeoverError::ReaderClock(
                    LeaseError::ReaderClock {
                        key: key.to_owned(),
                        offset_s: off,
                        error_s: o.error_s,
                        limit_s: clock_offset_limit_s(r.ttl_s),
                        ttl_s: r.ttl_s,
                    }
                    .to_string(),
                ));
            }
        }
    }
    Ok(())
}

/// Replacing a live lease: its holder may write until its fence closes
/// (bucket hold kills its command at most 5/6 of its TTL after its last
/// renewal, which began before this PUT). Nothing we start or hand over
/// writes before then. `None` when the lease replaced was not fresh.
fn old_fence(req: &TakeoverRequest, j: &Judgement) -> Option<Duration> {
    #[cfg(feature = "sim")]
    if defect::on(Defect::TakeoverFenceIgnored) {
        return None;
    }
    (j.state == LeaseState::Fresh)
        .then(|| {
            req.seen
                .record()
                .map(|r| Duration::from_secs(r.ttl_s) * 5 / 6)
        })
        .flatten()
}

/// The TTL (seconds) of the record written. It must exclude everyone until
/// the old holder's fence has closed even if nobody renews it (leasectl
/// killed during the wait): at least 6/5 of the fence plus a second (a
/// contender's clock may be off by up to a twelfth of the TTL, ours too).
fn own_ttl_s(req: &TakeoverRequest, old_fence: Option<Duration>, key: &str) -> u64 {
    let own_ttl_s = match old_fence {
        Some(w) => req
            .ttl_s
            .max(((w.as_secs_f64() * 6.0 / 5.0).ceil() as u64 + 1).min(MAX_SANE_TTL_S)),
        None => req.ttl_s,
    };
    if own_ttl_s > req.ttl_s {
        tracing::warn!(
            key = %key,
            "the record written has a TTL of {own_ttl_s} s, not {} s: it must outlast the replaced holder's fence even if nobody renews it",
            req.ttl_s
        );
    }
    own_ttl_s
}

/// The `intent` entry, written (fsynced) before the PUT.
fn intent_entry(
    req: &TakeoverRequest,
    j: &Judgement,
    id: &str,
    record: &LeaseRecord,
    now: DateTime<Utc>,
) -> AuditEntry {
    AuditEntry {
        time: now,
        phase: "intent".into(),
        id: id.to_owned(),
        operator: audit::operator(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        action: "takeover".into(),
        target: req.target.clone(),
        observed: AuditObserved {
            record: req.seen.record().cloned(),
            etag: req.seen.etag().map(str::to_owned),
            judgement: j.state.as_str().into(),
            age_s: j.age_s,
            reader_clock: now,
        },
        written: Some(AuditWritten {
            record: record.clone(),
            etag: None,
        }),
        reason: req.reason.clone(),
        exclusion: req.exclusion.as_str().into(),
        forced: req.force && j.state == LeaseState::Fresh,
        then: req.then.to_string(),
        outcome: None,
        writes_safe_from: None,
    }
}

/// The successor the takeover's own record names: a hand-over's, when the
/// replaced lease needs no wait for its fence (else the hand-over comes after
/// the wait, [`super::then`]); `""` when the record names a new id.
fn id_of_successor(then: &Then, old_fence: Option<Duration>) -> &str {
    match (then, old_fence) {
        (Then::Handover(successor), None) => successor,
        _ => "",
    }
}

/// The PUT, conditional on the ETag the operator saw (`If-None-Match: *`
/// when it saw none); best-effort: a read checking it is what the operator
/// saw, then an unconditional write. Returns the new ETag if the service gave one.
/// What the takeover's confirmation found: the ETag now (`None`: as
/// answered) and, for a slow write, how long after its answer its writes
/// must wait.
struct Confirmed {
    etag: Option<String>,
    slow_wait: Option<Duration>,
}

/// The takeover's confirmation, as an acquire's (`bucket::lease::confirm`):
/// conditional exclusion only; waits until the store's confirmation delay
/// ([`crate::bucket::race::confirm_after`]) past the PUT's answer, then
/// reads back (only our exact body is ours). A write whose read-to-answer
/// span (`times`: boot-time clock) was more than half that delay may have
/// replaced a holder unseen, who learns of it at its next renewal (and so
/// may one whose answer was lost and which the store carried out late,
/// `times.2`, and one without a read right before it, `times.3`): its writes
/// wait five sixths of a TTL after the answer.
///
/// Errors: what is at the key when it is not our record.
async fn confirm(
    store: &Arc<dyn ObjectStore>,
    clock: &SharedClock,
    req: &TakeoverRequest,
    key: &str,
    body: &[u8],
    (read_sent, answered, unanswered, read_fresh): (Duration, Duration, bool, bool),
) -> Result<Confirmed, super::NotStored> {
    if req.exclusion != Exclusion::Conditional {
        return Ok(Confirmed {
            etag: None,
            slow_wait: None,
        });
    }
    let after = race::confirm_after(store.as_ref());
    let due = answered + after;
    let now = clock.mono();
    if now < due {
        tokio::time::sleep(due - now).await;
    }
    let (etag, late) = super::landed_late(store.as_ref(), key, body).await?;
    let ttl_s = req
        .seen
        .record()
        .map_or(req.ttl_s, |r| r.ttl_s.max(req.ttl_s));
    // An answer lost counts when the write was carried out late, as for an
    // acquire taking up its own write; without a read right before the
    // write its span is unknown.
    let span = answered.saturating_sub(read_sent);
    let slow = (unanswered && late) || !read_fresh || span > race::seen_within(after);
    Ok(Confirmed {
        etag: Some(etag),
        slow_wait: Some(Duration::from_secs(ttl_s) * 5 / 6).filter(|_| slow),
    })
}

/// The takeover's PUT, conditional on the record seen (best-effort: read,
/// checked to be what the operator saw, written unconditionally). Returns the
/// answer, and whether a read right before it found the record seen (only
/// then does the confirmation count the write's span from it).
async fn put_record(
    store: &dyn ObjectStore,
    req: &TakeoverRequest,
    key: &str,
    body: Vec<u8>,
) -> (Result<Option<String>, StoreError>, bool) {
    match req.exclusion {
        Exclusion::Conditional => {
            // Read once more right before the write: the look may be long
            // past, and the confirmation counts on a short span from a read
            // of what the write replaces to its answer. A read that fails
            // leaves the span unknown; the conditional PUT still decides.
            let fresh = match read_lease(store, key, None).await {
                Ok(cur) if cur.etag() != req.seen.etag() => {
                    return (Err(StoreError::PreconditionFailed), true)
                }
                Ok(_) => true,
                Err(_) => false,
            };
            let cond = match req.seen.etag() {
                Some(e) => PutCondition::IfMatch(e.to_owned()),
                None => PutCondition::IfNoneMatch,
            };
            (store.put(key, body, cond).await, fresh)
        }
        Exclusion::BestEffort => {
            // Read, check it is what the operator saw, then write unconditionally.
            let put = match read_lease(store, key, None).await {
                Ok(cur) if cur.etag() == req.seen.etag() => {
                    store.put(key, body, PutCondition::None).await
                }
                Ok(_) => Err(StoreError::PreconditionFailed),
                Err(e) => Err(e),
            };
            (put, true)
        }
    }
}

/// A PUT whose record is not known to be stored, judged by what a read-back
/// `found`: `answer` is the error it was answered
/// with (`None`: accepted, but without an ETag). Audits the outcome — what is
/// stored, or that it is unknown — and returns the error for the operator:
/// [`TakeoverError::Changed`] for a refusal with another record (or none)
/// stored, [`TakeoverError::Store`] otherwise (a failure, a record replaced
/// at once, or unknown), [`TakeoverError::Audit`] when the outcome could not
/// be recorded.
async fn diagnose(
    clock: &SharedClock,
    audit: &AuditLog,
    mut entry: AuditEntry,
    key: &str,
    then: &Then,
    answer: Option<StoreError>,
    found: NotStored,
) -> TakeoverError {
    let key = key.to_owned();
    // Who holds it now; a hand-over's successor is named as such.
    let now = |o: &Observed| {
        let s = holder_sentence(o);
        match (then, o.record()) {
            (Then::Handover(id), Some(r)) if &r.instance_id == id => format!(
                "{s} — the successor this hand-over names (it may have landed and been taken up)"
            ),
            _ => s,
        }
    };
    let refused = matches!(
        answer,
        Some(StoreError::PreconditionFailed | StoreError::Conflict | StoreError::NotFound(_))
    );
    let (outcome, err) = match (answer, found) {
        (Some(_), NotStored::Other(o)) if refused => {
            let now_sentence = now(&o);
            entry.written = None;
            (
                format!("refused: lease changed since seen; {now_sentence}"),
                TakeoverError::Changed {
                    key: key.clone(),
                    now: now_sentence,
                    record: o.record().cloned().map(Box::new),
                },
            )
        }
        (None, NotStored::Other(o)) => {
            let now_sentence = now(&o);
            (
                format!(
                    "written (accepted without an ETag), but read back the LEASE no longer holds it: \
                     {now_sentence}; the takeover is not in effect"
                ),
                TakeoverError::Store(format!(
                    "the service accepted the takeover's record for {key} (without an ETag), but read \
                     back it had already been replaced: {now_sentence}. The takeover is not in effect; look again"
                )),
            )
        }
        (Some(e), NotStored::Other(o)) => {
            let now_sentence = format!("the prefix is {}", now(&o));
            (
                format!("failed: {e}; {now_sentence}"),
                TakeoverError::Store(format!("takeover of {key} failed: {e}; {now_sentence}")),
            )
        }
        (answer, NotStored::Unknown(why)) => {
            let answer = answer.map_or_else(
                || "accepted without an ETag".to_owned(),
                |e| format!("answered \"{e}\""),
            );
            let sentence = format!(
                "the PUT was {answer}, and it is unknown whether the LEASE holds this takeover's \
                 record ({why}); look again before acting"
            );
            (
                format!("unknown: {sentence}"),
                TakeoverError::Store(format!("takeover of {key}: {sentence}")),
            )
        }
    };
    let out = outcome_entry(clock, entry, outcome, None);
    if let Err(e) = audit.append(&out).await {
        return e.into();
    }
    err
}

#[cfg(test)]
mod tests {
    use super::super::tests::request as any_request;
    use super::*;
    use crate::bucket::lease::tests::held;
    use crate::clock::{ManualClock, ServerOffset};
    use crate::store::Unavailable;

    /// A request to take over the LEASE at `db/` seen as `seen`, writing a
    /// `ttl_s` TTL, then holding it.
    fn request(seen: Observed, ttl_s: u64, force: bool, exclusion: Exclusion) -> TakeoverRequest {
        any_request(seen, Then::Hold, ttl_s, force, exclusion)
    }

    /// The service's clock `offset_s` ± 0.1 s ahead of `clock` (kept, as
    /// every estimate, against the system clock, which runs on meanwhile).
    fn ahead(clock: &ManualClock, offset_s: f64) -> ServerOffset {
        ServerOffset {
            offset_s: offset_s - clock.system_ahead_s(),
            error_s: 0.1,
            at: Utc::now(),
            rtt_s: 0.01,
            answers: 3,
        }
    }

    /// A live lease of a 12 s TTL, taken over by force: its holder may write
    /// for five sixths of its TTL after its last renewal (10 s), and the
    /// record written outlasts that (6/5 of it plus a second: 13 s, over the
    /// 6 s asked). A stale lease's holder has no fence left to wait for.
    #[tokio::test]
    async fn a_live_leases_fence_is_five_sixths_of_its_ttl_and_a_stale_ones_none() {
        let (_dir, store, clock, lease) = held(12).await;
        let seen = read_lease(store.as_ref(), lease.key(), None).await.unwrap();
        let req = request(seen.clone(), 6, true, Exclusion::Conditional);
        let j = preflight("db/", &seen, Duration::ZERO, "t", 6, true, clock.wall()).unwrap();
        assert_eq!(j.state, LeaseState::Fresh);
        let fence = old_fence(&req, &j);
        assert_eq!(fence, Some(Duration::from_secs(10)));
        assert_eq!(own_ttl_s(&req, fence, lease.key()), 13);
        // A 30 s holder's 25 s fence: 31 s.
        let fence = Some(Duration::from_secs(25));
        assert_eq!(own_ttl_s(&req, fence, lease.key()), 31);
        clock.advance(Duration::from_secs(60));
        let j = preflight("db/", &seen, Duration::ZERO, "t", 6, false, clock.wall()).unwrap();
        assert_eq!(j.state, LeaseState::Stale);
        assert_eq!(old_fence(&req, &j), None);
    }

    /// The clock checks: a lease judged stale by a clock 3 s off the
    /// service's, beyond the twelfth of the record's 12 s TTL (1 s), cannot
    /// be trusted to be stale: refused, though the 60 s TTL the takeover
    /// writes would allow 5 s. Taken over by force while live, its age is
    /// not what the takeover rests on: only the TTL written is checked.
    #[tokio::test]
    async fn a_lease_judged_stale_by_a_clock_off_the_services_is_not_taken_over() {
        let (_dir, store, clock, lease) = held(12).await;
        let seen = read_lease(store.as_ref(), lease.key(), None).await.unwrap();
        let shared: SharedClock = Arc::new(clock.clone());
        store.set(Some(ahead(&clock, 3.0)));
        let live = preflight("db/", &seen, Duration::ZERO, "t", 60, true, clock.wall()).unwrap();
        let req = request(seen.clone(), 60, true, Exclusion::Conditional);
        check_clocks(store.as_ref(), &shared, &req, &live, lease.key()).unwrap();
        clock.advance(Duration::from_secs(60));
        store.set(Some(ahead(&clock, 3.0)));
        let stale = preflight("db/", &seen, Duration::ZERO, "t", 60, false, clock.wall()).unwrap();
        assert_eq!(stale.state, LeaseState::Stale);
        let req = request(seen, 60, false, Exclusion::Conditional);
        let err = check_clocks(store.as_ref(), &shared, &req, &stale, lease.key()).unwrap_err();
        assert!(matches!(err, TakeoverError::ReaderClock(_)), "{err}");
    }

    /// A takeover with conditional exclusion probes the service before it
    /// writes anything: a service that cannot be probed is refused with the
    /// probe's failure, nothing recorded in the audit log. Best-effort
    /// exclusion has nothing to check. A caller that ran the checks itself
    /// (`StoreChecks::Done`) goes on to record its intent, and then the
    /// outcome of its PUT, which the store refused.
    #[tokio::test]
    async fn the_store_is_checked_before_anything_is_written() {
        let (dir, store, clock, lease) = held(12).await;
        let seen = read_lease(store.as_ref(), lease.key(), None).await.unwrap();
        clock.advance(Duration::from_secs(60));
        let down: Arc<dyn ObjectStore> = Arc::new(Unavailable::new(
            "a store that is down".into(),
            StoreError::AccessDenied("the test".into()),
        ));
        let err = check_store(down.as_ref(), &clock, Exclusion::Conditional, "db/")
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("precondition probe failed"),
            "{err}"
        );
        check_store(down.as_ref(), &clock, Exclusion::BestEffort, "db/")
            .await
            .unwrap();
        let shared: SharedClock = Arc::new(clock.clone());
        let path = dir.path().join("audit.jsonl");
        let audit = AuditLog::open(path.clone()).unwrap();
        for (checks, recorded) in [(StoreChecks::ToRun, 0), (StoreChecks::Done, 2)] {
            let req = request(seen.clone(), 12, false, Exclusion::Conditional);
            let before = AuditLog::read(&path).map(|e| e.len()).unwrap_or(0);
            let err = takeover_checked(
                down.clone(),
                shared.clone(),
                &audit,
                req,
                WaitControl::default(),
                checks,
            )
            .await
            .unwrap_err();
            let after = AuditLog::read(&path).map(|e| e.len()).unwrap_or(0);
            assert_eq!(after - before, recorded, "{checks:?}: {err}");
            if checks == StoreChecks::ToRun {
                assert!(
                    err.to_string().contains("precondition probe failed"),
                    "{err}"
                );
            }
        }
    }

    /// The audit intent says a takeover was forced only where the lease was
    /// live and the operator forced it: a stale lease taken with `--force`
    /// was not forced.
    #[tokio::test]
    async fn the_intent_says_forced_only_for_a_live_lease_taken_by_force() {
        let (_dir, store, clock, lease) = held(12).await;
        let seen = read_lease(store.as_ref(), lease.key(), None).await.unwrap();
        let live = preflight("db/", &seen, Duration::ZERO, "t", 6, true, clock.wall()).unwrap();
        let stale = preflight(
            "db/",
            &seen,
            Duration::ZERO,
            "t",
            6,
            true,
            clock.wall() + chrono::Duration::seconds(60),
        )
        .unwrap();
        let record = lease.record().clone();
        for (force, j, forced) in [
            (true, &live, true),
            (true, &stale, false),
            (false, &live, false),
        ] {
            let req = request(seen.clone(), 6, force, Exclusion::Conditional);
            let entry = intent_entry(&req, j, "id", &record, clock.wall());
            assert_eq!(entry.forced, forced, "force {force}, {:?}", j.state);
        }
    }

    /// A hand-over names the successor in the takeover's own record only
    /// when there is no fence to wait for (else it comes after the wait);
    /// every other takeover writes an id of its own.
    #[test]
    fn the_record_names_the_successor_only_for_a_hand_over_without_a_wait() {
        let handover = Then::Handover("successor".into());
        assert_eq!(id_of_successor(&handover, None), "successor");
        assert_eq!(
            id_of_successor(&handover, Some(Duration::from_secs(10))),
            ""
        );
        assert_eq!(id_of_successor(&Then::Hold, None), "");
    }

    /// The takeover's confirmation (conditional exclusion): it reads back
    /// once the store's confirmation delay has passed since the PUT's
    /// answer, not before and not long after, and finds our record's ETag. A
    /// write whose span from the read before it to its answer was no longer
    /// than the delay it is judged by is quick; a longer span, or no read
    /// right before it, makes it slow: its writes wait five sixths of the
    /// longer of the replaced record's TTL and the TTL asked. An answer lost
    /// for a write carried out at once is not slow. Best-effort has nothing
    /// to confirm.
    #[tokio::test]
    async fn the_confirmation_waits_its_delay_and_judges_the_writes_span() {
        let (_dir, store, clock, lease) = held(12).await;
        let seen = read_lease(store.as_ref(), lease.key(), None).await.unwrap();
        let store: Arc<dyn ObjectStore> = store;
        let shared: SharedClock = Arc::new(clock.clone());
        clock.advance(Duration::from_secs(60));
        let ours = LeaseRecord {
            instance_id: "taker".into(),
            acquired_at: Utc::now(),
            renewed_at: Utc::now(),
            ttl_s: 6,
            generation: Some(1),
            released_at: None,
        };
        let body = ours.to_body();
        let etag = store
            .put("db/LEASE", body.clone(), PutCondition::None)
            .await
            .unwrap()
            .expect("an ETag");
        let after = race::confirm_after(store.as_ref());
        let within = race::seen_within(after);
        let answered = clock.mono();
        let quick = answered - Duration::from_millis(1);
        let confirmed = |ttl_s: u64, exclusion: Exclusion, times| {
            let req = request(seen.clone(), ttl_s, false, exclusion);
            let (store, shared, body) = (store.clone(), shared.clone(), body.clone());
            async move {
                confirm(&store, &shared, &req, "db/LEASE", &body, times)
                    .await
                    .unwrap_or_else(|_| panic!("not confirmed"))
            }
        };
        let started = std::time::Instant::now();
        let c = confirmed(6, Exclusion::Conditional, (quick, answered, false, true)).await;
        let took = started.elapsed();
        assert!(
            took >= after && took < after + Duration::from_secs(5),
            "read back after {took:?}, the delay {after:?}"
        );
        assert_eq!(c.etag.as_deref(), Some(etag.as_str()));
        assert_eq!(c.slow_wait, None, "a quick write");
        let at_bound = (answered - within, answered, false, true);
        let c = confirmed(6, Exclusion::Conditional, at_bound).await;
        assert_eq!(c.slow_wait, None, "a span of just the delay judged by");
        let long = (
            answered - within - Duration::from_millis(1),
            answered,
            false,
            true,
        );
        let unread = (quick, answered, false, false);
        for times in [long, unread] {
            let c = confirmed(6, Exclusion::Conditional, times).await;
            assert_eq!(c.slow_wait, Some(Duration::from_secs(10)), "{times:?}");
        }
        let c = confirmed(24, Exclusion::Conditional, long).await;
        assert_eq!(c.slow_wait, Some(Duration::from_secs(20)), "the TTL asked");
        let lost = (quick, answered, true, true);
        let c = confirmed(6, Exclusion::Conditional, lost).await;
        assert_eq!(
            c.slow_wait, None,
            "an answer lost, the write carried out at once"
        );
        let c = confirmed(6, Exclusion::BestEffort, long).await;
        assert_eq!((c.etag, c.slow_wait), (None, None), "best-effort");
    }
}
