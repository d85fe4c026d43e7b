//! A gather that holds no rows (`-o ndjson`): each prefix's row is judged
//! and handed on as soon as its LEASE is read, in the listing's order, and
//! then dropped; a target's errors follow its rows (they are known only
//! once every read is done), and what is left — the targets' errors, the
//! pod, the audit log read — is a [`Snapshot`] without rows, with a
//! [`Tally`] of the rows for the summary and the exit code.
//!
//! The targets are gathered one after another (their rows are not
//! interleaved); each row is judged at the instant it is handed on (by the
//! service's clock offset as then known), not all at one instant.

use chrono::{DateTime, Utc};

use super::discovery::discover_paged;
use super::gather::service_clock;
use super::model::{
    PrefixError, PrefixReport, ReaderClock, Snapshot, TargetReport, SCHEMA_VERSION,
};
use super::options::GatherOptions;
use super::recipe::{read_takeovers, Recipe};
use super::schedule::Plan;
use super::takeovers::TakeoverIndex;
use super::target_read::{empty_report, OpenTarget, Ordered, Read, Reads};
use crate::bucket::Observed;
use crate::clock::SharedClock;
use crate::exit::Exit;
use crate::writer::scan::PodSnapshot;

/// What a streamed gather hands on, as it goes.
#[derive(Debug)]
pub enum Streamed<'a> {
    /// A row, judged now.
    Row {
        /// Its target: only its URL and where it lives (no rows, no errors yet).
        target: &'a TargetReport,
        /// The row.
        row: &'a PrefixReport,
        /// When it was judged (reader's clock, UTC).
        at: DateTime<Utc>,
    },
    /// A target is done.
    Target {
        /// Its `error`, `errors` and service clock (no rows).
        report: &'a TargetReport,
        /// When it was done (reader's clock, UTC).
        at: DateTime<Utc>,
    },
}

/// The rows of a streamed gather, counted for the summary and the exit code.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Rows handed on.
    pub rows: usize,
    /// Rows whose state needs attention ([`crate::bucket::LeaseState::needs_attention`]).
    pub attention: usize,
    /// Rows that need attention or have a problem (the exit code's 3).
    pub noted: usize,
    /// Rows whose age is unknown (the reader-clock rule; the exit code's 1).
    pub age_unknown: usize,
    /// The first rows that need attention or have a problem, as
    /// [`super::attention_item`] names them (at most [`super::ATTENTION_NAMED`]).
    pub named: Vec<String>,
}

impl Tally {
    fn add(&mut self, url: &str, p: &PrefixReport) {
        if (p.state.needs_attention() || p.problem.is_some())
            && self.named.len() < super::ATTENTION_NAMED
        {
            self.named.push(super::attention_item(url, p));
        }
        self.rows += 1;
        self.attention += usize::from(p.state.needs_attention());
        self.noted += usize::from(p.state.needs_attention() || p.problem.is_some());
        self.age_unknown += usize::from(p.age_unknown);
    }

    /// The exit code of the snapshot these rows were handed on from: that of
    /// `rest` (which holds everything but the rows) and the rows'
    /// ([`Snapshot::exit_code`]'s rule).
    pub fn exit_code(&self, rest: &Snapshot) -> Exit {
        match rest.exit_code() {
            Exit::Failed => Exit::Failed,
            _ if self.age_unknown > 0 => Exit::Failed,
            e @ Exit::Attention => e,
            _ if self.noted > 0 => Exit::Attention,
            e => e,
        }
    }
}

/// Gathers every target, one after another, handing each row to `emit` as
/// it is judged (module docs), completed by `recipe` as
/// [`Recipe::complete`] does (best-effort marks, each row's last takeover,
/// the pod). Returns the snapshot without its rows, and their tally.
pub async fn gather_streamed(
    targets: &[OpenTarget],
    opts: &GatherOptions,
    clock: &SharedClock,
    recipe: &Recipe,
    emit: &mut (dyn FnMut(Streamed<'_>) + Send),
) -> (Snapshot, Tally) {
    let (index, audit_log) = match &recipe.audit {
        Some(a) => {
            let (i, r) = read_takeovers(a).await;
            (i, Some(r))
        }
        None => (TakeoverIndex::default(), None),
    };
    let mut tally = Tally::default();
    let mut reports = Vec::with_capacity(targets.len());
    for t in targets {
        let report = stream_target(t, opts, clock, recipe, &index, &mut tally, emit).await;
        emit(Streamed::Target {
            report: &report,
            at: clock.wall(),
        });
        reports.push(report);
    }
    let now = clock.wall();
    let mut snap = Snapshot {
        schema_version: SCHEMA_VERSION,
        generated_at: now,
        reader_clock: ReaderClock {
            now,
            server_offset_s: None,
            server_offset_error_s: None,
        },
        targets: reports,
        pod: PodSnapshot::default(),
        pod_error: None,
        audit_log,
    };
    // No rows: this sets the reader's clock from the targets' offsets.
    snap.rejudge(now);
    recipe.add_pod(&mut snap).await;
    (snap, tally)
}

/// One target of [`gather_streamed`]: its listing and reads run together
/// as in a gather that keeps its rows ([`super::Gatherer`]), each read
/// handed on in the listing's order. Returns its report without rows.
async fn stream_target(
    t: &OpenTarget,
    opts: &GatherOptions,
    clock: &SharedClock,
    recipe: &Recipe,
    index: &TakeoverIndex,
    tally: &mut Tally,
    emit: &mut (dyn FnMut(Streamed<'_>) + Send),
) -> TargetReport {
    let store = t.store.as_ref();
    let root = t.target.prefix().to_owned();
    let mut report = empty_report(t);
    if let Some(e) = store.unavailable() {
        report.error = Some(format!("{}: {e}", store.describe()));
        return report;
    }
    let mut errors: Vec<PrefixError> = Vec::new();
    let mut root_error = None;
    let mut rows = 0usize;
    let header = &report;
    let mut sink = |r: Read| match r.result {
        Ok(Observed::Absent) if r.prefix == root => {}
        Ok(obs) => {
            let now = clock.wall();
            let mut p = PrefixReport::new(r.prefix, obs, now);
            let (offset, error, _) = service_clock(t, clock);
            if offset.is_some() {
                p.rejudge_by(now, offset.zip(error));
            }
            recipe.mark(std::iter::once(&mut p));
            if recipe.audit.is_some() {
                p.last_takeover = index
                    .newest(&header.url, header.bucket.as_deref(), &p.key)
                    .map(|l| Box::new(l.clone()));
            }
            rows += 1;
            tally.add(&header.prefix_url(&p.prefix), &p);
            emit(Streamed::Row {
                target: header,
                row: &p,
                at: now,
            });
        }
        Err(e) => {
            let e = e.to_string();
            if r.prefix == root {
                root_error = Some(e.clone());
            }
            errors.push(PrefixError {
                prefix: r.prefix,
                error: e,
            });
        }
    };
    let (found_tx, found_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<String>>();
    let listing = async {
        let mut send = |v: Vec<String>| {
            let _ = found_tx.send(v);
        };
        let r = discover_paged(store, &root, opts, &mut send, false).await;
        drop(found_tx);
        r
    };
    let plan = Plan {
        schedule: None,
        picked: None,
        picked_order: Vec::new(),
        focus: Default::default(),
        index: 0,
    };
    let cached = Default::default();
    let max = opts.concurrency.max(1);
    let mut reads = Reads {
        t,
        opts,
        clock: clock.as_ref(),
        plan: &plan,
        root: &root,
        cached: &cached,
        limit: max,
        max,
        results: Vec::new(),
        known: Vec::new(),
        sent: 0,
        queued: 0,
        stream: Some(Ordered::new(&mut sink)),
        names: Default::default(),
    };
    let (listed, ()) = tokio::join!(listing, reads.run(found_rx, None, None));
    if let Some(o) = reads.stream.take() {
        o.finish(listed.is_ok());
    }
    drop(reads);
    let listing_errors = match listed {
        Ok((_, errs)) => errs,
        Err(e) => {
            report.error = Some(format!("{}: {e}", store.describe()));
            return report;
        }
    };
    // As a gather that keeps its rows: the root alone failed, for a reason
    // other than a missing key, and nothing else was found.
    if rows == 0 && errors.len() == 1 && root_error.is_some() {
        let e = errors.remove(0);
        report.error = Some(format!("{}: {}", store.describe(), e.error));
    }
    errors.extend(listing_errors);
    errors.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    report.errors = errors;
    let (offset, error, note) = service_clock(t, clock);
    if offset.is_some() {
        report.server_offset_s = offset;
        report.server_offset_error_s = error;
    }
    report.server_clock_note = note;
    report
}
