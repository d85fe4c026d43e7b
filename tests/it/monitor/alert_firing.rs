//! Issue 47 §3, end to end: a real Prometheus evaluates the shipped alert
//! rules (assets/monitoring/leasectl.rules.yml, verbatim) against a real
//! `leasectl serve` (the static `/metrics` mode); a real `bucket hold` on
//! moto is killed, its lease goes stale, and `LeaseStale` fires — not before
//! its `for:` has passed since the lease went stale, and within that plus
//! the pipeline's intervals. The seconds from stale to pending and to
//! firing are printed (docs/monitoring.md states them).

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::cli::bin;
use crate::common::hold::{signal_group, Hold};
use crate::common::prometheus::{shipped_rules, Prometheus};
use crate::common::{self, moto, Moto};

/// The intervals of the run: serve's `--refresh`, Prometheus's scrape and
/// evaluation intervals (seconds). `LEASECTL_ALERT_INTERVALS=R,S,E`
/// overrides them (docs/monitoring.md's second row was measured so).
fn intervals() -> (u64, u64, u64) {
    let v: Vec<u64> = std::env::var("LEASECTL_ALERT_INTERVALS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_default();
    match v[..] {
        [r, s, e] => (r, s, e),
        _ => (1, 2, 2),
    }
}

/// The `for:` of `alert` in the shipped rules, in seconds.
fn for_of(rules: &str, alert: &str) -> u64 {
    let after = rules
        .split(&format!("- alert: {alert}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("{alert} is not in the shipped rules"));
    let block = after.split("- alert:").next().unwrap();
    let f = block
        .lines()
        .find_map(|l| l.trim().strip_prefix("for: "))
        .unwrap_or_else(|| panic!("{alert} has no for:"));
    let (n, unit) = f.split_at(f.len() - 1);
    let n: u64 = n.parse().unwrap();
    match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        u => panic!("unit {u}"),
    }
}

/// The alert `name` for prefix `db/` in Prometheus's answer, if any:
/// (state, activeAt).
fn lease_stale(alerts: &[serde_json::Value], target: &str) -> Option<(String, String)> {
    alerts
        .iter()
        .find(|a| {
            a["labels"]["alertname"] == "LeaseStale"
                && a["labels"]["target"] == target
                && a["labels"]["prefix"] == "db/"
        })
        .map(|a| {
            (
                a["state"].as_str().unwrap_or_default().to_owned(),
                a["activeAt"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

/// The LEASE record of `db/`, if it can be read.
async fn read_lease(client: &aws_sdk_s3::Client, bucket: &str) -> Option<serde_json::Value> {
    let o = client
        .get_object()
        .bucket(bucket)
        .key("db/LEASE")
        .send()
        .await
        .ok()?;
    let body = o.body.collect().await.ok()?.into_bytes();
    serde_json::from_slice(&body).ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stale_lease_alert_fires_in_a_real_prometheus() {
    let (refresh, scrape, eval) = intervals();
    let rules = shipped_rules();
    let hold_for = for_of(&rules, "LeaseStale");
    let m = moto(Moto::Conditional);
    let client = common::sdk_client(&m.endpoint());
    let bucket = common::bucket_name("alert-fires");
    common::create_bucket(&client, &bucket).await;
    let target = format!("s3://{bucket}/");
    let dir = tempfile::tempdir().unwrap();
    let mut hold = Hold::spawn(
        dir.path(),
        "holder",
        &m.endpoint(),
        &format!("{target}db/"),
        &["--ttl", "4s", "--instance-id", "alerted-holder"],
        &["sleep".into(), "1000".into()],
        &[],
    );
    let mut tries = 0;
    while read_lease(&client, &bucket).await.is_none() {
        tries += 1;
        assert!(
            tries < 100,
            "the holder never wrote its LEASE: {}",
            hold.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let serve_err = dir.path().join("serve.stderr");
    let mut serve = bin()
        .args(["--endpoint-url", &m.endpoint(), "--path-style"])
        .args(["serve", "--no-pod", "--listen", "127.0.0.1:0"])
        .args(["--refresh", &format!("{refresh}s"), &target])
        .env("XDG_DATA_HOME", dir.path())
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&serve_err).unwrap())
        .spawn()
        .unwrap();
    let port = common::lines::serve_port(&serve_err);
    let config = format!(
        "global:\n  scrape_interval: {scrape}s\n  evaluation_interval: {eval}s\n\
         rule_files:\n  - leasectl.rules.yml\n\
         scrape_configs:\n  - job_name: leasectl\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
    );
    let prom = tokio::task::block_in_place(|| {
        Prometheus::start(&config, &[("leasectl.rules.yml", rules.as_str())])
    });
    let fresh =
        format!("leasectl_lease_state{{target=\"{target}\",prefix=\"db/\",state=\"fresh\"}}");
    tokio::task::block_in_place(|| {
        prom.wait_query(&fresh, Duration::from_secs(60), "the fresh lease", |r| {
            r.len() == 1 && crate::common::prometheus::value(&r[0]) == 1.0
        })
    });
    assert_eq!(lease_stale(&prom.alerts(), &target), None);

    // The holder dies without releasing; its last record says when the
    // lease turns stale: renewed_at + ttl_s.
    signal_group(hold.pgid(), libc::SIGKILL);
    let _ = hold.exit_code(Duration::from_secs(10)).await;
    let rec = read_lease(&client, &bucket)
        .await
        .expect("the dead holder's LEASE");
    assert_eq!(rec["instance_id"], "alerted-holder");
    let renewed: chrono::DateTime<chrono::Utc> =
        rec["renewed_at"].as_str().unwrap().parse().unwrap();
    let stale_at = renewed + chrono::Duration::seconds(rec["ttl_s"].as_i64().unwrap());

    // Polled every 100 ms: when LeaseStale is first pending, then firing.
    let bound = hold_for + refresh + scrape + 2 * eval + 60;
    let (mut pending, mut firing) = (None, None);
    let started = Instant::now();
    let mut active_at = String::new();
    while firing.is_none() {
        let alerts = tokio::task::block_in_place(|| prom.alerts());
        let now = chrono::Utc::now();
        if let Some((state, at)) = lease_stale(&alerts, &target) {
            pending.get_or_insert(now);
            active_at = at;
            if state == "firing" {
                firing = Some(now);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(bound + 10),
            "LeaseStale did not fire within {bound} s of the kill (pending since {pending:?}); alerts: {alerts:#?}\nserve: {}",
            std::fs::read_to_string(&serve_err).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = |t: chrono::DateTime<chrono::Utc>| (t - stale_at).num_milliseconds() as f64 / 1000.0;
    let to_pending = secs(pending.unwrap());
    let to_firing = secs(firing.unwrap());
    let active: chrono::DateTime<chrono::Utc> = active_at.parse().unwrap();
    eprintln!(
        "LeaseStale: stale at {stale_at}; active (pending) at {active} ({:.1} s), seen pending {to_pending:.1} s, \
         firing seen {to_firing:.1} s after the lease went stale (for: {hold_for} s, serve --refresh {refresh} s, \
         scrape {scrape} s, evaluation {eval} s)",
        secs(active)
    );
    // Never before its `for:` has passed since the lease went stale (the
    // evaluation that first saw it stale came after it was), and within
    // the `for:` plus one refresh, one scrape and two evaluations (a
    // minute's slack for a loaded machine).
    assert!(secs(active) >= 0.0, "active before the lease was stale");
    assert!(
        to_firing >= hold_for as f64,
        "fired {to_firing} s after stale, before its for: ({hold_for} s)"
    );
    assert!(to_firing <= bound as f64, "{to_firing} s");
    // The stale lease is what Prometheus holds: the series it fired on.
    let stale = prom.query(&format!(
        "leasectl_lease_state{{target=\"{target}\",prefix=\"db/\",state=\"stale\"}}"
    ));
    assert_eq!(stale.len(), 1);
    assert_eq!(crate::common::prometheus::value(&stale[0]), 1.0);
    // SAFETY: kill(2) on a child this test started.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    assert_eq!(serve.wait().unwrap().code(), Some(0));
}
