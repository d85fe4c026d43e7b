//! Tests of the session's ETag watch (`super`): how long each row's ETag
//! was seen unchanged, which a suspect or malformed record's takeover waits on.

use super::*;
use crate::bucket::Observed;
use crate::snapshot::delta::TargetDelta;
use crate::snapshot::{ReaderClock, TargetReport, SCHEMA_VERSION};

fn at(s: i64) -> DateTime<Utc> {
    "2026-01-01T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + chrono::Duration::seconds(s)
}

/// A malformed row for `prefix` (an object with ETag `etag`), or none.
fn row(prefix: &str, etag: Option<&str>, now: DateTime<Utc>) -> PrefixReport {
    let observed = match etag {
        Some(e) => Observed::Present {
            etag: Some(e.into()),
            last_modified: Some(now),
            record: Err(("not JSON".into(), "{".into())),
        },
        None => Observed::Absent,
    };
    PrefixReport::new(prefix.into(), observed, now)
}

fn target(url: &str, rows: Vec<PrefixReport>) -> TargetReport {
    TargetReport {
        url: url.into(),
        endpoint: "local".into(),
        endpoint_url: None,
        region: None,
        addressing_style: None,
        bucket: None,
        error: None,
        errors: Vec::new(),
        prefixes: rows,
        server_offset_s: None,
        server_offset_error_s: None,
        server_clock_note: None,
        deeper_leases: None,
    }
}

fn snap(now: DateTime<Utc>, targets: Vec<TargetReport>) -> Snapshot {
    Snapshot {
        schema_version: SCHEMA_VERSION,
        generated_at: now,
        reader_clock: ReaderClock {
            now,
            server_offset_s: None,
            server_offset_error_s: None,
        },
        targets,
        pod: Default::default(),
        pod_error: None,
        audit_log: None,
    }
}

fn delta(now: DateTime<Utc>, index: usize, rows: Vec<(&str, RowUpdate)>) -> Delta {
    Delta {
        generated_at: now,
        targets: vec![TargetDelta {
            index,
            rows: rows.into_iter().map(|(p, u)| (p.to_owned(), u)).collect(),
            server_offset_s: None,
            server_offset_error_s: None,
            server_clock_note: None,
        }],
    }
}

/// Seconds the session has watched the row `prefix` of target `t`.
fn watched(s: &Session, t: usize, prefix: &str) -> u64 {
    let snap = s.snapshot().unwrap();
    let p = snap.targets[t]
        .prefixes
        .iter()
        .find(|p| p.prefix == prefix)
        .unwrap();
    s.watched_for(p).as_secs()
}

#[test]
fn a_whole_snapshot_carries_the_watch_of_an_unchanged_etag_and_restarts_a_changed_one() {
    let mut s = Session::new(at(0));
    let rows = |now, b| {
        vec![
            row("a/", Some("e1"), now),
            row("b/", Some(b), now),
            row("c/", None, now),
        ]
    };
    s.apply_snapshot(snap(at(0), vec![target("file:///x/", rows(at(0), "e2"))]));
    assert_eq!(watched(&s, 0, "a/"), 0);
    s.apply_snapshot(snap(at(10), vec![target("file:///x/", rows(at(10), "e2"))]));
    assert_eq!(
        (
            watched(&s, 0, "a/"),
            watched(&s, 0, "b/"),
            watched(&s, 0, "c/")
        ),
        (10, 10, 10)
    );
    s.apply_snapshot(snap(at(25), vec![target("file:///x/", rows(at(25), "e3"))]));
    assert_eq!(
        (
            watched(&s, 0, "a/"),
            watched(&s, 0, "b/"),
            watched(&s, 0, "c/")
        ),
        (25, 0, 25)
    );
    // A row missing from a snapshot (unread, or not listed) is watched anew.
    s.apply_snapshot(snap(
        at(30),
        vec![target("file:///x/", vec![row("a/", Some("e1"), at(30))])],
    ));
    s.apply_snapshot(snap(at(40), vec![target("file:///x/", rows(at(40), "e3"))]));
    assert_eq!(
        (
            watched(&s, 0, "a/"),
            watched(&s, 0, "b/"),
            watched(&s, 0, "c/")
        ),
        (40, 0, 0)
    );
}

#[test]
fn the_same_lease_key_under_two_targets_is_watched_apart() {
    let mut s = Session::new(at(0));
    let two = |now, e: &str| {
        vec![
            target("s3://one/", vec![row("db/", Some("e1"), now)]),
            target("s3://two/", vec![row("db/", Some(e), now)]),
        ]
    };
    s.apply_snapshot(snap(at(0), two(at(0), "e1")));
    s.apply_snapshot(snap(at(20), two(at(20), "e9")));
    assert_eq!((watched(&s, 0, "db/"), watched(&s, 1, "db/")), (20, 0));
    let seen = s.first_seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[&("s3://two/".to_owned(), "db/LEASE".to_owned())],
        (Some("e9".to_owned()), at(20))
    );
}

#[test]
fn a_delta_carries_the_watch_of_the_rows_it_replaces_and_an_unread_row_starts_again() {
    let mut s = Session::new(at(0));
    let rows = vec![
        row("a/", Some("e1"), at(0)),
        row("b/", Some("e2"), at(0)),
        row("c/", Some("e3"), at(0)),
    ];
    s.apply_snapshot(snap(at(0), vec![target("file:///x/", rows)]));
    let report = |p: &str, e, now| RowUpdate::Report(Box::new(row(p, Some(e), now)));
    // Same ETag (a re-read), a new ETag, and a read that failed.
    s.apply_rows(&delta(
        at(15),
        0,
        vec![
            ("a/", report("a/", "e1", at(15))),
            ("b/", report("b/", "e2b", at(15))),
            ("c/", RowUpdate::Error("could not be read".into())),
        ],
    ));
    s.unchanged(at(20));
    assert_eq!((watched(&s, 0, "a/"), watched(&s, 0, "b/")), (20, 5));
    assert!(s.snapshot().unwrap().targets[0]
        .prefixes
        .iter()
        .all(|p| p.prefix != "c/"));
    // The unread row read again with its old ETag: watched from now, not from 0.
    s.apply_rows(&delta(at(30), 0, vec![("c/", report("c/", "e3", at(30)))]));
    s.unchanged(at(35));
    assert_eq!(
        (
            watched(&s, 0, "a/"),
            watched(&s, 0, "b/"),
            watched(&s, 0, "c/")
        ),
        (35, 20, 5)
    );
}
