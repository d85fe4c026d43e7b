//! The injectable clock: wall time (UTC) and a monotonic reading.
//!
//! Every judgement of a lease is made by the reader's own clock, so the clock is
//! a value passed in, never `SystemTime::now()` read in place. Tests move the
//! wall clock to model skew between a holder and a contender, and step the
//! monotonic clock to model elapsed time.
//!
//! The service's clock against this host's is estimated in [`offset`] (from
//! the intersection of its answers' `Date` intervals).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

pub(crate) mod offset;
pub use offset::ServerOffset;
pub(crate) use offset::{DateAnswer, OffsetEstimator};

/// A source of time. `wall()` is UTC wall-clock time; `mono()` is the time since
/// an arbitrary fixed origin on a clock that never goes backwards and keeps
/// counting while the machine is suspended (Linux `CLOCK_BOOTTIME`; tokio's
/// timers and `std::time::Instant` use `CLOCK_MONOTONIC`, which stops during a
/// suspend, so no deadline of a lease is measured on them). A clock may borrow
/// (one made of a function, for a one-off gather); a [`SharedClock`] is owned.
pub trait Clock: Send + Sync {
    /// Wall-clock time, UTC.
    fn wall(&self) -> DateTime<Utc>;
    /// Monotonic time since this clock's origin.
    fn mono(&self) -> Duration;
    /// How far the host's system wall clock (the one a store's answers are
    /// timed by, [`ServerOffset`]) is ahead of this clock's wall time, in
    /// seconds: about 0 for [`SystemClock`]. A simulated host, whose system
    /// clock this clock is, says exactly 0.
    fn system_ahead_s(&self) -> f64 {
        (Utc::now() - self.wall())
            .num_microseconds()
            .unwrap_or(i64::MAX) as f64
            / 1e6
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// The machine's clocks: `Utc::now()` and `CLOCK_BOOTTIME`.
#[derive(Debug, Clone)]
pub struct SystemClock {
    origin: Duration,
}

/// Reads `CLOCK_BOOTTIME` (time since boot, suspend included). Falls back to
/// `CLOCK_MONOTONIC` where the kernel lacks it (before Linux 2.6.39).
pub(crate) fn boottime() -> Duration {
    use nix::time::{clock_gettime, ClockId};
    let ts = clock_gettime(ClockId::CLOCK_BOOTTIME)
        .or_else(|_| clock_gettime(ClockId::CLOCK_MONOTONIC))
        .unwrap_or_else(|_| nix::sys::time::TimeSpec::new(0, 0));
    Duration::new(
        ts.tv_sec().max(0) as u64,
        ts.tv_nsec().clamp(0, 999_999_999) as u32,
    )
}

impl SystemClock {
    /// A system clock whose monotonic origin is now.
    pub fn new() -> Self {
        Self { origin: boottime() }
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
        boottime().saturating_sub(self.origin)
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
/// [`ManualClock::advance`]; in the crate's unit tests the wall reading alone
/// jumps with `ManualClock::set_wall`.
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
    #[cfg(test)]
    pub(crate) fn set_wall(&self, wall: DateTime<Utc>) {
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

/// `t` without a leap second: chrono represents `23:59:60` as `23:59:59`
/// with a fraction of one second or more, which it writes back as `:60`,
/// a time that Python's `datetime`, Go's `time.Parse` and most JSON consumers
/// refuse. Such an instant is moved to the last nanosecond of second 59
/// (written `23:59:59.999999Z` to the microsecond); every other time is
/// returned unchanged.
pub(crate) fn without_leap_second(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::Timelike;
    if t.nanosecond() >= 1_000_000_000 {
        t.with_nanosecond(999_999_999).unwrap_or(t)
    } else {
        t
    }
}

/// `t` as RFC 3339 UTC (`…Z`) with the given precision, never with a leap
/// second ([`without_leap_second`]): the one way leasectl writes a time.
pub(crate) fn rfc3339(t: DateTime<Utc>, precision: chrono::SecondsFormat) -> String {
    without_leap_second(t).to_rfc3339_opts(precision, true)
}

/// Serde: a time as [`rfc3339`] in UTC (`Z`), truncated to microseconds,
/// with as many fraction digits as that leaves (none, 3 or 6): the one
/// format of every time leasectl writes, which every RFC 3339 parser
/// (Python's `fromisoformat` too) reads.
pub(crate) fn ser_rfc3339<S: serde::Serializer>(
    t: &DateTime<Utc>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(to_micros(*t), chrono::SecondsFormat::AutoSi))
}

/// `t` truncated to whole microseconds.
pub(crate) fn to_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::Timelike;
    t.with_nanosecond(t.nanosecond() / 1000 * 1000).unwrap_or(t)
}

/// `t` rounded up to whole microseconds (a "not before" moment written at
/// the precision of every output stays not before).
pub(crate) fn ceil_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    let down = to_micros(t);
    if down < t {
        down + chrono::Duration::microseconds(1)
    } else {
        down
    }
}

/// A time as a person reads it in leasectl's output: the same format as
/// [`ser_rfc3339`] writes (RFC 3339, `Z`, at most microseconds).
pub fn shown(t: DateTime<Utc>) -> String {
    rfc3339(to_micros(t), chrono::SecondsFormat::AutoSi)
}

/// Serde: an optional time as [`ser_rfc3339`] writes it, or null.
pub(crate) fn ser_opt_rfc3339<S: serde::Serializer>(
    t: &Option<DateTime<Utc>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_rfc3339(t, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod leap_tests {
    use super::*;

    #[test]
    fn a_leap_second_is_written_as_the_end_of_second_59() {
        let t = DateTime::parse_from_rfc3339("2016-12-31T23:59:60.5Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            rfc3339(t, chrono::SecondsFormat::Micros),
            "2016-12-31T23:59:59.999999Z"
        );
        assert_eq!(
            rfc3339(t, chrono::SecondsFormat::Millis),
            "2016-12-31T23:59:59.999Z"
        );
        let u = DateTime::parse_from_rfc3339("2016-12-31T23:59:59.25Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(without_leap_second(u), u);
    }
}
