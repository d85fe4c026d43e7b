//! `leasectl --json` against a real S3 server (moto) and the local store:
//! every state, its problem and age, the exit codes.

use crate::common::*;
use chrono::{Duration, SecondsFormat, Utc};
use serde_json::Value;

const HOSTILE_ID: &str = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J";

fn record_bytes(id: &str, renewed_offset_s: i64, ttl: i64) -> Vec<u8> {
    let now = Utc::now();
    let ts = |d: i64| (now + Duration::seconds(d)).to_rfc3339_opts(SecondsFormat::Millis, true);
    format!(
        r#"{{"instance_id":{},"acquired_at":"{}","renewed_at":"{}","ttl_s":{ttl}}}"#,
        serde_json::to_string(id).unwrap(),
        ts(renewed_offset_s - 60),
        ts(renewed_offset_s)
    )
    .into_bytes()
}

/// (prefix, body or None for absent, expected state, expected problem substring)
type Case = (
    &'static str,
    Option<Vec<u8>>,
    &'static str,
    Option<&'static str>,
);

fn cases() -> Vec<Case> {
    let mut big = b"{\"instance_id\":\"".to_vec();
    big.extend(std::iter::repeat_n(b'a', 100 * 1024));
    big.extend(b"\"}");
    vec![
        (
            "fresh/",
            Some(record_bytes("holder-fresh", -5, 30)),
            "fresh",
            None,
        ),
        (
            "stale/",
            Some(record_bytes("holder-stale", -120, 30)),
            "stale",
            None,
        ),
        (
            "future/",
            Some(record_bytes("holder-future", 600, 30)),
            "suspect",
            Some("in the future"),
        ),
        (
            "longttl/",
            Some(record_bytes("holder-long", -5, 7200)),
            "suspect",
            Some("7200"),
        ),
        (
            "notjson/",
            Some(b"hello, world".to_vec()),
            "malformed",
            Some("not JSON"),
        ),
        (
            "missing/",
            Some(
                br#"{"instance_id":"x","acquired_at":"2026-01-01T00:00:00Z","ttl_s":30}"#.to_vec(),
            ),
            "malformed",
            Some("missing field renewed_at"),
        ),
        (
            "ttlzero/",
            Some(record_bytes("holder-zero", -5, 0)),
            "malformed",
            Some("ttl_s must be a positive"),
        ),
        (
            "huge/",
            Some(big),
            "malformed",
            Some("over the 64 KiB limit"),
        ),
        (
            "notutf8/",
            Some(b"{\"instance_id\":\"\xff\xfe\"}".to_vec()),
            "malformed",
            Some("not UTF-8"),
        ),
        (
            "hostile/",
            Some(record_bytes(HOSTILE_ID, -3, 30)),
            "fresh",
            None,
        ),
        ("absent/", None, "absent", None),
    ]
}

fn check(doc: &Value) {
    let prefixes = doc["targets"][0]["prefixes"].as_array().expect("prefixes");
    let by_prefix = |p: &str| {
        prefixes
            .iter()
            .find(|x| x["prefix"].as_str().unwrap().ends_with(p))
            .unwrap_or_else(|| panic!("prefix {p} missing from {doc:#}"))
    };
    assert_eq!(prefixes.len(), cases().len(), "{doc:#}");
    for (prefix, _, state, problem) in cases() {
        let row = by_prefix(prefix);
        assert_eq!(row["state"], state, "{prefix}: {row:#}");
        match problem {
            Some(p) => assert!(
                row["problem"].as_str().unwrap_or("").contains(p),
                "{prefix}: problem {:?} lacks {p:?}",
                row["problem"]
            ),
            None => assert!(row["problem"].is_null(), "{prefix}: {row:#}"),
        }
        assert_eq!(row["exclusion"], "unprobed");
        if state == "absent" {
            assert!(row["etag"].is_null() && row["record"].is_null());
        } else {
            assert!(
                row["etag"].as_str().is_some_and(|e| !e.is_empty()),
                "{prefix}"
            );
        }
        if state == "malformed" {
            assert!(
                row["raw"].is_string(),
                "{prefix}: raw body shown when malformed"
            );
            assert!(row["record"].is_null());
        } else {
            assert!(row["raw"].is_null());
        }
    }
    // Ages by the reader's clock, allowing for the time the test takes.
    let age = |p: &str| by_prefix(p)["age_s"].as_f64().unwrap();
    assert!((5.0..20.0).contains(&age("fresh/")), "{}", age("fresh/"));
    assert!((120.0..135.0).contains(&age("stale/")));
    assert!((-600.0..-585.0).contains(&age("future/")));
    let exp = by_prefix("stale/")["expires_in_s"].as_f64().unwrap();
    assert!((-105.0..-90.0).contains(&exp), "{exp}");
    // The hostile id survives intact inside valid JSON (escaped by JSON, not altered).
    assert_eq!(by_prefix("hostile/")["record"]["instance_id"], HOSTILE_ID);
    // The raw body of a non-UTF-8 lease is shown escaped.
    assert!(by_prefix("notutf8/")["raw"]
        .as_str()
        .unwrap()
        .contains("\\xff\\xfe"));
    assert_eq!(doc["schema_version"], "1.6");
    assert!(doc["pod"]["verdicts"].is_array());
}

/// Asserts that `out` exited 3 (attention needed) with one JSON document
/// on stdout with no raw escape, passing [`check`]; returns it.
#[track_caller]
fn needs_attention_doc(out: &std::process::Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(3),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_raw_escape(&out.stdout);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    check(&doc);
    doc
}

fn assert_no_raw_escape(stdout: &[u8]) {
    assert!(
        !stdout.contains(&0x1b),
        "an ESC byte reached stdout: the JSON must escape it"
    );
}

server_matrix! {
async fn every_state_on_s3(server: Server) {
    let (endpoint, bucket) = server.bucket("every-state").await;
    let client = sdk_client(&endpoint);
    for (prefix, body, _, _) in cases() {
        match body {
            Some(b) => put_raw(&client, &bucket, &format!("backups/{prefix}LEASE"), &b).await,
            None => put_raw(&client, &bucket, &format!("backups/{prefix}data.bin"), b"x").await,
        }
    }
    let url = format!("s3://{bucket}/backups/");
    let out = tokio::task::spawn_blocking(move || {
        leasectl(Some(&endpoint), &["--json", "--no-pod", &url])
    })
    .await
    .unwrap();
    let doc = needs_attention_doc(&out);
    assert_eq!(doc["targets"][0]["bucket"], bucket.as_str());
    // Holder skew: renewed_at − Last-Modified, within a few seconds for a record written now.
    let fresh = doc["targets"][0]["prefixes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["prefix"] == "backups/fresh/")
        .unwrap();
    assert!(
        fresh["holder_skew_s"].as_f64().unwrap().abs() < 10.0,
        "{fresh:#}"
    );
}
}

#[test]
fn every_state_on_local_store() {
    let dir = tempfile::tempdir().unwrap();
    for (prefix, body, _, _) in cases() {
        let d = dir.path().join(prefix.trim_end_matches('/'));
        std::fs::create_dir_all(&d).unwrap();
        match body {
            Some(b) => std::fs::write(d.join("LEASE"), b).unwrap(),
            None => std::fs::write(d.join("data.bin"), b"x").unwrap(),
        }
    }
    let out = leasectl(None, &["--json", "--no-pod", &file_url(dir.path())]);
    needs_attention_doc(&out);
}

#[test]
fn healthy_prefixes_exit_zero() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("a")).unwrap();
    std::fs::write(dir.path().join("a/LEASE"), record_bytes("h", -1, 30)).unwrap();
    std::fs::create_dir_all(dir.path().join("b")).unwrap();
    let out = leasectl(None, &["--json", "--no-pod", &file_url(dir.path())]);
    assert_exit(&out, 0);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let states: Vec<&str> = doc["targets"][0]["prefixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["fresh", "absent"]);
}

#[test]
fn target_itself_is_a_prefix_and_depth_zero_lists_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("LEASE"),
        record_bytes("root-holder", -100, 30),
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("child")).unwrap();
    let out = leasectl(
        None,
        &["--json", "--no-pod", "--depth", "0", &file_url(dir.path())],
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let prefixes = doc["targets"][0]["prefixes"].as_array().unwrap();
    assert_eq!(prefixes.len(), 1, "{doc:#}");
    assert_eq!(prefixes[0]["key"], "LEASE");
    assert_eq!(prefixes[0]["state"], "stale");
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn unreachable_endpoint_exits_one_naming_it() {
    // Port 1 on loopback: connection refused at once.
    let out = leasectl(
        Some("http://127.0.0.1:1"),
        &["--json", "--timeout", "3s", "s3://some-bucket/x/"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("http://127.0.0.1:1"),
        "stderr names the endpoint: {err}"
    );
    assert!(
        !err.contains("testing-secret"),
        "never print a credential: {err}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["targets"][0]["error"]
        .as_str()
        .unwrap()
        .contains("127.0.0.1:1"));
}

#[test]
fn missing_bucket_exits_one() {
    let server = moto(Moto::Conditional);
    let out = leasectl(
        Some(&server.endpoint()),
        &["--json", "s3://no-such-bucket-here/"],
    );
    assert_exit(&out, 1);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["targets"][0]["error"]
            .as_str()
            .unwrap()
            .contains("NoSuchBucket"),
        "{doc:#}"
    );
}

#[test]
fn bad_urls_and_flags_exit_two() {
    for args in [
        vec!["--json", "http://example.com/x"],
        vec!["--json", "s3://"],
        vec!["--json", "file://remote-host/x/"],
        vec!["--json", "--depth", "many", "file:///tmp/"],
        vec!["--json", "--refresh", "soon", "file:///tmp/"],
        vec!["--no-such-flag"],
    ] {
        let out = leasectl(None, &args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !out.stderr.is_empty(),
            "{args:?}: a usage error says what is wrong"
        );
        assert!(
            out.stdout.is_empty(),
            "{args:?}: no snapshot on a usage error"
        );
    }
}

#[test]
fn missing_local_directory_is_reported() {
    let out = leasectl(None, &["--json", "file:///definitely/not/here/"]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/definitely/not/here"), "{err}");
}

#[test]
fn a_huge_local_lease_is_judged_from_its_first_64_kib() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("big")).unwrap();
    let f = std::fs::File::create(dir.path().join("big/LEASE")).unwrap();
    f.set_len(512 * 1024 * 1024).unwrap(); // sparse: 512 MiB of zeros
    let out = leasectl(None, &["--json", "--no-pod", &file_url(dir.path())]);
    assert_exit(&out, 3);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &doc["targets"][0]["prefixes"][0];
    assert_eq!(row["state"], "malformed");
    assert!(
        row["problem"].as_str().unwrap().contains("536870912 bytes"),
        "{row:#}"
    );
    assert!(row["etag"].as_str().unwrap().starts_with('m'));
}

#[test]
fn best_effort_mode_is_the_exclusion_in_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let out = leasectl(
        None,
        &[
            "--json",
            "--no-pod",
            "--conditional",
            "off",
            &file_url(dir.path()),
        ],
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["targets"][0]["prefixes"][0]["exclusion"], "best_effort");
    let out = leasectl(None, &["--json", "--no-pod", &file_url(dir.path())]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["targets"][0]["prefixes"][0]["exclusion"], "unprobed");
}

/// The endpoint shown (and audited) is the one requests go to, however it was
/// configured: here `AWS_ENDPOINT_URL_S3`, with the region and addressing style.
#[tokio::test(flavor = "multi_thread")]
async fn the_endpoint_shown_is_the_one_requests_use() {
    let server = crate::common::moto(crate::common::Moto::Conditional);
    let b = crate::common::bucket_name("endpoint-s3-env");
    crate::common::create_bucket(&crate::common::sdk_client(&server.endpoint()), &b).await;
    let mut c = bin();
    c.env("AWS_ENDPOINT_URL_S3", server.endpoint()).args([
        "--path-style",
        "--json",
        "--no-pod",
        &format!("s3://{b}/"),
    ]);
    let out = tokio::task::spawn_blocking(move || {
        crate::common::run_with_timeout(c, std::time::Duration::from_secs(60))
    })
    .await
    .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let endpoint = doc["targets"][0]["endpoint"].as_str().unwrap();
    assert_eq!(endpoint, server.endpoint(), "{doc:#}");
    assert_eq!(doc["targets"][0]["region"], "us-east-1", "{doc:#}");
    assert_eq!(doc["targets"][0]["addressing_style"], "path", "{doc:#}");
    assert!(doc["targets"][0]["error"].is_null(), "{doc:#}");
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
}

/// A profile's `s3 = / addressing_style = path` is honoured like `--path-style`
/// (against `localhost`, virtual-host addressing would look up `bucket.localhost`).
#[tokio::test(flavor = "multi_thread")]
async fn a_profile_can_choose_path_style_addressing() {
    let server = crate::common::moto(crate::common::Moto::Conditional);
    let b = crate::common::bucket_name("profile-path-style");
    crate::common::create_bucket(&crate::common::sdk_client(&server.endpoint()), &b).await;
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".aws")).unwrap();
    std::fs::write(
        home.path().join(".aws/config"),
        "[profile minio]\nregion = us-east-1\ns3 =\n  addressing_style = path\n",
    )
    .unwrap();
    let endpoint = format!("http://localhost:{}", server.port);
    let url = format!("s3://{b}/");
    let out = tokio::task::spawn_blocking(move || {
        let mut c = bin();
        c.env("HOME", home.path())
            .args(["--profile", "minio", "--endpoint-url", &endpoint])
            .args(["--json", "--no-pod", &url]);
        crate::common::run_with_timeout(c, std::time::Duration::from_secs(60))
    })
    .await
    .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["targets"][0]["error"].is_null(), "{doc:#}");
    assert_eq!(doc["targets"][0]["addressing_style"], "path", "{doc:#}");
    assert_eq!(
        doc["targets"][0]["endpoint"],
        format!("http://localhost:{}", server.port),
        "{doc:#}"
    );
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
}
