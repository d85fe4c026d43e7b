//! The post-mortem picture explains itself (issue 45 §7), checked on a
//! history with every finding the text report names, at 4 holders and at
//! 20. `LEASECTL_TEST_SVG_DIR=DIR` keeps the pictures (`timeline-4.svg`,
//! `timeline-20.svg`), to render (`rsvg-convert`) and look at.

use chrono::{DateTime, TimeZone, Utc};
use leasectl::bucket::LeaseRecord;
use leasectl::timeline::render::{self, PrefixTimeline, Sources};
use leasectl::timeline::{derive, picture, Derived, Ending, Observation, Seen, Source, Takeover};

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

fn prefix_of(derived: Derived, takeovers: Vec<Takeover>) -> PrefixTimeline {
    PrefixTimeline {
        url: "file:///srv/db/".into(),
        key: "db/LEASE".into(),
        versioning: None,
        sources: Sources::default(),
        problems: vec![],
        notes: vec![],
        takeovers,
        derived,
    }
}

/// A takeover recorded in the audit log, at `at`, writing `holder`'s record.
fn takeover_at(id: &str, at: DateTime<Utc>, holder: &str, generation: u64) -> Takeover {
    Takeover {
        id: id.into(),
        time: at,
        operator: "ops@bastion".into(),
        reason: "INC-7 stuck backup".into(),
        forced: false,
        then: "release".into(),
        holder: holder.into(),
        generation: Some(generation),
        writes_safe_from: None,
    }
}

/// A history with every finding the text report names, with `holders`
/// holders (at least 4): a release and a gap, late renewals, a takeover that
/// ends a tenure, a generation not advanced, a record replaced while fresh
/// with its overlap and a generation gone back, a takeover the audit log
/// alone records; a holder name too long for its label; the rest of the
/// holders each in turn, expiring.
fn every_finding(holders: usize) -> render::Report {
    let at = |s: i64| t0() + chrono::Duration::seconds(s);
    let long = "holder-b-0123456789abcdef0123456789abcdef";
    let mut o = vec![
        obs(0, Seen::Held(rec("holder-a", 100, at(0)))),
        obs(10, Seen::Held(rec("holder-a", 100, at(0)))),
        obs(20, Seen::Held(rec("holder-a", 100, at(0)))),
        obs(
            25,
            Seen::Released(rec("holder-a", 100, at(0)).released(at(25))),
        ),
        // Late: 25 s between writes (TTL/3 is 10 s).
        obs(60, Seen::Held(rec(long, 200, at(60)))),
        obs(85, Seen::Held(rec(long, 200, at(60)))),
        obs(95, Seen::Held(rec(long, 200, at(60)))),
        // Taken over while fresh, by the audit log's takeover (below).
        obs(110, Seen::Held(rec("holder-c", 300, at(110)))),
        obs(120, Seen::Held(rec("holder-c", 300, at(110)))),
        // Another holder under c's generation, over c's live lease.
        obs(125, Seen::Held(rec("intruder", 300, at(125)))),
        obs(135, Seen::Held(rec("intruder", 300, at(125)))),
        // And one whose generation goes back.
        obs(200, Seen::Held(rec("holder-d", 150, at(200)))),
        obs(210, Seen::Held(rec("holder-d", 150, at(200)))),
    ];
    for k in 4..holders {
        let s = 300 + 60 * (k as i64 - 4);
        let name = format!("holder-{k:02}");
        for w in [0, 10, 20] {
            o.push(obs(s + w, Seen::Held(rec(&name, 1_000 + k as u64, at(s)))));
        }
    }
    let end = at(300 + 60 * (holders as i64 - 4) + 30);
    let mut d = derive(&o, &[], end);
    let tk = takeover_at("a1", at(110), "holder-c", 300);
    if let Some(t) = d.tenures.iter_mut().find(|t| t.holder == long) {
        t.ending = Ending::Replaced {
            at: at(110),
            by: "holder-c".into(),
            while_fresh: true,
            takeover: Some(tk.clone()),
        };
    }
    let mut p = prefix_of(d, vec![tk, takeover_at("a2", at(250), "holder-x", 9)]);
    p.url = "s3://backups-prod/mushroomdb/db1/".into();
    p.notes.push("every version in the window was read".into());
    p.problems
        .push("version v999 could not be read: access denied".into());
    render::Report {
        schema_version: render::SCHEMA_VERSION,
        generated_at: end,
        from: None,
        to: end,
        prefixes: vec![p],
    }
}

/// The post-mortem picture explains itself (issue 45 §7): a legend; the
/// date and time zone on the axis; no holder in the overlap's red; every
/// finding of the text report marked with its number and its sentence under
/// the chart; a label too long for its place cut with `…` and given whole
/// under the chart. At 4 holders and at 20 (LEASECTL_TEST_SVG_DIR keeps the
/// pictures, to render and look at).
#[test]
fn the_picture_explains_itself() {
    for holders in [4, 20] {
        let r = every_finding(holders);
        let picture = picture::svg(&r).unwrap();
        if let Some(dir) = std::env::var_os("LEASECTL_TEST_SVG_DIR") {
            let path = std::path::Path::new(&dir).join(format!("timeline-{holders}.svg"));
            std::fs::write(path, &picture).unwrap();
        }
        // The text of the picture: the contents of its text elements, unescaped.
        let svg: String = picture
            .lines()
            .filter(|l| !l.starts_with('<'))
            .collect::<Vec<_>>()
            .join("\n")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&");
        assert!(svg.lines().any(|l| l == "legend"), "no legend");
        assert!(
            svg.contains("time (UTC) on 2026-12-03"),
            "no date or zone on the axis"
        );
        assert!(
            svg.contains("2026-12-03 09:00:00 to 2026-12-03"),
            "the title gives the window"
        );
        let p = &r.prefixes[0];
        let findings: Vec<_> = render::events(p)
            .into_iter()
            .filter(|e| {
                matches!(e.event, "overlap" | "generation_back" | "takeover")
                    || e.text.contains("REPLACED WHILE FRESH")
                    || e.text.contains("taken over by")
                    || e.text.contains(": LATE")
            })
            .collect();
        let kinds: std::collections::BTreeSet<&str> = findings.iter().map(|e| e.event).collect();
        assert!(
            kinds.is_superset(
                &[
                    "overlap",
                    "generation_back",
                    "takeover",
                    "replaced",
                    "acquired"
                ]
                .into()
            ),
            "the history lacks a kind of finding: {kinds:?}"
        );
        assert!(
            findings
                .iter()
                .any(|e| e.text.contains("GENERATION NOT ADVANCED"))
                && findings
                    .iter()
                    .any(|e| e.text.contains("GENERATION WENT BACK")),
            "{findings:#?}"
        );
        // Every finding: its number by a mark and its sentence under the chart.
        for (i, e) in findings.iter().enumerate() {
            let n = format!("({})", i + 1);
            assert!(
                svg.matches(&n).count() >= 2,
                "finding {n} is not marked and told: {}",
                e.text
            );
            let words: String = e.text.chars().take(40).collect();
            assert!(
                svg.contains(&words),
                "the sentence of {n} is missing: {words}"
            );
        }
        // What could not be read, the notes.
        assert!(svg.contains("UNKNOWN: version v999"), "problems");
        assert!(svg.contains("note: every version"), "notes");
        // The long name: cut with `…` on its lane, whole under the chart.
        assert!(svg.contains("holder-b-0123456789abcdef…"), "the cut label");
        assert!(
            svg.contains("holder-b-0123456789abcdef0123456789abcdef"),
            "the whole name"
        );
        // No holder is filled with the overlap's red (or any red).
        for c in picture_holder_colours() {
            let (r, g, b) = c;
            assert!(!(r > 150 && g < 100 && b < 100), "a red holder: {c:?}");
        }
        if holders == 20 {
            for k in 4..20 {
                assert!(svg.contains(&format!("holder-{k:02}")), "lane {k}");
            }
        }
    }
}

fn picture_holder_colours() -> Vec<(u8, u8, u8)> {
    picture::HOLDERS.iter().map(|c| (c.0, c.1, c.2)).collect()
}
