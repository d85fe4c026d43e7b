//! Issue 16, end to end with the real binary: `check`'s plugin exit codes
//! for each state and threshold, the output formats and the table for a
//! pipe, `--watch` while a real `bucket hold` renews and dies on moto,
//! `serve` scraped by a real HTTP client (hyper) while leases change on
//! moto, completions parsed by `bash -n`, and the example rules and
//! manifest in assets/monitoring/ validated.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::assert_exit;
use crate::common::cli::{bin, record, write_lease};
use crate::common::hold::{signal_group, Hold};
use crate::common::serve::{http_get, sample, Serve, HOWS, SERVE_ARGS};
use crate::common::{
    self, bin_path, file_url, leasectl, moto_bucket, spawn_lines, wait_json_line as wait_line,
};

/// `leasectl check --no-pod ARGS`: (exit code, stdout).
fn check(args: &[&str]) -> (i32, String) {
    let mut all = vec!["check", "--no-pod"];
    all.extend_from_slice(args);
    let out = leasectl(None, &all);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), stdout)
}

fn store_with(leases: &[(&str, String)]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    for (p, body) in leases {
        write_lease(dir.path(), p, body);
    }
    let url = file_url(dir.path());
    (dir, url)
}

#[test]
fn check_exit_codes_for_each_state_and_threshold() {
    // fresh only: OK, with perfdata.
    let (_f, fresh) = store_with(&[("db/", record("holder-a", 20, 60))]);
    let (code, out) = check(&[&fresh]);
    assert_eq!(code, 0, "{out}");
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("LEASES OK - 1 lease (1 fresh,"), "{out}");
    let (text, perf) = first.split_once(" | ").unwrap();
    assert!(!text.contains('|') && !perf.contains('|'), "{first}");
    assert!(
        perf.contains("fresh=1;;;0") && perf.contains("stale=0;;;0"),
        "{perf}"
    );
    assert!(
        perf.contains(" age=2") && perf.contains(" expires_in=3"),
        "{perf}"
    );

    // Age thresholds on a fresh lease 20 s old.
    let (code, out) = check(&["--warn-age", "10s", &fresh]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with("LEASES WARNING - ") && out.contains("age=2") && out.contains("s;10;"),
        "{out}"
    );
    let (code, out) = check(&["--warn-age", "5s", "--crit-age", "15s", &fresh]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("s;5;15") && out.contains("\nCRITICAL ") && out.contains("over 15.0s"),
        "{out}"
    );
    let (code, _) = check(&["--warn-age", "5m", "--crit-age", "10m", &fresh]);
    assert_eq!(code, 0);

    // stale: CRITICAL by default, WARNING when not in --crit-state.
    let (_s, stale) = store_with(&[("db/", record("holder-b", 300, 30))]);
    let (code, out) = check(&[&stale]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("db/ is stale (holder holder-b, TTL 30 s, expired 4m")
            && out.contains("stale=1;;;0"),
        "{out}"
    );
    let (code, out) = check(&["--crit-state", "suspect,malformed", &stale]);
    assert_eq!(code, 1, "{out}");

    // suspect: stamped an hour in the future.
    let (_u, suspect) = store_with(&[("db/", record("holder-c", -3600, 30))]);
    assert_eq!(check(&[&suspect]).0, 2);
    assert_eq!(check(&["--crit-state", "stale", &suspect]).0, 1);

    // malformed: not JSON.
    let (_m, malformed) = store_with(&[("db/", "{torn".to_owned())]);
    let (code, out) = check(&[&malformed]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("malformed=1;;;0"), "{out}");
    assert_eq!(check(&["--crit-state", "none", &malformed]).0, 1);

    // absent: OK unless asked for.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let absent = file_url(dir.path());
    let (code, out) = check(&[&absent]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("absent=1;;;0"), "{out}");
    assert_eq!(check(&["--crit-state", "absent", &absent]).0, 2);

    // Not gathered: UNKNOWN, never OK; a known CRITICAL still outranks it.
    let missing = file_url(&dir.path().join("no-such-dir"));
    let (code, out) = check(&[&fresh, &missing]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.starts_with("LEASES UNKNOWN - ") && out.contains("errors=1;;;0"),
        "{out}"
    );
    assert_eq!(check(&[&stale, &missing]).0, 2);
    // A pod that cannot be scanned is UNKNOWN too.
    let out = leasectl(None, &["check", "--pod-root", "999999999", &fresh]);
    assert_exit(&out, 3);

    // Usage errors are UNKNOWN (3), not CRITICAL (2), with a status line.
    let (code, out) = check(&["--warn-age", "soon", &fresh]);
    assert_eq!(code, 3);
    assert!(out.starts_with("LEASES UNKNOWN - "), "{out}");
    let (code, out) = check(&["--crit-state", "fresh", &fresh]);
    assert_eq!(code, 3, "{out}");
    let (code, out) = check(&["not-a-url"]);
    assert_eq!(code, 3, "{out}");
}

/// Hostile text cannot forge a status line or perfdata: `|` and control
/// characters in an instance id are escaped.
#[test]
fn check_escapes_untrusted_text() {
    let (_d, url) = store_with(&[("db/", record("evil | ok=1 \x1b[2J\nLEASES OK", 300, 30))]);
    let (code, out) = check(&[&url]);
    assert_eq!(code, 2, "{out}");
    assert!(!out.contains('\x1b'), "{out:?}");
    assert_eq!(out.matches('|').count(), 1, "{out}");
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(
        out.contains("evil \\x7c ok=1 \\x1b[2J\\nLEASES OK"),
        "{out}"
    );
}

#[test]
fn output_formats_and_the_table_for_a_pipe() {
    let (_d, url) = store_with(&[
        ("a/", record("holder a", 5, 60)),
        ("b/", record("holder-b", 300, 30)),
    ]);
    // No -o and stdout is a pipe: the plain table, with --json's exit codes.
    let out = leasectl(None, &["--no-pod", &url]);
    assert_eq!(out.status.code(), Some(3));
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "TARGET",
            "PREFIX",
            "STATE",
            "HOLDER",
            "AGE",
            "TTL",
            "EXPIRES",
            "SKEW",
            "EXCLUSION",
            "GENERATION"
        ]
    );
    assert_eq!(lines.len(), 3, "{table}");
    assert_eq!(&lines[1][1..4], ["a/", "fresh", "holder\\x20a"], "{table}");
    assert_eq!(&lines[2][1..4], ["b/", "stale", "holder-b"], "{table}");
    assert!(lines.iter().all(|l| l.len() == 10), "{table}");

    // -o ndjson: one lease line per prefix with its target, then a summary.
    let out = leasectl(None, &["--no-pod", "-o", "ndjson", &url]);
    assert_eq!(out.status.code(), Some(3));
    let v: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0]["type"], "lease");
    assert_eq!(v[0]["target"], url.as_str());
    assert_eq!(v[0]["record"]["instance_id"], "holder a");
    assert_eq!(v[1]["state"], "stale");
    assert_eq!(v[2]["type"], "summary");
    assert_eq!(v[2]["exit_code"], 3);

    // -o json is --json.
    let out = leasectl(None, &["--no-pod", "-o", "json", &url]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema_version"], "1.6");
    assert_eq!(out.status.code(), Some(3));

    // -o prometheus.
    let out = leasectl(None, &["--no-pod", "-o", "prometheus", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("leasectl_lease_state{{target=\"{url}\",prefix=\"b/\",state=\"stale\"}} 1");
    assert!(text.lines().any(|l| l == want), "{text}");
    assert!(
        text.lines()
            .any(|l| l
                == format!("leasectl_lease_ttl_seconds{{target=\"{url}\",prefix=\"a/\"}} 60.0")),
        "{text}"
    );
    // A file store is never probed here: unknown, so no probe_ok at all.
    assert!(
        text.lines()
            .any(|l| l == format!("leasectl_probe_known{{target=\"{url}\"}} 0")),
        "{text}"
    );
    assert!(!text.contains("leasectl_probe_ok{"), "{text}");
    if let Some(promtool) = which("promtool") {
        let mut c = Command::new(promtool);
        c.args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "promtool: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }

    // --watch streams NDJSON only.
    let out = leasectl(None, &["--no-pod", "--watch", "-o", "table", &url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be combined with -o table"));
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Waits until `key` exists: discovery lists about every 30 s, so a stream
/// or exporter started before the holder's first PUT would see the prefix
/// only at the next listing.
async fn wait_for_key(client: &aws_sdk_s3::Client, bucket: &str, key: &str) {
    for _ in 0..200 {
        if client
            .head_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{key} never appeared in {bucket}");
}

fn hold_cmd() -> Vec<String> {
    vec!["sleep".into(), "1000".into()]
}

/// `leasectl -v bucket hold URL --ttl 3s --instance-id ID ARGS -- sleep 1000`
/// ([`Hold::spawn`] of `name` in `dir`) through `endpoint`.
fn sleeping_holder(
    dir: &Path,
    name: &str,
    endpoint: &str,
    url: &str,
    id: &str,
    args: &[&str],
) -> Hold {
    let args = [&["--ttl", "3s", "--instance-id", id], args].concat();
    Hold::spawn(dir, name, endpoint, url, &args, &hold_cmd(), &[])
}

/// `leasectl --endpoint-url ENDPOINT --path-style serve … s3://BUCKET/`
/// (its stderr to `stderr`).
fn serve_bucket(endpoint: &str, bucket: &str, stderr: &Path) -> Serve {
    Serve::spawn(
        bin()
            .args(["--endpoint-url", endpoint, "--path-style"])
            .args(SERVE_ARGS)
            .arg(format!("s3://{bucket}/")),
        stderr,
    )
}

/// A [`sleeping_holder`] of `s3://BUCKET/db/` named `name`, holding as `id`,
/// and once its LEASE is there a [`serve_bucket`] (its stderr in
/// `DIR/serve.stderr`).
async fn held_and_served(
    endpoint: &str,
    client: &aws_sdk_s3::Client,
    bucket: &str,
    dir: &Path,
    name: &str,
    id: &str,
) -> (Hold, Serve) {
    let url = format!("s3://{bucket}/db/");
    let hold = sleeping_holder(dir, name, endpoint, &url, id, &[]);
    wait_for_key(client, bucket, "db/LEASE").await;
    (
        hold,
        serve_bucket(endpoint, bucket, &dir.join("serve.stderr")),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_streams_renewals_and_the_holders_death() {
    let (m, client, bucket) = moto_bucket("watch-ndjson").await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("s3://{bucket}/db/");
    let mut hold = sleeping_holder(
        dir.path(),
        "holder",
        &m.endpoint(),
        &url,
        "watched-holder",
        &[],
    );
    wait_for_key(&client, &bucket, "db/LEASE").await;
    let (mut watch, rx) = spawn_lines(
        bin()
            .args(["--endpoint-url", &m.endpoint(), "--path-style", "--no-pod"])
            .args([
                "--watch=1s",
                "--heartbeat",
                "2s",
                &format!("s3://{bucket}/"),
            ])
            .stderr(Stdio::piped()),
    );
    let mut seen = Vec::new();
    let is_row = |v: &serde_json::Value, state: &str| {
        v["type"] == "lease"
            && v["prefix"] == "db/"
            && v["state"] == state
            && v["record"]["instance_id"] == "watched-holder"
    };
    let first = wait_line(&rx, &mut seen, Duration::from_secs(30), "fresh", |v| {
        is_row(v, "fresh")
    });
    assert_eq!(first["target"], format!("s3://{bucket}/"));
    assert_eq!(first["key"], "db/LEASE");
    // Renewals (every TTL/3) change the ETag: a new line each time.
    let etag0 = first["etag"].clone();
    let second = wait_line(
        &rx,
        &mut seen,
        Duration::from_secs(20),
        "after a renewal",
        |v| is_row(v, "fresh") && v["etag"] != etag0,
    );
    assert_ne!(second["etag"], etag0);
    wait_line(&rx, &mut seen, Duration::from_secs(20), "heartbeat", |v| {
        v["type"] == "heartbeat" && v["prefixes"] == 1 && v["schema_version"] == "1.6"
    });
    // The holder dies without releasing: the same record turns stale.
    signal_group(hold.pgid(), libc::SIGKILL);
    let _ = hold.exit_code(Duration::from_secs(10)).await;
    let stale = wait_line(&rx, &mut seen, Duration::from_secs(30), "stale", |v| {
        is_row(v, "stale")
    });
    assert!(stale["expires_in_s"].as_f64().unwrap() <= 0.0, "{stale}");
    // Unchanged rows are not repeated: between the stale line and the end,
    // only heartbeats.
    let n = seen.len();
    wait_line(
        &rx,
        &mut seen,
        Duration::from_secs(20),
        "heartbeat after stale",
        |v| v["type"] == "heartbeat",
    );
    assert!(
        seen[n..].iter().all(|v| v["type"] == "heartbeat"),
        "{:#?}",
        &seen[n..]
    );
    // SIGTERM ends the stream cleanly.
    // SAFETY: kill(2) on a child this test started.
    unsafe { libc::kill(watch.id() as i32, libc::SIGTERM) };
    let status = watch.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn watch_ends_with_141_when_the_reader_goes_away() {
    let (_d, url) = store_with(&[("db/", record("h", 1, 60))]);
    let out = Command::new("bash")
        .args([
            "-c",
            &format!(
                "'{}' --no-pod --watch=1s '{url}' | head -n 1 >/dev/null; echo ${{PIPESTATUS[0]}}",
                bin_path()
            ),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "141");
}

async fn scrape_until(port: u16, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let end = std::time::Instant::now() + Duration::from_secs(40);
    let mut last = String::new();
    while std::time::Instant::now() < end {
        let (status, body) = http_get(port, "/metrics").await;
        if status == 200 && pred(&body) {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!("metrics never showed {what}; last scrape:\n{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_is_scraped_while_leases_change() {
    let (m, client, bucket) = moto_bucket("serve-metrics").await;
    // A hostile prefix: its label value must be escaped per the format.
    common::put_raw(&client, &bucket, "we\"ird\\x/LEASE", b"{torn").await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("s3://{bucket}/db/");
    let (mut first, mut serve) = held_and_served(
        &m.endpoint(),
        &client,
        &bucket,
        dir.path(),
        "first",
        "first-holder",
    )
    .await;
    let port = serve.port;
    let target = format!("s3://{bucket}/");
    let series = |name: &str, prefix: &str, state: Option<&str>| match state {
        Some(s) => format!("{name}{{target=\"{target}\",prefix=\"{prefix}\",state=\"{s}\"}}"),
        None => format!("{name}{{target=\"{target}\",prefix=\"{prefix}\"}}"),
    };
    let fresh = series("leasectl_lease_state", "db/", Some("fresh"));
    let stale = series("leasectl_lease_state", "db/", Some("stale"));
    // Counted by how the holder changed (issue 26 §3): each `how` from zero.
    let changes = |how: &str| {
        format!(
            "leasectl_lease_holder_changes_total{{target=\"{target}\",prefix=\"db/\",how=\"{how}\"}}"
        )
    };
    let body = scrape_until(port, "db/ fresh", |b| sample(b, &fresh) == Some(1.0)).await;
    assert_eq!(sample(&body, &stale), Some(0.0));
    assert_eq!(
        sample(&body, &series("leasectl_lease_ttl_seconds", "db/", None)),
        Some(3.0)
    );
    let exp = sample(
        &body,
        &series("leasectl_lease_expires_in_seconds", "db/", None),
    )
    .unwrap();
    assert!(exp > 0.0 && exp <= 3.5, "{exp}");
    assert!(sample(&body, &series("leasectl_lease_age_seconds", "db/", None)).is_some());
    assert!(sample(
        &body,
        &series("leasectl_lease_holder_skew_seconds", "db/", None)
    )
    .is_some());
    assert!(
        sample(
            &body,
            &format!("leasectl_reader_server_offset_seconds{{target=\"{target}\"}}")
        )
        .is_some(),
        "{body}"
    );
    assert_eq!(
        sample(&body, &format!("leasectl_target_up{{target=\"{target}\"}}")),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &body,
            &format!("leasectl_gather_errors_total{{target=\"{target}\"}}")
        ),
        Some(0.0)
    );
    assert!(sample(&body, "leasectl_store_requests_total").unwrap() > 0.0);
    assert!(
        sample(&body, "leasectl_store_errors_total").is_some(),
        "{body}"
    );
    // serve never writes, so it never probes: the probe result is unknown,
    // and unknown is never "ok".
    assert_eq!(
        sample(
            &body,
            &format!("leasectl_probe_known{{target=\"{target}\"}}")
        ),
        Some(0.0),
        "{body}"
    );
    assert!(!body.contains("leasectl_probe_ok{"), "{body}");
    for how in HOWS {
        assert_eq!(sample(&body, &changes(how)), Some(0.0), "{how}: {body}");
    }
    // The hostile prefix: leasectl's text rule doubles the `\`, then the
    // exposition format escapes `"` and each `\` of that.
    let weird = series(
        "leasectl_lease_state",
        "we\\\"ird\\\\\\\\x/",
        Some("malformed"),
    );
    assert_eq!(sample(&body, &weird), Some(1.0), "{body}");
    let (status, health) = http_get(port, "/healthz").await;
    assert_eq!((status, health.as_str()), (200, "ok\n"));
    let (status, _) = http_get(port, "/no-such-page").await;
    assert_eq!(status, 404);
    // The exporter counts what it answered, this scrape included.
    let body = http_get(port, "/metrics").await.1;
    let http = |path: &str, code: u16| {
        sample(
            &body,
            &format!("leasectl_http_requests_total{{path=\"{path}\",code=\"{code}\"}}"),
        )
    };
    assert_eq!(http("/healthz", 200), Some(1.0), "{body}");
    assert_eq!(http("other", 404), Some(1.0), "{body}");
    assert!(http("/metrics", 200).unwrap() >= 2.0, "{body}");

    // The holder dies: stale.
    signal_group(first.pgid(), libc::SIGKILL);
    let _ = first.exit_code(Duration::from_secs(10)).await;
    let body = scrape_until(port, "db/ stale", |b| sample(b, &stale) == Some(1.0)).await;
    assert_eq!(sample(&body, &fresh), Some(0.0));
    assert!(
        sample(
            &body,
            &series("leasectl_lease_expires_in_seconds", "db/", None)
        )
        .unwrap()
            <= 0.0
    );

    // A new holder takes the stale lease over: fresh again, one holder change.
    let wait = ["--wait", "20s"];
    let _second = sleeping_holder(
        dir.path(),
        "second",
        &m.endpoint(),
        &url,
        "second-holder",
        &wait,
    );
    let body = scrape_until(port, "a holder change", |b| {
        sample(b, &changes("after_expiry")) == Some(1.0)
    })
    .await;
    assert_eq!(sample(&body, &fresh), Some(1.0), "{body}");
    for how in HOWS.iter().filter(|h| **h != "after_expiry") {
        assert_eq!(sample(&body, &changes(how)), Some(0.0), "{how}: {body}");
    }

    // SIGTERM: a clean stop.
    assert_eq!(serve.terminate(), Some(0));
}

#[test]
fn completions_parse_with_bash_and_the_man_page_renders() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let out = leasectl(None, &["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        for sub in ["check", "serve", "takeover", "completions"] {
            assert!(text.contains(sub), "{shell} completions lack {sub}");
        }
        if shell == "bash" {
            let f = dir.path().join("leasectl.bash");
            std::fs::write(&f, text.as_bytes()).unwrap();
            let o = Command::new("bash").arg("-n").arg(&f).output().unwrap();
            assert!(
                o.status.success(),
                "bash -n: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            // And it loads: `complete -p leasectl` names its function.
            let o = Command::new("bash")
                .args([
                    "-c",
                    &format!("source '{}' && complete -p leasectl", f.display()),
                ])
                .output()
                .unwrap();
            assert!(
                String::from_utf8_lossy(&o.stdout).contains("leasectl"),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
    let out = leasectl(None, &["man"]);
    assert_eq!(out.status.code(), Some(0));
    let man = String::from_utf8_lossy(&out.stdout);
    assert!(
        man.starts_with(".ie") || man.starts_with(".TH"),
        "{}",
        &man[..man.len().min(200)]
    );
    assert!(
        man.contains(".TH leasectl"),
        "{}",
        &man[..man.len().min(400)]
    );
}

fn venv_python() -> std::path::PathBuf {
    let dir = std::env::var_os("LEASECTL_VENV_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| common::repo().join(".venv"));
    dir.join("moto-5.2.5/bin/python")
}

/// The example rules and manifest: promtool when it is installed; always a
/// YAML parse (PyYAML, from the moto venv) checking the structure, that
/// every metric the rules name is one leasectl exports, and that the
/// manifest's arguments parse with leasectl's own command line.
#[tokio::test(flavor = "multi_thread")]
async fn example_rules_and_manifest_are_valid() {
    let rules = common::repo().join("assets/monitoring/leasectl.rules.yml");
    let manifest = common::repo().join("assets/monitoring/daemonset.yaml");
    if let Some(promtool) = which("promtool") {
        let o = Command::new(promtool)
            .args(["check", "rules"])
            .arg(&rules)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "promtool: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let script = r#"
import json, sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
docs = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
out = {"alerts": [], "exprs": [], "kinds": [d["kind"] for d in docs]}
for g in rules["groups"]:
    assert g["name"] and g["rules"], g
    for r in g["rules"]:
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}, r
        assert r["labels"]["severity"] in ("warning", "critical"), r
        assert r["annotations"]["summary"], r
        out["alerts"].append(r["alert"]); out["exprs"].append(r["expr"])
ds = next(d for d in docs if d["kind"] == "DaemonSet")
c = ds["spec"]["template"]["spec"]["containers"][0]
out["args"] = c["args"]
out["port"] = c["ports"][0]["containerPort"]
out["probes"] = [c["readinessProbe"]["httpGet"]["path"], c["livenessProbe"]["httpGet"]["path"]]
svc = next(d for d in docs if d["kind"] == "Service")
assert svc["spec"]["selector"] == ds["spec"]["selector"]["matchLabels"]
print(json.dumps(out))
"#;
    let o = Command::new(venv_python())
        .arg("-c")
        .arg(script)
        .arg(&rules)
        .arg(&manifest)
        .output()
        .expect("python (run scripts/test.sh to set up the venv)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["alerts"].as_array().unwrap().len() >= 5);
    assert_eq!(v["kinds"], serde_json::json!(["DaemonSet", "Service"]));
    // Every metric named in the rules is exported (by serve on an S3 store
    // with a lease, with a pod scan asked for).
    let (m, client, bucket) = moto_bucket("rules-metrics").await;
    common::put_raw(&client, &bucket, "db/LEASE", record("h", 1, 60).as_bytes()).await;
    // A released prefix too, for the series of a prefix without a holder.
    let now = chrono::Utc::now();
    let released = leasectl::bucket::LeaseRecord {
        instance_id: "g".into(),
        acquired_at: now - chrono::Duration::seconds(60),
        renewed_at: now - chrono::Duration::seconds(30),
        ttl_s: 30,
        generation: Some(7),
        released_at: None,
    }
    .released(now);
    common::put_raw(&client, &bucket, "free/LEASE", &released.to_body()).await;
    // Scraped from `serve`, which the manifest runs (a one-shot `-o
    // prometheus` has no holder-change counters: issue 35 trip 10), and
    // from a probe of the same bucket (`--module`: the probes' own families).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[contexts.m]\nendpoint_url = \"{}\"\npath_style = true\nallow = [\"s3://{bucket}/\"]\n",
            m.endpoint()
        ),
    )
    .unwrap();
    let stderr_path = dir.path().join("serve.stderr");
    let mut serve = Serve::spawn(
        bin()
            .args(["--endpoint-url", &m.endpoint(), "--path-style"])
            .args(["serve", "--listen", "127.0.0.1:0", "--refresh", "1s"])
            .args(["--module", "m"])
            .arg(format!("s3://{bucket}/"))
            .env("LEASECTL_CONFIG", &config),
        &stderr_path,
    );
    let port = serve.port;
    let mut exported = scrape_until(port, "both prefixes", |b| {
        b.contains("prefix=\"free/\"") && b.contains("prefix=\"db/\"")
    })
    .await;
    let (code, probed) = http_get(
        port,
        &format!("/probe?target=s3%3A%2F%2F{bucket}%2F&module=m"),
    )
    .await;
    assert_eq!(code, 200, "{probed}");
    exported.push_str(&probed);
    serve.stop();
    for expr in v["exprs"].as_array().unwrap() {
        let expr = expr.as_str().unwrap();
        for name in expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("leasectl_"))
        {
            assert!(
                exported.contains(&format!("# TYPE {name} "))
                    || exported.lines().any(|l| l.starts_with(name)),
                "the rules use {name}, which leasectl does not export:\n{exported}"
            );
        }
    }
    // The manifest's arguments are leasectl's.
    let args: Vec<String> = v["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    use clap::Parser;
    let cli =
        leasectl::cli::Cli::try_parse_from(std::iter::once("leasectl".to_owned()).chain(args))
            .unwrap_or_else(|e| panic!("the manifest's args do not parse: {e}"));
    match cli.command {
        Some(leasectl::cli::Command::Serve(s)) => {
            assert_eq!(s.listen.port() as u64, v["port"].as_u64().unwrap())
        }
        other => panic!("the manifest does not run serve: {other:?}"),
    }
    assert_eq!(v["probes"], serde_json::json!(["/healthz", "/healthz"]));
}

/// `--min-leases`: fewer leases (rows that are not absent) than asked is
/// CRITICAL with a sentence; without it, a TARGET under which nothing was
/// found is OK but says so in the status line.
#[test]
fn check_min_leases_and_nothing_found() {
    let empty = tempfile::tempdir().unwrap();
    let url = file_url(empty.path());
    let (code, out) = check(&[&url]);
    assert_eq!(code, 0, "{out}");
    let first = out.lines().next().unwrap();
    assert!(
        first.contains(&format!("nothing found under {url}")),
        "{out}"
    );
    let (code, out) = check(&["--min-leases", "1", &url]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.starts_with("LEASES CRITICAL - ")
            && out.contains("0 leases found where at least 1 is expected (--min-leases)"),
        "{out}"
    );

    // An absent LEASE does not count; a fresh one does.
    let (_d, url) = store_with(&[("a/", record("holder-a", 1, 60))]);
    std::fs::create_dir_all(_d.path().join("b")).unwrap();
    let (code, out) = check(&["--min-leases", "2", &url]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("1 lease found where at least 2 are expected"),
        "{out}"
    );
    let (code, out) = check(&["--min-leases", "1", &url]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("nothing found"), "{out}");
    let (code, out) = check(&["--min-leases", "many", &url]);
    assert_eq!(code, 3, "{out}");
}

/// A real pod verdict makes `check` CRITICAL: real `writer exec` processes
/// and a real flock on `.writer.lock`. One pod root that takes the lock is
/// OK; two siblings that both believe they are the pod's root race for it
/// (one holds, one waits): `siblings_racing`, exit 2.
#[test]
fn check_is_critical_on_a_real_pod_verdict() {
    use crate::writer_support::{command, scan_until, spawn_siblings, Guard};
    use leasectl::writer::scan::LockState;

    let run_check = |root: u32, dir: &Path| {
        let out = leasectl(
            None,
            &[
                "check",
                "--pod-root",
                &root.to_string(),
                "--data-dir",
                dir.to_str().unwrap(),
            ],
        );
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let b = bin_path();

    // Healthy: one root takes the lock, its child inherits.
    let healthy = tempfile::tempdir().unwrap();
    let mut cmd = command(b);
    cmd.env("CLOUD_WRITER_LEASE", "1")
        .args(["writer", "exec", "--data-dir"])
        .arg(healthy.path())
        .args(["--", "sleep", "30"])
        .stderr(Stdio::null());
    let one = Guard::spawn(cmd);
    scan_until(one.pid, healthy.path(), |s| {
        s.processes.iter().any(|p| p.lock == LockState::Holds)
    });
    let (code, out) = run_check(one.pid, healthy.path());
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("LEASES OK - "), "{out}");

    // Two siblings race: a verdict, CRITICAL.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let root = spawn_siblings(d, 2);
    scan_until(root.pid, dir.path(), |s| {
        s.processes
            .iter()
            .filter(|p| p.lock != LockState::None)
            .count()
            == 2
    });
    let (code, out) = run_check(root.pid, dir.path());
    assert_eq!(code, 2, "{out}");
    let first = out.lines().next().unwrap();
    assert!(
        first.starts_with("LEASES CRITICAL - ") && first.contains("pod verdict"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("CRITICAL pod verdict siblings_racing: ")),
        "{out}"
    );
    assert!(!out.contains("verdicts=0;"), "{out}");
}

/// Issue 27: `serve --max-requests` bounds the requests it sends once every
/// LEASE was read, whatever the population: 2,000 stale leases on a real
/// local store come due at the listing's cadence (~30 s, ±25 %), about 2,000
/// reads by need in the window measured; under a budget of 600 a minute the
/// store requests counted by serve itself (`leasectl_store_requests_total`)
/// over 40 s stay within 600 × 40 / 60 plus one refresh's worth, while the
/// same serve without a budget worth the name sends several times that.
/// The two serves run side by side, each over a store of its own (one after
/// the other they took 84 s).
#[tokio::test(flavor = "multi_thread")]
async fn serve_holds_its_request_budget() {
    let window = 40.0;
    let counts = futures::future::join_all(
        ["600/min", "1000000"].map(|budget| requests_in_window(budget, window)),
    )
    .await;
    let (budgeted, secs) = counts[0];
    let limit = 600.0 * secs / 60.0 + 10.0;
    assert!(
        budgeted <= limit,
        "{budgeted} requests in {secs:.1} s under a budget of 600/min (at most {limit:.0})"
    );
    // It reads what is due within the budget, not nothing: the stale rows
    // come due from ~22 s after their first read, some 20 s into the window.
    assert!(
        budgeted >= 600.0 * (window - 25.0) / 60.0 / 2.0,
        "{budgeted} requests"
    );
    let (unbounded, _) = counts[1];
    assert!(
        unbounded > 2.0 * limit,
        "without the budget serve should read every stale row by need ({unbounded} requests)"
    );
}

/// One serve of [`serve_holds_its_request_budget`] under `--max-requests
/// budget`, over a local store of its own with 2,000 stale leases: the store
/// requests it counted in about `window` seconds after its second gather,
/// and those seconds.
async fn requests_in_window(budget: &str, window: f64) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"{"instance_id":"gone","acquired_at":"2026-11-30T10:00:00Z","renewed_at":"2026-11-30T10:00:00Z","ttl_s":30}"#;
    for i in 0..2000 {
        let p = dir.path().join(format!("db{i:04}"));
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("LEASE"), body).unwrap();
    }
    let url = format!("file://{}/", dir.path().display());
    let stderr_path = dir.path().join("serve.stderr");
    let mut serve = Serve::spawn(
        bin()
            .args(SERVE_ARGS)
            .args(["--max-requests", budget, &url]),
        &stderr_path,
    );
    let port = serve.port;
    let gathers = |b: &str| sample(b, "leasectl_gathers_total").unwrap_or(0.0);
    // The first gather (every LEASE, not counted) is done once a second one is.
    let b0 = scrape_until(port, "two gathers", |b| gathers(b) >= 2.0).await;
    let t0 = std::time::Instant::now();
    let r0 = sample(&b0, "leasectl_store_requests_total").expect("the request counter");
    tokio::time::sleep(Duration::from_secs_f64(window)).await;
    let (_, b1) = http_get(port, "/metrics").await;
    let secs = t0.elapsed().as_secs_f64();
    let r1 = sample(&b1, "leasectl_store_requests_total").expect("the request counter");
    serve.stop();
    (r1 - r0, secs)
}

/// Issue 34 §3: `serve` says how long the current holder has held each
/// prefix, and how long a prefix has been without one (released here), from
/// what it saw: the holder's seconds grow while it holds; after the release
/// the holder's series is gone and the free seconds grow.
#[tokio::test(flavor = "multi_thread")]
async fn serve_exports_holder_and_free_seconds() {
    let (m, client, bucket) = moto_bucket("serve-tenure").await;
    let dir = tempfile::tempdir().unwrap();
    let (mut hold, mut serve) = held_and_served(
        &m.endpoint(),
        &client,
        &bucket,
        dir.path(),
        "holder",
        "tenure-holder",
    )
    .await;
    let port = serve.port;
    let target = format!("s3://{bucket}/");
    let held = format!("leasectl_lease_holder_seconds{{target=\"{target}\",prefix=\"db/\"}}");
    let free = format!("leasectl_lease_free_seconds{{target=\"{target}\",prefix=\"db/\"}}");
    let body = scrape_until(port, "held for 2 s", |b| {
        sample(b, &held).is_some_and(|s| s >= 2.0)
    })
    .await;
    assert_eq!(sample(&body, &free), None, "{body}");
    // SAFETY: kill(2) on the child this test spawned.
    unsafe { libc::kill(hold.child.id() as i32, libc::SIGTERM) };
    let _ = hold.exit_code(Duration::from_secs(15)).await;
    let body = scrape_until(port, "free for 2 s", |b| {
        sample(b, &free).is_some_and(|s| s >= 2.0)
    })
    .await;
    assert_eq!(sample(&body, &held), None, "{body}");
    serve.stop();
}

/// Issue 34 §3: `serve` exports the largest age of the current tenure's
/// record seen at a reading, against its TTL — how late its renewals came at
/// least once: it grows while the holder does not renew, keeps its largest
/// value across a renewal, and starts again for a new holder. On a local store, the records written by the test
/// (atomically: a half-written record would be malformed).
#[tokio::test(flavor = "multi_thread")]
async fn serve_exports_the_largest_renewal_gap_against_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let put = |holder: &str, ttl: u64| {
        let d = dir.path().join("db");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("LEASE.tmp"), record(holder, 0, ttl)).unwrap();
        std::fs::rename(d.join("LEASE.tmp"), d.join("LEASE")).unwrap();
    };
    put("gap-a", 8);
    let stderr_path = dir.path().join("serve.stderr");
    let target = file_url(dir.path());
    let mut serve = Serve::spawn(
        bin()
            .args(SERVE_ARGS)
            .args(["--audit-log"])
            .arg(dir.path().join("audit.jsonl"))
            .arg(&target),
        &stderr_path,
    );
    let port = serve.port;
    let labels = format!("{{target=\"{target}\",prefix=\"db/\"}}");
    let gap = format!("leasectl_lease_renewal_gap_ttl_ratio{labels}");
    let age = format!("leasectl_lease_age_seconds{labels}");
    // Not renewed for over half its 8 s TTL: the ratio passes 0.5.
    let body = scrape_until(port, "a gap over TTL/2", |b| {
        sample(b, &gap).is_some_and(|g| g > 0.5)
    })
    .await;
    assert!(body.contains("# TYPE leasectl_lease_renewal_gap_ttl_ratio gauge"));
    let before = sample(&body, &age).unwrap();
    // A renewal: once read (a fresh lease off screen is read by need, before
    // it could turn stale), the age falls; the largest gap seen stays.
    put("gap-a", 8);
    let body = scrape_until(port, "the renewal", |b| {
        sample(b, &age).is_some_and(|a| a < before)
    })
    .await;
    assert!(sample(&body, &gap).unwrap() > 0.5, "{body}");
    // A new holder (a 60 s TTL: read within 8 s, its age is under 0.15 of
    // it): its own tenure, counted from its first reading.
    put("gap-b", 60);
    let body = scrape_until(port, "the new holder's gap", |b| {
        sample(b, &gap).is_some_and(|g| g < 0.5)
    })
    .await;
    assert!(sample(&body, &gap).unwrap() < 0.2, "{body}");
    serve.stop();
}
