//! The keep-alive: renews a [`BucketLease`] every third of its TTL and keeps
//! its fence ([`FenceCell`]), so a worker can stop writing the moment the
//! lease may no longer be written under. While the estimate of the service's
//! clock is wider than ±25 ms, each renewal is sent up to a second early, at
//! the moment that makes its answer's `Date` halve the estimate
//! ([`crate::clock::offset`]); after each renewal the offset is checked.
//!
//! Two parties, neither waiting on the other:
//! - the renewal task (async) sends the renewals; before each it checks the
//!   fence, and a renewal that succeeds extends the fence only if it had not
//!   closed meanwhile;
//! - the watchdog thread re-reads the clocks at least every
//!   [`super::fence::WATCHDOG_TICK`] and closes the fence at its deadline,
//!   whatever the renewal, the store or the async runtime are doing.
//!
//! Once closed, the fence stays closed and renewals stop: the lease is then
//! released by [`KeepAlive::stop`] + [`BucketLease::release`], or expires.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::error::LeaseError;
use super::fence::{offset_beyond_limit, FenceCell, FenceClose, FenceClosed, FenceStatus};
use super::lease::{BucketLease, Released};

use crate::store::StoreError;

#[cfg(feature = "sim")]
use crate::bucket::defect;

/// What closes a keep-alive's fence at its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watchdog {
    /// A thread of its own (production: no async runtime can delay it).
    Thread,
    /// A task on the current runtime: the simulator's (`sim` feature), whose
    /// paused time a thread sleeping on the real clock would not follow.
    #[cfg(feature = "sim")]
    Task,
}

/// A running keep-alive. Dropping it stops renewing and closes the fence (the
/// lease then expires after one TTL); call [`KeepAlive::stop`] to get the
/// lease back for release.
pub struct KeepAlive {
    cell: Arc<FenceCell>,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<BucketLease, LeaseError>>>,
}

impl Drop for KeepAlive {
    /// Stops renewing: the fence closes, the lease expires after one TTL.
    fn drop(&mut self) {
        self.cancel.cancel();
        self.cell.close(FenceClosed::Stopped);
    }
}

impl KeepAlive {
    /// Starts renewing `lease` on the current tokio runtime, and its fence
    /// watchdog on a thread of its own.
    pub fn start(lease: BucketLease) -> Self {
        #[cfg(feature = "sim")]
        if defect::task_watchdog() {
            return Self::start_with(lease, Watchdog::Task);
        }
        Self::start_with(lease, Watchdog::Thread)
    }

    /// [`KeepAlive::start`] with the fence watchdog of `watchdog`'s kind.
    pub(crate) fn start_with(lease: BucketLease, watchdog: Watchdog) -> Self {
        let cell = FenceCell::new(lease.clock().clone(), lease.deadline());
        if lease.is_lost() {
            cell.close(FenceClosed::Lost);
        }
        // The answers since the acquire's own check may have narrowed the
        // estimate of the service's clock: the rule applies from the start.
        if let Some(off) = lease
            .server_offset()
            .and_then(|o| offset_beyond_limit(&o, lease.clock().as_ref(), lease.config().ttl_s))
        {
            cell.close(FenceClosed::ClockOffset(off));
        }
        match watchdog {
            Watchdog::Thread => {
                if let Err(e) = cell.start_watchdog() {
                    // Without a watchdog no deadline could be kept: never open.
                    tracing::error!(
                        "cannot start the fence watchdog thread: {e}; the fence stays closed"
                    );
                    cell.close(FenceClosed::Expired);
                }
            }
            #[cfg(feature = "sim")]
            Watchdog::Task => cell.start_watchdog_task(),
        }
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(lease, cell.clone(), cancel.clone()));
        Self {
            cell,
            cancel,
            task: Some(task),
        }
    }

    /// The fence: `true` while writes may start. It turns `false` two thirds
    /// of a TTL after the last successful renewal (or at once when the lease
    /// is lost or a clock misbehaves), and then stays `false`.
    ///
    /// Read it with `*rx.borrow()` in a statement of its own: a `watch::Ref`
    /// held across an `.await` blocks the watchdog that closes the fence.
    pub fn fence(&self) -> watch::Receiver<bool> {
        self.cell.subscribe()
    }

    /// The fence now (re-reads the clocks).
    pub fn status(&self) -> FenceStatus {
        self.cell.check()
    }

    /// Completes once the fence has closed.
    pub async fn closed(&self) {
        self.cell.closed().await
    }

    /// Why the fence closed, once it has.
    pub(crate) fn closed_reason(&self) -> Option<FenceClosed> {
        self.cell.closed_reason()
    }

    /// Runs `hook` once when the fence closes, on the watchdog thread or the
    /// thread that closed it, without waiting for the async runtime: for
    /// stopping writers (signals, the fence fd), never for I/O. Not run after
    /// [`KeepAlive::stop`] (or a drop): then it is dropped unrun, which
    /// releases what it owns (`bucket hold`'s fence fd closes that way too).
    pub(crate) fn on_close(&self, hook: impl FnOnce(FenceClose) + Send + 'static) {
        self.cell.on_close(hook)
    }

    /// Stops renewing and returns the lease (to release it), or the error
    /// that ended the task (e.g. [`LeaseError::Lost`]).
    pub async fn stop(mut self) -> Result<BucketLease, LeaseError> {
        self.cancel.cancel();
        self.cell.close(FenceClosed::Stopped);
        self.join().await
    }

    /// Stops renewing, then releases the lease (never someone else's): the
    /// one way every command and the console let go of a held lease.
    ///
    /// A fence that ran out (no renewal for two thirds of a TTL) more than a
    /// twelfth of a TTL ago is not followed by a release: by then a contender
    /// may judge the record stale and take it over (from five sixths of a TTL
    /// after the last renewal, clocks apart by up to the allowed offsets), and
    /// a release landing after that — refused on a service that honours
    /// `If-Match`, carried out on one that does not — would free a lease
    /// someone else holds. The lease expires by itself instead.
    pub async fn stop_and_release(self) -> ReleaseReport {
        let ran_out = self.closed_reason() == Some(FenceClosed::Expired);
        match self.stop().await {
            Ok(lease) if ran_out && too_late_to_release(&lease) => ReleaseReport::LeftToExpire,
            Ok(lease) => match lease.release().await {
                Ok(how) => ReleaseReport::Released(how),
                Err(e) => ReleaseReport::Failed(e),
            },
            Err(e) => ReleaseReport::AlreadyLost(e),
        }
    }

    /// Waits until the task ends by itself: the lease was lost (`Err`) or the
    /// fence closed (`Ok`, the lease to release).
    pub async fn lost(&mut self) -> Result<BucketLease, LeaseError> {
        self.join().await
    }

    /// Waits for the task and returns what it ended with. Cancel-safe: the
    /// task's handle is given up only once the task has ended, so a caller
    /// that waits on [`KeepAlive::lost`] beside something else (a shutdown)
    /// and then calls [`KeepAlive::stop_and_release`] still releases.
    async fn join(&mut self) -> Result<BucketLease, LeaseError> {
        let failed = |m: String| LeaseError::Store(StoreError::Invalid(m));
        let Some(task) = self.task.as_mut() else {
            return Err(failed("keep-alive task already ended".into()));
        };
        let ended = task.await;
        self.task = None;
        ended.unwrap_or_else(|e| Err(failed(format!("keep-alive task failed: {e}"))))
    }
}

/// How letting go of a held lease went ([`KeepAlive::stop_and_release`]).
#[derive(Debug)]
pub enum ReleaseReport {
    /// Released, or found already gone, or found someone else's (not deleted).
    Released(Released),
    /// The store could not be reached: the lease expires after one TTL.
    Failed(LeaseError),
    /// The lease had been lost before (its loss is the error).
    AlreadyLost(LeaseError),
    /// Its fence ran out long enough ago that the record may have been taken
    /// over: not released, it expires by itself.
    LeftToExpire,
}

/// True when `lease`'s fence ran out more than a twelfth of its TTL ago
/// (boot-time clock): see [`KeepAlive::stop_and_release`].
fn too_late_to_release(lease: &BucketLease) -> bool {
    let d = lease.deadline();
    let since = lease.clock().mono().saturating_sub(d.renewed_mono);
    since > d.window + lease.config().ttl() / 12
}

impl std::fmt::Display for ReleaseReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReleaseReport::Released(r @ (Released::NotOurs(_) | Released::LeftToExpire { .. })) => {
                write!(f, "{r}")
            }
            ReleaseReport::Released(r) => write!(f, "released ({r})"),
            ReleaseReport::Failed(e) => {
                write!(f, "release failed ({e}); the lease expires after one TTL")
            }
            ReleaseReport::AlreadyLost(e) => write!(f, "already lost ({e})"),
            ReleaseReport::LeftToExpire => f.write_str(
                "not released: its fence ran out long enough ago that the lease may have been taken over; it expires by itself",
            ),
        }
    }
}

async fn run(
    mut lease: BucketLease,
    cell: Arc<FenceCell>,
    cancel: CancellationToken,
) -> Result<BucketLease, LeaseError> {
    let retry =
        (lease.renew_interval() / 5).clamp(Duration::from_millis(100), Duration::from_secs(2));
    let clock = lease.clock().clone();
    // Boot-time readings: the next renewal, and the next look at the record
    // after a forced takeover's wait (while it lasts).
    let mut renew_at = clock.mono() + next_renewal(&lease);
    let mut look_at = lease.waits_until();
    loop {
        let now = clock.mono();
        let wake = look_at.map_or(renew_at, |l| l.min(renew_at));
        // `biased`: the branches in this order when several are ready at
        // once (a stop or a closed fence before the next renewal), the same
        // on every run: tokio's default is a random pick, which made a
        // simulated seed (92, a holder suspended past its renewal) replay
        // differently.
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Ok(lease),
            _ = cell.closed() => return Ok(lease),
            _ = tokio::time::sleep(wake.saturating_sub(now)) => {}
        }
        if look_at.is_some_and(|l| clock.mono() >= l) {
            let ended = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Ok(lease),
                _ = cell.closed() => return Ok(lease),
                r = lease.end_wait() => r,
            };
            match ended {
                Ok(true) => {
                    look_at = None;
                    if !cell.wait_ended() {
                        return Ok(lease);
                    }
                }
                Ok(false) => look_at = lease.waits_until(),
                Err(e @ LeaseError::Lost { .. }) => {
                    cell.close(FenceClosed::Lost);
                    return Err(e);
                }
                Err(e) => {
                    tracing::warn!(key = %lease.key(), error = %e, "reading the record back after the wait failed; retrying");
                    look_at = Some(clock.mono() + retry);
                }
            }
        }
        if clock.mono() < renew_at {
            continue;
        }
        // The deadline is checked before every renewal: one begun after it
        // could not reopen the fence anyway.
        if let FenceStatus::Closed(_) = cell.check() {
            return Ok(lease);
        }
        let result = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Ok(lease),
            // The watchdog closed the fence while the renewal was in flight:
            // stop waiting for it (if it lands, release finds our record).
            _ = cell.closed() => return Ok(lease),
            r = lease.renew() => r,
        };
        match result {
            Ok(()) => {
                if let Some(o) = lease.server_offset() {
                    tracing::debug!(
                        key = %lease.key(),
                        offset_s = o.against(lease.clock().as_ref()),
                        error_s = o.error_s,
                        answers = o.answers,
                        "the service's clock minus this host's, after a renewal"
                    );
                    let ttl_s = lease.config().ttl_s;
                    if let Some(off) = offset_beyond_limit(&o, lease.clock().as_ref(), ttl_s) {
                        cell.close(FenceClosed::ClockOffset(off));
                        return Ok(lease);
                    }
                }
                if !cell.renewed(lease.deadline()) {
                    return Ok(lease);
                }
                renew_at = clock.mono() + next_renewal(&lease);
            }
            Err(e @ LeaseError::Lost { .. }) => {
                cell.close(FenceClosed::Lost);
                return Err(e);
            }
            Err(e) => {
                tracing::warn!(key = %lease.key(), error = %e, "renewal failed; retrying");
                renew_at = clock.mono() + retry;
            }
        }
    }
}

/// The wait before the next renewal: a third of the TTL after the lease's
/// last write (not after now: a lease handed to a keep-alive late — a
/// takeover whose PUT was answered slowly, then confirmed — would otherwise
/// see its fence run out, two thirds of a TTL after that write, before it
/// renewed), less the lead that makes the service's clock turn a second
/// while the renewal is in flight, at the middle of what its offset estimate
/// still leaves open ([`crate::clock::ServerOffset::lead`]: each such answer
/// halves it, until it is within ±25 ms or the round trip). The lead is at
/// most a second and half the interval, and a renewal only ever comes
/// earlier: the fence gains, no request is added.
fn next_renewal(lease: &BucketLease) -> Duration {
    let every = lease.renew_interval();
    let since = lease
        .clock()
        .mono()
        .saturating_sub(lease.deadline().renewed_mono);
    let due = every.saturating_sub(since);
    let max = (every / 2).min(Duration::from_secs(1));
    let lead = lease
        .server_offset()
        .map(|o| o.lead(lease.clock().as_ref(), due, max))
        .unwrap_or_default();
    due.saturating_sub(lead)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{next_renewal, too_late_to_release, KeepAlive, ReleaseReport};
    use crate::bucket::fence::{FenceClosed, FenceStatus};
    use crate::bucket::lease::tests::{held, put_theirs};
    use crate::bucket::lease::{read_lease, Released};
    use crate::clock::{Clock, ManualClock, ServerOffset};

    /// [`super::KeepAlive::stop_and_release`]'s rule: a lease whose fence ran
    /// out (two thirds of the TTL after its last renewal) is still released
    /// up to a twelfth of the TTL later, and never after that — from then a
    /// contender may judge the record stale and take it over (the mutation
    /// score of issue 48 §4 found no judge of it: seven mutants of the
    /// comparison and its terms went unseen).
    #[tokio::test]
    async fn too_late_to_release_is_a_twelfth_of_a_ttl_past_the_fence() {
        let (_dir, _store, clock, lease) = held(30).await;
        assert!(!too_late_to_release(&lease), "just acquired");
        // The fence: 20 s after the last renewal; a twelfth of the TTL: 2.5 s.
        let limit = Duration::from_secs(20) + Duration::from_millis(2_500);
        let since = clock.mono().saturating_sub(lease.deadline().renewed_mono);
        clock.advance(limit - since);
        assert!(
            !too_late_to_release(&lease),
            "a twelfth of the TTL past the fence: not yet"
        );
        clock.advance(Duration::from_millis(1));
        assert!(too_late_to_release(&lease), "past it");
    }

    /// Dropping the keep-alive (a holder that ends without stopping it)
    /// closes the fence: a writer watching it stops.
    #[tokio::test]
    async fn dropping_the_keep_alive_closes_its_fence() {
        let (_dir, _store, _clock, lease) = held(12).await;
        let keep = KeepAlive::start(lease);
        let fence = keep.fence();
        assert!(*fence.borrow(), "open while held");
        drop(keep);
        assert!(!*fence.borrow(), "closed by the drop");
    }

    /// What `bucket hold` waits on beside its command: `closed` completes
    /// only once the fence has closed — here by the watchdog thread at the
    /// deadline, with nobody else reading the clocks — and `closed_reason`
    /// then says why.
    #[tokio::test]
    async fn closed_completes_when_the_watchdog_closes_the_fence_and_says_why() {
        // TTL 12 s: the fence closes 8 s after the last write.
        let (_dir, _store, clock, lease) = held(12).await;
        let since = clock.mono().saturating_sub(lease.deadline().renewed_mono);
        let keep = KeepAlive::start(lease);
        assert_eq!(keep.closed_reason(), None, "open");
        let waited = tokio::time::timeout(Duration::from_millis(300), keep.closed()).await;
        assert!(
            waited.is_err(),
            "closed() completed while the fence was open"
        );
        clock.advance(Duration::from_secs(8) - since);
        tokio::time::timeout(Duration::from_secs(10), keep.closed())
            .await
            .expect("the watchdog closes the fence at its deadline");
        assert_eq!(keep.closed_reason(), Some(FenceClosed::Expired));
    }

    /// `stop_and_release`'s choice as a holder ends: a live lease is
    /// released; one whose fence ran out is still released up to a twelfth
    /// of the TTL later; after that it is left to expire, its record as it
    /// was (a contender may have judged it stale and be taking it over).
    #[tokio::test]
    async fn stop_and_release_leaves_a_lease_long_past_its_fence_to_expire() {
        // TTL 12 s: the fence runs out 8 s after the last write; a twelfth: 1 s.
        for (past_ms, released) in [(None, true), (Some(8_500), true), (Some(9_500), false)] {
            let (_dir, store, clock, lease) = held(12).await;
            let key = lease.key().to_owned();
            let since = clock.mono().saturating_sub(lease.deadline().renewed_mono);
            let keep = KeepAlive::start(lease);
            if let Some(ms) = past_ms {
                clock.advance(Duration::from_millis(ms) - since);
                assert_eq!(keep.status(), FenceStatus::Closed(FenceClosed::Expired));
            }
            let report = keep.stop_and_release().await;
            let stored = read_lease(store.as_ref(), &key, None).await.unwrap();
            let stored = stored.record().expect("a record at the key").clone();
            if released {
                assert!(
                    matches!(report, ReleaseReport::Released(Released::Recorded { .. })),
                    "{past_ms:?} ms: {report:?}"
                );
                assert!(stored.is_released(), "{past_ms:?} ms: {stored:?}");
            } else {
                assert!(
                    matches!(report, ReleaseReport::LeftToExpire),
                    "{past_ms:?} ms: {report:?}"
                );
                assert!(!stored.is_released(), "{past_ms:?} ms: {stored:?}");
            }
        }
    }

    /// The renewal interval: a third of the TTL (docs/bucket-leases.md,
    /// "every `ttl_s / 3`"), counted from the lease's last write, not from
    /// now; an overdue renewal goes at once. No estimate of the service's
    /// clock here (a directory store), so no lead.
    #[tokio::test]
    async fn the_next_renewal_is_a_third_of_the_ttl_after_the_last_write() {
        let (_dir, _store, clock, lease) = held(12).await;
        let since = clock.mono().saturating_sub(lease.deadline().renewed_mono);
        assert_eq!(next_renewal(&lease), Duration::from_secs(4) - since);
        clock.advance(Duration::from_secs(3) - since);
        assert_eq!(next_renewal(&lease), Duration::from_secs(1));
        clock.advance(Duration::from_secs(2));
        assert_eq!(next_renewal(&lease), Duration::ZERO, "overdue: at once");
    }

    /// An estimate of the service's clock, `offset_s` ± `error_s` seconds
    /// ahead of `clock` (the lease's), from several answers. An estimate is
    /// kept against the system clock, which runs on while a manual clock
    /// stands still: without the correction, a slow setup (a loaded machine)
    /// would move the offset the test means to give.
    fn estimate(clock: &ManualClock, offset_s: f64, error_s: f64) -> ServerOffset {
        ServerOffset {
            offset_s: offset_s - clock.system_ahead_s(),
            error_s,
            at: chrono::Utc::now(),
            rtt_s: 0.01,
            answers: 3,
        }
    }

    /// A holder whose clock has come apart from the service's by more than
    /// the limit (a twelfth of the TTL) since its acquire checked it: the
    /// fence is closed as the keep-alive starts, and says by how much. An
    /// offset within the limit leaves it open.
    #[tokio::test]
    async fn an_offset_beyond_the_limit_closes_the_fence_as_the_keep_alive_starts() {
        // TTL 12 s: the limit is 1 s.
        let (_dir, store, clock, lease) = held(12).await;
        // Real time passes between the setup and the start, as on a loaded
        // machine (CI, 2026-12-08: 0.6 s, the offset read as 1.1 s).
        std::thread::sleep(Duration::from_millis(600));
        store.set(Some(estimate(&clock, 0.5, 0.1)));
        let keep = KeepAlive::start(lease);
        assert_eq!(keep.closed_reason(), None, "0.5 s off: within the limit");
        drop(keep);
        let (_dir, store, clock, lease) = held(12).await;
        store.set(Some(estimate(&clock, 3.0, 0.1)));
        let keep = KeepAlive::start(lease);
        assert!(
            matches!(keep.closed_reason(), Some(FenceClosed::ClockOffset(s)) if (s - 3.0).abs() < 0.5),
            "3 s off: {:?}",
            keep.closed_reason()
        );
    }

    /// A renewal aimed at the turn of the service's second comes at most
    /// half the interval early (and at most a second): at a 3 s TTL, never
    /// sooner than half a second after the last write, whatever the phase
    /// of the service's clock.
    #[tokio::test]
    async fn an_aimed_renewal_is_at_most_half_the_interval_early() {
        let (_dir, store, clock, lease) = held(3).await;
        let mut aimed = 0;
        for tenth in 0..20 {
            store.set(Some(estimate(&clock, f64::from(tenth) / 20.0, 0.3)));
            let wait = next_renewal(&lease);
            assert!(
                wait >= Duration::from_millis(500) && wait <= Duration::from_secs(1),
                "offset {} s: {wait:?}",
                f64::from(tenth) / 20.0
            );
            aimed += usize::from(wait < Duration::from_secs(1));
        }
        assert!(aimed > 0, "some phases are aimed at");
    }

    /// A lease found lost before its keep-alive starts (a renewal met
    /// another holder's record) has its fence closed from the start.
    #[tokio::test]
    async fn a_lease_already_lost_starts_with_its_fence_closed() {
        let (_dir, store, _clock, mut lease) = held(12).await;
        put_theirs(&store, &lease, "someone-else").await;
        assert!(lease.renew().await.is_err(), "lost");
        let keep = KeepAlive::start(lease);
        assert_eq!(keep.closed_reason(), Some(FenceClosed::Lost));
        assert!(!*keep.fence().borrow());
    }
}
