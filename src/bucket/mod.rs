//! The bucket lease: an advisory single-writer lock object `{prefix}/LEASE`.
//!
//! It catches the common operator error — two machines configured with one
//! backup bucket — on services that honour conditional writes; it does not make
//! two writers safe. See [`lease`] for the protocol and what it promises.
//!
//! - [`record`]: the LEASE record, its parsing and writing, `lease_key`, `new_instance_id`.
//! - [`mod@judge`]: fresh / stale / suspect / malformed / absent by the reader's clock.
//! - [`lease`]: [`BucketLease`] — acquire, renew, fence, release; [`Exclusion`].
//! - [`fence`]: when a holder may write: deadlines, clock checks, the watchdog.
//! - [`keepalive`]: the renewal task and the fence watchdog.
//! - [`probe`]: does the service honour `If-None-Match` / `If-Match`?
//! - [`race`]: are those preconditions atomic under concurrent requests?
//! - [`watch`]: [`LeaseWatch`] for suspect and malformed records.

pub mod error;
pub mod fence;
pub mod judge;
pub mod keepalive;
pub mod lease;
pub mod probe;
pub mod race;
pub mod record;
pub mod watch;

pub use error::{LeaseError, CONDITIONAL_SWITCH};
pub use fence::{FenceClose, FenceClosed, FenceDeadline, FenceStatus};
pub use judge::{judge, Judgement, LeaseState, Observed};
pub use keepalive::{KeepAlive, ReleaseReport};
pub use lease::{read_lease, BucketLease, Exclusion, LeaseConfig, Released};
pub use record::{lease_key, new_instance_id, LeaseRecord, Malformed, MAX_SANE_TTL_S};
pub use watch::LeaseWatch;

/// Formats a number of seconds for people: `850ms`, `12.3s`, `4m05s`, `2h03m`, `3d04h`.
/// Negative values get a leading `-`.
pub fn format_secs(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    let neg = s < 0.0;
    let a = s.abs();
    let body = if a < 1.0 {
        format!("{}ms", (a * 1000.0).round() as u64)
    } else if a < 60.0 {
        format!("{a:.1}s")
    } else if a < 3600.0 {
        let t = a as u64;
        format!("{}m{:02}s", t / 60, t % 60)
    } else if a < 86400.0 {
        let t = a as u64;
        format!("{}h{:02}m", t / 3600, (t % 3600) / 60)
    } else {
        let t = a as u64;
        format!("{}d{:02}h", t / 86400, (t % 86400) / 3600)
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}
