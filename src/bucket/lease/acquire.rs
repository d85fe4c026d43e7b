//! Acquiring the lease: the rounds of reads and conditional writes and the
//! decision for one observation (the checks around the write in conditional
//! mode: `checked`, `confirm`).

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;

use super::confirm::WriteTiming;
use super::*;

use crate::bucket::fence::{check_holder_clock, clock_offset_limit_s, offset_beyond_limit};
use crate::bucket::race;
use crate::bucket::record::{new_instance_id, MAX_SANE_TTL_S};
use crate::store::unusable_etag;

#[cfg(feature = "sim")]
use crate::bucket::defect::{self, Defect};

/// The write an acquire makes: its precondition, the record's `acquired_at`
/// and its generation.
pub(super) enum Step {
    Write(PutCondition, DateTime<Utc>, Option<u64>),
}

/// What an acquire remembers from one round to the next.
#[derive(Default)]
struct AcquireRounds {
    /// The precondition refused in the previous round, to tell a service
    /// that refuses a precondition that holds from a lost race.
    refused: Option<PutCondition>,
    /// The ETag form the refused request was sent with.
    refused_form: EtagForm,
    /// Creates refused over a key then found absent.
    create_refused: usize,
    tally: Conflicts,
}

impl AcquireRounds {
    /// Judges the previous round's refusal against what is there now
    /// (`observed`): a create refused twice over an absent key, or an
    /// `If-Match` refused with the ETag the object still has (after one
    /// adaptation to the bare form, checked on a scratch key), is the
    /// service's fault, not a lost race.
    ///
    /// Errors: [`LeaseError::CreateRefused`], [`LeaseError::IfMatchRefused`],
    /// [`LeaseError::Store`] (from the check).
    async fn check_refusal(
        &mut self,
        store: &dyn ObjectStore,
        clock: &dyn Clock,
        key: &str,
        instance_id: &str,
        observed: &Observed,
    ) -> Result<(), LeaseError> {
        match (&self.refused, observed) {
            // Twice in a row: once could be a create and a delete racing us.
            (Some(PutCondition::IfNoneMatch), Observed::Absent) => {
                self.create_refused += 1;
                if self.create_refused >= 2 {
                    return Err(LeaseError::CreateRefused {
                        key: key.to_owned(),
                        service: store.describe(),
                    });
                }
            }
            // Refused with the ETag the object still has: a service that wants it
            // unquoted (Ceph RGW) is adapted to once, after a check on a scratch key.
            (Some(PutCondition::IfMatch(sent)), Observed::Present { etag: Some(e), .. })
                if e == sent
                    && (self.refused_form == EtagForm::Unquoted
                        || !probe::adapt_etag_form(
                            store,
                            &scratch_key(key, instance_id),
                            clock,
                        )
                        .await?) =>
            {
                return Err(LeaseError::IfMatchRefused {
                    key: key.to_owned(),
                    service: store.describe(),
                    etag: e.clone(),
                });
            }
            _ => {}
        }
        self.refused = None;
        Ok(())
    }

    /// Judges the answer to this round's PUT (sent as `cond`, with the ETag
    /// form `form`): `Some` with the ETag returned (if any) when written;
    /// `None` to go another round (412 remembered, 409/5xx counted after a
    /// back-off, 404 to an `If-Match`: the key was deleted meanwhile).
    ///
    /// Errors: [`LeaseError::PreconditionsUnsupported`] (501, or 400 to a
    /// conditional PUT), [`LeaseError::Store`].
    async fn after_put(
        &mut self,
        put: Result<Option<String>, StoreError>,
        cond: PutCondition,
        form: EtagForm,
        config: &LeaseConfig,
        store: &dyn ObjectStore,
    ) -> Result<Option<Option<String>>, LeaseError> {
        match put {
            Ok(etag) => Ok(Some(etag)),
            Err(StoreError::PreconditionFailed) => {
                if config.exclusion == Exclusion::Conditional {
                    self.refused = Some(cond);
                    self.refused_form = form;
                }
                Ok(None)
            }
            // 409, or 5xx (Ceph RGW answers 500 to some losers of an If-Match race):
            // the write may have landed. The next round reads back and judges
            // (our own record is adopted).
            Err(e @ (StoreError::Conflict | StoreError::Other { status: 500.., .. })) => {
                self.tally.conflicts += 1;
                if matches!(e, StoreError::Other { .. }) {
                    self.tally.last_5xx = Some(e);
                } else {
                    self.tally.saw_409 = true;
                }
                tokio::time::sleep(Duration::from_millis(50 * self.tally.conflicts as u64)).await;
                Ok(None)
            }
            // If-Match over a key deleted meanwhile: the next round creates.
            Err(StoreError::NotFound(_)) if matches!(cond, PutCondition::IfMatch(_)) => Ok(None),
            Err(StoreError::NotImplemented(detail)) => Err(LeaseError::PreconditionsUnsupported {
                service: store.describe(),
                detail: format!(
                    "it answered 501 to a conditional PUT: {}",
                    sanitize(&detail)
                ),
            }),
            // 400 to a conditional PUT of a key it has just let us read: the
            // header itself is what it does not accept.
            Err(StoreError::Other {
                status: 400,
                message,
            }) if cond != PutCondition::None => Err(LeaseError::PreconditionsUnsupported {
                service: store.describe(),
                detail: format!(
                    "it answered 400 to a conditional PUT: {}",
                    sanitize(&message)
                ),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

/// A record we would take over (not one we adopt: `owner` is
/// [`Whose::SameId`] or [`Whose::Other`]) that looks stale to a reader whose
/// clock is certainly further from the service's than the record's TTL
/// allows ([`crate::bucket::fence::offset_beyond_limit`]) is not taken — another
/// process's record under our own id included.
///
/// Errors: [`LeaseError::ReaderClock`].
fn check_reader_clock(
    store: &dyn ObjectStore,
    clock: &dyn Clock,
    key: &str,
    owner: Whose,
    observed: &Observed,
    now: DateTime<Utc>,
) -> Result<(), LeaseError> {
    if let (Some(r), Some(o)) = (observed.record(), store.server_offset()) {
        if matches!(owner, Whose::SameId | Whose::Other) {
            let j = judge(observed, now);
            if j.state == LeaseState::Stale {
                if let Some(off) = offset_beyond_limit(&o, clock, r.ttl_s) {
                    return Err(LeaseError::ReaderClock {
                        key: key.to_owned(),
                        offset_s: off,
                        error_s: o.error_s,
                        limit_s: clock_offset_limit_s(r.ttl_s),
                        ttl_s: r.ttl_s,
                    });
                }
            }
        }
    }
    Ok(())
}

impl BucketLease {
    /// Takes the lease on `prefix` with a new random instance id.
    /// See [`BucketLease::acquire_as`].
    pub async fn acquire(
        store: Arc<dyn ObjectStore>,
        clock: SharedClock,
        prefix: &str,
        config: LeaseConfig,
        watch: &mut LeaseWatch,
    ) -> Result<Self, LeaseError> {
        let id = new_instance_id();
        Self::acquire_as(store, clock, prefix, &id, config, watch).await
    }

    /// Takes the lease on `prefix` as `instance_id`. Keep one id across
    /// attempts: a record already naming it (an earlier answer was lost, or a
    /// hand-over named us) is adopted without waiting.
    ///
    /// Errors: [`LeaseError::HeldByOther`] (a fresh foreign lease),
    /// [`LeaseError::UnderWatch`] (a suspect/malformed record not yet watched
    /// for one TTL — keep `watch` across attempts), [`LeaseError::PreconditionsIgnored`]
    /// / [`LeaseError::PreconditionsUnsupported`] / [`LeaseError::NotAtomic`] (the
    /// once-per-store race check, its first round before the write and the
    /// rest beside it (`checked`), or the probe after the write; what was
    /// written undone, and said), [`LeaseError::TtlTooShort`],
    /// [`LeaseError::ReaderClock`] (a stale-looking record judged by a clock
    /// certainly beyond TTL/12 of the service's), [`LeaseError::HolderClock`]
    /// (about to write a record with such a clock:
    /// [`crate::bucket::fence::check_holder_clock`]; nothing written),
    /// [`LeaseError::Contended`], [`LeaseError::Store`].
    pub async fn acquire_as(
        store: Arc<dyn ObjectStore>,
        clock: SharedClock,
        prefix: &str,
        instance_id: &str,
        config: LeaseConfig,
        watch: &mut LeaseWatch,
    ) -> Result<Self, LeaseError> {
        let key = lease_key(prefix);
        if config.ttl_s == 0 || config.ttl_s > MAX_SANE_TTL_S {
            return Err(LeaseError::InvalidTtl(config.ttl_s));
        }
        let contender = Contender {
            store,
            clock,
            key,
            instance_id,
            config,
        };
        match contender.config.exclusion {
            Exclusion::BestEffort => {
                tracing::warn!(
                    key = %contender.key,
                    "best-effort exclusion: read, then unconditional write; two writers starting together may both pass"
                );
                let written = contender.write(watch, None).await?;
                watch.sent.clear();
                Ok(written.lease)
            }
            Exclusion::Conditional => contender.acquire_checked(watch).await,
        }
    }
}

/// The race check's first round, before a write that would replace a record
/// naming another holder, where the whole check runs after the write
/// (`checked::whole_check_fits`). A store that lets several concurrent contenders
/// win outright (a precondition ignored, a wide check-then-write window) is
/// refused there with that record untouched, as when the check ran first; a
/// write onto an absent key or a released record (no holder to replace: a
/// refusal after it removes ours, or marks it released keeping the
/// generation) goes ahead at once.
pub(super) struct Gate {
    /// Dropped: the check's first round may start.
    start: Option<oneshot::Sender<()>>,
    /// The first round had no two winners (dropped unsent: it ended the check).
    first: Option<oneshot::Receiver<(Option<u64>, Duration)>>,
    /// The first round found nothing: no write waits for it any more.
    open: bool,
}

impl Gate {
    /// A gate that starts the check by dropping `start` and learns its
    /// first round's outcome on `first`.
    pub(super) fn new(
        start: oneshot::Sender<()>,
        first: oneshot::Receiver<(Option<u64>, Duration)>,
    ) -> Self {
        Self {
            start: Some(start),
            first: Some(first),
            open: false,
        }
    }

    /// Whether a write after `reading` waits for the first round: it would
    /// replace a record (stale, suspect or malformed) that names another
    /// holder, or another process under our id. (A fresh one is not written
    /// over: refused without the round.)
    pub(super) fn closed(&self, reading: Reading<'_>) -> bool {
        !self.open
            && matches!(reading.owner, Whose::SameId | Whose::Other)
            && matches!(reading.observed, Observed::Present { .. })
            && !matches!(
                judge(reading.observed, reading.now).state,
                LeaseState::Released | LeaseState::Fresh
            )
    }

    /// Starts the check's first round and waits for it: true when it had no
    /// two winners (the gate stays open), false when it ended the check.
    pub(super) async fn pass(&mut self) -> bool {
        drop(self.start.take());
        if let Some(first) = self.first.take() {
            self.open = first.await.is_ok();
        }
        self.open
    }

    /// Lets the check's rounds start (the write was answered, or there is
    /// none).
    pub(super) fn release(&mut self) {
        drop(self.start.take());
    }
}

/// One acquire: what it writes where, as whom.
pub(super) struct Contender<'a> {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) clock: SharedClock,
    /// The LEASE's key.
    pub(super) key: String,
    pub(super) instance_id: &'a str,
    pub(super) config: LeaseConfig,
}

/// An acquire's record, written and not yet handed out, and what the checks
/// after the write need.
pub(super) struct Written {
    /// The lease on the record written.
    pub(super) lease: BucketLease,
    /// The record's body.
    pub(super) body: Vec<u8>,
    /// The holder whose record the write replaced (not one we adopt), and
    /// whether it was written over a record at all.
    pub(super) replaced: (Option<String>, bool),
    /// When it was decided and answered.
    pub(super) timing: WriteTiming,
}

impl Contender<'_> {
    /// The rounds of reads and writes until a write is answered: the record
    /// written, its body kept provable as ours in `watch.sent` until the
    /// lease is handed out. `after`: the confirmation's wait, when the race
    /// check that sizes it has ended (`None`: not yet; a write is then judged
    /// slow by the shortest wait, [`race::CONFIRM_AFTER_MIN`], so that one
    /// whose ETag cannot be used is not removed where it may hide a holder).
    ///
    /// Errors: as [`BucketLease::acquire_as`]; [`LeaseError::UnusableEtag`]
    /// is the one returned after a write of ours was answered (then removed,
    /// or left to expire).
    pub(super) async fn write(
        &self,
        watch: &mut LeaseWatch,
        after: Option<Duration>,
    ) -> Result<Written, LeaseError> {
        match self.write_gated(watch, after, None).await? {
            Some(w) => Ok(w),
            // Never: without a gate nothing stops the write.
            None => Err(LeaseError::Contended {
                key: self.key.clone(),
            }),
        }
    }

    /// [`Contender::write`], with the race check's first round as a `gate`
    /// before a write over a record that names another holder (see
    /// `checked::Gate`): `None` when that round ended the check instead
    /// (two winners, a failure, the store checked by another caller), with
    /// nothing written. After the gate opens the LEASE is read again, so
    /// that the round's time is not counted in the write's read-to-answer
    /// span.
    ///
    /// Errors: as [`Contender::write`].
    pub(super) async fn write_gated(
        &self,
        watch: &mut LeaseWatch,
        after: Option<Duration>,
        mut gate: Option<&mut Gate>,
    ) -> Result<Option<Written>, LeaseError> {
        let Self {
            store,
            clock,
            key,
            instance_id,
            config,
        } = self;
        let mut rounds = AcquireRounds::default();
        for _ in 0..MAX_ROUNDS {
            let read_sent = clock.mono();
            let ReadBack {
                observed,
                body: stored,
            } = read_back(store.as_ref(), key).await?;
            rounds
                .check_refusal(store.as_ref(), clock.as_ref(), key, instance_id, &observed)
                .await?;
            let now = clock.wall();
            let mono = clock.mono();
            // The one rule: whose is it (own::whose)? The id alone proves nothing.
            let owner = whose(&observed, stored.as_deref(), instance_id, |b| {
                #[cfg(feature = "sim")]
                if defect::on(Defect::LostAnswerIgnored) {
                    return false;
                }
                watch.sent.proves(b)
            });
            check_reader_clock(store.as_ref(), clock.as_ref(), key, owner, &observed, now)?;
            let reading = Reading {
                key,
                observed: &observed,
                owner,
                instance_id,
                now,
                mono,
            };
            // Before `decide`, which watches a suspect record: the round is
            // passed once, and the LEASE read again after it.
            if let Some(g) = gate.as_deref_mut().filter(|g| g.closed(reading)) {
                if !g.pass().await {
                    return Ok(None);
                }
                continue;
            }
            let step = decide(reading, config, watch)?;
            check_holder_clock(store.server_offset(), clock.as_ref(), key, config.ttl_s)?;
            let over_record = matches!(observed, Observed::Present { .. });
            let Write {
                record,
                cond,
                body,
                replaced,
            } = Write::of(reading, step, config, watch.phase);
            let form = store.capabilities().etag_form;
            // Until an answer says otherwise, this body may land unseen: a
            // later round adopts it only if it is exactly this body.
            watch.sent.add(&body);
            let put = store.put(key, body.clone(), cond.clone()).await;
            let timing = WriteTiming {
                read_sent,
                answered: clock.mono(),
                adopted_unanswered: owner == Whose::Ours && landed_late(&observed),
                adopted_hiding: owner == Whose::Ours
                    && stored.as_deref().is_some_and(|b| watch.hiding.proves(b)),
                replaced_suspect: replaced.is_some() && landed_late(&observed),
            };
            let Some(etag) = rounds
                .after_put(put, cond, form, config, store.as_ref())
                .await?
            else {
                continue;
            };
            let etag = etag_or_read_back(store.as_ref(), key, etag, &body).await?;
            watch.sent.clear();
            if config.exclusion == Exclusion::Conditional {
                let wait = after.unwrap_or(race::CONFIRM_AFTER_MIN);
                let slow = timing.slow(wait).is_some();
                if slow {
                    // Until it is handed out: a later try that takes it up
                    // cannot count on it being seen either.
                    watch.hiding.add(&body);
                }
                refuse_unusable_etag(store.as_ref(), key, &etag, &body, slow).await?;
            }
            let lease = BucketLease {
                store: store.clone(),
                clock: clock.clone(),
                key: key.clone(),
                config: config.clone(),
                record,
                etag,
                body: body.clone(),
                unanswered: Sent::default(),
                phase: watch.phase,
                renewed_mono: mono,
                not_before_mono: None,
                lost: false,
            };
            // Until it is handed out, what this acquire writes stays provable
            // as ours: a record it leaves behind is taken up by the next try.
            watch.sent.add(&body);
            return Ok(Some(Written {
                lease,
                body,
                replaced: (replaced, over_record),
                timing,
            }));
        }
        Err(rounds.tally.give_up(key.clone(), store.as_ref()))
    }
}

/// The ETag an acquire's write was answered with, or, where the answer had
/// none, the one read back — only when the key holds our own `body`.
///
/// Errors: [`LeaseError::Contended`] (another body there), [`LeaseError::Store`].
async fn etag_or_read_back(
    store: &dyn ObjectStore,
    key: &str,
    etag: Option<String>,
    body: &[u8],
) -> Result<String, LeaseError> {
    if let Some(e) = etag {
        return Ok(e);
    }
    match read_back(store, key).await? {
        rb if rb.holds(body) && rb.etag().is_some() => Ok(rb.etag().unwrap_or_default().to_owned()),
        _ => Err(LeaseError::Contended {
            key: key.to_owned(),
        }),
    }
}

/// After an acquire's write answered with `etag`: an ETag that cannot be
/// sent in `If-Match` ([`crate::store::unusable_etag`]) means no renewal or
/// release could be conditional, so ours is removed (when the object holds
/// our `body`) and the acquire fails closed — unless the write may hide a
/// holder (`slow`, see `super::confirm`): then ours is left to expire.
///
/// Errors: [`LeaseError::UnusableEtag`].
async fn refuse_unusable_etag(
    store: &dyn ObjectStore,
    key: &str,
    etag: &str,
    body: &[u8],
    slow: bool,
) -> Result<(), LeaseError> {
    let Some(why) = unusable_etag(etag) else {
        return Ok(());
    };
    if !slow && read_back(store, key).await.is_ok_and(|rb| rb.holds(body)) {
        let _ = store.delete(key, None).await;
    }
    tracing::error!(key = %key, "the service's ETag is {why}: lease not taken");
    Err(LeaseError::UnusableEtag {
        service: store.describe(),
        etag: sanitize(etag),
        why,
    })
}

/// One reading of the LEASE, as [`decide`] weighs it.
#[derive(Clone, Copy)]
pub(super) struct Reading<'a> {
    /// The LEASE's key.
    pub(super) key: &'a str,
    /// What was read.
    pub(super) observed: &'a Observed,
    /// Whose the record is ([`whose`]).
    pub(super) owner: Whose,
    /// This holder's instance id.
    pub(super) instance_id: &'a str,
    /// The wall clock at the reading.
    pub(super) now: DateTime<Utc>,
    /// The monotonic clock at the reading (the watch of a suspect record).
    pub(super) mono: Duration,
}

/// What one round of an acquire writes.
struct Write {
    /// The record.
    record: LeaseRecord,
    /// The condition it is sent under (none in best-effort mode).
    cond: PutCondition,
    /// Its body.
    body: Vec<u8>,
    /// The holder whose record it replaces: a record we do not adopt,
    /// another process's under our id included.
    replaced: Option<String>,
}

impl Write {
    /// The write [`decide`]'s `step` asks for after `reading`, by a
    /// contender on `phase`. The record's times are stamped on that phase
    /// ([`stamp`]), so that no other process writes these bytes; the
    /// generation keeps the clock's reading.
    fn of(reading: Reading<'_>, step: Step, config: &LeaseConfig, phase: u16) -> Self {
        let Step::Write(cond, acquired_at, generation) = step;
        let stamped = stamp(reading.now, phase);
        let acquired_at = if acquired_at == reading.now {
            stamped
        } else {
            acquired_at
        };
        // Never equal stamps: that is a hand-over's mark (own::is_handover).
        let (acquired_at, renewed_at) = holder_stamps(acquired_at, stamped);
        let record = LeaseRecord {
            instance_id: reading.instance_id.to_owned(),
            acquired_at,
            renewed_at,
            ttl_s: config.ttl_s,
            generation,
            released_at: None,
        };
        let cond = match config.exclusion {
            Exclusion::Conditional => cond,
            Exclusion::BestEffort => PutCondition::None,
        };
        let body = record.to_body();
        let replaced = reading
            .observed
            .record()
            .filter(|_| matches!(reading.owner, Whose::SameId | Whose::Other))
            .map(|r| r.instance_id.clone());
        Self {
            record,
            cond,
            body,
            replaced,
        }
    }
}

/// The acquire decision for one reading (pure apart from the watch).
pub(super) fn decide(
    reading: Reading<'_>,
    config: &LeaseConfig,
    watch: &mut LeaseWatch,
) -> Result<Step, LeaseError> {
    let Reading {
        key,
        observed,
        owner,
        instance_id,
        now,
        mono,
    } = reading;
    let format = config.record_format;
    // Creating on an absent key: no generation to count from, the clock's.
    let create = || Step::Write(PutCondition::IfNoneMatch, now, format.generation(None, now));
    let etag = match observed {
        Observed::Absent => return Ok(create()),
        Observed::Present { etag, .. } => etag.clone().unwrap_or_default(),
    };
    if let Some(r) = observed.record() {
        if owner == Whose::SameId {
            // It names us, but this process did not write it and no takeover
            // handed it to us: another process holds it under the same id.
            let j = judge(observed, now);
            if j.state == LeaseState::Fresh {
                return Err(LeaseError::SameInstanceId {
                    key: key.to_owned(),
                    instance_id: instance_id.to_owned(),
                    age_s: j.age_s.unwrap_or(0.0),
                    may_take_in_s: j.expires_in_s.unwrap_or(0.0),
                });
            }
            // Stale (or suspect): taken over like any other holder's, below.
        } else if matches!(owner, Whose::Ours | Whose::HandedOver) {
            tracing::info!(
                key,
                "the LEASE already names our instance id ({}): adopting it",
                if owner == Whose::Ours {
                    "a write of ours whose answer was lost"
                } else {
                    "a takeover handed it over to us"
                }
            );
            // Not a change of holder: the generation is kept (a hand-over's
            // successor adopts the one its takeover wrote).
            return Ok(Step::Write(
                PutCondition::IfMatch(etag),
                r.acquired_at,
                format.adopted(r.generation, now),
            ));
        }
    }
    // Taking a record over (stale, or suspect / malformed after the watch):
    // greater than its generation (a malformed one has none known).
    let replaced = observed.record().and_then(|r| r.generation);
    let take = |etag| match format.cannot_replace(replaced) {
        Some(why) => Err(LeaseError::GenerationExhausted {
            key: key.to_owned(),
            why,
        }),
        None => Ok(Step::Write(
            PutCondition::IfMatch(etag),
            now,
            format.generation(replaced, now),
        )),
    };
    let j = judge(observed, now);
    match j.state {
        LeaseState::Absent => Ok(create()),
        LeaseState::Released => {
            if let Some(r) = observed.record() {
                tracing::info!(key, generation = r.generation, "taking a released lease");
            }
            take(etag)
        }
        LeaseState::Stale => {
            if let Some(r) = observed.record() {
                tracing::info!(key, holder = %sanitize(&r.instance_id), age_s = j.age_s.unwrap_or(0.0), "taking over a stale lease");
            }
            take(etag)
        }
        LeaseState::Fresh => {
            let r = observed.record().cloned().expect("fresh implies a record");
            Err(LeaseError::HeldByOther {
                key: key.to_owned(),
                record: Box::new(r),
                etag,
                age_s: j.age_s.unwrap_or(0.0),
                may_take_in_s: j.expires_in_s.unwrap_or(0.0),
            })
        }
        LeaseState::Suspect | LeaseState::Malformed => {
            let seen_for = watch.observe(&etag, mono);
            let ttl = config.ttl();
            if seen_for >= ttl {
                tracing::warn!(
                    key,
                    state = %j.state,
                    problem = %j.problem.as_deref().unwrap_or(""),
                    watched_s = seen_for.as_secs_f64(),
                    "taking over a {} record seen unchanged for one TTL",
                    j.state
                );
                watch.reset();
                take(etag)
            } else {
                Err(LeaseError::UnderWatch {
                    key: key.to_owned(),
                    state: j.state,
                    problem: j.problem.unwrap_or_default(),
                    remaining: ttl - seen_for,
                })
            }
        }
    }
}
