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

/// Issue 23 item 4: a `leasectl takeover` of `…/s1/` made from the command
/// line is recognised by a reader watching the parent TARGET (the console,
/// `serve`): on a local store, where the command line audits key `LEASE` of
/// the prefix directory, and on moto.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_line_takeover_is_recognised_by_a_reader_of_the_parent_target() {
    use leasectl::clock::SystemClock;
    use leasectl::snapshot::history::{ChangeKind, History};
    use leasectl::snapshot::{GatherOptions, OpenTarget};
    use leasectl::store::ObjectRead;
    use leasectl::tui::app::{Action, App};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("leases");
    std::fs::create_dir_all(local.join("s1")).unwrap();
    let m = moto(Moto::Conditional);
    let bucket = bucket_name("audit-parent");
    let client = sdk_client(&m.endpoint());
    create_bucket(&client, &bucket).await;
    // (the parent TARGET watched, the prefix taken over, its store)
    let places: Vec<(String, String, Arc<dyn ObjectRead>, &str)> = vec![
        (
            format!("file://{}/", local.display()),
            format!("file://{}/s1/", local.display()),
            Arc::new(leasectl::store::local::LocalStore::open(&local).unwrap()),
            "s1/",
        ),
        (
            format!("s3://{bucket}/p/"),
            format!("s3://{bucket}/p/s1/"),
            s3_store(&m.endpoint(), &bucket),
            "p/s1/",
        ),
    ];
    for (n, (parent, prefix_url, store, prefix)) in places.into_iter().enumerate() {
        let key = format!("{prefix}LEASE");
        if parent.starts_with("file:") {
            std::fs::write(local.join(&key), dead_record()).unwrap();
        } else {
            put_raw(&client, &bucket, &key, dead_record().as_bytes()).await;
        }
        let open = vec![OpenTarget {
            target: parent.parse().unwrap(),
            endpoint: "test".into(),
            store,
        }];
        let gather = || async {
            leasectl::snapshot::gather(&open, &GatherOptions::default(), &SystemClock::shared())
                .await
        };
        // A live record seen first (so that a change of holder is a takeover or
        // a change while fresh, never an expiry).
        let mut first = gather().await;
        let row = first.targets[0]
            .prefixes
            .iter_mut()
            .find(|p| p.prefix == prefix)
            .expect("the prefix is listed");
        row.state = leasectl::bucket::LeaseState::Fresh;
        row.expires_in_s = Some(3600.0);
        let mut h = History::new();
        h.observe(&first, &[]);

        let log = dir.path().join(format!("audit-{n}.jsonl"));
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_leasectl"));
        s3_env(&mut c);
        c.args(["--endpoint-url", &m.endpoint(), "--path-style"])
            .args(["takeover", &prefix_url, "--yes", "--reason", "INC-9 parent"])
            .args(["--then", "handover:next-holder", "--audit-log"])
            .arg(&log);
        let out = tokio::task::spawn_blocking(move || {
            run_with_timeout(c, std::time::Duration::from_secs(60))
        })
        .await
        .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let entries = AuditLog::read(&log).unwrap();
        let second = gather().await;
        h.observe(&second, &entries);
        let change = h
            .get(&parent, prefix)
            .unwrap()
            .changes
            .back()
            .unwrap()
            .clone();
        // A takeover with `--then handover:ID` whose record names the
        // successor: a hand-over (issue 26 §3), named by its audit entry.
        assert_eq!(change.kind, ChangeKind::Handover, "{parent}: {change:?}");
        assert!(
            change
                .audit
                .as_deref()
                .unwrap_or("")
                .contains("INC-9 parent"),
            "{change:?}"
        );
        assert_eq!(change.holder.as_deref(), Some("next-holder"));
        // The console's detail pane lists the entries for that row.
        let mut app = App::new(
            vec![parent.parse().unwrap()],
            true,
            std::time::Duration::from_secs(5),
            chrono::Utc::now(),
        );
        app.update(Action::Snapshot(Box::new(second.clone())));
        app.update(Action::Audit(entries));
        let row = second.targets[0]
            .prefixes
            .iter()
            .find(|p| p.prefix == prefix)
            .unwrap();
        assert_eq!(app.audit_for(0, row, 3).len(), 2, "{parent}");
    }
}
