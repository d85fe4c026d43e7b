//! The service's clock against this host's, to about the round trip, from
//! HTTP `Date` headers of one-second resolution (htpdate's technique).
//!
//! An answer whose `Date` reads `D` was stamped when the service's clock read
//! somewhere in `[D, D + 1 s)` (RFC 9110: the time the answer was made,
//! truncated to the second), at an instant between the request's sending
//! (`m0`) and the answer's arrival (`m1`) on this host's boot-time clock. So
//! the service's clock minus this host's boot-time clock lies in
//! `[D − m1, D + 1 s − m0]`: one second plus the round trip wide. Answers
//! stamped at different sub-second phases cut different pieces off that
//! second; their intersection narrows to about the round trip.
//! [`ServerOffset::lead`] tells a caller that sends requests on a schedule
//! (the keep-alive's renewals) how much earlier to send the next one so that
//! a second of the service's clock begins while it is in flight, at the
//! middle of what is still unknown: each such answer halves the interval.
//!
//! The intersection is kept against the boot-time clock
//! ([`crate::clock::boottime`], `CLOCK_BOOTTIME`), which no one steps: a step
//! of this host's wall clock (NTP, an operator) leaves it intact, and the
//! offset from the wall clock is read at the moment it is asked for. Two
//! clocks also run at different rates: every bound is widened by
//! [`DRIFT_PPM`] of its age on each side before it is intersected or read.
//! When a new interval misses the intersection altogether, one of the clocks
//! moved more than that allows — the service's was stepped, or this host's
//! boot-time clock misbehaved — and the estimate starts again from the new
//! answer (said at WARN).
//!
//! One estimator per store handle serves every consumer: the S3 store's
//! interceptor ([`crate::store`]) and the simulator's store feed it, and the
//! offset check (`bucket::fence::offset_beyond_limit`: acquire, keep-alive,
//! takeover), the snapshot's reader-clock rule and `probe` read it.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Clock;
use crate::text::format_secs;

/// How fast the service's clock and this host's may run apart, in parts per
/// million: each bound of the estimate is widened by this much of its age.
/// Quartz oscillators are specified within ±100 ppm and NTP-disciplined
/// clocks hold a few ppm; 500 ppm leaves room for both ends being poor.
pub(crate) const DRIFT_PPM: i64 = 500;

/// While the estimate is wider than this (± seconds, or the round trip when
/// that is longer), [`ServerOffset::lead`] aims requests at a second's edge.
const AIM_ABOVE_S: f64 = 0.025;

const US: i64 = 1_000_000;

/// What one answer says of the service's clock: its `Date`, and this host's
/// clocks around the request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DateAnswer {
    /// The answer's `Date` (UTC, whole seconds as HTTP writes it; a fraction,
    /// if any, is dropped).
    pub date: DateTime<Utc>,
    /// This host's boot-time clock when the request was sent.
    pub(crate) sent_mono: Duration,
    /// This host's boot-time clock when the answer arrived.
    pub(crate) received_mono: Duration,
    /// This host's system wall clock (UTC) when the answer arrived.
    pub(crate) received_wall: DateTime<Utc>,
}

impl DateAnswer {
    /// The interval this answer puts the service's clock minus this host's
    /// boot-time clock in, microseconds: `[D − m1, D + 1 s − m0]`. `None`
    /// when the answer arrived before its request left (a broken clock).
    fn interval_us(&self) -> Option<(i64, i64)> {
        let m0 = i64::try_from(self.sent_mono.as_micros()).ok()?;
        let m1 = i64::try_from(self.received_mono.as_micros()).ok()?;
        if m1 < m0 {
            return None;
        }
        let d = self.date.timestamp().checked_mul(US)?;
        Some((d - m1, d + US - m0))
    }
}

/// The intersection so far: bounds of service minus boot-time clock
/// (microseconds), as of `mono_us` on the boot-time clock.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bounds {
    lo_us: i64,
    hi_us: i64,
    mono_us: i64,
}

impl Bounds {
    /// These bounds `at_us` (boot-time clock), widened for drift since.
    fn aged(&self, at_us: i64) -> (i64, i64) {
        let w = drift_us(at_us - self.mono_us);
        (self.lo_us - w, self.hi_us + w)
    }
}

/// What drift can do in `age_us` (microseconds, rounded up; none for a
/// negative age).
fn drift_us(age_us: i64) -> i64 {
    ((age_us.max(0) as i128 * DRIFT_PPM as i128 + US as i128 - 1) / US as i128) as i64
}

/// The service's clock offset from the intersection of its answers' `Date`
/// intervals. Feed it every answer ([`OffsetEstimator::add`]); read it with
/// [`OffsetEstimator::estimate`].
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct OffsetEstimator {
    bounds: Option<Bounds>,
    /// The latest answer's round trip (microseconds) and arrival (wall).
    latest: Option<(i64, DateTime<Utc>)>,
    /// Answers intersected since the estimate (re)started.
    answers: u32,
    /// How often the intersection went empty and the estimate restarted.
    restarts: u32,
}

impl OffsetEstimator {
    /// An estimator that has seen no answer.
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Narrows the estimate with `answer`. Returns the gap, in seconds, by
    /// which its interval missed the intersection so far when it missed it
    /// (positive: the service's clock is now further ahead than the bounds
    /// allowed): the estimate then restarts from this answer, and this is
    /// said at WARN. An answer that arrived before it was sent is ignored.
    pub(crate) fn add(&mut self, answer: DateAnswer) -> Option<f64> {
        let (lo, hi) = answer.interval_us()?;
        let m1 = i64::try_from(answer.received_mono.as_micros()).ok()?;
        let m0 = i64::try_from(answer.sent_mono.as_micros()).ok()?;
        self.latest = Some((m1 - m0, answer.received_wall));
        // The interval holds at the stamping, somewhere in the round trip:
        // at the arrival, drift may have moved it that much more.
        let (lo, hi) = (lo - drift_us(m1 - m0), hi + drift_us(m1 - m0));
        let fresh = Bounds {
            lo_us: lo,
            hi_us: hi,
            mono_us: m1,
        };
        let Some(old) = self.bounds else {
            self.bounds = Some(fresh);
            self.answers = 1;
            return None;
        };
        let (old_lo, old_hi) = old.aged(m1);
        let (new_lo, new_hi) = (old_lo.max(lo), old_hi.min(hi));
        if new_lo > new_hi {
            let gap_s = if lo > old_hi {
                (lo - old_hi) as f64 / 1e6
            } else {
                -((old_lo - hi) as f64 / 1e6)
            };
            tracing::warn!(
                "the storage service's clock moved {} {} than a drift of {DRIFT_PPM} ppm allows since its earlier answers (a clock step): the estimate of its offset starts again from this answer (± {})",
                format_secs(gap_s.abs()),
                if gap_s > 0.0 { "further ahead" } else { "further back" },
                format_secs((hi - lo) as f64 / 2e6)
            );
            self.bounds = Some(fresh);
            self.answers = 1;
            self.restarts = self.restarts.saturating_add(1);
            return Some(gap_s);
        }
        self.bounds = Some(Bounds {
            lo_us: new_lo,
            hi_us: new_hi,
            mono_us: m1,
        });
        self.answers = self.answers.saturating_add(1);
        None
    }

    /// Forgets every answer (an answer without a usable `Date`: the service's
    /// clock is unknown until the next one).
    pub(crate) fn reset(&mut self) {
        self.bounds = None;
        self.latest = None;
        self.answers = 0;
    }

    /// How often the intersection went empty (a clock step) and restarted.
    #[cfg(test)]
    pub(crate) fn restarts(&self) -> u32 {
        self.restarts
    }

    /// The estimate now, against the system wall clock: `mono_now` and
    /// `wall_now` are this host's boot-time clock and system wall clock (UTC)
    /// read together now. `None` before any answer.
    pub(crate) fn estimate(
        &self,
        mono_now: Duration,
        wall_now: DateTime<Utc>,
    ) -> Option<ServerOffset> {
        let b = self.bounds?;
        let (rtt_us, at) = self.latest?;
        let mono_us = i64::try_from(mono_now.as_micros()).ok()?;
        let (lo, hi) = b.aged(mono_us);
        // Service − wall = (service − boot-time) + (boot-time − wall), now.
        let wall_us = wall_now.timestamp_micros();
        let shift = mono_us - wall_us;
        let (lo, hi) = (lo + shift, hi + shift);
        Some(ServerOffset {
            offset_s: (lo as f64 + hi as f64) / 2e6,
            error_s: (hi - lo) as f64 / 2e6,
            at,
            rtt_s: rtt_us as f64 / 1e6,
            answers: self.answers,
        })
    }
}

/// The estimate of a storage service's clock against this host's system
/// wall clock ([`OffsetEstimator`]): the middle and half-width of the
/// interval the true offset is known to lie in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerOffset {
    /// Service time minus this host's system wall clock, in seconds: positive
    /// when this host's clock is behind the service's.
    pub offset_s: f64,
    /// Half the width of the interval the true offset lies in, in seconds:
    /// half a second plus half the round trip from one answer, down to about
    /// half the round trip once answers at several phases are intersected,
    /// widened by [`DRIFT_PPM`] of the estimate's age.
    pub error_s: f64,
    /// When the latest answer arrived, by the system wall clock (UTC).
    pub at: DateTime<Utc>,
    /// The latest answer's round trip, seconds.
    pub(crate) rtt_s: f64,
    /// How many answers the estimate was made from.
    pub answers: u32,
}

impl ServerOffset {
    /// The offset against `clock` instead of the system clock: service time
    /// minus `clock.wall()`, in seconds. Equal to `offset_s` for
    /// [`super::SystemClock`]; a [`super::SkewedClock`] running ahead by `s`
    /// gets `offset_s - s`.
    pub(crate) fn against(&self, clock: &dyn Clock) -> f64 {
        self.offset_s + clock.system_ahead_s()
    }

    /// How much earlier than `after` from now (on `clock`) to send the next
    /// request so that the service's clock turns a whole second at the
    /// middle of this estimate while the request is in flight (expected at
    /// half the latest round trip): its answer then halves what is unknown.
    /// Zero once the estimate is within ±25 ms (or the round trip, when
    /// longer), and when the lead needed is more than `max`: never later.
    pub(crate) fn lead(&self, clock: &dyn Clock, after: Duration, max: Duration) -> Duration {
        if self.error_s <= AIM_ABOVE_S.max(self.rtt_s) {
            return Duration::ZERO;
        }
        let after = chrono::Duration::from_std(after).unwrap_or(chrono::Duration::MAX);
        let Some(nominal_us) = clock
            .wall()
            .checked_add_signed(after)
            .map(|t| t.timestamp_micros())
        else {
            return Duration::ZERO;
        };
        // The service's clock at the expected stamping, by the estimate's
        // middle; sent `lead` earlier it reads a whole second.
        let stamped = nominal_us as f64 / 1e6 + self.rtt_s / 2.0 + self.against(clock);
        let lead = Duration::from_secs_f64(stamped.rem_euclid(1.0));
        if lead > max {
            Duration::ZERO
        } else {
            lead
        }
    }
}

#[cfg(test)]
mod tests;
