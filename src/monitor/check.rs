//! `leasectl check`: a Nagios / Icinga / Sensu plugin.
//!
//! One status line `LEASES STATUS - summary | perfdata`, then one line per
//! lease or verdict that is not OK (the plugin's long output). The exit
//! status follows the plugin convention, not leasectl's own:
//!
//! | code | status | when |
//! |---|---|---|
//! | 0 | OK | everything gathered, no threshold crossed |
//! | 1 | WARNING | a stale / suspect / malformed lease whose state is not in `--crit-state`, an age over `--warn-age`, or every prefix of a TARGET absent while LEASE keys lie deeper (the `--depth` that finds them is named) |
//! | 2 | CRITICAL | a lease whose state is in `--crit-state`, an age over `--crit-age`, fewer leases than `--min-leases`, or a pod verdict |
//! | 3 | UNKNOWN | something could not be gathered or judged (and nothing is CRITICAL), or bad usage |
//!
//! CRITICAL outranks UNKNOWN (a known problem is the one to act on); UNKNOWN
//! outranks WARNING and OK: what could not be gathered is never OK.

use std::fmt::Write as _;
use std::time::Duration;

use crate::bucket::LeaseState;
use crate::exit::Exit;
use crate::snapshot::{PrefixReport, Snapshot, TargetReport};
use crate::text::{format_secs, sanitize, sanitize_message};
use crate::writer::scan::PodState;

/// A plugin status, ordered by how much it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// 0.
    Ok,
    /// 1.
    Warning,
    /// 3 (ranked between WARNING and CRITICAL).
    Unknown,
    /// 2.
    Critical,
}

impl Status {
    /// The plugin exit status.
    pub(crate) const fn exit(self) -> Exit {
        use crate::exit::{CheckStatus, Exit};
        match self {
            Status::Ok => Exit::Check(CheckStatus::Ok),
            Status::Warning => Exit::Check(CheckStatus::Warning),
            Status::Critical => Exit::Check(CheckStatus::Critical),
            Status::Unknown => Exit::Check(CheckStatus::Unknown),
        }
    }

    /// `OK`, `WARNING`, `CRITICAL` or `UNKNOWN`.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Warning => "WARNING",
            Status::Critical => "CRITICAL",
            Status::Unknown => "UNKNOWN",
        }
    }

    fn rank(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::Warning => 1,
            Status::Unknown => 2,
            Status::Critical => 3,
        }
    }

    fn max(self, other: Status) -> Status {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }
}

/// The check's thresholds.
#[derive(Debug, Clone)]
pub(crate) struct Thresholds {
    /// WARNING when a lease's age is over this.
    pub(crate) warn_age: Option<Duration>,
    /// CRITICAL when a lease's age is over this.
    pub(crate) crit_age: Option<Duration>,
    /// These states are CRITICAL; the other states needing attention
    /// (stale, suspect, malformed) are WARNING. `absent` may be listed.
    pub(crate) crit_states: Vec<LeaseState>,
    /// CRITICAL when fewer leases than this are found (rows that are not
    /// absent, over every target). 0: no minimum.
    pub(crate) min_leases: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            warn_age: None,
            crit_age: None,
            crit_states: vec![
                LeaseState::Stale,
                LeaseState::Suspect,
                LeaseState::Malformed,
            ],
            min_leases: 0,
        }
    }
}

/// The check's result: the exit status and the whole plugin output.
#[derive(Debug, Clone)]
pub(crate) struct CheckResult {
    /// The status (its [`Status::exit`] is the exit status).
    pub status: Status,
    /// The output: the status line with perfdata, then the long output.
    pub output: String,
}

/// Untrusted or user text for the plugin output: escaped per [`crate::text`],
/// and `|` (which starts the perfdata) written `\x7c`.
fn plugin_text(s: &str) -> String {
    sanitize(s).replace('|', "\\x7c")
}

/// An error message for the plugin output: its pieces from outside were
/// escaped when it was made, so only what is still raw is escaped
/// ([`crate::text::sanitize_message`]), and `|` is written `\x7c`.
fn plugin_message(s: &str) -> String {
    sanitize_message(s).replace('|', "\\x7c")
}

/// A number for perfdata: seconds rounded to the millisecond, no exponent.
fn num(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0;
    if r == 0.0 {
        return "0".to_owned();
    }
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Evaluates `snap` against `t`.
pub(crate) fn evaluate(snap: &Snapshot, t: &Thresholds) -> CheckResult {
    let mut tally = Tally::default();
    for target in &snap.targets {
        tally.target(target, t);
    }
    tally.pod(snap);
    let mut status = Status::Ok;
    for (s, _) in &tally.details {
        status = status.max(*s);
    }
    if let Some(line) = min_leases_line(tally.present(), t.min_leases) {
        tally.details.push((Status::Critical, line));
        status = status.max(Status::Critical);
    }
    let mut summary = summary(snap, &tally);
    // Worst first, so the first long-output line explains the status.
    tally
        .details
        .sort_by_key(|(s, _)| std::cmp::Reverse(s.rank()));
    if let Some((_, first)) = tally.details.first() {
        let shown = first
            .split_once(' ')
            .map_or(first.as_str(), |(_, rest)| rest);
        let _ = write!(summary, "; {shown}");
    }
    let perf = perfdata(snap, &tally, t);
    let mut output = format!("LEASES {} - {summary} | {perf}", status.name());
    long_output(&mut output, &tally);
    CheckResult { status, output }
}

/// What [`evaluate`] has found so far: the long-output lines with their
/// statuses, the rows by state and the extremes for the perfdata.
#[derive(Default)]
struct Tally {
    /// Long-output lines that can change the status, in the order found.
    details: Vec<(Status, String)>,
    /// Long-output lines that change nothing (pod notes when the pod is not
    /// in question), printed last.
    info: Vec<String>,
    /// Rows by state: fresh, stale, suspect, malformed, absent, released.
    counts: [usize; 6],
    /// What could not be gathered or judged.
    errors: usize,
    /// The oldest lease's age (seconds), among the rows whose age is known.
    max_age: Option<f64>,
    /// The soonest expiry (seconds; negative: expired), likewise.
    min_expires: Option<f64>,
}

impl Tally {
    /// Every row found, absent ones included.
    fn leases(&self) -> usize {
        self.counts.iter().sum()
    }

    /// The rows that hold a lease record: neither absent nor released.
    fn present(&self) -> usize {
        self.leases() - self.counts[4] - self.counts[5]
    }

    /// One target: what could not be gathered, its clock note, its rows.
    fn target(&mut self, target: &TargetReport, t: &Thresholds) {
        let url = plugin_text(&target.url);
        if let Some(e) = &target.error {
            self.errors += 1;
            self.details.push((
                Status::Unknown,
                format!("UNKNOWN {url} could not be gathered: {}", plugin_message(e)),
            ));
        }
        if let Some(n) = &target.server_clock_note {
            self.details
                .push((Status::Ok, format!("NOTE {url}: {}", plugin_text(n))));
        }
        for e in &target.errors {
            self.errors += 1;
            self.details.push((
                Status::Unknown,
                format!(
                    "UNKNOWN {} could not be read: {}",
                    plugin_text(&target.prefix_url(&e.prefix)),
                    plugin_message(&e.error)
                ),
            ));
        }
        for p in &target.prefixes {
            self.row(target, p, t);
        }
        if let Some(note) = target.deeper_note() {
            self.details.push((
                Status::Warning,
                format!("WARNING {}", plugin_message(&note)),
            ));
        }
    }

    /// One row: counted by state; UNKNOWN when its age is unknown, else
    /// judged by [`row_line`].
    fn row(&mut self, target: &TargetReport, p: &PrefixReport, t: &Thresholds) {
        let idx = match p.state {
            LeaseState::Fresh => 0,
            LeaseState::Stale => 1,
            LeaseState::Suspect => 2,
            LeaseState::Malformed => 3,
            LeaseState::Absent => 4,
            LeaseState::Released => 5,
        };
        self.counts[idx] += 1;
        let where_ = plugin_text(&target.prefix_url(&p.prefix));
        if p.age_unknown {
            self.errors += 1;
            self.details.push((
                Status::Unknown,
                format!(
                    "UNKNOWN {where_}: {}",
                    plugin_text(p.problem.as_deref().unwrap_or("its age is unknown"))
                ),
            ));
            return;
        }
        if let Some(a) = p.age_s {
            self.max_age = Some(self.max_age.map_or(a, |m: f64| m.max(a)));
        }
        if let Some(x) = p.expires_in_s {
            self.min_expires = Some(self.min_expires.map_or(x, |m: f64| m.min(x)));
        }
        if let Some(line) = row_line(p, &where_, t) {
            self.details.push(line);
        }
    }

    /// The pod: its scan error, its notes (UNKNOWN when the pod is in
    /// question), its verdicts (CRITICAL).
    fn pod(&mut self, snap: &Snapshot) {
        if let Some(e) = &snap.pod_error {
            self.errors += 1;
            self.details
                .push((Status::Unknown, format!("UNKNOWN pod: {}", plugin_text(e))));
        }
        // An incomplete pod (processes that could not be inspected, a lock file
        // whose state is unknown) is UNKNOWN, never OK, when the pod is in
        // question; otherwise its notes are long-output lines that change nothing.
        for n in &snap.pod.notes {
            if snap.pod_in_question() {
                self.errors += 1;
                self.details
                    .push((Status::Unknown, format!("UNKNOWN pod: {}", plugin_text(n))));
            } else {
                self.info.push(format!("NOTE pod: {}", plugin_text(n)));
            }
        }
        for v in &snap.pod.verdicts {
            // The node view names the pod each verdict is about.
            let pod = v
                .pod
                .as_deref()
                .map(|p| format!(" in {}", plugin_text(p)))
                .unwrap_or_default();
            self.details.push((
                Status::Critical,
                format!(
                    "CRITICAL pod verdict {}{pod}: {}",
                    v.kind.as_str(),
                    plugin_text(&v.message)
                ),
            ));
        }
    }
}

/// A gathered row's status and why: its state (CRITICAL when in
/// `--crit-state`, WARNING when it needs attention or carries a problem),
/// raised by `--crit-age` / `--warn-age`.
fn row_status(p: &PrefixReport, t: &Thresholds) -> (Status, Vec<String>) {
    let mut row = if t.crit_states.contains(&p.state) {
        Status::Critical
    } else if p.state.needs_attention() {
        Status::Warning
    } else {
        Status::Ok
    };
    // A fresh or stale record can still carry a problem (renewed_at
    // before acquired_at): worth a look.
    if row == Status::Ok && p.problem.is_some() {
        row = Status::Warning;
    }
    let mut why = Vec::new();
    if row != Status::Ok {
        why.push(format!("is {}", p.state.as_str()));
    }
    if let Some(age) = p.age_s.filter(|_| p.record.is_some()) {
        if let Some(c) = t.crit_age.filter(|c| age > c.as_secs_f64()) {
            row = row.max(Status::Critical);
            why.push(format!(
                "age {} over {}",
                format_secs(age),
                format_secs(c.as_secs_f64())
            ));
        } else if let Some(w) = t.warn_age.filter(|w| age > w.as_secs_f64()) {
            row = row.max(Status::Warning);
            why.push(format!(
                "age {} over {}",
                format_secs(age),
                format_secs(w.as_secs_f64())
            ));
        }
    }
    (row, why)
}

/// A gathered row's long-output line and its status; `None` when it is OK.
/// `where_` is the row's escaped prefix URL.
fn row_line(p: &PrefixReport, where_: &str, t: &Thresholds) -> Option<(Status, String)> {
    let (row, why) = row_status(p, t);
    if row == Status::Ok {
        return None;
    }
    let mut line = format!("{} {where_} {}", row.name(), why.join(", "));
    if let Some(r) = &p.record {
        let _ = write!(
            line,
            " (holder {}, TTL {} s",
            plugin_text(&r.instance_id),
            r.ttl_s
        );
        if let Some(x) = p.expires_in_s {
            if x < 0.0 {
                let _ = write!(line, ", expired {} ago", format_secs(-x));
            } else {
                let _ = write!(line, ", expires in {}", format_secs(x));
            }
        }
        if let Some(g) = r.generation {
            let _ = write!(line, ", generation {g}");
        }
        line.push(')');
    }
    if let Some(problem) = &p.problem {
        let _ = write!(line, ": {}", plugin_text(problem));
    }
    Some((row, line))
}

/// The CRITICAL line when fewer than `--min-leases` leases are present.
fn min_leases_line(present: usize, min_leases: usize) -> Option<String> {
    (present < min_leases).then(|| {
        format!(
            "CRITICAL {present} lease{} found where at least {} {} expected (--min-leases): \
             a holder is missing or a TARGET is wrong",
            if present == 1 { "" } else { "s" },
            min_leases,
            if min_leases == 1 { "is" } else { "are" }
        )
    })
}

/// The status line's summary (before the worst detail): the rows by state,
/// what was not gathered, the pod verdicts, the TARGETs with nothing found.
fn summary(snap: &Snapshot, tally: &Tally) -> String {
    let [fresh, stale, suspect, malformed, absent, released] = tally.counts;
    // Leases are the rows with a LEASE (what --min-leases counts); prefixes
    // without one are said apart.
    let leases = tally.present();
    // A TARGET under which nothing at all was found is said so: a typo in a
    // TARGET would otherwise look like a healthy, empty fleet.
    let empty: Vec<String> = snap
        .targets
        .iter()
        .filter(|t| t.error.is_none() && t.errors.is_empty() && t.prefixes.is_empty())
        .map(|t| plugin_text(&t.url))
        .collect();
    let mut summary = format!(
        "{leases} lease{} ({fresh} fresh, {stale} stale, {suspect} suspect, {malformed} malformed)",
        if leases == 1 { "" } else { "s" }
    );
    if absent > 0 {
        let _ = write!(
            summary,
            ", {absent} prefix{} without a LEASE",
            if absent == 1 { "" } else { "es" }
        );
    }
    if released > 0 {
        let _ = write!(
            summary,
            ", {released} prefix{} released (free)",
            if released == 1 { "" } else { "es" }
        );
    }
    if tally.errors > 0 {
        let _ = write!(summary, ", {} not gathered", tally.errors);
    }
    if !snap.pod.verdicts.is_empty() {
        let _ = write!(summary, ", {} pod verdict(s)", snap.pod.verdicts.len());
    }
    if let Some(node) = &snap.pod.node {
        let _ = write!(summary, ", node: {}", node.summary.line());
    }
    if !empty.is_empty() {
        let _ = write!(summary, ", nothing found under {}", empty.join(", "));
    }
    summary
}

/// The perfdata: the rows by state, errors, verdicts, the oldest age (with
/// the thresholds) and the soonest expiry.
fn perfdata(snap: &Snapshot, tally: &Tally, t: &Thresholds) -> String {
    let [fresh, stale, suspect, malformed, absent, released] = tally.counts;
    let errors = tally.errors;
    let secs = |d: Option<Duration>| d.map(|d| num(d.as_secs_f64())).unwrap_or_default();
    let mut perf = format!(
        "fresh={fresh};;;0 stale={stale};;;0 suspect={suspect};;;0 malformed={malformed};;;0 \
         absent={absent};;;0 released={released};;;0 errors={errors};;;0 verdicts={};;;0",
        snap.pod.verdicts.len()
    );
    if let Some(a) = tally.max_age {
        let _ = write!(
            perf,
            " age={}s;{};{}",
            num(a),
            secs(t.warn_age),
            secs(t.crit_age)
        );
    }
    if let Some(x) = tally.min_expires {
        let _ = write!(perf, " expires_in={}s", num(x));
    }
    if let Some(node) = &snap.pod.node {
        let _ = write!(perf, " pods={};;;0", node.summary.pods);
        for s in PodState::ALL {
            let _ = write!(perf, " pods_{}={};;;0", s.as_str(), node.summary.count(s));
        }
    }
    perf
}

/// Appends the long output to `output`: the details (at most 50, then how
/// many more), then the informational lines.
fn long_output(output: &mut String, tally: &Tally) {
    const MAX_LINES: usize = 50;
    for (_, line) in tally.details.iter().take(MAX_LINES) {
        output.push('\n');
        output.push_str(line);
    }
    if tally.details.len() > MAX_LINES {
        let _ = write!(output, "\n… and {} more", tally.details.len() - MAX_LINES);
    }
    for line in &tally.info {
        output.push('\n');
        output.push_str(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::snapshot::{ReaderClock, TargetReport, SCHEMA_VERSION};

    #[test]
    fn ranks_critical_over_unknown_over_warning() {
        assert_eq!(Status::Warning.max(Status::Unknown), Status::Unknown);
        assert_eq!(Status::Critical.max(Status::Unknown), Status::Critical);
        assert_eq!(Status::Ok.max(Status::Warning), Status::Warning);
    }

    #[test]
    fn perf_numbers_have_no_exponent() {
        assert_eq!(num(131.4), "131.4");
        assert_eq!(num(-0.0004), "0");
        assert_eq!(num(30.0), "30");
        assert_eq!(plugin_text("a|b\x1b"), "a\\x7cb\\x1b");
    }

    fn empty_snapshot(urls: &[&str]) -> Snapshot {
        let now = chrono::Utc::now();
        Snapshot {
            schema_version: SCHEMA_VERSION,
            generated_at: now,
            reader_clock: ReaderClock {
                now,
                server_offset_s: None,
                server_offset_error_s: None,
            },
            targets: urls
                .iter()
                .map(|u| TargetReport {
                    url: (*u).to_owned(),
                    endpoint: "local".into(),
                    endpoint_url: None,
                    region: None,
                    addressing_style: None,
                    bucket: None,
                    error: None,
                    errors: Vec::new(),
                    prefixes: Vec::new(),
                    server_offset_s: None,
                    server_offset_error_s: None,
                    server_clock_note: None,
                    deeper_leases: None,
                })
                .collect(),
            pod: Default::default(),
            pod_error: None,
            audit_log: None,
        }
    }

    #[test]
    fn nothing_found_is_said_and_min_leases_makes_it_critical() {
        let snap = empty_snapshot(&["file:///srv/typo/"]);
        let r = evaluate(&snap, &Thresholds::default());
        assert_eq!(r.status, Status::Ok);
        assert!(
            r.output.contains("nothing found under file:///srv/typo/"),
            "{}",
            r.output
        );
        let r = evaluate(
            &snap,
            &Thresholds {
                min_leases: 2,
                ..Thresholds::default()
            },
        );
        assert_eq!(r.status, Status::Critical);
        assert!(
            r.output
                .contains("0 leases found where at least 2 are expected (--min-leases)"),
            "{}",
            r.output
        );
    }

    /// Issue 32 §3: released prefixes are free, said apart, not leases.
    #[test]
    fn released_prefixes_are_free_not_leases() {
        let tally = Tally {
            counts: [1, 0, 0, 0, 0, 2],
            ..Tally::default()
        };
        let s = summary(&empty_snapshot(&[]), &tally);
        assert!(
            s.starts_with(
                "1 lease (1 fresh, 0 stale, 0 suspect, 0 malformed), 2 prefixes released (free)"
            ),
            "{s}"
        );
    }

    /// Issue 35 trip 14: the lease count is what `--min-leases` counts (rows
    /// with a LEASE); prefixes without one are said apart, not as leases.
    #[test]
    fn prefixes_without_a_lease_are_not_counted_as_leases() {
        let tally = Tally {
            counts: [2, 1, 0, 0, 2, 0],
            ..Tally::default()
        };
        let s = summary(&empty_snapshot(&[]), &tally);
        assert!(
            s.starts_with(
                "3 leases (2 fresh, 1 stale, 0 suspect, 0 malformed), 2 prefixes without a LEASE"
            ),
            "{s}"
        );
    }
}
