//! How a gather runs: its options ([`GatherOptions`]), the per-request
//! deadline ([`timed`]) and the back-off when a service asks to slow down
//! ([`THROTTLE_RETRIES`], [`throttle_backoff`]). Shared by `discovery` and
//! `gather`; uses neither.

use std::time::Duration;

use crate::store::StoreError;

/// Requests in flight at once per target unless `--concurrency` says otherwise:
/// 128, chosen from a latency sweep (`scripts/compare.sh --only rtt`: at 30 ms RTT and
/// 10,000 prefixes: 20.6 s at 32, 9.8 s at 64, 5.1 s at 128, 5.0 s at 256 —
/// as fast as 256 with half the connections). A service that answers
/// `503 SlowDown` gets fewer (the gather halves its limit).
pub const DEFAULT_CONCURRENCY: u16 = 128;

/// `f`, failed with [`StoreError::Timeout`] (naming `what`) after `d`.
pub(crate) async fn timed<T>(
    d: Duration,
    what: &str,
    f: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(d, f)
        .await
        .unwrap_or_else(|_| Err(StoreError::Timeout(d, what.to_owned())))
}

/// Tries to slow down: how many times a throttled request is sent again
/// within one gather before it is reported as an error.
pub(crate) const THROTTLE_RETRIES: u32 = 6;

/// Back-off before the `n`-th retry of a throttled request: 100 ms doubling,
/// at most 5 s, with full jitter (AWS's advice for `SlowDown`).
pub(crate) fn throttle_backoff(n: u32) -> Duration {
    let cap = Duration::from_millis(100)
        .saturating_mul(1 << n.min(6))
        .min(Duration::from_secs(5));
    cap.mul_f64(rand::random_range(0.5..1.0))
}

/// How to gather.
#[derive(Debug, Clone)]
pub struct GatherOptions {
    /// Listing depth under each target (default 1).
    pub depth: u32,
    /// Requests in flight at once per target (default [`DEFAULT_CONCURRENCY`]).
    pub concurrency: usize,
    /// Deadline for each request (default 10 s).
    pub request_timeout: Duration,
}

impl Default for GatherOptions {
    fn default() -> Self {
        Self {
            depth: 1,
            concurrency: DEFAULT_CONCURRENCY as usize,
            request_timeout: Duration::from_secs(10),
        }
    }
}
