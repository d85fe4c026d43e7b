//! The one-TTL watch: a suspect or malformed record is taken over only after
//! it has been seen unchanged for one TTL (`leasectl takeover` watches here;
//! the console counts the same rule from its own reads, judged by
//! [`super::preflight`]).

use std::time::Duration;

use crate::bucket::{judge, read_lease, LeaseState, LeaseWatch, Observed};
use crate::clock::SharedClock;
use crate::store::{ObjectStore, StoreError};

/// How a [`watch_one_ttl`] ended.
#[derive(Debug)]
pub(crate) enum Watched {
    /// Seen unchanged (still suspect or malformed) for `for_` (≥ the TTL):
    /// the record last read.
    Unchanged {
        /// The last reading (its ETag is the takeover's precondition).
        seen: Observed,
        /// How long the same ETag was seen.
        for_: Duration,
    },
    /// The record became something else (its state now): look again.
    Changed(LeaseState),
    /// The LEASE could not be read: the watch cannot vouch for anything.
    Unreadable(StoreError),
}

/// Re-reads `key` every sixth of `ttl` (200 ms to 5 s) until its ETag has
/// been seen unchanged for `ttl`, starting from `seen` (read just now), or
/// until the record stops being suspect or malformed (judged at the reader's
/// clock), or a read fails.
pub(crate) async fn watch_one_ttl(
    store: &dyn ObjectStore,
    key: &str,
    mut seen: Observed,
    ttl: Duration,
    clock: &SharedClock,
) -> Watched {
    let mut watch = LeaseWatch::new();
    let step = (ttl / 6).clamp(Duration::from_millis(200), Duration::from_secs(5));
    loop {
        let etag = seen.etag().unwrap_or("").to_owned();
        let watched_for = watch.observe(&etag, clock.mono());
        if watched_for >= ttl {
            return Watched::Unchanged {
                seen,
                for_: watched_for,
            };
        }
        tokio::time::sleep(step.min(ttl - watched_for)).await;
        seen = match read_lease(store, key, None).await {
            Ok(o) => o,
            Err(e) => return Watched::Unreadable(e),
        };
        let st = judge(&seen, clock.wall()).state;
        if !matches!(st, LeaseState::Suspect | LeaseState::Malformed) {
            return Watched::Changed(st);
        }
    }
}
