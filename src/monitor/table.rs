//! `-o table`: the snapshot as plain text, one lease per line, columns
//! separated by spaces — for scripts, pipes and any stdout that is not a
//! terminal. Untrusted text is escaped ([`crate::text`]), and a space inside
//! a cell is written `\x20` so that every line splits into the same columns;
//! empty cells are `-`.

use crate::snapshot::{ExclusionReport, Snapshot};
use crate::text::{format_secs, sanitize, sanitize_message};

/// The column names, in order (GENERATION last, so that the columns before
/// it keep their places for scripts written before it).
pub(crate) const HEADER: [&str; 10] = [
    "TARGET",
    "PREFIX",
    "STATE",
    "HOLDER",
    "AGE",
    "TTL",
    "EXPIRES",
    "SKEW",
    "EXCLUSION",
    "GENERATION",
];

fn exclusion(e: ExclusionReport) -> &'static str {
    match e {
        ExclusionReport::Conditional => "conditional",
        ExclusionReport::BestEffort => "best_effort",
        ExclusionReport::Ignored => "ignored",
        ExclusionReport::Unprobed => "unprobed",
        ExclusionReport::Error => "error",
    }
}

/// The rows of `snap`: one per prefix, and one with state `error` per
/// target or prefix that could not be gathered (the reason is in the
/// sentences of [`problems`]).
pub(crate) fn rows(snap: &Snapshot) -> Vec<[String; 10]> {
    let dash = || "-".to_owned();
    let cell = |t: &str| sanitize(t).replace(' ', "\\x20");
    let secs = |v: Option<f64>| v.map(format_secs).unwrap_or_else(dash);
    let mut out = Vec::new();
    for t in &snap.targets {
        let url = cell(&t.url);
        if t.error.is_some() {
            out.push([
                url.clone(),
                dash(),
                "error".into(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
            ]);
        }
        for e in &t.errors {
            out.push([
                url.clone(),
                cell(&e.prefix),
                "error".into(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
            ]);
        }
        for p in &t.prefixes {
            let holder = p.holder().map(|r| cell(&r.instance_id)).unwrap_or_default();
            out.push([
                url.clone(),
                if p.prefix.is_empty() {
                    dash()
                } else {
                    cell(&p.prefix)
                },
                if p.age_unknown {
                    "unknown".into()
                } else {
                    p.state.as_str().into()
                },
                if holder.is_empty() { dash() } else { holder },
                if p.age_unknown {
                    "?".into()
                } else {
                    secs(p.age_s)
                },
                p.record
                    .as_ref()
                    .map(|r| format!("{}s", r.ttl_s))
                    .unwrap_or_else(dash),
                if p.age_unknown {
                    "?".into()
                } else {
                    secs(p.expires_in_s)
                },
                secs(p.holder_skew_s),
                exclusion(p.exclusion).into(),
                p.record
                    .as_ref()
                    .and_then(|r| r.generation)
                    .map_or_else(dash, |g| g.to_string()),
            ]);
        }
    }
    out
}

/// The table: a header line, then [`rows`], columns padded to align.
pub(crate) fn render(snap: &Snapshot) -> String {
    let rows = rows(snap);
    let mut widths: Vec<usize> = HEADER.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.zip(&widths).enumerate() {
            if i + 1 == HEADER.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.extend(std::iter::repeat_n(' ', w - c.chars().count() + 2));
            }
        }
        s
    };
    let mut out = line(&mut HEADER.iter().copied());
    for r in &rows {
        out.push('\n');
        out.push_str(&line(&mut r.iter().map(String::as_str)));
    }
    out
}

/// What the table cannot show, as sentences for stderr: targets and
/// prefixes not gathered, ages unknown, leases deeper than the listing
/// went, the pod scan's failure, its notes
/// when the pod is in question, and its verdicts.
pub(crate) fn problems(snap: &Snapshot) -> Vec<String> {
    let s = sanitize;
    // Error messages name what they are about already escaped.
    let m = sanitize_message;
    let mut out = Vec::new();
    for t in &snap.targets {
        if let Some(e) = &t.error {
            out.push(format!("could not gather {}: {}", s(&t.url), m(e)));
        }
        for e in &t.errors {
            out.push(format!(
                "could not read {}: {}",
                s(&t.prefix_url(&e.prefix)),
                m(&e.error)
            ));
        }
        for p in t.prefixes.iter().filter(|p| p.age_unknown) {
            if let Some(pr) = &p.problem {
                out.push(format!("{}: {}", s(&t.prefix_url(&p.prefix)), s(pr)));
            }
        }
        out.extend(t.deeper_note());
    }
    if let Some(e) = &snap.pod_error {
        out.push(s(e));
    }
    // What the pod scan could not know, when it decides the exit code.
    if snap.pod_in_question() {
        for n in &snap.pod.notes {
            out.push(format!("pod: {}", s(n)));
        }
    }
    if let Some(node) = &snap.pod.node {
        out.push(format!("node: {}", node.summary.line()));
    }
    for v in &snap.pod.verdicts {
        let pod = v
            .pod
            .as_deref()
            .map(|p| format!(" in {}", s(p)))
            .unwrap_or_default();
        out.push(format!(
            "pod verdict {}{pod}: {}",
            v.kind.as_str(),
            s(&v.message)
        ));
    }
    out
}
