//! The conditional acquire in order: the store check, the write, the probe
//! after it, the confirmation — with the race check's later rounds run
//! beside the write instead of before it.
//!
//! The first time a process acquires on a store, its race check
//! ([`race::check_once_overlapped`]) runs its first round before anything is
//! written: a store that lets several concurrent contenders win outright (a
//! precondition ignored, a wide check-then-write window) is refused there
//! with nothing written. The rounds that make the check sure of a narrow
//! window run after the acquire's write was answered (so its read-to-answer
//! span, which decides whether it goes the slow way, is not lengthened by the
//! check's concurrent requests), beside the probe and the confirmation's
//! wait. The lease is handed out only once both have ended: the check's
//! finding, and the confirmation sent no earlier than the write's answer plus
//! the wait sized by the check's final measurements
//! ([`race::confirm_after`]). The check runs in a task of its own: an
//! acquire whose request went unanswered returns at once (its next try takes
//! up a write of its that landed), and the check still ends and is remembered
//! for that try; any other failure waits for the check's end (its scratch key
//! removed). So a store the check finds not atomic is still
//! caught before any command starts; what the acquire wrote before the
//! finding is undone by the rules of a refusal after a write
//! ([`BucketLease::refuse_broken`]), and the refusal says what it changed.
//! Where the first round's round trips and duration already say that the
//! later rounds and the confirmation's wait would not fit in the fence, or the check is run by another caller, nothing is written
//! before the finding (the check's order before issue 48's start-time
//! target).

use tokio::sync::oneshot;

use super::acquire::{Contender, Written};
use super::confirm::{fits_in_fence, refusal, ttl_too_short};
use super::*;
use crate::bucket::race::{self, Overlap, RaceReport};
use crate::bucket::record::new_instance_id;

/// How the write beside the race check's later rounds went.
enum Beside {
    /// Nothing was written before the check's finding: the first round
    /// ended the check (two winners, a failure), the store was being checked
    /// by another caller, or the first round's round trips ask for a wait
    /// that does not fit in the fence.
    Waited,
    /// Refused before a write of ours was answered.
    Refused(LeaseError),
    /// Failed after a write of ours was answered; the error says what it
    /// changed.
    Failed(LeaseError),
    /// Written and probed, not yet confirmed.
    Written(Box<Written>),
}

impl Contender<'_> {
    /// The acquire in conditional mode (see the module): refused at once on
    /// a store this process has caught; else the write beside the race
    /// check's later rounds, then the confirmation.
    ///
    /// Errors: as [`BucketLease::acquire_as`]; a store found broken by the
    /// check after the write was answered is refused with what the attempt
    /// changed ([`LeaseError::PreconditionsIgnored`], [`LeaseError::NotAtomic`]).
    pub(super) async fn acquire_checked(
        &self,
        watch: &mut LeaseWatch,
    ) -> Result<BucketLease, LeaseError> {
        let store = self.store.as_ref();
        if let Some(b) = race::broken(store) {
            tracing::error!(key = %self.key, "{}: refused before writing anything: {b:?}", store.describe());
            return Err(refusal(store, b, "nothing written".into()));
        }
        #[cfg(feature = "sim")]
        if defect::on(Defect::RaceCheckSkipped) {
            return self.write_then_confirm(watch).await;
        }
        // A scratch key of its own: processes started together under one
        // instance id (a hand-over's successors) must not race on one key, where
        // each one's rounds would count the other's creates as winners.
        let scratch = scratch_key(&self.key, &new_instance_id());
        let (first, first_rx) = oneshot::channel();
        let (go, go_rx) = oneshot::channel::<()>();
        // A task of its own: an acquire that fails does not wait for the
        // check's last rounds and the removal of its scratch key (a retry
        // after a lost answer takes up its own record at once), and the
        // check still ends and is remembered for the next try.
        let overlap = Overlap { first, go: go_rx };
        let race_store = self.store.clone();
        let check = tokio::spawn(async move {
            race::check_once_overlapped(race_store.as_ref(), &scratch, overlap).await
        });
        let beside = self.write_beside(&mut *watch, first_rx, go).await;
        match beside {
            Beside::Waited => {
                let report = ended(check).await?;
                if let Some(b) = report.broken() {
                    return Err(refusal(store, b, "nothing written".into()));
                }
                let wait = race::confirm_after(store);
                if !fits_in_fence(self.config.ttl_s, wait) {
                    let (ttl_s, q90) = (self.config.ttl_s, report.round_trip_q90_us);
                    let said = "nothing was written".to_owned();
                    return Err(ttl_too_short(store, ttl_s, wait, q90, said));
                }
                self.write_then_confirm(watch).await
            }
            // No answer to a request (our write's among them, perhaps): the
            // next try takes up what landed without waiting for the check's
            // last rounds, which end in their task (in a process that exits
            // now, its scratch key is left to the probe's sweep).
            Beside::Refused(e @ LeaseError::Store(_)) => Err(e),
            // Refused before writing: the check's finding when it has one.
            Beside::Refused(e) => match ended(check).await.ok().and_then(|r| r.broken()) {
                Some(b) => Err(refusal(store, b, "nothing written".into())),
                None => Err(e),
            },
            Beside::Failed(e) => {
                // The check's scratch key removed before the process may exit.
                let _ = ended(check).await;
                Err(e)
            }
            Beside::Written(w) => self.confirm_written(*w, ended(check).await, watch).await,
        }
    }

    /// The write and the probe after it, once the race check's first round
    /// found no two winners (`first`: the 90th percentile of its round
    /// trips, and its duration) and the check's later rounds and the
    /// confirmation's wait fit in the fence; `go` tells the check's later rounds that the write was
    /// answered (or that there is none). A write is judged slow here by the
    /// shortest wait the check can size ([`race::CONFIRM_AFTER_MIN`]): a
    /// refusal after it then leaves ours to expire wherever the final wait
    /// could.
    async fn write_beside(
        &self,
        watch: &mut LeaseWatch,
        first: oneshot::Receiver<(Option<u64>, Duration)>,
        go: oneshot::Sender<()>,
    ) -> Beside {
        let Ok((q90, took)) = first.await else {
            return Beside::Waited;
        };
        // The fence counts from the write: the check's later rounds (each
        // taken to last as long as the first) must fit in it beside the
        // confirmation's wait, or the lease would close before it is handed
        // out (SeaweedFS answers a contended write's losers a second late).
        let later = took * (race::ACQUIRE_MAX_ROUNDS as u32 - 1);
        if !fits_in_fence(self.config.ttl_s, race::wait_for(q90) + later * 2 / 3) {
            return Beside::Waited;
        }
        let written = self.write(watch, None).await;
        drop(go);
        let Written {
            lease,
            body,
            replaced,
            timing,
        } = match written {
            Ok(w) => w,
            Err(e @ LeaseError::UnusableEtag { .. }) => return Beside::Failed(e),
            Err(e) => return Beside::Refused(e),
        };
        let slow = timing.slow(race::CONFIRM_AFTER_MIN).is_some();
        match lease.probe_written(&body, replaced.clone(), slow).await {
            Ok(lease) => Beside::Written(Box::new(Written {
                lease,
                body,
                replaced,
                timing,
            })),
            Err(e) => Beside::Failed(e),
        }
    }

    /// After the write beside the check and the check's finding (`checked`):
    /// refused on a store found broken, or whose wait does not fit in the
    /// fence after all (ours let go, with what that changed), else the
    /// confirmation with the wait sized by the check's final measurements.
    ///
    /// Errors: as [`Contender::acquire_checked`].
    async fn confirm_written(
        &self,
        w: Written,
        checked: Result<Arc<RaceReport>, StoreError>,
        watch: &mut LeaseWatch,
    ) -> Result<BucketLease, LeaseError> {
        let store = self.store.as_ref();
        let Written {
            lease,
            replaced,
            timing,
            ..
        } = w;
        let report = match checked {
            Ok(r) => r,
            Err(e) => {
                let slow = timing.slow(race::CONFIRM_AFTER_MIN).is_some();
                return Err(lease.let_go(slow, e.into()).await);
            }
        };
        let after = race::confirm_after(store);
        let slow = timing.slow(after);
        if let Some(b) = report.broken() {
            return Err(lease.refuse_broken(b, replaced, slow.is_some()).await);
        }
        if !fits_in_fence(self.config.ttl_s, after) {
            let said = lease.let_go_saying(slow.is_some()).await;
            let q90 = report.round_trip_q90_us;
            return Err(ttl_too_short(store, self.config.ttl_s, after, q90, said));
        }
        self.confirmed(
            lease.confirm(timing, after, slow, &mut watch.sent).await,
            watch,
        )
    }

    /// The order without the check beside it: the write once the check's
    /// finding is known (or skipped: the simulator's `race-check-skipped`),
    /// the probe, the confirmation.
    ///
    /// Errors: as [`BucketLease::acquire_as`].
    async fn write_then_confirm(&self, watch: &mut LeaseWatch) -> Result<BucketLease, LeaseError> {
        let after = race::confirm_after(self.store.as_ref());
        let w = self.write(watch, Some(after)).await?;
        let slow = w.timing.slow(after);
        let lease = w
            .lease
            .probe_written(&w.body, w.replaced, slow.is_some())
            .await?;
        self.confirmed(
            lease.confirm(w.timing, after, slow, &mut watch.sent).await,
            watch,
        )
    }

    /// The confirmation's outcome: a lease handed out no longer needs what
    /// the acquire sent kept provable as ours.
    fn confirmed(
        &self,
        confirmed: Result<BucketLease, LeaseError>,
        watch: &mut LeaseWatch,
    ) -> Result<BucketLease, LeaseError> {
        let lease = confirmed?;
        watch.sent.clear();
        tracing::info!(key = %lease.key, instance_id = %sanitize(&lease.record.instance_id), "lease acquired; preconditions honoured");
        Ok(lease)
    }
}

/// The race check's finding, once its task has ended (a panic in it is
/// raised here).
///
/// Errors: as [`race::check_once_overlapped`]; [`StoreError::Invalid`] when
/// the task was cancelled (the runtime shutting down).
async fn ended(
    check: tokio::task::JoinHandle<Result<Arc<RaceReport>, StoreError>>,
) -> Result<Arc<RaceReport>, StoreError> {
    match check.await {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(StoreError::Invalid(
            "the race check was cancelled before it ended".into(),
        )),
    }
}
