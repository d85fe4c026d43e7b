//! The console drawn into a `TestBackend`: every state, hostile text escaped,
//! scrolling, a terminal too small; the pod view (verdicts, process tree,
//! duties), switching views and per-view selection.

use std::time::Duration;

use crate::common::cli::write_lease;
use chrono::{TimeZone, Utc};
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{self, GatherOptions, OpenTarget};
use leasectl::store::local::LocalStore;
use leasectl::text::sanitize;
use leasectl::tui::app::{key_action, Action, App, View, BINDINGS};
use leasectl::tui::ui::render;
use leasectl::writer::scan::{
    judge, DutyView, EnvRead, LockState, Observed, ObservedLock, ObservedProcess, PodSnapshot,
    ProcessInfo, VerdictKind,
};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn at(s: u32) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, s).unwrap()
}

fn rec(id: &str, renewed: &str, ttl: u64) -> String {
    format!(
        r#"{{"instance_id":{},"acquired_at":"2026-11-30T11:00:00Z","renewed_at":"{renewed}","ttl_s":{ttl}}}"#,
        serde_json::to_string(id).unwrap()
    )
}

async fn app_on(dir: &std::path::Path, now: chrono::DateTime<Utc>) -> App {
    let snap = gather_at(dir, now).await;
    let mut app = App::new(
        vec!["file:///demo/".parse().unwrap()],
        false,
        Duration::from_secs(5),
        now,
    );
    app.update(Action::Snapshot(Box::new(snap)));
    app
}

fn seed(dir: &std::path::Path) {
    write_lease(
        dir,
        "db-fresh",
        &rec(
            "9f2c41d0a7b3e5f18c6d2a4b0e7f9c13",
            "2026-11-30T11:59:50Z",
            30,
        ),
    );
    write_lease(
        dir,
        "db-stale",
        &rec("old-holder", "2026-11-30T11:58:00Z", 30),
    );
    write_lease(
        dir,
        "db-suspect",
        &rec("clock-ahead", "2026-11-30T13:00:00Z", 30),
    );
    write_lease(dir, "db-malformed", "{not json");
    std::fs::create_dir_all(dir.join("db-absent")).unwrap();
    write_lease(
        dir,
        "db-hostile",
        &rec("x\u{1b}]0;pwned\u{7}\u{1b}[2J", "2026-11-30T11:59:58Z", 30),
    );
    // Last-Modified (the file's mtime) fixed, so the holder-skew column is deterministic.
    let lm = std::time::UNIX_EPOCH + std::time::Duration::from_secs(at(0).timestamp() as u64 - 5);
    for e in std::fs::read_dir(dir).unwrap() {
        let lease = e.unwrap().path().join("LEASE");
        if lease.exists() {
            std::fs::File::options()
                .write(true)
                .open(&lease)
                .unwrap()
                .set_modified(lm)
                .unwrap();
        }
    }
}

fn draw(app: &App, w: u16, h: u16) -> TestBackend {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render(app, f)).unwrap();
    t.backend().clone()
}

fn screen_text(b: &TestBackend) -> String {
    let buf = b.buffer();
    let mut s = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

#[tokio::test]
async fn table_with_every_state() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let mut app = app_on(dir.path(), at(0)).await;
    app.update(Action::Resize(130, 14));
    let backend = draw(&app, 130, 14);
    let text = screen_text(&backend);
    for state in ["fresh", "stale", "suspect", "malformed", "absent"] {
        assert!(text.contains(state), "{state} missing:\n{text}");
    }
    // No raw ESC or BEL in any cell: the hostile id is shown escaped.
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'));
    assert!(text.contains("x\\x1b]0;pwned\\x07"), "{text}");
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn ages_tick_between_refreshes() {
    let dir = tempfile::tempdir().unwrap();
    write_lease(dir.path(), "db", &rec("h", "2026-11-30T11:59:50Z", 30));
    let mut app = app_on(dir.path(), at(0)).await;
    app.update(Action::Resize(100, 12));
    assert!(screen_text(&draw(&app, 100, 12)).contains("fresh"));
    // 25 seconds later, no new snapshot: the age has ticked past the TTL.
    app.update(Action::Tick(at(25)));
    let text = screen_text(&draw(&app, 100, 12));
    assert!(text.contains("35.0s") && text.contains("stale"), "{text}");
}

#[tokio::test]
async fn scrolling_keeps_the_selection_visible() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..200 {
        std::fs::create_dir_all(dir.path().join(format!("p{i:03}"))).unwrap();
    }
    let mut app = app_on(dir.path(), at(0)).await;
    app.update(Action::Resize(80, 20));
    assert_eq!(app.row_count(), 200);
    app.update(Action::End);
    assert_eq!(app.leases().cursor().selected(), 199);
    let text = screen_text(&draw(&app, 80, 20));
    assert!(text.contains("p199") && !text.contains("p000"), "{text}");
    app.update(Action::PageUp);
    assert_eq!(app.leases().cursor().selected(), 199 - app.visible_rows());
    app.update(Action::Home);
    let text = screen_text(&draw(&app, 80, 20));
    assert!(text.contains("p000") && text.contains("leases 1/200"));
    app.update(Action::Up);
    assert_eq!(app.leases().cursor().selected(), 0);
}

#[tokio::test]
async fn tiny_terminal_says_so() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let app = app_on(dir.path(), at(0)).await;
    for (w, h) in [(20, 5), (1, 1), (39, 30), (200, 7)] {
        let text = screen_text(&draw(&app, w, h));
        assert!(text.contains("too") || w < 20, "{w}x{h}: {text}");
    }
}

// ---------------------------------------------------------------- pod view

/// A snapshot of an empty local store whose pod section is `pod`.
async fn snapshot_with_pod(
    dir: &std::path::Path,
    now: chrono::DateTime<Utc>,
    pod: PodSnapshot,
) -> leasectl::snapshot::Snapshot {
    let mut snap = gather_at(dir, now).await;
    snap.pod = pod;
    snap
}

async fn pod_app(pod: PodSnapshot, w: u16, h: u16) -> App {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot_with_pod(dir.path(), at(0), pod).await;
    let mut app = App::new(
        vec!["file:///demo/".parse().unwrap()],
        false,
        Duration::from_secs(5),
        at(0),
    );
    app.update(Action::Resize(w, h));
    app.update(Action::Snapshot(Box::new(snap)));
    app
}

fn env(enable: Option<&str>, stamp: Option<&str>) -> EnvRead {
    EnvRead::Read {
        enable: enable.map(str::to_owned),
        stamp: stamp.map(str::to_owned),
    }
}

fn proc(pid: u32, ppid: u32, command: &str, env: EnvRead) -> ObservedProcess {
    ObservedProcess {
        pid,
        ppid,
        // The scanner escapes command lines; so does this fixture.
        command: sanitize(command),
        env,
        opens: vec![],
        holds: vec![],
        age_s: Some(42),
        fds_unreadable: None,
        included_because: "test".into(),
        container: None,
    }
}

/// The node view in the console (issue 46): the tally first in the verdict
/// box, each verdict naming its pod, the pod a process is in on the process
/// table's title, and the selected process's container under the table.
#[tokio::test]
async fn node_view_names_pods_and_containers() {
    let mut racing = trap_pod();
    for v in &mut racing.verdicts {
        v.pod = Some("team-a/web-1".into());
    }
    let uid = "0f4d4c2e-8c8d-4f4b-9a53-6b1f3c2d7e9a";
    let id = "4e6f0b1c9a0d3e2f5b8c7a6d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f";
    let cgroup = format!(
        "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{id}.scope\n",
        uid.replace('-', "_")
    );
    let container = leasectl::writer::scan::kube::container_of(&cgroup).unwrap();
    for p in &mut racing.processes {
        p.container = Some(container.clone());
    }
    racing.kubernetes = Some(leasectl::writer::scan::KubePod {
        uid: uid.into(),
        name: Some("web-1".into()),
        name_from: Some("HOSTNAME of pid 100".into()),
        namespace: Some("team-a".into()),
        namespace_unknown: None,
        qos: Some("guaranteed".into()),
        containers: vec![],
    });
    let mut summary = leasectl::writer::scan::NodeSummary::default();
    (summary.pods, summary.healthy, summary.racing) = (3, 2, 1);
    racing.node = Some(leasectl::writer::scan::NodeView {
        summary,
        ..Default::default()
    });
    let mut app = pod_app(racing, 140, 30).await;
    app.update(Action::SwitchView);
    let text = screen_text(&draw(&app, 140, 30));
    assert!(
        text.contains("node: 3 pods (2 healthy, 1 racing)"),
        "{text}"
    );
    assert!(
        text.contains("siblings_racing in team-a/web-1 [pid"),
        "{text}"
    );
    assert!(text.contains("· pod team-a/web-1"), "{text}");
    assert!(
        text.contains(&format!("container containerd {}, pod {uid}", &id[..12])),
        "{text}"
    );
}

/// A pod with the `sh -c` trap and more: the root wrapper (100) takes and
/// holds; its shell child (101) inherits; a second wrapper behind that shell
/// (102) sees its grandparent's stamp, takes and waits; a hostile command line
/// (104) with an invalid enable value; an unreadable environment (105).
fn trap_pod() -> PodSnapshot {
    let mut root = proc(
        100,
        1,
        "leasectl writer exec --data-dir /data -- sh -c server",
        env(Some("1"), None),
    );
    root.opens = vec![0];
    root.holds = vec![0];
    let mut waiter = proc(
        102,
        101,
        "leasectl writer exec --data-dir /data --wait 30s -- server",
        env(Some("1"), Some("100")),
    );
    waiter.opens = vec![0];
    let obs = Observed {
        processes: vec![
            root,
            proc(
                101,
                100,
                "sh -c server --port 8080",
                env(Some("1"), Some("100")),
            ),
            waiter,
            proc(103, 100, "sleep 30", env(Some("1"), Some("100"))),
            proc(
                104,
                100,
                "printf \u{1b}]0;pwned\u{7}\u{1b}[2J grep '\\d+'",
                env(Some("yes"), Some("100")),
            ),
            proc(
                105,
                100,
                "[kworker]",
                EnvRead::Unreadable("permission denied".into()),
            ),
        ],
        locks: vec![ObservedLock {
            path: "/data/.writer.lock".into(),
            holders: vec![100],
            locked: true,
            proc_locks_pids: vec![100],
            state: leasectl::writer::scan::LockFileState::Held,
            state_reason: String::new(),
            deleted: false,
            current: None,
        }],
        alive: [1, 100, 101, 102, 103, 104, 105].into_iter().collect(),
        ..Observed::default()
    };
    judge(&obs)
}

#[tokio::test]
async fn pod_view_with_verdicts() {
    let pod = trap_pod();
    let kinds: Vec<VerdictKind> = pod.verdicts.iter().map(|v| v.kind).collect();
    assert_eq!(
        kinds,
        vec![
            VerdictKind::InvalidEnable,
            VerdictKind::SiblingsRacing,
            VerdictKind::StrayStamp,
            VerdictKind::Waiting
        ]
    );
    let mut app = pod_app(pod, 120, 30).await;
    app.update(Action::SwitchView);
    // Select the waiter: its duty sentence is shown under the table.
    app.update(Action::Down);
    app.update(Action::Down);
    assert_eq!(app.selected_process().unwrap().pid, 102);
    let text = screen_text(&draw(&app, 120, 30));
    // Verdicts are written as text, not only as colour.
    for k in [
        "invalid_enable",
        "siblings_racing",
        "stray_stamp",
        "waiting [pid 102]",
    ] {
        assert!(text.contains(k), "{k} missing:\n{text}");
    }
    for d in [
        "take",
        "inherit",
        "invalid",
        "unknown",
        "holds",
        "open ≤42.0s",
    ] {
        assert!(text.contains(d), "{d} missing:\n{text}");
    }
    assert!(text.contains("view  pod "), "{text}");
    assert!(text.contains("Tab leases/pod"), "{text}");
    // Tree: the waiter is indented under the shell, which is under the root.
    assert!(text.contains("  └ leasectl writer exec --data-dir /data --wait 30s"));
    // The hostile command is escaped once (as in --json), not twice.
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'));
    assert!(
        text.contains("printf \\x1b]0;pwned\\x07\\x1b[2J grep '\\\\d+'"),
        "{text}"
    );
    // The selected process's duty sentence.
    assert!(
        text.contains("pid 102: writer lease take:") && text.contains("not our parent 101"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

/// A hand-built snapshot (not from the scanner) with raw control characters:
/// the pod view escapes them itself.
#[tokio::test]
async fn pod_view_escapes_raw_process_text() {
    let raw = ProcessInfo {
        pid: 7,
        ppid: 1,
        command: "evil\u{1b}]0;title\u{7}\u{9b}31m\u{202e}x".into(),
        duty: DutyView::Take,
        duty_reason: "reason\u{1b}[2J".into(),
        lock: LockState::Holds,
        enable: Some("1\u{1b}".into()),
        stamp: None,
        waiting_s: None,
        lock_reason: None,
        included_because: String::new(),
        container: None,
    };
    let pod = PodSnapshot {
        processes: vec![raw],
        locks: vec![],
        verdicts: vec![leasectl::writer::scan::Verdict {
            kind: VerdictKind::HolderNotTake,
            message: "msg\u{1b}[31m".into(),
            pids: vec![7],
            pod: None,
        }],
        ..PodSnapshot::default()
    };
    let mut app = pod_app(pod, 100, 16).await;
    app.update(Action::SwitchView);
    let text = screen_text(&draw(&app, 100, 16));
    for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(!text.contains(bad), "{bad:?} reached the screen:\n{text}");
    }
    assert!(
        text.contains("evil\\x1b]0;title\\x07\\u{9b}31m\\u{202e}x"),
        "{text}"
    );
    assert!(text.contains("reason\\x1b[2J"), "{text}");
    assert!(text.contains("msg\\x1b[31m"), "{text}");
}

#[tokio::test]
async fn tab_switches_view_and_each_view_keeps_its_selection() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        std::fs::create_dir_all(dir.path().join(format!("p{i}"))).unwrap();
    }
    let mut app = app_on(dir.path(), at(0)).await;
    let snap = snapshot_with_pod(dir.path(), at(0), trap_pod()).await;
    app.update(Action::Snapshot(Box::new(snap)));
    app.update(Action::Resize(100, 30));
    assert_eq!(app.view(), View::Leases);
    assert_eq!((app.row_count(), app.pod().rows().len()), (5, 6));

    // The Tab key is bound, and shown in the status bar from BINDINGS.
    let tab = crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Tab);
    let a = key_action(&app, tab).expect("Tab is bound");
    assert!(matches!(a, Action::SwitchView));
    assert!(BINDINGS
        .iter()
        .any(|b| b.keys == "Tab" && b.does == "leases/pod"));

    app.update(Action::Down);
    app.update(Action::Down);
    assert_eq!(
        (
            app.leases().cursor().selected(),
            app.pod().cursor().selected()
        ),
        (2, 0)
    );
    let text = screen_text(&draw(&app, 100, 30));
    assert!(
        text.contains("view  leases ") && text.contains("leases 3/5"),
        "{text}"
    );

    app.update(a);
    assert_eq!(app.view(), View::Pod);
    app.update(Action::End);
    assert_eq!(
        (
            app.leases().cursor().selected(),
            app.pod().cursor().selected()
        ),
        (2, 5)
    );
    app.update(Action::Up);
    assert_eq!(
        (
            app.leases().cursor().selected(),
            app.pod().cursor().selected()
        ),
        (2, 4)
    );
    let text = screen_text(&draw(&app, 100, 30));
    assert!(
        text.contains("view  pod ") && text.contains("processes 5/6"),
        "{text}"
    );
    assert!(!text.contains("PREFIX"), "{text}");

    app.update(Action::SwitchView);
    assert_eq!(app.view(), View::Leases);
    app.update(Action::Home);
    assert_eq!(
        (
            app.leases().cursor().selected(),
            app.pod().cursor().selected()
        ),
        (0, 4)
    );
}

#[tokio::test]
async fn pod_selection_clamps_and_follows_the_process() {
    let mut app = pod_app(trap_pod(), 100, 30).await;
    app.update(Action::SwitchView);
    app.update(Action::PageDown);
    assert_eq!(
        app.pod().cursor().selected(),
        5,
        "PgDn stops at the last row"
    );
    app.update(Action::Down);
    assert_eq!(app.pod().cursor().selected(), 5);
    app.update(Action::Up);
    let pid = app.selected_process().unwrap().pid;

    // A refresh where earlier processes exited: the same process stays selected.
    let mut fewer = trap_pod();
    fewer.processes.retain(|p| p.pid != 101 && p.pid != 102);
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot_with_pod(dir.path(), at(1), fewer.clone()).await;
    app.update(Action::Snapshot(Box::new(snap)));
    assert_eq!(app.selected_process().unwrap().pid, pid);

    // A refresh where it is gone and fewer rows remain: the selection clamps.
    fewer.processes.truncate(2);
    let snap = snapshot_with_pod(dir.path(), at(2), fewer).await;
    app.update(Action::Snapshot(Box::new(snap)));
    assert_eq!(app.pod().rows().len(), 2);
    assert_eq!(app.pod().cursor().selected(), 1);
    app.update(Action::PageUp);
    assert_eq!(app.pod().cursor().selected(), 0);

    // An empty pod: nothing selected, nothing breaks.
    let snap = snapshot_with_pod(dir.path(), at(3), PodSnapshot::default()).await;
    app.update(Action::Snapshot(Box::new(snap)));
    app.update(Action::End);
    assert_eq!(
        (app.pod().cursor().selected(), app.pod().cursor().offset()),
        (0, 0)
    );
    let text = screen_text(&draw(&app, 100, 30));
    assert!(
        text.contains("processes (none)") && text.contains("no pod found"),
        "{text}"
    );
}

#[tokio::test]
async fn pod_scan_failure_and_no_pod_are_shown() {
    let mut app = pod_app(trap_pod(), 100, 20).await;
    app.update(Action::SwitchView);
    app.update(Action::PodScanFailed(
        "pod root pid 4242 does not exist".into(),
    ));
    let text = screen_text(&draw(&app, 100, 20));
    assert!(
        text.contains("pod scan failed: pod root pid 4242 does not exist"),
        "{text}"
    );
    // The next good refresh clears it.
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot_with_pod(dir.path(), at(1), trap_pod()).await;
    app.update(Action::Snapshot(Box::new(snap)));
    let text = screen_text(&draw(&app, 100, 20));
    assert!(
        !text.contains("pod scan failed") && text.contains("siblings_racing"),
        "{text}"
    );

    let mut off = App::new(vec![], true, Duration::from_secs(5), at(0)).without_pod();
    off.update(Action::Resize(100, 20));
    off.update(Action::SwitchView);
    let text = screen_text(&draw(&off, 100, 20));
    assert!(text.contains("pod scan off (--no-pod)"), "{text}");
}

/// 10,000 processes (half of them one deep chain): the tree is built without
/// recursion (a recursive build would overflow the stack) and scrolling reaches
/// the end. Speed is measured by the benchmarks, not here.
#[tokio::test]
async fn ten_thousand_processes_deep_chain() {
    let mut processes = Vec::new();
    for i in 0..10_000u32 {
        let pid = 1000 + i;
        let ppid = if i < 5_000 { pid - 1 } else { 999 };
        processes.push(ProcessInfo {
            pid,
            ppid,
            command: format!("worker {i}"),
            duty: DutyView::Off,
            duty_reason: "writer lease off: CLOUD_WRITER_LEASE is unset".into(),
            lock: LockState::None,
            enable: None,
            stamp: None,
            waiting_s: None,
            lock_reason: None,
            included_because: String::new(),
            container: None,
        });
    }
    let pod = PodSnapshot {
        processes,
        ..PodSnapshot::default()
    };
    let mut app = pod_app(pod, 120, 40).await;
    app.update(Action::SwitchView);
    assert_eq!(app.pod().rows().len(), 10_000);
    // Tree order: the chain first (depth grows), then the other roots (their
    // parent 999 is not in the pod).
    assert_eq!(
        app.pod_row(4_999).map(|(p, d)| (p.pid, d)),
        Some((5_999, 4_999))
    );
    assert_eq!(
        app.pod_row(5_000).map(|(p, d)| (p.pid, d)),
        Some((6_000, 0))
    );
    let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
    for _ in 0..50 {
        app.update(Action::PageDown);
        t.draw(|f| render(&app, f)).unwrap();
    }
    app.update(Action::End);
    t.draw(|f| render(&app, f)).unwrap();
    let text = screen_text(t.backend());
    assert!(
        text.contains("worker 9999") && text.contains("processes 10000/10000"),
        "{text}"
    );
}

/// A LEASE whose Last-Modified is its `renewed_at` (a deterministic screen).
fn lease_at(dir: &std::path::Path, prefix: &str, holder: &str, renewed: &str) {
    write_lease(dir, prefix, &rec(holder, renewed, 30));
    let t: chrono::DateTime<Utc> = renewed.parse().unwrap();
    std::fs::File::options()
        .write(true)
        .open(dir.join(prefix).join("LEASE"))
        .unwrap()
        .set_modified(t.into())
        .unwrap();
}

/// One snapshot of `dir` judged at `now`.
async fn gather_at(dir: &std::path::Path, now: chrono::DateTime<Utc>) -> snapshot::Snapshot {
    let shared: SharedClock = std::sync::Arc::new(ManualClock::new(now));
    let store = std::sync::Arc::new(LocalStore::open(dir).unwrap());
    let target: leasectl::target::Target = format!("file://{}/", dir.display()).parse().unwrap();
    let open = vec![OpenTarget {
        target,
        endpoint: "local".into(),
        store,
    }];
    snapshot::gather(&open, &GatherOptions::default(), &shared).await
}

/// A takeover outcome of `{dir}/db/` as the console writes it.
pub(crate) fn takeover_entry(
    dir: &std::path::Path,
    time: chrono::DateTime<Utc>,
    holder: &str,
) -> leasectl::audit::AuditEntry {
    use leasectl::audit::{AuditEntry, AuditObserved, AuditTarget, AuditWritten};
    let record: leasectl::bucket::LeaseRecord =
        serde_json::from_str(&rec(holder, "2026-11-30T12:00:50Z", 30)).unwrap();
    AuditEntry {
        time,
        phase: "outcome".into(),
        id: "t1".into(),
        operator: "ops@host".into(),
        tool_version: "0.1.0".into(),
        action: "takeover".into(),
        target: AuditTarget {
            endpoint: None,
            region: None,
            addressing_style: None,
            bucket: None,
            key: "db/LEASE".into(),
            url: format!("file://{}/db/", dir.display()),
        },
        observed: AuditObserved {
            record: None,
            etag: None,
            judgement: "fresh".into(),
            age_s: Some(5.0),
            reader_clock: time,
        },
        written: Some(AuditWritten { record, etag: None }),
        reason: "stuck \x1b[31m job".into(),
        exclusion: "conditional".into(),
        forced: true,
        then: "hold".into(),
        outcome: Some("taken".into()),
        writes_safe_from: None,
    }
}

/// The detail pane shows the session's holder history (first seen, a new
/// holder after expiry, a takeover named by its audit entry, a change while
/// fresh) beside the details; each row's TTL cell carries an age gauge.
#[tokio::test]
async fn detail_shows_the_holder_history_and_rows_a_ttl_gauge() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lease_at(d, "db/", "holder-a", "2026-11-30T12:00:00Z");
    lease_at(d, "web/", "holder-w", "2026-11-30T11:59:40Z");
    let mut app = app_on(d, at(0)).await;
    // holder-a renews: not a change.
    lease_at(d, "db/", "holder-a", "2026-11-30T12:00:10Z");
    app.update(Action::Snapshot(Box::new(gather_at(d, at(10)).await)));
    // holder-a dies; holder-b after its expiry.
    lease_at(d, "db/", "holder-b", "2026-11-30T12:00:45Z");
    app.update(Action::Snapshot(Box::new(gather_at(d, at(45)).await)));
    // A takeover from the console (audited) while holder-b is fresh.
    app.update(Action::Audit(vec![takeover_entry(d, at(49), "holder-c")]));
    lease_at(d, "db/", "holder-c", "2026-11-30T12:00:50Z");
    app.update(Action::Snapshot(Box::new(gather_at(d, at(50)).await)));
    // Someone writes over holder-c's live lease: nothing audited.
    lease_at(d, "db/", "intruder\x1b[2J", "2026-11-30T12:00:45Z");
    app.update(Action::Snapshot(Box::new(gather_at(d, at(55)).await)));

    app.update(Action::Resize(120, 30));
    app.update(Action::ToggleDetail);
    let text = screen_text(&draw(&app, 120, 30));
    assert!(text.contains("holder history"), "{text}");
    let order = [
        "CHANGED WHILE FRESH: holder-c → intruder\\x1b[2J",
        "takeover: holder-b → holder-c (audit: ops@host — stuck \\x1b[31m job)",
        "after expiry: holder-a → holder-b",
        "first seen: holder-a",
    ];
    let at_of = |s: &str| text.replace('\n', "").find(s.split(':').next().unwrap());
    for s in order {
        assert!(
            text.contains(&s.chars().take(24).collect::<String>()),
            "{s} missing:\n{text}"
        );
    }
    assert!(at_of(order[0]) < at_of(order[3]), "newest first:\n{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    // Gauges: db/ renewed 10 s ago on a 30 s TTL (a third), web/ 75 s ago (full).
    assert!(text.contains("30s   ██····"), "{text}");
    assert!(text.contains("30s   ██████"), "{text}");
    insta::assert_snapshot!(text);
}

/// While a gather is still going on, the rows read so far show with the
/// progress in the table's title; the final snapshot clears it. The status
/// bar prices the request rate on AWS S3 (S3 targets only), and the rows in
/// view are what the gatherer is told to read at every refresh.
#[tokio::test]
async fn loading_progress_cost_per_hour_and_rows_in_view() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let full = app_on(dir.path(), at(0)).await;
    let snap = full.snapshot().cloned().unwrap();
    let mut partial = snap.clone();
    partial.targets[0].prefixes.truncate(2);

    let mut app = App::new(
        vec!["s3://bucket/backups/".parse().unwrap()],
        true,
        Duration::from_secs(5),
        at(0),
    );
    app.update(Action::Resize(120, 14));
    app.update(Action::Progress {
        snapshot: Box::new(partial),
        read: 2,
        known: 6,
        listed: false,
    });
    let text = screen_text(&draw(&app, 120, 14));
    assert!(
        text.contains("leases 1/2 · loading: 2 of 6+ (listing) read"),
        "{text}"
    );
    // 600 requests in 60 s, 6 of them LISTs: 594 GETs + 6 × 12.5 = 669 GET
    // prices a minute at $0.0004 per 1,000 → $0.016056 an hour.
    let c = |requests, lists| leasectl::store::RequestCounts {
        requests,
        errors: 0,
        lists,
    };
    app.update(Action::Counters(c(1000, 10)));
    app.update(Action::Tick(at(0) + chrono::Duration::seconds(60)));
    app.update(Action::Counters(c(1600, 16)));
    let cost = app.cost_per_hour().unwrap();
    assert!((cost - 0.016056).abs() < 1e-9, "{cost}");
    app.settings.get_price = 0.0008;
    assert!((app.cost_per_hour().unwrap() - 2.0 * 0.016056).abs() < 1e-9);
    app.update(Action::Snapshot(Box::new(snap)));
    app.update(Action::Resize(200, 14));
    let text = screen_text(&draw(&app, 200, 14));
    assert!(!text.contains("loading"), "{text}");
    assert!(text.contains("600 req/min ≈ $0.0321/h"), "{text}");

    // 11 rows of screen leave room for a few table rows: those, and the
    // selection, are in view; the pod view has none.
    app.update(Action::Resize(200, 11));
    let in_view = app.rows_in_view();
    let page = app.lease_visible_rows();
    assert!((1..6).contains(&page), "{page}");
    assert_eq!(in_view.len(), page, "{in_view:?}");
    app.update(Action::End);
    let after = app.rows_in_view();
    assert!(after.contains(&(0, app.selected_lease().unwrap().1.prefix.clone())));
    assert_ne!(in_view, after, "scrolling changes the rows in view");
    app.update(Action::SwitchView);
    assert!(app.rows_in_view().is_empty());

    // A console on local stores has no request price.
    assert!(full.cost_per_hour().is_none());
}

/// Issue 23 item 17: a holder of combining marks only, or with a braille
/// blank in it, made the HOLDER cell look empty. What draws as nothing is
/// escaped; an id with nothing visible is malformed, and says so.
#[tokio::test]
async fn holders_that_would_look_blank_are_escaped_or_malformed() {
    let dir = tempfile::tempdir().unwrap();
    write_lease(
        dir.path(),
        "blank",
        &rec("a\u{2800}b", "2026-11-30T11:59:50Z", 30),
    );
    write_lease(
        dir.path(),
        "marks",
        &rec("\u{301}\u{301}", "2026-11-30T11:59:50Z", 30),
    );
    write_lease(
        dir.path(),
        "accent",
        &rec("e\u{301}t\u{e9}", "2026-11-30T11:59:50Z", 30),
    );
    let lm = std::time::UNIX_EPOCH + std::time::Duration::from_secs(at(0).timestamp() as u64 - 5);
    for p in ["blank", "marks", "accent"] {
        std::fs::File::options()
            .write(true)
            .open(dir.path().join(p).join("LEASE"))
            .unwrap()
            .set_modified(lm)
            .unwrap();
    }
    let mut app = app_on(dir.path(), at(0)).await;
    app.update(Action::Resize(130, 10));
    let text = screen_text(&draw(&app, 130, 10));
    assert!(!text.contains('\u{2800}'), "{text}");
    assert!(text.contains("a\\u{2800}b"), "{text}");
    assert!(
        text.contains("e\u{301}t\u{e9}"),
        "an accent on a letter stays:\n{text}"
    );
    assert!(text.contains("malformed"), "{text}");
    insta::assert_snapshot!("blank_holders_table", text);
    // The malformed row's detail names the id, escaped, and why.
    let snap = gather_at(dir.path(), at(0)).await;
    let row = snap.targets[0]
        .prefixes
        .iter()
        .position(|p| p.prefix == "marks/")
        .unwrap();
    for _ in 0..row {
        app.update(Action::Down);
    }
    app.update(Action::ToggleDetail);
    app.update(Action::Resize(130, 30));
    let text = screen_text(&draw(&app, 130, 30));
    assert!(
        text.contains(r#"instance_id "\u{301}\u{301}" has no visible"#),
        "{text}"
    );
    assert!(
        !text.contains("\"\u{301}"),
        "no mark drawn on a quote:\n{text}"
    );
}

/// A LEASE with a generation whose Last-Modified is its `renewed_at`.
fn lease_gen_at(dir: &std::path::Path, prefix: &str, holder: &str, renewed: &str, g: Option<u64>) {
    let mut v: serde_json::Value = serde_json::from_str(&rec(holder, renewed, 30)).unwrap();
    if let Some(g) = g {
        v["generation"] = g.into();
    }
    write_lease(dir, prefix, &v.to_string());
    let t: chrono::DateTime<Utc> = renewed.parse().unwrap();
    std::fs::File::options()
        .write(true)
        .open(dir.join(prefix).join("LEASE"))
        .unwrap()
        .set_modified(t.into())
        .unwrap();
}

/// Issue 26: the detail pane shows the record's generation (`-` for a
/// record without one), and the holder history the generations before and
/// after each change ("generation 7 → 8"); a takeover audited with
/// `--then handover:ID` is a hand-over.
#[tokio::test]
async fn detail_shows_the_generation_and_the_history_generations() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lease_gen_at(d, "db/", "holder-a", "2026-11-30T12:00:00Z", Some(7));
    lease_gen_at(d, "web/", "holder-w", "2026-11-30T12:00:00Z", None);
    let mut app = app_on(d, at(0)).await;
    // holder-a dies; holder-b after its expiry, generation 8.
    lease_gen_at(d, "db/", "holder-b", "2026-11-30T12:00:45Z", Some(8));
    lease_gen_at(d, "web/", "holder-w", "2026-11-30T12:00:45Z", None);
    app.update(Action::Snapshot(Box::new(gather_at(d, at(45)).await)));
    // A takeover from the console handing the lease over to holder-c.
    let mut entry = takeover_entry(d, at(49), "holder-c");
    entry.then = "handover:holder-c".into();
    app.update(Action::Audit(vec![entry]));
    lease_gen_at(d, "db/", "holder-c", "2026-11-30T12:00:50Z", Some(9));
    app.update(Action::Snapshot(Box::new(gather_at(d, at(50)).await)));

    app.update(Action::Resize(200, 34));
    app.update(Action::ToggleDetail);
    let text = screen_text(&draw(&app, 200, 34));
    for s in [
        "generation    9",
        "hand-over: holder-b → holder-c, generation 8 → 9 (audit: ops@host",
        "after expiry: holder-a → holder-b, generation 7 → 8",
        "first seen: holder-a, generation 7",
    ] {
        assert!(text.contains(s), "{s} missing:\n{text}");
    }
    insta::assert_snapshot!(text);
    // web/: no generation known: `-`, and no generation in its history.
    app.update(Action::Down);
    let text = screen_text(&draw(&app, 200, 34));
    assert!(text.contains("holder-w"), "{text}");
    assert!(text.contains("generation    -"), "{text}");
    assert!(text.contains("first seen: holder-w "), "{text}");
    assert!(!text.contains("generation -"), "{text}");
}

/// Issue 35 trip 5: text cut to fit is marked with `…`, never cut in the
/// middle without a mark: the pod view's box title (a long lock path) and
/// the COMMAND column, the header's targets at 80 columns; the detail pane
/// shows a malformed body whole, wrapped, up to its torn end.
#[tokio::test]
async fn cut_text_is_marked_and_a_torn_body_is_shown_to_its_end() {
    // The pod view at 100 columns: a lock path and a command longer than
    // their room.
    let long_dir = format!("/data/{}", "very-long-directory-name/".repeat(5));
    let command = format!("leasectl writer exec --data-dir {long_dir} -- server --flag");
    let mut root = proc(100, 1, &command, env(Some("1"), None));
    root.opens = vec![0];
    root.holds = vec![0];
    let obs = Observed {
        processes: vec![root],
        locks: vec![ObservedLock {
            path: format!("{long_dir}.writer.lock"),
            holders: vec![100],
            locked: true,
            proc_locks_pids: vec![100],
            state: leasectl::writer::scan::LockFileState::Held,
            state_reason: String::new(),
            deleted: false,
            current: None,
        }],
        alive: [1, 100].into_iter().collect(),
        ..Observed::default()
    };
    let mut app = pod_app(judge(&obs), 100, 30).await;
    app.update(Action::SwitchView);
    let text = screen_text(&draw(&app, 100, 30));
    let title = text
        .lines()
        .find(|l| l.contains(" processes 1/1 "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        title.ends_with("…┐"),
        "the title is cut with a mark: {title}"
    );
    let row = text
        .lines()
        .find(|l| l.contains("leasectl writer exec"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("…"), "the command is cut with a mark: {row}");
    assert!(row.contains("take") && row.contains("holds"), "{row}");

    // The header at 80 columns: the targets with where they go, cut with a mark.
    let dir = tempfile::tempdir().unwrap();
    write_lease(
        dir.path(),
        "torn",
        &format!("{{\"instance_id\":\"{}", "~".repeat(300)),
    );
    let mut snap = gather_at(dir.path(), at(0)).await;
    snap.targets[0].endpoint = "http://127.0.0.1:9000 (region us-east-1, path-style)".into();
    let mut app = App::new(
        vec!["s3://backups-prod/mushroomdb/".parse().unwrap()],
        false,
        Duration::from_secs(5),
        at(0),
    );
    app.update(Action::Resize(80, 30));
    app.update(Action::Snapshot(Box::new(snap)));
    let text = screen_text(&draw(&app, 80, 30));
    let second = text.lines().nth(1).unwrap().trim_end();
    assert!(second.ends_with('…'), "{second}");
    assert!(second.chars().count() <= 80, "{second}");

    // The detail pane at 100 columns: the torn body whole, to its last characters.
    app.update(Action::Resize(100, 30));
    app.update(Action::ToggleDetail);
    let text = screen_text(&draw(&app, 100, 30));
    assert!(text.contains("raw body"), "{text}");
    let marks: usize = text.lines().map(|l| l.matches('~').count()).sum();
    assert_eq!(
        marks, 300,
        "the whole body is shown, to its torn end:\n{text}"
    );
}
