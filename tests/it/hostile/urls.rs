//! Hostile TARGET URLs: a `#` or `?` is never silently cut off a path, and a
//! writing command names exactly what it is about to write.

use std::time::Duration;

use crate::common::*;

fn run_url(args: &[&str]) -> std::process::Output {
    run_bare(args, Duration::from_secs(30))
}

fn stale_body() -> String {
    let t = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    format!(r#"{{"instance_id":"dead","acquired_at":"{t}","renewed_at":"{t}","ttl_s":30}}"#)
}

#[test]
fn takeover_of_a_url_with_a_fragment_is_refused_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let other = dir.path().join("store#2");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let body = stale_body();
    std::fs::write(store.join("LEASE"), &body).unwrap();
    std::fs::write(other.join("LEASE"), &body).unwrap();
    let log = dir.path().join("audit.jsonl");
    let log_arg = log.display().to_string();
    for url in [
        format!("file://{}/store#2/", dir.path().display()),
        format!("file://{}/store?x=2", dir.path().display()),
    ] {
        let o = run_url(&[
            "takeover",
            &url,
            "--reason",
            "x",
            "--yes",
            "--audit-log",
            &log_arg,
        ]);
        assert_eq!(o.status.code(), Some(2), "{url}: {}", output_text(&o));
        let t = output_text(&o);
        assert!(t.contains("%23") || t.contains("%3F"), "shows the fix: {t}");
        assert!(!t.contains("panicked"));
        for d in [&store, &other] {
            assert_eq!(std::fs::read_to_string(d.join("LEASE")).unwrap(), body);
        }
        assert!(!log.exists(), "nothing audited, nothing sent");
    }
    // The shown fix works, on the right store, and names it before acting.
    let fixed = format!("file://{}/store%232/", dir.path().display());
    let o = run_url(&[
        "takeover",
        &fixed,
        "--reason",
        "x",
        "--yes",
        "--audit-log",
        &log_arg,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let exact = format!("local file {}/store#2/LEASE", dir.path().display());
    assert!(err.contains(&exact), "names {exact}: {err}");
    assert_eq!(
        std::fs::read_to_string(store.join("LEASE")).unwrap(),
        body,
        "the other store is untouched"
    );
    assert_ne!(
        std::fs::read_to_string(other.join("LEASE")).ok().as_deref(),
        Some(body.as_str()),
        "the named store was taken over"
    );
    // The audit entry's URL parses back to the same store.
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("store%232/"), "{log_text}");
}

#[test]
fn bad_escapes_and_dot_segments_are_usage_errors() {
    for url in [
        "file:///tmp/%zz/",
        "file:///tmp/../etc/",
        "file:///tmp/%2e%2e/etc/",
        "file:///tmp/%ff/",
        "s3://bucket/db#2/",
        "s3://bucket/db?versionId=1",
        "s3://bucket/50%/",
    ] {
        let o = run_url(&["--json", "--no-pod", url]);
        assert_eq!(o.status.code(), Some(2), "{url}: {}", output_text(&o));
        assert!(o.stdout.is_empty(), "{url}");
        assert!(!output_text(&o).contains("panicked"));
    }
}

#[test]
fn a_percent_encoded_path_is_read_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("a b#c?d%e");
    std::fs::create_dir_all(odd.join("db")).unwrap();
    std::fs::write(odd.join("db/LEASE"), stale_body()).unwrap();
    let url = format!("file://{}/a%20b%23c%3Fd%25e/", dir.path().display());
    let o = run_url(&["--json", "--no-pod", &url]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &v["targets"][0];
    assert_eq!(t["prefixes"][0]["prefix"], "db/", "{v:#}");
    assert_eq!(t["prefixes"][0]["state"], "stale", "{v:#}");
    // The URL shown parses back to the same directory.
    assert_eq!(
        t["url"].as_str().unwrap(),
        format!("file://{}/a b%23c%3Fd%25e/", dir.path().display())
    );
}
