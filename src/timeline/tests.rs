use chrono::{DateTime, TimeZone, Utc};

use super::*;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 3, 9, 0, 0).unwrap()
}

fn rec(id: &str, g: u64, at: DateTime<Utc>) -> LeaseRecord {
    LeaseRecord {
        instance_id: id.into(),
        acquired_at: at,
        renewed_at: at,
        ttl_s: 30,
        generation: Some(g),
        released_at: None,
    }
}

fn obs(at_s: i64, seen: Seen) -> Observation {
    Observation {
        at: t0() + chrono::Duration::seconds(at_s),
        seen,
        source: Source::Version {
            version_id: format!("v{at_s}"),
            etag: None,
            read: true,
        },
    }
}

/// A day of renewals every 10 s (8,640 versions) by five tenures: the
/// bisection finds every change of tenure, and reads at most 200 bodies.
#[test]
fn bisection_finds_every_tenure_of_a_day_in_under_200_reads() {
    let n = 8640;
    let bounds = [0, 1000, 1003, 4000, 7777, n];
    let truth: Vec<Mark> = (0..n)
        .map(|i| {
            let k = bounds
                .windows(2)
                .position(|w| i >= w[0] && i < w[1])
                .unwrap();
            Mark::Record(format!("h{k}"), Some(k as u64), false)
        })
        .collect();
    let mut reads = 0;
    let marks = bisect(
        n,
        false,
        |_| None,
        |i| {
            reads += 1;
            Some(truth[i].clone())
        },
    );
    assert!(reads <= 200, "{reads} reads");
    // Every version is either read, or between two read ones of its tenure.
    let mut last: Option<&Mark> = None;
    for (i, m) in marks.iter().enumerate() {
        match m {
            Some(m) => {
                assert_eq!(m, &truth[i]);
                last = Some(m);
            }
            None => assert_eq!(last, Some(&truth[i]), "version {i} inferred wrongly"),
        }
    }
    // Every boundary's both sides were read.
    for &b in &bounds[1..5] {
        assert!(marks[b - 1].is_some() && marks[b].is_some(), "boundary {b}");
    }
    let mut all = 0;
    let every = bisect(
        n,
        true,
        |_| None,
        |i| {
            all += 1;
            Some(truth[i].clone())
        },
    );
    assert_eq!(all, n);
    assert!(every.iter().all(Option::is_some));
    eprintln!("bisection: {reads} reads of {n} versions (5 tenures)");
}

/// Delete markers are known without a read and split the bisection.
#[test]
fn delete_markers_are_boundaries_known_without_reading() {
    let truth = [
        Mark::Record("a".into(), Some(1), false),
        Mark::Record("a".into(), Some(1), false),
        Mark::Other(2),
        Mark::Record("a".into(), Some(2), false),
    ];
    let mut read = Vec::new();
    let marks = bisect(
        4,
        false,
        |i| (i == 2).then_some(Mark::Other(2)),
        |i| {
            read.push(i);
            Some(truth[i].clone())
        },
    );
    assert!(!read.contains(&2));
    assert_eq!(marks[2], Some(Mark::Other(2)));
}

/// Tenures, a release, a gap, a takeover while fresh with its overlap, a
/// generation that went back, renewals inferred by bisection.
#[test]
fn derive_tells_tenures_gaps_overlaps_and_generations_back() {
    let a = rec("a", 10, t0());
    let b = rec("b", 11, t0() + chrono::Duration::seconds(100));
    let c = rec("c", 5, t0() + chrono::Duration::seconds(125));
    let o = vec![
        obs(0, Seen::Held(a.clone())),
        obs(10, Seen::Renewal),
        obs(20, Seen::Held(a.clone())),
        obs(
            30,
            Seen::Released(a.released(t0() + chrono::Duration::seconds(30))),
        ),
        obs(100, Seen::Held(b.clone())),
        obs(110, Seen::Held(b.clone())),
        // c writes 15 s after b's last write: b's fence (20 s) is still open.
        obs(125, Seen::Held(c.clone())),
    ];
    let d = derive(&o, &[], t0() + chrono::Duration::seconds(140));
    assert_eq!(d.tenures.len(), 3, "{d:#?}");
    assert_eq!(d.tenures[0].writes, 3);
    assert_eq!(d.tenures[0].largest_gap_s, Some(10.0));
    assert!(d.tenures[0].punctual);
    assert!(matches!(d.tenures[0].ending, Ending::Released { .. }));
    assert!(matches!(
        d.tenures[1].ending,
        Ending::Replaced {
            while_fresh: true,
            takeover: None,
            ..
        }
    ));
    assert!(matches!(d.tenures[2].ending, Ending::Holding));
    assert_eq!(d.gaps.len(), 1);
    assert_eq!(d.gaps[0].from, t0() + chrono::Duration::seconds(30));
    assert_eq!(d.gaps[0].to, t0() + chrono::Duration::seconds(100));
    assert_eq!(d.overlaps.len(), 1, "{d:#?}");
    assert_eq!(d.overlaps[0].from, t0() + chrono::Duration::seconds(125));
    assert_eq!(d.overlaps[0].to, t0() + chrono::Duration::seconds(130));
    assert_eq!(
        (d.overlaps[0].earlier.as_str(), d.overlaps[0].later.as_str()),
        ("b", "c")
    );
    assert_eq!(d.generations_back.len(), 1);
    assert_eq!(
        (d.generations_back[0].before, d.generations_back[0].after),
        (11, 5)
    );
}

/// A holder that writes a fresh generation within its tenure (an acquire
/// that went the slow way: the same `acquired_at`, a greater generation) is
/// one tenure, not a holder replacing itself with an overlap (CI: a loaded
/// `bucket hold` went the slow way, and the timeline said holder-b wrote its
/// record before holder-b's fence closed). Another acquisition by the same
/// id is still a new tenure.
#[test]
fn a_generation_refreshed_by_its_holder_is_one_tenure() {
    let b = rec("b", 11, t0());
    let mut fresh = b.clone();
    fresh.generation = Some(12);
    fresh.renewed_at = t0() + chrono::Duration::seconds(20);
    let mut again = rec("b", 13, t0() + chrono::Duration::seconds(40));
    again.renewed_at = again.acquired_at;
    let o = vec![
        obs(0, Seen::Held(b.clone())),
        obs(10, Seen::Held(b.clone())),
        obs(20, Seen::Held(fresh.clone())),
        obs(30, Seen::Held(fresh.clone())),
        obs(40, Seen::Held(again.clone())),
    ];
    let d = derive(&o, &[], t0() + chrono::Duration::seconds(45));
    assert_eq!(d.tenures.len(), 2, "{d:#?}");
    assert_eq!(d.tenures[0].writes, 4);
    assert_eq!(d.tenures[0].generation, Some(12));
    assert_eq!(d.tenures[1].generation, Some(13));
    assert_eq!(
        d.overlaps.len(),
        1,
        "the second acquisition still overlaps: {d:#?}"
    );
    assert!(d.generations_back.is_empty(), "{d:#?}");
}

/// A holder that stops renewing expires; one that writes after its
/// successor started is an overlap (interleaved renewals).
#[test]
fn expiry_and_interleaved_renewals() {
    let a = rec("a", 1, t0());
    let b = rec("b", 2, t0() + chrono::Duration::seconds(60));
    let o = vec![
        obs(0, Seen::Held(a.clone())),
        obs(60, Seen::Held(b.clone())),
        obs(65, Seen::Held(a.clone())),
    ];
    let d = derive(&o, &[], t0() + chrono::Duration::seconds(70));
    assert!(
        matches!(d.tenures[0].ending, Ending::Expired { .. }),
        "{d:#?}"
    );
    assert_eq!(d.gaps.len(), 1, "{d:#?}");
    assert!(
        d.overlaps.iter().any(|o| o.why.contains("wrote again")),
        "{d:#?}"
    );
}

/// The bisection in rounds, as the reader runs it (each round's reads done
/// between calls): the same versions read as in one pass, every change found.
#[test]
fn bisection_in_rounds_reads_what_one_pass_reads() {
    let n = 8640;
    let bounds = [0, 1000, 1003, 4000, 7777, n];
    let truth = |i: usize| {
        let k = bounds
            .windows(2)
            .position(|w| i >= w[0] && i < w[1])
            .unwrap();
        Mark::Record(format!("h{k}"), Some(k as u64), false)
    };
    let mut one_pass = 0;
    bisect(
        n,
        false,
        |_| None,
        |i| {
            one_pass += 1;
            Some(truth(i))
        },
    );
    let mut cache: std::collections::HashMap<usize, Mark> = Default::default();
    let mut rounds = 0;
    let marks = loop {
        rounds += 1;
        let mut wanted = Vec::new();
        let marks = bisect(
            n,
            false,
            |_| None,
            |i| {
                let m = cache.get(&i).cloned();
                if m.is_none() {
                    wanted.push(i);
                }
                m
            },
        );
        if wanted.is_empty() {
            break marks;
        }
        for i in wanted {
            cache.insert(i, truth(i));
        }
    };
    assert_eq!(cache.len(), one_pass, "{rounds} rounds");
    assert!(rounds < 20, "{rounds} rounds");
    for &b in &bounds[1..5] {
        assert_eq!(marks[b - 1], Some(truth(b - 1)));
        assert_eq!(marks[b], Some(truth(b)));
    }
}

/// Two writers renewing in turn (d, e, d, e, with released marks as
/// leasectl leaves them) between runs of other holders of every length up
/// to 40: every alternation is read, even where the same writer stands on
/// both sides of another's single version (found on Ceph RGW by the
/// scripted history: the middle version was inferred as a renewal).
#[test]
fn bisection_reads_an_interleaving_of_two_writers() {
    let rec = |h: &str, g: u64, released: bool| Mark::Record(h.to_owned(), Some(g), released);
    for before in 1..40 {
        for after in 1..40 {
            let mut truth: Vec<Mark> = Vec::new();
            truth.extend((0..before).map(|_| rec("c", 1, false)));
            truth.push(rec("c", 1, true));
            for k in 0..4 {
                truth.push(if k % 2 == 0 {
                    rec("d", 2, false)
                } else {
                    rec("e", 3, false)
                });
            }
            truth.push(rec("e", 3, true));
            truth.extend((0..after).map(|_| rec("f", 4, false)));
            let n = truth.len();
            let marks = bisect(n, false, |_| None, |i| Some(truth[i].clone()));
            for i in before + 1..before + 5 {
                assert_eq!(
                    marks[i].as_ref(),
                    Some(&truth[i]),
                    "version {i} not read ({before} before, {after} after)"
                );
            }
        }
    }
}

/// Issue 44: three writes of one second in the service's order — a's
/// record, its delete marker, b's record — are a release by delete and a
/// new holder, with no overlap and no "replaced while fresh".
#[test]
fn a_release_by_delete_and_the_next_holder_in_one_second() {
    let a = rec("a", 1, t0());
    let b = rec("b", 2, t0());
    let mut marker = obs(0, Seen::Deleted);
    marker.source = Source::DeleteMarker {
        version_id: "dm".into(),
    };
    let o = vec![obs(0, Seen::Held(a)), marker, obs(0, Seen::Held(b))];
    let d = derive(&o, &[], t0() + chrono::Duration::seconds(5));
    assert_eq!(d.tenures.len(), 2, "{d:#?}");
    assert_eq!(d.tenures[0].ending, Ending::Released { at: t0() });
    assert!(d.overlaps.is_empty(), "{d:#?}");
    assert!(d.generations_back.is_empty(), "{d:#?}");
}

/// A holder writing again under its own generation is no generation going
/// back ("a wrote 5 after 5"): after another holder it is the interleaving
/// (an overlap), after its own release nobody else wrote (neither). Another
/// holder under the same generation is one not advanced; a takeover's
/// hand-over under its own record's generation is neither.
#[test]
fn equal_generations_are_told_apart() {
    let at = |s: i64| t0() + chrono::Duration::seconds(s);
    let end = at(400);
    // a, b, a again: b before a's fence, a before b's, and a writing again
    // (three overlaps); a going back from b's 6 to 5 only.
    let o = vec![
        obs(0, Seen::Held(rec("a", 5, at(0)))),
        obs(10, Seen::Held(rec("b", 6, at(10)))),
        obs(20, Seen::Held(rec("a", 5, at(20)))),
    ];
    let d = derive(&o, &[], end);
    assert_eq!(d.overlaps.len(), 3, "{d:#?}");
    assert!(d.overlaps[2].why.contains("wrote again"), "{d:#?}");
    assert_eq!(d.generations_back.len(), 1, "{d:#?}");
    assert_eq!(
        (d.generations_back[0].before, d.generations_back[0].after),
        (6, 5)
    );
    assert_eq!(d.generations_back[0].previous_holder, "b");
    // a released by delete, then a again: no second writer, nothing back.
    let o = vec![
        obs(0, Seen::Held(rec("a", 5, at(0)))),
        obs(100, Seen::Deleted),
        obs(200, Seen::Held(rec("a", 5, at(200)))),
    ];
    let d = derive(&o, &[], end);
    assert!(d.overlaps.is_empty(), "{d:#?}");
    assert!(d.generations_back.is_empty(), "{d:#?}");
    // b under a's generation, after a's expiry: not advanced.
    let o = vec![
        obs(0, Seen::Held(rec("a", 5, at(0)))),
        obs(200, Seen::Held(rec("b", 5, at(200)))),
    ];
    let d = derive(&o, &[], end);
    assert!(d.overlaps.is_empty(), "{d:#?}");
    assert_eq!(d.generations_back.len(), 1, "{d:#?}");
    assert_eq!(
        (d.generations_back[0].before, d.generations_back[0].after),
        (5, 5)
    );
    let p = prefix_of(d, vec![]);
    let text = render::events(&p)
        .into_iter()
        .map(|e| e.text)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains("GENERATION NOT ADVANCED: b took the lease under generation 5, which a had written before it"),
        "{text}"
    );
    assert!(!text.contains("after 5"), "{text}");
}

fn prefix_of(derived: Derived, takeovers: Vec<Takeover>) -> render::PrefixTimeline {
    render::PrefixTimeline {
        url: "file:///srv/db/".into(),
        key: "db/LEASE".into(),
        versioning: None,
        sources: render::Sources::default(),
        problems: vec![],
        notes: vec![],
        takeovers,
        derived,
    }
}

/// A takeover that ends no tenure seen (a local store: the audit log alone)
/// is an event of its own in the text and NDJSON, as the JSON lists it;
/// one that ends a tenure is told once, in that tenure's ending.
#[test]
fn a_takeover_without_versions_is_an_event() {
    let tk = Takeover {
        id: "t1".into(),
        time: t0(),
        operator: "ops@host".into(),
        reason: "stuck job".into(),
        forced: true,
        then: "hold".into(),
        holder: "c".into(),
        generation: Some(7),
        writes_safe_from: None,
    };
    let p = prefix_of(Derived::default(), vec![tk.clone()]);
    let ev = render::events(&p);
    assert_eq!(ev.len(), 1, "{ev:#?}");
    assert_eq!(ev[0].event, "takeover");
    assert_eq!(ev[0].holder.as_deref(), Some("c"));
    assert!(
        ev[0]
            .text
            .contains("forced takeover by ops@host writing c's record, generation 7")
            && ev[0].text.contains("stuck job")
            && ev[0].text.contains("audit t1"),
        "{}",
        ev[0].text
    );
    // Named by a tenure's ending: not twice.
    let mut d = Derived::default();
    let mut t = derive(&[obs(0, Seen::Held(rec("b", 6, t0())))], &[], t0())
        .tenures
        .remove(0);
    t.ending = Ending::Replaced {
        at: t0(),
        by: "c".into(),
        while_fresh: true,
        takeover: Some(tk.clone()),
    };
    d.tenures.push(t);
    let p = prefix_of(d, vec![tk]);
    assert!(!render::events(&p).iter().any(|e| e.event == "takeover"));
}
