//! [`BucketLease`]: taking, renewing, fencing and releasing `{prefix}/LEASE`.
//!
//! - **Acquire** is one conditional PUT: `If-None-Match: *` on an absent key,
//!   `If-Match: <etag>` over a stale record (or over a suspect/malformed one
//!   watched unchanged for one TTL). `If-Match` answered 404 (deleted
//!   meanwhile) is retried as a create; 409 (a concurrent conditional write)
//!   and 412 re-read and judge again — by the rule below, so a 412 to a
//!   client's retry of a write that landed finds our own body and adopts it.
//! - **Whose record it is** ([`super::own::whose`], the one rule for every
//!   read-back: an answer without an ETag, a refusal, a lost answer, a
//!   release's check, a takeover's PUT, a hand-over). An instance id names a
//!   holder, not a process, so the id is never proof. A record is *ours* only
//!   when its stored body is, byte for byte, one this process sent (the last
//!   write confirmed, or one whose answer it did not see; `renewed_at` has
//!   microseconds, so two processes' bodies differ): its ETag is adopted. A
//!   record naming our id with `acquired_at` equal to `renewed_at` is a
//!   *hand-over* nobody has taken up (a takeover writes that; no holder ever
//!   does, [`super::own::holder_stamps`]): an acquire adopts it with
//!   `If-Match` on its ETag, so of two processes started under the successor's
//!   id exactly one gets it, and its first write ends the mark. Any other
//!   record naming our id belongs to *another process under the same id*: an
//!   acquire refuses it while fresh ([`LeaseError::SameInstanceId`]) and takes
//!   it over like anyone's once stale (reader-clock check, greater
//!   generation); a running holder that finds it has lost the lease; a
//!   release never deletes it. Both record formats carry the rule (no field is
//!   added). Limits: a process restarted under the same id cannot prove the
//!   record it left is its own (it is refused until that record is stale, at
//!   most one TTL); a first record written by another tool with equal stamps
//!   looks like a hand-over until its holder renews it.
//! - Every acquire then **probes** the service: the lease is written once more
//!   with `If-None-Match: *` and once with `If-Match` on a made-up ETag; both
//!   must be refused, or the lease is removed and the acquire fails closed.
//! - **Renew** is a PUT with `If-Match` on the ETag we hold. A refused renewal,
//!   or one answered without an ETag, reads back: our own body (an earlier
//!   renewal landed) is adopted; anything else — another holder's record, a
//!   hand-over or another process's record naming our id, none — means the
//!   lease is lost.
//! - **Generation** (the fencing token, [`super::record::next_generation`]): a
//!   renewal keeps the record's; taking a record over (stale, suspect,
//!   malformed) or taking a released record writes `max(replaced + 1, now in
//!   µs)`, creating on an absent key `now in µs`; adopting our own record or a
//!   hand-over keeps its generation. [`RecordFormat::Seed`] writes none.
//! - **Fence**: [`BucketLease::may_write`] is true only until two thirds of a
//!   TTL after the last successful renewal, on both the monotonic and the wall
//!   clock. A contender may take over only after a full TTL, so a holder that
//!   cannot renew stops a third of a TTL before anyone else can start.
//! - **Best-effort** ([`Exclusion::BestEffort`]): each step is a read followed
//!   by an unconditional write; two contenders may both pass; logged at WARN.
//! - **Release** of a record with a generation replaces it, with `If-Match`,
//!   by a released record that keeps the generation
//!   ([`LeaseRecord::released`]; judged free); one without (the seed's format)
//!   is deleted with `If-Match`, or read, checked and deleted where conditional
//!   DELETE is not available. Never replaces or deletes a lease that is no
//!   longer ours (by the rule above: the same id is not enough).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::error::LeaseError;
use super::fence::{FenceDeadline, FenceStatus};
use super::judge::{judge, LeaseState, Observed};
use super::own::{holder_stamps, read_back, whose, ReadBack, Sent, Whose};
use super::probe;
use super::record::{lease_key, LeaseRecord, RecordFormat};
use super::watch::LeaseWatch;
use crate::clock::{Clock, SharedClock};
use crate::store::{DeleteSupport, EtagForm, ObjectRead, ObjectStore, PutCondition, StoreError};
use crate::text::sanitize;

/// How strongly a held lease excludes a second writer on this service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exclusion {
    /// Compare-and-swap: the service honours `If-None-Match` / `If-Match` (probed).
    Conditional,
    /// Read, then unconditional write: two contenders may both pass.
    BestEffort,
}

/// Parameters of a lease.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Time to live in whole seconds (default 30). Renewal every `ttl_s / 3`.
    pub ttl_s: u64,
    /// The exclusion mode asked for.
    pub exclusion: Exclusion,
    /// The fields written: with `generation` (the default) or the seed's four.
    pub record_format: RecordFormat,
}

impl Exclusion {
    /// `conditional` or `best_effort`, as in `--json` and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            Exclusion::Conditional => "conditional",
            Exclusion::BestEffort => "best_effort",
        }
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            ttl_s: super::record::DEFAULT_TTL_S,
            exclusion: Exclusion::Conditional,
            record_format: RecordFormat::Leasectl,
        }
    }
}

impl LeaseConfig {
    /// The TTL as a duration.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_s)
    }
}

/// How a release went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// Replaced by a released record ([`LeaseRecord::released`]) that keeps
    /// our generation, so that the next holder's is greater: a PUT with
    /// `If-Match` on our ETag (best-effort mode: read, found still ours,
    /// written). The form of every release of a record with a generation.
    Recorded {
        /// The generation the released record keeps.
        generation: u64,
    },
    /// Deleted with `DELETE If-Match: <our etag>` (a record without a
    /// generation: the seed's record format).
    ConditionalDelete,
    /// Read, found still ours, then deleted (no conditional DELETE available,
    /// or best-effort mode). A writer slipping in between read and delete
    /// would lose its lease: the small window best-effort accepts.
    ReadCheckDelete,
    /// The LEASE object was already gone.
    AlreadyGone,
    /// Someone else holds it now: nothing was deleted.
    NotOurs(LeaseRecord),
}

impl std::fmt::Display for Released {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Released::Recorded { generation } => write!(
                f,
                "marked released with If-Match on our ETag; the record keeps generation {generation}, so the next holder's is greater"
            ),
            Released::ConditionalDelete => f.write_str("deleted with If-Match on our ETag"),
            Released::ReadCheckDelete => f.write_str("read, found still ours, deleted"),
            Released::AlreadyGone => f.write_str("the LEASE object was already gone"),
            Released::NotOurs(r) => write!(
                f,
                "not deleted: the lease is now held by {}",
                sanitize(&r.instance_id)
            ),
        }
    }
}

/// How many re-reads an acquire or renewal makes after 409/412/404 before
/// giving up as contended.
const MAX_ROUNDS: usize = 6;

/// A held lease on `{prefix}/LEASE`.
pub struct BucketLease {
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    key: String,
    config: LeaseConfig,
    record: LeaseRecord,
    etag: String,
    /// The exact body stored under `etag`: the proof a read-back compares with.
    body: Vec<u8>,
    /// Bodies sent whose answers were not seen ([`Sent`]).
    unanswered: Sent,
    /// Boot-time and wall readings taken just before the last successful write
    /// (the wall reading is the record's `renewed_at`).
    renewed_mono: Duration,
    /// Writes may not start before this boot-time reading (see [`FenceDeadline`]).
    not_before_mono: Option<Duration>,
    lost: bool,
}

impl std::fmt::Debug for BucketLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketLease")
            .field("key", &self.key)
            .field("instance_id", &self.record.instance_id)
            .field("etag", &self.etag)
            .field("exclusion", &self.config.exclusion)
            .finish()
    }
}

/// The write an acquire makes: its precondition, the record's `acquired_at`
/// and its generation.
enum Step {
    Write(PutCondition, DateTime<Utc>, Option<u64>),
}

/// The ambiguous answers (409, 5xx) an acquire or renewal met in its rounds.
#[derive(Default)]
struct Conflicts {
    /// 409s and 5xx answers together.
    conflicts: usize,
    /// A 409 was among them (5xx answers are counted with 409s, but reported
    /// as what they were when no 409 came).
    saw_409: bool,
    /// The last 5xx answer.
    last_5xx: Option<StoreError>,
}

impl Conflicts {
    /// The error once every round is used up: the last 5xx if only 5xx
    /// answers came, [`LeaseError::Conflicts`] after any 409, else
    /// [`LeaseError::Contended`].
    fn give_up(self, key: String, store: &dyn ObjectStore) -> LeaseError {
        if let (false, Some(e)) = (self.saw_409, self.last_5xx) {
            return e.into();
        }
        if self.conflicts > 0 {
            return LeaseError::Conflicts {
                key,
                service: store.describe(),
            };
        }
        LeaseError::Contended { key }
    }
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
/// allows ([`super::fence::offset_beyond_limit`]) is not taken — another
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
                if let Some(off) = super::fence::offset_beyond_limit(&o, clock, r.ttl_s) {
                    return Err(LeaseError::ReaderClock {
                        key: key.to_owned(),
                        offset_s: off,
                        error_s: o.error_s,
                        limit_s: super::fence::clock_offset_limit_s(r.ttl_s),
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
        let id = super::record::new_instance_id();
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
    /// once-per-store race check, [`super::race::check_once`]; nothing left behind),
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
        if config.ttl_s == 0 || config.ttl_s > super::record::MAX_SANE_TTL_S {
            return Err(LeaseError::InvalidTtl(config.ttl_s));
        }
        if config.exclusion == Exclusion::BestEffort {
            tracing::warn!(
                key = %key,
                "best-effort exclusion: read, then unconditional write; two writers starting together may both pass"
            );
        }
        let mut rounds = AcquireRounds::default();
        for _ in 0..MAX_ROUNDS {
            let ReadBack {
                observed,
                body: stored,
            } = read_back(store.as_ref(), &key).await?;
            rounds
                .check_refusal(store.as_ref(), clock.as_ref(), &key, instance_id, &observed)
                .await?;
            let now = clock.wall();
            let mono = clock.mono();
            // The one rule: whose is it (own::whose)? The id alone proves nothing.
            let owner = whose(&observed, stored.as_deref(), instance_id, |b| {
                #[cfg(feature = "sim")]
                if crate::bucket::defect::on(crate::bucket::defect::Defect::LostAnswerIgnored) {
                    return false;
                }
                watch.sent.proves(b)
            });
            check_reader_clock(store.as_ref(), clock.as_ref(), &key, owner, &observed, now)?;
            let Step::Write(cond, acquired_at, generation) = decide(
                &key,
                &observed,
                owner,
                instance_id,
                now,
                mono,
                &config,
                watch,
            )?;
            // Never equal stamps: that is a hand-over's mark (own::is_handover).
            let (acquired_at, renewed_at) = holder_stamps(acquired_at, now);
            let record = LeaseRecord {
                instance_id: instance_id.to_owned(),
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
            // A record we do not adopt is replaced (another process's under
            // our id included).
            let replaced = observed
                .record()
                .filter(|_| matches!(owner, Whose::SameId | Whose::Other))
                .map(|r| r.instance_id.clone());
            let form = store.capabilities().etag_form;
            // Until an answer says otherwise, this body may land unseen: a
            // later round adopts it only if it is exactly this body.
            watch.sent.add(&body);
            let put = store.put(&key, body.clone(), cond.clone()).await;
            let Some(etag) = rounds
                .after_put(put, cond, form, &config, store.as_ref())
                .await?
            else {
                continue;
            };
            let etag = match etag {
                Some(e) => e,
                // No ETag in the answer: read back, and only our own body will do.
                None => match read_back(store.as_ref(), &key).await? {
                    rb if rb.holds(&body) && rb.etag().is_some() => {
                        rb.etag().unwrap_or_default().to_owned()
                    }
                    _ => return Err(LeaseError::Contended { key }),
                },
            };
            watch.sent.clear();
            if config.exclusion == Exclusion::Conditional {
                refuse_unusable_etag(store.as_ref(), &key, &etag, &body).await?;
            }
            let lease = Self {
                store: store.clone(),
                clock: clock.clone(),
                key: key.clone(),
                config: config.clone(),
                record,
                etag,
                body: body.clone(),
                unanswered: Sent::default(),
                renewed_mono: mono,
                not_before_mono: None,
                lost: false,
            };
            return lease.probe_after_acquire(&body, replaced).await;
        }
        Err(rounds.tally.give_up(key, store.as_ref()))
    }

    /// A lease this process has just written itself (an operator takeover):
    /// `record` with `etag` at `key`, written at monotonic time `renewed_mono`.
    pub(crate) fn from_written(
        store: Arc<dyn ObjectStore>,
        clock: SharedClock,
        key: String,
        record: LeaseRecord,
        etag: String,
        config: LeaseConfig,
        renewed_mono: Duration,
    ) -> Self {
        Self {
            store,
            clock,
            key,
            config,
            body: record.to_body(),
            unanswered: Sent::default(),
            record,
            etag,
            renewed_mono,
            not_before_mono: None,
            lost: false,
        }
    }

    /// Writes under this lease may not start before the boot-time reading
    /// `mono` (a takeover of a live lease waits for the old holder's fence).
    pub(crate) fn set_not_before(&mut self, mono: Duration) {
        self.not_before_mono = Some(mono);
    }

    async fn probe_after_acquire(
        mut self,
        body: &[u8],
        replaced: Option<String>,
    ) -> Result<Self, LeaseError> {
        if self.config.exclusion == Exclusion::BestEffort {
            return Ok(self);
        }
        let mut report = probe::check_writes(self.store.as_ref(), &self.key, body).await;
        // Once per store: is If-Match on DELETE honoured (a release depends on it),
        // and does If-Match on an absent key create it (then no lease is safe)?
        if report.as_ref().is_ok_and(|r| r.ignored_header().is_none()) {
            let scratch = scratch_key(&self.key, &self.record.instance_id);
            if let Err(e) =
                probe::learn_delete(self.store.as_ref(), &scratch, self.clock.as_ref()).await
            {
                tracing::warn!(key = %self.key, "could not check conditional DELETE ({e}); a release will read and check before deleting");
            }
            if let Ok(r) = &mut report {
                if self.store.capabilities().if_match_absent_creates {
                    r.if_match_absent = Some(probe::Honoured::Ignored);
                }
            }
        }
        let ignored = match &report {
            Ok(r) => r.ignored_header(),
            Err(_) => None,
        };
        // Once per store: are the preconditions atomic under concurrent requests?
        // A check followed by a separate write passes every step above and still
        // lets several contenders win.
        let mut not_atomic = None;
        let mut raced = false;
        #[cfg(feature = "sim")]
        let skip_race = crate::bucket::defect::on(crate::bucket::defect::Defect::RaceCheckSkipped);
        #[cfg(not(feature = "sim"))]
        let skip_race = false;
        if ignored.is_none() && report.is_ok() && !skip_race {
            let scratch = scratch_key(&self.key, &self.record.instance_id);
            match super::race::check_once_ran(self.store.as_ref(), &scratch).await {
                Ok((r, ran)) => {
                    not_atomic = r.finding();
                    raced = ran;
                }
                Err(e) => report = Err(e),
            }
        }
        if ignored.is_some() || not_atomic.is_some() {
            // Fail closed, and leave nothing behind.
            let service = self.store.describe();
            let _ = self.store.delete(&self.key, Some(&self.etag)).await;
            if let Ok(out) = self.store.get(&self.key, None).await {
                if out.body == self.body {
                    let _ = self.store.delete(&self.key, None).await;
                }
            }
            let changed = match replaced {
                Some(holder) => format!(
                    "the record of {} that was there was overwritten by ours, then ours was removed: \
                     {} is now absent",
                    sanitize(&holder),
                    self.key
                ),
                None => "nothing left behind".to_owned(),
            };
            let Some(header) = ignored else {
                let finding = not_atomic.unwrap_or_default();
                tracing::error!(key = %self.key, "{finding}: lease not taken");
                return Err(LeaseError::NotAtomic {
                    finding,
                    service,
                    changed,
                });
            };
            tracing::error!(key = %self.key, header, "service ignores a precondition: lease not taken");
            return Err(LeaseError::PreconditionsIgnored {
                header,
                service,
                changed,
            });
        }
        if let Err(e) = report {
            let _ = self.release().await;
            return Err(e.into());
        }
        if raced {
            // The race check took time off the fence (seconds where losers of a
            // contended write wait): renew, so the holder starts with a whole one.
            if let Err(e) = self.renew().await {
                let _ = self.release().await;
                return Err(e);
            }
        }
        // An ignoring service may have rewritten the object; keep the ETag current.
        if let Ok(out) = self.store.get(&self.key, None).await {
            if let Some(e) = out.meta.etag {
                if out.body == self.body {
                    self.etag = e;
                }
            }
        }
        tracing::info!(key = %self.key, instance_id = %sanitize(&self.record.instance_id), "lease acquired; preconditions honoured");
        Ok(self)
    }

    /// Renews the lease: a PUT with `If-Match` on the held ETag, stamped with
    /// our wall clock. On success the fence is extended.
    ///
    /// Errors: [`LeaseError::Lost`] (someone else's record, or none: `may_write`
    /// is false from now on); [`LeaseError::Store`] (transport: the lease may
    /// still be ours; the fence keeps running down); [`LeaseError::Contended`].
    pub async fn renew(&mut self) -> Result<(), LeaseError> {
        if self.lost {
            return Err(LeaseError::Lost {
                key: self.key.clone(),
                by: None,
            });
        }
        let mut tally = Conflicts::default();
        for _ in 0..MAX_ROUNDS {
            let now = self.clock.wall();
            let mono = self.clock.mono();
            let record = LeaseRecord {
                renewed_at: holder_stamps(self.record.acquired_at, now).1,
                ..self.record.clone()
            };
            let cond = self.renew_condition().await?;
            let form = self.store.capabilities().etag_form;
            let body = record.to_body();
            match self.store.put(&self.key, body.clone(), cond).await {
                Ok(etag) => {
                    self.etag = match etag {
                        Some(e) => e,
                        // No ETag in the answer: read back; only our own body is ours
                        // (a stranger may have written right after it landed).
                        None => match read_back(self.store.as_ref(), &self.key).await? {
                            rb if rb.holds(&body) && rb.etag().is_some() => {
                                rb.etag().unwrap_or_default().to_owned()
                            }
                            rb => {
                                let by = rb.observed.record().cloned();
                                return Err(self.mark_lost(by));
                            }
                        },
                    };
                    self.record = record;
                    self.body = body;
                    self.unanswered.clear();
                    self.renewed_mono = mono;
                    return Ok(());
                }
                Err(
                    refused @ (StoreError::PreconditionFailed
                    | StoreError::Conflict
                    | StoreError::NotFound(_)
                    | StoreError::Other { status: 500.., .. }),
                ) => {
                    if !matches!(
                        refused,
                        StoreError::PreconditionFailed | StoreError::NotFound(_)
                    ) {
                        // 409 and 5xx: the write may have landed.
                        self.unanswered.add(&body);
                    }
                    self.renewal_refused(refused, form, &mut tally).await?
                }
                Err(e) => {
                    // No answer (a timeout, a dropped connection): it may have landed.
                    self.unanswered.add(&body);
                    return Err(e.into());
                }
            }
        }
        Err(tally.give_up(self.key.clone(), self.store.as_ref()))
    }

    /// The precondition of the next renewal: `If-Match` on the held ETag, or
    /// (best-effort) none, after a read that finds the record still ours.
    ///
    /// Errors: [`LeaseError::Lost`] (best-effort: not ours any more), [`LeaseError::Store`].
    async fn renew_condition(&mut self) -> Result<PutCondition, LeaseError> {
        Ok(match self.config.exclusion {
            #[cfg(feature = "sim")]
            Exclusion::Conditional
                if crate::bucket::defect::on(crate::bucket::defect::Defect::RenewUnconditional) =>
            {
                PutCondition::None
            }
            Exclusion::Conditional => PutCondition::IfMatch(self.etag.clone()),
            Exclusion::BestEffort => {
                // Read, check it is still ours (a body we wrote), then write.
                let rb = read_back(self.store.as_ref(), &self.key).await?;
                let ours = self.is_ours(&rb);
                match rb.observed {
                    Observed::Present {
                        etag: Some(e),
                        record: Ok(_),
                        ..
                    } if ours => {
                        self.etag = e;
                        if let Some(b) = rb.body {
                            self.body = b;
                        }
                    }
                    other => return Err(self.mark_lost(other.record().cloned())),
                }
                PutCondition::None
            }
        })
    }

    /// A renewal sent with the ETag form `form` was `refused` (412, 404, or the
    /// ambiguous 409 and 5xx, counted in `tally`): reads back and judges. `Ok`
    /// means renew again: our earlier write had landed (its ETag adopted), ours
    /// is there unchanged after a 409/5xx (after a back-off), or the service
    /// wants the ETag unquoted (checked and switched).
    ///
    /// Errors: [`LeaseError::Lost`] (someone else's record, or none),
    /// [`LeaseError::IfMatchRefused`], [`LeaseError::Store`].
    async fn renewal_refused(
        &mut self,
        refused: StoreError,
        form: EtagForm,
        tally: &mut Conflicts,
    ) -> Result<(), LeaseError> {
        // 409 and 5xx are ambiguous: the write may have landed. Read back.
        let conflict = matches!(refused, StoreError::Conflict | StoreError::Other { .. });
        if conflict {
            tally.conflicts += 1;
        }
        let answer = match &refused {
            StoreError::Conflict => {
                tally.saw_409 = true;
                "409 ConditionalRequestConflict".to_owned()
            }
            StoreError::Other { status, .. } => {
                tally.last_5xx = Some(refused.clone());
                format!("{status}")
            }
            _ => String::new(),
        };
        let rb = read_back(self.store.as_ref(), &self.key).await?;
        let ours = self.is_ours(&rb);
        let stored = rb.body.as_deref().unwrap_or_default();
        match rb.observed {
            Observed::Present {
                etag: Some(e),
                record: Ok(r),
                ..
            } if ours => {
                if e != self.etag {
                    // Our earlier write landed though its answer was lost (its
                    // body is one we sent): adopt it and renew again (the fence
                    // is not extended by it).
                    tracing::info!(key = %self.key, "renewal refused: an earlier renewal landed though its answer was lost; adopting its ETag");
                    self.etag = e;
                    self.body = stored.to_vec();
                    self.record = r;
                    self.unanswered.clear();
                } else if conflict {
                    // 409/5xx: not written; ours is still there.
                    tracing::info!(key = %self.key, "renewal answered {answer}; read back: ours is still there unchanged; retrying");
                    tokio::time::sleep(Duration::from_millis(50 * tally.conflicts as u64)).await;
                } else if form == EtagForm::Quoted
                    && probe::adapt_etag_form(
                        self.store.as_ref(),
                        &scratch_key(&self.key, &self.record.instance_id),
                        self.clock.as_ref(),
                    )
                    .await?
                {
                    // The service wants the ETag unquoted (checked): renew again.
                } else {
                    // The object still has the ETag we sent, yet If-Match was refused.
                    return Err(LeaseError::IfMatchRefused {
                        key: self.key.clone(),
                        service: self.store.describe(),
                        etag: e,
                    });
                }
                Ok(())
            }
            other => {
                if other
                    .record()
                    .is_some_and(|r| r.instance_id == self.record.instance_id)
                {
                    tracing::error!(key = %self.key, "the LEASE names our instance id but is not a record this process wrote: another process holds it under the same instance id");
                }
                Err(self.mark_lost(other.record().cloned()))
            }
        }
    }

    fn mark_lost(&mut self, by: Option<LeaseRecord>) -> LeaseError {
        self.lost = true;
        tracing::error!(key = %self.key, by = by.as_ref().map(|r| sanitize(&r.instance_id)).unwrap_or_default(), "lease lost");
        LeaseError::Lost {
            key: self.key.clone(),
            by: by.map(Box::new),
        }
    }

    /// The fence deadline of the last successful write (see [`super::fence`]).
    pub fn deadline(&self) -> FenceDeadline {
        FenceDeadline {
            not_before_mono: self.not_before_mono,
            ..FenceDeadline::new(self.renewed_mono, self.record.renewed_at, self.config.ttl())
        }
    }

    /// The fence now: open until two thirds of a TTL after the last successful
    /// renewal, on both the boot-time and the wall clock, and closed when the
    /// wall clock was stepped since (see [`super::fence`]). Closed for good once
    /// lost or released.
    pub fn fence_status(&self) -> FenceStatus {
        #[cfg(feature = "sim")]
        if crate::bucket::defect::on(crate::bucket::defect::Defect::FenceNeverCloses) {
            return FenceStatus::Open(Duration::from_secs(1));
        }
        if self.lost {
            return FenceStatus::Closed(super::fence::FenceClosed::Lost);
        }
        self.deadline().status(self.clock.as_ref())
    }

    /// True while this holder may start a write (see [`BucketLease::fence_status`]).
    pub fn may_write(&self) -> bool {
        self.fence_status().is_open()
    }

    /// Time left before the fence closes (zero once closed or not yet open).
    pub fn fence_remaining(&self) -> Duration {
        match self.fence_status() {
            FenceStatus::Open(d) => d,
            _ => Duration::ZERO,
        }
    }

    /// This host's wall clock against the service's, in seconds (service
    /// minus this clock), from the `Date` of the service's latest answer;
    /// `None` where the store has no clock of its own (a local directory) or
    /// has not answered yet.
    pub fn server_offset_s(&self) -> Option<f64> {
        self.server_offset().map(|o| o.against(self.clock.as_ref()))
    }

    /// The service's latest clock estimate (see [`ObjectRead::server_offset`]).
    pub fn server_offset(&self) -> Option<crate::clock::ServerOffset> {
        self.store.server_offset()
    }

    /// The clock used by this lease.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Releases the lease (see [`Released`]). Never deletes or replaces a
    /// lease that is no longer ours.
    ///
    /// A record with a generation is not deleted: it is replaced by a released
    /// record that keeps the generation ([`LeaseRecord::released`]; readers
    /// judge it free), so the next holder writes a greater one whatever its
    /// clock says. A record without one (the seed's format) is deleted.
    ///
    /// Errors: [`LeaseError::Store`] when the store cannot be reached (the lease
    /// then expires by itself after one TTL); [`LeaseError::Contended`] when
    /// the record kept changing under us.
    pub async fn release(mut self) -> Result<Released, LeaseError> {
        self.lost = true; // no more writes under this lease, whatever happens
        #[cfg(feature = "sim")]
        if crate::bucket::defect::on(crate::bucket::defect::Defect::ReleaseDeletesAny) {
            return self.read_check_delete().await;
        }
        // The defect `generation-from-clock`: the rule before issue 32 §3 —
        // delete on release, so the next creator counts from its own clock.
        #[cfg(feature = "sim")]
        if crate::bucket::defect::on(crate::bucket::defect::Defect::GenerationFromClock) {
            return self.delete_release().await;
        }
        if let Some(generation) = self.record.generation {
            return self.mark_released(generation).await;
        }
        self.delete_release().await
    }

    /// Deletes our record: `DELETE If-Match` where the service honours it,
    /// else read, check it is still ours, delete.
    async fn delete_release(&self) -> Result<Released, LeaseError> {
        if self.config.exclusion == Exclusion::Conditional
            && self.store.capabilities().conditional_delete == DeleteSupport::Honoured
        {
            match self.store.delete(&self.key, Some(&self.etag)).await {
                Ok(()) => {
                    tracing::info!(key = %self.key, "lease released (conditional DELETE)");
                    return Ok(Released::ConditionalDelete);
                }
                Err(StoreError::PreconditionFailed) => {
                    return match self.gone_or_foreign().await? {
                        Some(done) => Ok(done),
                        // Ours but with another ETag (a lost renewal answer): fall back.
                        None => self.read_check_delete().await,
                    };
                }
                Err(StoreError::NotFound(_)) => return Ok(Released::AlreadyGone),
                Err(StoreError::NotImplemented(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.read_check_delete().await
    }

    /// Replaces our record by a released one that keeps `generation`: with
    /// `If-Match` on our ETag (or, best-effort, after a read that finds it
    /// still ours). A refusal is diagnosed by reading back: gone, our released
    /// record already (an answer lost and retried), another holder's, or ours
    /// under another ETag (a lost renewal answer: once more on that ETag).
    async fn mark_released(&self, generation: u64) -> Result<Released, LeaseError> {
        let released = self.record.released(self.clock.wall());
        let body = released.to_body();
        let done = Released::Recorded { generation };
        let mut etag = self.etag.clone();
        let mut transient: Option<StoreError> = None;
        for _ in 0..MAX_ROUNDS {
            let cond = if self.config.exclusion == Exclusion::Conditional {
                PutCondition::IfMatch(etag.clone())
            } else {
                let rb = read_back(self.store.as_ref(), &self.key).await?;
                if !self.is_ours(&rb) {
                    return Ok(self.not_ours_any_more(rb, &body, done));
                }
                PutCondition::None
            };
            match self.store.put(&self.key, body.clone(), cond).await {
                Ok(_) => {
                    tracing::info!(key = %self.key, generation, "lease released (a released record keeps its generation)");
                    return Ok(done);
                }
                Err(
                    refused @ (StoreError::PreconditionFailed
                    | StoreError::NotFound(_)
                    | StoreError::Conflict
                    | StoreError::Other { status: 500.., .. }),
                ) => {
                    let rb = read_back(self.store.as_ref(), &self.key).await?;
                    if self.is_ours(&rb) && !rb.holds(&body) {
                        match rb.etag() {
                            // Our record, unchanged, and the precondition refused
                            // anyway: the service does not take If-Match on this
                            // ETag. Delete it as a release without a generation
                            // does. (A 409 or 5xx over it is transient: once more.)
                            Some(e)
                                if e == etag
                                    && matches!(refused, StoreError::PreconditionFailed) =>
                            {
                                tracing::warn!(key = %self.key, "the service refused the released record over our unchanged record; deleting it instead (the next holder's generation then counts from its clock)");
                                return self.delete_release().await;
                            }
                            Some(e) => etag = e.to_owned(),
                            None => {
                                return Err(LeaseError::Contended {
                                    key: self.key.clone(),
                                })
                            }
                        }
                        if !matches!(
                            refused,
                            StoreError::PreconditionFailed | StoreError::NotFound(_)
                        ) {
                            transient = Some(refused);
                        }
                        continue;
                    }
                    return Ok(self.not_ours_any_more(rb, &body, done));
                }
                Err(e) => return Err(e.into()),
            }
        }
        // Our record is still there: it expires by itself after one TTL.
        Err(match transient {
            Some(e) => e.into(),
            None => LeaseError::Contended {
                key: self.key.clone(),
            },
        })
    }

    /// What a read-back that is not ours (as a holder) says of a release
    /// whose released record is `body`: already done (our released record is
    /// there: an answer lost), gone, or someone else's.
    fn not_ours_any_more(&self, rb: ReadBack, body: &[u8], done: Released) -> Released {
        if rb.holds(body) {
            tracing::info!(key = %self.key, "lease released (our released record was found in place)");
            return done;
        }
        match rb.observed {
            Observed::Absent => Released::AlreadyGone,
            Observed::Present { record: Ok(r), .. } => Released::NotOurs(r),
            Observed::Present { .. } => Released::NotOurs(self.malformed_holder()),
        }
    }

    /// Stands for a malformed record found where ours was.
    fn malformed_holder(&self) -> LeaseRecord {
        LeaseRecord {
            instance_id: "(malformed record)".into(),
            acquired_at: self.clock.wall(),
            renewed_at: self.clock.wall(),
            ttl_s: 0,
            generation: None,
            released_at: None,
        }
    }

    /// After a conditional DELETE was refused: re-reads the key and says
    /// whether it is gone or someone else's (`None`: still ours).
    async fn gone_or_foreign(&self) -> Result<Option<Released>, LeaseError> {
        let rb = read_back(self.store.as_ref(), &self.key).await?;
        let ours = self.is_ours(&rb);
        Ok(match rb.observed {
            Observed::Absent => Some(Released::AlreadyGone),
            Observed::Present { record: Ok(r), .. } if !ours => Some(Released::NotOurs(r)),
            _ => None,
        })
    }

    /// True when `rb` holds a body this process wrote (the last confirmed
    /// one, or one whose answer was lost): [`whose`] is [`Whose::Ours`]. A
    /// hand-over naming our id is not ours to a running holder: its record
    /// was replaced.
    fn is_ours(&self, rb: &ReadBack) -> bool {
        whose(
            &rb.observed,
            rb.body.as_deref(),
            &self.record.instance_id,
            |b| b == self.body.as_slice() || self.unanswered.proves(b),
        ) == Whose::Ours
    }

    async fn read_check_delete(&self) -> Result<Released, LeaseError> {
        let rb = read_back(self.store.as_ref(), &self.key).await?;
        let ours = self.is_ours(&rb);
        #[cfg(feature = "sim")]
        let ours =
            ours || crate::bucket::defect::on(crate::bucket::defect::Defect::ReleaseDeletesAny);
        match rb.observed {
            Observed::Absent => Ok(Released::AlreadyGone),
            Observed::Present {
                record: Ok(_),
                etag,
                ..
            } if ours => {
                // Still with If-Match where there is an ETag: a service that honours
                // it closes the window between read and delete.
                match self.store.delete(&self.key, etag.as_deref()).await {
                    Ok(()) => {}
                    Err(StoreError::PreconditionFailed) => {
                        return self.gone_or_foreign().await?.ok_or(LeaseError::Contended {
                            key: self.key.clone(),
                        });
                    }
                    Err(StoreError::NotImplemented(_))
                    | Err(StoreError::Other { status: 400, .. }) => {
                        self.store.delete(&self.key, None).await?
                    }
                    Err(e) => return Err(e.into()),
                }
                tracing::info!(key = %self.key, "lease released (read, checked, deleted)");
                Ok(Released::ReadCheckDelete)
            }
            Observed::Present { record: Ok(r), .. } => Ok(Released::NotOurs(r)),
            Observed::Present { .. } => Ok(Released::NotOurs(self.malformed_holder())),
        }
    }

    /// The exclusion this lease gives on its service.
    pub fn exclusion(&self) -> Exclusion {
        self.config.exclusion
    }

    /// The record last written.
    pub fn record(&self) -> &LeaseRecord {
        &self.record
    }

    /// The ETag of the record last written (quotes removed).
    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The lease key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// True once the lease is known lost (or released).
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// How long to wait between renewals: a third of the TTL.
    pub fn renew_interval(&self) -> Duration {
        self.config.ttl() / 3
    }
}

/// The scratch key next to lease `key` for checks of instance `id`:
/// `{prefix}/.leasectl-probe/{id}`.
pub(crate) fn scratch_key(key: &str, id: &str) -> String {
    let dir = key.strip_suffix("LEASE").unwrap_or(key);
    format!("{dir}.leasectl-probe/{id}")
}

/// Reads the LEASE at `key` as an observation; with `if_none_match` (the
/// ETag of `cached`) a `304 Not Modified` answers `cached` without a body.
/// A missing key is [`Observed::Absent`]. The one way a LEASE is read.
pub async fn read_lease(
    store: &dyn ObjectRead,
    key: &str,
    cached: Option<&Observed>,
) -> Result<Observed, StoreError> {
    match store.get(key, cached.and_then(|o| o.etag())).await {
        Ok(out) => Ok(Observed::from_get(&out)),
        Err(StoreError::NotFound(_)) => Ok(Observed::Absent),
        Err(StoreError::NotModified) => Ok(cached.cloned().unwrap_or(Observed::Absent)),
        Err(e) => Err(e),
    }
}

/// After an acquire's write answered with `etag`: an ETag that cannot be
/// sent in `If-Match` ([`crate::store::unusable_etag`]) means no renewal or
/// release could be conditional, so ours is removed (when the object holds
/// our `body`) and the acquire fails closed.
///
/// Errors: [`LeaseError::UnusableEtag`].
async fn refuse_unusable_etag(
    store: &dyn ObjectStore,
    key: &str,
    etag: &str,
    body: &[u8],
) -> Result<(), LeaseError> {
    let Some(why) = crate::store::unusable_etag(etag) else {
        return Ok(());
    };
    if read_back(store, key).await.is_ok_and(|rb| rb.holds(body)) {
        let _ = store.delete(key, None).await;
    }
    tracing::error!(key = %key, "the service's ETag is {why}: lease not taken");
    Err(LeaseError::UnusableEtag {
        service: store.describe(),
        etag: sanitize(etag),
        why,
    })
}

/// The acquire decision for one observation (pure apart from the watch).
#[allow(clippy::too_many_arguments)]
fn decide(
    key: &str,
    observed: &Observed,
    owner: Whose,
    instance_id: &str,
    now: DateTime<Utc>,
    mono: Duration,
    config: &LeaseConfig,
    watch: &mut LeaseWatch,
) -> Result<Step, LeaseError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(r: &LeaseRecord) -> Observed {
        Observed::Present {
            etag: Some("e1".into()),
            last_modified: None,
            record: Ok(r.clone()),
        }
    }

    fn record(id: &str, renewed_ago_s: i64, now: DateTime<Utc>) -> LeaseRecord {
        let t = now - chrono::Duration::seconds(renewed_ago_s);
        LeaseRecord {
            instance_id: id.into(),
            acquired_at: t - chrono::Duration::seconds(60),
            renewed_at: t,
            ttl_s: 30,
            generation: Some(7),
            released_at: None,
        }
    }

    fn run(o: &Observed, owner: Whose, now: DateTime<Utc>) -> Result<Step, LeaseError> {
        decide(
            "db/LEASE",
            o,
            owner,
            "me",
            now,
            Duration::ZERO,
            &LeaseConfig::default(),
            &mut LeaseWatch::new(),
        )
    }

    /// The acquire's decision by whose the record is (own::whose): the id
    /// alone never adopts.
    #[test]
    fn a_record_naming_our_id_is_adopted_only_on_proof() {
        let now = Utc::now();
        let fresh = record("me", 2, now);
        // Another process under our id, fresh: refused, with the sentence.
        let err = run(&observed(&fresh), Whose::SameId, now)
            .err()
            .expect("refused");
        assert!(matches!(err, LeaseError::SameInstanceId { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("another process under the same instance id me"),
            "{msg}"
        );
        assert!(msg.contains("without --instance-id"), "{msg}");
        // The same record proved ours (a lost answer): adopted, generation and
        // acquired_at kept.
        let Ok(Step::Write(cond, acquired_at, g)) = run(&observed(&fresh), Whose::Ours, now) else {
            panic!("our own record is adopted");
        };
        assert_eq!(
            (cond, acquired_at, g),
            (
                PutCondition::IfMatch("e1".into()),
                fresh.acquired_at,
                Some(7)
            )
        );
        // A hand-over naming us: adopted the same way, conditional on its ETag.
        let mut handed = fresh.clone();
        handed.acquired_at = handed.renewed_at;
        let Ok(Step::Write(cond, acquired_at, g)) = run(&observed(&handed), Whose::HandedOver, now)
        else {
            panic!("a hand-over is adopted");
        };
        assert_eq!(
            (cond, acquired_at, g),
            (
                PutCondition::IfMatch("e1".into()),
                handed.acquired_at,
                Some(7)
            )
        );
        // Another process's record under our id, stale: taken over as anyone's
        // (a new tenure, a greater generation).
        let stale = record("me", 45, now);
        let Ok(Step::Write(cond, acquired_at, g)) = run(&observed(&stale), Whose::SameId, now)
        else {
            panic!("a stale record is taken over");
        };
        assert_eq!(cond, PutCondition::IfMatch("e1".into()));
        assert_eq!(acquired_at, now, "a new tenure");
        assert!(g.unwrap() > 7, "a greater generation: {g:?}");
        // Another holder's fresh record: held by other, as before.
        let other = record("you", 2, now);
        assert!(matches!(
            run(&observed(&other), Whose::Other, now),
            Err(LeaseError::HeldByOther { .. })
        ));
    }

    /// Issue 32 §3: a released record is taken at once, with `If-Match` on
    /// its ETag and a generation greater than the one it keeps — even by a
    /// taker whose clock is far behind (no clock term can go back), and even
    /// when it names our own id (a released record is nobody's).
    #[test]
    fn a_released_record_is_taken_at_once_with_a_greater_generation() {
        let now = Utc::now();
        let far_ahead = now + chrono::Duration::hours(1);
        let mut held = record("me", 0, far_ahead);
        held.generation = Some(u64::try_from(far_ahead.timestamp_micros()).unwrap());
        let released = held.released(far_ahead);
        assert!(released.is_released());
        assert_eq!(released.generation, held.generation);
        for owner in [Whose::Other, Whose::SameId] {
            let Ok(Step::Write(cond, acquired_at, g)) = run(&observed(&released), owner, now)
            else {
                panic!("a released record is taken");
            };
            assert_eq!(cond, PutCondition::IfMatch("e1".into()));
            assert_eq!(acquired_at, now, "a new tenure");
            assert_eq!(
                g,
                held.generation.map(|g| g + 1),
                "released + 1, not the clock"
            );
        }
    }
}
