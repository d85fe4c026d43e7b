//! The conditional acquire in order: the store check, the write, the probe
//! after it, the confirmation — with the race check's rounds run beside the
//! write instead of before it.
//!
//! The first time a process acquires on a store, its race check runs beside
//! the acquire. Where the fence leaves room for the whole check after the
//! write ([`whole_check_fits`]: a TTL over 12 s, the default 30 s included),
//! every round of it runs once the acquire's write was answered
//! ([`race::check_once`]), beside the probe and the confirmation's wait: on
//! a healthy store nothing but the read, the write, the wait and the read
//! back stand between the launch and the command. Otherwise the whole check
//! runs first, then the write (the order before issue 48's start-time
//! target): a later round can take seconds more than the first on a store
//! that queues contended writes (SeaweedFS), and a shorter fence has no room
//! for that. The rounds wait for the write's answer, so its read-to-answer
//! span, which decides whether it goes the slow way, is not lengthened by
//! the check's concurrent requests.
//!
//! The lease is handed out only once both have ended: the check's finding,
//! and the confirmation sent no earlier than the write's answer plus the
//! wait sized by the check's final measurements ([`race::confirm_after`]).
//! So a store the check finds not atomic, or ignoring a precondition, is
//! still caught before any command starts; what the acquire wrote before the
//! finding is undone by the rules of a refusal after a write
//! ([`BucketLease::refuse_broken`]: ours let go — marked released over a
//! record, removed where the key was absent, left to expire where it may hide
//! a holder —, the store remembered as caught), and the refusal says what it
//! changed. A store this process has caught already is refused before
//! anything is written. The check runs in a task of its own: an acquire
//! whose request went unanswered returns at once (its next try takes up a
//! write of its that landed), and the check still ends and is remembered for
//! that try; any other failure waits for the check's end (its scratch key
//! removed). A check that outlasts the fence all the same (a store far
//! slower than its first answers) leaves ours to expire: the confirmation
//! finds the fence run out and the acquire fails closed.

use tokio::sync::oneshot;

use super::acquire::{Contender, Gate, Written};
use super::confirm::{fits_in_fence, refusal, ttl_too_short};
use super::*;
use crate::bucket::race::{self, Overlap, RaceReport};
use crate::bucket::record::new_instance_id;

/// How the write beside the race check's later rounds went.
enum Beside {
    /// Nothing was written before the check's finding: the first round
    /// ended the check (two winners, a failure), the store was being checked
    /// by another caller, or the TTL leaves no room for the check after the
    /// write ([`whole_check_fits`]).
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
        let race_store = self.store.clone();
        let overlap = Overlap { first, go: go_rx };
        let (check, beside) = if whole_check_fits(self.config.ttl_s) {
            // The whole check after the write's answer (none of its requests
            // lengthens the write's read-to-answer span), its first round
            // before a write over another holder's record (`Gate`).
            let (start, start_rx) = oneshot::channel::<()>();
            let check = tokio::spawn(async move {
                let _ = start_rx.await;
                race::check_once_overlapped(race_store.as_ref(), &scratch, overlap).await
            });
            let mut gate = Gate::new(start, first_rx);
            (
                check,
                self.write_probed(&mut *watch, go, Some(&mut gate)).await,
            )
        } else {
            // A shorter TTL: the whole check first, then the write (main's
            // order before issue 48). Its later rounds once went beside the
            // write when its first round said they would fit in the fence,
            // but on SeaweedFS a later round can take seconds more than the
            // first (losers queued behind its lock, given up on after the
            // client's 1 s timeout at a 3 s TTL, then its scratch key
            // watched): the check ended 4.1 s after the write, past the 2 s
            // fence, and the acquire failed closed on a healthy store.
            drop((first_rx, go));
            let check = tokio::spawn(async move {
                race::check_once_overlapped(race_store.as_ref(), &scratch, overlap).await
            });
            (check, Beside::Waited)
        };
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
            Beside::Written(w) => {
                tracing::debug!(key = %self.key, "written and probed; waiting for the race check's finding");
                let checked = ended(check).await;
                tracing::debug!(key = %self.key, since_answer_ms = self.clock.mono().saturating_sub(w.timing.answered).as_millis() as u64, "race check ended");
                self.confirm_written(*w, checked, watch).await
            }
        }
    }

    /// The write and the probe after it, with the race check's rounds (all
    /// of them, or its later ones) beside: `go` tells them that the write
    /// was answered, or that there is none. A write is judged slow here by
    /// the shortest wait the check can size ([`race::CONFIRM_AFTER_MIN`]): a
    /// refusal after it then leaves ours to expire wherever the final wait
    /// could.
    async fn write_probed(
        &self,
        watch: &mut LeaseWatch,
        go: oneshot::Sender<()>,
        mut gate: Option<&mut Gate>,
    ) -> Beside {
        let written = self.write_gated(watch, None, gate.as_deref_mut()).await;
        tracing::debug!(key = %self.key, ok = matches!(written, Ok(Some(_))), "acquire's write answered; the check's rounds may go on");
        drop(go);
        if let Some(g) = gate {
            g.release();
        }
        let Written {
            lease,
            body,
            replaced,
            timing,
        } = match written {
            Ok(Some(w)) => w,
            // The gate's round ended the check: nothing written before its
            // finding.
            Ok(None) => return Beside::Waited,
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
        watch.hiding.clear();
        tracing::info!(key = %lease.key, instance_id = %sanitize(&lease.record.instance_id), "lease acquired; preconditions honoured");
        Ok(lease)
    }
}

/// How long the race check may take beside the fence when it runs whole
/// after the write: its first two rounds always run and it starts no round
/// after [`race::ACQUIRE_BUDGET`], so on a store that answers promptly it
/// ends within about the budget and two rounds. Not a bound: where answers
/// come later than 1.5 s the check runs on to its target or
/// [`race::ACQUIRE_MAX_ROUNDS`] (SeaweedFS answers the losers queued behind
/// its lock 1–3 s late: it ended 1.0–7.1 s after the write, measured quiet
/// on loopback). What it must fit is the fence: the confirmation after it,
/// and a slow acquire's renewals, count from the write
/// ([`BucketLease::confirm`]).
pub(super) const WHOLE_CHECK_ALLOWANCE: Duration = Duration::from_secs(5);

/// Whether the whole race check may run after the write, beside the probe
/// and the confirmation's wait, in a `ttl_s` TTL: the longest wait
/// ([`race::CONFIRM_AFTER_MAX`], the write and the read back with it) and
/// [`WHOLE_CHECK_ALLOWANCE`] fit in the fence (a TTL over 12 s; the default
/// 30 s does). Otherwise the whole check comes first. A check that outlasts
/// the fence all the same leaves ours to expire, and the acquire fails
/// closed ([`BucketLease::confirm`]).
pub(super) fn whole_check_fits(ttl_s: u64) -> bool {
    fits_in_fence(
        ttl_s,
        race::CONFIRM_AFTER_MAX + WHOLE_CHECK_ALLOWANCE * 2 / 3,
    )
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
