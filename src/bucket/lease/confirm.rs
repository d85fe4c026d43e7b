//! Around an acquire's write, for conditional exclusion: the refusal of a
//! store found broken — before the write (one this process has caught, or
//! the race check's first round: nothing written) or after it (the probe of
//! the write preconditions on the record just written, or the race check's
//! later rounds, which run beside the write: `super::checked`), ours then let
//! go and what that changed said — and the confirmation.
//!
//! **The confirmation.** A service that carries out a conditional write it
//! should have refused — every time, now and then (MinIO without read
//! quorum), or because its check and its write are two steps — lets two
//! contenders both be answered 200: the later write replaces the earlier one,
//! and the earlier writer would run its command on a record that is gone. No
//! check made before can rule that out on a service that does it one request
//! in a thousand. So every acquire reads its record back before it hands the
//! lease out, once every write that raced it has landed, and fails (the lease
//! lost, nothing touched) when the record is not its own any more.
//!
//! When has every racing write landed? A contender decided to write from a
//! read made before our write landed, and its write landed before its answer
//! came back. If its read-to-answer span was at most `T`, its write landed
//! before our answer plus `T`, and a read sent after that sees it. So the
//! confirmation is sent `T` after our answer, where `T` is six times the 90th
//! percentile of the round trips the race check measured on this store, at
//! least 100 ms ([`crate::bucket::race::confirm_after`]; the race check's
//! final measurements: where its later rounds run beside the write, the
//! confirmation is sent only once they have ended), and a contender
//! counts on being seen only when its own span was at most 100 ms (every
//! contender waits that long) or half of its own `T`: two contenders whose
//! round trips to the store are within a factor of two of each other agree
//! (every host of the simulator; a host on a far slower path than another,
//! with spans over 100 ms, is the limit).
//!
//! **The slow way.** A contender that cannot count on being seen — its span
//! was longer; or it takes up a write of its own whose answer it never saw
//! and which the store carried out long after it was sent (its
//! `Last-Modified` says so); or it takes over a record carried out that late
//! — does not hand the lease out before any holder its write may have
//! replaced unseen has certainly stopped: it keeps the lease (renewed) for
//! [`SLOW_WAIT_TTL_FRACTION`] of the TTL after its answer (the fence's two
//! thirds and `bucket hold`'s grace, the bound a forced takeover waits out),
//! then writes it once more with a fresh generation, and only then returns.
//! A write that does not succeed in the end is left to expire rather than
//! removed, where it may hide such a holder: the key stays taken until that
//! holder has stopped.

use std::time::Duration;

use super::*;
use crate::bucket::race::{self, Broken};

/// The share of the TTL a slow acquire's fence waits after its answer: 5/6.
pub(super) const SLOW_WAIT_TTL_FRACTION: (u32, u32) = (5, 6);

/// When an acquire's write was decided and answered (boot-time clock).
#[derive(Debug, Clone, Copy)]
pub(super) struct WriteTiming {
    /// Just before the read it decided on was sent.
    pub(super) read_sent: Duration,
    /// Just after the write's answer came.
    pub(super) answered: Duration,
    /// The write took up a record of ours whose answer this process never
    /// saw, and which the store carried out long after it was sent
    /// ([`landed_late`]): over what, nobody knows.
    pub(super) adopted_unanswered: bool,
    /// The write took up a record of ours written earlier by this contender
    /// whose own write was answered too late to count on being seen, and
    /// which was not handed out: it may still hide a holder.
    pub(super) adopted_hiding: bool,
    /// The record the write replaced may itself have replaced a live
    /// holder's unseen ([`landed_late`]).
    pub(super) replaced_suspect: bool,
}

impl WriteTiming {
    /// Why a holder this write may have replaced could still be writing
    /// unseen (`None`: none could): a contender that raced it may have
    /// confirmed before it landed — its read-to-answer span was longer than
    /// [`race::seen_within`] `after` (the confirmation's wait), or the record
    /// taken up was carried out late — or the record it replaced was.
    pub(super) fn slow(&self, after: Duration) -> Option<String> {
        let span = self.answered.saturating_sub(self.read_sent);
        if self.adopted_hiding {
            Some("it took up a write of ours that had been answered too late to count on being seen (a holder it may have replaced unseen could still be writing)".into())
        } else if self.adopted_unanswered {
            Some("it took up a write of ours whose answer was lost and which was carried out long after it was sent".into())
        } else if self.replaced_suspect {
            Some("the record it replaced was carried out long after it was stamped (a write given up on, done later, may have replaced a holder unseen)".into())
        } else if span > race::seen_within(after) {
            Some(format!(
                "the write took {} from its read to its answer, more than {}",
                format_secs(span.as_secs_f64()),
                format_secs(race::seen_within(after).as_secs_f64())
            ))
        } else {
            None
        }
    }
}

/// Whether the store carried the record `observed` out long after it was
/// stamped: its `Last-Modified` more than a twelfth of its TTL (the clock
/// offset allowed) and a second (the header's resolution) after its latest
/// stamp (`released_at`, else `renewed_at`) — a write given up on and
/// carried out later, which may have replaced a live holder's record on a
/// service that lets writes through against their precondition, so that
/// holder could still be writing (it learns at its next renewal). An
/// acquire that takes such a record over, or takes up such a write of its
/// own, goes the slow way. (A release sent long after its fence ran out is
/// not sent at all: [`crate::bucket::KeepAlive::stop_and_release`].)
pub(crate) fn landed_late(observed: &Observed) -> bool {
    let Observed::Present {
        last_modified: Some(lm),
        record: Ok(r),
        ..
    } = observed
    else {
        return false;
    };
    let ttl_us = (r.ttl_s as i64).saturating_mul(1_000_000);
    let stamped = r.released_at.unwrap_or(r.renewed_at);
    (*lm - stamped).num_microseconds().unwrap_or(i64::MAX) > ttl_us / 12 + 1_000_000
}

/// The refusal for a store found `broken`; `changed` says what the attempt
/// changed on it.
pub(super) fn refusal(store: &dyn ObjectStore, broken: Broken, changed: String) -> LeaseError {
    let service = store.describe();
    match broken {
        Broken::Ignores(header) => LeaseError::PreconditionsIgnored {
            header,
            service,
            changed,
        },
        Broken::NotAtomic(finding) => LeaseError::NotAtomic {
            finding,
            service,
            changed,
        },
    }
}

/// Whether the confirmation's wait (`wait`) fits in the fence of a `ttl_s`
/// TTL: the write, the wait and the read back (each round trip allowed a
/// quarter of the wait, one and a half times the 90th percentile it was sized
/// by) must take less than two thirds of the TTL, or the fence would run out
/// before the lease could be handed out.
pub(super) fn fits_in_fence(ttl_s: u64, wait: Duration) -> bool {
    // The write, the wait and the read back: 3/2 of the wait.
    wait * 3 / 2 < Duration::from_secs(ttl_s) * 2 / 3
}

/// The refusal of a `ttl_s` TTL whose fence the confirmation's `wait`
/// (sized by a 90th percentile of `q90_us` microseconds) does not fit in
/// ([`fits_in_fence`]), with the shortest TTL that fits; `changed` says what
/// the attempt changed.
pub(super) fn ttl_too_short(
    store: &dyn ObjectStore,
    ttl_s: u64,
    wait: Duration,
    q90_us: Option<u64>,
    changed: String,
) -> LeaseError {
    let needed = wait * 3 / 2;
    let min_ttl_s = (needed.as_secs_f64() * 1.5).floor() as u64 + 1;
    tracing::error!(service = %store.describe(), ttl_s, min_ttl_s, "the confirmation's wait does not fit in the fence: {changed}");
    LeaseError::TtlTooShort {
        service: store.describe(),
        ttl_s,
        wait_s: wait.as_secs_f64(),
        round_trip_s: q90_us.unwrap_or_default() as f64 / 1e6,
        min_ttl_s,
        changed,
    }
}

impl BucketLease {
    /// After the acquire's write (conditional exclusion): the write
    /// preconditions probed on the record just written, conditional DELETE
    /// learned once per store. `replaced`: the holder whose record the write
    /// replaced (not one we adopt), and whether it was written over a record
    /// at all; `slow`: the write may hide a holder ([`WriteTiming::slow`]).
    ///
    /// Errors: [`LeaseError::PreconditionsIgnored`] (ours removed, or left to
    /// expire where it may hide a holder), [`LeaseError::Lost`] (the fence ran
    /// out first: nothing touched), [`LeaseError::Store`] (ours let go).
    pub(super) async fn probe_written(
        mut self,
        body: &[u8],
        replaced: (Option<String>, bool),
        slow: bool,
    ) -> Result<Self, LeaseError> {
        self.still_in_time()?;
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
        match report {
            Ok(r) => match r.ignored_header() {
                Some(header) => Err(self
                    .refuse_broken(Broken::Ignores(header), replaced, slow)
                    .await),
                None => Ok(self),
            },
            Err(e) => Err(self.let_go(slow, e.into()).await),
        }
    }

    /// An acquire that does not hand its lease out lets go of it: released,
    /// unless it may hide a holder (`slow`: its write may have replaced a
    /// live holder's record unseen, who learns of it only at its next
    /// renewal) or its fence has run out (the record may have been taken
    /// over since): then it is left to expire, so that nobody takes the key
    /// before such a holder has stopped. Returns `err`.
    pub(super) async fn let_go(self, slow: bool, err: LeaseError) -> LeaseError {
        self.let_go_saying(slow).await;
        err
    }

    /// [`BucketLease::let_go`], saying what it changed.
    pub(super) async fn let_go_saying(mut self, slow: bool) -> String {
        if slow || !self.may_write_ignoring_not_before() {
            tracing::warn!(key = %self.key, "the record written is left to expire (one TTL): a holder it may have replaced unseen could still be writing");
            self.mark_lost_unread("the record written was left to expire");
            format!("ours was left at {} to expire after one TTL", self.key)
        } else {
            let key = self.key.clone();
            match self.release().await {
                Ok(r) => format!("ours was written at {key}; letting it go: {r}"),
                Err(e) => format!("ours was written at {key} and could not be released ({e}): it expires after one TTL"),
            }
        }
    }

    /// The store was found `broken` after the record was written (the probe
    /// of its preconditions on the record, or the race check's later rounds,
    /// which run beside the write): remembered for the store, and the refusal
    /// returned. Ours is let go (fail closed) unless it may hide a holder
    /// (see [`BucketLease::let_go`]): removed where the key was absent before
    /// (nothing left behind), else marked released, so that its generation
    /// stays the floor of the next holder's (deleted, the next holder's
    /// generation would count from its own clock, and a clock behind the last
    /// holder's sends it back: S2 in the simulator's 10,000 seeds of a store
    /// that ignores one precondition in 100). A record found in place of ours
    /// (a contender that raced it) is not touched.
    pub(super) async fn refuse_broken(
        &self,
        broken: Broken,
        (replaced, over_record): (Option<String>, bool),
        slow: bool,
    ) -> LeaseError {
        race::caught(self.store.as_ref(), broken.clone());
        // The fence is checked before each request: once it has run out
        // (this process paused), the key may hold another holder's record.
        let removed = !slow && self.may_write_ignoring_not_before();
        // How marking ours released went, where it was tried.
        let mut kept = None;
        if removed {
            match self.record.generation.filter(|_| over_record) {
                Some(g) => kept = Some(self.mark_released(g).await),
                None => {
                    let _ = self.store.delete(&self.key, Some(&self.etag)).await;
                    if let Ok(out) = self.store.get(&self.key, None).await {
                        if out.body == self.body && self.may_write_ignoring_not_before() {
                            let _ = self.store.delete(&self.key, None).await;
                        }
                    }
                }
            }
        }
        let key = &self.key;
        let changed = match (replaced, removed, kept) {
            (_, true, Some(Err(e))) => format!(
                "ours could not be marked released at {key} ({e}): it expires after one TTL"
            ),
            (Some(holder), true, Some(Ok(Released::Recorded { generation: g }))) => format!(
                "the record of {} that was there was overwritten by ours, then ours was marked \
                 released at {key}, keeping generation {g} (the next holder's is greater)",
                sanitize(&holder),
            ),
            (None, true, Some(Ok(Released::Recorded { generation: g }))) => format!(
                "ours was marked released at {key}, keeping generation {g} (the next holder's is greater)"
            ),
            (_, true, Some(Ok(other))) => {
                format!("ours was written at {key}; letting it go: {other}")
            }
            (Some(holder), true, None) => format!(
                "the record of {} that was there was overwritten by ours, then ours was removed: \
                 {key} is now absent",
                sanitize(&holder),
            ),
            (None, true, None) => "nothing left behind".to_owned(),
            (_, false, _) => format!(
                "ours was left at {key} to expire after one TTL: it may have replaced a holder's record unseen"
            ),
        };
        tracing::error!(key = %self.key, "{}: {broken:?}: lease not taken", self.store.describe());
        refusal(self.store.as_ref(), broken, changed)
    }

    /// The confirmation: waits until `after` ([`race::confirm_after`]) past
    /// the write's answer, reads the record back and keeps its ETag when it
    /// is still ours. A `slow` write ([`WriteTiming::slow`]) is then kept
    /// (renewed) until [`SLOW_WAIT_TTL_FRACTION`] of the TTL after its answer
    /// before it is handed out, with a fresh generation.
    ///
    /// Errors: [`LeaseError::Lost`] when the record is another's or gone (not
    /// touched); [`LeaseError::Store`] when it could not be read (ours let
    /// go: unconfirmed is not held).
    pub(super) async fn confirm(
        mut self,
        timing: WriteTiming,
        after: Duration,
        slow: Option<String>,
        sent: &mut Sent,
    ) -> Result<Self, LeaseError> {
        let due = timing.answered + after;
        let now = self.clock.mono();
        tracing::debug!(key = %self.key, after_ms = after.as_millis() as u64, since_answer_ms = now.saturating_sub(timing.answered).as_millis() as u64, span_ms = timing.answered.saturating_sub(timing.read_sent).as_millis() as u64, slow = ?slow, "confirmation");
        if now < due {
            tokio::time::sleep(due - now).await;
        }
        let rb = match read_back(self.store.as_ref(), &self.key).await {
            Ok(rb) => rb,
            Err(e) => return Err(self.let_go(slow.is_some(), e.into()).await),
        };
        self.still_in_time()?;
        if !rb.holds(&self.body) {
            let by = rb.observed.record().cloned();
            tracing::error!(
                key = %self.key,
                "our record was replaced right after it was written ({}): on this service two \
                 contenders were both let in; the lease is not taken",
                by.as_ref().map(|r| sanitize(&r.instance_id)).unwrap_or_else(|| "now absent".into())
            );
            return Err(self.mark_lost(&rb.observed));
        }
        if let Some(e) = rb.etag() {
            self.etag = e.to_owned();
        }
        if let Some(why) = slow {
            let (num, den) = SLOW_WAIT_TTL_FRACTION;
            let until = timing.answered + self.config.ttl() * num / den;
            tracing::warn!(
                key = %self.key,
                "{why}: a holder it may have replaced unseen could still be writing, so the lease is kept (renewed) for {} before it is handed out, with a fresh generation",
                format_secs(until.saturating_sub(self.clock.mono()).as_secs_f64())
            );
            self = self.wait_out(until, sent).await?;
        }
        // Handed out only with a fence still open: a pause after the last
        // write was sent (its deadline counts from then) may have let it run
        // out, and the record be taken over, meanwhile.
        self.still_in_time()?;
        Ok(self)
    }

    /// A slow acquire's wait: the lease renewed every third of its TTL until
    /// `until` (boot-time clock), then written once more with a generation
    /// greater than any a holder it may have replaced unseen was handed (that
    /// holder's, taken from a clock reading at least `until` minus five
    /// sixths of a TTL ago, or from a record before it).
    ///
    /// Each renewal is due a third of a TTL after the last write, the one the
    /// fence counts from (as the keep-alive's), not after the wait began: the
    /// wait begins only once the race check run beside the write has ended,
    /// which on SeaweedFS (losers of a contended write answered seconds late,
    /// its scratch key then watched for twice that) took over a third of a
    /// TTL, and a renewal a third of a TTL later came after the fence's two
    /// thirds had run out: the acquire failed closed on a healthy store.
    ///
    /// Errors: [`LeaseError::Lost`] (someone else's record: it was taken
    /// meanwhile; or the fence ran out before a renewal got through: ours is
    /// left to expire).
    async fn wait_out(mut self, until: Duration, sent: &mut Sent) -> Result<Self, LeaseError> {
        loop {
            let now = self.clock.mono();
            if now >= until {
                break;
            }
            let due = self.renewed_mono + self.renew_interval();
            tokio::time::sleep(until.min(due).saturating_sub(now)).await;
            if self.clock.mono() < until {
                self = self.renew_or_release(None, sent).await?;
            }
        }
        let fresh = self
            .config
            .record_format
            .generation(self.record.generation, self.clock.wall());
        self.renew_or_release(fresh, sent).await
    }

    /// Before each write an acquire makes after its own (and before it hands
    /// the lease out): its fence's deadline has not passed. Once it has (the
    /// process was paused, or the store slow), the record may have been taken
    /// over as stale: nothing more is written, and the lease is not taken.
    ///
    /// Errors: [`LeaseError::Lost`] (the lease marked lost; nothing touched).
    fn still_in_time(&mut self) -> Result<(), LeaseError> {
        if self.may_write_ignoring_not_before() {
            return Ok(());
        }
        tracing::error!(key = %self.key, "the fence ran out before the lease could be handed out (this process was paused, or the store slow): not taken, and not touched again");
        Err(self.mark_lost_unread(
            "its fence ran out before the lease could be handed out; the record is left to expire",
        ))
    }

    /// One renewal during a slow acquire's wait (with `generation`, when
    /// given): tried again after a failure without an answer while the fence
    /// is open; when it closes first, ours is left to expire. Every body it
    /// sends stays provable as ours in `sent`.
    async fn renew_or_release(
        mut self,
        generation: Option<u64>,
        sent: &mut Sent,
    ) -> Result<Self, LeaseError> {
        loop {
            self.still_in_time()?;
            let renewed = self.renew_with(generation).await;
            sent.extend(&self.unanswered);
            sent.add(&self.body);
            match renewed {
                Ok(()) => return Ok(self),
                Err(e @ LeaseError::Lost { .. }) => return Err(e),
                Err(_) => {}
            }
            let pause = (self.renew_interval() / 5)
                .clamp(Duration::from_millis(100), Duration::from_secs(2));
            tokio::time::sleep(pause).await;
        }
    }
}
