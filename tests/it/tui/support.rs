//! The tools the console's tests share (issue 49 §4), each defined once:
//! times and LEASE bodies of the fixed test clock, a seeded local store, a
//! console on it, keys, the screen as text, and the write task of OPS mode.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{self, GatherOptions, OpenTarget};
use leasectl::store::local::LocalStore;
use leasectl::tui::action::WriteRequest;
use leasectl::tui::app::{key_action, Action, App};
use leasectl::tui::ui::render;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

pub(crate) use crate::common::cli::write_lease;

/// `s` seconds after 2026-11-30 12:00:00 UTC (before it when negative): the
/// console tests' clock.
pub(crate) fn at(s: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap() + chrono::Duration::seconds(s)
}

/// A LEASE body of `id` (JSON-escaped, so any text is a valid holder),
/// acquired at 11:00:00Z, renewed at `renewed` (RFC 3339), TTL `ttl` seconds.
pub(crate) fn rec(id: &str, renewed: &str, ttl: u64) -> String {
    format!(
        r#"{{"instance_id":{},"acquired_at":"2026-11-30T11:00:00Z","renewed_at":"{renewed}","ttl_s":{ttl}}}"#,
        serde_json::to_string(id).unwrap()
    )
}

/// The record of `id` acquired and renewed at `renewed`, TTL 30 s.
pub(crate) fn lease_record(id: &str, renewed: DateTime<Utc>) -> leasectl::bucket::LeaseRecord {
    leasectl::bucket::LeaseRecord {
        instance_id: id.into(),
        acquired_at: renewed,
        renewed_at: renewed,
        ttl_s: 30,
        generation: None,
        released_at: None,
    }
}

/// Writes `body` as `dir/prefix/LEASE` with the Last-Modified `modified`.
pub(crate) fn lease_modified(
    dir: &std::path::Path,
    prefix: &str,
    body: &str,
    modified: DateTime<Utc>,
) {
    write_lease(dir, prefix, body);
    std::fs::File::options()
        .write(true)
        .open(dir.join(prefix).join("LEASE"))
        .unwrap()
        .set_modified(modified.into())
        .unwrap();
}

/// A LEASE of `holder` ([`rec`], TTL 30 s) renewed at `renewed` (RFC 3339),
/// whose Last-Modified is that time (a deterministic screen).
pub(crate) fn lease_at(dir: &std::path::Path, prefix: &str, holder: &str, renewed: &str) {
    lease_modified(
        dir,
        prefix,
        &rec(holder, renewed, 30),
        renewed.parse().unwrap(),
    );
}

/// A LEASE of `holder` ([`lease_record`]: acquired and renewed at `renewed`)
/// whose Last-Modified is that time.
pub(crate) fn record_at(dir: &std::path::Path, prefix: &str, holder: &str, renewed: DateTime<Utc>) {
    let body = String::from_utf8(lease_record(holder, renewed).to_body()).unwrap();
    lease_modified(dir, prefix, &body, renewed);
}

/// The store most console tests look at: fresh `orders/`, stale `billing/`,
/// suspect `events/` (stamped two hours ahead), malformed `ledger/` and an
/// `archive/` with no LEASE, all last modified 5 s before [`at`]`(0)`.
pub(crate) fn seed(dir: &std::path::Path) {
    let w = |p: &str, body: &str| lease_modified(dir, p, body, at(-5));
    w("orders", &rec("holder-orders", "2026-11-30T11:59:50Z", 30));
    w(
        "billing",
        &rec("holder-billing", "2026-11-30T11:55:00Z", 30),
    );
    w("events", &rec("clock-ahead", "2026-11-30T14:00:00Z", 30));
    w("ledger", "{\"instance_id\": 42");
    std::fs::create_dir_all(dir.join("archive")).unwrap();
}

/// One snapshot of the local store `dir` judged at `now`.
pub(crate) async fn gather_at(dir: &std::path::Path, now: DateTime<Utc>) -> snapshot::Snapshot {
    let clock: SharedClock = std::sync::Arc::new(ManualClock::new(now));
    let open = vec![OpenTarget {
        target: format!("file://{}/", dir.display()).parse().unwrap(),
        endpoint: "local".into(),
        store: std::sync::Arc::new(LocalStore::open(dir).unwrap()),
    }];
    snapshot::gather(&open, &GatherOptions::default(), &clock).await
}

/// A console (no pod view) on `dir` read at [`at`]`(0)`, titled
/// `file:///srv/backups/`, on a `w`×`h` terminal.
pub(crate) async fn app(dir: &std::path::Path, read_only: bool, w: u16, h: u16) -> App {
    let snap = gather_at(dir, at(0)).await;
    let mut app = console("file:///srv/backups/", read_only, at(0), w, h);
    app.update(Action::Snapshot(Box::new(snap)));
    app
}

/// A console (with its pod view) titled `title`, now, showing a snapshot of
/// `open` read on the system clock.
pub(crate) async fn console_of(open: &[OpenTarget], title: &str) -> App {
    let clock = leasectl::clock::SystemClock::shared();
    let snap = snapshot::gather(open, &GatherOptions::default(), &clock).await;
    let mut app = App::new(
        vec![title.parse().unwrap()],
        false,
        Duration::from_secs(5),
        Utc::now(),
    );
    app.update(Action::Snapshot(Box::new(snap)));
    app
}

/// A console titled `target` (refreshed every 5 s) at `now`, without the
/// pod view, on a `w`×`h` terminal: nothing read yet.
pub(crate) fn console(target: &str, read_only: bool, now: DateTime<Utc>, w: u16, h: u16) -> App {
    let mut app = App::new(
        vec![target.parse().unwrap()],
        read_only,
        Duration::from_secs(5),
        now,
    )
    .without_pod();
    app.update(Action::Resize(w, h));
    app
}

/// A console ([`app`]) on a new directory [`seed`]ed: the directory (kept
/// while the test runs) and the console.
pub(crate) async fn seeded(read_only: bool, w: u16, h: u16) -> (tempfile::TempDir, App) {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let a = app(dir.path(), read_only, w, h).await;
    (dir, a)
}

/// Presses `code` (no modifier) and applies what it maps to.
pub(crate) fn key(app: &mut App, code: KeyCode) {
    if let Some(a) = key_action(app, KeyEvent::new(code, KeyModifiers::NONE)) {
        app.update(a);
    }
}

/// Types `s`, a key per character.
pub(crate) fn typed(app: &mut App, s: &str) {
    for c in s.chars() {
        key(app, KeyCode::Char(c));
    }
}

/// `app` drawn on a `w`×`h` `TestBackend`.
pub(crate) fn draw(app: &App, w: u16, h: u16) -> TestBackend {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render(app, f)).unwrap();
    t.backend().clone()
}

/// The text of a backend's buffer, one line per row.
pub(crate) fn backend_text(b: &TestBackend) -> String {
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

/// The text of `app` drawn on a `w`×`h` screen, one line per row.
pub(crate) fn screen(app: &App, w: u16, h: u16) -> String {
    backend_text(&draw(app, w, h))
}

/// The prefix of the selected row.
pub(crate) fn selected_prefix(app: &App) -> String {
    app.selected_lease().unwrap().1.prefix.clone()
}

/// Selects the row of `prefix` with the keys (Home, then Down), or panics.
pub(crate) fn select(app: &mut App, prefix: &str) {
    key(app, KeyCode::Home);
    for _ in 0..app.row_count() {
        if selected_prefix(app) == prefix {
            return;
        }
        key(app, KeyCode::Down);
    }
    assert_eq!(selected_prefix(app), prefix);
}

/// Selects `prefix`'s row, opens the takeover dialog (`t`) and types
/// `reason` (the dialog starts in its reason field).
pub(crate) fn open_takeover(app: &mut App, prefix: &str, reason: &str) {
    select(app, prefix);
    key(app, KeyCode::Char('t'));
    typed(app, reason);
}

/// The write task of a console on the local store `dir` (as `leasectl`
/// starts it in OPS mode), on the test's clock: its command sender and the
/// actions it answers with.
pub(crate) fn ops_on(
    dir: &std::path::Path,
    audit: &std::path::Path,
) -> (
    tokio::sync::mpsc::Sender<WriteRequest>,
    tokio::sync::mpsc::Receiver<Action>,
) {
    let clock: SharedClock = std::sync::Arc::new(ManualClock::new(at(0)));
    let ops = leasectl::tui::ops::Ops {
        targets: vec![leasectl::tui::ops::OpsTarget {
            url: "file:///srv/backups/".into(),
            endpoint: "local".into(),
            bucket: None,
            store: std::sync::Arc::new(LocalStore::open(dir).unwrap()),
            root: String::new(),
        }],
        audit: leasectl::audit::AuditLog::open(audit).unwrap(),
        clock,
    };
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let (commands, _task) = ops.start(tx);
    (commands, rx)
}

/// Hands the console's queued writes to the write task, as the event loop does.
pub(crate) async fn pump(app: &mut App, commands: &tokio::sync::mpsc::Sender<WriteRequest>) {
    for c in app.take_writes() {
        commands.send(c).await.unwrap();
    }
}

/// The write task's next answer, waited for up to 20 s.
pub(crate) async fn answer(results: &mut tokio::sync::mpsc::Receiver<Action>) -> Action {
    tokio::time::timeout(Duration::from_secs(20), results.recv())
        .await
        .unwrap()
        .unwrap()
}

/// Everything under `dir`, relative, sorted.
pub(crate) fn tree(dir: &std::path::Path) -> Vec<String> {
    fn walk(root: &std::path::Path, d: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(root).unwrap().display().to_string());
            if p.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The record of `holder` ([`rec`]: acquired 11:00:00Z, renewed 12:00:50Z,
/// TTL 30 s) as a takeover wrote it.
pub(crate) fn taken_record(holder: &str) -> leasectl::bucket::LeaseRecord {
    serde_json::from_str(&rec(holder, "2026-11-30T12:00:50Z", 30)).unwrap()
}

/// A takeover outcome of `{dir}/db/` at `time` as the console writes it:
/// `record` written, for `reason`.
pub(crate) fn takeover_entry(
    dir: &std::path::Path,
    time: DateTime<Utc>,
    record: leasectl::bucket::LeaseRecord,
    reason: &str,
) -> leasectl::audit::AuditEntry {
    use leasectl::audit::{AuditEntry, AuditObserved, AuditTarget, AuditWritten};
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
        reason: reason.into(),
        exclusion: "conditional".into(),
        forced: true,
        then: "hold".into(),
        outcome: Some("taken".into()),
        writes_safe_from: None,
    }
}
