//! The timeline as text (a chronological list, findings first), one JSON
//! document, or NDJSON (one event per line).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::{Derived, Ending, Takeover, Tenure};
use crate::bucket::fmt_generation;
use crate::clock::{rfc3339, ser_opt_rfc3339, ser_rfc3339};
use crate::exit::Exit;
use crate::store::Versioning;
use crate::text::format_secs;

/// The `timeline -o json` schema version.
pub const SCHEMA_VERSION: &str = "1.0";

/// The whole timeline: every prefix asked about.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: &'static str,
    /// When it was built (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub generated_at: DateTime<Utc>,
    /// The window's start (UTC; `None`: everything kept).
    #[serde(serialize_with = "ser_opt_rfc3339")]
    pub from: Option<DateTime<Utc>>,
    /// The window's end (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub to: DateTime<Utc>,
    /// One per PREFIX_URL, in the order given.
    pub prefixes: Vec<PrefixTimeline>,
}

/// One prefix's timeline.
#[derive(Debug, Clone, Serialize)]
pub struct PrefixTimeline {
    /// The PREFIX_URL (escaped).
    pub url: String,
    /// The LEASE key (escaped).
    pub key: String,
    /// The bucket's versioning (`None`: a store without versions).
    pub versioning: Option<Versioning>,
    /// What was read.
    pub sources: Sources,
    /// What could not be read (sentences): the exit code is 1.
    pub problems: Vec<String>,
    /// Notes that are no fault (sentences).
    pub notes: Vec<String>,
    /// The takeovers the audit logs record for this lease.
    pub takeovers: Vec<Takeover>,
    /// Tenures, gaps, overlaps, generations back, clocks.
    #[serde(flatten)]
    pub derived: Derived,
}

/// The requests sent and the lines read, per source.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sources {
    /// Versions and delete markers listed in the window.
    pub versions_listed: usize,
    /// Version bodies read (GET).
    pub versions_read: usize,
    /// Versions not read but inferred by bisection (`--bisect`): when not 0,
    /// the history is not known (a problem says so; the exit code is 1).
    pub versions_inferred: usize,
    /// Listing requests (including the versioning status).
    pub list_requests: u64,
    /// Recording lines about this lease.
    pub recording_lines: usize,
    /// Audit entries about this lease.
    pub audit_entries: usize,
}

impl Report {
    /// 1 when a source could not be read completely (a version inferred by
    /// bisection rather than read among them: the history is not known),
    /// else 3 when an overlap or a generation that went back was found, else 0.
    pub fn exit(&self) -> Exit {
        if self
            .prefixes
            .iter()
            .any(|p| !p.problems.is_empty() || p.sources.versions_inferred > 0)
        {
            Exit::Failed
        } else if self
            .prefixes
            .iter()
            .any(|p| !p.derived.overlaps.is_empty() || !p.derived.generations_back.is_empty())
        {
            Exit::Attention
        } else {
            Exit::Ok
        }
    }
}

fn t(at: DateTime<Utc>) -> String {
    rfc3339(at, SecondsFormat::Millis)
}

fn gen(g: Option<u64>) -> String {
    fmt_generation(g)
}

/// One event of a prefix's timeline, for text and NDJSON.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// When (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub time: DateTime<Utc>,
    /// `acquired`, `released`, `expired`, `replaced`, `overwritten`, `holding`,
    /// `gap`, `overlap`, `generation_back`, `takeover`.
    pub event: &'static str,
    /// The PREFIX_URL.
    pub url: String,
    /// The holder concerned, if one.
    pub holder: Option<String>,
    /// Its generation, if known.
    pub generation: Option<u64>,
    /// The event in one sentence (escaped).
    pub text: String,
}

/// The events of `p`, oldest first (an overlap at its start).
pub fn events(p: &PrefixTimeline) -> Vec<Event> {
    let mut out = Vec::new();
    let ev = |time, event, holder: Option<&str>, generation, text: String| Event {
        time,
        event,
        url: p.url.clone(),
        holder: holder.map(str::to_owned),
        generation,
        text,
    };
    for tn in &p.derived.tenures {
        let gap = tn
            .largest_gap_s
            .map(|g| {
                format!(
                    ", largest gap between writes {} (TTL/3 is {}){}",
                    format_secs(g),
                    format_secs(tn.ttl_s as f64 / 3.0),
                    if tn.punctual { "" } else { ": LATE" }
                )
            })
            .unwrap_or_default();
        out.push(ev(
            tn.first_seen,
            "acquired",
            Some(&tn.holder),
            tn.generation,
            format!(
                "{} took the lease, generation {} (acquired_at {} by its clock), TTL {} s; {} write(s) seen until {}{}",
                tn.holder,
                gen(tn.generation),
                t(tn.acquired_at),
                tn.ttl_s,
                tn.writes,
                t(tn.last_seen),
                gap
            ),
        ));
        let (time, event, text) = ending(tn);
        out.push(ev(time, event, Some(&tn.holder), tn.generation, text));
    }
    for g in &p.derived.gaps {
        out.push(ev(
            g.from,
            "gap",
            None,
            None,
            format!(
                "nobody held it from {} to {} ({})",
                t(g.from),
                t(g.to),
                format_secs((g.to - g.from).num_milliseconds() as f64 / 1000.0)
            ),
        ));
    }
    for o in &p.derived.overlaps {
        out.push(ev(
            o.from,
            "overlap",
            Some(&o.later),
            None,
            format!("OVERLAP {} to {}: {}", t(o.from), t(o.to), o.why),
        ));
    }
    for b in &p.derived.generations_back {
        let text = if b.after == b.before {
            format!(
                "GENERATION NOT ADVANCED: {} took the lease under generation {}, which {} had written before it",
                b.holder, b.after, b.previous_holder
            )
        } else {
            format!(
                "GENERATION WENT BACK: {} wrote {} after {} had written {}",
                b.holder, b.after, b.previous_holder, b.before
            )
        };
        out.push(ev(
            b.at,
            "generation_back",
            Some(&b.holder),
            Some(b.after),
            text,
        ));
    }
    // The takeovers the audit logs record that no tenure's ending names
    // (no version shows the record they replaced: a store without versions,
    // or outside the window): each its own event, as the JSON lists it.
    for tk in p.takeovers.iter().filter(|tk| !ends_a_tenure(p, tk)) {
        out.push(ev(
            tk.time,
            "takeover",
            Some(&tk.holder),
            tk.generation,
            format!(
                "{}takeover by {} writing {}'s record, generation {} (reason \"{}\", then {}; audit {})",
                if tk.forced { "forced " } else { "" },
                tk.operator,
                tk.holder,
                gen(tk.generation),
                tk.reason,
                tk.then,
                tk.id
            ),
        ));
    }
    // Stable: events at one time keep the order above (a tenure's start
    // before its end, as the versions were written).
    out.sort_by_key(|e| e.time);
    out
}

/// True when a tenure of `p` ended by takeover `tk` (its `replaced` event names it).
pub(super) fn ends_a_tenure(p: &PrefixTimeline, tk: &Takeover) -> bool {
    p.derived
        .tenures
        .iter()
        .any(|t| matches!(&t.ending, Ending::Replaced { takeover: Some(x), .. } if x.id == tk.id))
}

/// When and how tenure `tn` ended (or that it goes on), in one sentence
/// (escaped): the event that closes its lane.
fn ending(tn: &Tenure) -> (DateTime<Utc>, &'static str, String) {
    match &tn.ending {
        Ending::Released { at } => (*at, "released", format!("{} released it", tn.holder)),
        Ending::Expired { at } => (
            *at,
            "expired",
            format!(
                "{}'s lease expired (no write for its TTL after {})",
                tn.holder,
                t(tn.last_seen)
            ),
        ),
        Ending::Replaced {
            at,
            by,
            while_fresh,
            takeover,
        } => {
            let how = match takeover {
                Some(tk) => format!(
                    "taken over by {by} ({}takeover by {}, reason \"{}\", then {}; audit {})",
                    if tk.forced { "forced " } else { "" },
                    tk.operator,
                    tk.reason,
                    tk.then,
                    tk.id
                ),
                None if *while_fresh => format!(
                    "REPLACED WHILE FRESH by {by}, with no takeover in the audit logs given"
                ),
                None => format!("replaced by {by}"),
            };
            (*at, "replaced", format!("{}'s record {how}", tn.holder))
        }
        Ending::Overwritten { at } => (
            *at,
            "overwritten",
            format!(
                "{}'s record was overwritten by a body that is not a record",
                tn.holder
            ),
        ),
        Ending::Holding => (
            tn.last_seen,
            "holding",
            format!(
                "{} still holds it (last write {})",
                tn.holder,
                t(tn.last_seen)
            ),
        ),
    }
}

/// The text form: per prefix a summary line (overlaps first), then its events.
pub fn text(r: &Report, out: &mut impl std::io::Write) {
    for p in &r.prefixes {
        let d = &p.derived;
        let _ = writeln!(
            out,
            "{} ({}): {} overlap(s), {} generation(s) back, {} tenure(s), {} gap(s) — from {} version(s) ({} read{}, {} listing request(s)), {} recording line(s), {} audit entr(ies)",
            p.url,
            p.key,
            d.overlaps.len(),
            d.generations_back.len(),
            d.tenures.len(),
            d.gaps.len(),
            p.sources.versions_listed,
            p.sources.versions_read,
            match p.sources.versions_inferred {
                0 => String::new(),
                n => format!(", {n} INFERRED by bisection, not read"),
            },
            p.sources.list_requests,
            p.sources.recording_lines,
            p.sources.audit_entries
        );
        for s in p.problems.iter() {
            let _ = writeln!(out, "  UNKNOWN: {s}");
        }
        for s in p.notes.iter() {
            let _ = writeln!(out, "  note: {s}");
        }
        for e in events(p) {
            let _ = writeln!(out, "  {}  {}", t(e.time), e.text);
        }
        for c in &d.clocks {
            let _ = writeln!(
                out,
                "  clock of {}: renewed_at − Last-Modified from {} to {} over {} version(s) (±1 s)",
                c.holder,
                format_secs(c.min_s),
                format_secs(c.max_s),
                c.samples
            );
        }
    }
}

/// The NDJSON form: one `event` line per event, then one `summary` line per prefix.
pub(crate) fn ndjson(r: &Report, out: &mut impl std::io::Write) {
    #[derive(Serialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        #[serde(flatten)]
        event: &'a Event,
    }
    #[derive(Serialize)]
    struct Summary<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        schema_version: &'static str,
        url: &'a str,
        key: &'a str,
        tenures: usize,
        gaps: usize,
        overlaps: usize,
        generations_back: usize,
        sources: &'a Sources,
        problems: &'a [String],
    }
    for p in &r.prefixes {
        for e in events(p) {
            let _ = writeln!(
                out,
                "{}",
                serde_json::to_string(&Line {
                    kind: "event",
                    event: &e
                })
                .unwrap_or_default()
            );
        }
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(&Summary {
                kind: "summary",
                schema_version: SCHEMA_VERSION,
                url: &p.url,
                key: &p.key,
                tenures: p.derived.tenures.len(),
                gaps: p.derived.gaps.len(),
                overlaps: p.derived.overlaps.len(),
                generations_back: p.derived.generations_back.len(),
                sources: &p.sources,
                problems: &p.problems,
            })
            .unwrap_or_default()
        );
    }
}
