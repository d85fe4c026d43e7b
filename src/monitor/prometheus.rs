//! Prometheus metrics of the snapshots (`-o prometheus` and `leasectl
//! serve`), encoded with the `prometheus-client` crate (label values escaped
//! by the crate per the format, after [`crate::text::sanitize`] has escaped
//! untrusted text).
//!
//! The per-prefix families (`leasectl_lease_*`) are kept as one compact row
//! per prefix ([`super::lease_rows`]) and encoded from the rows; the
//! others, a few series each, are a registry of gauges and counters. Gauges
//! describe the latest snapshot (a prefix that is gone is removed); counters
//! accumulate over the life of a [`Metrics`] (one for `-o prometheus`, the
//! process for `serve`; a one-shot run has no holder-change counters, which
//! could only be 0). Memory is bounded by the prefixes currently seen. Each
//! family lists its series in the order of their labels, the same on every
//! run.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::audit::AuditEntry;
use crate::bucket::LeaseState;
use crate::snapshot::history::{compact_grown, History, Limits, COUNTED};
use crate::snapshot::{ExclusionReport, PrefixReport, Snapshot, TargetReport};
use crate::store::Counters;
use crate::text::sanitize;
use crate::writer::scan::VerdictKind;

use super::family::SortedFamily;
pub(crate) use super::lease_rows::PrefixLabels;
pub(crate) use super::lease_rows::STATES;
use super::lease_rows::{self, Gap, Row, Rows, G};
use super::node_metrics::NodeFamilies;
use super::text_format::TextFormatWriter;

/// `{target}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct TargetLabels {
    /// The TARGET URL (escaped).
    pub target: String,
}

/// `{path}` of the audit log `serve` follows.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct AuditLogLabels {
    /// The audit log's path (escaped).
    pub path: String,
}

/// `{target, check}` of a precondition probe result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct ProbeLabels {
    /// The TARGET URL (escaped).
    pub target: String,
    /// What was checked: `preconditions` (the service refuses failed
    /// `If-None-Match` / `If-Match` writes, so a lease excludes).
    pub check: String,
}

/// `{path, code}` of an HTTP request to the exporter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct HttpLabels {
    /// `/metrics`, `/healthz`, `/probe`, or `other` for any other path (bounded).
    pub path: String,
    /// The HTTP status code answered.
    pub code: String,
}

/// `{kind}` of a pod verdict.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct VerdictLabels {
    /// The verdict's snake_case name.
    pub kind: String,
}

const VERDICTS: [VerdictKind; 11] = [
    VerdictKind::InvalidEnable,
    VerdictKind::ArmedHoldsNothing,
    VerdictKind::SiblingsRacing,
    VerdictKind::PodRootsRacing,
    VerdictKind::HolderNotTake,
    VerdictKind::StrayStamp,
    VerdictKind::Waiting,
    VerdictKind::HolderOutsidePod,
    VerdictKind::OrphanedWriter,
    VerdictKind::OrphanedLock,
    VerdictKind::LockNotRegular,
];

type FGauge = Gauge<f64, AtomicU64>;

/// Which families an exposition holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `serve`'s `/metrics`: every family.
    Serve,
    /// `-o prometheus`, one snapshot: no holder-change counters, which could
    /// only be 0.
    OneShot,
    /// One target's answer to a scrape's probe (`/probe`): its own families
    /// (leases, probe results, clock offset, up, errors, its store requests
    /// and gathers) and the probe's; none of the process's (HTTP requests,
    /// pods, audit log), which are on `/metrics`.
    Probe,
}

/// The metric families and what they remember between snapshots.
pub(crate) struct Metrics {
    /// Which families the exposition holds.
    kind: Kind,
    /// The per-prefix families' values, a row per prefix
    /// ([`super::lease_rows`]): shared with scrapes still writing them.
    rows: Arc<Rows>,
    probe_ok: SortedFamily<ProbeLabels, Gauge>,
    probe_known: SortedFamily<TargetLabels, Gauge>,
    http_requests: SortedFamily<HttpLabels, Counter>,
    server_offset: SortedFamily<TargetLabels, FGauge>,
    target_up: SortedFamily<TargetLabels, Gauge>,
    gather_errors: SortedFamily<TargetLabels, Counter>,
    verdicts: SortedFamily<VerdictLabels, Gauge>,
    pod_scan_ok: Gauge,
    /// The node view's families, once a node snapshot came.
    node: Option<NodeFamilies>,
    audit_log_ok: SortedFamily<AuditLogLabels, Gauge>,
    requests: Counter,
    request_errors: Counter,
    gathers: Counter,
    last_gather: FGauge,
    /// The holder changes of the session, per prefix.
    history: History,
    counted: (u64, u64),
    /// A probe's own families ([`Kind::Probe`] only): whether it read its
    /// target whole within its deadline, and how long it took (seconds).
    probe_success: Gauge,
    probe_duration: FGauge,
    /// Families of others, registered after these ([`Metrics::add_families`]).
    extra: Vec<ExtraFamilies>,
}

/// Registers families kept elsewhere (the probes' state of `serve`).
pub(crate) type ExtraFamilies = Arc<dyn Fn(&mut Registry) + Send + Sync>;

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The exposition of a [`Metrics`] at one moment, which can be written
/// after the [`Metrics`] has moved on (a scrape writes it without holding
/// the lock the next snapshot is applied under): the per-prefix families
/// share the rows of that moment, the others are already encoded (a few
/// kilobytes).
pub struct Exposition {
    leases: Registry,
    rest: String,
    /// The prefixes whose series it holds.
    rows: usize,
}

impl Exposition {
    /// Writes the OpenMetrics text (ending with `# EOF`) to `out`, in
    /// pieces of at most 4 KiB (the encoder's buffer) plus the small
    /// families at the end.
    ///
    /// Errors: the first error of `out` (encoding itself cannot fail).
    pub(crate) fn write_to<W: std::fmt::Write>(&self, out: &mut W) -> std::fmt::Result {
        prometheus_client::encoding::text::encode_registry(out, &self.leases)?;
        out.write_str(&self.rest)
    }

    /// How many prefixes' series it holds (about 1.2 KB of text each).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }
}

impl Metrics {
    /// Metrics of one snapshot (`-o prometheus`): as [`Metrics::new`]
    /// without `leasectl_lease_holder_changes_total`, a counter that could
    /// only be 0 (a holder change is seen between two snapshots).
    pub(crate) fn one_shot() -> Self {
        Self::of_kind(Kind::OneShot)
    }

    /// Empty metrics, under `leasectl_`.
    pub(crate) fn new() -> Self {
        Self::of_kind(Kind::Serve)
    }

    /// Empty metrics of one target probed again and again (`/probe`): its
    /// families as `serve` has them (holder changes counted over the
    /// probes), and `leasectl_probe_success` and
    /// `leasectl_probe_duration_seconds` ([`Metrics::set_probe`]); none of
    /// the process's own (HTTP requests, pods, audit log).
    pub(crate) fn probe() -> Self {
        Self::of_kind(Kind::Probe)
    }

    fn of_kind(kind: Kind) -> Self {
        Self {
            kind,
            rows: Arc::default(),
            probe_ok: SortedFamily::default(),
            probe_known: SortedFamily::default(),
            http_requests: SortedFamily::default(),
            server_offset: SortedFamily::default(),
            target_up: SortedFamily::default(),
            gather_errors: SortedFamily::default(),
            verdicts: SortedFamily::default(),
            pod_scan_ok: Gauge::default(),
            node: None,
            audit_log_ok: SortedFamily::default(),
            requests: Counter::default(),
            request_errors: Counter::default(),
            gathers: Counter::default(),
            last_gather: FGauge::default(),
            // Only the counts and the current tenures are exported: no
            // change is kept (each prefix's first sighting was ~300 bytes).
            history: History::with_limits(Limits {
                per_prefix: 0,
                ..Default::default()
            }),
            counted: (0, 0),
            probe_success: Gauge::default(),
            probe_duration: FGauge::default(),
            extra: Vec::new(),
        }
    }

    /// Adds families kept elsewhere to every exposition, after these
    /// (`serve`'s probe state on `/metrics`): `register` registers them
    /// when an exposition is taken.
    pub(crate) fn add_families(&mut self, register: ExtraFamilies) {
        self.extra.push(register);
    }

    /// The registry of the families other than the per-prefix ones, in the
    /// order of the exposition, built when an exposition is taken: the
    /// families are handles on the values, so it holds no copy (and a
    /// [`Metrics`] holds no registry: one per probed target would be
    /// kilobytes of names and help).
    fn registry(&self) -> Registry {
        let mut r = Registry::with_prefix("leasectl");
        self.register_target_metrics(&mut r);
        self.register_reader_metrics(&mut r);
        if let Some(n) = &self.node {
            n.register(&mut r);
        }
        if self.kind == Kind::Probe {
            r.register(
                "probe_success",
                "1 when this probe listed its target and read every LEASE it had to within the scrape's deadline, else 0 (what was not read is an error of its row, never its last reading)",
                self.probe_success.clone(),
            );
            r.register(
                "probe_duration_seconds",
                "How long this probe took, seconds",
                self.probe_duration.clone(),
            );
        }
        for f in &self.extra {
            f(&mut r);
        }
        r
    }

    /// Registers the per-target lease families (the probe results); the
    /// per-prefix ones come before them, from the rows
    /// ([`super::lease_rows::registry`]).
    fn register_target_metrics(&self, registry: &mut Registry) {
        registry.register(
            "probe_ok",
            "1 when the precondition probe found the service honours conditional writes, 0 when it found it does not; absent while unknown (see leasectl_probe_known)",
            self.probe_ok.clone(),
        );
        registry.register(
            "probe_known",
            "1 when a precondition probe result is known for the target, 0 when not (serve never writes, so it never probes; best-effort mode is not a probe result)",
            self.probe_known.clone(),
        );
    }

    /// Registers the reader's own families (HTTP, clock offset, targets,
    /// gather errors, pod, audit log, store requests, gathers); a probe's
    /// answer has those of its target alone.
    fn register_reader_metrics(&self, registry: &mut Registry) {
        let process = self.kind != Kind::Probe;
        if process {
            registry.register(
                "http_requests",
                "HTTP requests answered by leasectl serve, by path and status code",
                self.http_requests.clone(),
            );
        }
        registry.register(
            "reader_server_offset_seconds",
            "The storage service's clock minus this reader's, from the HTTP Date of its answers",
            self.server_offset.clone(),
        );
        registry.register(
            "target_up",
            "1 when the target was listed and read, else 0",
            self.target_up.clone(),
        );
        registry.register(
            "gather_errors",
            "Targets and prefixes that could not be gathered, summed over gathers",
            self.gather_errors.clone(),
        );
        if process {
            registry.register(
                "pod_verdicts",
                "Pod writer-lease verdicts currently raised, by kind",
                self.verdicts.clone(),
            );
            registry.register(
                "pod_scan_ok",
                "1 when the pod was scanned, 0 when the scan failed or was not asked for",
                self.pod_scan_ok.clone(),
            );
            registry.register(
                "audit_log_ok",
                "1 when the audit log followed to name takeovers was read (or is missing: it names none), 0 when it could not be read: then the how of a holder change is unknown (a takeover is counted as after_expiry or changed_while_fresh)",
                self.audit_log_ok.clone(),
            );
        }
        registry.register(
            "store_requests",
            "Requests sent to the stores (S3 or local)",
            self.requests.clone(),
        );
        registry.register(
            "store_errors",
            "Store requests that failed (not counting the expected 304, 404 and 412 answers)",
            self.request_errors.clone(),
        );
        registry.register("gathers", "Snapshots gathered", self.gathers.clone());
        registry.register(
            "last_gather_timestamp_seconds",
            "When the latest snapshot was judged, Unix time",
            self.last_gather.clone(),
        );
    }

    /// The HTTP request counters (`leasectl_http_requests_total`), shared:
    /// the exporter's handlers count into this handle.
    pub(crate) fn http_requests(&self) -> SortedFamily<HttpLabels, Counter> {
        self.http_requests.clone()
    }

    /// The session's holder changes, per prefix.
    pub(crate) fn history(&self) -> &History {
        &self.history
    }

    /// Brings the metrics up to `snap`; `counters` are the stores' request
    /// counters; `pod_scanned`: the pod was asked for; `audit`: recent
    /// entries of leasectl's audit log (to name takeovers in the history).
    pub(crate) fn update(
        &mut self,
        snap: &Snapshot,
        counters: &Counters,
        pod_scanned: bool,
        audit: &[AuditEntry],
    ) {
        self.history.observe(snap, audit);
        self.gathers.inc();
        self.last_gather
            .set(snap.generated_at.timestamp_millis() as f64 / 1000.0);
        let (req, err) = counters.read();
        self.requests.inc_by(req.saturating_sub(self.counted.0));
        self.request_errors
            .inc_by(err.saturating_sub(self.counted.1));
        self.counted = (req, err);

        self.probe_ok.clear();
        self.probe_known.clear();
        self.server_offset.clear();
        self.target_up.clear();
        // A copy only while a scrape still writes the previous rows.
        let mut rows = std::mem::take(&mut self.rows);
        let table = Arc::make_mut(&mut rows);
        let before = table.len();
        table.values_mut().for_each(Row::clear_gauges);
        for t in &snap.targets {
            self.update_target(table, t);
        }
        self.update_from_history(table, snap.generated_at);
        // Prefixes no longer seen are forgotten; one not read this time
        // keeps its counters and its tenure's gap.
        table.retain(|_, r| r.seen);
        compact_grown(table, before);
        self.rows = rows;
        self.update_pod(snap, pod_scanned);
    }

    /// One target's gauges and gather errors, and its rows (each row read
    /// is `seen`, with those of its prefixes that could not be read this
    /// time).
    fn update_target(&mut self, rows: &mut Rows, t: &TargetReport) {
        let s = sanitize;
        let target = s(&t.url);
        let shared: Arc<str> = target.as_str().into();
        let tl = TargetLabels {
            target: target.clone(),
        };
        self.target_up
            .get_or_create(&tl)
            .set(i64::from(t.error.is_none() && t.errors.is_empty()));
        let errors = u64::from(t.error.is_some()) + t.errors.len() as u64;
        // Created at zero so that a rate() has a starting point.
        self.gather_errors.get_or_create(&tl).inc_by(errors);
        if let Some(o) = t.server_offset_s {
            self.server_offset.get_or_create(&tl).set(o);
        }
        for p in &t.prefixes {
            update_prefix(rows, &shared, p);
        }
        // The precondition probe: only what is known is exported.
        let probed = t.prefixes.iter().find_map(|p| match p.exclusion {
            ExclusionReport::Conditional => Some(true),
            ExclusionReport::Ignored => Some(false),
            _ => None,
        });
        self.probe_known
            .get_or_create(&tl)
            .set(i64::from(probed.is_some()));
        if let Some(ok) = probed {
            self.probe_ok
                .get_or_create(&ProbeLabels {
                    target: target.clone(),
                    check: "preconditions".to_owned(),
                })
                .set(i64::from(ok));
        }
        // Prefixes that could not be read this time keep their counters:
        // an error is not a prefix going away.
        for (u, p) in self.history.iter().map(|(k, _)| k) {
            if **u == *t.url && (t.error.is_some() || t.errors.iter().any(|e| *e.prefix == **p)) {
                let pl = PrefixLabels {
                    target: shared.clone(),
                    prefix: s(p).into(),
                };
                rows.entry(pl).or_default().seen = true;
            }
        }
    }

    /// From the session's history, for each prefix seen in the latest
    /// snapshot: how long it has had its current holder, or none, at `now`;
    /// and (unless one-shot) its holder-change counters, brought up to the
    /// history (the rows of prefixes no longer seen are forgotten, with their
    /// counters, by [`Metrics::update`]). One pass over the history.
    fn update_from_history(&self, rows: &mut Rows, now: chrono::DateTime<chrono::Utc>) {
        let s = sanitize;
        for ((u, p), h) in self.history.iter() {
            let pl = PrefixLabels {
                target: s(u).into(),
                prefix: s(p).into(),
            };
            let Some(row) = rows.get_mut(&pl).filter(|r| r.seen) else {
                continue;
            };
            if self.kind != Kind::OneShot {
                // Every `how` created at zero so that an increase() has a
                // starting point, whichever way the holder changes first; a
                // counter never goes down.
                let done = row.changes.get_or_insert([0; COUNTED.len()]);
                for (d, n) in done.iter_mut().zip(h.count_by) {
                    *d = (*d).max(u64::from(n));
                }
            }
            if let Some((held, since)) = h.current_since() {
                let secs = (now - since).num_milliseconds().max(0) as f64 / 1000.0;
                row.set(if held { G::Held } else { G::Free }, secs);
            }
        }
    }

    /// Forgets the per-target gauges (`leasectl_target_up`,
    /// `leasectl_probe_ok`, `_known`, `leasectl_reader_server_offset_seconds`)
    /// and their room, once an exposition holds them: a probed target's
    /// metrics kept until its next probe, which sets them again from its
    /// snapshot (about a kilobyte a target less).
    pub(crate) fn forget_gauges(&mut self) {
        self.target_up.free();
        self.probe_ok.free();
        self.probe_known.free();
        self.server_offset.free();
    }

    /// Sets a probe's own gauges ([`Metrics::probe`]):
    /// `leasectl_probe_success` (1 when `success`) and
    /// `leasectl_probe_duration_seconds` (`duration`).
    pub(crate) fn set_probe(&mut self, success: bool, duration: std::time::Duration) {
        self.probe_success.set(i64::from(success));
        self.probe_duration.set(duration.as_secs_f64());
    }

    /// Sets `leasectl_audit_log_ok{path}` for the audit log `path` followed
    /// to name takeovers: 1 when `readable` (read, or missing: it names
    /// none), 0 when it could not be read. Absent until called (a snapshot
    /// with no audit log followed, e.g. `-o prometheus`, has none).
    pub(crate) fn set_audit_log(&mut self, path: &std::path::Path, readable: bool) {
        self.audit_log_ok.clear();
        self.audit_log_ok
            .get_or_create(&AuditLogLabels {
                path: sanitize(&path.display().to_string()),
            })
            .set(i64::from(readable));
    }

    /// The pod scan's gauge and the verdict counts (only when the pod was
    /// asked for and scanned).
    fn update_pod(&mut self, snap: &Snapshot, pod_scanned: bool) {
        self.verdicts.clear();
        self.pod_scan_ok
            .set(i64::from(pod_scanned && snap.pod_error.is_none()));
        if pod_scanned && snap.pod_error.is_none() {
            for k in VERDICTS {
                let n = snap.pod.verdicts.iter().filter(|v| v.kind == k).count();
                self.verdicts
                    .get_or_create(&VerdictLabels {
                        kind: k.as_str().to_owned(),
                    })
                    .set(n as i64);
            }
        }
        self.update_node(snap, pod_scanned);
    }

    /// The node view's families ([`NodeFamilies`]): registered with the
    /// first node snapshot, emptied when a scan fails (what was not read is
    /// not exported as healthy).
    fn update_node(&mut self, snap: &Snapshot, pod_scanned: bool) {
        let Some(view) = snap.pod.node.as_ref().filter(|_| pod_scanned) else {
            if let Some(n) = &self.node {
                n.clear();
            }
            return;
        };
        self.node
            .get_or_insert_with(NodeFamilies::default)
            .update(view, &snap.pod.verdicts);
    }

    /// The exposition as it is now, to be written later
    /// ([`Exposition::write_to`]) without this.
    pub(crate) fn exposition(&self) -> Exposition {
        let mut rest = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut rest, &self.registry());
        Exposition {
            leases: lease_rows::registry(&self.rows, self.kind == Kind::OneShot),
            rest,
            rows: self.rows.len(),
        }
    }

    /// The text exposition of every metric (OpenMetrics text, which
    /// Prometheus and node_exporter's textfile collector read).
    #[cfg(test)]
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = self.exposition().write_to(&mut out);
        out
    }

    /// Writes the exposition in the classic Prometheus text format to `out`
    /// as it is encoded, line by line: the same bytes as
    /// `to_text_format(&self.render())`, without ever holding the whole
    /// exposition (at 50,000 prefixes it is tens of megabytes). `out` is
    /// written in pieces of at most a line; wrap it in a `BufWriter`.
    ///
    /// Errors: the first error of `out` (encoding itself cannot fail).
    pub(crate) fn write_text_format<W: std::io::Write>(&self, out: W) -> std::io::Result<()> {
        let mut w = TextFormatWriter {
            out,
            line: String::new(),
            help: None,
            error: None,
        };
        let encoded = self.exposition().write_to(&mut w);
        w.finish(encoded)
    }
}

/// One row's gauges (state, age, expiry, TTL, skew, generation) and its
/// tenure's gap, from its report; the row is `seen`. A value the report
/// does not have is left as it is (a second report of the same labels only
/// adds).
fn update_prefix(rows: &mut Rows, target: &Arc<str>, p: &PrefixReport) {
    let pl = PrefixLabels {
        target: target.clone(),
        prefix: sanitize(&p.prefix).into(),
    };
    let row = rows.entry(pl).or_default();
    row.seen = true;
    let current = if p.age_unknown {
        "unknown"
    } else {
        p.state.as_str()
    };
    row.state = STATES.iter().position(|s| *s == current).map(|i| i as u8);
    if !p.age_unknown {
        if let Some(a) = p.age_s {
            row.set(G::Age, a);
        }
        if let Some(x) = p.expires_in_s {
            row.set(G::ExpiresIn, x);
        }
    }
    if let Some(r) = &p.record {
        row.set(G::Ttl, r.ttl_s as f64);
        // A float, as every sample is: exact up to 2^53 (microseconds
        // since 1970 are below 2^51).
        if let Some(g) = r.generation {
            row.set(G::Generation, g as f64);
        }
    }
    if let Some(k) = p.holder_skew_s {
        row.set(G::Skew, k);
    }
    note_renewal_gap(row, p);
}

/// The largest age of the current tenure's record seen so far, as a
/// fraction of its TTL: a new tenure (holder or generation) starts again; no
/// holder, or an age that cannot be judged, has none (a tenure whose age is
/// unknown this time keeps what was seen).
fn note_renewal_gap(row: &mut Row, p: &PrefixReport) {
    let held = p
        .record
        .as_ref()
        .filter(|r| r.ttl_s > 0 && p.state != LeaseState::Released);
    let Some(r) = held else {
        row.gap = None;
        return;
    };
    let same = row
        .gap
        .as_ref()
        .is_some_and(|g| (&*g.holder, g.generation) == (r.instance_id.as_str(), r.generation));
    let ratio = (!p.age_unknown)
        .then_some(p.age_s)
        .flatten()
        .map(|a| a.max(0.0) / r.ttl_s as f64);
    match (row.gap.as_mut(), same, ratio) {
        (Some(g), true, Some(x)) => g.ratio = g.ratio.max(x),
        (Some(_), true, None) => {}
        (_, _, Some(x)) => {
            row.gap = Some(Box::new(Gap {
                holder: r.instance_id.as_str().into(),
                generation: r.generation,
                ratio: x,
            }));
        }
        (_, _, None) => row.gap = None,
    }
}

/// The content type of the OpenMetrics exposition ([`Metrics::exposition`]).
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use crate::monitor::text_format::to_text_format;
    use crate::snapshot::{gather, GatherOptions, OpenTarget};
    use crate::store::local::LocalStore;

    /// The streamed exposition is byte for byte the one built in memory, on
    /// a real local store with hostile names (a quote, a backslash, a
    /// newline, an escape), pages of prefixes and every state; it ends with
    /// one newline, so `-o prometheus` writes what it wrote before.
    #[tokio::test]
    async fn the_streamed_exposition_is_the_built_one() {
        let dir = tempfile::tempdir().unwrap();
        let rec = |renewed: &str| {
            format!(
                r#"{{"instance_id":"h","acquired_at":"2026-11-30T11:00:00Z","renewed_at":"{renewed}","ttl_s":30}}"#
            )
        };
        let now = chrono::Utc::now();
        let fresh = rec(&now.to_rfc3339());
        for (i, name) in ["a\"q", "b\\s", "c\nn", "d\u{1b}[2J", "e f", "ok"]
            .iter()
            .enumerate()
        {
            let d = dir.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            let body = match i % 3 {
                0 => fresh.clone(),
                1 => rec("2020-01-01T00:00:00Z"),
                _ => "{not json".to_owned(),
            };
            std::fs::write(d.join("LEASE"), body).unwrap();
        }
        for i in 0..300 {
            let d = dir.path().join(format!("p{i:04}"));
            std::fs::create_dir_all(&d).unwrap();
            if i % 2 == 0 {
                std::fs::write(d.join("LEASE"), &fresh).unwrap();
            }
        }
        let clock = SystemClock::shared();
        let open = vec![OpenTarget {
            target: format!("file://{}/", dir.path().display()).parse().unwrap(),
            endpoint: "local".into(),
            store: std::sync::Arc::new(LocalStore::open(dir.path()).unwrap()),
        }];
        let snap = gather(&open, &GatherOptions::default(), &clock).await;
        assert!(snap.targets[0].prefixes.len() >= 306);
        let mut m = Metrics::new();
        let counters = Counters::default();
        m.update(&snap, &counters, false, &[]);
        m.update(&snap, &counters, false, &[]);
        let built = to_text_format(&m.render());
        let mut streamed = Vec::new();
        m.write_text_format(&mut streamed).unwrap();
        assert_eq!(String::from_utf8(streamed).unwrap(), built);
        assert!(built.contains("# TYPE leasectl_gathers_total counter"));
        assert!(built.contains("# HELP leasectl_gathers_total Snapshots gathered"));
        assert!(built.ends_with('\n') && !built.trim_end().ends_with(char::is_whitespace));
        assert_eq!(format!("{}\n", built.trim_end()), built);
        // A writer that fails: its error, not a panic or a silent success.
        struct Full;
        impl std::io::Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let e = m.write_text_format(Full).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
    }
}
