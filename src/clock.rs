//! The injectable clock: wall time (UTC) and a monotonic reading.
//!
//! Every judgement of a lease is made by the reader's own clock, so the clock is
//! a value passed in, never `SystemTime::now()` read in place. Tests move the
//! wall clock to model skew between a holder and a contender, and step the
//! monotonic clock to model elapsed time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

/// A source of time. `wall()` is UTC wall-clock time; `mono()` is the time since
/// an arbitrary fixed origin on a clock that never goes backwards (it may stop
/// while the machine is suspended, which is why the fence checks both).
pub trait Clock: Send + Sync + 'static {
    /// Wall-clock time, UTC.
    fn wall(&self) -> DateTime<Utc>;
    /// Monotonic time since this clock's origin.
    fn mono(&self) -> Duration;
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// The machine's clocks: `Utc::now()` and `Instant`.
#[derive(Debug, Clone)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A system clock whose monotonic origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    /// A shared system clock.
    pub fn shared() -> SharedClock {
        Arc::new(Self::new())
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn wall(&self) -> DateTime<Utc> {
        Utc::now()
    }
    fn mono(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// The system clock with its wall time shifted by a fixed offset (positive: ahead).
/// The monotonic reading is the system's. Used to model a machine whose clock is wrong.
#[derive(Debug, Clone)]
pub struct SkewedClock {
    inner: SystemClock,
    offset: chrono::Duration,
}

impl SkewedClock {
    /// A clock running `offset` ahead of the system's wall clock (negative: behind).
    pub fn new(offset: chrono::Duration) -> Self {
        Self {
            inner: SystemClock::new(),
            offset,
        }
    }
}

impl Clock for SkewedClock {
    fn wall(&self) -> DateTime<Utc> {
        self.inner.wall() + self.offset
    }
    fn mono(&self) -> Duration {
        self.inner.mono()
    }
}

/// A clock that moves only when told to: both readings advance together with
/// [`ManualClock::advance`]; the wall reading alone jumps with [`ManualClock::set_wall`].
#[derive(Debug, Clone)]
pub struct ManualClock {
    state: Arc<Mutex<(DateTime<Utc>, Duration)>>,
}

impl ManualClock {
    /// A manual clock reading `wall`, with a monotonic reading of zero.
    pub fn new(wall: DateTime<Utc>) -> Self {
        Self {
            state: Arc::new(Mutex::new((wall, Duration::ZERO))),
        }
    }

    /// Move both clocks forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 += chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        s.1 += by;
    }

    /// Set the wall clock only (a step such as NTP correcting, or a suspend the
    /// monotonic clock did not see).
    pub fn set_wall(&self, wall: DateTime<Utc>) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0 = wall;
    }
}

impl Clock for ManualClock {
    fn wall(&self) -> DateTime<Utc> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0
    }
    fn mono(&self) -> Duration {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1
    }
}
