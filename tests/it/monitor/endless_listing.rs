//! Issue 44 item 4: a listing that never ends. A proxy in front of moto
//! forwards every listing (of objects and of versions) as a request for its
//! first page and answers it truncated, with a continuation token (or
//! version-id marker) never given before: the service's real entries come
//! back on every page, for ever. Every front end that lists stops in bounded
//! time and says the target is incomplete or unknown: `--json` (exit 1, the
//! reason in the target's error), `check` (UNKNOWN, by the listing's bound or
//! by its own `--timeout`), `serve` (the target down), the console, `probe`'s
//! sweep of old scratch keys (one page) and `timeline`'s version listing.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::{assert_incomplete, through};
use crate::common::cli::{bin, record, run, text};
use crate::common::proxy::{Mode, Proxy};
use crate::common::serve::{http_get, Serve, SERVE_ARGS};
use crate::common::tmux::Tmux;
use crate::common::{self, bin_path, moto_bucket};

/// [`run`] off the async runtime, with how long it took.
async fn run_timed(args: Vec<String>) -> (Output, Duration) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = Instant::now();
        let out = run(&args);
        (out, started.elapsed())
    })
    .await
    .unwrap()
}

/// `check --no-pod URL` through `proxy` with `--timeout TIMEOUT`: what it
/// printed and how long it took, after asserting exit 3 (UNKNOWN).
async fn unknown_check(proxy: &Proxy, timeout: &str, url: &str) -> (String, Duration) {
    let (out, took) = run_timed(through(
        proxy,
        &["--timeout", timeout, "check", "--no-pod", url],
    ))
    .await;
    let o = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{o}{}", text(&out.stderr));
    (o, took)
}

/// Live leases in [`endless`]'s bucket: `db1/` … `db40/`.
const PREFIXES: usize = 40;

/// A bucket on moto with [`PREFIXES`] live leases, optionally versioned, and
/// a proxy to it whose listings never end (each answer held back `delay`).
async fn endless(test: &str, versioned: bool, delay: Duration) -> (String, Proxy) {
    let (m, client, bucket) = moto_bucket(test).await;
    if versioned {
        common::enable_versioning(&client, &bucket).await;
    }
    for i in 1..=PREFIXES {
        let body = record(&format!("holder-db{i}"), 0, 300);
        common::put_raw(&client, &bucket, &format!("db{i}/LEASE"), body.as_bytes()).await;
    }
    let proxy = Proxy::start(m.port, Mode::Pass).await;
    proxy.endless_listings(delay);
    (bucket, proxy)
}

/// GETs that were not listings: the LEASE reads.
fn lease_reads(proxy: &Proxy) -> usize {
    let gets = proxy.counts().get("GET").copied().unwrap_or(0);
    gets - proxy.endless_pages()
}

/// `--json` at depth 1 (the paged discovery) and 2 (listings per level):
/// exit 1 with the target's error saying the listing is incomplete, after
/// at most 1,000 pages, and each LEASE the pages repeat read once.
#[tokio::test(flavor = "multi_thread")]
async fn json_stops_an_endless_listing_and_says_it_is_incomplete() {
    for depth in ["1", "2"] {
        let (bucket, proxy) = endless("endless-json", false, Duration::ZERO).await;
        let url = format!("s3://{bucket}/");
        let (out, took) = run_timed(through(
            &proxy,
            &["--json", "--no-pod", "--depth", depth, &url],
        ))
        .await;
        assert_incomplete(
            &out,
            &format!("depth {depth}: "),
            "stopped after 1000 pages",
        );
        assert!(
            proxy.endless_pages() <= 1000,
            "depth {depth}: {} pages",
            proxy.endless_pages()
        );
        // The same prefixes on every page: read once each, not once a page.
        assert!(
            lease_reads(&proxy) <= PREFIXES + 1,
            "depth {depth}: {:?} for {} pages",
            proxy.counts(),
            proxy.endless_pages()
        );
        assert!(
            took < Duration::from_secs(120),
            "depth {depth}: took {took:?}"
        );
    }
}

/// Pages that each come in time, but slowly (50 ms): the listing ends at
/// its time bound (30 request deadlines, here 30 × 1 s), not at its page
/// bound (1,000 pages would take 50 s). Each page's deadline is 20 times its
/// delay, so that a loaded machine does not end it with a request's timeout.
#[tokio::test(flavor = "multi_thread")]
async fn json_stops_a_slow_endless_listing_at_its_time_bound() {
    let (bucket, proxy) = endless("endless-slow", false, Duration::from_millis(50)).await;
    let url = format!("s3://{bucket}/");
    let (out, took) = run_timed(through(
        &proxy,
        &["--timeout", "1s", "--json", "--no-pod", &url],
    ))
    .await;
    assert_incomplete(&out, "", "was stopped after 30.0s");
    assert!(proxy.endless_pages() < 1000, "{}", proxy.endless_pages());
    assert!(took >= Duration::from_secs(30), "took {took:?}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

/// `check`: UNKNOWN with the listing's reason when the listing's bound comes
/// first; UNKNOWN at its own `--timeout` when the listing would outlast it,
/// whatever is still in flight.
#[tokio::test(flavor = "multi_thread")]
async fn check_is_unknown_within_its_timeout() {
    let (bucket, proxy) = endless("endless-check", false, Duration::ZERO).await;
    let url = format!("s3://{bucket}/");
    let (o, took) = unknown_check(&proxy, "60s", &url).await;
    assert!(o.starts_with("LEASES UNKNOWN"), "{o}");
    assert!(o.contains("incomplete"), "{o}");
    assert!(took < Duration::from_secs(60), "took {took:?}");

    // Slow pages: the listing would last 30 × 3 s; the check ends at 3 s.
    let (bucket, proxy) = endless("endless-check-slow", false, Duration::from_millis(50)).await;
    let url = format!("s3://{bucket}/");
    let (o, took) = unknown_check(&proxy, "3s", &url).await;
    assert_eq!(o.lines().count(), 1, "one answer: {o}");
    assert!(
        o.starts_with("LEASES UNKNOWN - the check did not finish within its timeout of 3.0s"),
        "{o}"
    );
    assert!(took >= Duration::from_secs(3), "took {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(proxy.endless_pages() > 5, "the listing was under way");
}

/// `serve`: the target is down (`leasectl_target_up` 0, a gather error)
/// once the listing stops, and `/metrics` answers meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn serve_reports_an_endless_listing_as_down() {
    let (bucket, proxy) = endless("endless-serve", false, Duration::ZERO).await;
    let url = format!("s3://{bucket}/");
    let dir = tempfile::tempdir().unwrap();
    let stderr_path = dir.path().join("serve.stderr");
    let mut serve = Serve::spawn(
        bin().args(through(&proxy, &[&SERVE_ARGS[..], &[&url]].concat())),
        &stderr_path,
    );
    let port = serve.port;
    let up = format!("leasectl_target_up{{target=\"{url}\"}} 0");
    let errors = format!("leasectl_gather_errors_total{{target=\"{url}\"}} ");
    let started = Instant::now();
    let body = loop {
        let body = http_get(port, "/metrics").await.1;
        let failed = body
            .lines()
            .find_map(|l| l.strip_prefix(&errors)?.parse::<f64>().ok())
            .is_some_and(|n| n >= 1.0);
        if body.lines().any(|l| l == up) && failed {
            break body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never down: {}",
            body.lines()
                .filter(|l| l.contains("target_up") || l.contains("errors"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        !body.contains("holder-db1"),
        "no row from an incomplete listing"
    );
    assert!(
        lease_reads(&proxy) <= 2 * (PREFIXES + 1),
        "each LEASE read once a gather, not once a page: {:?}",
        proxy.counts()
    );
    let code = tokio::task::spawn_blocking(move || serve.terminate())
        .await
        .unwrap();
    assert_eq!(code, Some(0));
}

/// `probe`: its sweep of old scratch keys reads one page and says the rest
/// is left; the probe itself runs and finds the service conditional.
#[tokio::test(flavor = "multi_thread")]
async fn probe_sweeps_one_page_of_an_endless_listing() {
    let (bucket, proxy) = endless("endless-probe", false, Duration::ZERO).await;
    let url = format!("s3://{bucket}/db1/");
    let (out, took) = run_timed(through(&proxy, &["probe", "--json", &url])).await;
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    assert_eq!(doc["verdict"], "conditional", "{doc:#}");
    let changed = doc["report"]["changed"].to_string();
    assert!(
        changed.contains("first page of their listing only") && changed.contains("left"),
        "{doc:#}"
    );
    assert_eq!(proxy.endless_pages(), 1, "{:?}", proxy.counts());
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// `timeline`: the version listing stops at its page bound; the history is
/// not known (a problem naming the incomplete listing, not exit 0).
#[tokio::test(flavor = "multi_thread")]
async fn timeline_stops_an_endless_version_listing() {
    let (bucket, proxy) = endless("endless-timeline", true, Duration::ZERO).await;
    let url = format!("s3://{bucket}/db1/");
    let (out, took) = run_timed(through(&proxy, &["timeline", "-o", "json", &url])).await;
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    assert_ne!(out.status.code(), Some(0), "{doc:#}");
    let problems = doc["prefixes"][0]["problems"].to_string();
    assert!(
        problems.contains("could not be listed")
            && problems.contains("stopped after 1000 pages")
            && problems.contains("incomplete"),
        "{doc:#}"
    );
    assert!(proxy.endless_pages() <= 1000, "{}", proxy.endless_pages());
    assert!(took < Duration::from_secs(120), "took {took:?}");
}

/// The console: its refresher's listing stops, and the target's error says
/// the listing is incomplete; no row of it is shown.
#[tokio::test(flavor = "multi_thread")]
async fn the_console_shows_an_endless_listing_as_incomplete() {
    let (bucket, proxy) = endless("endless-console", false, Duration::ZERO).await;
    let tmux = Tmux::start(200, 30);
    let run = tmux.run(&format!(
        "AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing-secret AWS_REGION=us-east-1 \
         AWS_EC2_METADATA_DISABLED=true {} --endpoint-url {} --path-style --no-pod \
         --refresh 1s --read-only s3://{bucket}/",
        bin_path(),
        proxy.endpoint()
    ));
    let t = tmux.clone_name();
    tokio::task::spawn_blocking(move || {
        let tmux = Tmux::attach(&t);
        let s = tmux.wait_shown(&run, Duration::from_secs(120), "the listing's error", |s| {
            s.contains("stopped after 1000") || s.contains("incomplete")
        });
        assert!(!s.contains("holder-db1"), "{s}");
        tmux.send(&["q"]);
        tmux.wait_exit(&run, Duration::from_secs(20));
        std::mem::forget(tmux); // the outer guard kills the session
    })
    .await
    .unwrap();
    assert!(proxy.endless_pages() <= 2000, "{}", proxy.endless_pages());
    assert!(
        lease_reads(&proxy) <= 2 * (PREFIXES + 1),
        "each LEASE read once a gather, not once a page: {:?}",
        proxy.counts()
    );
    drop(tmux);
}
