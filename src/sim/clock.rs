//! Simulated clocks: true time is tokio's paused clock; each host reads it
//! through its own offset, drift and steps.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::clock::Clock;

/// True (simulated) time since the world began.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrueTime {
    origin: tokio::time::Instant,
    /// The wall time, UTC, at the origin.
    pub epoch: DateTime<Utc>,
}

impl TrueTime {
    /// A world starting now (tokio's paused clock) at wall time `epoch`.
    pub(crate) fn new(epoch: DateTime<Utc>) -> Self {
        Self {
            origin: tokio::time::Instant::now(),
            epoch,
        }
    }

    /// Time since the world began.
    pub(crate) fn now(&self) -> Duration {
        tokio::time::Instant::now() - self.origin
    }

    /// True wall time: the epoch plus [`TrueTime::now`].
    pub(crate) fn wall(&self) -> DateTime<Utc> {
        self.epoch + chrono::Duration::from_std(self.now()).unwrap_or(chrono::Duration::MAX)
    }
}

/// A host's clock error: a fixed offset, a drift, and wall steps.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ClockError {
    /// Wall offset at the origin, microseconds (positive: ahead).
    pub(crate) offset_us: i64,
    /// Drift of both clocks, parts per million (positive: fast).
    pub(crate) drift_ppm: i64,
    /// Sum of the wall steps so far, microseconds.
    pub(crate) steps_us: i64,
}

/// A simulated host clock.
#[derive(Debug, Clone)]
pub(crate) struct SimClock {
    truth: TrueTime,
    err: Arc<Mutex<ClockError>>,
}

impl SimClock {
    /// A host clock over `truth` with the error `err`.
    pub(crate) fn new(truth: TrueTime, err: ClockError) -> Self {
        Self {
            truth,
            err: Arc::new(Mutex::new(err)),
        }
    }

    fn err(&self) -> ClockError {
        *self.err.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Steps the wall clock by `us` microseconds (an NTP correction).
    pub(crate) fn step(&self, us: i64) {
        self.err.lock().unwrap_or_else(|e| e.into_inner()).steps_us += us;
    }

    fn drifted_us(&self) -> i64 {
        let t = self.truth.now().as_micros() as i64;
        t + t / 1_000_000 * self.err().drift_ppm
    }
}

impl Clock for SimClock {
    fn wall(&self) -> DateTime<Utc> {
        let e = self.err();
        self.truth.epoch
            + chrono::Duration::microseconds(self.drifted_us() + e.offset_us + e.steps_us)
    }
    fn mono(&self) -> Duration {
        Duration::from_micros(self.drifted_us().max(0) as u64)
    }
    /// The simulated host's system clock is this clock.
    fn system_ahead_s(&self) -> f64 {
        0.0
    }
}
