//! NDJSON: `-o ndjson` (one snapshot as lines) and `--watch` (a stream of
//! changes). Every line is one JSON object with a `type`:
//!
//! - `lease`: a prefix's row, the same fields as a `--json` row, plus `type`,
//!   `time`, `target` and the target's `endpoint`, `region` and
//!   `addressing_style` (as in `--json`; `error` lines carry them too).
//!   `--watch` writes one when the prefix is first seen and whenever its
//!   state, holder or ETag changes (a renewal changes the ETag);
//! - `gone`: `--watch` only, a prefix no longer listed (`target`, `prefix`);
//! - `error`: a target (`prefix` null) or prefix that could not be gathered;
//!   `--watch` writes it when the error appears or its text changes;
//! - `cleared`: `--watch` only, an error written before is gone (`target`,
//!   `prefix`, and the error it `was`);
//! - `holder_change`: `--watch` only, a prefix's holder changed (the
//!   console's holder history, [`crate::snapshot::history`]): `time`,
//!   `target`, `prefix`, `how` (`takeover`, `handover`, `after_expiry`,
//!   `acquired`, `released`, `changed_while_fresh`), `previous_holder`,
//!   `previous_generation`, `holder`, `generation` (null where unknown or
//!   none), and for a takeover or hand-over the audit log's `takeover`;
//! - `pod`: the pod's verdicts and `pod_error`, when they change;
//! - `heartbeat` (`--watch`) or `summary` (`-o ndjson`, last): counts, the
//!   schema version, the audit log read for `last_takeover` (`audit_log`)
//!   and the exit code the snapshot would give.
//!
//! Strings are escaped as in `--json`. `--watch` keeps only the last line of
//! each prefix currently listed (bounded memory), and ends with status 0 on
//! SIGTERM, SIGINT or SIGHUP, 141 when stdout's reader goes away.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::clock::{rfc3339, SharedClock};
use crate::snapshot::history::{ChangeKind, History, HolderChange};
use crate::snapshot::takeovers::FollowedLog;
use crate::snapshot::{
    AuditLogReport, Gatherer, LastTakeover, PrefixReport, Snapshot, Streamed, Tally, TargetReport,
    SCHEMA_VERSION,
};
use crate::writer::scan::Verdict;

use crate::exit::{say, Exit};
use crate::snapshot::Recipe;
use crate::stdout::Checked;
use crate::store::AddressingStyle;
use crate::text::to_json_line;

/// Where a target's requests go, as in `--json`: `endpoint` (the URL, null
/// for AWS's own endpoint and a local store), `region`, `addressing_style`.
#[derive(Serialize)]
struct Where<'a> {
    endpoint: Option<&'a str>,
    region: Option<&'a str>,
    addressing_style: Option<AddressingStyle>,
}

impl<'a> Where<'a> {
    fn of(t: &'a TargetReport) -> Self {
        Self {
            endpoint: t.endpoint_url.as_deref(),
            region: t.region.as_deref(),
            addressing_style: t.addressing_style,
        }
    }
}

#[derive(Serialize)]
struct LeaseLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    time: String,
    target: &'a str,
    #[serde(flatten)]
    at: Where<'a>,
    #[serde(flatten)]
    row: &'a PrefixReport,
}

#[derive(Serialize)]
struct GoneLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    time: String,
    target: &'a str,
    prefix: &'a str,
}

#[derive(Serialize)]
struct ErrorLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    time: String,
    target: &'a str,
    #[serde(flatten)]
    at: Where<'a>,
    prefix: Option<&'a str>,
    error: &'a str,
}

/// An error reported earlier that is gone: the target (or prefix) was
/// gathered again.
#[derive(Serialize)]
struct ClearedLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    time: String,
    target: &'a str,
    prefix: Option<&'a str>,
    /// The error that was reported.
    was: &'a str,
}

/// A change of holder seen by `--watch` (module docs).
#[derive(Serialize)]
struct HolderChangeLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    time: String,
    target: &'a str,
    prefix: &'a str,
    how: ChangeKind,
    previous_holder: Option<&'a str>,
    previous_generation: Option<u64>,
    holder: Option<&'a str>,
    generation: Option<u64>,
    takeover: Option<&'a LastTakeover>,
}

fn holder_change_line(target: &str, prefix: &str, c: &HolderChange) -> String {
    line(&HolderChangeLine {
        kind: "holder_change",
        time: ts(c.at),
        target,
        prefix,
        how: c.kind,
        previous_holder: c.previous_id.as_deref(),
        previous_generation: c.previous_generation,
        holder: c.holder_id.as_deref(),
        generation: c.generation,
        takeover: c.takeover.as_deref(),
    })
}

#[derive(Serialize)]
struct PodLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    time: String,
    verdicts: &'a [Verdict],
    pod_error: Option<&'a str>,
}

#[derive(Serialize)]
struct CountLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    time: String,
    schema_version: &'static str,
    targets: usize,
    prefixes: usize,
    attention: usize,
    errors: usize,
    verdicts: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit_log: Option<&'a AuditLogReport>,
    exit_code: i32,
}

fn ts(t: DateTime<Utc>) -> String {
    rfc3339(t, SecondsFormat::Millis)
}

fn line<T: Serialize>(v: &T) -> String {
    // Every line type is plain data: serialising it cannot fail.
    to_json_line(v).unwrap_or_default()
}

fn counts(snap: &Snapshot, kind: &'static str) -> String {
    let rows = || snap.targets.iter().flat_map(|t| &t.prefixes);
    count_line(
        snap,
        kind,
        rows().count(),
        rows().filter(|p| p.state.needs_attention()).count(),
        snap.exit_code(),
    )
}

/// The `kind` line (`summary`, `heartbeat`) of `snap`, with its rows'
/// count, how many need attention, and the exit code.
fn count_line(
    snap: &Snapshot,
    kind: &'static str,
    prefixes: usize,
    attention: usize,
    exit: Exit,
) -> String {
    line(&CountLine {
        kind,
        time: ts(snap.generated_at),
        schema_version: SCHEMA_VERSION,
        targets: snap.targets.len(),
        prefixes,
        attention,
        errors: snap
            .targets
            .iter()
            .map(|t| usize::from(t.error.is_some()) + t.errors.len())
            .sum(),
        verdicts: snap.pod.verdicts.len(),
        audit_log: snap.audit_log.as_ref(),
        exit_code: exit.code(),
    })
}

/// The `error` lines of target `t` at `time`: its own error, then one per
/// prefix whose LEASE could not be read.
fn error_lines(t: &TargetReport, time: &str, emit: &mut impl FnMut(String)) {
    if let Some(e) = &t.error {
        emit(line(&ErrorLine {
            kind: "error",
            time: time.to_owned(),
            target: &t.url,
            at: Where::of(t),
            prefix: None,
            error: e,
        }));
    }
    for e in &t.errors {
        emit(line(&ErrorLine {
            kind: "error",
            time: time.to_owned(),
            target: &t.url,
            at: Where::of(t),
            prefix: Some(&e.prefix),
            error: &e.error,
        }));
    }
}

/// `-o ndjson` of a streamed gather ([`crate::snapshot::gather_streamed`]):
/// the lines of one thing it handed on — a `lease` line for a row (its
/// `time`: when the row was judged), a target's `error` lines once it is
/// done — each given to `emit`.
pub(crate) fn streamed_lines(item: Streamed<'_>, mut emit: impl FnMut(String)) {
    match item {
        Streamed::Row { target, row, at } => emit(line(&LeaseLine {
            kind: "lease",
            time: ts(at),
            target: &target.url,
            at: Where::of(target),
            row,
        })),
        Streamed::Target { report: t, at } => {
            let time = ts(at);
            error_lines(t, &time, &mut emit);
        }
    }
}

/// The last lines of a streamed `-o ndjson`: the pod's (when scanned), then
/// the `summary`, of `rest` (the snapshot without its rows) and the rows'
/// `tally`. Returns the exit code the summary names.
pub(crate) fn streamed_summary(
    rest: &Snapshot,
    tally: &Tally,
    pod_scanned: bool,
    mut emit: impl FnMut(String),
) -> Exit {
    if pod_scanned {
        emit(line(&PodLine {
            kind: "pod",
            time: ts(rest.generated_at),
            verdicts: &rest.pod.verdicts,
            pod_error: rest.pod_error.as_deref(),
        }));
    }
    let exit = tally.exit_code(rest);
    emit(count_line(
        rest,
        "summary",
        tally.rows,
        tally.attention,
        exit,
    ));
    exit
}

/// What a prefix looked like when its last line was written.
#[derive(PartialEq, Eq)]
struct Seen {
    state: &'static str,
    holder: Option<String>,
    etag: Option<String>,
}

fn seen(p: &PrefixReport) -> Seen {
    Seen {
        state: if p.age_unknown {
            "unknown"
        } else {
            p.state.as_str()
        },
        holder: p.holder().map(|r| r.instance_id.clone()),
        etag: p.etag.clone(),
    }
}

/// The pod's verdicts (kind and pids) and scan error, as last written.
type PodSeen = (Vec<(String, Vec<u32>)>, Option<String>);

/// The memory of a `--watch` stream: the last state of every prefix
/// currently listed, the errors and the pod's verdicts.
#[derive(Default)]
pub(crate) struct Watcher {
    leases: BTreeMap<(String, String), Seen>,
    errors: BTreeMap<(String, Option<String>), String>,
    pod: Option<PodSeen>,
}

impl Watcher {
    /// The lines `snap` adds to the stream, what changed since the last one,
    /// each given to `emit` as it is made (never held together: a first pass
    /// at 50,000 prefixes is 30 MB of lines).
    pub(crate) fn changes(
        &mut self,
        snap: &Snapshot,
        pod_scanned: bool,
        mut emit: impl FnMut(String),
    ) {
        let time = ts(snap.generated_at);
        let mut leases = BTreeMap::new();
        let mut errors = BTreeMap::new();
        for t in &snap.targets {
            let mut errs: Vec<(Option<&str>, &str)> = Vec::new();
            if let Some(e) = &t.error {
                errs.push((None, e));
            }
            errs.extend(
                t.errors
                    .iter()
                    .map(|e| (Some(e.prefix.as_str()), e.error.as_str())),
            );
            for (prefix, error) in errs {
                let key = (t.url.clone(), prefix.map(str::to_owned));
                if self.errors.get(&key).map(String::as_str) != Some(error) {
                    emit(line(&ErrorLine {
                        kind: "error",
                        time: time.clone(),
                        target: &t.url,
                        at: Where::of(t),
                        prefix,
                        error,
                    }));
                }
                errors.insert(key, error.to_owned());
            }
            for p in &t.prefixes {
                let key = (t.url.clone(), p.prefix.clone());
                let now = seen(p);
                if self.leases.get(&key) != Some(&now) {
                    emit(line(&LeaseLine {
                        kind: "lease",
                        time: time.clone(),
                        target: &t.url,
                        at: Where::of(t),
                        row: p,
                    }));
                }
                leases.insert(key, now);
            }
            // A target that could not be listed says nothing about its
            // prefixes: they are kept, not reported gone.
            if t.error.is_some() {
                for (k, v) in std::mem::take(&mut self.leases) {
                    if k.0 == t.url {
                        leases.insert(k, v);
                    } else {
                        self.leases.insert(k, v);
                    }
                }
            }
        }
        for (target, prefix) in self.leases.keys() {
            let errored = errors.contains_key(&(target.clone(), Some(prefix.clone())));
            if !leases.contains_key(&(target.clone(), prefix.clone())) && !errored {
                emit(line(&GoneLine {
                    kind: "gone",
                    time: time.clone(),
                    target,
                    prefix,
                }));
            }
        }
        // A prefix that could not be read this time is kept as last seen.
        for (k, v) in std::mem::take(&mut self.leases) {
            if !leases.contains_key(&k) && errors.contains_key(&(k.0.clone(), Some(k.1.clone()))) {
                leases.insert(k, v);
            }
        }
        self.leases = leases;
        for ((target, prefix), was) in &self.errors {
            // A prefix's error is not cleared by its whole target failing.
            let target_failed = errors.contains_key(&(target.clone(), None));
            if !errors.contains_key(&(target.clone(), prefix.clone())) && !target_failed {
                emit(line(&ClearedLine {
                    kind: "cleared",
                    time: time.clone(),
                    target,
                    prefix: prefix.as_deref(),
                    was,
                }));
            }
        }
        self.errors = errors;
        if pod_scanned {
            let pod = (
                snap.pod
                    .verdicts
                    .iter()
                    .map(|v| (v.kind.as_str().to_owned(), v.pids.clone()))
                    .collect(),
                snap.pod_error.clone(),
            );
            if self.pod.as_ref() != Some(&pod) {
                emit(line(&PodLine {
                    kind: "pod",
                    time,
                    verdicts: &snap.pod.verdicts,
                    pod_error: snap.pod_error.as_deref(),
                }));
            }
            self.pod = Some(pod);
        }
    }
}

/// `--watch`'s timing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WatchOptions {
    /// Between two gathers.
    pub(crate) interval: Duration,
    /// Between two heartbeats.
    pub(crate) heartbeat: Duration,
}

/// The audit entries `--watch` keeps to classify holder changes.
const AUDIT_KEEP: usize = 200;

/// Streams changes until a signal ([`Exit::Ok`]) or a closed stdout
/// ([`Exit::ClosedPipe`], 141); another write error is [`Exit::Failed`].
/// `(audit_path, requested)`: leasectl's audit log, followed to set each
/// row's `last_takeover` and to name takeovers in `holder_change` lines
/// (None: none is named), and whether `--audit-log` named it (only then does
/// an unreadable log make the exit code 1).
pub(crate) async fn watch(
    mut gatherer: Gatherer,
    clock: SharedClock,
    extras: Recipe,
    opts: WatchOptions,
    (audit_path, audit_requested): (Option<std::path::PathBuf>, bool),
) -> Exit {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        say("could not install the signal handlers for --watch");
        return Exit::Failed;
    };
    let mut watcher = Watcher::default();
    let mut history = History::new();
    let mut log = Some(FollowedLog::new(audit_path.clone(), AUDIT_KEEP));
    let mut ticker = tokio::time::interval(opts.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_beat: Option<tokio::time::Instant> = None;
    // Not locked: the watch's futures may move between threads.
    let mut out = Checked::new(std::io::BufWriter::with_capacity(
        1 << 16,
        std::io::stdout(),
    ));
    loop {
        let mut snap = tokio::select! {
            _ = term.recv() => return Exit::Ok,
            _ = int.recv() => return Exit::Ok,
            _ = hup.recv() => return Exit::Ok,
            _ = ticker.tick() => {
                tokio::select! {
                    _ = term.recv() => return Exit::Ok,
                    _ = int.recv() => return Exit::Ok,
                    _ = hup.recv() => return Exit::Ok,
                    s = extras.take(&mut gatherer, &clock) => s,
                }
            }
        };
        // The audit log on a blocking thread (it is a file read).
        let followed = match log.take() {
            Some(mut l) => tokio::task::spawn_blocking(move || {
                l.poll();
                l
            })
            .await
            // The blocking task cannot fail short of a panic: start over.
            .unwrap_or_else(|_| FollowedLog::new(audit_path.clone(), AUDIT_KEEP)),
            None => FollowedLog::new(audit_path.clone(), AUDIT_KEEP),
        };
        followed.index().attach(&mut snap);
        snap.audit_log = Some(AuditLogReport {
            requested: audit_requested,
            ..followed.report().clone()
        });
        // A pass's lines are written as they are made, in one block that
        // ends with the heartbeat (when one is due), flushed at its end.
        let mut emit = |l: String| {
            let _ = out.write_all(l.as_bytes());
            let _ = out.write_all(b"\n");
        };
        watcher.changes(&snap, extras.scans_pod(), &mut emit);
        for ((target, prefix), c) in history.observe_changes(&snap, &followed.entries()) {
            emit(holder_change_line(&target, &prefix, &c));
        }
        log = Some(followed);
        let now = tokio::time::Instant::now();
        // Half an interval of slack: gathers are not exactly on the tick.
        if last_beat.is_none_or(|b| now.duration_since(b) + opts.interval / 2 >= opts.heartbeat) {
            emit(counts(&snap, "heartbeat"));
            last_beat = Some(now);
        }
        if let Err(exit) = out.flush_checked() {
            return exit;
        }
    }
}
