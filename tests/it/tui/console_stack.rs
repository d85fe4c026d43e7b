//! Issue 44 item 3: the console's timeline pane was blind on S3 — the
//! request-counting wrapper did not forward `list_versions`/`get_version`,
//! and the trait's default ("keeps no versions") answered. Every read the
//! console makes is run here through the console's own store stack, as
//! `setup::open_targets` builds it (counted; read-only for the gatherers,
//! writable for the write task), against a versioned moto bucket: each
//! answers as the bucket does, each is counted, and the timeline pane shows
//! the versions read, the holders and the overlap.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use leasectl::snapshot::{self, GatherOptions};
use leasectl::store::{Counters, ObjectRead};
use leasectl::tui::action::Action;
use leasectl::tui::app::{key_action, App};

use super::console::screen;
use crate::common::*;

async fn versioned_bucket(test: &str) -> (String, String) {
    let (endpoint, b) = Server::Moto(Moto::Conditional).bucket(test).await;
    sdk_client(&endpoint)
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
    (endpoint, b)
}

fn record(id: &str, generation: u64) -> Vec<u8> {
    let now = Utc::now();
    leasectl::bucket::LeaseRecord {
        instance_id: id.into(),
        acquired_at: now,
        renewed_at: now,
        ttl_s: 30,
        generation: Some(generation),
        released_at: None,
    }
    .to_body()
}

/// Every read of [`ObjectRead`] through `stack` answers as `direct` (the
/// bucket's own store) does; returns the requests it should have counted
/// and how many of them were listings.
async fn reads_as_the_bucket(stack: &dyn ObjectRead, direct: &dyn ObjectRead) -> (u64, u64) {
    let key = "db/LEASE";
    assert_eq!(stack.describe(), direct.describe());
    let (a, b) = (
        stack.list("").await.unwrap(),
        direct.list("").await.unwrap(),
    );
    assert_eq!(a.prefixes, b.prefixes);
    let (a, b) = (
        stack.list_page("", None).await.unwrap(),
        direct.list_page("", None).await.unwrap(),
    );
    assert_eq!((a.0.prefixes, a.1), (b.0.prefixes, b.1));
    let (a, b) = (
        stack.get(key, None).await.unwrap(),
        direct.get(key, None).await.unwrap(),
    );
    assert_eq!((a.body, a.meta), (b.body, b.meta));
    assert_eq!(
        stack.sample_keys("").await.unwrap(),
        direct.sample_keys("").await.unwrap()
    );
    let (a, b) = (
        stack.list_versions(key).await.unwrap(),
        direct.list_versions(key).await.unwrap(),
    );
    assert_eq!((a.versioning, &a.versions), (b.versioning, &b.versions));
    assert_eq!(a.versions.len(), 5, "{a:?}");
    let first = &a.versions[0].version_id;
    let (x, y) = (
        stack.get_version(key, first).await.unwrap(),
        direct.get_version(key, first).await.unwrap(),
    );
    assert_eq!((x.body, x.meta), (y.body, y.meta));
    assert_eq!(stack.has_clock(), direct.has_clock());
    assert_eq!(stack.endpoint_info(), direct.endpoint_info());
    assert!(stack.unavailable().is_none() && direct.unavailable().is_none());
    assert!(stack.server_offset().is_some(), "the clock of the answers");
    assert_eq!(stack.server_clock_problem(), direct.server_clock_problem());
    // list, list_page, sample_keys and the versions' listing are listings.
    let lists = 3 + a.requests;
    (lists + 2, lists)
}

/// The console's stack, read for read, then the console itself: its gather
/// through the read side, its write task's timeline through the writable
/// side; the pane draws what the versions say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_read_goes_through_its_store_stack() {
    let (endpoint, b) = versioned_bucket("tl-console-stack").await;
    let client = sdk_client(&endpoint);
    // holder-a renews twice; holder-b writes over its fresh record.
    for (id, g) in [
        ("holder-a", 1),
        ("holder-a", 1),
        ("holder-a", 1),
        ("holder-b", 2),
        ("holder-b", 2),
    ] {
        put_raw(&client, &b, "db/LEASE", &record(id, g)).await;
    }
    let timeout = Duration::from_secs(5);
    let connector = leasectl::target::Connector::with_config(
        sdk_config(&endpoint, timeout, 2),
        leasectl::store::s3::S3Options {
            path_style: true,
            request_timeout: Some(timeout),
            ..Default::default()
        },
    );
    let url = format!("s3://{b}/");
    let targets = [url.parse().unwrap()];
    let counters = Arc::new(Counters::default());
    let opened = leasectl::setup::open_targets(&connector, &targets, &counters, true).await;
    let direct = s3_store(&endpoint, &b);

    // Read for read: the read side (read-only, counted) and the writable
    // side (counted) answer as the bucket, and count every request.
    let mut want = (0, 0);
    let read_side = opened.read[0].store.clone();
    let write_side: Arc<dyn ObjectRead> = opened.writable[0].clone();
    for stack in [read_side, write_side] {
        let (requests, lists) = reads_as_the_bucket(stack.as_ref(), direct.as_ref()).await;
        want = (want.0 + requests, want.1 + lists);
        let c = counters.counts();
        assert_eq!((c.requests, c.lists, c.errors), (want.0, want.1, 0));
    }

    // The console: a gather through its read side, `h` on db/, the write
    // task reading the timeline through its writable side.
    let clock = leasectl::clock::SystemClock::shared();
    let snap = snapshot::gather(&opened.read, &GatherOptions::default(), &clock).await;
    let audit = tempfile::tempdir().unwrap();
    let ops = leasectl::tui::ops::Ops {
        targets: leasectl::tui::ops_targets(&opened.read, opened.writable.clone()),
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
    app.update(Action::Resize(120, 30));
    app.update(Action::Snapshot(Box::new(snap)));
    let before = counters.counts();
    if let Some(a) = key_action(&app, KeyEvent::new(KeyCode::Char('h'), KeyModifiers::NONE)) {
        app.update(a);
    }
    for c in app.take_writes() {
        commands.send(c).await.unwrap();
    }
    let done = tokio::time::timeout(Duration::from_secs(30), results.recv())
        .await
        .unwrap()
        .unwrap();
    let Action::TimelineRead { timeline, .. } = &done else {
        panic!("{done:?}")
    };
    assert!(timeline.problems.is_empty(), "{:?}", timeline.problems);
    assert!(
        !timeline
            .notes
            .iter()
            .any(|n| n.contains("keeps no versions")),
        "{:?}",
        timeline.notes
    );
    let s = &timeline.sources;
    assert_eq!(
        (s.versions_listed, s.versions_read, s.versions_inferred),
        (5, 5, 0)
    );
    let holders: Vec<&str> = timeline
        .derived
        .tenures
        .iter()
        .map(|t| t.holder.as_str())
        .collect();
    assert_eq!(holders, ["holder-a", "holder-b"]);
    assert_eq!(timeline.derived.overlaps.len(), 1);
    // The write task's reads were counted: the listing and five GETs.
    let after = counters.counts();
    assert_eq!(after.requests - before.requests, s.list_requests + 5);
    app.update(done);
    let text = screen(&app, 120, 30);
    for shown in [
        "rebuilt from the versions (last 24 h: 5 listed, 5 read)",
        "holder-a",
        "holder-b",
        "OVERLAP (versions)",
    ] {
        assert!(text.contains(shown), "{shown} missing:\n{text}");
    }
    assert!(!text.contains("keeps no versions"), "{text}");
}
