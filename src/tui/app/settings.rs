//! The console's settings: what its front end (the console command, the
//! demo) chose, each in one place; the console's builder (`tui::Parts`)
//! makes the gatherer and the write task from them, and
//! [`super::App::update`] never changes them.

use std::path::PathBuf;
use std::time::Duration;

use super::requests::DEFAULT_GET_PRICE;
use crate::bucket::record::DEFAULT_TTL_S;
use crate::bucket::{Exclusion, LeaseConfig, RecordFormat};
use crate::snapshot::DEFAULT_MAX_REQUESTS;
use crate::target::Target;

/// The console's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The TARGETs, in the order given.
    pub targets: Vec<Target>,
    /// Watch mode: no write request can be built.
    pub read_only: bool,
    /// The exclusion mode chosen at start (conditional or best-effort).
    pub exclusion: Exclusion,
    /// Refresh interval (at least 1 s).
    pub refresh: Duration,
    /// Listings run every this many refreshes (GETs every refresh).
    pub relist_every: u32,
    /// TTL of leases this console writes, seconds (the watch needed for suspect records).
    pub ttl_s: u64,
    /// The fields of the LEASE records this console writes.
    pub record_format: RecordFormat,
    /// The audit log the console follows (its entries in the detail pane and
    /// the holder history) and, in OPS mode, writes its takeovers to.
    pub audit_path: Option<PathBuf>,
    /// US dollars per 1,000 GET requests, for the cost estimate (`--get-price`).
    pub get_price: f64,
    /// The request budget, requests per minute (`--max-requests`): the help
    /// says how often it lets a row off screen be read.
    pub max_requests: u32,
}

impl Settings {
    /// The defaults for a console on `targets`.
    pub fn new(targets: Vec<Target>, read_only: bool, refresh: Duration) -> Self {
        Self {
            targets,
            read_only,
            exclusion: Exclusion::Conditional,
            refresh,
            relist_every: 1,
            ttl_s: DEFAULT_TTL_S,
            record_format: RecordFormat::default(),
            audit_path: None,
            get_price: DEFAULT_GET_PRICE,
            max_requests: DEFAULT_MAX_REQUESTS,
        }
    }

    /// The URL of the TARGET at `index` (`?` when there is none), as it is
    /// shown (escape it where it is drawn).
    pub(crate) fn target_url(&self, index: usize) -> String {
        self.targets
            .get(index)
            .map_or_else(|| "?".to_owned(), Target::to_string)
    }

    /// The leases this console's takeovers write: its TTL, exclusion mode
    /// and record format.
    pub fn lease(&self) -> LeaseConfig {
        LeaseConfig {
            ttl_s: self.ttl_s,
            exclusion: self.exclusion,
            record_format: self.record_format,
        }
    }
}
