//! The pod view under real conditions (issue 13): an unprivileged viewer, a
//! holder in another PID namespace, a daemonized descendant of `writer exec`,
//! and the scope stated in the output. Real processes, real flock, real /proc;
//! tests that need root, `setpriv` or `unshare` print why they skip.
//!
//! `LEASECTL_TEST_BIN` runs every leasectl process of these tests from another
//! build (to check that they fail without the fix).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::cannot_drop_privileges;
use crate::writer_support::*;
use serde_json::Value;

/// A data directory everyone may enter, in a temporary directory everyone may
/// enter (an unprivileged viewer must reach the lock file to probe it).
fn open_dir() -> (tempfile::TempDir, PathBuf) {
    let t = enterable_tempdir();
    let d = t.path().join("data");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    (t, d)
}

// ---------------------------------------------------------------- unprivileged

/// `leasectl --json --data-dir D [extra]` as uid/gid 65534.
fn as_nobody(viewer: &Path, home: &Path, data: &Path, extra: &[&str]) -> Command {
    let mut c = command("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(viewer)
        .args(["--json", "--data-dir"])
        .arg(data)
        .args(extra)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home)
        .env("LEASECTL_LOG", "warn");
    c
}

/// Fault 1 of issue 13: a root-owned pod with a holder and a racing sibling,
/// inspected by uid 65534. What cannot be read is unknown: no `none`, no
/// "healthy", no verdict built on missing facts, exit 1, and a note.
#[test]
fn unprivileged_viewer_reports_unknown_not_healthy() {
    skip_unless_able!(cannot_drop_privileges());
    let (tmp, data) = open_dir();
    let root = racing_siblings(&data);
    // As root: one holder and one waiter.
    let snap = scan_until(root.pid, &data, |s| {
        s.processes
            .iter()
            .filter(|p| p.lock != leasectl::writer::scan::LockState::None)
            .count()
            == 2
    });
    let wrappers: Vec<u32> = snap
        .processes
        .iter()
        .filter(|p| p.ppid == root.pid)
        .map(|p| p.pid)
        .collect();
    assert_eq!(wrappers.len(), 2, "{snap:#?}");

    let viewer = viewer_for_nobody(tmp.path());
    for extra in [vec!["--pod-root".to_string(), root.pid.to_string()], vec![]] {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (code, doc) = run_json(as_nobody(&viewer, tmp.path(), &data, &extra));
        let ctx = format!("viewer args {extra:?}: {doc:#}");
        assert_eq!(code, 1, "could not gather, so exit 1; {ctx}");
        let pod = &doc["pod"];
        let notes = pod["notes"].as_array().unwrap_or_else(|| panic!("{ctx}"));
        assert!(
            notes.iter().any(
                |n| text_of(n).contains("could not be inspected (run as their owner or root)")
            ),
            "{ctx}"
        );
        for w in &wrappers {
            let u = pod["uninspected"].as_array().unwrap();
            assert!(u.contains(&Value::from(*w)), "{w} not uninspected; {ctx}");
        }
        // No verdict built on missing facts: nobody is "outside the pod",
        // nothing is "armed, holds nothing".
        let kinds = verdict_kinds(&doc);
        assert!(
            !kinds
                .iter()
                .any(|k| k == "holder_outside_pod" || k == "armed_holds_nothing"),
            "{ctx}"
        );
        // Every process the viewer shows from the pod is unknown, never "none".
        for w in &wrappers {
            let Some(p) = pod["processes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["pid"] == *w)
            else {
                // Auto-detection cannot see the waiter at all (its environment
                // and descriptors are hidden): it is counted as uninspected.
                assert!(extra.is_empty(), "{w} missing with --pod-root; {ctx}");
                continue;
            };
            assert_eq!(p["lock"], "unknown", "{ctx}");
            assert_eq!(p["duty"], "unknown", "{ctx}");
            assert!(
                p["duty_reason"].as_str().unwrap().contains("environ"),
                "{ctx}"
            );
            assert!(p["lock_reason"].as_str().is_some(), "{ctx}");
        }
        // The lock is held (from /proc/locks, which anyone may read).
        assert_eq!(pod["locks"][0]["state"], "held", "{ctx}");
        assert_eq!(pod["locks"][0]["locked"], true, "{ctx}");
    }
}

// ---------------------------------------------------------------- namespaces

/// Fault 2 of issue 13: pod A, in its own PID namespace, holds the lock; a
/// waiter and the viewer run in sibling namespace B, where /proc/locks shows
/// no line and no fdinfo has the lock. The viewer must say "held by a
/// process outside this PID namespace", never "free" or "armed, holds nothing".
#[test]
fn holder_in_another_pid_namespace_is_not_free() {
    skip_unless_able!(cannot_unshare());
    let (_tmp, data) = open_dir();
    let b = leasectl_bin();
    let d = data.to_str().unwrap();
    let mut a = command("unshare");
    a.args(["--pid", "--fork", "--mount-proc", &b])
        .args([
            "writer",
            "exec",
            "--data-dir",
            d,
            "--wait",
            "5s",
            "--",
            "sleep",
            "60",
        ])
        .env("CLOUD_WRITER_LEASE", "1")
        .stderr(Stdio::null());
    let _pod_a = Guard::spawn(a);
    assert!(
        wait_for(Duration::from_secs(10), || (!lock_is_free(&data))
            .then_some(()))
        .is_some(),
        "pod A never took the lock"
    );

    let v = leasectl_bin();
    let script = format!(
        "CLOUD_WRITER_LEASE=1 {b} writer exec --data-dir {d} --wait 30s -- sleep 60 & \
         sleep 1; exec {v} --json --data-dir {d}"
    );
    let mut viewer = command("unshare");
    viewer
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c", &script])
        .env("LEASECTL_LOG", "warn");
    let (code, doc) = run_json(viewer);
    let ctx = format!("{doc:#}");
    let lock = &doc["pod"]["locks"][0];
    assert_eq!(lock["locked"], true, "{ctx}");
    assert_eq!(lock["state"], "held_outside_namespace", "{ctx}");
    let kinds = verdict_kinds(&doc);
    assert!(!kinds.iter().any(|k| k == "armed_holds_nothing"), "{ctx}");
    let outside = verdict(&doc, "holder_outside_pod");
    assert!(
        text_of(&outside["message"]).contains("outside this PID namespace"),
        "{ctx}"
    );
    // The waiter in B is told who it waits for.
    let waiting = verdict(&doc, "waiting");
    assert!(
        text_of(&waiting["message"]).contains("held by a process outside this PID namespace"),
        "{ctx}"
    );
    assert_eq!(code, 3, "{ctx}");
    // The probe changed nothing: pod A still holds the lock.
    assert!(!lock_is_free(&data));
}

/// The probe itself, next to a real holder and a real waiter: it reports the
/// lock as held, takes nothing, and the waiter keeps waiting; on a free file it
/// reports free and leaves it free.
#[test]
fn probe_reports_held_and_free_without_taking() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join(".writer.lock");
    let mut h = command("flock");
    h.arg("-x").arg(&lock).args(["sleep", "30"]);
    let _holder = Guard::spawn(h);
    assert!(
        wait_for(Duration::from_secs(5), || (!lock_is_free(dir.path()))
            .then_some(()))
        .is_some()
    );
    for _ in 0..50 {
        assert!(leasectl::writer::scan::probe_locked(&lock).unwrap());
    }
    drop(_holder);
    assert!(wait_for(Duration::from_secs(5), || lock_is_free(dir.path())
        .then_some(()))
    .is_some());
    assert!(!leasectl::writer::scan::probe_locked(&lock).unwrap());
    assert!(lock_is_free(dir.path()), "the probe left a lock behind");
    assert!(leasectl::writer::scan::probe_locked(&dir.path().join("missing")).is_err());
}

// ---------------------------------------------------------------- orphaned writer

/// The orphaned-writer verdict: `writer exec` is killed outright (SIGKILL,
/// nothing can be forwarded), its daemonized writer survives with a stamp
/// naming the dead holder and no holder above it.
#[test]
fn orphaned_writer_verdict_for_a_daemon_outliving_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let stopfile = dir.path().join("stop");
    let (cmd, pidfile) = daemonizing_wrapper(dir.path(), &stopfile, "sleep 30", Stdio::null());
    let w = Guard::spawn(cmd);
    let holder = w.pid;
    let daemon = wait_for(Duration::from_secs(5), || read_pid(&pidfile)).expect("daemon pid");
    let _k = KillOnDrop(daemon);
    // SIGKILL the holder only (not its group): the daemon is in its own session.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(holder as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(wait_for(Duration::from_secs(5), || lock_is_free(dir.path())
        .then_some(()))
    .is_some());
    drop(w);
    assert!(running(daemon));

    let mut v = command(&leasectl_bin());
    v.arg("--json").arg("--data-dir").arg(dir.path());
    let (code, doc) = run_json(v);
    let ctx = format!("{doc:#}");
    let orphan = doc["pod"]["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == "orphaned_writer" && v["pids"][0] == daemon)
        .unwrap_or_else(|| panic!("no orphaned_writer verdict for {daemon}: {ctx}"));
    assert!(
        text_of(&orphan["message"]).contains(&format!("pid {holder} is gone")),
        "{ctx}"
    );
    // 3 (attention), or 1 where some process of this machine cannot be
    // inspected even by root (then the pod is incomplete).
    let expected = if doc["pod"]["uninspected"].as_array().unwrap().is_empty() {
        3
    } else {
        1
    };
    assert_eq!(code, expected, "{ctx}");
    let p = pod_process(&doc, daemon);
    assert!(
        text_of(&p["included_because"]).contains("initial environment"),
        "{ctx}"
    );
    std::fs::write(&stopfile, b"").unwrap();
}

// ---------------------------------------------------------------- scope

/// Fault 4 of issue 13: the output states its scope, and why each process is
/// in the pod.
#[test]
fn scope_and_inclusion_reasons_are_stated() {
    let dir = tempfile::tempdir().unwrap();
    let root = spawn_armed(wrapper_of_test_bin(
        dir.path(),
        "2s",
        &["sh", "-c", "sleep 30 & wait"],
    ));
    let snap = scan_until(root.pid, dir.path(), |s| s.processes.len() == 3);

    let scope = &snap.scope[0];
    assert_eq!(scope.mode, "pod_root");
    assert_eq!(scope.pod_root, Some(root.pid));
    assert_eq!(scope.processes_selected, 3);
    assert!(scope.processes_seen >= 3);
    assert!(
        scope
            .description
            .contains(&format!("pid {} and its 2 descendant(s)", root.pid)),
        "{}",
        scope.description
    );
    assert!(
        scope.description.contains(".writer.lock in "),
        "{}",
        scope.description
    );
    let r = proc_of(&snap, root.pid);
    assert_eq!(r.included_because, "the pod root given with --pod-root");
    let sh = snap.processes.iter().find(|p| p.ppid == root.pid).unwrap();
    assert_eq!(
        sh.included_because,
        format!(
            "a descendant of pod root {} (its parent is {})",
            root.pid, root.pid
        )
    );
    // Healthy and complete: exit 0.
    assert!(!snap.incomplete(), "{snap:#?}");
    assert_eq!(snap.exit_code().code(), 0, "{snap:#?}");

    // Auto-detection: the holder is in because it has the lock open; its
    // ancestors are named as such.
    let mut v = command(&leasectl_bin());
    v.arg("--json").arg("--data-dir").arg(dir.path());
    let (_code, doc) = run_json(v);
    let ctx = format!("{doc:#}");
    assert_eq!(doc["pod"]["scope"][0]["mode"], "auto", "{ctx}");
    let holder = pod_process(&doc, root.pid);
    assert!(
        text_of(&holder["included_because"]).contains(".writer.lock open"),
        "{ctx}"
    );
    let me = std::process::id();
    let mine = pod_process(&doc, me);
    assert!(
        text_of(&mine["included_because"]).starts_with("an ancestor of pid"),
        "{ctx}"
    );
}
