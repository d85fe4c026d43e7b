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

use serde::Serialize;

use super::error::LeaseError;
use super::fence::{FenceDeadline, FenceStatus};
use super::judge::{judge, LeaseState, Observed};
use super::own::{holder_stamps, read_back, stamp, whose, ReadBack, Sent, Whose};
use super::probe;
use super::record::{lease_key, LeaseRecord, RecordFormat};
use super::watch::LeaseWatch;
use crate::clock::{Clock, ServerOffset, SharedClock};
use crate::store::{DeleteSupport, EtagForm, ObjectRead, ObjectStore, PutCondition, StoreError};
use crate::text::{format_secs, sanitize};

#[cfg(feature = "sim")]
use crate::bucket::defect::{self, Defect};

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
    /// Not released: the lease replaced a live one whose holder may still
    /// write for this long (its fence, [`FenceDeadline::not_before_mono`]).
    /// A released record would let the next holder in at once; our record,
    /// renewed no more, keeps everyone out until its TTL has passed, which
    /// outlasts that fence.
    LeftToExpire {
        /// Milliseconds until the replaced holder's fence has closed.
        fence_closes_in_ms: u64,
        /// The TTL of our record, seconds.
        ttl_s: u64,
    },
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
            Released::LeftToExpire {
                fence_closes_in_ms,
                ttl_s,
            } => write!(
                f,
                "not marked released: the replaced holder's fence closes in {}, and a released record would let the next holder in at once; our record, renewed no more, expires {ttl_s} s after its last renewal",
                format_secs(*fence_closes_in_ms as f64 / 1000.0)
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
    /// The microsecond phase of this holder's stamps ([`stamp`]).
    phase: u16,
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

impl BucketLease {
    /// True when `rb` holds a body this process wrote (the last confirmed
    /// one, or one whose answer was lost): [`whose`] is [`Whose::Ours`]. A
    /// hand-over naming our id is not ours to a running holder: its record
    /// was replaced.
    pub(super) fn is_ours(&self, rb: &ReadBack) -> bool {
        whose(
            &rb.observed,
            rb.body.as_deref(),
            &self.record.instance_id,
            |b| b == self.body.as_slice() || self.unanswered.proves(b),
        ) == Whose::Ours
    }

    /// The ETag the stored record has now, when that record is provably ours
    /// ([`BucketLease::is_ours`]: its body is one this process wrote, the last
    /// confirmed or one whose answer it never saw, such as a renewal its
    /// keep-alive gave up in flight when it was stopped); `None` when it is
    /// someone else's, absent, or has no ETag. A write conditional on the
    /// held ETag that was refused reads this before trying once more, as a
    /// release does.
    ///
    /// Errors: the read's [`StoreError`].
    pub(crate) async fn stored_etag_if_ours(&self) -> Result<Option<String>, StoreError> {
        let rb = read_back(self.store.as_ref(), &self.key).await?;
        Ok(if self.is_ours(&rb) {
            rb.etag().map(str::to_owned)
        } else {
            None
        })
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
            phase: super::own::new_phase(),
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

    /// The boot-time reading a forced takeover's wait runs until, while it
    /// lasts (see [`BucketLease::end_wait`]).
    pub(crate) fn waits_until(&self) -> Option<Duration> {
        self.not_before_mono
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
    pub(crate) fn fence_status(&self) -> FenceStatus {
        #[cfg(feature = "sim")]
        if defect::on(Defect::FenceNeverCloses) {
            return FenceStatus::Open(Duration::from_secs(1));
        }
        if self.lost {
            return FenceStatus::Closed(super::fence::FenceClosed::Lost);
        }
        self.deadline().status(self.clock.as_ref())
    }

    /// True while the fence's deadline has not passed, whether or not it has
    /// opened yet (a slow acquire's renewals are kept while it waits).
    pub(super) fn may_write_ignoring_not_before(&self) -> bool {
        !matches!(self.fence_status(), FenceStatus::Closed(_))
    }

    /// True while this holder may start a write (see [`BucketLease::fence_status`]).
    pub fn may_write(&self) -> bool {
        self.fence_status().is_open()
    }

    /// The service's latest clock estimate (see [`ObjectRead::server_offset`]).
    pub fn server_offset(&self) -> Option<ServerOffset> {
        self.store.server_offset()
    }

    /// The clock used by this lease.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
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
    pub(crate) fn is_lost(&self) -> bool {
        self.lost
    }

    /// How long to wait between renewals: a third of the TTL.
    pub(crate) fn renew_interval(&self) -> Duration {
        self.config.ttl() / 3
    }
}

/// The scratch key next to lease `key` for a check of instance `id`, this
/// call's own: `{prefix}/.leasectl-probe/{id}.{process}.{n}` — `process` is
/// the pid and a number drawn once at random (pids repeat across hosts and
/// containers), `n` counts this process's calls. Two processes under one
/// id checking at once must not share a key (CI: two successors of one
/// hand-over raced each other's creates on one scratch key, and one found
/// "2 of 4 concurrent requests won" on an atomic store). The simulator's
/// processes share one pid: there the calls' count keeps them apart, and
/// no random number is drawn (a seed replays byte for byte).
pub(crate) fn scratch_key(key: &str, id: &str) -> String {
    static DRAWN: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let drawn = *DRAWN.get_or_init(|| {
        if cfg!(feature = "sim") {
            0
        } else {
            rand::random()
        }
    });
    let n = next_scratch();
    let dir = key.strip_suffix("LEASE").unwrap_or(key);
    let pid = std::process::id();
    format!("{dir}.leasectl-probe/{id}.{pid}-{drawn:08x}.{n}")
}

/// The number of this process's next scratch key ([`scratch_key`]); the
/// simulator's, on its own thread's count.
fn next_scratch() -> u64 {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    #[cfg(feature = "sim")]
    if let Some(n) = super::defect::next_scratch() {
        return n;
    }
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
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

mod acquire;
mod checked;
mod confirm;
pub(crate) use confirm::landed_late;
mod release;
mod renew;
#[cfg(test)]
pub(crate) mod tests;
