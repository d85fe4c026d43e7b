//! Table tests of the pure verdict rules (`scan::judge`), plus a fake /proc
//! tree for what a real machine rarely shows (an unreadable environment).

use std::collections::BTreeSet;

use leasectl::writer::scan::{
    judge, scan, DutyView, EnvRead, LockFileState, LockState, Observed, ObservedLock,
    ObservedProcess, ScanOptions, VerdictKind,
};

fn env(enable: Option<&str>, stamp: Option<&str>) -> EnvRead {
    EnvRead::Read {
        enable: enable.map(str::to_string),
        stamp: stamp.map(str::to_string),
    }
}

fn p(pid: u32, ppid: u32, env: EnvRead, opens: bool, holds: bool) -> ObservedProcess {
    ObservedProcess {
        pid,
        ppid,
        command: format!("proc{pid}"),
        env,
        opens: if opens { vec![0] } else { vec![] },
        holds: if holds { vec![0] } else { vec![] },
        age_s: Some(12),
        fds_unreadable: None,
        included_because: "test".into(),
        container: None,
    }
}

fn lock(holders: &[u32], locked: bool, proc_locks: &[u32]) -> ObservedLock {
    ObservedLock {
        path: "/data/.writer.lock".into(),
        holders: holders.to_vec(),
        locked,
        proc_locks_pids: proc_locks.to_vec(),
        state: if locked {
            LockFileState::Held
        } else {
            LockFileState::Free
        },
        state_reason: String::new(),
        deleted: false,
        current: None,
    }
}

fn obs(processes: Vec<ObservedProcess>, locks: Vec<ObservedLock>, extra_alive: &[u32]) -> Observed {
    let mut alive: BTreeSet<u32> = processes.iter().map(|p| p.pid).collect();
    alive.extend(extra_alive);
    alive.insert(1);
    Observed {
        processes,
        locks,
        alive,
        ..Observed::default()
    }
}

fn kinds(o: &Observed) -> Vec<(VerdictKind, Vec<u32>)> {
    judge(o)
        .verdicts
        .into_iter()
        .map(|v| (v.kind, v.pids))
        .collect()
}

use VerdictKind::*;

#[test]
fn verdict_table() {
    let on = || env(Some("1"), None);
    let stamped = |s: &str| env(Some("1"), Some(s));
    type Case = (&'static str, Observed, Vec<(VerdictKind, Vec<u32>)>);
    let cases: Vec<Case> = vec![
        (
            "healthy: root takes and holds, child inherits",
            obs(
                vec![
                    p(10, 1, on(), true, true),
                    p(11, 10, stamped("10"), false, false),
                ],
                vec![lock(&[10], true, &[10])],
                &[],
            ),
            vec![],
        ),
        (
            "lease off everywhere, no lock: nothing to say",
            obs(vec![p(10, 1, env(None, None), false, false)], vec![], &[]),
            vec![],
        ),
        (
            "holders sharing one open file description are one contender",
            obs(
                vec![p(10, 1, on(), true, true), p(11, 10, on(), true, true)],
                vec![lock(&[10, 11], true, &[0])],
                &[],
            ),
            vec![],
        ),
        (
            "siblings racing: one holds, two wait",
            obs(
                vec![
                    p(10, 1, env(None, None), false, false),
                    p(11, 10, on(), true, true),
                    p(12, 10, on(), true, false),
                    p(13, 10, on(), true, false),
                ],
                vec![lock(&[11], true, &[11])],
                &[],
            ),
            vec![
                (SiblingsRacing, vec![11, 12, 13]),
                (Waiting, vec![12]),
                (Waiting, vec![13]),
            ],
        ),
        (
            "two Take waiters, nobody holds: racing and armed, holds nothing",
            obs(
                vec![p(10, 1, on(), true, false), p(11, 1, on(), true, false)],
                vec![lock(&[], false, &[])],
                &[],
            ),
            vec![
                (ArmedHoldsNothing, vec![10, 11]),
                (SiblingsRacing, vec![10, 11]),
                (Waiting, vec![10]),
                (Waiting, vec![11]),
            ],
        ),
        (
            "two pod roots on one volume: each started by a parent of its own (issue 45 §5)",
            obs(
                vec![
                    p(10, 5, env(None, None), false, false),
                    p(11, 10, on(), true, true),
                    p(20, 6, env(None, None), false, false),
                    p(21, 20, on(), true, false),
                ],
                vec![lock(&[11], true, &[11])],
                &[],
            ),
            vec![(PodRootsRacing, vec![11, 21]), (Waiting, vec![21])],
        ),
        (
            "a pod's root shell carries the lease (no exec): its children race as siblings",
            obs(
                vec![
                    p(10, 5, on(), false, false),
                    p(11, 10, on(), true, true),
                    p(12, 10, on(), true, false),
                ],
                vec![lock(&[11], true, &[11])],
                &[],
            ),
            vec![(SiblingsRacing, vec![11, 12]), (Waiting, vec![12])],
        ),
        (
            "the lease's trees climb through ancestors that carry it: two pods, siblings in one",
            obs(
                vec![
                    p(10, 5, on(), false, false),
                    p(11, 10, on(), false, false),
                    p(12, 11, on(), true, true),
                    p(13, 10, on(), true, false),
                    p(20, 6, env(None, None), false, false),
                    p(21, 20, on(), true, false),
                ],
                vec![lock(&[12], true, &[12])],
                &[],
            ),
            vec![
                (SiblingsRacing, vec![12, 13]),
                (PodRootsRacing, vec![12, 13, 21]),
                (Waiting, vec![13]),
                (Waiting, vec![21]),
            ],
        ),
        (
            "armed, holds nothing: no lock file anywhere; names the topmost armed process",
            obs(
                vec![p(10, 1, on(), false, false), p(11, 10, on(), false, false)],
                vec![],
                &[],
            ),
            vec![(ArmedHoldsNothing, vec![10])],
        ),
        (
            "holder whose duty is inherit",
            obs(
                vec![
                    p(10, 1, on(), false, false),
                    p(11, 10, stamped("10"), true, true),
                ],
                vec![lock(&[11], true, &[11])],
                &[],
            ),
            vec![(HolderNotTake, vec![11])],
        ),
        (
            "holder with the lease off",
            obs(
                vec![p(10, 1, env(None, None), true, true)],
                vec![lock(&[10], true, &[10])],
                &[],
            ),
            vec![(HolderNotTake, vec![10])],
        ),
        (
            "holder with an unreadable environment: no claim about its duty",
            obs(
                vec![p(10, 1, EnvRead::Unreadable("EACCES".into()), true, true)],
                vec![lock(&[10], true, &[10])],
                &[],
            ),
            vec![],
        ),
        (
            "stray stamp on a participant (names a live non-parent)",
            obs(
                vec![p(10, 1, stamped("77"), true, true)],
                vec![lock(&[10], true, &[10])],
                &[77],
            ),
            vec![(StrayStamp, vec![10])],
        ),
        (
            "garbage stamp on a participant",
            obs(
                vec![p(10, 1, stamped("x"), true, true)],
                vec![lock(&[10], true, &[10])],
                &[],
            ),
            vec![(StrayStamp, vec![10])],
        ),
        (
            "stray stamp on a non-participant: not a verdict",
            obs(
                vec![
                    p(10, 1, on(), true, true),
                    p(11, 10, stamped("10"), false, false),
                    p(12, 11, stamped("10"), false, false),
                ],
                vec![lock(&[10], true, &[10])],
                &[],
            ),
            vec![],
        ),
        (
            "invalid enable, one verdict per value",
            obs(
                vec![
                    p(10, 1, env(Some("yes"), None), false, false),
                    p(11, 10, env(Some("yes"), None), false, false),
                ],
                vec![],
                &[],
            ),
            vec![(InvalidEnable, vec![10, 11])],
        ),
        (
            "holder outside the pod: the pod root waits for it",
            obs(
                vec![p(10, 1, on(), true, false)],
                vec![lock(&[500], true, &[500])],
                &[500],
            ),
            vec![(Waiting, vec![10]), (HolderOutsidePod, vec![500])],
        ),
        (
            "locked, holder invisible (/proc/locks says pid 0)",
            obs(
                vec![p(10, 1, on(), false, false)],
                vec![lock(&[], true, &[0])],
                &[],
            ),
            vec![(HolderOutsidePod, vec![])],
        ),
    ];
    for (name, o, want) in cases {
        assert_eq!(kinds(&o), want, "case: {name}\n{:#?}", judge(&o).verdicts);
    }
}

#[test]
fn messages_say_what_and_how_long() {
    let o = obs(
        vec![
            p(11, 10, env(Some("1"), None), true, true),
            p(12, 10, env(Some("1"), Some("999")), true, false),
        ],
        vec![lock(&[11], true, &[11])],
        &[],
    );
    let s = judge(&o);
    let get = |k| {
        s.verdicts
            .iter()
            .find(|v| v.kind == k)
            .unwrap()
            .message
            .clone()
    };
    assert!(get(SiblingsRacing).contains("more than one Take"));
    let w = get(Waiting);
    assert!(w.contains("12 s") && w.contains("held by pid 11"), "{w}");
    let st = get(StrayStamp);
    assert!(st.contains("pid 999") && st.contains("not running"), "{st}");
    let p12 = s.processes.iter().find(|p| p.pid == 12).unwrap();
    assert_eq!(p12.lock, LockState::Open);
    assert_eq!(p12.waiting_s, Some(12));
    assert_eq!(
        s.processes.iter().find(|p| p.pid == 11).unwrap().waiting_s,
        None
    );
}

#[test]
fn output_is_sorted_and_json_shape_matches_design() {
    let o = obs(
        vec![
            p(30, 1, env(Some("bad\n"), None), false, false),
            p(20, 1, env(Some("1"), None), true, true),
        ],
        vec![lock(&[20], true, &[20])],
        &[],
    );
    let s = judge(&o);
    assert_eq!(
        s.processes.iter().map(|p| p.pid).collect::<Vec<_>>(),
        vec![20, 30]
    );
    let v: serde_json::Value = serde_json::to_value(&s).unwrap();
    let p0 = &v["processes"][0];
    for key in ["pid", "ppid", "command", "duty", "duty_reason", "lock"] {
        assert!(p0.get(key).is_some(), "missing {key}");
    }
    assert_eq!(p0["duty"], "take");
    assert_eq!(p0["lock"], "holds");
    assert_eq!(v["processes"][1]["duty"], "invalid");
    assert_eq!(v["processes"][1]["enable"], "bad\\n");
    assert_eq!(v["locks"][0]["holders"][0], 20);
    assert_eq!(v["verdicts"][0]["kind"], "invalid_enable");
    assert!(v["verdicts"][0]["pids"].is_array());
}

/// A fake /proc (the proc root is injectable): a process whose environ
/// cannot be read shows duty `unknown` with the reason, and the scan goes on.
#[test]
fn unreadable_environ_is_unknown_with_reason() {
    let root = tempfile::tempdir().unwrap();
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = stat.split_once(' ').unwrap().1;
    let rest = rest.split_once(") ").unwrap().1; // after "(comm) "
    let fields: Vec<&str> = rest.split(' ').collect();
    let mk = |pid: u32, ppid: u32, env: Option<&[u8]>| {
        let d = root.path().join(pid.to_string());
        std::fs::create_dir_all(d.join("fd")).unwrap();
        std::fs::create_dir_all(d.join("fdinfo")).unwrap();
        let mut f = fields.clone();
        let ppid_s = ppid.to_string();
        f[1] = &ppid_s;
        std::fs::write(d.join("stat"), format!("{pid} (fake) {}", f.join(" "))).unwrap();
        std::fs::write(d.join("cmdline"), b"fake\0--flag\0").unwrap();
        match env {
            Some(e) => std::fs::write(d.join("environ"), e).unwrap(),
            // A directory cannot be read as a file: stands in for EACCES.
            None => std::fs::create_dir(d.join("environ")).unwrap(),
        }
    };
    mk(100, 1, Some(b"CLOUD_WRITER_LEASE=1\0SECRET=x\0"));
    mk(101, 100, None);
    std::fs::write(root.path().join("locks"), "").unwrap();
    std::fs::write(root.path().join("uptime"), "100.0 50.0\n").unwrap();

    let s = scan(&ScanOptions {
        proc_root: root.path().to_path_buf(),
        data_dirs: vec![],
        pod_root: Some(100),
        node: false,
    })
    .unwrap();
    assert_eq!(s.processes.len(), 2, "{s:#?}");
    let p101 = s.processes.iter().find(|p| p.pid == 101).unwrap();
    assert_eq!(p101.duty, DutyView::Unknown);
    assert!(p101.duty_reason.contains("environ"), "{}", p101.duty_reason);
    assert_eq!(p101.command, "fake --flag");
    let p100 = s.processes.iter().find(|p| p.pid == 100).unwrap();
    assert_eq!(p100.duty, DutyView::Take);
    // The root is armed and nobody holds a lock.
    assert_eq!(s.verdicts.len(), 1);
    assert_eq!(s.verdicts[0].kind, ArmedHoldsNothing);
    // Known facts still give verdicts, but the snapshot says what it could
    // not read and is never complete (exit 1, not 0 or 3).
    assert_eq!(s.uninspected, vec![101], "{s:#?}");
    assert!(s.incomplete());
    assert_eq!(s.exit_code().code(), 1);
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("1 process could not be inspected")),
        "{:?}",
        s.notes
    );

    // Default selection: processes with a lease variable, plus ancestors.
    let all = scan(&ScanOptions {
        proc_root: root.path().to_path_buf(),
        ..ScanOptions::default()
    })
    .unwrap();
    assert_eq!(
        all.processes.iter().map(|p| p.pid).collect::<Vec<_>>(),
        vec![100]
    );
}

/// Orphaned writer: the lease is on, the stamp names a pid that is gone, and
/// no ancestor holds the lock; not when a holder is above it.
#[test]
fn orphaned_writer_only_outside_every_holders_tree() {
    let orphan = obs(
        vec![p(20, 1, stamped("99"), false, false)],
        vec![lock(&[], false, &[])],
        &[],
    );
    assert_eq!(
        kinds(&orphan),
        vec![(ArmedHoldsNothing, vec![20]), (OrphanedWriter, vec![20])]
    );
    let under_holder = obs(
        vec![
            p(10, 1, on(), true, true),
            p(11, 10, stamped("10"), false, false),
            p(12, 11, stamped("99"), false, false),
        ],
        vec![lock(&[10], true, &[10])],
        &[],
    );
    assert_eq!(kinds(&under_holder), vec![]);
    // Off: the stamp decides nothing.
    let off = obs(
        vec![p(20, 1, env(Some("0"), Some("99")), false, false)],
        vec![lock(&[], false, &[])],
        &[],
    );
    assert_eq!(kinds(&off), vec![]);
}

/// A lock held from another PID namespace: never "armed, holds nothing";
/// the waiter is told who holds it.
#[test]
fn held_outside_the_namespace_is_not_free() {
    let mut l = lock(&[], true, &[]);
    l.state = LockFileState::HeldOutsideNamespace;
    let o = obs(vec![p(10, 1, on(), true, false)], vec![l], &[]);
    let s = judge(&o);
    let got: Vec<_> = s
        .verdicts
        .iter()
        .map(|v| (v.kind, v.pids.clone()))
        .collect();
    assert_eq!(got, vec![(Waiting, vec![10]), (HolderOutsidePod, vec![])]);
    assert!(s.verdicts[0]
        .message
        .contains("held by a process outside this PID namespace"));
    assert!(s.verdicts[1].message.contains("outside this PID namespace"));
    assert!(!s.incomplete());
}

/// Missing facts build no verdict: with a process's descriptors unreadable
/// and no lock file known, "nobody has a lock file open" is not claimed; the
/// process's lock is unknown; the snapshot is incomplete (exit 1).
#[test]
fn unreadable_descriptors_are_unknown_and_build_no_verdict() {
    let mut hidden = p(
        11,
        10,
        EnvRead::Unreadable("permission denied".into()),
        false,
        false,
    );
    hidden.fds_unreadable = Some("/proc/11/fd: permission denied".into());
    let mut o = obs(vec![p(10, 1, on(), false, false), hidden], vec![], &[]);
    o.uninspected = [11].into_iter().collect();
    o.fds_unreadable = [11].into_iter().collect();
    let s = judge(&o);
    assert!(s.verdicts.is_empty(), "{:#?}", s.verdicts);
    let h = s.processes.iter().find(|p| p.pid == 11).unwrap();
    assert_eq!(h.lock, LockState::Unknown);
    assert_eq!(h.duty, DutyView::Unknown);
    assert!(h
        .lock_reason
        .as_deref()
        .unwrap()
        .contains("permission denied"));
    assert_eq!(s.uninspected, vec![11]);
    assert_eq!(s.exit_code().code(), 1);
    // Root is not told to run as root (issue 35 trip 7), but what it lacks
    // (issue 46: the remedy by the viewer's rights, tested in `ns`).
    let how = leasectl::writer::scan::ns::ViewerFacts::current().remedy();
    if nix::unistd::geteuid().is_root() {
        assert!(!how.contains("run as their owner or root"), "{how}");
    } else {
        assert_eq!(how, "run as their owner or root");
    }
    assert_eq!(
        s.notes,
        vec![format!("1 process could not be inspected ({how}): its duty or lock is unknown and no verdict is built on it.")]
    );
    // An unknown lock file is incomplete too, with its reason as a note.
    let mut l = lock(&[], false, &[]);
    l.state = LockFileState::Unknown;
    l.state_reason = "whether it is locked is unknown".into();
    let s = judge(&obs(vec![p(10, 1, on(), true, false)], vec![l], &[]));
    assert!(s.incomplete());
    assert!(!s.verdicts.iter().any(|v| v.kind == ArmedHoldsNothing));
}

fn on() -> EnvRead {
    env(Some("1"), None)
}

fn stamped(s: &str) -> EnvRead {
    env(Some("1"), Some(s))
}

/// Issue 37, item 2: pid 20 holds a deleted lock file (removed while held),
/// pid 30 holds the file the path names now. The deleted file is an
/// orphaned lock naming 20 and saying two writers (30 named); it raises no
/// racing, holder-outside-pod or waiting verdict of its own, and 20's lock
/// is `holds_deleted`.
#[test]
fn orphaned_lock_is_its_own_verdict() {
    let on = || env(Some("1"), None);
    let mut a = p(20, 1, on(), true, true);
    a.opens = vec![1];
    a.holds = vec![1];
    let b = p(30, 1, on(), true, true);
    let mut deleted = lock(&[20], true, &[20]);
    deleted.path = "/data/.writer.lock (deleted)".into();
    deleted.state = LockFileState::Orphaned;
    deleted.deleted = true;
    deleted.current = Some(0);
    let o = obs(vec![a, b], vec![lock(&[30], true, &[30]), deleted], &[]);
    assert_eq!(kinds(&o), vec![(OrphanedLock, vec![20])]);
    let snap = judge(&o);
    let msg = &snap.verdicts[0].message;
    assert!(
        msg.contains("two writers") && msg.contains("pid 30"),
        "{msg}"
    );
    let lock_of = |pid: u32| snap.processes.iter().find(|p| p.pid == pid).unwrap().lock;
    assert_eq!(lock_of(20), LockState::HoldsDeleted);
    assert_eq!(lock_of(30), LockState::Holds);
    assert!(snap
        .locks
        .iter()
        .any(|l| l.deleted && l.state == LockFileState::Orphaned));

    // Only the orphan, the path naming no file: still the orphaned lock,
    // never "armed, holds nothing".
    let mut a = p(20, 1, on(), true, true);
    a.opens = vec![1];
    a.holds = vec![1];
    let mut deleted = lock(&[20], true, &[20]);
    deleted.state = LockFileState::Orphaned;
    deleted.deleted = true;
    deleted.current = Some(0);
    let o = obs(vec![a], vec![lock(&[], false, &[]), deleted], &[]);
    assert_eq!(kinds(&o), vec![(OrphanedLock, vec![20])]);
    assert!(!judge(&o).verdicts[0].message.contains("two writers"));
}

/// Issue 37, item 6: a lock file that is not a regular file (a symbolic
/// link) is its own verdict, not a free lock file and not "armed, holds
/// nothing".
#[test]
fn lock_file_not_regular_is_its_own_verdict() {
    let mut l = lock(&[], false, &[]);
    l.state = LockFileState::NotRegular;
    l.state_reason = "it is a symbolic link to \"/etc/nologin\", not a regular file".into();
    let o = obs(
        vec![p(10, 1, env(Some("1"), None), false, false)],
        vec![l],
        &[],
    );
    assert_eq!(kinds(&o), vec![(LockNotRegular, vec![])]);
    assert!(judge(&o).verdicts[0].message.contains("symbolic link"));
}

/// A process of an auto-detected pod in another mount namespace that ended
/// while the scan read it (a fake /proc: its `root` is gone, as a process's
/// is once it has exited): its namespace is no place of the pod any more,
/// so `--data-dir`'s lock file is shown once, as the viewer sees it — not a
/// second time as "unknown in pid N's mount namespace" (CI: a namespaced
/// pod of another test ended during a scan and this was reported).
#[test]
fn a_pod_process_that_ended_during_the_scan_adds_no_place() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = stat.split_once(") ").unwrap().1;
    let mut fields: Vec<&str> = rest.split(' ').collect();
    fields[1] = "1";
    let d = root.path().join("100");
    for sub in ["fd", "fdinfo", "ns"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    std::fs::write(d.join("stat"), format!("100 (fake) {}", fields.join(" "))).unwrap();
    std::fs::write(d.join("cmdline"), b"fake\0").unwrap();
    std::fs::write(d.join("environ"), b"CLOUD_WRITER_LEASE=1\0").unwrap();
    std::os::unix::fs::symlink("mnt:[4026532999]", d.join("ns/mnt")).unwrap();
    std::fs::create_dir_all(root.path().join("self/ns")).unwrap();
    std::os::unix::fs::symlink("mnt:[4026531841]", root.path().join("self/ns/mnt")).unwrap();
    std::fs::write(root.path().join("locks"), "").unwrap();
    std::fs::write(root.path().join("uptime"), "100.0 50.0\n").unwrap();
    let s = scan(&ScanOptions {
        proc_root: root.path().to_path_buf(),
        data_dirs: vec![data.path().to_owned()],
        ..ScanOptions::default()
    })
    .unwrap();
    assert_eq!(
        s.processes.iter().map(|p| p.pid).collect::<Vec<_>>(),
        vec![100],
        "{s:#?}"
    );
    assert_eq!(s.locks.len(), 1, "{:#?}", s.locks);
    assert!(
        !s.locks[0].path.contains("mount namespace"),
        "{:#?}",
        s.locks
    );
}

/// A lock taken while a scan reads `/proc` (a pod root starting): the scan
/// reads `/proc/locks` first and asks the kernel last, so the lock read as
/// held by a process outside this PID namespace although its holder was in
/// plain sight (CI: `wrapper_behind_a_shell_is_a_stray_stamp_and_waits`
/// saw a waiting pod root and "held outside this PID namespace"). A real
/// process takes the lock at a random moment while scans run one after
/// another; no scan may say the holder is out of sight.
#[test]
fn a_lock_taken_during_a_scan_is_never_held_out_of_sight() {
    use leasectl::writer::scan::LockFileState;
    const HOLDER: &str = "import fcntl, random, sys, time\n\
        f = open(sys.argv[1], 'a')\n\
        time.sleep(random.random() * 0.05)\n\
        fcntl.flock(f, fcntl.LOCK_EX)\n\
        time.sleep(60)\n";
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join(".writer.lock");
    let mut wrong = Vec::new();
    let mut scans = 0;
    for round in 0..100 {
        let _ = std::fs::remove_file(&lock);
        let mut c = std::process::Command::new("python3");
        c.args(["-c", HOLDER]).arg(&lock);
        let holder = crate::writer_support::Guard::spawn(c);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let s = scan(&ScanOptions {
                data_dirs: vec![dir.path().to_owned()],
                pod_root: Some(holder.pid),
                ..ScanOptions::default()
            })
            .unwrap();
            scans += 1;
            let l = &s.locks[0];
            if l.state == LockFileState::HeldOutsideNamespace {
                wrong.push(format!("round {round}: {}", l.state_reason));
            }
            if l.holders == vec![holder.pid] {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: the holder never showed: {s:#?}"
            );
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {scans} scans put a visible holder out of sight:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
