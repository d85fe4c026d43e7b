//! Issue 47 §2, with the real thing: two Prometheus servers (Debian's 2.42)
//! each keep their `hashmod` share of a file-discovered fleet of TARGETs on
//! moto and SeaweedFS and probe it through a `leasectl serve --module`
//! replica of their own, with the scrape and relabel configuration of
//! docs/monitoring.md, read from the document (only the file path, the
//! shard and the replica's address replaced): every target is scraped by
//! exactly one shard, the shards' series together are the whole fleet, and
//! a replica lost is `up == 0` for its shard's targets and no other.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::cli::record;
use crate::common::prometheus::{raw_get, value, Prometheus};
use crate::common::serve::Serve;
use crate::common::{self, moto, Moto, Server};

/// The scrape configuration of docs/monitoring.md: the yaml block after the
/// line that says the sharding test reads it.
fn documented_config() -> String {
    let doc = std::fs::read_to_string(common::repo().join("docs/monitoring.md")).unwrap();
    let (_, after) = doc
        .split_once("<!-- the sharding test reads the next yaml block -->")
        .expect("docs/monitoring.md has lost the sharding test's marker");
    let block = after
        .split_once("```yaml\n")
        .and_then(|(_, b)| b.split_once("```"))
        .map(|(b, _)| b.to_owned())
        .expect("no yaml block after the marker");
    block
}

/// `text` with `from` replaced by `to`, which must occur `times` times.
fn replace(text: &str, from: &str, to: &str, times: usize) -> String {
    assert_eq!(
        text.matches(from).count(),
        times,
        "docs/monitoring.md's block no longer has {from:?} {times} time(s):\n{text}"
    );
    text.replace(from, to)
}

/// Shard `shard`'s configuration: the documented block for this shard, the
/// discovery files in `sd_dir`, its probes sent to `replica`'s port.
fn shard_config(shard: u32, sd_dir: &std::path::Path, replica: u16) -> String {
    let block = documented_config();
    let block = replace(
        &block,
        "\"/etc/prometheus/leasectl-fleet/*.json\"",
        &format!("\"{}/*.json\"", sd_dir.display()),
        1,
    );
    let block = replace(&block, "regex: \"0\"", &format!("regex: \"{shard}\""), 1);
    let block = replace(
        &block,
        "\"leasectl-0.example:9899\"",
        &format!("\"127.0.0.1:{replica}\""),
        2,
    );
    format!("global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n{block}")
}

/// The fleet's targets of one server: `n` TARGETs `s3://BUCKET/tNN/`, each
/// with two fresh leases (`a/`, `b/`).
async fn fleet(server: Server, test: &str, n: usize) -> (String, Vec<String>) {
    let (endpoint, bucket) = server.bucket(test).await;
    let client = common::sdk_client(&endpoint);
    let mut targets = Vec::new();
    for i in 0..n {
        for p in ["a", "b"] {
            let key = format!("t{i:02}/{p}/LEASE");
            common::put_raw(&client, &bucket, &key, record(p, 1, 3600).as_bytes()).await;
        }
        targets.push(format!("s3://{bucket}/t{i:02}/"));
    }
    (bucket, targets)
}

/// `up` of the fleet's job in `p`, by instance (the TARGET).
fn ups(p: &Prometheus) -> BTreeMap<String, f64> {
    p.query("up{job=\"leasectl-fleet\"}")
        .iter()
        .map(|r| {
            (
                r["metric"]["instance"].as_str().unwrap().to_owned(),
                value(r),
            )
        })
        .collect()
}

/// Waits until `pred` holds of both servers' `up` (shard 0's, shard 1's).
fn wait_ups(
    shards: &[Prometheus; 2],
    what: &str,
    pred: impl Fn(&BTreeMap<String, f64>, &BTreeMap<String, f64>) -> bool,
) -> [BTreeMap<String, f64>; 2] {
    let end = Instant::now() + Duration::from_secs(90);
    loop {
        let now = [ups(&shards[0]), ups(&shards[1])];
        if pred(&now[0], &now[1]) {
            return now;
        }
        assert!(
            Instant::now() < end,
            "never {what}; up: {now:#?}\nshard 0's log:\n{}\nshard 1's log:\n{}",
            shards[0].log(),
            shards[1].log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_prometheus_shards_probe_the_fleet_through_two_replicas() {
    // 16 TARGETs (8 on each server): a hash modulo 2 leaves a shard
    // empty once in 32,768 runs.
    let (moto_bucket, moto_targets) = fleet(Server::Moto(Moto::Conditional), "fleet", 8).await;
    let (weed_bucket, weed_targets) = fleet(Server::Seaweed, "fleet", 8).await;
    let module_of: BTreeMap<String, &str> = moto_targets
        .iter()
        .map(|t| (t.clone(), "moto"))
        .chain(weed_targets.iter().map(|t| (t.clone(), "seaweedfs")))
        .collect();
    let all: BTreeSet<String> = module_of.keys().cloned().collect();

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[contexts.moto]\nendpoint_url = \"{}\"\npath_style = true\nallow = [\"s3://{moto_bucket}/\"]\n\n\
             [contexts.seaweedfs]\nendpoint_url = \"{}\"\npath_style = true\nallow = [\"s3://{weed_bucket}/\"]\n",
            moto(Moto::Conditional).endpoint(),
            common::seaweedfs().endpoint()
        ),
    )
    .unwrap();
    let sd = dir.path().join("sd");
    std::fs::create_dir_all(&sd).unwrap();
    let groups = serde_json::json!([
        {"targets": moto_targets, "labels": {"module": "moto"}},
        {"targets": weed_targets, "labels": {"module": "seaweedfs"}},
    ]);
    std::fs::write(sd.join("fleet.json"), groups.to_string()).unwrap();

    let (replicas, shards) = tokio::task::block_in_place(|| {
        let args = ["--module", "moto", "--module", "seaweedfs"];
        let replicas = [
            Serve::start(dir.path(), "replica-0", &config, &args),
            Serve::start(dir.path(), "replica-1", &config, &args),
        ];
        let shards = [
            Prometheus::start(&shard_config(0, &sd, replicas[0].port), &[]),
            Prometheus::start(&shard_config(1, &sd, replicas[1].port), &[]),
        ];
        (replicas, shards)
    });
    let mut replicas = replicas.map(Some);

    // Every target scraped, and up, by exactly one shard.
    let [up0, up1] = tokio::task::block_in_place(|| {
        wait_ups(&shards, "every target up in one shard", |a, b| {
            a.len() + b.len() == all.len() && a.values().chain(b.values()).all(|v| *v == 1.0)
        })
    });
    let keys0: BTreeSet<String> = up0.keys().cloned().collect();
    let keys1: BTreeSet<String> = up1.keys().cloned().collect();
    assert!(keys0.is_disjoint(&keys1), "{keys0:?} and {keys1:?}");
    assert_eq!(&keys0 | &keys1, all);
    assert!(!keys0.is_empty() && !keys1.is_empty(), "a shard is empty");

    // The shards' lease series together are the whole fleet, each lease in
    // one shard, labelled with its TARGET (instance) and module.
    let want: BTreeSet<(String, String)> = all
        .iter()
        .flat_map(|t| {
            let key = t
                .split_once("//")
                .unwrap()
                .1
                .split_once('/')
                .unwrap()
                .1
                .to_owned();
            ["a/", "b/"].map(|p| (t.clone(), format!("{key}{p}")))
        })
        .collect();
    let mut seen: Vec<BTreeSet<(String, String)>> = Vec::new();
    for (i, p) in shards.iter().enumerate() {
        let rows = tokio::task::block_in_place(|| {
            p.wait_query(
                "leasectl_lease_state{job=\"leasectl-fleet\",state=\"fresh\"} == 1",
                Duration::from_secs(60),
                "every lease of the shard fresh",
                |r| r.len() == 2 * [&keys0, &keys1][i].len(),
            )
        });
        let mut set = BTreeSet::new();
        for r in &rows {
            let m = &r["metric"];
            let target = m["target"].as_str().unwrap().to_owned();
            assert_eq!(m["instance"], m["target"], "{r}");
            assert_eq!(m["module"], module_of[&target], "{r}");
            set.insert((target, m["prefix"].as_str().unwrap().to_owned()));
        }
        let success = p.query("leasectl_probe_success{job=\"leasectl-fleet\"} == 1");
        assert_eq!(success.len(), [&keys0, &keys1][i].len(), "{success:?}");
        seen.push(set);
    }
    assert!(seen[0].is_disjoint(&seen[1]));
    assert_eq!(&seen[0] | &seen[1], want);

    // Each replica keeps the state of its shard's targets alone.
    for (i, r) in replicas.iter().enumerate() {
        let port = r.as_ref().unwrap().port;
        let (_, metrics) = tokio::task::spawn_blocking(move || raw_get(port, "/metrics"))
            .await
            .unwrap()
            .unwrap();
        let n = [&keys0, &keys1][i].len();
        assert!(
            metrics
                .lines()
                .any(|l| l == format!("leasectl_probe_state_targets {n}")),
            "replica {i}:\n{metrics}"
        );
    }
    let exporter_up = tokio::task::block_in_place(|| {
        shards[1].wait_query(
            "up{job=\"leasectl-fleet-exporter\"}",
            Duration::from_secs(60),
            "the exporter scraped",
            |v| !v.is_empty(),
        )
    });
    assert_eq!(exporter_up.len(), 1);
    assert_eq!(value(&exporter_up[0]), 1.0);

    // Replica 1 is lost: shard 1's targets are up == 0, shard 0's stay up.
    drop(replicas[1].take());
    let [up0, up1] = tokio::task::block_in_place(|| {
        wait_ups(&shards, "shard 1's targets down", |_, b| {
            b.len() == keys1.len() && b.values().all(|v| *v == 0.0)
        })
    });
    assert_eq!(up1.keys().cloned().collect::<BTreeSet<_>>(), keys1);
    assert_eq!(up0.keys().cloned().collect::<BTreeSet<_>>(), keys0);
    assert!(up0.values().all(|v| *v == 1.0), "{up0:?}");
    let exporter_up: Vec<Value> = tokio::task::block_in_place(|| {
        shards[1].wait_query(
            "up{job=\"leasectl-fleet-exporter\"}",
            Duration::from_secs(60),
            "the lost replica scraped as down",
            |v| v.first().is_some_and(|e| value(e) == 0.0),
        )
    });
    assert_eq!(value(&exporter_up[0]), 0.0);
}
