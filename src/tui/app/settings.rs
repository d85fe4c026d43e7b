//! The console's settings: what its front end (the console command, the
//! demo) and its loop set before it runs; [`super::App::update`] never
//! changes them.

use std::time::Duration;

use super::requests::DEFAULT_GET_PRICE;
use crate::bucket::Exclusion;

/// The console's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// TARGET URLs as given.
    pub targets: Vec<String>,
    /// Watch mode: no write request can be built.
    pub read_only: bool,
    /// The exclusion mode chosen at start (conditional or best-effort).
    pub exclusion: Exclusion,
    /// Refresh interval.
    pub refresh: Duration,
    /// Listings run every this many refreshes (GETs every refresh).
    pub relist_every: u32,
    /// TTL of leases this console writes, seconds (the watch needed for suspect records).
    pub ttl_s: u64,
    /// Where the audit log is (OPS).
    pub audit_path: Option<String>,
    /// US dollars per 1,000 GET requests, for the cost estimate (`--get-price`).
    pub get_price: f64,
    /// The request budget, requests per minute (`--max-requests`): the help
    /// says how often it lets a row off screen be read.
    pub max_requests: u32,
}

impl Settings {
    /// The defaults for a console on `targets`.
    pub fn new(targets: Vec<String>, read_only: bool, refresh: Duration) -> Self {
        Self {
            targets,
            read_only,
            exclusion: Exclusion::Conditional,
            refresh,
            relist_every: 1,
            ttl_s: crate::bucket::record::DEFAULT_TTL_S,
            audit_path: None,
            get_price: DEFAULT_GET_PRICE,
            max_requests: crate::snapshot::DEFAULT_MAX_REQUESTS,
        }
    }
}
