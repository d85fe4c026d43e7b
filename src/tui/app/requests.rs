//! The stores' request totals over the last minute: the status bar's rates
//! and what the console's reads would cost on AWS S3.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

use crate::store::RequestCounts;
use crate::target::Target;

/// AWS S3 Standard's price of 1,000 GET requests in us-east-1, US dollars
/// (the default of `--get-price`).
pub const DEFAULT_GET_PRICE: f64 = 0.0004;

/// A LIST request costs this many GETs on AWS S3 Standard ($0.005 vs $0.0004 per 1,000).
pub const LIST_PRICE_RATIO: f64 = 12.5;

/// The shortest window a rate is shown from, seconds: from fewer, a burst
/// (a probe's hundreds of requests in a few seconds) would be extrapolated
/// to a minute and an hour; the status bar says "measuring" until then.
pub const RATE_WINDOW_MIN_S: f64 = 30.0;

/// Request rates over the last minute ([`Requests::rates`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// All requests per minute.
    pub requests_per_min: f64,
    /// LIST requests per minute (among all).
    pub lists_per_min: f64,
    /// Failed requests in the last minute.
    pub errors: u64,
    /// The seconds the rates are measured over (at most a minute).
    pub window_s: f64,
}

impl Rates {
    /// Whether the window is long enough to show the rates and the cost
    /// ([`RATE_WINDOW_MIN_S`]).
    pub fn measured(&self) -> bool {
        self.window_s >= RATE_WINDOW_MIN_S
    }
}

/// Request totals over the last minute, with when they were read.
#[derive(Debug, Default)]
pub struct Requests {
    counters: VecDeque<(DateTime<Utc>, RequestCounts)>,
}

impl Requests {
    /// Totals `c` read at `now`; readings older than a minute are dropped.
    pub(super) fn push(&mut self, now: DateTime<Utc>, c: RequestCounts) {
        self.counters.push_back((now, c));
        while self
            .counters
            .front()
            .is_some_and(|(t, _)| now - *t > chrono::Duration::seconds(60))
        {
            self.counters.pop_front();
        }
    }

    /// Request rates over the last minute (None before two readings a second apart).
    pub fn rates(&self) -> Option<Rates> {
        let (t0, c0) = *self.counters.front()?;
        let (t1, c1) = *self.counters.back()?;
        let secs = (t1 - t0).num_milliseconds() as f64 / 1000.0;
        if secs < 1.0 {
            return None;
        }
        let per_min = |a: u64, b: u64| b.saturating_sub(a) as f64 * 60.0 / secs;
        Some(Rates {
            requests_per_min: per_min(c0.requests, c1.requests),
            lists_per_min: per_min(c0.lists, c1.lists),
            errors: c1.errors.saturating_sub(c0.errors),
            window_s: secs,
        })
    }

    /// What reads at the current rate would cost per hour on AWS S3, in US
    /// dollars: GETs (and HEADs) at `get_price` per 1,000, LISTs at
    /// [`LIST_PRICE_RATIO`] times that. `None` when no TARGET in `targets`
    /// is on S3, or before [`RATE_WINDOW_MIN_S`] of readings.
    pub fn cost_per_hour(&self, targets: &[Target], get_price: f64) -> Option<f64> {
        if !targets.iter().any(|t| matches!(t, Target::S3 { .. })) {
            return None;
        }
        let r = self.rates().filter(Rates::measured)?;
        let gets = (r.requests_per_min - r.lists_per_min).max(0.0);
        let per_min = (gets + r.lists_per_min * LIST_PRICE_RATIO) * get_price / 1000.0;
        Some(per_min * 60.0)
    }
}
