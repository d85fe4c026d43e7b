//! Incremental refreshes (issue 27): a console fed only the rows a refresh
//! changed ([`Refresh::Rows`], applied in place) shows exactly what a
//! console fed a whole new snapshot at every refresh shows — the same
//! document, the same screen, the same holder history — over a real
//! directory store whose LEASEs are renewed, taken over, removed, made
//! malformed or unreadable, and whose prefixes come and go, with a clock
//! that moves only when told.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{GatherOptions, Gatherer, OpenTarget, Refresh};
use leasectl::store::local::LocalStore;
use leasectl::tui::app::{Action, App};

use crate::common;
use crate::tui::console::screen;

fn t0() -> DateTime<Utc> {
    "2026-11-30T12:00:00Z".parse().unwrap()
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Writes a LEASE as a holder's atomic PUT would (write, then rename).
fn write_body(dir: &Path, prefix: &str, body: &str) {
    let d = dir.join(prefix);
    std::fs::create_dir_all(&d).unwrap();
    let lease = d.join("LEASE");
    if lease.is_dir() {
        std::fs::remove_dir(&lease).unwrap();
    }
    let tmp = d.join(".LEASE.tmp");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(tmp, lease).unwrap();
}

fn write_generation_lease(
    dir: &Path,
    prefix: &str,
    holder: &str,
    generation: u64,
    renewed: DateTime<Utc>,
) {
    write_body(
        dir,
        prefix,
        &format!(
            r#"{{"instance_id":"{holder}","acquired_at":"{}","renewed_at":"{}","ttl_s":30,"generation":{generation}}}"#,
            stamp(t0()),
            stamp(renewed)
        ),
    );
}

fn app(now: DateTime<Utc>) -> App {
    let mut a = App::new(
        vec!["file:///srv/backups/".parse().unwrap()],
        true,
        Duration::from_secs(5),
        now,
    )
    .without_pod();
    a.update(Action::Resize(160, 80));
    a
}

/// Every change the history holds, by prefix, as text.
fn history(app: &App) -> Vec<String> {
    app.session()
        .history()
        .iter()
        .map(|(k, h)| format!("{k:?} {} {:?}", h.count, h.changes))
        .collect()
}

/// A small deterministic generator (the same run every time).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[tokio::test]
async fn a_console_fed_changed_rows_shows_what_one_fed_whole_snapshots_shows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut names: Vec<String> = (0..60).map(|i| format!("db{i:03}")).collect();
    for (i, p) in names.iter().enumerate() {
        match i % 6 {
            5 => std::fs::create_dir_all(dir.join(p)).unwrap(),
            _ => write_generation_lease(dir, p, &format!("h-{p}"), 1, t0()),
        }
    }
    let clock = Arc::new(ManualClock::new(t0()));
    let shared: SharedClock = clock.clone();
    let open = vec![OpenTarget {
        target: common::file_url(dir).parse().unwrap(),
        endpoint: "local".into(),
        store: Arc::new(LocalStore::open(dir).unwrap()),
    }];
    // No schedule: both read every LEASE at every gather, so at each
    // instant they saw the same store; one lists every 4th gather.
    let mut incremental = Gatherer::new(open.clone(), GatherOptions::default(), 4);
    let mut whole = Gatherer::new(open, GatherOptions::default(), 4);
    let (mut a, mut b) = (app(t0()), app(t0()));
    let (mut rows, mut snapshots, mut unchanged) = (0, 0, 0);
    let mut rng = Lcg(7);
    let mut generation = 2;
    for step in 0..80 {
        let now = shared.wall();
        // What holders and operators did since the last refresh.
        for _ in 0..1 + rng.below(5) {
            let p = names[rng.below(names.len())].clone();
            generation += 1;
            match rng.below(8) {
                0..=2 => write_generation_lease(dir, &p, &format!("h-{p}"), 1, now),
                3 => write_generation_lease(dir, &p, &format!("other-{step}"), generation, now),
                4 => {
                    let _ = std::fs::remove_file(dir.join(&p).join("LEASE"));
                }
                5 => write_body(dir, &p, "{\"instance_id\": 42"),
                6 => {
                    // A LEASE that cannot be read: a directory in its place.
                    let lease = dir.join(&p).join("LEASE");
                    if lease.is_file() {
                        std::fs::remove_file(&lease).unwrap();
                    }
                    std::fs::create_dir_all(&lease).unwrap();
                }
                _ => write_generation_lease(
                    dir,
                    &p,
                    &format!("h-{p}"),
                    1,
                    now - chrono::Duration::seconds(40),
                ),
            }
        }
        if step % 9 == 4 {
            let p = format!("new{step:03}");
            write_generation_lease(dir, &p, &format!("h-{p}"), 1, now);
            names.push(p);
        }
        if step % 13 == 6 {
            let p = names.remove(rng.below(names.len()));
            std::fs::remove_dir_all(dir.join(&p)).unwrap();
        }

        match incremental.gather_refresh(&shared, None).await {
            Refresh::Snapshot(s) => {
                snapshots += 1;
                a.update(Action::Snapshot(s));
            }
            Refresh::Rows(d) => {
                rows += 1;
                assert!(!d.is_empty(), "step {step}: a delta names a row");
                a.update(Action::Rows(Box::new(d)));
            }
            Refresh::Unchanged => {
                unchanged += 1;
                a.update(Action::Unchanged(now));
            }
        }
        b.update(Action::Snapshot(Box::new(whole.gather(&shared).await)));
        for app in [&mut a, &mut b] {
            app.update(Action::Tick(now + chrono::Duration::seconds(1)));
        }

        let (ja, jb) = (
            serde_json::to_value(a.snapshot().unwrap()).unwrap(),
            serde_json::to_value(b.snapshot().unwrap()).unwrap(),
        );
        assert_eq!(ja, jb, "step {step}: the documents differ");
        assert_eq!(
            screen(&a, 160, 80),
            screen(&b, 160, 80),
            "step {step}: the screens differ"
        );
        assert_eq!(
            history(&a),
            history(&b),
            "step {step}: the histories differ"
        );
        assert_eq!(
            a.session().first_seen(),
            b.session().first_seen(),
            "step {step}: ETags seen since"
        );
        clock.advance(Duration::from_secs(5));
    }
    eprintln!("80 refreshes: {rows} deltas, {snapshots} snapshots, {unchanged} unchanged");
    // Most refreshes changed rows only; listings that found new or
    // vanished prefixes, and the first gather, came whole.
    assert!(rows >= 50, "{rows} deltas");
    assert!(snapshots >= 7, "{snapshots} whole snapshots");
    let changes: u64 = a.session().history().iter().map(|(_, h)| h.count).sum();
    assert!(changes >= 40, "{changes} holder changes seen");
}
