//! The console's tick judges only the rows on screen and those whose verdict
//! is due (`tui::app::judging`); every other row must still show, at every
//! tick, the verdict a whole judgement gives. Checked on a real directory
//! store of 400 prefixes whose leases expire, one after another, over the
//! 90 s the test ticks through, with leases stamped in the future (suspect,
//! then fresh, then stale), generations ahead of the clock, malformed and
//! absent LEASEs, while the view scrolls and is sorted by age.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use leasectl::bucket::LeaseState;
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{self, GatherOptions, OpenTarget, Snapshot};
use leasectl::store::local::LocalStore;
use leasectl::tui::app::{key_action, Action, App, SortKey};

fn at(s: i64) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap() + chrono::Duration::seconds(s)
}

fn body(i: usize) -> Option<String> {
    let rec = |renewed: chrono::DateTime<Utc>, ttl: u64, generation: Option<u64>| {
        let g = generation
            .map(|g| format!(r#","generation":{g}"#))
            .unwrap_or_default();
        Some(format!(
            r#"{{"instance_id":"holder-{i}","acquired_at":"2026-11-30T11:00:00Z","renewed_at":"{}","ttl_s":{ttl}{g}}}"#,
            renewed.to_rfc3339()
        ))
    };
    let spread = (i as i64 * 7) % 90;
    match i % 10 {
        // Fresh, expiring at every second of the 90 s.
        0..=4 => rec(at(spread - 30), 30, None),
        // Long leases: fresh throughout.
        5 => rec(at(-spread), 3600, None),
        // Stamped in the future: suspect, then fresh, then stale.
        6 => rec(at(40 + spread / 3), 30, None),
        // A generation an hour and more ahead of the clock.
        7 => rec(
            at(spread - 30),
            30,
            Some(at(7300).timestamp_micros() as u64),
        ),
        8 => Some("{\"instance_id\": 42".into()),
        _ => None,
    }
}

fn key(app: &mut App, code: KeyCode) {
    if let Some(a) = key_action(app, KeyEvent::new(code, KeyModifiers::NONE)) {
        app.update(a);
    }
}

/// Every row's verdict, and the rows on screen's ages, against `whole`.
fn assert_judged_as_whole(app: &App, whole: &Snapshot, tick: i64) {
    let s = app.snapshot().unwrap();
    let shown = app.rows_in_view();
    for (t, w) in s.targets.iter().zip(&whole.targets) {
        for (p, q) in t.prefixes.iter().zip(&w.prefixes) {
            assert_eq!(
                (p.state, &p.problem, p.age_unknown),
                (q.state, &q.problem, q.age_unknown),
                "{} at tick {tick}",
                p.prefix
            );
            if shown.iter().any(|(_, k)| *k == p.prefix) {
                assert_eq!(
                    (p.age_s, p.expires_in_s),
                    (q.age_s, q.expires_in_s),
                    "{} (on screen) at tick {tick}",
                    p.prefix
                );
            }
        }
    }
}

#[tokio::test]
async fn a_tick_gives_every_row_the_verdict_of_a_whole_judgement() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..400 {
        let p = dir.path().join(format!("db{i:03}"));
        std::fs::create_dir_all(&p).unwrap();
        if let Some(b) = body(i) {
            std::fs::write(p.join("LEASE"), b).unwrap();
        }
    }
    let clock: SharedClock = std::sync::Arc::new(ManualClock::new(at(0)));
    let open = vec![OpenTarget {
        target: format!("file://{}/", dir.path().display()).parse().unwrap(),
        endpoint: "local".into(),
        store: std::sync::Arc::new(LocalStore::open(dir.path()).unwrap()),
    }];
    let snap = snapshot::gather(&open, &GatherOptions::default(), &clock).await;
    let mut app = App::new(
        vec!["file:///x/".parse().unwrap()],
        true,
        Duration::from_secs(5),
        at(0),
    )
    .without_pod();
    app.update(Action::Resize(160, 40));
    app.update(Action::Snapshot(Box::new(snap)));
    let mut flips = 0;
    let mut before: Vec<LeaseState> = Vec::new();
    for tick in 1..=90 {
        app.update(Action::Tick(at(tick)));
        let mut whole = app.snapshot().cloned().unwrap();
        whole.rejudge(at(tick));
        assert_judged_as_whole(&app, &whole, tick);
        let states: Vec<LeaseState> = whole.targets[0].prefixes.iter().map(|p| p.state).collect();
        flips += states.iter().zip(&before).filter(|(a, b)| a != b).count();
        before = states;
        // Move the view now and then: rows come on screen with old ages.
        if tick % 7 == 0 {
            key(&mut app, KeyCode::PageDown);
        }
        if tick % 30 == 0 {
            // Sorted by age (anew: `s` cycles the columns): every row
            // judged at this instant, in order.
            key(&mut app, KeyCode::Char('s'));
            while app.leases().sort() != SortKey::Age {
                key(&mut app, KeyCode::Char('s'));
            }
            let ages: Vec<f64> = (0..app.row_count())
                .filter_map(|i| app.lease_row(i))
                .filter_map(|(_, p)| p.age_s)
                .collect();
            assert!(
                ages.windows(2).all(|w| w[0] >= w[1]),
                "sorted by age at tick {tick}"
            );
            let s = app.snapshot().unwrap();
            for (p, q) in s.targets[0].prefixes.iter().zip(&whole.targets[0].prefixes) {
                assert_eq!(
                    p.age_s, q.age_s,
                    "{} after the sort at tick {tick}",
                    p.prefix
                );
            }
            key(&mut app, KeyCode::Home);
        }
    }
    // The fixture did what it is for: many verdicts changed off screen.
    assert!(flips >= 150, "only {flips} verdicts changed");
}
