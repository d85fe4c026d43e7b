//! The pod scanner against real pods: real `leasectl writer exec` processes,
//! real flock, real /proc.

use std::process::Stdio;
use std::time::Duration;

use crate::writer_support::*;
use leasectl::writer::scan::{scan, DutyView, LockState, ScanOptions, VerdictKind};

fn kinds(s: &leasectl::writer::scan::PodSnapshot) -> Vec<VerdictKind> {
    s.verdicts.iter().map(|v| v.kind).collect()
}

/// A healthy pod: the root wrapper takes and holds; its child, started through
/// the wrapper again, inherits (its stamp names its parent). Grandchildren that
/// never open the lock show their computed duty but raise no verdict.
#[test]
fn real_pod_root_takes_child_inherits_no_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let b = bin_path();
    // root wrapper -> sh (forks `sleep`, then execs the wrapper again, which
    // inherits and execs an inner sh) -> inner sh forks two more sleeps.
    let script = format!(
        "sleep 30 & exec {b} writer exec --data-dir {d} -- sh -c 'sleep 30 & sleep 30 & wait'"
    );
    let root = spawn_armed(wrapper(dir.path(), "2s", &["sh", "-c", &script]));

    let snap = scan_until(root.pid, dir.path(), |s| {
        s.processes.len() == 5
            && s.processes
                .iter()
                .any(|p| p.command.starts_with("sh -c sleep 30 & sleep 30"))
    });
    let r = proc_of(&snap, root.pid);
    assert_eq!(r.duty, DutyView::Take, "{}", r.duty_reason);
    assert_eq!(r.lock, LockState::Holds);
    assert_eq!(snap.locks.len(), 1);
    assert_eq!(snap.locks[0].holders, vec![root.pid]);
    assert!(snap.locks[0].locked);

    let child = snap
        .processes
        .iter()
        .find(|p| p.ppid == root.pid)
        .expect("child");
    assert_eq!(child.duty, DutyView::Inherit, "{}", child.duty_reason);
    assert_eq!(child.stamp.as_deref(), Some(root.pid.to_string().as_str()));
    assert_eq!(child.lock, LockState::None);

    // Grandchildren: stamp names their grandparent, so their computed duty is
    // Take, but they never open the lock, so they are not participants.
    let grandchildren: Vec<_> = snap
        .processes
        .iter()
        .filter(|p| p.ppid == child.pid)
        .collect();
    assert_eq!(grandchildren.len(), 3, "{snap:#?}");
    for g in grandchildren {
        assert_eq!(g.duty, DutyView::Take);
        assert!(
            g.duty_reason
                .contains(&format!("not our parent {}", child.pid)),
            "{}",
            g.duty_reason
        );
        assert_eq!(g.lock, LockState::None);
    }
    assert!(snap.verdicts.is_empty(), "{:#?}", snap.verdicts);
}

/// The 2026-08-04 incident: the root never takes (the switch is on only in the
/// children), so every child is a pod root in its own eyes and they race.
#[test]
fn incident_siblings_race_and_losers_wait() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let root = spawn_siblings(d, 3);

    let snap = scan_until(root.pid, dir.path(), |s| {
        s.processes
            .iter()
            .filter(|p| p.lock != LockState::None)
            .count()
            == 3
    });
    let r = proc_of(&snap, root.pid);
    assert_eq!(r.duty, DutyView::Off, "the router itself never takes");
    let participants: Vec<_> = snap
        .processes
        .iter()
        .filter(|p| p.lock != LockState::None)
        .collect();
    assert!(participants
        .iter()
        .all(|p| p.duty == DutyView::Take && p.ppid == root.pid));
    let holders: Vec<u32> = participants
        .iter()
        .filter(|p| p.lock == LockState::Holds)
        .map(|p| p.pid)
        .collect();
    let waiters: Vec<u32> = participants
        .iter()
        .filter(|p| p.lock == LockState::Open)
        .map(|p| p.pid)
        .collect();
    assert_eq!(holders.len(), 1);
    assert_eq!(waiters.len(), 2);
    for w in &waiters {
        assert!(proc_of(&snap, *w).waiting_s.is_some());
    }

    let racing: Vec<_> = snap
        .verdicts
        .iter()
        .filter(|v| v.kind == VerdictKind::SiblingsRacing)
        .collect();
    assert_eq!(racing.len(), 1, "{:#?}", snap.verdicts);
    assert_eq!(racing[0].pids.len(), 3);
    assert!(
        racing[0].message.contains("more than one Take"),
        "{}",
        racing[0].message
    );
    let mut waiting: Vec<u32> = snap
        .verdicts
        .iter()
        .filter(|v| v.kind == VerdictKind::Waiting)
        .flat_map(|v| v.pids.clone())
        .collect();
    waiting.sort_unstable();
    assert_eq!(waiting, waiters);
    assert!(!kinds(&snap).contains(&VerdictKind::ArmedHoldsNothing));
}

/// The state after the first repair: the children are excluded, but the root
/// never takes either. Armed, holds nothing.
/// The runbook's "a second pod on the same volume" (issue 45 §5): two
/// `writer exec`, each started by a parent of its own (as two pods are), on
/// one data directory. One holds, the other waits; the pod view says two pod
/// roots race — one pod per data directory — not `siblings_racing` ("only the
/// pod root should take the lock", advice for another fault).
#[test]
fn two_pod_roots_on_one_volume_are_not_siblings() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let b = bin_path();
    // Each shell stands for a node's container runtime: the parent of one
    // pod's root (`; exit $?` keeps it there), the lease on in the pod only.
    let pod = format!(
        "CLOUD_WRITER_LEASE=1 {b} writer exec --data-dir {d} --wait 30s -- sleep 30; exit $?"
    );
    let spawn = || {
        let mut c = command("sh");
        c.args(["-c", &pod]).stderr(Stdio::null());
        Guard::spawn(c)
    };
    let (first, second) = (spawn(), spawn());
    // As the operator looks: `--json --data-dir D` (the pod found by its lock file).
    let mut last;
    let t = std::time::Instant::now();
    let verdicts = loop {
        let mut c = command(bin_path());
        c.args(["--json", "--data-dir", d]);
        let o = crate::common::run_with_timeout(c, Duration::from_secs(30));
        last = String::from_utf8_lossy(&o.stdout).into_owned();
        let doc: serde_json::Value = serde_json::from_str(&last).unwrap_or_default();
        let v = doc["pod"]["verdicts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if v.iter().any(|v| v["kind"] == "waiting") {
            break v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "no waiter seen:\n{last}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let kinds: Vec<&str> = verdicts.iter().filter_map(|v| v["kind"].as_str()).collect();
    assert!(!kinds.contains(&"siblings_racing"), "{kinds:?}\n{last}");
    let roots = verdicts
        .iter()
        .find(|v| v["kind"] == "pod_roots_racing")
        .unwrap_or_else(|| panic!("no pod_roots_racing: {kinds:?}\n{last}"));
    let message = roots["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("two pods (or two `writer exec`) on one volume")
            && message.contains("Only one pod may use a data directory"),
        "{message}"
    );
    assert_eq!(roots["pids"].as_array().map(Vec::len), Some(2), "{message}");
    drop((first, second));
}

#[test]
fn incident_armed_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = command("sh");
    cmd.args(["-c", "sleep 30 & sleep 30 & wait"])
        .env("CLOUD_WRITER_LEASE", "true");
    let root = Guard::spawn(cmd);

    // With the data dir given (no lock file exists yet)...
    let snap = scan_until(root.pid, dir.path(), |s| s.processes.len() == 3);
    assert_eq!(
        kinds(&snap),
        vec![VerdictKind::ArmedHoldsNothing],
        "{:#?}",
        snap.verdicts
    );
    assert_eq!(snap.verdicts[0].pids, vec![root.pid]);
    assert!(snap.verdicts[0].message.contains("armed, holds nothing"));

    // ...and auto-detected (nobody has a lock file open).
    let auto = scan(&ScanOptions {
        pod_root: Some(root.pid),
        ..ScanOptions::default()
    })
    .unwrap();
    assert_eq!(kinds(&auto), vec![VerdictKind::ArmedHoldsNothing]);
    assert!(auto.locks.is_empty());

    // A lock file that exists but is unlocked changes nothing.
    assert!(lock_is_free(dir.path()));
    let again = scan_pod(root.pid, dir.path());
    assert_eq!(kinds(&again), vec![VerdictKind::ArmedHoldsNothing]);
    assert!(!again.locks[0].locked);
}

/// The `sh -c 'server'` trap: a wrapper behind a shell sees its grandparent's
/// stamp, ignores it, takes, and waits for its own pod root.
#[test]
fn wrapper_behind_a_shell_is_a_stray_stamp_and_waits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let b = bin_path();
    let script = format!("{b} writer exec --data-dir {d} --wait 30s -- sleep 30; true");
    let root = spawn_armed(wrapper(dir.path(), "2s", &["sh", "-c", &script]));

    // The waiter is the wrapper behind the shell: the root itself has the
    // file open without holding it for a moment as it starts (CI: the scan
    // caught that moment, "armed, holds nothing").
    let snap = scan_until(root.pid, dir.path(), |s| {
        s.processes
            .iter()
            .any(|p| p.lock == LockState::Open && p.pid != root.pid)
    });
    let waiter = snap
        .processes
        .iter()
        .find(|p| p.lock == LockState::Open && p.pid != root.pid)
        .unwrap();
    assert_eq!(waiter.duty, DutyView::Take);
    let k = kinds(&snap);
    for want in [
        VerdictKind::SiblingsRacing,
        VerdictKind::StrayStamp,
        VerdictKind::Waiting,
    ] {
        assert!(
            k.contains(&want),
            "missing {want:?} in {:#?}",
            snap.verdicts
        );
    }
    let stray = snap
        .verdicts
        .iter()
        .find(|v| v.kind == VerdictKind::StrayStamp)
        .unwrap();
    assert_eq!(stray.pids, vec![waiter.pid]);
    assert!(
        stray.message.contains(&format!("names pid {}", root.pid)),
        "{}",
        stray.message
    );
}

/// Fork sharing: the acquirer takes the flock, forks, and exits. The child
/// shares the locked open file description and is shown as the holder,
/// although /proc/locks names the dead acquirer (or 0).
#[test]
fn forked_child_is_holder_after_acquirer_exits() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join(".writer.lock");
    let py = r#"
import fcntl, os, sys, time
f = open(sys.argv[1], "a+")
fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    os.setpgid(0, 0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.write(w, b"x")
    os.close(w)
    time.sleep(30)
    os._exit(0)
os.close(w)
os.read(r, 1)
print(pid, flush=True)
os._exit(0)
"#;
    let mut cmd = command("python3");
    cmd.args(["-c", py])
        .arg(&lock)
        .env("CLOUD_WRITER_LEASE", "1")
        .stdout(Stdio::piped());
    let acquirer = Guard::spawn(cmd);
    let acquirer_pid = acquirer.pid;
    let (status, out, _) = acquirer.output(Duration::from_secs(5));
    assert!(status.success());
    let child: u32 = out.trim().parse().expect("child pid");
    // The forked child left the acquirer's process group; kill it at the end.
    let _k = KillOnDrop(child);
    assert!(!running(acquirer_pid));
    assert!(
        !lock_is_free(dir.path()),
        "the child must still hold the lock"
    );

    let snap = scan_pod(child, dir.path());
    let c = proc_of(&snap, child);
    assert_eq!(c.lock, LockState::Holds);
    assert_eq!(snap.locks[0].holders, vec![child]);
    assert!(!snap.locks[0].proc_locks_pids.contains(&child));
    for pid in &snap.locks[0].proc_locks_pids {
        assert!(
            *pid == 0 || !running(*pid),
            "/proc/locks named live pid {pid}"
        );
    }
    assert!(snap.verdicts.is_empty(), "{:#?}", snap.verdicts);
}
