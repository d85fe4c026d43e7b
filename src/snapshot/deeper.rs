//! Leases deeper than the listing went: when every prefix of a TARGET is
//! absent, one bounded look ([`ObjectRead::sample_keys`]: one listing
//! without delimiter) for `LEASE` keys below the depth listed, so that a
//! mistyped monitoring target (`s3://backups/` for leases under
//! `s3://backups/db1/x/`) is said, with the `--depth` that finds them, and
//! never reads as all clear.
//!
//! [`ObjectRead::sample_keys`]: crate::store::ObjectRead::sample_keys

use super::model::{DeeperLeases, Snapshot};
use super::target_read::OpenTarget;
use crate::bucket::LeaseState;

/// The `LEASE` keys among `keys` (all under `root`) deeper than `depth`
/// levels below `root`, internal ones (`.leasectl-*`) left out: the smallest
/// depth that finds one, and an example prefix at that depth.
pub(crate) fn deeper_leases(root: &str, keys: &[String], depth: u32) -> Option<DeeperLeases> {
    let mut best: Option<(u32, String)> = None;
    let mut seen = 0usize;
    for k in keys {
        let Some(rest) = k.strip_prefix(root) else {
            continue;
        };
        let segments: Vec<&str> = rest.split('/').collect();
        let Some((last, dirs)) = segments.split_last() else {
            continue;
        };
        if *last != "LEASE" || dirs.iter().any(|s| s.starts_with(".leasectl-")) {
            continue;
        }
        let d = u32::try_from(dirs.len()).unwrap_or(u32::MAX);
        if d <= depth {
            continue;
        }
        seen += 1;
        let prefix = format!("{root}{}/", dirs.join("/"));
        if best
            .as_ref()
            .is_none_or(|(bd, bp)| (d, &prefix) < (*bd, bp))
        {
            best = Some((d, prefix));
        }
    }
    best.map(|(depth, example)| DeeperLeases {
        depth,
        example,
        seen,
    })
}

/// For each target of `snap` gathered whole whose every row is absent (or
/// that has none), one bounded look under it for `LEASE` keys deeper than
/// `depth`; what it finds is the target's [`TargetReport::deeper_leases`].
/// A store that cannot look, or whose look fails, adds nothing (the rows
/// stand as read). `targets` are those `snap` was gathered from, in order.
///
/// [`TargetReport::deeper_leases`]: super::TargetReport::deeper_leases
pub(crate) async fn look_deeper(targets: &[OpenTarget], snap: &mut Snapshot, depth: u32) {
    let looks = targets
        .iter()
        .zip(snap.targets.iter_mut())
        .filter(|(_, r)| {
            r.error.is_none()
                && r.errors.is_empty()
                && r.prefixes.iter().all(|p| p.state == LeaseState::Absent)
        });
    let found = futures::future::join_all(looks.map(|(t, r)| async move {
        let root = t.target.prefix();
        match t.store.sample_keys(root).await {
            Ok(keys) => r.deeper_leases = deeper_leases(root, &keys, depth),
            Err(e) => tracing::debug!("no look below {}: {e}", t.target),
        }
    }));
    found.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_shallowest_lease_below_the_listed_depth_names_the_depth() {
        let k = keys(&[
            "db1/data/part-0",
            "db1/x/y/LEASE",
            "prod/a/LEASE",
            "prod/LEASE.bak",
            "LEASE",
        ]);
        assert_eq!(
            deeper_leases("", &k, 1),
            Some(DeeperLeases {
                depth: 2,
                example: "prod/a/".into(),
                seen: 2
            })
        );
        assert_eq!(deeper_leases("", &k, 3), None);
        // Under a root prefix, depths count from it.
        let k = keys(&["backups/db1/a/LEASE"]);
        assert_eq!(
            deeper_leases("backups/", &k, 1).map(|d| (d.depth, d.example)),
            Some((2, "backups/db1/a/".to_owned()))
        );
    }

    #[test]
    fn internal_keys_are_not_leases() {
        let k = keys(&["a/.leasectl-probe/b/LEASE", "a/LEASEX"]);
        assert_eq!(deeper_leases("", &k, 0), None);
    }
}
