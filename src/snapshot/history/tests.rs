//! Tests of the holder history (`super`).

use super::*;
use crate::audit::{AuditObserved, AuditTarget, AuditWritten};
use crate::bucket::{LeaseRecord, Observed};
use crate::snapshot::{PrefixReport, ReaderClock, TargetReport};

const URL: &str = "file:///srv/leases/";

fn t0() -> DateTime<Utc> {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

fn at(s: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(s)
}

fn record(holder: &str, renewed: DateTime<Utc>) -> LeaseRecord {
    LeaseRecord {
        instance_id: holder.into(),
        acquired_at: renewed,
        renewed_at: renewed,
        ttl_s: 30,
        generation: None,
        released_at: None,
    }
}

/// A row for `db/` held by `holder` (renewed at `renewed`), or absent.
fn row(holder: Option<(&str, DateTime<Utc>)>, etag: &str, now: DateTime<Utc>) -> PrefixReport {
    let observed = match holder {
        Some((h, renewed)) => Observed::Present {
            etag: Some(etag.into()),
            last_modified: Some(renewed),
            record: Ok(record(h, renewed)),
        },
        None => Observed::Absent,
    };
    PrefixReport::new("db/".into(), observed, now)
}

fn snap(now: DateTime<Utc>, rows: Vec<PrefixReport>, error: Option<&str>) -> Snapshot {
    Snapshot {
        schema_version: crate::snapshot::SCHEMA_VERSION,
        generated_at: now,
        reader_clock: ReaderClock {
            now,
            server_offset_s: None,
            server_offset_error_s: None,
        },
        targets: vec![TargetReport {
            url: URL.into(),
            endpoint: "local".into(),
            endpoint_url: None,
            region: None,
            addressing_style: None,
            bucket: None,
            error: error.map(str::to_owned),
            errors: Vec::new(),
            prefixes: rows,
            server_offset_s: None,
            server_offset_error_s: None,
            server_clock_note: None,
            deeper_leases: None,
        }],
        pod: Default::default(),
        pod_error: None,
        audit_log: None,
    }
}

fn kinds(h: &History) -> Vec<ChangeKind> {
    h.get(URL, "db/")
        .unwrap()
        .changes
        .iter()
        .map(|c| c.kind)
        .collect()
}

#[test]
fn renewals_are_not_changes_and_expiry_release_acquire_are() {
    let mut h = History::new();
    h.observe(
        &snap(at(0), vec![row(Some(("a", at(0))), "e1", at(0))], None),
        &[],
    );
    h.observe(
        &snap(at(10), vec![row(Some(("a", at(10))), "e2", at(10))], None),
        &[],
    );
    assert_eq!(kinds(&h), [ChangeKind::FirstSeen]);
    // a stops renewing at 10 s (TTL 30 s): b after the expiry.
    h.observe(
        &snap(at(45), vec![row(Some(("b", at(45))), "e3", at(45))], None),
        &[],
    );
    // Released, then acquired again.
    h.observe(&snap(at(50), vec![row(None, "", at(50))], None), &[]);
    h.observe(
        &snap(at(55), vec![row(Some(("c", at(55))), "e4", at(55))], None),
        &[],
    );
    assert_eq!(
        kinds(&h),
        [
            ChangeKind::FirstSeen,
            ChangeKind::Expiry,
            ChangeKind::Release,
            ChangeKind::Acquired
        ]
    );
    let p = h.get(URL, "db/").unwrap();
    assert_eq!(p.count, 2, "b and c");
    assert_eq!(p.changes[1].previous.as_deref(), Some("a"));
    assert_eq!(p.changes[1].holder.as_deref(), Some("b"));
    assert_eq!(p.changes[1].at, at(45));
}

#[test]
fn a_change_while_fresh_is_unexpected_unless_audited() {
    let mut h = History::new();
    h.observe(
        &snap(at(0), vec![row(Some(("a", at(0))), "e1", at(0))], None),
        &[],
    );
    h.observe(
        &snap(at(5), vec![row(Some(("b", at(5))), "e2", at(5))], None),
        &[],
    );
    assert_eq!(kinds(&h)[1], ChangeKind::Unexpected);

    let sample = AuditEntry::sample(at(8), &format!("{URL}db/"), "db/LEASE");
    let entry = AuditEntry {
        phase: "outcome".into(),
        operator: "ops@host\x1b[2J".into(),
        observed: AuditObserved {
            etag: Some("e2".into()),
            judgement: "fresh".into(),
            ..sample.observed.clone()
        },
        written: Some(AuditWritten {
            record: record("c", at(8)),
            etag: Some("e3".into()),
        }),
        reason: "stuck".into(),
        forced: true,
        then: "hold".into(),
        outcome: Some("taken".into()),
        ..sample
    };
    h.observe(
        &snap(at(10), vec![row(Some(("c", at(8))), "e3", at(10))], None),
        std::slice::from_ref(&entry),
    );
    let p = h.get(URL, "db/").unwrap();
    assert_eq!(p.changes[2].kind, ChangeKind::Takeover);
    assert_eq!(
        p.changes[2].audit.as_deref(),
        Some("ops@host\\x1b[2J — stuck")
    );
    // An old entry for the same key does not make a later change a takeover.
    h.observe(
        &snap(
            at(100),
            vec![row(Some(("d", at(100))), "e9", at(100))],
            None,
        ),
        &[entry],
    );
    assert_eq!(kinds(&h)[3], ChangeKind::Expiry);
}

/// A takeover outcome of the lease `key` reached through `url` (bucket
/// `bucket`) that wrote holder `holder` at `t`.
fn outcome(url: &str, bucket: Option<&str>, key: &str, holder: &str, t: i64) -> AuditEntry {
    let sample = AuditEntry::sample(at(t), url, key);
    AuditEntry {
        phase: "outcome".into(),
        target: AuditTarget {
            bucket: bucket.map(str::to_owned),
            ..sample.target.clone()
        },
        observed: AuditObserved {
            judgement: "fresh".into(),
            ..sample.observed.clone()
        },
        written: Some(AuditWritten {
            record: record(holder, at(t)),
            etag: None,
        }),
        reason: "stuck".into(),
        forced: true,
        then: "hold".into(),
        outcome: Some("taken".into()),
        ..sample
    }
}

/// Issue 23 item 4: `leasectl takeover --force file:///srv/leases/db/`
/// audits key `LEASE` (the prefix directory is its store); a console
/// watching `file:///srv/leases/` reads the same file as `db/LEASE`. On
/// S3, `s3://b/p/s1/` and `s3://b/` name the same key of bucket `b`.
#[test]
fn a_takeover_is_recognised_however_its_target_was_spelled() {
    // (url of the takeover, its bucket, its key, recognised?)
    let local = [
        ("file:///srv/leases/db/", None, "LEASE", true),
        ("file:///srv/leases/db", None, "LEASE", true),
        // The console's form: the key relative to the TARGET it watches.
        ("file:///srv/leases/db/", None, "db/LEASE", true),
        ("file:///srv/leases/db/x/", None, "LEASE", false),
        ("file:///srv/other/db/", None, "LEASE", false),
    ];
    for (url, bucket, key, yes) in local {
        let mut h = History::new();
        h.observe(
            &snap(at(0), vec![row(Some(("a", at(0))), "e1", at(0))], None),
            &[],
        );
        let entry = outcome(url, bucket, key, "b", 4);
        h.observe(
            &snap(at(5), vec![row(Some(("b", at(4))), "e2", at(5))], None),
            &[entry],
        );
        let want = if yes {
            ChangeKind::Takeover
        } else {
            ChangeKind::Unexpected
        };
        assert_eq!(kinds(&h)[1], want, "{url} {key}");
    }
    let s3 = [
        ("s3://b/p/s1/", Some("b"), "p/s1/LEASE", true),
        ("s3://b/", Some("b"), "p/s1/LEASE", true),
        ("s3://b/p/s1/", Some("c"), "p/s1/LEASE", false),
        ("s3://b/p/s1/", Some("b"), "s1/LEASE", false),
    ];
    for (url, bucket, key, yes) in s3 {
        let snap_s3 = |t: i64, holder: &str| {
            let mut r = row(Some((holder, at(t))), holder, at(t));
            r.prefix = "p/s1/".into();
            r.key = "p/s1/LEASE".into();
            let mut s = snap(at(t), vec![r], None);
            s.targets[0].url = "s3://b/p/".into();
            s.targets[0].bucket = Some("b".into());
            s
        };
        let mut h = History::new();
        h.observe(&snap_s3(0, "a"), &[]);
        h.observe(&snap_s3(5, "b"), &[outcome(url, bucket, key, "b", 4)]);
        let got = h.get("s3://b/p/", "p/s1/").unwrap().changes[1].kind;
        let want = if yes {
            ChangeKind::Takeover
        } else {
            ChangeKind::Unexpected
        };
        assert_eq!(got, want, "{url} {bucket:?} {key}");
    }
}

/// A row for `db/` held by `holder` under `generation`.
fn row_gen(holder: &str, generation: Option<u64>, etag: &str, t: i64) -> PrefixReport {
    let mut rec = record(holder, at(t));
    rec.generation = generation;
    let observed = Observed::Present {
        etag: Some(etag.into()),
        last_modified: Some(at(t)),
        record: Ok(rec),
    };
    PrefixReport::new("db/".into(), observed, at(t))
}

/// Issue 26: each change carries the generations before and after; the
/// same holder under a new generation is a change; a hand-over (audited
/// with `--then handover:ID`) is told from a takeover; the counts by
/// kind add up to the count.
#[test]
fn generations_are_recorded_and_a_hand_over_is_named() {
    let mut h = History::new();
    h.observe(
        &snap(at(0), vec![row_gen("a", Some(7), "e1", 0)], None),
        &[],
    );
    // A renewal keeps the generation: nothing.
    let none = h.observe_changes(
        &snap(at(5), vec![row_gen("a", Some(7), "e2", 5)], None),
        &[],
    );
    assert!(none.is_empty());
    // b after a's expiry, generation 8.
    let c = h.observe_changes(
        &snap(at(45), vec![row_gen("b", Some(8), "e3", 45)], None),
        &[],
    );
    assert_eq!(c.len(), 1);
    let (key, c) = &c[0];
    assert_eq!(key, &(URL.into(), "db/".to_owned()));
    assert_eq!(c.kind, ChangeKind::Expiry);
    assert_eq!((c.previous_generation, c.generation), (Some(7), Some(8)));
    assert_eq!(c.generation_text().as_deref(), Some("generation 7 → 8"));
    assert_eq!(
        (c.previous_id.as_deref(), c.holder_id.as_deref()),
        (Some("a"), Some("b"))
    );
    // b again, but a new generation (released and re-acquired between reads).
    let c = h.observe_changes(
        &snap(at(90), vec![row_gen("b", Some(9), "e4", 90)], None),
        &[],
    );
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].1.kind, ChangeKind::Expiry);
    // A hand-over to s while b is fresh, audited.
    let mut e = outcome(&format!("{URL}db/"), None, "db/LEASE", "s", 93);
    e.then = "handover:s".into();
    if let Some(w) = &mut e.written {
        w.record.generation = Some(10);
    }
    let c = h.observe_changes(
        &snap(at(95), vec![row_gen("s", Some(10), "e5", 95)], None),
        std::slice::from_ref(&e),
    );
    assert_eq!(c[0].1.kind, ChangeKind::Handover);
    assert_eq!(c[0].1.kind.as_str(), "hand-over");
    assert_eq!(c[0].1.kind.label(), "handover");
    let t = c[0].1.takeover.as_ref().unwrap();
    assert_eq!((t.then.as_str(), t.generation), ("handover:s", Some(10)));
    // Unknown generations: no text; an unknown one is no evidence of a change.
    let c = h.observe_changes(&snap(at(97), vec![row_gen("s", None, "e6", 97)], None), &[]);
    assert!(c.is_empty(), "{c:?}");
    let p = h.get(URL, "db/").unwrap();
    assert_eq!(p.count, 3);
    assert_eq!(p.count_by, [0, 1, 2, 0, 0]);
    let first = &p.changes[0];
    assert_eq!(first.generation_text().as_deref(), Some("generation 7"));
    let mut plain = first.clone();
    plain.generation = None;
    assert_eq!(plain.generation_text(), None);
}

/// A record that lost its generation between two reads (same holder)
/// and came back under another one is a change of generation, as if the
/// read without one had not happened: it hides no re-acquire (nor a
/// write over a live lease).
#[test]
fn a_generation_lost_between_two_reads_hides_no_change() {
    let mut h = History::new();
    h.observe(
        &snap(at(0), vec![row_gen("a", Some(7), "e1", 0)], None),
        &[],
    );
    let none = h.observe_changes(&snap(at(5), vec![row_gen("a", None, "e2", 5)], None), &[]);
    assert!(none.is_empty(), "{none:?}");
    let c = h.observe_changes(
        &snap(at(10), vec![row_gen("a", Some(9), "e3", 10)], None),
        &[],
    );
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].1.kind, ChangeKind::Unexpected, "{c:?}");
    // The generation it came back with is kept: nothing more.
    let none = h.observe_changes(
        &snap(at(15), vec![row_gen("a", Some(9), "e4", 15)], None),
        &[],
    );
    assert!(none.is_empty(), "{none:?}");
}

/// A reader that sees the new record before the takeover's `outcome` is
/// appended knows it by the `intent` (fsynced before the PUT), which
/// names the holder about to be written.
#[test]
fn a_takeover_is_known_by_its_intent_before_its_outcome() {
    let mut h = History::new();
    h.observe(
        &snap(at(0), vec![row_gen("a", Some(7), "e1", 0)], None),
        &[],
    );
    let mut intent = outcome(&format!("{URL}db/"), None, "db/LEASE", "t", 4);
    intent.phase = "intent".into();
    intent.outcome = None;
    let c = h.observe_changes(
        &snap(at(5), vec![row_gen("t", Some(8), "e2", 5)], None),
        std::slice::from_ref(&intent),
    );
    assert_eq!(c[0].1.kind, ChangeKind::Takeover, "{c:?}");
    assert_eq!(c[0].1.takeover.as_ref().unwrap().outcome, None);
    // The index of last takeovers counts outcomes only.
    let i = crate::snapshot::TakeoverIndex::of(&[intent]);
    assert!(i.newest(URL, None, "db/LEASE").is_none());
}

/// `serve` and the console read an off-screen stale row at the listing's
/// cadence, keeping its last reading in between: a takeover found only
/// at the next read, long after its audit entry, is still a takeover
/// (the entry is after the replaced holder was first seen).
#[test]
fn a_takeover_read_late_is_still_a_takeover() {
    let mut h = History::new();
    let stale = |t: i64| {
        let mut r = row_gen("a", Some(7), "e1", -300);
        r.rejudge(at(t));
        r
    };
    for t in [0, 10, 20, 30] {
        h.observe(&snap(at(t), vec![stale(t)], None), &[]);
    }
    let e = outcome(&format!("{URL}db/"), None, "db/LEASE", "t", 12);
    let c = h.observe_changes(
        &snap(at(40), vec![row_gen("t", Some(8), "e2", 12)], None),
        std::slice::from_ref(&e),
    );
    assert_eq!(c[0].1.kind, ChangeKind::Takeover, "{c:?}");
}

#[test]
fn errors_are_not_releases_and_vanished_prefixes_are() {
    let mut h = History::new();
    h.observe(
        &snap(at(0), vec![row(Some(("a", at(0))), "e1", at(0))], None),
        &[],
    );
    // The target could not be gathered: nothing is concluded.
    h.observe(&snap(at(5), vec![], Some("listing failed")), &[]);
    assert_eq!(kinds(&h), [ChangeKind::FirstSeen]);
    // Gathered, and db/ is no longer listed: gone.
    h.observe(&snap(at(10), vec![], None), &[]);
    assert_eq!(kinds(&h), [ChangeKind::FirstSeen, ChangeKind::Release]);
    // Gone stays gone: no second release.
    h.observe(&snap(at(15), vec![], None), &[]);
    assert_eq!(h.len(), 2);
}

#[test]
fn holders_are_escaped() {
    let mut h = History::new();
    h.observe(
        &snap(
            at(0),
            vec![row(Some(("ev\x1b]0;il\n", at(0))), "e1", at(0))],
            None,
        ),
        &[],
    );
    let c = &h.get(URL, "db/").unwrap().changes[0];
    assert!(!c.holder.as_deref().unwrap().contains('\x1b'));
}

#[test]
fn a_console_of_ten_thousand_prefixes_keeps_every_one() {
    // Beyond the prefix cap, each refresh would forget prefixes and see
    // them again as new (and, with a scan per eviction, take quadratic time).
    let mut h = History::new();
    let rows = |now| {
        (0..10_000)
            .map(|i| {
                let mut r = row(Some(("h", at(0))), "e", now);
                r.prefix = format!("db{i:05}/");
                r
            })
            .collect::<Vec<_>>()
    };
    h.observe(&snap(at(0), rows(at(0)), None), &[]);
    let first = h.len();
    assert_eq!(h.iter().count(), 10_000);
    assert!(first <= Limits::default().total);
    h.observe(&snap(at(5), rows(at(5)), None), &[]);
    assert_eq!(h.iter().count(), 10_000);
    assert_eq!(h.len(), first, "an unchanged refresh records nothing");
    assert!(h.iter().all(|(_, p)| p.count == 0));
}

#[test]
fn memory_is_bounded() {
    let mut h = History::with_limits(Limits {
        per_prefix: 4,
        total: 6,
        prefixes: 2,
    });
    for i in 0..20 {
        let holder = format!("h{i}");
        h.observe(
            &snap(
                at(i * 40),
                vec![row(Some((&holder, at(i * 40))), "e", at(i * 40))],
                None,
            ),
            &[],
        );
    }
    let p = h.get(URL, "db/").unwrap();
    assert_eq!(p.changes.len(), 4);
    assert_eq!(p.count, 19, "the count survives dropped entries");
    assert_eq!(p.changes.back().unwrap().holder.as_deref(), Some("h19"));
    // Three prefixes under a two-prefix cap: the one not seen goes.
    let mut rows = vec![row(Some(("x", at(900))), "e", at(900))];
    rows[0].prefix = "one/".into();
    let mut r2 = row(Some(("y", at(900))), "e", at(900));
    r2.prefix = "two/".into();
    rows.push(r2);
    h.observe(&snap(at(900), rows, Some("partial")), &[]);
    assert!(h.get(URL, "db/").is_none());
    assert!(h.len() <= 6);
    assert_eq!(h.iter().count(), 2);
}

/// Issue 35 trip 13: the operator's own takeover with `--then release`, read
/// only after its release (no LEASE, or a released record), is a takeover,
/// not a release; a release of the same holder with no such takeover (or a
/// takeover of someone else) is a release.
#[test]
fn a_takeover_released_at_once_is_a_takeover() {
    let taken_and_released = |observed: &str, then: &str| {
        let sample = outcome(&format!("{URL}db/"), None, "db/LEASE", "ours", 12);
        AuditEntry {
            observed: AuditObserved {
                record: Some(record(observed, at(-300))),
                judgement: "stale".into(),
                ..sample.observed.clone()
            },
            then: then.into(),
            forced: false,
            ..sample
        }
    };
    for (observed, then, want) in [
        ("dying", "release", ChangeKind::Takeover),
        ("someone-else", "release", ChangeKind::Release),
        ("dying", "hold", ChangeKind::Release),
    ] {
        let mut h = History::new();
        h.observe(
            &snap(
                at(0),
                vec![row(Some(("dying", at(-300))), "e1", at(0))],
                None,
            ),
            &[],
        );
        let e = taken_and_released(observed, then);
        let c = h.observe_changes(
            &snap(at(15), vec![row(None, "", at(15))], None),
            std::slice::from_ref(&e),
        );
        assert_eq!(c[0].1.kind, want, "{observed} {then}: {c:?}");
        if want == ChangeKind::Takeover {
            let a = c[0].1.audit.as_deref().unwrap();
            assert!(a.ends_with("; released at once"), "{a}");
            assert_eq!(c[0].1.previous.as_deref(), Some("dying"));
        }
    }
}

/// Issue 45 §8: after a holder's release the history showed "generation 7
/// → -", as if the generation were unknown: a released record keeps its
/// generation (the next holder's counts on from it), a deleted LEASE has
/// none.
#[test]
fn a_release_keeps_its_generation_in_the_history() {
    let released = |t: i64| {
        let mut rec = record("a", at(0)).released(at(t));
        rec.generation = Some(8);
        let observed = Observed::Present {
            etag: Some("r1".into()),
            last_modified: Some(at(t)),
            record: Ok(rec),
        };
        PrefixReport::new("db/".into(), observed, at(t))
    };
    let mut h = History::new();
    h.observe(
        &snap(at(0), vec![row_gen("a", Some(7), "e1", 0)], None),
        &[],
    );
    let c = h.observe_changes(&snap(at(10), vec![released(10)], None), &[]);
    assert_eq!(c.len(), 1, "{c:#?}");
    assert_eq!(c[0].1.kind, ChangeKind::Release);
    assert_eq!(
        c[0].1.generation_text().as_deref(),
        Some("generation 7 → 8, released")
    );
    // Read again: no change.
    assert!(h
        .observe_changes(&snap(at(15), vec![released(15)], None), &[])
        .is_empty());
    // Deleted: no record, no generation now.
    let mut h = History::new();
    h.observe(
        &snap(at(0), vec![row_gen("a", Some(7), "e1", 0)], None),
        &[],
    );
    let c = h.observe_changes(&snap(at(10), vec![row(None, "", at(10))], None), &[]);
    assert_eq!(
        c[0].1.generation_text().as_deref(),
        Some("generation 7, no record now")
    );
}
