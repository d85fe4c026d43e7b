//! How sure a race is: the chance that its rounds missed a check-then-write
//! window of a given length, from the spread of the answers it measured.
//!
//! A service that checks a precondition and writes a moment later lets two
//! contenders win only when the second one's request arrives inside that
//! window after the first one's. How likely that is depends on how far apart
//! concurrent requests arrive, which the client cannot choose: with answers
//! spread over 30 ms, four requests leave a 1 ms window unseen in most rounds.
//! So the acquire's check does not stop after a fixed number of rounds: it
//! estimates, from the round-trip times of every contender's request so far
//! (a request arrives no later than its answer), the chance `q` that one race
//! of N contenders has no second arrival within the window of the first, and
//! races on until `q` to the power of the races run is below the target.
//!
//! The estimate is the U-statistic over every N-subset of the measured times
//! (no time drawn twice: resampling with replacement would make ties that are
//! not there). It takes the arrivals as independent and as spread as the
//! answers, which overstates the spread (an answer adds the way back), so it
//! asks for more rounds, not fewer. A winner's answer that waited out a window
//! is later than its arrival; that too widens the spread measured.

use serde::Serialize;

/// How sure a race with a stopping target got.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Confidence {
    /// The check-then-write window it is sized to catch, milliseconds.
    pub window_ms: f64,
    /// The largest chance of having missed such a window it may stop at.
    pub target: f64,
    /// Concurrent requests per race.
    pub contenders: usize,
    /// Races run (the creates and the `If-Match` writes of every round).
    pub races: usize,
    /// The chance that one race misses the window, from the measured spread.
    pub miss_per_race: f64,
    /// The chance that every race run missed it: `miss_per_race ^ races`.
    pub miss: f64,
    /// Round-trip times measured (one per contender's request).
    pub samples: usize,
}

impl Confidence {
    /// True once the chance of a missed window is at most the target.
    pub fn reached(&self) -> bool {
        self.miss <= self.target
    }

    /// For people: `a 1 ms check-then-write window missed with probability
    /// 3e-6 (40 races of 4)`.
    pub fn sentence(&self) -> String {
        format!(
            "a check-then-write window of {} ms would have gone unseen with probability {:.0e} ({} races of {})",
            self.window_ms, self.miss, self.races, self.contenders
        )
    }
}

/// `ln C(a, b)`, the log of a binomial coefficient (`-inf` when `b > a`).
fn ln_choose(a: usize, b: usize) -> f64 {
    if b > a {
        return f64::NEG_INFINITY;
    }
    (0..b)
        .map(|t| ((a - t) as f64).ln() - ((t + 1) as f64).ln())
        .sum()
}

/// The chance that, of `n` requests sent together and arriving as spread as
/// `samples` (microseconds from sending, one per request seen), none arrives
/// within `window_us` after the first: the chance that one race of `n` misses
/// a check-then-write window that long. 1 when there are fewer than `n`
/// samples (nothing known yet).
pub fn miss_per_race(samples: &[u64], n: usize, window_us: u64) -> f64 {
    let m = samples.len();
    if n < 2 || m < n {
        return 1.0;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let total = ln_choose(m, n);
    // Every n-subset counted once, by its first sample in sorted order: it
    // misses the window when its n - 1 others all come `window_us` or more
    // later than that first one.
    let p: f64 = sorted
        .iter()
        .map(|&x| {
            let later = m - sorted.partition_point(|&y| y < x.saturating_add(window_us));
            (ln_choose(later, n - 1) - total).exp()
        })
        .sum();
    p.clamp(0.0, 1.0)
}

/// The `q`-quantile (0 to 1) of `samples`, if there are any.
pub fn quantile(samples: &[u64], q: f64) -> Option<u64> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let last = sorted.len().checked_sub(1)?;
    sorted
        .get(((last as f64) * q.clamp(0.0, 1.0)).round() as usize)
        .copied()
}

/// Where a race stands after `races` races of `n` contenders whose answers
/// took `samples` (microseconds), against a window of `window_us` and a
/// target chance of missing it.
pub fn assess(samples: &[u64], n: usize, races: usize, window_us: u64, target: f64) -> Confidence {
    let q = miss_per_race(samples, n, window_us);
    Confidence {
        window_ms: window_us as f64 / 1000.0,
        target,
        contenders: n,
        races,
        miss_per_race: q,
        miss: q.powi(races.min(i32::MAX as usize) as i32),
        samples: samples.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_within_the_window_leave_nothing_unseen() {
        // Every request answered within 0.5 ms of the first: a 1 ms window
        // always holds a second arrival.
        let s = [1_000, 1_200, 1_300, 1_500, 1_100, 1_400, 1_250, 1_450];
        assert_eq!(miss_per_race(&s, 4, 1_000), 0.0);
    }

    #[test]
    fn spread_far_apart_nothing_is_learnt() {
        // Answers 10 ms apart: no two within 1 ms, so a race misses every time.
        let s: Vec<u64> = (0..8).map(|i| i * 10_000).collect();
        assert_eq!(miss_per_race(&s, 4, 1_000), 1.0);
        assert_eq!(miss_per_race(&s[..3], 4, 1_000), 1.0, "too few samples");
    }

    #[test]
    fn uniform_spread_matches_the_spacing_law() {
        // Arrivals uniform over 28 ms: the first gap of n points exceeds w
        // with probability (1 - w/28)^n.
        let s: Vec<u64> = (0..2_800).map(|i| i * 10).collect();
        for n in [4, 16] {
            let q = miss_per_race(&s, n, 1_000);
            let law = (1.0 - 1.0 / 28.0f64).powi(n as i32);
            assert!((q - law).abs() < 0.01, "n {n}: {q} against {law}");
        }
    }

    #[test]
    fn quantiles() {
        let s: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&s, 0.9), Some(90));
        assert_eq!(quantile(&s, 0.0), Some(1));
        assert_eq!(quantile(&[], 0.9), None);
    }

    #[test]
    fn races_multiply() {
        let s: Vec<u64> = (0..2_800).map(|i| i * 10).collect();
        // A race of 4 over 28 ms misses a 1 ms window about 0.87 of the
        // time: 50 races leave 7e-4, 100 races 6e-7.
        let c = assess(&s, 4, 50, 1_000, 1e-5);
        assert!((c.miss - c.miss_per_race.powi(50)).abs() < 1e-12);
        assert!(!c.reached(), "{c:?}");
        let c = assess(&s, 4, 100, 1_000, 1e-5);
        assert!(c.reached(), "{c:?}");
    }
}
