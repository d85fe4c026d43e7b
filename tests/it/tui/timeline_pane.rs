//! The console's timeline pane (`h`, issue 34 §2): its keys (open, zoom,
//! pan, close), drawn into a `TestBackend` with this session's history and a
//! rebuilt timeline, and the rebuilt one read by the write task from a
//! versioned moto bucket.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{self, GatherOptions, OpenTarget};
use leasectl::store::local::LocalStore;
use leasectl::timeline::render::{PrefixTimeline, Sources};
use leasectl::timeline::{Observation, Seen, Source};
use leasectl::tui::action::WriteRequest;
use leasectl::tui::app::{key_action, Action, App, Mode, Rebuilt};

use super::console::screen;
use crate::common::cli::write_lease;
use crate::common::*;

fn at(s: i64) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap() + chrono::Duration::seconds(s)
}

fn rec(id: &str, renewed: chrono::DateTime<Utc>) -> leasectl::bucket::LeaseRecord {
    leasectl::bucket::LeaseRecord {
        instance_id: id.into(),
        acquired_at: renewed,
        renewed_at: renewed,
        ttl_s: 30,
        generation: None,
        released_at: None,
    }
}

/// A LEASE of `holder` renewed at `renewed`, whose Last-Modified is that time.
fn lease_at(dir: &std::path::Path, prefix: &str, holder: &str, renewed: chrono::DateTime<Utc>) {
    write_lease(
        dir,
        prefix,
        &String::from_utf8(rec(holder, renewed).to_body()).unwrap(),
    );
    std::fs::File::options()
        .write(true)
        .open(dir.join(prefix).join("LEASE"))
        .unwrap()
        .set_modified(renewed.into())
        .unwrap();
}

async fn gather_at(dir: &std::path::Path, now: chrono::DateTime<Utc>) -> snapshot::Snapshot {
    let clock: SharedClock = std::sync::Arc::new(ManualClock::new(now));
    let open = vec![OpenTarget {
        target: format!("file://{}/", dir.display()).parse().unwrap(),
        endpoint: "local".into(),
        store: std::sync::Arc::new(LocalStore::open(dir).unwrap()),
    }];
    snapshot::gather(&open, &GatherOptions::default(), &clock).await
}

fn key(app: &mut App, code: KeyCode) {
    if let Some(a) = key_action(app, KeyEvent::new(code, KeyModifiers::NONE)) {
        app.update(a);
    }
}

fn pane(app: &App) -> (u8, u32) {
    let p = app.timeline_pane().expect("the pane is open");
    (p.zoom, p.pan)
}

/// A takeover outcome of `{dir}/db/` by `ops@host` that wrote `holder`'s record.
fn takeover_entry(
    dir: &std::path::Path,
    time: chrono::DateTime<Utc>,
    holder: &str,
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
        written: Some(AuditWritten {
            record: rec(holder, time),
            etag: None,
        }),
        reason: "stuck job".into(),
        exclusion: "conditional".into(),
        forced: true,
        then: "hold".into(),
        outcome: Some("taken".into()),
        writes_safe_from: None,
    }
}

/// `h` opens the pane on the selected prefix and (OPS mode) asks the write
/// task for the rebuilt timeline; `+`/`-` zoom about the middle, `←`/`→` pan
/// within the extent; Esc closes; watch mode opens it without asking.
#[tokio::test]
async fn timeline_pane_keys_open_zoom_pan_close() {
    let dir = tempfile::tempdir().unwrap();
    lease_at(dir.path(), "db", "holder-a", at(-5));
    let mut app = App::new(
        vec!["file:///srv/".parse().unwrap()],
        false,
        Duration::from_secs(5),
        at(0),
    )
    .without_pod();
    app.update(Action::Resize(100, 24));
    app.update(Action::Snapshot(Box::new(
        gather_at(dir.path(), at(0)).await,
    )));

    key(&mut app, KeyCode::Char('h'));
    assert!(matches!(app.mode(), Mode::Timeline(_)), "{:?}", app.mode());
    assert_eq!(pane(&app), (0, 0));
    assert!(
        matches!(app.outbox(), [WriteRequest::ReadTimeline { target: 0, prefix }] if prefix == "db/"),
        "{:?}",
        app.outbox()
    );
    assert!(matches!(
        app.timeline_pane().unwrap().rebuilt,
        Rebuilt::Reading
    ));
    // The whole extent: panning does nothing.
    key(&mut app, KeyCode::Left);
    assert_eq!(pane(&app), (0, 0));
    // Zoom in about the middle: a quarter of the window's width on each side.
    key(&mut app, KeyCode::Char('+'));
    assert_eq!(pane(&app), (1, 2));
    let (s, e) = app.timeline_pane().unwrap().window(at(-400), at(0));
    assert_eq!((s, e), (at(-300), at(-100)));
    key(&mut app, KeyCode::Right);
    key(&mut app, KeyCode::Right);
    key(&mut app, KeyCode::Right);
    assert_eq!(pane(&app), (1, 0), "→ stops at the end");
    assert_eq!(
        app.timeline_pane().unwrap().window(at(-400), at(0)),
        (at(-200), at(0))
    );
    for _ in 0..10 {
        key(&mut app, KeyCode::Left);
    }
    assert_eq!(pane(&app), (1, 4), "← stops at the start");
    assert_eq!(
        app.timeline_pane().unwrap().window(at(-400), at(0)),
        (at(-400), at(-200))
    );
    key(&mut app, KeyCode::Char('='));
    assert_eq!(pane(&app), (2, 10));
    key(&mut app, KeyCode::Char('-'));
    key(&mut app, KeyCode::Char('-'));
    key(&mut app, KeyCode::Char('-'));
    assert_eq!(pane(&app), (0, 0), "- stops at the whole extent");
    // Time and refreshes go on while it is open.
    app.update(Action::Tick(at(1)));
    assert!(matches!(app.mode(), Mode::Timeline(_)));
    key(&mut app, KeyCode::Esc);
    assert!(matches!(app.mode(), Mode::Normal));
    assert!(!app.should_quit());

    // Watch mode: the pane opens with the session's history only.
    let mut watch = App::new(
        vec!["file:///srv/".parse().unwrap()],
        true,
        Duration::from_secs(5),
        at(0),
    )
    .without_pod();
    watch.update(Action::Snapshot(Box::new(
        gather_at(dir.path(), at(0)).await,
    )));
    key(&mut watch, KeyCode::Char('h'));
    assert!(watch.outbox().is_empty());
    assert!(matches!(
        watch.timeline_pane().unwrap().rebuilt,
        Rebuilt::NotRead(_)
    ));
    key(&mut watch, KeyCode::Char('h'));
    assert!(matches!(watch.mode(), Mode::Normal), "h closes it too");
}

/// The pane drawn: one lane per holder, bars, the time without a holder,
/// the overlap, the takeover's mark with its operator — for the session's
/// history and for a rebuilt timeline (derived by `timeline::derive`).
#[tokio::test]
async fn timeline_pane_draws_lanes_gaps_overlaps_and_takeovers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lease_at(d, "db", "holder-a", at(0));
    let mut app = App::new(
        vec!["file:///srv/".parse().unwrap()],
        false,
        Duration::from_secs(5),
        at(0),
    )
    .without_pod();
    app.update(Action::Resize(110, 30));
    app.update(Action::Snapshot(Box::new(gather_at(d, at(0)).await)));
    // holder-a dies; holder-b after its expiry.
    lease_at(d, "db", "holder-b", at(45));
    app.update(Action::Snapshot(Box::new(gather_at(d, at(45)).await)));
    // An audited takeover to holder-c while holder-b is fresh.
    app.update(Action::Audit(vec![takeover_entry(d, at(59), "holder-c")]));
    lease_at(d, "db", "holder-c", at(60));
    app.update(Action::Snapshot(Box::new(gather_at(d, at(60)).await)));
    // Someone writes over holder-c's live lease: nothing audited.
    lease_at(d, "db", "intruder", at(75));
    app.update(Action::Snapshot(Box::new(gather_at(d, at(75)).await)));
    // The LEASE goes; later holder-d takes it.
    std::fs::remove_file(d.join("db").join("LEASE")).unwrap();
    app.update(Action::Snapshot(Box::new(gather_at(d, at(90)).await)));
    lease_at(d, "db", "holder-d", at(105));
    app.update(Action::Snapshot(Box::new(gather_at(d, at(105)).await)));
    app.update(Action::Tick(at(120)));

    key(&mut app, KeyCode::Char('h'));
    let text = screen(&app, 110, 30);
    assert!(text.contains("reading…"), "{text}");
    for s in [
        "holder-a",
        "holder-b",
        "holder-c",
        "intruder",
        "holder-d",
        "(no holder)",
        "▲ops@host",
        "▓",
        "░",
        "OVERLAP",
    ] {
        assert!(text.contains(s), "{s} missing:\n{text}");
    }

    // The rebuilt timeline arrives: versions, derived as `leasectl timeline` does.
    let v = |s: i64, id: &str| Observation {
        at: at(s),
        seen: Seen::Held(rec(id, at(s))),
        source: Source::Version {
            version_id: format!("v{s}"),
            etag: None,
            read: true,
        },
    };
    let obs = [
        v(-30, "holder-a"),
        v(-20, "holder-a"),
        v(-10, "holder-a"),
        v(0, "holder-a"),
        v(45, "holder-b"),
        v(55, "holder-b"),
        v(60, "holder-c"),
        v(70, "holder-c"),
        v(75, "intruder"),
    ];
    let audit = [takeover_entry(d, at(59), "holder-c")];
    let derived = leasectl::timeline::derive(&obs, &audit, at(120));
    let rebuilt = PrefixTimeline {
        url: "file:///srv/".into(),
        key: "db/LEASE".into(),
        versioning: Some(leasectl::store::Versioning::Enabled),
        sources: Sources {
            versions_listed: obs.len(),
            versions_read: obs.len(),
            versions_inferred: 0,
            list_requests: 1,
            recording_lines: 0,
            audit_entries: 1,
        },
        problems: vec![],
        notes: vec![],
        takeovers: leasectl::timeline::takeovers_of(&audit),
        derived,
    };
    app.update(Action::TimelineRead {
        target: 0,
        prefix: "db/".into(),
        timeline: Box::new(rebuilt),
    });
    let text = screen(&app, 110, 30);
    assert!(
        text.contains("rebuilt from the versions (last 24 h: 9 listed, 9 read)"),
        "{text}"
    );
    // Overlaps from both: the forced takeover before holder-b's fence, the intruder.
    assert!(text.matches("OVERLAP").count() >= 3, "{text}");
    insta::assert_snapshot!(text);
    // Zoomed in twice and panned to the start, the axis narrows to a quarter.
    key(&mut app, KeyCode::Char('+'));
    key(&mut app, KeyCode::Char('+'));
    for _ in 0..20 {
        key(&mut app, KeyCode::Left);
    }
    let text = screen(&app, 110, 30);
    assert!(text.contains("11:59:30 → 12:00:07 UTC"), "{text}");
}

/// OPS mode: the write task reads the prefix's versions from a versioned
/// moto bucket (bodies by bisection) and the pane draws the rebuilt lanes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_task_rebuilds_the_timeline_from_versions_on_moto() {
    let (endpoint, b) = Server::Moto(Moto::Conditional).bucket("tlpane").await;
    let client = sdk_client(&endpoint);
    client
        .put_bucket_versioning()
        .bucket(&b)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let now = Utc::now();
    for (i, id) in ["holder-a", "holder-a", "holder-a", "holder-b", "holder-b"]
        .iter()
        .enumerate()
    {
        let r = rec(id, now + chrono::Duration::milliseconds(i as i64));
        put_raw(&client, &b, "db/LEASE", &r.to_body()).await;
    }
    let store = s3_store(&endpoint, &b);
    let url = format!("s3://{b}/");
    let clock = leasectl::clock::SystemClock::shared();
    let open = vec![OpenTarget {
        target: url.parse().unwrap(),
        endpoint: endpoint.clone(),
        store: store.clone(),
    }];
    let snap = snapshot::gather(&open, &GatherOptions::default(), &clock).await;
    let audit = tempfile::tempdir().unwrap();
    let ops = leasectl::tui::ops::Ops {
        targets: vec![leasectl::tui::ops::OpsTarget {
            url: url.clone(),
            endpoint: endpoint.clone(),
            bucket: Some(b.clone()),
            store,
            root: String::new(),
        }],
        audit: leasectl::audit::AuditLog::open(audit.path().join("audit.jsonl")).unwrap(),
        clock: clock.clone(),
    };
    let (tx, mut results) = tokio::sync::mpsc::channel(16);
    let (commands, _task) = ops.start(tx);
    let mut app = App::new(
        vec![url.parse().unwrap()],
        false,
        Duration::from_secs(5),
        Utc::now(),
    )
    .without_pod();
    app.update(Action::Resize(120, 24));
    app.update(Action::Snapshot(Box::new(snap)));
    key(&mut app, KeyCode::Char('h'));
    for c in app.take_writes() {
        commands.send(c).await.unwrap();
    }
    let done = tokio::time::timeout(Duration::from_secs(20), results.recv())
        .await
        .unwrap()
        .unwrap();
    let Action::TimelineRead {
        target, timeline, ..
    } = &done
    else {
        panic!("{done:?}")
    };
    assert_eq!(*target, 0);
    assert!(timeline.problems.is_empty(), "{:?}", timeline.problems);
    assert_eq!(timeline.sources.versions_listed, 5);
    let holders: Vec<&str> = timeline
        .derived
        .tenures
        .iter()
        .map(|t| t.holder.as_str())
        .collect();
    assert_eq!(holders, ["holder-a", "holder-b"]);
    app.update(done);
    let text = screen(&app, 120, 24);
    assert!(
        text.contains("rebuilt from the versions (last 24 h: 5 listed"),
        "{text}"
    );
    assert!(text.contains("holder-b"), "{text}");
}
