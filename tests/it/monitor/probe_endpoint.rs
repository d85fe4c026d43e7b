//! Issue 47 §1 against a real `leasectl serve --module` and moto behind a
//! proxy the test owns: a probe answers its target's families and its own;
//! a probe whose store does not answer in time answers within the scrape's
//! timeout with what it could not read as not read (never its last reading,
//! never healthy); requests for what the module may not read, for no module
//! or with credentials are refused with a sentence and send no request to
//! the store; the state's bounds are on `/metrics`.

use std::time::{Duration, Instant};

use crate::common::cli::record;
use crate::common::prometheus::raw_get_with;
use crate::common::proxy::{Mode, Proxy};
use crate::common::serve::{probe_path, Serve};
use crate::common::{self, moto, Moto};

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

#[tokio::test(flavor = "multi_thread")]
async fn probes_answer_in_time_and_read_only_what_their_module_allows() {
    let m = moto(Moto::Conditional);
    let proxy = Proxy::start(m.port, Mode::Pass).await;
    let client = common::sdk_client(&m.endpoint());
    let allowed = common::bucket_name("probe-allowed");
    let other = common::bucket_name("probe-other");
    for b in [&allowed, &other] {
        common::create_bucket(&client, b).await;
    }
    let put = |key: &str, body: String| {
        let (client, bucket) = (client.clone(), allowed.clone());
        let key = key.to_owned();
        async move { common::put_raw(&client, &bucket, &key, body.as_bytes()).await }
    };
    put("team-a/db/LEASE", record("h1", 1, 3600)).await;
    put("team-a/logs/LEASE", record("h2", 600, 30)).await;
    put("team-b/ok/LEASE", record("h3", 1, 3600)).await;
    put("team-b/slow/LEASE", record("h4", 1, 3600)).await;
    common::put_raw(&client, &other, "db/LEASE", record("x", 1, 3600).as_bytes()).await;
    // The LEASE of team-b/slow/ is never answered.
    proxy.hang_requests("GET", "team-b/slow/LEASE");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[contexts.moto]\nendpoint_url = \"{}\"\npath_style = true\nallow = [\"s3://{allowed}/\"]\n",
            proxy.endpoint()
        ),
    )
    .unwrap();
    let serve = tokio::task::block_in_place(|| {
        Serve::start(dir.path(), "serve", &config, &["--module", "moto"])
    });
    let target = format!("s3://{allowed}/team-a/");
    let get = |path: String, headers: Vec<(&'static str, &'static str)>| {
        let port = serve.port;
        tokio::task::spawn_blocking(move || raw_get_with(port, &path, &headers))
    };

    // A probe: the target's families and the probe's own.
    let (code, body) = get(probe_path(&target, "moto"), vec![])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, 200, "{body}\n{}", serve.log());
    for line in [
        format!(
            "leasectl_lease_state{{target=\"{target}\",prefix=\"team-a/db/\",state=\"fresh\"}} 1"
        ),
        format!(
            "leasectl_lease_state{{target=\"{target}\",prefix=\"team-a/logs/\",state=\"stale\"}} 1"
        ),
        format!("leasectl_target_up{{target=\"{target}\"}} 1"),
        "leasectl_probe_success 1".to_owned(),
    ] {
        assert!(has(&body, &line), "{line} in\n{body}");
    }
    assert!(!body.contains("leasectl_http_requests"), "{body}");

    // Refused, with a sentence, and nothing sent to the store.
    let before = proxy.counts();
    let refused = [
        (
            probe_path(&format!("s3://{other}/"), "moto"),
            "may not read",
        ),
        (
            probe_path(&format!("s3://{allowed}x/"), "moto"),
            "may not read",
        ),
        (probe_path(&target, "prod"), "no module `prod`"),
        (
            probe_path(&format!("s3://AKIAEXAMPLE:s3cr3t@{allowed}/"), "moto"),
            "cannot carry credentials",
        ),
        ("/probe?module=moto".to_owned(), "no `target`"),
    ];
    for (path, want) in refused {
        let (code, body) = get(path.clone(), vec![]).await.unwrap().unwrap();
        assert_eq!(code, 400, "{path}: {body}");
        assert!(body.contains(want), "{path}: {body}");
        assert!(!body.contains("s3cr3t"), "{body}");
    }
    assert_eq!(proxy.counts(), before, "a refused probe sent requests");
    assert!(!serve.log().contains("s3cr3t"));

    // A LEASE whose read never answers: the probe answers within the
    // scrape's timeout (4 s, less the 0.5 s offset), that row not read (no
    // state series), the other read; the target not up, an error counted,
    // the probe failed.
    let team_b = format!("s3://{allowed}/team-b/");
    let started = Instant::now();
    let (code, body) = get(
        probe_path(&team_b, "moto"),
        vec![("X-Prometheus-Scrape-Timeout-Seconds", "4")],
    )
    .await
    .unwrap()
    .unwrap();
    let took = started.elapsed();
    assert_eq!(code, 200, "{body}");
    assert!(took < Duration::from_secs(4), "answered after {took:?}");
    assert!(
        took >= Duration::from_millis(3400),
        "answered after {took:?}"
    );
    for line in [
        format!(
            "leasectl_lease_state{{target=\"{team_b}\",prefix=\"team-b/ok/\",state=\"fresh\"}} 1"
        ),
        format!("leasectl_target_up{{target=\"{team_b}\"}} 0"),
        format!("leasectl_gather_errors_total{{target=\"{team_b}\"}} 1"),
        "leasectl_probe_success 0".to_owned(),
    ] {
        assert!(has(&body, &line), "{line} in\n{body}");
    }
    assert!(!body.contains("prefix=\"team-b/slow/\""), "{body}");

    // The store answers again: the row not read is read at the next probe.
    proxy.clear_faults();
    let (_, body) = get(probe_path(&team_b, "moto"), vec![])
        .await
        .unwrap()
        .unwrap();
    for line in [
        format!(
            "leasectl_lease_state{{target=\"{team_b}\",prefix=\"team-b/slow/\",state=\"fresh\"}} 1"
        ),
        format!("leasectl_target_up{{target=\"{team_b}\"}} 1"),
        "leasectl_probe_success 1".to_owned(),
    ] {
        assert!(has(&body, &line), "{line} in\n{body}");
    }

    // /metrics: the state's bounds and what it holds, the refusals counted.
    let (code, metrics) = get("/metrics".to_owned(), vec![]).await.unwrap().unwrap();
    assert_eq!(code, 200);
    for line in [
        "leasectl_probe_state_targets 2",
        "leasectl_probe_state_max_targets 10000",
        "leasectl_probe_state_max_bytes 268435456",
        "leasectl_probe_state_forget_after_seconds 600",
        "leasectl_probe_state_forgotten_total{reason=\"unscraped\"} 0",
        "leasectl_http_requests_total{path=\"/probe\",code=\"400\"} 5",
        "leasectl_http_requests_total{path=\"/probe\",code=\"200\"} 3",
    ] {
        assert!(has(&metrics, line), "{line} in\n{metrics}");
    }
    drop(serve);
}
