//! `leasectl --json` on real pods (real `leasectl writer exec` processes, real
//! flock, real /proc): the `pod` section, and exit code 3 for a pod verdict.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::writer_support::*;
use leasectl::writer::scan::LockState;
use serde_json::Value;

/// Runs `leasectl --json --pod-root ROOT --data-dir DIR [extra…]` (no TARGET);
/// returns the exit code and the parsed document.
fn json_snapshot(root: u32, dir: &Path, extra: &[&str]) -> (i32, Value) {
    let mut cmd = command(bin_path());
    cmd.args(["--json", "--pod-root", &root.to_string(), "--data-dir"])
        .arg(dir)
        .args(extra);
    run_json(cmd)
}

#[test]
fn healthy_pod_root_takes_and_holds_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let root = spawn_armed(wrapper(dir.path(), "2s", &["sh", "-c", "sleep 30"]));
    scan_until(root.pid, dir.path(), |s| {
        s.processes.len() >= 2
            && s.processes
                .iter()
                .any(|p| p.pid == root.pid && p.lock == LockState::Holds)
    });

    let (code, doc) = json_snapshot(root.pid, dir.path(), &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["targets"], Value::Array(vec![]));
    let r = pod_process(&doc, root.pid);
    assert_eq!(r["duty"], "take", "{r:#}");
    assert_eq!(r["lock"], "holds", "{r:#}");
    assert!(
        r["duty_reason"].as_str().unwrap().contains("pod root"),
        "{r:#}"
    );
    // The child (the shell, or sleep if the shell exec'd it) inherits.
    let child = doc["pod"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["ppid"] == root.pid)
        .expect("a child of the root");
    assert_eq!(child["duty"], "inherit", "{child:#}");
    assert_eq!(child["lock"], "none", "{child:#}");
    let locks = doc["pod"]["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 1, "{doc:#}");
    assert_eq!(locks[0]["holders"], serde_json::json!([root.pid]));
    assert_eq!(doc["pod"]["verdicts"], Value::Array(vec![]), "{doc:#}");
}

/// The switch is on only in the children, so each child is a pod root in its
/// own eyes: two siblings race for the lock. A pod verdict alone gives exit 3;
/// with --no-pod the same pod is not looked at (exit 0).
#[test]
fn racing_siblings_give_a_verdict_and_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let root = spawn_siblings(d, 2);
    // The siblings are the shell's children; the holder's own child (`sleep`,
    // which inherits the lock) must not stand in for the second sibling
    // before that one has opened the lock file (seen under load).
    let sibling =
        |p: &leasectl::writer::scan::ProcessInfo| p.ppid == root.pid && p.lock != LockState::None;
    let snap = scan_until(root.pid, dir.path(), |s| {
        s.processes.iter().filter(|p| sibling(p)).count() == 2
    });
    let mut siblings: Vec<u32> = snap
        .processes
        .iter()
        .filter(|p| sibling(p))
        .map(|p| p.pid)
        .collect();
    siblings.sort_unstable();

    let (code, doc) = json_snapshot(root.pid, dir.path(), &[]);
    assert_eq!(code, 3, "{doc:#}");
    let verdicts = doc["pod"]["verdicts"].as_array().unwrap();
    let racing: Vec<&Value> = verdicts
        .iter()
        .filter(|v| v["kind"] == "siblings_racing")
        .collect();
    assert_eq!(racing.len(), 1, "{verdicts:#?}");
    assert_eq!(racing[0]["pids"], serde_json::json!(siblings));
    assert!(text_of(&racing[0]["message"]).contains("more than one Take"));
    assert!(
        verdicts.iter().any(|v| v["kind"] == "waiting"),
        "{verdicts:#?}"
    );
    for pid in &siblings {
        assert_eq!(pod_process(&doc, *pid)["duty"], "take");
    }
    assert_eq!(pod_process(&doc, root.pid)["duty"], "off");

    let mut cmd = command(bin_path());
    cmd.args(["--json", "--no-pod"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (status, out, err) = Guard::spawn(cmd).output(Duration::from_secs(30));
    // No TARGET and no pod: nothing to report is a usage error, not an empty document.
    assert_eq!(status.code(), Some(2), "{out}\n{err}");
    assert!(out.is_empty(), "{out}");
}
