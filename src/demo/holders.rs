//! The simulated holders: tasks on the real engine ([`BucketLease`],
//! [`KeepAlive`]) that renew, die, contend, and the static records.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{DemoError, DEMO_TTL_S, MALFORMED_BODY, SUSPECT_SKEW_H};
use crate::bucket::{
    lease_key, BucketLease, Exclusion, KeepAlive, LeaseConfig, LeaseError, LeaseWatch,
};
use crate::clock::{SharedClock, SkewedClock};
use crate::store::{ObjectStore, PutCondition};

/// One simulated bucket-lease holder.
#[derive(Debug, Clone)]
pub(super) struct HolderSpec {
    pub(super) prefix: &'static str,
    pub(super) instance_id: &'static str,
    pub(super) exclusion: Exclusion,
    /// Stop renewing (without releasing) after this long.
    pub(super) dies_after: Option<Duration>,
}

/// The static records: data without a lease, a torn write, a clock 6 h fast.
pub(super) async fn put_static_records(store: &Arc<dyn ObjectStore>) -> Result<(), DemoError> {
    store
        .put(
            "archive-db/chunk-000001.bin",
            b"archived backup data\n".to_vec(),
            PutCondition::None,
        )
        .await?;
    store
        .put(
            &lease_key("ledger-db/"),
            MALFORMED_BODY.to_vec(),
            PutCondition::IfNoneMatch,
        )
        .await?;
    let fast: SharedClock = Arc::new(SkewedClock::new(chrono::Duration::hours(SUSPECT_SKEW_H)));
    // The real engine on a wrong clock: the record is stamped 6 h ahead,
    // then never renewed (the holder went away).
    BucketLease::acquire_as(
        store.clone(),
        fast,
        "audit-db/",
        "clock-6h-fast",
        LeaseConfig {
            ttl_s: 30,
            exclusion: Exclusion::Conditional,
            ..LeaseConfig::default()
        },
        &mut LeaseWatch::new(),
    )
    .await?;
    Ok(())
}

/// Renews `lease` until the demo ends (then releases it), the holder's time
/// to die comes (then it stops renewing and never releases: a crash), or the
/// lease is lost (someone took it over).
pub(super) async fn keep(lease: BucketLease, spec: HolderSpec, cancel: CancellationToken) {
    // Made once per holder: its size does not matter.
    #[allow(clippy::large_enum_variant)]
    enum End {
        Quit,
        Die,
        Lost(Result<BucketLease, LeaseError>),
    }
    let mut ka = KeepAlive::start(lease);
    let die = async {
        match spec.dies_after {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let end = tokio::select! {
        _ = cancel.cancelled() => End::Quit,
        _ = die => End::Die,
        r = ka.lost() => End::Lost(r),
    };
    match end {
        End::Quit => {
            let _ = ka.stop_and_release().await;
        }
        End::Die => {
            let _ = ka.stop().await;
            tracing::info!(
                prefix = spec.prefix,
                holder = spec.instance_id,
                "demo holder died: no more renewals, no release; the lease goes stale after its TTL"
            );
        }
        End::Lost(Ok(lease)) => {
            // The fence closed (e.g. renewals failed for two thirds of a TTL).
            let _ = lease.release().await;
            tracing::warn!(
                prefix = spec.prefix,
                holder = spec.instance_id,
                "demo holder's fence closed; it stopped and released its lease"
            );
        }
        End::Lost(Err(e)) => {
            tracing::warn!(
                prefix = spec.prefix,
                holder = spec.instance_id,
                "demo holder lost its lease: {e}"
            );
        }
    }
}

/// A contender: retries the acquire until the current holder's lease may be
/// taken over, then renews like [`keep`].
pub(super) async fn contend(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    spec: HolderSpec,
    cancel: CancellationToken,
) {
    let mut watch = LeaseWatch::new();
    let config = LeaseConfig {
        ttl_s: DEMO_TTL_S,
        exclusion: spec.exclusion,
        ..LeaseConfig::default()
    };
    let lease = loop {
        let wait = match BucketLease::acquire_as(
            store.clone(),
            clock.clone(),
            spec.prefix,
            spec.instance_id,
            config.clone(),
            &mut watch,
        )
        .await
        {
            Ok(lease) => break lease,
            // Check again when it may be taken over (the holder may renew meanwhile).
            Err(LeaseError::HeldByOther { may_take_in_s, .. }) => {
                Duration::from_secs_f64(may_take_in_s.clamp(0.0, DEMO_TTL_S as f64))
                    + Duration::from_millis(200)
            }
            Err(LeaseError::UnderWatch { remaining, .. }) => remaining,
            Err(e) => {
                tracing::warn!(prefix = spec.prefix, "demo contender: {e}");
                Duration::from_secs(1)
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    };
    tracing::info!(
        prefix = spec.prefix,
        holder = spec.instance_id,
        "demo contender took the lease over"
    );
    keep(lease, spec, cancel).await;
}
