//! Issue 23 item 5, with the real binary and a real torn file: an audit log
//! whose last line was cut short (a crash mid-write) keeps that line to
//! itself; the next takeover's entries start a line of their own, and
//! `leasectl audit` names the unreadable line and lists the rest.

use crate::common::*;
use leasectl::audit::AuditLog;

/// A record whose holder stopped renewing ten minutes ago (stale).
fn dead_record() -> String {
    let t = (chrono::Utc::now() - chrono::Duration::minutes(10))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    serde_json::json!({"instance_id": "dead-holder", "acquired_at": t, "renewed_at": t, "ttl_s": 30})
        .to_string()
}

fn run(args: &[&str]) -> std::process::Output {
    leasectl(None, args)
}

#[test]
fn a_torn_last_line_does_not_swallow_the_next_entry() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    std::fs::create_dir_all(&db).unwrap();
    let log = dir.path().join("audit.jsonl");
    let log_s = log.display().to_string();
    let url = format!("file://{}/", db.display());
    let takeover = |reason: &str| {
        std::fs::write(db.join("LEASE"), dead_record()).unwrap();
        let out = run(&[
            "takeover",
            &url,
            "--reason",
            reason,
            "--yes",
            "--audit-log",
            &log_s,
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    };
    takeover("INC-1 first");
    // A crash while the first takeover's outcome was being written: its line
    // is cut in the middle, without its newline.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    let torn = &lines[1][..lines[1].len() / 2];
    std::fs::write(&log, format!("{}\n{torn}", lines[0])).unwrap();

    takeover("INC-2 second");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "the torn line stays a line of its own:\n{text}"
    );
    assert_eq!(lines[1], torn);
    let read = AuditLog::read_report(&log).unwrap();
    let phases: Vec<(&str, &str)> = read
        .entries
        .iter()
        .map(|e| (e.phase.as_str(), e.reason.as_str()))
        .collect();
    assert_eq!(
        phases,
        [
            ("intent", "INC-1 first"),
            ("intent", "INC-2 second"),
            ("outcome", "INC-2 second")
        ]
    );
    assert_eq!(
        read.entries[1].id, read.entries[2].id,
        "intent and outcome pair"
    );

    // `leasectl audit` names the unreadable line and lists the rest.
    let out = run(&["audit", "--audit-log", &log_s]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("line 2 (byte ") && stderr.contains("is unreadable"),
        "{stderr}"
    );
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    let first = stdout.lines().next().unwrap();
    assert!(
        first.contains("outcome") && first.contains("INC-2"),
        "{stdout}"
    );
    let out = run(&["audit", "--json", "--audit-log", &log_s]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3, "{v}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2 (byte "));
    // A whole log lists without a word on stderr.
    std::fs::write(&log, format!("{}\n", lines[0])).unwrap();
    let out = leasectl(None, &["audit", "--audit-log", &log_s]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("unreadable"));
}
