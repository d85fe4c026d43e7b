//! The holder's fence: whether this process may start a write under its lease.
//!
//! A contender may take a lease once its record is a full TTL old (by the
//! contender's clock). The holder therefore stops starting writes two thirds
//! of a TTL after its last successful renewal, measured from the moment just
//! *before* that renewal's request was sent:
//!
//! - on the boot-time clock ([`crate::clock::Clock::mono`]: Linux
//!   `CLOCK_BOOTTIME`, which keeps counting while the host is suspended), and
//! - on the wall clock (UTC), which the record's `renewed_at` is stamped with.
//!
//! If the two disagree by more than [`FenceDeadline::step_tolerance`] the wall
//! clock was stepped (NTP, an operator, a VM restored from a snapshot): the
//! next stamp could make the record look older or younger than it is, so the
//! fence closes. Once a [`FenceCell`] has closed it never opens again: a
//! renewal that was already in flight, or that lands late, does not reopen it.
//!
//! The fence is enforced by a watchdog thread of its own (not a task of the
//! async runtime, and not the task that renews), which re-reads both clocks at
//! least every [`WATCHDOG_TICK`], so a deadline passes on time however long a
//! renewal hangs, and is noticed within one tick after the process (or the
//! host) resumes from a pause.
//!
//! What it cannot do: a process that was paused after checking the fence and
//! before sending a request sends that request when it resumes. The guarantees
//! and their limits are spelled out in docs/bucket-leases.md, "What the fence
//! guarantees, and where it stops".

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, ServerOffset, SharedClock};
use crate::text::format_secs;

#[cfg(feature = "sim")]
use crate::bucket::defect::{self, Defect};

/// The longest the watchdog sleeps between two looks at the clocks (100 ms).
pub(crate) const WATCHDOG_TICK: Duration = Duration::from_millis(100);

/// When writes may start, measured from the last successful renewal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FenceDeadline {
    /// Boot-time clock reading taken just before the renewal's request was sent.
    pub(crate) renewed_mono: Duration,
    /// Wall-clock reading (UTC) taken at the same moment: the record's `renewed_at`.
    pub(crate) renewed_wall: DateTime<Utc>,
    /// How long after the renewal writes may start: two thirds of the TTL.
    pub window: Duration,
    /// Boot-time reading before which writes may not start yet (a takeover of
    /// a live lease waits for the old holder's fence to close); `None`: at once.
    /// Once it has passed, the fence still waits until a read finds the
    /// record at the key still ours ([`crate::bucket::BucketLease::end_wait`]
    /// clears it then).
    pub(crate) not_before_mono: Option<Duration>,
}

/// Why a fence is closed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FenceClosed {
    /// Two thirds of a TTL passed without a successful renewal.
    Expired,
    /// The wall clock moved this many seconds more (positive) or less
    /// (negative) than the boot-time clock since the last renewal.
    ClockStep(f64),
    /// This host's wall clock differs from the storage service's by this many
    /// seconds (service minus host), more than a third of the TTL.
    ClockOffset(f64),
    /// Someone else's record (or none) is at the key.
    Lost,
    /// The holder stopped renewing (released, or the keep-alive was stopped).
    Stopped,
}

impl std::fmt::Display for FenceClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FenceClosed::Expired => {
                f.write_str("no successful renewal for two thirds of a TTL")
            }
            FenceClosed::ClockStep(s) => write!(
                f,
                "the wall clock was stepped by {} since the last renewal; stamps would be wrong",
                format_secs(*s)
            ),
            FenceClosed::ClockOffset(s) => write!(
                f,
                "this host's clock is {} {} the storage service's, more than a third of the TTL; fix its time (NTP)",
                format_secs(s.abs()),
                if *s > 0.0 { "behind" } else { "ahead of" }
            ),
            FenceClosed::Lost => f.write_str("the lease was lost"),
            FenceClosed::Stopped => f.write_str("renewals were stopped"),
        }
    }
}

/// Where a fence stands at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FenceStatus {
    /// Not open yet; opens in this long (see [`FenceDeadline::not_before_mono`]).
    Waiting(Duration),
    /// Writes may start; the fence closes in this long unless renewed.
    Open(Duration),
    /// Writes must not start.
    Closed(FenceClosed),
}

impl FenceStatus {
    /// True while writes may start.
    pub fn is_open(&self) -> bool {
        matches!(self, FenceStatus::Open(_))
    }
}

/// Two thirds of `ttl`: how long after a renewal began writes may start.
fn fence_window(ttl: Duration) -> Duration {
    #[cfg(feature = "sim")]
    if defect::on(Defect::FenceAtFullTtl) {
        return ttl;
    }
    #[cfg(feature = "sim")]
    if defect::on(Defect::FenceClosesEarly) {
        return ttl / 6;
    }
    ttl * 2 / 3
}

impl FenceDeadline {
    /// The fence of a lease renewed at (`renewed_mono`, `renewed_wall`) with `ttl`.
    pub fn new(renewed_mono: Duration, renewed_wall: DateTime<Utc>, ttl: Duration) -> Self {
        Self {
            renewed_mono,
            renewed_wall,
            window: fence_window(ttl),
            not_before_mono: None,
        }
    }

    /// How far the wall clock may run apart from the boot-time clock between
    /// renewals before the fence distrusts it: a quarter of the window, at most 1 s.
    pub(crate) fn step_tolerance(&self) -> Duration {
        (self.window / 4).min(Duration::from_secs(1))
    }

    /// The fence at the clock's current readings.
    pub fn status(&self, clock: &dyn Clock) -> FenceStatus {
        let mono = clock.mono();
        let wall = clock.wall();
        let mono_elapsed = mono.saturating_sub(self.renewed_mono);
        let wall_elapsed_s = (wall - self.renewed_wall)
            .num_microseconds()
            .map(|us| us as f64 / 1e6)
            .unwrap_or(f64::MAX);
        let step = wall_elapsed_s - mono_elapsed.as_secs_f64();
        if step.abs() > self.step_tolerance().as_secs_f64() {
            return FenceStatus::Closed(FenceClosed::ClockStep(step));
        }
        let elapsed = mono_elapsed.max(Duration::from_secs_f64(wall_elapsed_s.max(0.0)));
        if elapsed >= self.window {
            return FenceStatus::Closed(FenceClosed::Expired);
        }
        if let Some(nb) = self.not_before_mono {
            // Until the wait has run out, and then until the read that ends
            // it (zero: look again shortly).
            return FenceStatus::Waiting(nb.saturating_sub(mono));
        }
        FenceStatus::Open(self.window - elapsed)
    }
}

/// The largest offset between this host's clock and the service's that a
/// lease's age is judged with: a twelfth of the TTL, in seconds. Holder and
/// contender may each be off by this much; with `bucket hold` killing its
/// command at most five sixths of a TTL after its last renewal, the two
/// offsets together stay inside the sixth of a TTL left before a takeover.
pub(crate) fn clock_offset_limit_s(ttl_s: u64) -> f64 {
    ttl_s as f64 / 12.0
}

/// True when an offset of `offset_s` ± `error_s` seconds is certainly beyond
/// [`clock_offset_limit_s`] of a `ttl_s` TTL: its distance from zero exceeds
/// the limit by more than the estimate's own uncertainty. The one form of
/// the rule ([`offset_beyond_limit`], the snapshot's reader-clock rule).
pub(crate) fn certainly_beyond_limit(offset_s: f64, error_s: f64, ttl_s: u64) -> bool {
    offset_s.abs() - error_s > clock_offset_limit_s(ttl_s)
}

/// `Some(offset_s)` when `offset` (service minus `clock`, seconds) is
/// certainly beyond [`clock_offset_limit_s`] ([`certainly_beyond_limit`]).
/// The estimate is the intersection of the service's `Date` intervals
/// ([`crate::clock::offset`]): ± about the round trip once answers at several
/// sub-second phases are in, ± half a second and half the round trip from one.
pub(crate) fn offset_beyond_limit(
    offset: &ServerOffset,
    clock: &dyn Clock,
    ttl_s: u64,
) -> Option<f64> {
    #[cfg(feature = "sim")]
    if super::defect::on(super::defect::Defect::OffsetCheckOff) {
        return None;
    }
    let o = offset.against(clock);
    certainly_beyond_limit(o, offset.error_s, ttl_s).then_some(o)
}

/// The holder's side of the rule, before a write that starts a tenure (an
/// acquire's, a takeover's): a host whose clock is certainly beyond
/// [`clock_offset_limit_s`] of the service's (`offset`, its estimate; none
/// known: nothing to refuse on) stamps `renewed_at` so far off that every
/// other reader misjudges the record's age, and its fence would close at the
/// first renewal anyway: it takes nothing. `ttl_s` is the TTL it would write.
///
/// Errors: [`super::LeaseError::HolderClock`].
pub(crate) fn check_holder_clock(
    offset: Option<ServerOffset>,
    clock: &dyn Clock,
    key: &str,
    ttl_s: u64,
) -> Result<(), super::LeaseError> {
    let Some(o) = offset else { return Ok(()) };
    match offset_beyond_limit(&o, clock, ttl_s) {
        Some(off) => Err(super::LeaseError::HolderClock {
            key: key.to_owned(),
            offset_s: off,
            error_s: o.error_s,
            limit_s: clock_offset_limit_s(ttl_s),
            ttl_s,
        }),
        None => Ok(()),
    }
}

/// What a close hook is told: the deadline the fence closed on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FenceClose {
    /// The deadline in force when it closed.
    pub deadline: FenceDeadline,
}

type Hook = Box<dyn FnOnce(FenceClose) + Send>;

struct Inner {
    deadline: FenceDeadline,
    closed: Option<FenceClosed>,
    hooks: Vec<Hook>,
}

/// A fence shared between the renewing task, its watchdog thread and the
/// writers: the single authority on whether writes may start. Closing is for
/// good. Its lock is a plain mutex held only for a few arithmetic steps, never
/// across an `.await`.
pub(crate) struct FenceCell {
    clock: SharedClock,
    inner: Mutex<Inner>,
    tx: watch::Sender<bool>,
    closed: CancellationToken,
}

impl FenceCell {
    /// A cell for `deadline`, read on `clock`.
    pub(crate) fn new(clock: SharedClock, deadline: FenceDeadline) -> Arc<Self> {
        let open = deadline.status(clock.as_ref()).is_open();
        let (tx, _) = watch::channel(open);
        Arc::new(Self {
            clock,
            inner: Mutex::new(Inner {
                deadline,
                closed: None,
                hooks: Vec::new(),
            }),
            tx,
            closed: CancellationToken::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A receiver of the fence: `true` while writes may start.
    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }

    /// Completes once the fence has closed (for good).
    pub(crate) async fn closed(&self) {
        self.closed.cancelled().await
    }

    /// Why the fence closed, once it has.
    pub(crate) fn closed_reason(&self) -> Option<FenceClosed> {
        self.lock().closed
    }

    /// Reads the clocks and publishes the result; closes the fence (for good)
    /// when its deadline has passed. Returns the status.
    pub(crate) fn check(&self) -> FenceStatus {
        #[cfg(feature = "sim")]
        if defect::on(Defect::FenceNeverCloses) {
            return FenceStatus::Open(Duration::from_secs(1));
        }
        let g = self.lock();
        if let Some(why) = g.closed {
            return FenceStatus::Closed(why);
        }
        let status = g.deadline.status(self.clock.as_ref());
        match status {
            FenceStatus::Closed(why) => {
                drop(g);
                self.close(why);
            }
            FenceStatus::Open(_) => {
                drop(g);
                self.tx.send_if_modified(|v| !std::mem::replace(v, true));
            }
            FenceStatus::Waiting(_) => {}
        }
        status
    }

    /// A renewal that began at `deadline.renewed_*` succeeded. Extends the
    /// fence unless it has closed meanwhile (then it stays closed: a renewal
    /// landing late never reopens it). Returns whether the fence is still
    /// alive: open, or waiting to open (a forced takeover's lease renews while
    /// the replaced holder's fence closes); false once closed.
    pub(crate) fn renewed(&self, mut deadline: FenceDeadline) -> bool {
        let mut g = self.lock();
        if g.closed.is_some() {
            return false;
        }
        if let FenceStatus::Closed(why) = g.deadline.status(self.clock.as_ref()) {
            drop(g);
            self.close(why);
            return false;
        }
        deadline.not_before_mono = deadline.not_before_mono.or(g.deadline.not_before_mono);
        g.deadline = deadline;
        drop(g);
        !matches!(self.check(), FenceStatus::Closed(_))
    }

    /// A forced takeover's wait is over: the read after it found the record
    /// still ours ([`crate::bucket::BucketLease::end_wait`]), so the fence
    /// opens (unless it has closed meanwhile). Returns whether it is still
    /// alive.
    pub(crate) fn wait_ended(&self) -> bool {
        let mut g = self.lock();
        if g.closed.is_some() {
            return false;
        }
        g.deadline.not_before_mono = None;
        drop(g);
        !matches!(self.check(), FenceStatus::Closed(_))
    }

    /// Closes the fence for good (no-op when already closed). Hooks run here,
    /// on the caller's thread, except after [`FenceClosed::Stopped`], which
    /// drops them unrun.
    pub(crate) fn close(&self, why: FenceClosed) {
        #[cfg(feature = "sim")]
        if defect::on(Defect::FenceCloseNoop) {
            return;
        }
        #[cfg(feature = "sim")]
        if why != FenceClosed::Stopped && defect::on(Defect::FenceNeverCloses) {
            return;
        }
        let (hooks, deadline) = {
            let mut g = self.lock();
            if g.closed.is_some() {
                return;
            }
            g.closed = Some(why);
            (std::mem::take(&mut g.hooks), g.deadline)
        };
        if why != FenceClosed::Stopped {
            // Hooks stop writers: they run first, before anything that could
            // wait (a lock, a log line, a wake-up of the runtime).
            for hook in hooks {
                hook(FenceClose { deadline });
            }
        }
        self.tx.send_replace(false);
        self.closed.cancel();
        match why {
            FenceClosed::Stopped => {}
            FenceClosed::Expired | FenceClosed::Lost => {
                tracing::warn!("fence closed: {why}; writes must stop")
            }
            _ => tracing::error!("fence closed: {why}; writes must stop"),
        }
    }

    /// Runs `hook` once when the fence closes (at once if it already has,
    /// unless it was [`FenceClosed::Stopped`]: then it is dropped unrun).
    /// Hooks run in the order they were added, on the watchdog thread or the
    /// closing task's thread: keep them short and non-blocking.
    pub(crate) fn on_close(&self, hook: impl FnOnce(FenceClose) + Send + 'static) {
        let mut g = self.lock();
        match g.closed {
            None => g.hooks.push(Box::new(hook)),
            Some(FenceClosed::Stopped) => {}
            Some(_) => {
                let deadline = g.deadline;
                drop(g);
                hook(FenceClose { deadline });
            }
        }
    }

    /// The simulator's watchdog (`sim` feature): the same loop as
    /// [`FenceCell::start_watchdog`], as a task on the (paused-time,
    /// single-threaded) runtime, so simulated time drives it.
    #[cfg(feature = "sim")]
    pub(crate) fn start_watchdog_task(self: &Arc<Self>) {
        let cell = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let pause = match cell.check() {
                    FenceStatus::Closed(_) => return,
                    FenceStatus::Open(d) => d,
                    // Nothing to open: the read that ends the wait does.
                    FenceStatus::Waiting(_) => WATCHDOG_TICK,
                };
                tokio::time::sleep(pause.clamp(Duration::from_millis(1), WATCHDOG_TICK)).await;
            }
        });
    }

    /// Starts the watchdog: a thread that re-reads the clocks at least every
    /// [`WATCHDOG_TICK`] (and exactly at the deadline) until the fence closes.
    pub(crate) fn start_watchdog(self: &Arc<Self>) -> std::io::Result<()> {
        let cell = Arc::clone(self);
        std::thread::Builder::new()
            .name("leasectl-fence".into())
            .spawn(move || {
                raise_priority();
                loop {
                    let pause = match cell.check() {
                        FenceStatus::Closed(_) => return,
                        FenceStatus::Open(d) => d,
                        // Nothing to open: the read that ends the wait does.
                        FenceStatus::Waiting(_) => WATCHDOG_TICK,
                    };
                    std::thread::sleep(pause.clamp(Duration::from_millis(1), WATCHDOG_TICK));
                }
            })
            .map(|_| ())
    }
}

/// Asks for real-time scheduling (`SCHED_FIFO`, lowest priority) for the
/// calling thread, where permitted (root or `CAP_SYS_NICE`): when a process
/// stopped together with its command resumes, the watchdog then runs before
/// ordinary threads on its CPU and its SIGKILL lands while the command is
/// still waking up. The thread sleeps between its short checks, so it takes
/// almost no CPU. Without the permission nothing changes.
fn raise_priority() {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: plain syscalls on the calling thread with a valid parameter.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc != 0 {
        tracing::debug!("fence watchdog runs at normal priority (no permission for SCHED_FIFO)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, SystemClock};

    fn t0() -> DateTime<Utc> {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn closes_at_two_thirds_of_the_ttl() {
        let c = ManualClock::new(t0());
        let d = FenceDeadline::new(c.mono(), c.wall(), Duration::from_secs(30));
        assert_eq!(d.status(&c), FenceStatus::Open(Duration::from_secs(20)));
        c.advance(Duration::from_millis(19_999));
        assert!(d.status(&c).is_open());
        c.advance(Duration::from_millis(1));
        assert_eq!(d.status(&c), FenceStatus::Closed(FenceClosed::Expired));
    }

    #[test]
    fn a_stepped_wall_clock_closes_it_either_way() {
        for jump in [-60i64, 60, -2, 2] {
            let c = ManualClock::new(t0());
            let d = FenceDeadline::new(c.mono(), c.wall(), Duration::from_secs(30));
            c.advance(Duration::from_secs(1));
            c.set_wall(c.wall() + chrono::Duration::seconds(jump));
            assert!(
                matches!(d.status(&c), FenceStatus::Closed(FenceClosed::ClockStep(s)) if (s - jump as f64).abs() < 1e-6),
                "jump {jump}: {:?}",
                d.status(&c)
            );
        }
    }

    #[test]
    fn a_frozen_boot_clock_is_caught_by_the_wall_clock() {
        // A clock that stopped (a suspend the boot-time clock missed) while the
        // wall clock ran 35 s: that is a step, and the fence is closed.
        let c = ManualClock::new(t0());
        let d = FenceDeadline::new(c.mono(), c.wall(), Duration::from_secs(30));
        c.set_wall(t0() + chrono::Duration::seconds(35));
        assert!(!d.status(&c).is_open());
    }

    #[test]
    fn a_late_renewal_never_reopens_a_closed_cell() {
        let c = ManualClock::new(t0());
        let clock: SharedClock = Arc::new(c.clone());
        let ttl = Duration::from_secs(9);
        let cell = FenceCell::new(clock, FenceDeadline::new(c.mono(), c.wall(), ttl));
        let rx = cell.subscribe();
        assert!(*rx.borrow());
        // A renewal begins before the deadline and lands after it.
        let begun = FenceDeadline::new(
            c.mono() + Duration::from_secs(5),
            c.wall() + chrono::Duration::seconds(5),
            ttl,
        );
        c.advance(Duration::from_secs(7));
        assert!(!cell.renewed(begun));
        assert!(!*rx.borrow());
        assert_eq!(cell.closed_reason(), Some(FenceClosed::Expired));
        // Even a renewal begun now cannot reopen it.
        assert!(!cell.renewed(FenceDeadline::new(c.mono(), c.wall(), ttl)));
        assert!(!cell.check().is_open());
    }

    #[test]
    fn waits_for_not_before_then_opens() {
        let c = ManualClock::new(t0());
        let clock: SharedClock = Arc::new(c.clone());
        let mut d = FenceDeadline::new(c.mono(), c.wall(), Duration::from_secs(30));
        d.not_before_mono = Some(c.mono() + Duration::from_secs(4));
        let cell = FenceCell::new(clock, d);
        assert!(matches!(cell.check(), FenceStatus::Waiting(w) if w == Duration::from_secs(4)));
        assert!(!*cell.subscribe().borrow());
        c.advance(Duration::from_secs(4));
        // Run out, the wait lasts until the read that ends it.
        assert_eq!(cell.check(), FenceStatus::Waiting(Duration::ZERO));
        assert!(!*cell.subscribe().borrow());
        assert!(cell.wait_ended());
        assert!(cell.check().is_open());
        assert!(*cell.subscribe().borrow());
    }

    #[test]
    fn a_wait_ended_after_the_fence_closed_does_not_open_it() {
        let c = ManualClock::new(t0());
        let clock: SharedClock = Arc::new(c.clone());
        let mut d = FenceDeadline::new(c.mono(), c.wall(), Duration::from_secs(30));
        d.not_before_mono = Some(c.mono() + Duration::from_secs(4));
        let cell = FenceCell::new(clock, d);
        c.advance(Duration::from_secs(20));
        assert_eq!(cell.check(), FenceStatus::Closed(FenceClosed::Expired));
        assert!(!cell.wait_ended());
        assert!(!*cell.subscribe().borrow());
    }

    #[test]
    fn a_renewal_while_waiting_keeps_the_fence_alive() {
        // A forced takeover's lease renews (every TTL/3) before the replaced
        // holder's fence has closed: the renewal must count, and the fence
        // open later, not be taken for a closed one (the keep-alive stopped
        // renewing on it, and a held lease expired a TTL later).
        let c = ManualClock::new(t0());
        let clock: SharedClock = Arc::new(c.clone());
        let ttl = Duration::from_secs(30);
        let mut d = FenceDeadline::new(c.mono(), c.wall(), ttl);
        d.not_before_mono = Some(c.mono() + Duration::from_secs(25));
        let cell = FenceCell::new(clock, d);
        c.advance(Duration::from_secs(10));
        assert!(cell.renewed(FenceDeadline::new(c.mono(), c.wall(), ttl)));
        assert!(matches!(cell.check(), FenceStatus::Waiting(_)));
        c.advance(Duration::from_secs(10));
        assert!(cell.renewed(FenceDeadline::new(c.mono(), c.wall(), ttl)));
        c.advance(Duration::from_secs(6));
        // Past the first deadline (10 s + 20 s) only because renewed: still
        // alive, and open once the read after the wait has ended it.
        assert_eq!(cell.check(), FenceStatus::Waiting(Duration::ZERO));
        assert!(cell.wait_ended());
        assert!(matches!(cell.check(), FenceStatus::Open(_)));
    }

    #[test]
    fn hooks_run_once_on_close_and_not_after_a_stop() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let c = ManualClock::new(t0());
        let ran = Arc::new(AtomicUsize::new(0));
        let cell = FenceCell::new(
            Arc::new(c.clone()),
            FenceDeadline::new(c.mono(), c.wall(), Duration::from_secs(3)),
        );
        let r = ran.clone();
        cell.on_close(move |_| {
            r.fetch_add(1, Ordering::SeqCst);
        });
        cell.close(FenceClosed::Lost);
        cell.close(FenceClosed::Expired);
        assert_eq!(ran.load(Ordering::SeqCst), 1);

        let stopped = FenceCell::new(
            Arc::new(c.clone()),
            FenceDeadline::new(c.mono(), c.wall(), Duration::from_secs(3)),
        );
        let r = ran.clone();
        stopped.on_close(move |_| {
            r.fetch_add(1, Ordering::SeqCst);
        });
        stopped.close(FenceClosed::Stopped);
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    /// The calling thread's scheduling policy (`SCHED_OTHER`, `SCHED_FIFO`…).
    fn scheduling_policy() -> i32 {
        // SAFETY: a plain query of the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    }

    /// Whether this system lets a thread of this process ask for
    /// `SCHED_FIFO` (root, `CAP_SYS_NICE`, or an `RLIMIT_RTPRIO` above 0,
    /// and no cgroup that refuses it): asked on a thread of its own, which
    /// then ends.
    fn real_time_permitted() -> bool {
        std::thread::spawn(|| {
            let param = libc::sched_param { sched_priority: 1 };
            // SAFETY: a plain syscall on the calling thread with a valid parameter.
            let rc = unsafe {
                libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param)
            };
            rc == 0
        })
        .join()
        .unwrap()
    }

    /// The watchdog is a thread of its own: with nobody else reading the
    /// clocks, it closes a fence on the real clocks at its deadline (a
    /// 300 ms TTL: 200 ms after the renewal), not before and not long
    /// after, and runs the close hooks on that thread — at real-time
    /// priority where the system permits it, so that it runs first when a
    /// stopped process resumes.
    #[test]
    fn the_watchdog_thread_closes_the_fence_at_its_deadline() {
        let clock = SystemClock::shared();
        let d = FenceDeadline::new(clock.mono(), clock.wall(), Duration::from_millis(300));
        let cell = FenceCell::new(clock.clone(), d);
        let (tx, rx) = std::sync::mpsc::channel();
        let on = clock.clone();
        cell.on_close(move |_| {
            let _ = tx.send((on.mono(), scheduling_policy()));
        });
        cell.start_watchdog().unwrap();
        let (at, policy) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the watchdog closes the fence");
        assert_eq!(cell.closed_reason(), Some(FenceClosed::Expired));
        let deadline = d.renewed_mono + d.window;
        assert!(at >= deadline, "closed {:?} early", deadline - at);
        // One tick is the promise; the rest is room for a loaded machine.
        assert!(
            at - deadline < WATCHDOG_TICK + Duration::from_secs(2),
            "closed {:?} after its deadline",
            at - deadline
        );
        if real_time_permitted() {
            assert_eq!(
                policy,
                libc::SCHED_FIFO,
                "the watchdog runs at real-time priority"
            );
        }
    }
}
