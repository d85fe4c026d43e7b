//! The shared state of one simulated world: the store's objects and
//! variant, the fault draws, the history, and the checker that runs at every
//! write and every change of the LEASE (S1–S4, L1). The store handles
//! ([`super::store`]), the holders ([`super::world`]) and the operator
//! ([`super::operator`]) all act on it through a [`World`], locked for one
//! step at a time and never across an `.await`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::Rng;

use super::clock::TrueTime;
use crate::bucket::{fmt_generation, LeaseRecord};
use crate::clock::ServerOffset;
use crate::store::{normalize_etag, ObjectMeta, PutCondition, StoreError};

/// The prefix every holder contends for.
pub(crate) const PREFIX: &str = "sim";
/// Its LEASE key.
pub(crate) const KEY: &str = "sim/LEASE";

/// How the store treats preconditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Linearizable conditional writes (AWS S3 since 2024).
    Healthy,
    /// `If-None-Match` and `If-Match` ignored: every write lands.
    IgnoresPreconditions,
    /// The precondition is checked, then the write made later: concurrent
    /// writers may all pass.
    NotAtomic,
    /// Every precondition evaluated, but one request in this many lands
    /// unconditionally (as a service that drops conditions now and then:
    /// MinIO without read quorum, its issue 21603).
    IgnoresSometimes(u32),
}

impl Variant {
    /// A short name for the history.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Healthy => "healthy",
            Variant::IgnoresPreconditions => "ignores-preconditions",
            Variant::NotAtomic => "not-atomic",
            Variant::IgnoresSometimes(100) => "ignores-1-in-100",
            Variant::IgnoresSometimes(1000) => "ignores-1-in-1000",
            Variant::IgnoresSometimes(_) => "ignores-sometimes",
        }
    }

    /// The variants a run can be asked for by name (`--store NAME`).
    pub const NAMED: [Variant; 5] = [
        Variant::Healthy,
        Variant::IgnoresPreconditions,
        Variant::NotAtomic,
        Variant::IgnoresSometimes(100),
        Variant::IgnoresSometimes(1000),
    ];

    /// The variant named `name` ([`Variant::as_str`]), if any.
    pub fn by_name(name: &str) -> Option<Variant> {
        Self::NAMED.into_iter().find(|v| v.as_str() == name)
    }

    /// True for the variants no acquire may succeed on: every precondition
    /// ignored, or every conditional write a check and a later write.
    pub fn always_broken(self) -> bool {
        matches!(self, Variant::IgnoresPreconditions | Variant::NotAtomic)
    }
}

/// What happens to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Answered normally.
    None,
    /// No answer; not carried out.
    Timeout,
    /// No answer; carried out much later (the service queued it).
    LateApply,
    /// Carried out, the answer lost.
    Lost,
    /// Carried out, answered without an ETag.
    NoEtag,
    /// Carried out, answered with an empty ETag.
    EmptyEtag,
    /// 409 ConditionalRequestConflict, not carried out.
    Conflict,
    /// 500, not carried out.
    Internal,
    /// 503 SlowDown, not carried out.
    SlowDown,
}

/// How a PUT's precondition is applied when the store carries it out.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Apply<'a> {
    /// Evaluated with the write, in one step (unless the store ignores it).
    Now(&'a PutCondition),
    /// Evaluated when the request arrived (a not-atomic store): the write
    /// lands whatever holds now.
    CheckedBefore(&'a PutCondition),
}

/// The properties of issue 32 §1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Property {
    /// One writer.
    S1,
    /// Generation strictly increasing.
    S2,
    /// Loss learned, fence closed.
    S3,
    /// Refusal on broken stores.
    S4,
    /// Command stopped: once its holder learned it lost, or its fence passed
    /// its deadline, the command is stopped within the grace.
    S5,
    /// Liveness.
    L1,
    /// Best-effort: two holders write at once after a lost update for at
    /// most five sixths of a TTL (the loser learns at its next renewal, or
    /// its fence runs out, and its command stops within the grace).
    B1,
}

/// One violation found.
#[derive(Debug, Clone)]
pub struct Violation {
    /// Which property.
    pub property: Property,
    /// When, in true (simulated) milliseconds since the start.
    pub at_ms: u64,
    /// What happened.
    pub what: String,
}

/// What one seed's run found.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Lease lifetimes ended (acquire to release, loss or crash).
    pub lifetimes: u64,
    /// Writes started by holders.
    pub writes: u64,
    /// Violations found (each property once per tenure at most).
    pub violations: Vec<Violation>,
    /// The history, one event a line.
    pub history: String,
    /// The store variant drawn for the seed.
    pub variant: Option<Variant>,
    /// Writes the store carried out though their precondition did not hold.
    pub lies: u64,
    /// Best-effort: records replaced while their holder's command ran (a
    /// lost update lets two holders believe they hold).
    pub lost_updates: u64,
    /// Best-effort: for each holder that wrote after its record was
    /// replaced, how long (ms) from the replacement to its last such write.
    pub overlaps_ms: Vec<u64>,
    /// Every holder's estimate of the service's clock, scored against the
    /// truth each time the engine read it.
    pub offset: OffsetScore,
}

/// The engine's estimates of the service's clock offset against the truth:
/// one entry per reading (an offset check, a renewal's aim), in microseconds.
#[derive(Debug, Clone, Default)]
pub struct OffsetScore {
    /// |estimate − true offset| of each reading.
    pub error_us: Vec<u32>,
    /// The half-width the estimate claimed (± its bound) at each reading.
    pub bound_us: Vec<u32>,
    /// Whether the reader held the lease (the keep-alive's checks and
    /// aims) rather than contended for it or took it over.
    pub holding: Vec<bool>,
    /// Readings whose bound did not hold the true offset (none, if the
    /// estimator is right).
    pub outside: u64,
}

impl OffsetScore {
    /// Scores one reading `o` of a holder whose true offset (service minus
    /// its wall clock) is `truth_s` seconds; `holding`: it holds the lease.
    pub(crate) fn score(&mut self, o: &ServerOffset, truth_s: f64, holding: bool) {
        let err = (o.offset_s - truth_s).abs();
        let us = |s: f64| (s * 1e6).round().min(u32::MAX as f64) as u32;
        self.error_us.push(us(err));
        self.bound_us.push(us(o.error_s));
        self.holding.push(holding);
        // A microsecond for the rounding of the clocks' readings.
        if err > o.error_s + 1e-6 {
            self.outside += 1;
        }
    }

    /// Adds `other`'s readings to these.
    pub fn merge(&mut self, other: OffsetScore) {
        self.error_us.extend(other.error_us);
        self.bound_us.extend(other.bound_us);
        self.holding.extend(other.holding);
        self.outside += other.outside;
    }
}

/// A tenure: one holder's time with the lease, named by the record's
/// instance id and `acquired_at` (a renewal keeps both; an adoption too).
pub(super) type Tenure = (String, DateTime<Utc>);

pub(super) fn tenure_of(r: &LeaseRecord) -> Tenure {
    (r.instance_id.clone(), r.acquired_at)
}

/// What the checker knows of one tenure.
#[derive(Debug, Clone)]
pub(super) struct TenureInfo {
    /// The holder (process) whose write created it.
    pub(super) holder: usize,
    /// When it was created (true ms).
    pub(super) created_ms: u64,
    /// When another tenure replaced it while it was current (true ms).
    pub(super) replaced_ms: Option<u64>,
    /// When the creating write was sent, if its answer was lost (true ms).
    pub(super) answer_lost_ms: Option<u64>,
    /// Handed to a holder's command (its acquire returned it).
    pub(super) handed_out: bool,
    /// When a forced takeover or a write the store should have refused
    /// replaced it while it was live (true ms): its holder may go on writing
    /// until its fence has certainly closed, while no tenure created since
    /// has written (S1).
    pub(super) overrun_from_ms: Option<u64>,
    /// When its holder last wrote under it (true ms).
    pub(super) last_write_ms: Option<u64>,
    /// Its place in the order tenures were created on the key.
    pub(super) seq: u64,
    /// The generation handed out with it.
    pub(super) generation: Option<u64>,
    /// The generation its record was last written with.
    pub(super) written_generation: Option<u64>,
    /// When a write the store should have refused replaced it (true ms): its
    /// holder no longer excludes anyone, and must not start (S4).
    pub(super) lied_over_ms: Option<u64>,
}

/// The shared state of one world: store, faults, checker, history.
pub(crate) struct Shared {
    /// The store's name (one per seed: the race check runs once per store).
    pub name: String,
    /// The store's objects.
    pub objects: BTreeMap<String, Obj>,
    /// The store variant.
    pub variant: Variant,
    pub(super) truth: TrueTime,
    pub(super) rng: StdRng,
    pub(super) next_etag: u64,
    /// Probability that a request meets a fault.
    pub(super) fault_rate: f64,
    /// Per holder: requests fail (no answer) until this true time (ms).
    pub(super) partitioned_until: Vec<u64>,
    /// Per holder: its process is stopped (SIGSTOP, a VM paused, a long GC)
    /// until this true time (ms): it sends, receives and writes nothing.
    pub(super) suspended_until: Vec<u64>,
    /// Per holder: the last true time (ms) a partition of it ended.
    pub(super) partition_ended: Vec<u64>,
    /// Per holder: the last true time (ms) its process forgot what it had
    /// sent (a crash, a restart, a new acquire with a new watch).
    pub(super) forgot_at: Vec<u64>,
    pub(super) ttl_ms: u64,
    /// The tenure stored now, if any.
    pub(super) current: Option<Tenure>,
    /// The tenure created last.
    pub(super) latest: Option<Tenure>,
    pub(super) tenures: BTreeMap<Tenure, TenureInfo>,
    /// Tenures created so far (the next one's creation order).
    pub(super) created: u64,
    pub(super) outcome: Outcome,
    /// The operator's slot, if the world has an operator.
    pub(super) operator: Option<usize>,
    /// The live tenure a forced takeover is replacing, while the executor runs.
    pub(super) forcing: Option<Tenure>,
    /// The bodies the operator sent while forcing a takeover (one carried
    /// out after the executor gave up on it is still a forced one).
    pub(super) forced_bodies: std::collections::BTreeSet<Vec<u8>>,
    /// (property, tenure) pairs already reported.
    pub(super) reported: std::collections::BTreeSet<(Property, Tenure)>,
    /// The holders run with best-effort exclusion: two holders writing at
    /// once is measured (overlaps, B1), not an S1 violation.
    pub best_effort: bool,
    /// Best-effort: per tenure that wrote after it was replaced, from when
    /// (true ms) to its last such write.
    pub(super) overlap: BTreeMap<Tenure, (u64, u64)>,
    /// Per holder: the tenure its command runs under, while it runs (S5).
    pub(super) holding: Vec<Option<Tenure>>,
    /// Per holder: when (its boot-time clock) it sent the last write of the
    /// LEASE it was answered had landed.
    pub(super) lease_written_mono: Vec<Option<Duration>>,
    /// Per holder: when (its boot-time clock) a read of the LEASE first
    /// answered another record while its command runs.
    pub(super) learned_lost: Vec<Option<Duration>>,
}

/// A world handle.
#[derive(Clone)]
pub(crate) struct World(pub(super) Arc<Mutex<Shared>>);

impl World {
    /// Locks the shared state (never held across an `.await`).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Shared {
    /// The process whose write created the tenure stored now, if any.
    pub(super) fn current_holder(&self) -> Option<usize> {
        let t = self.current.as_ref()?;
        self.tenures.get(t).map(|i| i.holder)
    }

    /// How long `holder`'s process stays stopped from now (zero: running).
    pub(super) fn stopped_for(&self, holder: usize) -> Duration {
        Duration::from_millis(self.suspended_until[holder].saturating_sub(self.now_ms()))
    }

    /// True time since the start, milliseconds.
    pub(crate) fn now_ms(&self) -> u64 {
        self.truth.now().as_millis() as u64
    }

    /// Writes one line of history, stamped with true time.
    /// (Without the run number in the store's name: the same seed, the
    /// same history.)
    pub(super) fn log(&mut self, line: std::fmt::Arguments<'_>) {
        let t = self.now_ms();
        let line = line.to_string();
        let line = match (line.find("/run-"), line.find('#')) {
            (Some(a), Some(b)) if a < b => format!("{}{}", &line[..a], &line[b..]),
            _ => line,
        };
        let _ = writeln!(
            self.outcome.history,
            "{:>7}.{:03} {line}",
            t / 1000,
            t % 1000
        );
    }

    pub(super) fn violation(&mut self, property: Property, tenure: &Tenure, what: String) {
        if !self.reported.insert((property, tenure.clone())) {
            return;
        }
        let at_ms = self.now_ms();
        self.log(format_args!("VIOLATION {property:?}: {what}"));
        self.outcome.violations.push(Violation {
            property,
            at_ms,
            what,
        });
    }

    /// The delay and fault of one request of `holder`.
    pub(crate) fn draw(&mut self, holder: usize, write: bool) -> (Duration, Fault) {
        let delay = if self.rng.random_bool(0.05) {
            Duration::from_millis(self.rng.random_range(100..1500))
        } else {
            Duration::from_millis(self.rng.random_range(1..30))
        };
        if self.now_ms() < self.partitioned_until[holder] {
            // Cut off: writes may still land, their answers never come.
            let f = match (write, self.rng.random_range(0..3)) {
                (true, 0) => Fault::Lost,
                (true, 1) => Fault::LateApply,
                _ => Fault::Timeout,
            };
            return (delay, f);
        }
        if !self.rng.random_bool(self.fault_rate) {
            return (delay, Fault::None);
        }
        let faults: &[Fault] = if write {
            &[
                Fault::Timeout,
                Fault::LateApply,
                Fault::Lost,
                Fault::NoEtag,
                Fault::EmptyEtag,
                Fault::Conflict,
                Fault::Internal,
                Fault::SlowDown,
            ]
        } else {
            &[Fault::Timeout, Fault::Internal, Fault::SlowDown]
        };
        (delay, faults[self.rng.random_range(0..faults.len())])
    }

    /// How long a not-atomic store takes between its check and its write
    /// (1 to 40 ms).
    pub(crate) fn not_atomic_window(&mut self) -> Duration {
        Duration::from_millis(self.rng.random_range(1..=40))
    }

    /// How long a queued write waits before the store carries it out.
    pub(crate) fn late_delay(&mut self) -> Duration {
        Duration::from_millis(self.rng.random_range(self.ttl_ms / 4..self.ttl_ms * 3 / 2))
    }

    /// Whether `cond` holds on `key` now, as S3 judges it (404 for
    /// `If-Match` on an absent key), whatever the store's variant.
    fn judged(&self, key: &str, cond: &PutCondition) -> Result<(), StoreError> {
        match (cond, self.objects.get(key)) {
            (PutCondition::None, _) => Ok(()),
            (PutCondition::IfNoneMatch, None) => Ok(()),
            (PutCondition::IfNoneMatch, Some(_)) => Err(StoreError::PreconditionFailed),
            (PutCondition::IfMatch(_), None) => Err(StoreError::NotFound(key.to_owned())),
            (PutCondition::IfMatch(e), Some(o)) if normalize_etag(e) == o.etag => Ok(()),
            (PutCondition::IfMatch(_), Some(_)) => Err(StoreError::PreconditionFailed),
        }
    }

    /// Whether `cond` holds on `key` now as this store answers a request's
    /// check (404 for `If-Match` on an absent key): a store that ignores
    /// preconditions says it always does.
    pub(crate) fn precondition_holds(
        &self,
        key: &str,
        cond: &PutCondition,
    ) -> Result<(), StoreError> {
        if self.variant == Variant::IgnoresPreconditions {
            return Ok(());
        }
        self.judged(key, cond)
    }

    /// Whether a write whose precondition is `cond` is let through now: `Ok(false)`
    /// when the precondition holds, `Ok(true)` when it does not and the store
    /// ignores it (always, or on this request's draw: a write that should
    /// have been refused), the refusal otherwise.
    fn lets_through(&mut self, key: &str, cond: &PutCondition) -> Result<bool, StoreError> {
        let Err(refusal) = self.judged(key, cond) else {
            return Ok(false);
        };
        match self.variant {
            Variant::IgnoresPreconditions => Ok(true),
            Variant::IgnoresSometimes(n) if self.rng.random_ratio(1, n.max(1)) => Ok(true),
            _ => Err(refusal),
        }
    }

    /// Counts and logs a write the store carried out though its precondition
    /// did not hold (`what`: the request).
    fn lied(&mut self, holder: usize, key: &str, what: &str) {
        self.outcome.lies += 1;
        self.log(format_args!(
            "store: {what} on {key} by h{holder} carried out though its precondition did not hold ({})",
            self.variant.as_str()
        ));
    }

    /// Carries out a PUT of `holder` (its precondition as `how` says), and checks it.
    pub(crate) fn apply_put(
        &mut self,
        holder: usize,
        key: &str,
        body: &[u8],
        how: Apply<'_>,
        answer_lost: Option<u64>,
    ) -> Result<String, StoreError> {
        let lie = match how {
            Apply::Now(cond) => self.lets_through(key, cond)?,
            Apply::CheckedBefore(cond) => self.judged(key, cond).is_err(),
        };
        if lie {
            self.lied(holder, key, "a conditional PUT");
        }
        self.next_etag += 1;
        let etag = format!("e{:x}", self.next_etag);
        let last_modified = chrono::DateTime::from_timestamp(self.truth.wall().timestamp(), 0)
            .unwrap_or(self.truth.epoch);
        self.objects.insert(
            key.to_owned(),
            Obj {
                body: body.to_vec(),
                etag: etag.clone(),
                last_modified,
            },
        );
        if key == KEY {
            self.lease_written(holder, body, answer_lost, lie);
        }
        Ok(etag)
    }

    /// Carries out a DELETE of `holder` (atomically).
    pub(crate) fn apply_delete(
        &mut self,
        holder: usize,
        key: &str,
        if_match: Option<&str>,
    ) -> Result<(), StoreError> {
        let lie = match if_match {
            Some(e) if self.objects.contains_key(key) => {
                self.lets_through(key, &PutCondition::IfMatch(e.to_owned()))?
            }
            _ => false,
        };
        if lie {
            self.lied(holder, key, "a conditional DELETE");
        }
        if self.objects.remove(key).is_some() && key == KEY {
            let gone = self.current.take();
            if let (true, Some(t)) = (lie, &gone) {
                let now = self.now_ms();
                if let Some(i) = self.tenures.get_mut(t) {
                    i.lied_over_ms.get_or_insert(now);
                }
            }
            self.log(format_args!(
                "store: LEASE deleted by h{holder} (was {})",
                gone.map(|t| t.0).unwrap_or_default()
            ));
        }
        Ok(())
    }

    /// The checker's view of a write to the LEASE: a new tenure (S2, and the
    /// replaced one's time for S1/S3), or a renewal of the current one.
    /// A `lie` (a write the store should have refused) over another tenure
    /// marks that one as lied over (S4).
    pub(super) fn lease_written(
        &mut self,
        holder: usize,
        body: &[u8],
        answer_lost: Option<u64>,
        lie: bool,
    ) {
        let Ok(r) = LeaseRecord::parse(body, body.len() as u64) else {
            return;
        };
        let t = tenure_of(&r);
        // A slow acquire writes its record once more with a fresh generation
        // before it hands it out: that write is its acquisition's moment (S2).
        if let Some(i) = self.tenures.get_mut(&t) {
            if i.written_generation != r.generation {
                i.written_generation = r.generation;
                self.created += 1;
                i.seq = self.created;
            }
        }
        if self.current.as_ref() == Some(&t) {
            return;
        }
        let now = self.now_ms();
        let prev = self.current.take();
        // A forced takeover's write, landing while its executor runs or
        // later (carried out after the executor gave up on it).
        let forced = self.operator == Some(holder)
            && ((self.forcing.is_some() && self.forcing == prev)
                || self.forced_bodies.contains(body));
        if self.best_effort && prev.is_some() && self.holding.contains(&prev) {
            self.outcome.lost_updates += 1;
        }
        if let Some(prev) = &prev {
            if let Some(info) = self.tenures.get_mut(prev) {
                info.replaced_ms.get_or_insert(now);
                if lie {
                    info.lied_over_ms.get_or_insert(now);
                }
                // Its command still running: on a store that honours
                // preconditions only a forced takeover replaces such a
                // record; otherwise a write the store should have refused
                // led here (perhaps through a record it made look stale).
                let live = self
                    .holding
                    .get(info.holder)
                    .is_some_and(|h| h.as_ref() == Some(prev));
                if lie || forced || live {
                    info.overrun_from_ms.get_or_insert(now);
                }
            }
        }
        let known = self.tenures.contains_key(&t);
        self.log(format_args!(
            "store: LEASE now {} acquired_at {} generation {} (written by h{holder}{}{})",
            t.0,
            t.1.format("%H:%M:%S%.6f"),
            fmt_generation(r.generation),
            if known {
                ", an earlier tenure again"
            } else {
                ""
            },
            if answer_lost.is_some() {
                ", answer lost"
            } else {
                ""
            }
        ));
        self.current = Some(t.clone());
        if known {
            // A tenure coming back (a late write of its holder over a newer
            // one, which the store should have refused): the newer one's
            // holder is no longer the latest (it may go on until it learns,
            // as long as no other holder writes meanwhile). It is held
            // again: no longer replaced (S3).
            if let Some(i) = self.tenures.get_mut(&t) {
                i.replaced_ms = None;
                i.overrun_from_ms = None;
            }
            self.latest = Some(t);
            return;
        }
        self.latest = Some(t.clone());
        self.created += 1;
        self.tenures.insert(
            t.clone(),
            TenureInfo {
                holder,
                created_ms: now,
                replaced_ms: None,
                answer_lost_ms: answer_lost,
                handed_out: false,
                overrun_from_ms: None,
                last_write_ms: None,
                seq: self.created,
                generation: None,
                written_generation: r.generation,
                lied_over_ms: None,
            },
        );
    }

    /// S2: the generations handed to commands grow in the order their
    /// tenures were created on the key (the write that created each is the
    /// acquisition's moment): a tenure handed out carries a generation greater
    /// than every one handed out of a tenure created before it, and smaller
    /// than every one of a tenure created after it. (An acquire returns after
    /// its write; a forced takeover may land between the two, and its
    /// greater generation is then handed out first.)
    ///
    /// S4 too: a tenure a write the store should have refused replaced
    /// before it was handed out excludes nobody; its holder must have caught
    /// that (its acquire fails) before its command starts.
    pub(super) fn handed_out(&mut self, t: &Tenure, generation: Option<u64>) {
        let (seq, lied_over) = match self.tenures.get_mut(t) {
            Some(i) => {
                i.handed_out = true;
                i.generation = generation;
                (i.seq, i.lied_over_ms)
            }
            None => (u64::MAX, None),
        };
        if let Some(at) = lied_over {
            let now = self.now_ms();
            let what = format!(
                "{} was handed out {} ms after a write the store ({}) should have refused replaced it: a lost exclusion not caught before the command starts",
                t.0,
                now.saturating_sub(at),
                self.variant.as_str()
            );
            self.violation(Property::S4, t, what);
        }
        let Some(g) = generation else {
            return;
        };
        let wrong = self.tenures.iter().find_map(|(u, i)| {
            let gu = i.generation.filter(|_| i.handed_out && u != t)?;
            let bad = (i.seq < seq && gu >= g) || (i.seq > seq && gu <= g);
            bad.then(|| (u.clone(), gu, i.seq < seq))
        });
        if let Some((u, gu, before)) = wrong {
            let what = if before {
                format!(
                    "generation {g} of {} is not greater than {gu} of {}, created before it and handed out ({} µs back)",
                    t.0,
                    u.0,
                    gu.saturating_sub(g)
                )
            } else {
                format!(
                    "generation {g} of {} is not smaller than {gu} of {}, created after it and handed out",
                    t.0, u.0
                )
            };
            self.violation(Property::S2, t, what);
        }
    }

    /// A holder starts a write under `tenure` (S1): only the latest tenure
    /// writes — but for the holder of a live lease replaced by a forced
    /// takeover or by a write the store should have refused, which may go on
    /// until its fence has certainly closed ([`Shared::overrun_ms`] after it
    /// was replaced, which came after its last renewal) while no other holder
    /// has written since.
    pub(super) fn write(&mut self, holder: usize, tenure: &Tenure) {
        self.outcome.writes += 1;
        let now = self.now_ms();
        let overrun_from = self.tenures.get_mut(tenure).and_then(|i| {
            i.last_write_ms = Some(now);
            i.overrun_from_ms
        });
        if self.latest.as_ref() == Some(tenure) {
            return;
        }
        let in_grace = overrun_from.is_some_and(|from| {
            now < from + self.overrun_ms()
                && !self
                    .tenures
                    .iter()
                    .any(|(u, i)| u != tenure && i.last_write_ms.is_some_and(|w| w >= from))
        });
        if in_grace {
            return;
        }
        if self.best_effort {
            self.overlapping(tenure, now);
            return;
        }
        let latest = self.latest.as_ref().and_then(|t| self.tenures.get(t));
        let other = self.latest.clone().map(|t| t.0).unwrap_or_default();
        let since = latest
            .map(|i| now.saturating_sub(i.created_ms))
            .unwrap_or(0);
        self.violation(
            Property::S1,
            tenure,
            format!(
                "h{holder} ({}) writes {since} ms after {other} took the lease",
                tenure.0
            ),
        );
    }

    /// Best-effort: `tenure`'s holder writes at `now` after its record was
    /// replaced — two writers. The overlap is measured from the replacement;
    /// longer than five sixths of a TTL is a B1 violation.
    fn overlapping(&mut self, tenure: &Tenure, now: u64) {
        let from = self
            .tenures
            .get(tenure)
            .and_then(|i| i.replaced_ms)
            .unwrap_or(now);
        let span = self.overlap.entry(tenure.clone()).or_insert((from, now));
        span.1 = span.1.max(now);
        if now > from + self.ttl_ms * 5 / 6 {
            let what = format!(
                "{} still writes {} ms after its record was replaced (best-effort; bound: five sixths of the TTL)",
                tenure.0,
                now - from
            );
            self.violation(Property::B1, tenure, what);
        }
    }

    /// How long a holder whose live lease was replaced unseen (by force, or
    /// by a write the store should have refused) may go on writing: until
    /// its command has certainly stopped — its fence closes two thirds of a
    /// TTL after its last renewal (which came before the replacement), and
    /// `bucket hold`'s grace (a sixth of a TTL at most) follows.
    pub(super) fn overrun_ms(&self) -> u64 {
        self.ttl_ms * 5 / 6
    }
}

/// One stored object.
#[derive(Debug, Clone)]
pub(crate) struct Obj {
    /// The body.
    pub body: Vec<u8>,
    /// The ETag (unquoted).
    pub etag: String,
    /// When it was written, by the store's clock (whole seconds).
    pub last_modified: chrono::DateTime<chrono::Utc>,
}

impl Obj {
    pub(super) fn meta(&self, key: &str) -> ObjectMeta {
        ObjectMeta {
            key: key.to_owned(),
            etag: Some(self.etag.clone()),
            last_modified: Some(self.last_modified),
            size: self.body.len() as u64,
        }
    }
}
