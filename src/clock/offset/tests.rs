//! The estimator against simulated clocks: a service whose clock runs at its
//! own rate from its own origin, a host whose boot-time clock is the time
//! base and whose wall clock sits anywhere (and is stepped), requests of
//! random round trips stamped anywhere in flight. Property-style: many cases
//! from seeded generators, each failure naming its case.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

/// A service and a host, in microseconds of the host's boot-time clock.
#[derive(Debug, Clone, Copy)]
struct Pair {
    /// The service's clock (µs since the epoch) at boot-time 0.
    service_at_0_us: i64,
    /// The service's rate against the host's boot-time clock, ppm.
    drift_ppm: i64,
    /// The host's wall clock (µs since the epoch) at boot-time 0.
    wall_at_0_us: i64,
}

impl Pair {
    fn service_us(&self, mono_us: i64) -> i64 {
        self.service_at_0_us + mono_us + mono_us * self.drift_ppm / 1_000_000
    }
    fn wall_us(&self, mono_us: i64) -> i64 {
        self.wall_at_0_us + mono_us
    }
    /// The true offset (service − wall) at `mono_us`, seconds.
    fn truth_s(&self, mono_us: i64) -> f64 {
        (self.service_us(mono_us) - self.wall_us(mono_us)) as f64 / 1e6
    }
    /// A request sent at `m0` and answered `rtt_us` later, stamped `at` of
    /// the way through (0..=1).
    fn answer(&self, m0: i64, rtt_us: i64, at: f64) -> DateAnswer {
        let stamped = m0 + (rtt_us as f64 * at) as i64;
        let date_s = self.service_us(stamped).div_euclid(1_000_000);
        let m1 = m0 + rtt_us;
        DateAnswer {
            date: DateTime::from_timestamp(date_s, 0).unwrap(),
            sent_mono: Duration::from_micros(m0 as u64),
            received_mono: Duration::from_micros(m1 as u64),
            received_wall: time(self.wall_us(m1)),
        }
    }
}

/// A host's system clock frozen at one reading (its wall clock is the
/// system's: [`Clock::system_ahead_s`] is 0).
struct At(DateTime<Utc>);

impl Clock for At {
    fn wall(&self) -> DateTime<Utc> {
        self.0
    }
    fn mono(&self) -> Duration {
        Duration::ZERO
    }
    fn system_ahead_s(&self) -> f64 {
        0.0
    }
}

fn time(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap()
}

fn mono(us: i64) -> Duration {
    Duration::from_micros(us as u64)
}

fn random_pair(rng: &mut StdRng) -> Pair {
    let wall_at_0_us = 1_780_000_000_000_000 + rng.random_range(0..1_000_000_000_000);
    Pair {
        service_at_0_us: wall_at_0_us + rng.random_range(-3_600_000_000..3_600_000_000),
        drift_ppm: rng.random_range(-DRIFT_PPM + 1..DRIFT_PPM),
        wall_at_0_us,
    }
}

/// The truth is inside every estimate: any offset, drift within the bound,
/// round trips of 0.1 ms to 2 s stamped anywhere in flight, answers seconds
/// to minutes apart at any phase, read at any moment after.
#[test]
fn the_truth_is_always_inside_the_estimate() {
    let mut rng = StdRng::seed_from_u64(48);
    for case in 0..400 {
        let p = random_pair(&mut rng);
        let mut e = OffsetEstimator::new();
        let mut m = rng.random_range(1_000_000..1_000_000_000i64);
        for n in 0..60 {
            let rtt = if rng.random_bool(0.1) {
                rng.random_range(100_000..2_000_000)
            } else {
                rng.random_range(100..40_000)
            };
            let a = p.answer(m, rtt, rng.random_range(0.0..=1.0));
            assert_eq!(e.add(a), None, "case {case} answer {n}: {p:?}");
            let q = m + rtt + rng.random_range(0..120_000_000);
            let o = e.estimate(mono(q), time(p.wall_us(q))).unwrap();
            let truth = p.truth_s(q);
            assert!(
                (o.offset_s - truth).abs() <= o.error_s + 1e-6,
                "case {case} answer {n}: truth {truth} outside {} ± {} ({p:?})",
                o.offset_s,
                o.error_s
            );
            m += rtt + rng.random_range(0..60_000_000);
        }
        assert_eq!(e.restarts(), 0, "case {case}");
    }
}

/// Answers at random phases narrow the estimate toward the round trip: one
/// answer gives ± (0.5 s + half the round trip); a thousand in quick
/// succession (the drift bound widens little between them), to within the
/// round trip, and in half the cases within 5 ms of half of it. (Far apart, random phases stall where the drift
/// bound widens the estimate as fast as they cut it: about ± the square
/// root of drift × spacing, ±22 ms at 500 ppm and a second: hence
/// [`ServerOffset::lead`].)
#[test]
fn random_phases_narrow_the_width_toward_the_round_trip() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut over_half = Vec::new();
    for case in 0..100 {
        let mut p = random_pair(&mut rng);
        p.drift_ppm = rng.random_range(-50..50);
        let rtt = rng.random_range(1_000..60_000i64);
        let mut e = OffsetEstimator::new();
        let mut m = 5_000_000i64;
        let mut widths = Vec::new();
        for _ in 0..1000 {
            e.add(p.answer(m, rtt, rng.random_range(0.0..=1.0)));
            let o = e.estimate(mono(m + rtt), time(p.wall_us(m + rtt))).unwrap();
            widths.push(o.error_s);
            m += rtt + rng.random_range(0..20_000);
        }
        let half_rtt = rtt as f64 / 2e6;
        assert!(
            (widths[0] - (0.5 + half_rtt)).abs() < 1e-4,
            "case {case}: one answer gives ± {}",
            widths[0]
        );
        let last = *widths.last().unwrap();
        assert!(
            last <= 2.0 * half_rtt + 0.003,
            "case {case}: ± {last} after 1000 answers of a {rtt} µs round trip"
        );
        over_half.push(last - half_rtt);
    }
    over_half.sort_by(f64::total_cmp);
    let median = over_half[over_half.len() / 2];
    assert!(
        median <= 0.005,
        "median {median} s over half the round trip"
    );
}

/// Requests sent `lead` early, as the keep-alive sends its renewals, halve
/// the estimate with each answer: from ± 0.5 s to within ± 25 ms (or the
/// round trip) in eight renewals or fewer, whatever the phase they would
/// have had. Each lead is at most the bound given, and zero once narrow.
#[test]
fn aimed_requests_halve_the_estimate() {
    let mut rng = StdRng::seed_from_u64(12);
    let mut needed = Vec::new();
    for case in 0..300 {
        let p = random_pair(&mut rng);
        let rtt = rng.random_range(1_000..30_000i64);
        let period = rng.random_range(2_000_000..10_000_000i64);
        let mut e = OffsetEstimator::new();
        let mut m = 1_000_000i64;
        e.add(p.answer(m, rtt, rng.random_range(0.0..=1.0)));
        m += rtt;
        let mut n = 0;
        loop {
            let clock = At(time(p.wall_us(m)));
            let o = e.estimate(mono(m), clock.wall()).unwrap();
            if o.error_s <= 0.025_f64.max(o.rtt_s) {
                break;
            }
            let max = Duration::from_secs(1);
            let lead = o.lead(&clock, Duration::from_micros(period as u64), max);
            assert!(lead <= max, "case {case}: lead {lead:?}");
            let send = m + period - lead.as_micros() as i64;
            e.add(p.answer(send, rtt, rng.random_range(0.0..=1.0)));
            m = send + rtt;
            n += 1;
            assert!(
                n <= 8,
                "case {case}: still ± {} after {n} aimed answers",
                o.error_s
            );
        }
        let clock = At(time(p.wall_us(m)));
        let o = e.estimate(mono(m), clock.wall()).unwrap();
        assert_eq!(
            o.lead(&clock, Duration::from_secs(10), Duration::from_secs(1)),
            Duration::ZERO,
            "case {case}: a narrow estimate still aims"
        );
        needed.push(n);
    }
    needed.sort();
    assert!(
        needed[needed.len() / 2] <= 6,
        "median {} aimed answers",
        needed[needed.len() / 2]
    );
}

/// A lead beyond the bound is not taken: a request is never moved later,
/// nor earlier than the caller allows.
#[test]
fn a_lead_is_never_more_than_allowed() {
    let mut rng = StdRng::seed_from_u64(3);
    for case in 0..2000 {
        let p = random_pair(&mut rng);
        let mut e = OffsetEstimator::new();
        e.add(p.answer(1_000_000, 5_000, rng.random_range(0.0..=1.0)));
        let clock = At(time(p.wall_us(1_005_000)));
        let o = e.estimate(mono(1_005_000), clock.wall()).unwrap();
        let max = Duration::from_millis(rng.random_range(0..1500));
        let lead = o.lead(&clock, Duration::from_secs(2), max);
        assert!(lead <= max, "case {case}: {lead:?} > {max:?}");
    }
}

/// A step of this host's wall clock moves the offset by exactly the step
/// and keeps its width: the intersection is kept on the boot-time clock.
#[test]
fn a_wall_clock_step_moves_the_offset_and_keeps_the_width() {
    let mut rng = StdRng::seed_from_u64(5);
    let mut p = random_pair(&mut rng);
    p.drift_ppm = 0;
    let mut e = OffsetEstimator::new();
    let mut m = 1_000_000i64;
    for _ in 0..100 {
        e.add(p.answer(m, 4_000, rng.random_range(0.0..=1.0)));
        m += 4_000 + rng.random_range(0..3_000_000);
    }
    let before = e.estimate(mono(m), time(p.wall_us(m))).unwrap();
    assert!(before.error_s < 0.1, "{before:?}");
    p.wall_at_0_us -= 7_250_000;
    let after = e.estimate(mono(m), time(p.wall_us(m))).unwrap();
    assert!(
        (after.offset_s - before.offset_s - 7.25).abs() < 1e-6,
        "{after:?}"
    );
    assert!((after.error_s - before.error_s).abs() < 1e-9);
    e.add(p.answer(m, 4_000, 0.5));
    assert_eq!(e.restarts(), 0);
    let o = e
        .estimate(mono(m + 4_000), time(p.wall_us(m + 4_000)))
        .unwrap();
    assert!((o.offset_s - p.truth_s(m + 4_000)).abs() <= o.error_s);
}

/// A step of the service's clock beyond the estimate empties the
/// intersection: the estimate restarts from the new answer, says by how
/// much it missed, and holds the new truth.
#[test]
fn a_service_clock_step_restarts_the_estimate() {
    let mut rng = StdRng::seed_from_u64(9);
    for step_us in [-90_000i64, 2_000_000, -30_000_000] {
        let mut p = random_pair(&mut rng);
        let mut e = OffsetEstimator::new();
        let mut m = 1_000_000i64;
        for _ in 0..100 {
            e.add(p.answer(m, 3_000, rng.random_range(0.0..=1.0)));
            m += 3_000 + rng.random_range(0..3_000_000);
        }
        p.service_at_0_us += step_us;
        let mut gap = None;
        for _ in 0..50 {
            if let Some(g) = e.add(p.answer(m, 3_000, rng.random_range(0.0..=1.0))) {
                gap = Some(g);
                m += 3_000;
                break;
            }
            m += 3_000 + rng.random_range(0..3_000_000);
        }
        let gap = gap.unwrap_or_else(|| panic!("a step of {step_us} µs went unseen"));
        assert_eq!(
            gap.signum(),
            step_us.signum() as f64,
            "step {step_us}: gap {gap}"
        );
        assert!(
            gap.abs() <= step_us.abs() as f64 / 1e6 + 1e-6,
            "step {step_us}: gap {gap}"
        );
        assert_eq!(e.restarts(), 1);
        let o = e.estimate(mono(m), time(p.wall_us(m))).unwrap();
        assert!((o.offset_s - p.truth_s(m)).abs() <= o.error_s, "{o:?}");
        assert_eq!(o.answers, 1);
    }
}

/// An estimate read later is wider by the drift bound over its age.
#[test]
fn an_old_estimate_widens_by_the_drift_bound() {
    let p = Pair {
        service_at_0_us: 1_780_000_000_250_000,
        drift_ppm: 0,
        wall_at_0_us: 1_780_000_000_000_000,
    };
    let mut e = OffsetEstimator::new();
    e.add(p.answer(10_000_000, 2_000, 0.5));
    let now = e
        .estimate(mono(10_002_000), time(p.wall_us(10_002_000)))
        .unwrap();
    let hour = 10_002_000 + 3_600_000_000;
    let later = e.estimate(mono(hour), time(p.wall_us(hour))).unwrap();
    let widened = later.error_s - now.error_s;
    assert!(
        (widened - 3600.0 * DRIFT_PPM as f64 / 1e6).abs() < 1e-5,
        "{widened}"
    );
    assert!((later.offset_s - now.offset_s).abs() < 1e-9);
}

/// An answer that arrived before it was sent (a broken clock) is ignored;
/// `reset` forgets every answer.
#[test]
fn impossible_answers_are_ignored_and_reset_forgets() {
    let p = Pair {
        service_at_0_us: 1_780_000_000_000_000,
        drift_ppm: 0,
        wall_at_0_us: 1_780_000_000_000_000,
    };
    let mut e = OffsetEstimator::new();
    let mut a = p.answer(5_000_000, 1_000, 0.5);
    std::mem::swap(&mut a.sent_mono, &mut a.received_mono);
    assert_eq!(e.add(a), None);
    assert_eq!(
        e.estimate(mono(6_000_000), time(p.wall_us(6_000_000))),
        None
    );
    e.add(p.answer(5_000_000, 1_000, 0.5));
    assert!(e
        .estimate(mono(6_000_000), time(p.wall_us(6_000_000)))
        .is_some());
    e.reset();
    assert_eq!(
        e.estimate(mono(6_000_000), time(p.wall_us(6_000_000))),
        None
    );
}
