//! The command a simulated holder runs, as `bucket hold` runs it: started
//! once the acquire hands the lease out (with its fence open), it writes
//! whenever it likes — it never asks `may_write` — and stops only when the
//! fence's close reaches it: the close hook `bucket hold` arms
//! ([`crate::hold`]: SIGTERM, then SIGKILL `--grace` later but no later than
//! the deadline plus the grace, at once when that has passed), or when it
//! exits by itself, or with its process (a crash).
//!
//! The checker's part is S5: a holder that has learned it lost, or whose
//! fence has passed its deadline, has its command stopped within the grace.
//! Both moments are taken from what the holder's store handle saw, not from
//! the engine: the deadline from the last write of the LEASE answered to it
//! (two thirds of a TTL after that write was sent), the loss from the first
//! read of the LEASE answered with another record while its command runs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;

use super::clock::SimClock;
use super::state::{Property, Shared, Tenure};
use crate::bucket::{FenceClose, KeepAlive};
use crate::clock::Clock as _;

/// How a simulated command answers SIGTERM.
#[derive(Debug, Clone, Copy)]
enum OnTerm {
    /// It exits at once.
    Exits,
    /// It exits this long after SIGTERM (perhaps after the grace: then SIGKILL).
    Finishes(Duration),
    /// It ignores SIGTERM: only SIGKILL stops it.
    Ignores,
}

/// A running command: when (holder's boot-time clock) the close hook made
/// sure it is dead, once the fence has closed.
pub(super) struct Command {
    dies_at: Arc<Mutex<Option<Duration>>>,
    clock: SimClock,
}

impl Command {
    /// Starts the command of a lease kept by `ka`, drawing how it answers
    /// SIGTERM from `rng`, and arms the close hook as `bucket hold` does
    /// with `grace`.
    pub(super) fn start(
        ka: &KeepAlive,
        clock: SimClock,
        grace: Duration,
        rng: &mut StdRng,
    ) -> Self {
        let on_term = match rng.random_range(0..10) {
            0..4 => OnTerm::Exits,
            4..8 => OnTerm::Finishes(Duration::from_millis(
                rng.random_range(0..=grace.as_millis() as u64 * 3 / 2),
            )),
            _ => OnTerm::Ignores,
        };
        let dies_at = Arc::new(Mutex::new(None));
        let (cell, hook_clock) = (dies_at.clone(), clock.clone());
        ka.on_close(move |close: FenceClose| {
            let dies = stop_at(&hook_clock, close, grace, on_term);
            *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(dies);
        });
        Self { dies_at, clock }
    }

    /// True once the close has reached it and it is dead.
    pub(super) fn dead(&self) -> bool {
        let dies = *self.dies_at.lock().unwrap_or_else(|e| e.into_inner());
        dies.is_some_and(|d| self.clock.mono() >= d)
    }
}

/// When a command answering SIGTERM `on_term` is dead after the fence closed
/// with `close`: `bucket hold`'s stop sequence (`hold::stop_command`) — SIGKILL
/// `grace` after SIGTERM, never later than the deadline plus `grace`, and at
/// once (no SIGTERM) when that moment has passed.
fn stop_at(clock: &SimClock, close: FenceClose, grace: Duration, on_term: OnTerm) -> Duration {
    let now = clock.mono();
    let last = close.deadline.renewed_mono + close.deadline.window + grace;
    if now >= last {
        return now;
    }
    let kill_at = (now + grace).min(last);
    match on_term {
        OnTerm::Exits => now,
        OnTerm::Finishes(d) => (now + d).min(kill_at),
        OnTerm::Ignores => kill_at,
    }
}

impl Shared {
    /// Holder `h`'s command started under `tenure` (S5 watches it).
    pub(super) fn command_started(&mut self, h: usize, tenure: &Tenure) {
        self.holding[h] = Some(tenure.clone());
        self.learned_lost[h] = None;
    }

    /// Holder `h`'s command is gone.
    pub(super) fn command_ended(&mut self, h: usize) {
        self.holding[h] = None;
    }

    /// Holder `h` sent a write of the LEASE at `sent` (its boot-time clock)
    /// and was answered that it landed.
    pub(super) fn lease_write_answered(&mut self, h: usize, sent: Duration) {
        let last = &mut self.lease_written_mono[h];
        *last = Some(last.map_or(sent, |l| l.max(sent)));
    }

    /// Holder `h` read the LEASE at `at` (its boot-time clock) and was
    /// answered `seen` (the record's tenure; `None`: absent or no record).
    pub(super) fn lease_read_answered(&mut self, h: usize, seen: Option<Tenure>, at: Duration) {
        if let Some(t) = &self.holding[h] {
            if seen.as_ref() != Some(t) && self.learned_lost[h].is_none() {
                self.learned_lost[h] = Some(at);
            }
        }
    }

    /// S5, at a write of holder `h`'s command at `now` (its boot-time clock):
    /// no later than `grace` after its fence's deadline (`window` after the
    /// last write of the LEASE answered to it), nor after it learned it lost.
    pub(super) fn check_stopped(
        &mut self,
        h: usize,
        now: Duration,
        window: Duration,
        grace: Duration,
    ) {
        let Some(tenure) = self.holding[h].clone() else {
            return;
        };
        let deadline = self.lease_written_mono[h].map(|w| (w + window, "its fence's deadline"));
        let lost = self.learned_lost[h].map(|l| (l, "it learned it lost"));
        let first = match (deadline, lost) {
            (Some(d), Some(l)) => Some(if l.0 < d.0 { l } else { d }),
            (d, l) => d.or(l),
        };
        let Some((at, what)) = first else {
            return;
        };
        // The watchdog task closes the fence at the deadline to the
        // millisecond; a millisecond of slack for the rounding.
        let slack = Duration::from_millis(1);
        if now > at + grace + slack {
            let late = now - at - grace;
            let msg = format!(
                "h{h} ({}): its command still writes {} ms past the grace ({} ms) after {what}: the fence's close did not reach it",
                tenure.0,
                late.as_millis(),
                grace.as_millis()
            );
            self.violation(Property::S5, &tenure, msg);
        }
    }
}
