//! What leasectl reports is what it did, where it did it (issues 22 §3–§6
//! and 23 items 10–12, 14), end to end with the real binary: the endpoint in
//! every JSON output as the URL in use, timestamps every parser accepts (a
//! real leap-second record on a local store), prefix URLs written once, a
//! local store moved away under a running `--watch` and `serve`, the real AWS
//! host named when DNS fails, listings whose continuation tokens go round (a
//! proxy in front of moto answering ListObjectsV2 itself), a `Date` header
//! that does not parse, credentials in TARGETs and endpoints, and prefixes
//! with control characters named by their percent-encoded form.

use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::{assert_incomplete, through};
use crate::common::cli::{at_endpoint, bin, record, run, run_async, text, write_lease};
use crate::common::proxy::{ListLoop, Mode, Proxy};
use crate::common::serve::{http_get, sample, Serve, SERVE_ARGS};
use crate::common::{self, file_url, moto, moto_bucket, spawn_lines, wait_json_line, Moto};

/// [`run`] off the async runtime.
/// `takeover URL --reason REASON --yes --then release --audit-log LOG`.
fn release_takeover<'a>(url: &'a str, reason: &'a str, log: &'a str) -> [&'a str; 9] {
    [
        "takeover",
        url,
        "--reason",
        reason,
        "--yes",
        "--then",
        "release",
        "--audit-log",
        log,
    ]
}

/// Runs [`release_takeover`] of `url`, audited to `log`, and asserts it exits 0.
fn run_release_takeover(url: &str, reason: &str, log: &std::path::Path) -> Output {
    let out = run(&release_takeover(url, reason, log.to_str().unwrap()));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    out
}

/// `leasectl [FIRST…] --timeout 2s --json --no-pod s3://b/` with `var` set to
/// `value`, within 30 s.
fn json_of_b(var: &str, value: impl AsRef<std::ffi::OsStr>, first: &[&str]) -> Output {
    let mut c = bin();
    c.env(var, value)
        .args(first)
        .args(["--timeout", "2s", "--json", "--no-pod", "s3://b/"]);
    common::run_with_timeout(c, Duration::from_secs(30))
}

/// Waits for an NDJSON line matching `pred`; panics with every line seen.
fn wait_line(
    rx: &mpsc::Receiver<String>,
    seen: &mut Vec<Value>,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    wait_json_line(rx, seen, Duration::from_secs(30), what, pred)
}

/// Kills a child we started (by its pid) and reaps it.
fn stop(child: &mut std::process::Child) {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let end = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.wait();
}

/// Checks that `v` says requests went to `endpoint` in `region` with path-style addressing.
fn assert_where(v: &Value, endpoint: &str, what: &str) {
    assert_eq!(v["endpoint"], endpoint, "{what}: {v:#}");
    assert_eq!(v["region"], "us-east-1", "{what}: {v:#}");
    assert_eq!(v["addressing_style"], "path", "{what}: {v:#}");
}

/// Issue 22 §3: `endpoint` is the URL in use, with `region` and
/// `addressing_style` beside it, in `--json`, `-o ndjson`, `--watch`, `probe
/// --json`, the audit log and `audit --json`; the sentence stays for people.
#[tokio::test(flavor = "multi_thread")]
async fn the_endpoint_is_a_url_with_region_and_addressing_style_in_every_json_output() {
    let m = moto(Moto::Conditional);
    let endpoint = m.endpoint();
    let client = common::sdk_client(&endpoint);
    let bucket = common::bucket_name("endpoint-url-json");
    common::create_bucket(&client, &bucket).await;
    common::put_record(&client, &bucket, "db/LEASE", "gone-holder", 600, 30).await;
    let url = format!("s3://{bucket}/");
    let s3 = |rest: &[&str]| at_endpoint(&endpoint, rest);

    let out = run_async(s3(&["--json", "--no-pod", &url])).await;
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema_version"], "1.6");
    assert_where(&doc["targets"][0], &endpoint, "--json");

    let out = run_async(s3(&["-o", "ndjson", "--no-pod", &url])).await;
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let lease = lines
        .iter()
        .find(|l| l["type"] == "lease")
        .expect("a lease line");
    assert_where(lease, &endpoint, "-o ndjson");

    let (mut watch, rx) = spawn_lines(
        bin()
            .args(s3(&["--watch=1s", "--no-pod", &url]))
            .stderr(Stdio::null()),
    );
    let mut seen = Vec::new();
    let line = wait_line(&rx, &mut seen, "lease", |v| v["type"] == "lease");
    stop(&mut watch);
    assert_where(&line, &endpoint, "--watch");

    let out = run_async(s3(&["probe", "--json", &url])).await;
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_where(&doc, &endpoint, "probe --json");
    let steps = doc["report"]["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{doc:#}");
    for s in steps {
        assert!(
            s.as_object().unwrap().contains_key("note"),
            "every step has `note`: {s:#}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let log_s = log.display().to_string();
    let out = run_async(s3(&release_takeover(
        &format!("{url}db/"),
        "endpoint test",
        &log_s,
    )))
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let entries: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(entries.len() >= 2, "{entries:#?}");
    for e in &entries {
        assert_where(&e["target"], &endpoint, "audit log");
    }
    let out = run_async(vec![
        "audit".into(),
        "--json".into(),
        "--audit-log".into(),
        log_s,
    ])
    .await;
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    for e in doc.as_array().unwrap() {
        assert_where(&e["target"], &endpoint, "audit --json");
    }
}

/// Issue 22 §3 and §6: AWS's own endpoint is `null` in `--json` (the region
/// says which), and a DNS failure names the host asked for, with no
/// `--path-style` hint (that is for custom endpoints).
#[test]
fn aws_own_endpoint_is_null_and_a_dns_failure_names_the_real_host() {
    // A region no DNS knows: the lookup fails with or without a network.
    let out = run(&[
        "--region",
        "xx-nowhere-1",
        "--timeout",
        "5s",
        "--json",
        "--no-pod",
        "s3://bkt/",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &doc["targets"][0];
    assert!(t["endpoint"].is_null(), "{t:#}");
    assert_eq!(t["region"], "xx-nowhere-1", "{t:#}");
    assert_eq!(t["addressing_style"], "virtual_host", "{t:#}");
    let error = t["error"].as_str().unwrap();
    assert!(
        error.contains("cannot resolve the host name bkt.s3.xx-nowhere-1.amazonaws.com"),
        "{error}"
    );
    assert!(
        !error.contains("--path-style") && !error.contains("bkt.AWS"),
        "{error}"
    );
}

/// Every string of `docs` (JSON documents or NDJSON lines) that looks like a
/// time must parse with Python's `datetime.fromisoformat`; returns how many did.
fn python_parses_every_time(docs: &[String]) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.json");
    std::fs::write(&input, serde_json::to_string(docs).unwrap()).unwrap();
    let script = r#"
import json, re, sys
from datetime import datetime
docs = json.load(open(sys.argv[1]))
stamp = re.compile(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}')
n = 0
def walk(v):
    global n
    if isinstance(v, dict):
        for x in v.values(): walk(x)
    elif isinstance(v, list):
        for x in v: walk(x)
    elif isinstance(v, str) and stamp.match(v):
        datetime.fromisoformat(v)
        n += 1
for d in docs:
    try:
        walk(json.loads(d))
    except json.JSONDecodeError:
        for line in d.splitlines():
            if line.strip():
                walk(json.loads(line))
print(n)
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&input)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "a time leasectl wrote does not parse: {}",
        text(&out.stderr)
    );
    text(&out.stdout).trim().parse().unwrap()
}

/// Issue 22 §4: a record stamped in a leap second (`23:59:60Z`) is read,
/// and every time leasectl writes about it — `--json`, NDJSON, the table,
/// Prometheus, `check`, the audit log and `audit --json` — parses.
#[test]
fn a_leap_second_record_gives_times_every_parser_accepts() {
    let dir = tempfile::tempdir().unwrap();
    write_lease(
        dir.path(),
        "db/",
        r#"{"instance_id":"leap-holder","acquired_at":"2016-12-31T23:59:60Z","renewed_at":"2016-12-31T23:59:60.250Z","ttl_s":30}"#,
    );
    let url = file_url(dir.path());
    let mut docs = Vec::new();
    let mut all = String::new();
    for args in [
        &["--json", "--no-pod"][..],
        &["-o", "ndjson", "--no-pod"],
        &["-o", "table", "--no-pod"],
        &["-o", "prometheus", "--no-pod"],
        &["check", "--no-pod"],
    ] {
        let mut a = args.to_vec();
        a.push(&url);
        let out = run(&a);
        // Judged: stale (exit 3; `check`: CRITICAL, 2).
        let judged = if args[0] == "check" { 2 } else { 3 };
        assert_eq!(
            out.status.code(),
            Some(judged),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let o = text(&out.stdout);
        all.push_str(&o);
        all.push_str(&text(&out.stderr));
        // The JSON outputs: --json and -o ndjson.
        if args[0] == "--json" || args[1] == "ndjson" {
            docs.push(o);
        }
    }
    // The record is judged (stale) and its times are in the JSON.
    let doc: Value = serde_json::from_str(&docs[0]).unwrap();
    let row = &doc["targets"][0]["prefixes"][0];
    assert_eq!(row["state"], "stale", "{doc:#}");
    assert_eq!(
        row["record"]["renewed_at"], "2016-12-31T23:59:59.999999Z",
        "{doc:#}"
    );
    // The audited takeover of it.
    let log = dir.path().join("audit.jsonl");
    let out = run_release_takeover(&format!("{url}db/"), "leap test", &log);
    all.push_str(&text(&out.stdout));
    let log_text = std::fs::read_to_string(&log).unwrap();
    docs.push(log_text.clone());
    let out = run(&["audit", "--json", "--audit-log", log.to_str().unwrap()]);
    docs.push(text(&out.stdout));
    all.push_str(&log_text);
    all.push_str(&text(&out.stdout));
    let out = run(&["audit", "--audit-log", log.to_str().unwrap()]);
    all.push_str(&text(&out.stdout));

    assert!(!all.contains(":60"), "a leap second was written: {all}");
    // --json (2 record times + generated_at, now, last_modified), the NDJSON
    // lines and the audit entries: many times, all parsed.
    let n = python_parses_every_time(&docs);
    assert!(n >= 12, "only {n} times were checked");
}

/// Issue 22 §5: for an S3 target with a path, `check` names the prefix's
/// own URL (not the target URL and the full key joined); a target that is
/// itself a prefix likewise.
#[tokio::test(flavor = "multi_thread")]
async fn check_names_each_prefix_by_its_own_url() {
    let (m, client, bucket) = moto_bucket("prefix-url-once").await;
    for p in ["backups/db1/", "backups/db2/"] {
        common::put_record(&client, &bucket, &format!("{p}LEASE"), "dead", 600, 30).await;
    }
    for (target, named) in [
        (format!("s3://{bucket}/backups/"), "backups/db1/"),
        (format!("s3://{bucket}/backups/db2/"), "backups/db2/"),
    ] {
        let out = run_async(at_endpoint(&m.endpoint(), &["check", "--no-pod", &target])).await;
        let o = text(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{o}");
        let want = format!("CRITICAL s3://{bucket}/{named} is stale");
        assert!(o.contains(&want), "{want} in {o}");
        assert!(
            !o.contains("backups/backups") && !o.contains("db2/backups"),
            "{o}"
        );
    }
    // The local store was right and stays so.
    let dir = tempfile::tempdir().unwrap();
    write_lease(dir.path(), "db1/", &record("dead", 600, 30));
    let url = file_url(dir.path());
    let out = run(&["check", "--no-pod", &url]);
    let o = text(&out.stdout);
    assert!(o.contains(&format!("CRITICAL {url}db1/ is stale")), "{o}");
}

/// Issue 22 §5: a local store moved away under a running `--watch` is an
/// error (an `error` line, heartbeats with exit code 1, no `gone` lines);
/// moved back, a `cleared` line says so and the exit code is 0 again.
#[test]
fn a_watched_local_store_that_disappears_is_an_error_until_it_is_back() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("store");
    let moved = parent.path().join("store.moved");
    write_lease(&dir, "db/", &record("holder", 0, 120));
    let url = file_url(&dir);
    let (mut watch, rx) = spawn_lines(
        bin()
            .args(["--watch=1s", "--heartbeat", "1s", "--no-pod", &url])
            .stderr(Stdio::null()),
    );
    let mut seen = Vec::new();
    wait_line(&rx, &mut seen, "fresh lease", |v| {
        v["type"] == "lease" && v["state"] == "fresh"
    });
    wait_line(&rx, &mut seen, "healthy heartbeat", |v| {
        v["type"] == "heartbeat" && v["exit_code"] == 0
    });
    std::fs::rename(&dir, &moved).unwrap();
    let err = wait_line(&rx, &mut seen, "error", |v| v["type"] == "error");
    assert!(err["prefix"].is_null(), "{err:#}");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("does not exist any more"),
        "{err:#}"
    );
    wait_line(&rx, &mut seen, "failing heartbeat", |v| {
        v["type"] == "heartbeat" && v["exit_code"] == 1 && v["errors"] == 1
    });
    std::fs::rename(&moved, &dir).unwrap();
    let n = seen.len();
    wait_line(&rx, &mut seen, "cleared", |v| {
        v["type"] == "cleared" && v["prefix"].is_null()
    });
    wait_line(&rx, &mut seen, "healthy heartbeat again", |v| {
        v["type"] == "heartbeat" && v["exit_code"] == 0
    });
    stop(&mut watch);
    assert!(
        !seen.iter().any(|v| v["type"] == "gone"),
        "a store that could not be listed says nothing about its prefixes: {seen:#?}"
    );
    assert!(
        seen[..n].iter().all(|v| v["type"] != "cleared"),
        "{seen:#?}"
    );
}

/// Issue 22 §5: the same under `serve`: `leasectl_target_up` 0 and
/// `leasectl_gather_errors_total` growing while the directory is away.
#[tokio::test(flavor = "multi_thread")]
async fn a_served_local_store_that_disappears_is_down() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("store");
    let moved = parent.path().join("store.moved");
    write_lease(&dir, "db/", &record("holder", 0, 120));
    let url = file_url(&dir);
    let stderr_path = parent.path().join("serve.stderr");
    let mut serve = Serve::spawn(bin().args(SERVE_ARGS).args([&url]), &stderr_path);
    let port = serve.port;
    let up = format!("leasectl_target_up{{target=\"{url}\"}}");
    let errors = format!("leasectl_gather_errors_total{{target=\"{url}\"}}");
    let until = |pred: Box<dyn Fn(&str) -> bool + Send>| async move {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let body = http_get(port, "/metrics").await.1;
            if pred(&body) {
                return body;
            }
            assert!(
                Instant::now() < end,
                "metrics never got there:\n{}",
                body.lines()
                    .filter(|l| l.contains("target_up") || l.contains("errors"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    let (u, e) = (up.clone(), errors.clone());
    let body = until(Box::new(move |b| sample(b, &u) == Some(1.0))).await;
    assert_eq!(sample(&body, &e), Some(0.0), "{body}");
    std::fs::rename(&dir, &moved).unwrap();
    let (u, e) = (up.clone(), errors.clone());
    let body = until(Box::new(move |b| {
        sample(b, &u) == Some(0.0) && sample(b, &e).is_some_and(|n| n >= 2.0)
    }))
    .await;
    assert!(sample(&body, &errors).unwrap() >= 2.0, "{body}");
    std::fs::rename(&moved, &dir).unwrap();
    let u = up.clone();
    until(Box::new(move |b| sample(b, &u) == Some(1.0))).await;
    tokio::task::spawn_blocking(move || stop(&mut serve.child))
        .await
        .unwrap();
}

/// Issue 23 item 11: continuation tokens that go round (A, B, A…) or come
/// back at once (A, A) end in an error — the target incomplete, `check`
/// UNKNOWN, `--json` exit 1 — quickly, not in a loop or an exit 0.
#[tokio::test(flavor = "multi_thread")]
async fn listings_whose_tokens_repeat_are_errors() {
    let (m, _client, bucket) = moto_bucket("token-loops").await;
    for how in [ListLoop::Cycle, ListLoop::RepeatAtOnce] {
        for depth in ["1", "2"] {
            let proxy = Proxy::start(m.port, Mode::Pass).await;
            proxy.loop_listings(how);
            let started = Instant::now();
            let url = format!("s3://{bucket}/");
            let out = run_async(through(
                &proxy,
                &["--json", "--no-pod", "--depth", depth, &url],
            ))
            .await;
            let ctx = format!("{how:?} depth {depth}: ");
            assert_incomplete(&out, &ctx, "continuation token");
            let out = run_async(through(
                &proxy,
                &["check", "--no-pod", "--depth", depth, &url],
            ))
            .await;
            let o = text(&out.stdout);
            assert_eq!(out.status.code(), Some(3), "{how:?} depth {depth}: {o}");
            assert!(o.starts_with("LEASES UNKNOWN"), "{o}");
            assert!(o.contains("continuation token"), "{o}");
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{how:?}: took {:?}",
                started.elapsed()
            );
            // A, B, A: three pages at most; A, A: two.
            assert!(proxy.looped_lists() <= 2 * 3, "{}", proxy.looped_lists());
        }
    }
}

/// Issue 23 item 12: a `Date` header that does not parse leaves the
/// service's clock unknown, and that is said: a note in `--json`, in
/// `check`'s output.
#[tokio::test(flavor = "multi_thread")]
async fn a_service_clock_that_cannot_be_read_is_said_to_be_unknown() {
    let (m, client, bucket) = moto_bucket("bad-date").await;
    common::put_record(&client, &bucket, "db/LEASE", "live", 1, 300).await;
    let url = format!("s3://{bucket}/");
    // Through a plain proxy the clock is known: no note.
    let proxy = Proxy::start(m.port, Mode::Pass).await;
    let args = |p: &Proxy, rest: &[&str]| at_endpoint(&p.endpoint(), rest);
    let out = run_async(args(&proxy, &["--json", "--no-pod", &url])).await;
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["targets"][0]["server_clock_note"].is_null(), "{doc:#}");
    assert!(doc["targets"][0]["server_offset_s"].is_number(), "{doc:#}");

    proxy.rewrite_date("Someday, 99 Foo 2026 25:61:00 XYZ");
    let out = run_async(args(&proxy, &["--json", "--no-pod", &url])).await;
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &doc["targets"][0];
    assert!(t["server_offset_s"].is_null(), "{doc:#}");
    let note = t["server_clock_note"].as_str().unwrap_or_default();
    assert!(
        note.contains("clock is unknown") && note.contains("Someday, 99 Foo"),
        "{doc:#}"
    );
    assert_eq!(t["prefixes"][0]["state"], "fresh", "{doc:#}");
    let out = run_async(args(&proxy, &["check", "--no-pod", &url])).await;
    let o = text(&out.stdout);
    assert!(
        o.contains(&format!("NOTE {url}: the service's clock is unknown")),
        "{o}"
    );
}

/// Issue 23 item 10: credentials in a TARGET (command line or a config's
/// `targets`) or in an endpoint (`--endpoint-url`, `AWS_ENDPOINT_URL`) are
/// refused alike, and never echoed.
#[test]
fn credentials_in_targets_and_endpoints_are_refused_and_never_echoed() {
    let secrets = ["secretpass", "secretfrag", "AKIA"];
    let clean = |o: &Output| {
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        for s in secrets {
            assert!(!all.contains(s), "{s} echoed: {all}");
        }
        all
    };
    for target in [
        "s3://AKIA:secretpass@b/p/",
        "s3://AKIA:secret/secretpass@b/p/",
        "file://AKIA:secretpass@localhost/tmp/",
    ] {
        for cmd in [
            &["--json", "--no-pod"][..],
            &["check", "--no-pod"],
            &["probe"],
        ] {
            let mut a = cmd.to_vec();
            a.push(target);
            let out = run(&a);
            let all = clean(&out);
            let want = if cmd[0] == "check" { 3 } else { 2 };
            assert_eq!(out.status.code(), Some(want), "{target} {cmd:?}: {all}");
            assert!(
                all.contains("cannot carry credentials") && all.contains("***"),
                "{all}"
            );
        }
    }
    // A config's targets.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "default_context = \"prod\"\n[contexts.prod]\ntargets = [\"s3://AKIA:secretpass@b/p/\"]\n",
    )
    .unwrap();
    let mut c = bin();
    c.env("LEASECTL_CONFIG", &config)
        .args(["--no-pod", "-o", "table"]);
    let out = common::run_with_timeout(c, Duration::from_secs(30));
    let all = clean(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    // Endpoints: a user:password without a scheme, a fragment.
    for e in ["minio.internal:secretpass@x", "https://h:9000#secretfrag"] {
        let out = run(&["--endpoint-url", e, "--json", "--no-pod", "s3://b/"]);
        let all = clean(&out);
        assert_eq!(out.status.code(), Some(2), "{all}");
        assert!(all.contains("***"), "{all}");
    }
    // A profile's endpoint_url with user information: refused too.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".aws")).unwrap();
    std::fs::write(
        home.path().join(".aws/config"),
        "[profile leaky]\nregion = us-east-1\nendpoint_url = http://AKIA:secretpass@127.0.0.1:1\n",
    )
    .unwrap();
    let out = json_of_b("HOME", home.path(), &["--profile", "leaky"]);
    let all = clean(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("http://***:***@127.0.0.1:1") && all.contains("carries credentials"),
        "{all}"
    );
    // AWS_ENDPOINT_URL with user information: refused as --endpoint-url is.
    for var in ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"] {
        let out = json_of_b(var, "http://AKIA:secretpass@127.0.0.1:1", &[]);
        let all = clean(&out);
        assert_eq!(out.status.code(), Some(2), "{var}: {all}");
        assert!(
            all.contains(&format!(
                "{var}=http://***:***@127.0.0.1:1 carries credentials"
            )),
            "{all}"
        );
    }
}

/// Issue 23 item 14: prefixes whose names hold control characters, shown
/// escaped by the listing, are named as TARGETs by their percent-encoded
/// form (which `check` writes too), on a local store and on moto.
#[tokio::test(flavor = "multi_thread")]
async fn prefixes_with_control_characters_can_be_named_percent_encoded() {
    let dir = tempfile::tempdir().unwrap();
    write_lease(dir.path(), "nl\nname/", &record("nl-holder", 600, 30));
    write_lease(dir.path(), "tab\tx/", &record("tab-holder", 0, 300));
    let url = file_url(dir.path());
    let out = run(&["check", "--no-pod", &url]);
    let o = text(&out.stdout);
    assert!(
        o.contains(&format!("CRITICAL {url}nl%0Aname/ is stale")),
        "{o}"
    );
    for (name, holder) in [("nl%0Aname/", "nl-holder"), ("tab%09x/", "tab-holder")] {
        let out = run(&["--json", "--no-pod", &format!("{url}{name}")]);
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", text(&out.stderr)));
        let rows = doc["targets"][0]["prefixes"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{doc:#}");
        assert_eq!(rows[0]["record"]["instance_id"], holder, "{doc:#}");
    }
    // …and taken over from the command line, not only from the console.
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("audit.jsonl");
    run_release_takeover(&format!("{url}nl%0Aname/"), "control names", &log);
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    // (A file:// TARGET is the store's root: its lease is the key `LEASE`.)
    assert_eq!(first["target"]["key"], "LEASE", "{first:#}");
    assert_eq!(
        first["target"]["url"],
        format!("{url}nl%0Aname/"),
        "{first:#}"
    );
    assert_eq!(
        first["observed"]["record"]["instance_id"], "nl-holder",
        "{first:#}"
    );

    let (m, client, bucket) = moto_bucket("control-names").await;
    // (moto's router cannot take a newline in a key: a tab and an ESC here.)
    common::put_record(&client, &bucket, "tab\tx/LEASE", "tab-holder", 600, 30).await;
    common::put_record(&client, &bucket, "esc\u{1b}y/LEASE", "esc-holder", 0, 300).await;
    let s3 = |rest: &[&str]| at_endpoint(&m.endpoint(), rest);
    let out = run_async(s3(&["check", "--no-pod", &format!("s3://{bucket}/")])).await;
    let o = text(&out.stdout);
    let named = format!("s3://{bucket}/tab%09x/");
    assert!(o.contains(&format!("CRITICAL {named} is stale")), "{o}");
    for (named, prefix, holder) in [
        (named, "tab\tx/", "tab-holder"),
        (
            format!("s3://{bucket}/esc%1By/"),
            "esc\u{1b}y/",
            "esc-holder",
        ),
    ] {
        let out = run_async(s3(&["--json", "--no-pod", &named])).await;
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows = doc["targets"][0]["prefixes"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{doc:#}");
        assert_eq!(rows[0]["prefix"], prefix, "{doc:#}");
        assert_eq!(rows[0]["record"]["instance_id"], holder, "{doc:#}");
        assert_eq!(doc["targets"][0]["url"], named, "{doc:#}");
    }
}

/// Issue 23 item 12, the console: a snapshot gathered from moto through a
/// proxy whose `Date` does not parse, drawn into a `TestBackend`: the header
/// says the service clock is unknown (and says nothing of the kind when the
/// clock is known).
#[tokio::test(flavor = "multi_thread")]
async fn the_console_header_says_the_service_clock_is_unknown() {
    use leasectl::snapshot::OpenTarget;

    let (m, client, bucket) = moto_bucket("console-bad-date").await;
    common::put_record(&client, &bucket, "db/LEASE", "live", 1, 300).await;
    let proxy = Proxy::start(m.port, Mode::Pass).await;
    let header = |bad_date: bool| {
        let proxy = proxy.clone();
        let bucket = bucket.clone();
        async move {
            if bad_date {
                proxy.rewrite_date("not a date");
            }
            let url = format!("s3://{bucket}/");
            let open = vec![OpenTarget {
                target: url.parse().unwrap(),
                endpoint: proxy.endpoint(),
                store: common::s3_store(&proxy.endpoint(), &bucket),
            }];
            let app = crate::tui::support::console_of(&open, &url).await;
            let buf = crate::tui::support::draw(&app, 160, 20).buffer().clone();
            (0..2)
                .map(|y| {
                    (0..buf.area.width)
                        .map(|x| buf[(x, y)].symbol().to_owned())
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let known = header(false).await;
    assert!(
        known.contains("service clock ") && known.contains("s ±"),
        "{known}"
    );
    assert!(!known.contains("unknown"), "{known}");
    let unknown = header(true).await;
    assert!(
        unknown.contains("service clock unknown (no usable Date header)"),
        "{unknown}"
    );
}
