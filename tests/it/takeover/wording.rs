//! What `takeover` says about what it did matches what it does (issue 45
//! §8): the hand-over names the command that starts the successor, and the
//! runbook's `--then release` is a released record, not a deletion.

use std::process::Stdio;
use std::time::Duration;

use crate::common::{bin, file_url, record, run_with_timeout, text, write_lease};

/// The hand-over said "(acquire_as its id)", the library's word: it names
/// `leasectl bucket hold --instance-id ID`, and that command adopts the lease.
#[test]
fn a_handover_names_the_command_that_starts_the_successor() {
    let dir = tempfile::tempdir().unwrap();
    write_lease(dir.path(), "db", &record("gone-holder", 100, 30));
    let url = format!("{}db/", file_url(dir.path()));
    let log = dir.path().join("audit.jsonl");
    let mut c = bin();
    c.env_remove("LEASECTL_LOG")
        .stdin(Stdio::null())
        .args(["takeover", &url, "--reason", "move", "--yes"])
        .args(["--then", "handover:succ-9", "--audit-log"])
        .arg(&log);
    let o = run_with_timeout(c, Duration::from_secs(30));
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("handed over to succ-9: start the successor once, with `leasectl bucket hold --instance-id succ-9`"),
        "{out}"
    );
    assert!(!out.contains("acquire_as"), "{out}");
    // As it says: that command adopts the lease.
    let mut c = bin();
    c.env_remove("LEASECTL_LOG").args([
        "bucket",
        "hold",
        &url,
        "--instance-id",
        "succ-9",
        "--",
        "true",
    ]);
    let o = run_with_timeout(c, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// docs/takeover.md said `--then release` writes the lease "then delete[s]
/// it": it leaves a released record that keeps the generation, and the
/// runbook says so.
#[test]
fn then_release_leaves_a_released_record_as_the_runbook_says() {
    let dir = tempfile::tempdir().unwrap();
    write_lease(dir.path(), "db", &record("gone-holder", 100, 30));
    let url = format!("{}db/", file_url(dir.path()));
    let log = dir.path().join("audit.jsonl");
    let mut c = bin();
    c.env_remove("LEASECTL_LOG")
        .stdin(Stdio::null())
        .args(["takeover", &url, "--reason", "free it", "--yes"])
        .args(["--then", "release", "--audit-log"])
        .arg(&log);
    let o = run_with_timeout(c, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let body = std::fs::read_to_string(dir.path().join("db/LEASE")).expect("the LEASE is kept");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        v["released_at"].is_string() && v["generation"].is_u64(),
        "{body}"
    );
    let doc = std::fs::read_to_string(crate::common::repo().join("docs/takeover.md")).unwrap();
    let bullet = doc
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("- `release`"))
        .take_while(|l| !l.trim_start().starts_with("- `hold`"))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        bullet.contains("released record") && !bullet.contains("delete it"),
        "docs/takeover.md's --then release: {bullet}"
    );
}
