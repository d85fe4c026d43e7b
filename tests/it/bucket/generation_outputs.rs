//! Issue 26 §1 (the generation shown everywhere the record is) and §3
//! (history in every output), end to end with the real binary on a real
//! local store: `record.generation` in `--json` with and without the field,
//! the table's GENERATION column, `last_takeover` from the audit log a real
//! `leasectl takeover` wrote, `holder_change` lines from a real `--watch`
//! while the record is replaced, deleted and taken over, and the
//! `leasectl_lease_generation` gauge and the `how` label from a real `serve`.
//! LEASE objects with a generation are written directly into the store, so
//! these tests do not depend on which writers set it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use serde_json::Value;

use crate::common::serve::{sample, Serve, HOWS, SERVE_ARGS};
use crate::common::{bin, file_url, leasectl, leasectl_parts, spawn_lines, wait_json_line};

/// A LEASE body renewed `age_s` seconds ago, with `generation` when given.
fn record_with_generation(holder: &str, age_s: i64, ttl_s: u64, generation: Option<u64>) -> String {
    let t = (Utc::now() - chrono::Duration::seconds(age_s))
        .to_rfc3339_opts(SecondsFormat::Micros, true);
    let mut v = serde_json::json!({"instance_id": holder, "acquired_at": t, "renewed_at": t, "ttl_s": ttl_s});
    if let Some(g) = generation {
        v["generation"] = g.into();
    }
    v.to_string()
}

/// Writes `{root}/{prefix}LEASE` whole (a rename, so no reader sees half).
fn write_lease_atomically(root: &Path, prefix: &str, body: &str) {
    let d = root.join(prefix);
    std::fs::create_dir_all(&d).unwrap();
    let tmp = d.join(".LEASE.test-tmp");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, d.join("LEASE")).unwrap();
}

/// `leasectl takeover URL --yes --reason R --then THEN --audit-log LOG`,
/// which must succeed.
fn takeover(url: &str, reason: &str, then: &str, log: &Path) {
    let out = leasectl(
        None,
        &[
            "takeover",
            url,
            "--reason",
            reason,
            "--then",
            then,
            "--yes",
            "--audit-log",
            &log.display().to_string(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "takeover failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `{store}/{prefix}LEASE` whole: [`record_with_generation`] of
/// `holder`.
fn put_lease(
    store: &Path,
    prefix: &str,
    holder: &str,
    age_s: i64,
    ttl_s: u64,
    generation: Option<u64>,
) {
    let body = record_with_generation(holder, age_s, ttl_s, generation);
    write_lease_atomically(store, prefix, &body);
}

/// A temporary directory with an empty local store in it (`DIR/store`).
fn store_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    (dir, store)
}

/// `leasectl -v serve … --audit-log LOG URL` (its log, `-v`, to `stderr`).
fn serve_with_audit_log(log: &Path, url: &str, stderr: &Path) -> Serve {
    Serve::spawn(
        bin()
            .arg("-v")
            .args(SERVE_ARGS)
            .arg("--audit-log")
            .arg(log)
            .arg(url),
        stderr,
    )
}

fn row<'a>(doc: &'a Value, prefix: &str) -> &'a Value {
    doc["targets"][0]["prefixes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["prefix"] == prefix)
        .unwrap_or_else(|| panic!("{prefix} missing: {doc:#}"))
}

/// `record.generation` is the record's, and `null` (present, not left out)
/// for a record without one; the schema is 1.3; the table has a GENERATION
/// column (`-` when unknown); `last_takeover` is null until a real
/// `leasectl takeover` is in the audit log, then names its time, operator,
/// reason and `--then`, in `--json` and in NDJSON lease lines; an audit log
/// that cannot be read is said, and makes the exit code 1 — never "none".
#[test]
fn json_table_and_ndjson_show_the_generation_and_the_last_takeover() {
    let (dir, store) = store_dir();
    put_lease(&store, "gen/", "holder-g", 1, 60, Some(7));
    put_lease(&store, "nogen/", "holder-n", 1, 60, None);
    put_lease(&store, "dead/", "dead-holder", 300, 30, Some(41));
    let log = dir.path().join("audit.jsonl");
    let log_s = log.display().to_string();
    let url = file_url(&store);

    let (code, out, err) =
        leasectl_parts(None, &["--json", "--no-pod", "--audit-log", &log_s, &url]);
    assert_eq!(code, 3, "dead/ is stale: {out}{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["schema_version"], "1.6");
    assert_eq!(row(&doc, "gen/")["record"]["generation"], 7);
    let nogen = &row(&doc, "nogen/")["record"];
    assert!(
        nogen.as_object().unwrap().contains_key("generation") && nogen["generation"].is_null(),
        "{nogen:#}"
    );
    for p in ["gen/", "nogen/", "dead/"] {
        let r = row(&doc, p);
        assert!(
            r.as_object().unwrap().contains_key("last_takeover") && r["last_takeover"].is_null(),
            "{r:#}"
        );
    }
    assert_eq!(doc["audit_log"]["path"], log_s.as_str());
    assert!(doc["audit_log"]["error"].is_null(), "{doc:#}");

    // The table: GENERATION last, `-` when unknown.
    let (_, table, _) = leasectl_parts(None, &["-o", "table", "--no-pod", &url]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0].last(), Some(&"GENERATION"), "{table}");
    let gen_of = |p: &str| {
        lines
            .iter()
            .find(|l| l.get(1) == Some(&p))
            .and_then(|l| l.last().copied())
            .unwrap_or_else(|| panic!("{p} missing:\n{table}"))
    };
    assert_eq!(
        (gen_of("gen/"), gen_of("nogen/"), gen_of("dead/")),
        ("7", "-", "41")
    );

    // A real takeover of the stale lease, handed over to a successor.
    takeover(
        &format!("{url}dead/"),
        "INC-7 dead host",
        "handover:successor-1",
        &log,
    );
    let (_, out, err) = leasectl_parts(None, &["--json", "--no-pod", "--audit-log", &log_s, &url]);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let dead = row(&doc, "dead/");
    assert_eq!(dead["record"]["instance_id"], "successor-1", "{dead:#}");
    let t = &dead["last_takeover"];
    assert_eq!(t["reason"], "INC-7 dead host", "{dead:#}");
    assert_eq!(t["then"], "handover:successor-1");
    assert_eq!(
        t["outcome"].as_str().map(|o| o.starts_with("taken")),
        Some(true)
    );
    assert!(t["operator"].as_str().unwrap().contains('@'), "{t:#}");
    assert_eq!(t["generation"], dead["record"]["generation"], "{dead:#}");
    // The takeover wrote a greater generation than the record it replaced.
    assert!(t["generation"].as_u64().unwrap() > 41, "{t:#}");
    let when: chrono::DateTime<Utc> = t["time"].as_str().unwrap().parse().unwrap();
    assert!((Utc::now() - when).num_seconds().abs() < 120, "{t:#}");
    assert!(row(&doc, "gen/")["last_takeover"].is_null());
    // The same takeover is found through the prefix's own URL.
    let (_, out, _) = leasectl_parts(
        None,
        &[
            "--json",
            "--no-pod",
            "--audit-log",
            &log_s,
            &format!("{url}dead/"),
        ],
    );
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(row(&doc, "")["last_takeover"]["reason"], "INC-7 dead host");

    // NDJSON: the lease line carries it, the summary names the log.
    let (_, out, _) = leasectl_parts(
        None,
        &["-o", "ndjson", "--no-pod", "--audit-log", &log_s, &url],
    );
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let dead = lines
        .iter()
        .find(|l| l["type"] == "lease" && l["prefix"] == "dead/")
        .unwrap();
    assert_eq!(dead["last_takeover"]["reason"], "INC-7 dead host");
    let gen = lines
        .iter()
        .find(|l| l["type"] == "lease" && l["prefix"] == "gen/")
        .unwrap();
    assert_eq!(gen["record"]["generation"], 7);
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["audit_log"]["path"], log_s.as_str());

    // An audit log that cannot be read (a FIFO is never opened): unknown, exit 1.
    let fifo = dir.path().join("fifo.jsonl");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (code, out, err) = leasectl_parts(
        None,
        &[
            "--json",
            "--no-pod",
            "--audit-log",
            &fifo.display().to_string(),
            &url,
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert!(
        doc["audit_log"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("not a regular file")),
        "{doc:#}"
    );
    assert!(
        err.contains("the last takeover of each prefix is unknown"),
        "{err}"
    );
}

/// A real `--watch` writes a `holder_change` line for each change of holder
/// it sees, with the previous and new holder and generation and how — the
/// console's classification: a record written over a live one
/// (`changed_while_fresh`), a real `leasectl takeover --then handover:ID`
/// (`handover`, with the audit entry), the LEASE deleted (`released`), a
/// new one on the empty prefix (`acquired`); a renewal writes none.
#[test]
fn watch_writes_holder_change_lines() {
    let (dir, store) = store_dir();
    put_lease(&store, "db/", "holder-a", 0, 60, Some(7));
    let log = dir.path().join("audit.jsonl");
    let url = file_url(&store);
    let (mut watch, rx) = spawn_lines(
        bin()
            .args(["--no-pod", "--watch=1s", "--heartbeat", "1h", "--audit-log"])
            .arg(&log)
            .arg(&url)
            .stderr(Stdio::null()),
    );
    let mut seen = Vec::new();
    let limit = Duration::from_secs(20);
    let first = wait_json_line(&rx, &mut seen, limit, "for db/", |v| {
        v["type"] == "lease" && v["prefix"] == "db/"
    });
    assert_eq!(first["record"]["generation"], 7);
    let change = |seen: &mut Vec<Value>, what: &str| {
        wait_json_line(&rx, seen, limit, what, |v| v["type"] == "holder_change")
    };

    // A renewal (same holder, same generation): a lease line (a new ETag),
    // no change.
    put_lease(&store, "db/", "holder-a", 0, 60, Some(7));
    wait_json_line(&rx, &mut seen, limit, "for the renewal", |v| {
        v["type"] == "lease" && v["prefix"] == "db/" && v["etag"] != first["etag"]
    });
    // Someone writes over the live lease, stale already, generation 8.
    put_lease(&store, "db/", "holder-b", 300, 30, Some(8));
    let c = change(&mut seen, "over the live lease");
    assert_eq!(c["how"], "changed_while_fresh", "{c:#}");
    assert_eq!(c["target"], url.as_str());
    assert_eq!(c["prefix"], "db/");
    assert_eq!(
        (&c["previous_holder"], &c["previous_generation"]),
        (&Value::from("holder-a"), &Value::from(7))
    );
    assert_eq!(
        (&c["holder"], &c["generation"]),
        (&Value::from("holder-b"), &Value::from(8))
    );
    assert!(c["takeover"].is_null(), "{c:#}");
    assert!(c["time"].as_str().unwrap().ends_with('Z'));
    let changes = seen.iter().filter(|v| v["type"] == "holder_change").count();
    assert_eq!(changes, 1, "a renewal is no holder change: {seen:#?}");

    // A real takeover of the stale lease, handed over.
    takeover(
        &format!("{url}db/"),
        "INC-8 move it",
        "handover:successor-2",
        &log,
    );
    let c = change(&mut seen, "after the takeover");
    assert_eq!(c["how"], "handover", "{c:#}");
    assert_eq!(
        (&c["previous_holder"], &c["previous_generation"]),
        (&Value::from("holder-b"), &Value::from(8))
    );
    assert_eq!(c["holder"], "successor-2");
    assert_eq!(c["takeover"]["reason"], "INC-8 move it", "{c:#}");
    assert_eq!(c["takeover"]["then"], "handover:successor-2");
    let lease = seen
        .iter()
        .rev()
        .find(|v| v["type"] == "lease" && v["record"]["instance_id"] == "successor-2")
        .unwrap_or_else(|| panic!("no lease line for the successor: {seen:#?}"));
    assert_eq!(lease["last_takeover"]["reason"], "INC-8 move it");
    assert_eq!(c["generation"], lease["record"]["generation"]);
    assert!(c["generation"].as_u64().unwrap() > 8, "{c:#}");
    assert_eq!(c["takeover"]["generation"], c["generation"], "{c:#}");

    // Released, then acquired again.
    std::fs::remove_file(store.join("db/LEASE")).unwrap();
    let c = change(&mut seen, "after the release");
    assert_eq!(c["how"], "released", "{c:#}");
    assert_eq!(c["previous_holder"], "successor-2");
    assert!(c["holder"].is_null() && c["generation"].is_null(), "{c:#}");
    put_lease(&store, "db/", "holder-c", 0, 60, Some(20));
    let c = change(&mut seen, "after the new acquire");
    assert_eq!(c["how"], "acquired", "{c:#}");
    assert!(c["previous_holder"].is_null(), "{c:#}");
    assert_eq!(
        (&c["holder"], &c["generation"]),
        (&Value::from("holder-c"), &Value::from(20))
    );

    // SAFETY: kill(2) on a child this test started.
    unsafe { libc::kill(watch.id() as i32, libc::SIGTERM) };
    assert_eq!(watch.wait().unwrap().code(), Some(0));
}

/// GET http://127.0.0.1:PORT/metrics (HTTP/1.0, the whole answer): (status, body).
fn get_metrics(port: u16) -> (u16, String) {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn scrape_until(port: u16, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let end = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < end {
        let (status, body) = get_metrics(port);
        if status == 200 && pred(&body) {
            return body;
        }
        last = body;
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("metrics never showed {what}; last scrape:\n{last}");
}

/// A real `serve`: `leasectl_lease_generation` per prefix (absent for a
/// record without one), with its HELP and TYPE; every `how` of
/// `leasectl_lease_holder_changes_total` created at zero; a real `leasectl
/// takeover --then handover:ID` read from the `--audit-log` given counted as
/// `how="handover"` — and the others still 0.
#[test]
fn serve_exports_the_generation_and_how_the_holder_changed() {
    let (dir, store) = store_dir();
    put_lease(&store, "db/", "holder-a", 300, 30, Some(7));
    put_lease(&store, "nogen/", "holder-n", 0, 3600, None);
    let log = dir.path().join("audit.jsonl");
    let url = file_url(&store);
    let stderr_path = dir.path().join("serve.stderr");
    // Its log (`-v`): the warning and the recovery are steps of it.
    let mut serve = serve_with_audit_log(&log, &url, &stderr_path);
    let port = serve.port;
    let series =
        |name: &str, prefix: &str| format!("{name}{{target=\"{url}\",prefix=\"{prefix}\"}}");
    let how = |prefix: &str, how: &str| {
        format!(
            "leasectl_lease_holder_changes_total{{target=\"{url}\",prefix=\"{prefix}\",how=\"{how}\"}}"
        )
    };
    let generation = series("leasectl_lease_generation", "db/");
    let body = scrape_until(port, "db/'s generation", |b| {
        sample(b, &generation) == Some(7.0)
    });
    assert!(
        body.contains("# TYPE leasectl_lease_generation gauge")
            && body.contains("# HELP leasectl_lease_generation "),
        "{body}"
    );
    assert!(
        !body.contains(&series("leasectl_lease_generation", "nogen/")),
        "no gauge for an unknown generation:\n{body}"
    );
    assert!(
        sample(&body, &series("leasectl_lease_ttl_seconds", "nogen/")).is_some(),
        "{body}"
    );
    for h in HOWS {
        assert_eq!(sample(&body, &how("db/", h)), Some(0.0), "{h}:\n{body}");
    }
    // No other `how` exists (a bounded label).
    let hows: std::collections::BTreeSet<&str> = body
        .lines()
        .filter(|l| l.starts_with("leasectl_lease_holder_changes_total{"))
        .filter_map(|l| l.split("how=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(hows, HOWS.into_iter().collect(), "{body}");

    takeover(
        &format!("{url}db/"),
        "INC-9 serve sees it",
        "handover:successor-3",
        &log,
    );
    let body = scrape_until(port, "a hand-over", |b| {
        sample(b, &how("db/", "handover")) == Some(1.0)
    });
    for h in HOWS.iter().filter(|h| **h != "handover") {
        assert_eq!(sample(&body, &how("db/", h)), Some(0.0), "{h}:\n{body}");
    }
    for h in HOWS {
        assert_eq!(sample(&body, &how("nogen/", h)), Some(0.0), "{h}:\n{body}");
    }

    assert_eq!(serve.terminate(), Some(0));
}

/// `serve --audit-log` on a log that cannot be read (a directory): it keeps
/// serving, says so once on stderr (not at every refresh), and exports
/// `leasectl_audit_log_ok 0` — the `how` of the holder changes it counts is
/// unknown, never shown as if the log had been read; once the path is a
/// readable log, 1 and a line saying so.
#[test]
fn serve_reports_an_unreadable_audit_log() {
    let (dir, store) = store_dir();
    put_lease(&store, "db/", "holder-a", 0, 30, Some(7));
    let log = dir.path().join("audit.jsonl");
    std::fs::create_dir(&log).unwrap();
    let url = file_url(&store);
    let stderr_path = dir.path().join("serve.stderr");
    // Its log (`-v`): the warning and the recovery are steps of it.
    let mut serve = serve_with_audit_log(&log, &url, &stderr_path);
    let port = serve.port;
    let ok = format!("leasectl_audit_log_ok{{path=\"{}\"}}", log.display());
    let body = scrape_until(port, "the audit log unreadable", |b| {
        sample(b, &ok) == Some(0.0)
    });
    assert!(
        body.contains("# TYPE leasectl_audit_log_ok gauge"),
        "{body}"
    );
    // Several refreshes later, still one warning.
    std::thread::sleep(Duration::from_millis(3500));
    let err = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(
        err.matches("cannot read the audit log").count(),
        1,
        "warned once:\n{err}"
    );
    assert!(err.contains("leasectl_audit_log_ok 0"), "{err}");

    std::fs::remove_dir(&log).unwrap();
    std::fs::write(&log, "").unwrap();
    scrape_until(port, "the audit log read again", |b| {
        sample(b, &ok) == Some(1.0)
    });
    let err = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(err.contains("can be read again"), "{err}");

    assert_eq!(serve.terminate(), Some(0));
}

/// A fresh record whose generation the rule cannot keep growing from — far
/// ahead of the clock (as microseconds since 1970), or `u64::MAX` — is noted
/// where an operator looks: `--json`'s `problem` (exit 3, needs attention),
/// `check` (WARNING, with the note). A record with a generation the clock
/// explains has none.
#[test]
fn generations_far_ahead_or_saturated_are_noted() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let now_us = Utc::now().timestamp_micros() as u64;
    put_lease(&store, "ok/", "holder-o", 0, 30, Some(now_us));
    let url = file_url(&store);
    let (code, _, err) = leasectl_parts(None, &["--json", "--no-pod", &url]);
    assert_eq!(code, 0, "{err}");

    for (g, want) in [
        (
            now_us + 86_400_000_000 * 400,
            "ahead of this reader's clock read as microseconds since 1970",
        ),
        (u64::MAX, "the largest a generation can be"),
    ] {
        put_lease(&store, "ok/", "holder-o", 0, 30, Some(g));
        let (code, out, err) = leasectl_parts(None, &["--json", "--no-pod", &url]);
        assert_eq!(code, 3, "{out}\n{err}");
        let doc: Value = serde_json::from_str(&out).unwrap();
        let r = row(&doc, "ok/");
        assert_eq!(r["state"], "fresh", "{r}");
        assert_eq!(r["record"]["generation"].as_u64(), Some(g), "{r}");
        assert!(
            r["problem"].as_str().is_some_and(|p| p.contains(want)),
            "{r}"
        );
        let (code, out, err) = leasectl_parts(None, &["check", "--no-pod", &url]);
        assert_eq!(code, 1, "WARNING:\n{out}\n{err}");
        assert!(out.starts_with("LEASES WARNING"), "{out}");
        assert!(out.contains(want), "{out}");
    }
}
