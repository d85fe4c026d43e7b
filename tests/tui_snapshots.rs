//! The console drawn into a `TestBackend`: every state, hostile text escaped,
//! scrolling, a terminal too small.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{self, GatherOptions, OpenTarget};
use leasectl::store::local::LocalStore;
use leasectl::tui::app::{Action, App};
use leasectl::tui::ui::render;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn at(s: u32) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, s).unwrap()
}

fn write_lease(dir: &std::path::Path, prefix: &str, body: &str) {
    let d = dir.join(prefix);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("LEASE"), body).unwrap();
}

fn rec(id: &str, renewed: &str, ttl: u64) -> String {
    format!(
        r#"{{"instance_id":{},"acquired_at":"2026-11-30T11:00:00Z","renewed_at":"{renewed}","ttl_s":{ttl}}}"#,
        serde_json::to_string(id).unwrap()
    )
}

async fn app_on(dir: &std::path::Path, now: chrono::DateTime<Utc>) -> App {
    let clock = ManualClock::new(now);
    let shared: SharedClock = std::sync::Arc::new(clock);
    let store = std::sync::Arc::new(LocalStore::open(dir).unwrap());
    let target: leasectl::target::Target = format!("file://{}/", dir.display()).parse().unwrap();
    let open = vec![OpenTarget {
        target,
        endpoint: "local".into(),
        store,
    }];
    let snap = snapshot::gather(&open, &GatherOptions::default(), &shared).await;
    let mut app = App::new(
        vec!["file:///demo/".into()],
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
    app.update(Action::Resize(100, 14));
    let backend = draw(&app, 100, 14);
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
    assert_eq!(app.selected, 199);
    let text = screen_text(&draw(&app, 80, 20));
    assert!(text.contains("p199") && !text.contains("p000"), "{text}");
    app.update(Action::PageUp);
    assert_eq!(app.selected, 199 - app.visible_rows());
    app.update(Action::Home);
    let text = screen_text(&draw(&app, 80, 20));
    assert!(text.contains("p000") && text.contains("leases 1/200"));
    app.update(Action::Up);
    assert_eq!(app.selected, 0);
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
