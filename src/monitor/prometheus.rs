//! Prometheus metrics of the snapshots (`-o prometheus` and `leasectl
//! serve`), built with the `prometheus-client` crate: the registry, the
//! families and the text exposition (label values escaped by the crate per
//! the format, after [`crate::text::sanitize`] has escaped untrusted text).
//!
//! Gauges describe the latest snapshot (a prefix that is gone is removed);
//! counters accumulate over the life of a [`Metrics`] (one for `-o
//! prometheus`, the process for `serve`; a one-shot run has no holder-change
//! counters, which could only be 0). Memory is bounded by the prefixes
//! currently seen. Each family lists its series in the order of their labels
//! ([`SortedFamily`]), the same on every run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::audit::AuditEntry;
use crate::snapshot::history::{History, COUNTED};
use crate::snapshot::{ExclusionReport, PrefixReport, Snapshot, TargetReport};
use crate::store::Counters;
use crate::writer::scan::VerdictKind;

use super::family::SortedFamily;
pub use super::text_format::to_text_format;
use super::text_format::TextFormatWriter;

/// `{target, prefix}`. The strings are shared (`Arc`) by every series of
/// the prefix: at 50,000 prefixes there are 550,000 series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct PrefixLabels {
    /// The TARGET URL (escaped).
    pub target: Arc<str>,
    /// The prefix (escaped).
    pub prefix: Arc<str>,
}

/// `{target, prefix, state}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct StateLabels {
    /// The TARGET URL (escaped).
    pub target: Arc<str>,
    /// The prefix (escaped).
    pub prefix: Arc<str>,
    /// fresh, stale, suspect, malformed, absent, released or unknown ([`STATES`]).
    pub state: &'static str,
}

/// `{target, prefix, how}` of a holder change.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct HowLabels {
    /// The TARGET URL (escaped).
    pub target: Arc<str>,
    /// The prefix (escaped).
    pub prefix: Arc<str>,
    /// How the holder changed: `takeover`, `handover`, `after_expiry`,
    /// `acquired` or `changed_while_fresh` ([`COUNTED`]'s labels).
    pub how: &'static str,
}

/// `{target}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct TargetLabels {
    /// The TARGET URL (escaped).
    pub target: String,
}

/// `{path}` of the audit log `serve` follows.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct AuditLogLabels {
    /// The audit log's path (escaped).
    pub path: String,
}

/// `{target, check}` of a precondition probe result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ProbeLabels {
    /// The TARGET URL (escaped).
    pub target: String,
    /// What was checked: `preconditions` (the service refuses failed
    /// `If-None-Match` / `If-Match` writes, so a lease excludes).
    pub check: String,
}

/// `{path, code}` of an HTTP request to the exporter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct HttpLabels {
    /// `/metrics`, `/healthz`, or `other` for any other path (bounded).
    pub path: String,
    /// The HTTP status code answered.
    pub code: String,
}

/// `{kind}` of a pod verdict.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct VerdictLabels {
    /// The verdict's snake_case name.
    pub kind: String,
}

/// The states of `leasectl_lease_state`: the judged states, and `unknown`
/// for a row whose age cannot be judged (this reader's clock is too far
/// from the service's).
pub const STATES: [&str; 7] = [
    "fresh",
    "stale",
    "suspect",
    "malformed",
    "absent",
    "released",
    "unknown",
];

const VERDICTS: [VerdictKind; 10] = [
    VerdictKind::InvalidEnable,
    VerdictKind::ArmedHoldsNothing,
    VerdictKind::SiblingsRacing,
    VerdictKind::HolderNotTake,
    VerdictKind::StrayStamp,
    VerdictKind::Waiting,
    VerdictKind::HolderOutsidePod,
    VerdictKind::OrphanedWriter,
    VerdictKind::OrphanedLock,
    VerdictKind::LockNotRegular,
];

type FGauge = Gauge<f64, AtomicU64>;

/// The metric families and what they remember between snapshots.
pub struct Metrics {
    registry: Registry,
    state: SortedFamily<StateLabels, Gauge>,
    age: SortedFamily<PrefixLabels, FGauge>,
    ttl: SortedFamily<PrefixLabels, FGauge>,
    expires_in: SortedFamily<PrefixLabels, FGauge>,
    skew: SortedFamily<PrefixLabels, FGauge>,
    generation: SortedFamily<PrefixLabels, FGauge>,
    holder_changes: SortedFamily<HowLabels, Counter>,
    holder_seconds: SortedFamily<PrefixLabels, FGauge>,
    free_seconds: SortedFamily<PrefixLabels, FGauge>,
    renewal_gap: SortedFamily<PrefixLabels, FGauge>,
    probe_ok: SortedFamily<ProbeLabels, Gauge>,
    probe_known: SortedFamily<TargetLabels, Gauge>,
    http_requests: SortedFamily<HttpLabels, Counter>,
    server_offset: SortedFamily<TargetLabels, FGauge>,
    target_up: SortedFamily<TargetLabels, Gauge>,
    gather_errors: SortedFamily<TargetLabels, Counter>,
    verdicts: SortedFamily<VerdictLabels, Gauge>,
    pod_scan_ok: Gauge,
    audit_log_ok: SortedFamily<AuditLogLabels, Gauge>,
    requests: Counter,
    request_errors: Counter,
    gathers: Counter,
    last_gather: FGauge,
    /// The holder changes of the session, per prefix.
    history: History,
    /// The part of each prefix's history counts (by kind, as
    /// [`crate::snapshot::history::PrefixHistory::count_by`]) already added
    /// to its counters.
    holders_counted: BTreeMap<PrefixLabels, [u64; COUNTED.len()]>,
    /// Per prefix, the current tenure (holder, generation) and the largest
    /// age of its record seen at a reading, as a fraction of its TTL.
    renewal_gaps: BTreeMap<PrefixLabels, (String, Option<u64>, f64)>,
    counted: (u64, u64),
    /// One snapshot only (`-o prometheus`): no holder-change counters, which
    /// could only be 0.
    one_shot: bool,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Metrics of one snapshot (`-o prometheus`): as [`Metrics::new`]
    /// without `leasectl_lease_holder_changes_total`, a counter that could
    /// only be 0 (a holder change is seen between two snapshots).
    pub fn one_shot() -> Self {
        let mut m = Self::unregistered();
        m.one_shot = true;
        m.register_lease_metrics();
        m.register_reader_metrics();
        m
    }

    /// Empty metrics, registered under `leasectl_`.
    pub fn new() -> Self {
        let mut m = Self::unregistered();
        m.register_lease_metrics();
        m.register_reader_metrics();
        m
    }

    fn unregistered() -> Self {
        Self {
            registry: Registry::with_prefix("leasectl"),
            state: SortedFamily::default(),
            age: SortedFamily::default(),
            ttl: SortedFamily::default(),
            expires_in: SortedFamily::default(),
            skew: SortedFamily::default(),
            generation: SortedFamily::default(),
            holder_changes: SortedFamily::default(),
            holder_seconds: SortedFamily::default(),
            free_seconds: SortedFamily::default(),
            renewal_gap: SortedFamily::default(),
            probe_ok: SortedFamily::default(),
            probe_known: SortedFamily::default(),
            http_requests: SortedFamily::default(),
            server_offset: SortedFamily::default(),
            target_up: SortedFamily::default(),
            gather_errors: SortedFamily::default(),
            verdicts: SortedFamily::default(),
            pod_scan_ok: Gauge::default(),
            audit_log_ok: SortedFamily::default(),
            requests: Counter::default(),
            request_errors: Counter::default(),
            gathers: Counter::default(),
            last_gather: FGauge::default(),
            history: History::new(),
            holders_counted: BTreeMap::new(),
            renewal_gaps: BTreeMap::new(),
            counted: (0, 0),
            one_shot: false,
        }
    }

    /// Registers the per-lease families (state, age, TTL, expiry, skew,
    /// generation, holder changes, probe results).
    fn register_lease_metrics(&mut self) {
        self.registry.register(
            "lease_state",
            "1 for the lease's current state (fresh, stale, suspect, malformed, absent, released; unknown when this reader's clock is too far from the service's to judge), else 0",
            self.state.clone(),
        );
        self.registry.register(
            "lease_age_seconds",
            "Seconds since the lease was last renewed, by this reader's clock",
            self.age.clone(),
        );
        self.registry.register(
            "lease_ttl_seconds",
            "The lease record's TTL in seconds",
            self.ttl.clone(),
        );
        self.registry.register(
            "lease_expires_in_seconds",
            "Seconds until the lease may be taken over (negative: expired)",
            self.expires_in.clone(),
        );
        self.registry.register(
            "lease_holder_skew_seconds",
            "renewed_at minus Last-Modified: the holder's clock offset from the service's (about 1 s resolution)",
            self.skew.clone(),
        );
        self.registry.register(
            "lease_generation",
            "The lease record's generation (fencing token); absent when the record has none",
            self.generation.clone(),
        );
        if !self.one_shot {
            self.registry.register(
            "lease_holder_changes",
            "Times a different holder was seen on the prefix during this process, by how: takeover, handover, after_expiry, acquired (no LEASE before, e.g. after a release), changed_while_fresh",
            self.holder_changes.clone(),
        );
        }
        self.registry.register(
            "lease_holder_seconds",
            "Seconds since the current holder was first seen by this process (its tenure so far, as far as this process knows); absent while nobody holds the prefix",
            self.holder_seconds.clone(),
        );
        self.registry.register(
            "lease_free_seconds",
            "Seconds the prefix has been seen without a holder (no LEASE, or a released one) by this process; absent while someone holds it",
            self.free_seconds.clone(),
        );
        self.registry.register(
            "lease_renewal_gap_ttl_ratio",
            "The largest age of the current holder's record seen at any reading since this process first saw its tenure, as a fraction of its TTL: its renewals were at least that late once (renewing every TTL/3 keeps it near 0.33; above 0.5 a renewal came more than TTL/6 late). A lower bound, as fine as the refresh; absent while nobody holds the prefix or its age is unknown",
            self.renewal_gap.clone(),
        );
        self.registry.register(
            "probe_ok",
            "1 when the precondition probe found the service honours conditional writes, 0 when it found it does not; absent while unknown (see leasectl_probe_known)",
            self.probe_ok.clone(),
        );
        self.registry.register(
            "probe_known",
            "1 when a precondition probe result is known for the target, 0 when not (serve never writes, so it never probes; best-effort mode is not a probe result)",
            self.probe_known.clone(),
        );
    }

    /// Registers the reader's own families (HTTP, clock offset, targets,
    /// gather errors, pod, audit log, store requests, gathers).
    fn register_reader_metrics(&mut self) {
        self.registry.register(
            "http_requests",
            "HTTP requests answered by leasectl serve, by path and status code",
            self.http_requests.clone(),
        );
        self.registry.register(
            "reader_server_offset_seconds",
            "The storage service's clock minus this reader's, from the HTTP Date of its answers",
            self.server_offset.clone(),
        );
        self.registry.register(
            "target_up",
            "1 when the target was listed and read, else 0",
            self.target_up.clone(),
        );
        self.registry.register(
            "gather_errors",
            "Targets and prefixes that could not be gathered, summed over gathers",
            self.gather_errors.clone(),
        );
        self.registry.register(
            "pod_verdicts",
            "Pod writer-lease verdicts currently raised, by kind",
            self.verdicts.clone(),
        );
        self.registry.register(
            "pod_scan_ok",
            "1 when the pod was scanned, 0 when the scan failed or was not asked for",
            self.pod_scan_ok.clone(),
        );
        self.registry.register(
            "audit_log_ok",
            "1 when the audit log followed to name takeovers was read (or is missing: it names none), 0 when it could not be read: then the how of a holder change is unknown (a takeover is counted as after_expiry or changed_while_fresh)",
            self.audit_log_ok.clone(),
        );
        self.registry.register(
            "store_requests",
            "Requests sent to the stores (S3 or local)",
            self.requests.clone(),
        );
        self.registry.register(
            "store_errors",
            "Store requests that failed (not counting the expected 304, 404 and 412 answers)",
            self.request_errors.clone(),
        );
        self.registry
            .register("gathers", "Snapshots gathered", self.gathers.clone());
        self.registry.register(
            "last_gather_timestamp_seconds",
            "When the latest snapshot was judged, Unix time",
            self.last_gather.clone(),
        );
    }

    /// The HTTP request counters (`leasectl_http_requests_total`), shared:
    /// the exporter's handlers count into this handle.
    pub fn http_requests(&self) -> SortedFamily<HttpLabels, Counter> {
        self.http_requests.clone()
    }

    /// The session's holder changes, per prefix.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Brings the metrics up to `snap`; `counters` are the stores' request
    /// counters; `pod_scanned`: the pod was asked for; `audit`: recent
    /// entries of leasectl's audit log (to name takeovers in the history).
    pub fn update(
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

        for f in [
            &self.age,
            &self.ttl,
            &self.expires_in,
            &self.skew,
            &self.generation,
            &self.renewal_gap,
        ] {
            f.clear();
        }
        self.state.clear();
        self.probe_ok.clear();
        self.probe_known.clear();
        self.server_offset.clear();
        self.target_up.clear();
        let mut seen = BTreeSet::new();
        for t in &snap.targets {
            self.update_target(t, &mut seen);
        }
        if !self.one_shot {
            self.update_holder_changes(&seen);
        }
        self.update_tenures(&seen, snap.generated_at);
        // Prefixes no longer seen are forgotten; one not read this time keeps its value.
        self.renewal_gaps.retain(|k, _| seen.contains(k));
        for (pl, (_, _, ratio)) in &self.renewal_gaps {
            self.renewal_gap.get_or_create(pl).set(*ratio);
        }
        self.update_pod(snap, pod_scanned);
    }

    /// One target's gauges and gather errors, and its rows' (each row's
    /// labels go into `seen`, with those of its prefixes that could not be
    /// read this time).
    fn update_target(&mut self, t: &TargetReport, seen: &mut BTreeSet<PrefixLabels>) {
        let s = crate::text::sanitize;
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
            seen.insert(self.update_prefix(&shared, p));
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
            if *u == t.url && (t.error.is_some() || t.errors.iter().any(|e| e.prefix == *p)) {
                seen.insert(PrefixLabels {
                    target: shared.clone(),
                    prefix: s(p).into(),
                });
            }
        }
    }

    /// One row's gauges (state, age, expiry, TTL, skew); returns its labels.
    fn update_prefix(&mut self, target: &Arc<str>, p: &PrefixReport) -> PrefixLabels {
        let pl = PrefixLabels {
            target: target.clone(),
            prefix: crate::text::sanitize(&p.prefix).into(),
        };
        let current = if p.age_unknown {
            "unknown"
        } else {
            p.state.as_str()
        };
        for st in STATES {
            self.state
                .get_or_create(&StateLabels {
                    target: pl.target.clone(),
                    prefix: pl.prefix.clone(),
                    state: st,
                })
                .set(i64::from(st == current));
        }
        if !p.age_unknown {
            if let Some(a) = p.age_s {
                self.age.get_or_create(&pl).set(a);
            }
            if let Some(x) = p.expires_in_s {
                self.expires_in.get_or_create(&pl).set(x);
            }
        }
        if let Some(r) = &p.record {
            self.ttl.get_or_create(&pl).set(r.ttl_s as f64);
            // A float, as every sample is: exact up to 2^53 (microseconds
            // since 1970 are below 2^51).
            if let Some(g) = r.generation {
                self.generation.get_or_create(&pl).set(g as f64);
            }
        }
        if let Some(k) = p.holder_skew_s {
            self.skew.get_or_create(&pl).set(k);
        }
        self.note_renewal_gap(&pl, p);
        pl
    }

    /// The largest age of the current tenure's record seen so far, as a
    /// fraction of its TTL: a new tenure (holder or generation) starts
    /// again; no holder, or an age that cannot be judged, has none (a
    /// tenure whose age is unknown this time keeps what was seen).
    fn note_renewal_gap(&mut self, pl: &PrefixLabels, p: &PrefixReport) {
        let held = p
            .record
            .as_ref()
            .filter(|r| r.ttl_s > 0 && p.state != crate::bucket::LeaseState::Released);
        let Some(r) = held else {
            self.renewal_gaps.remove(pl);
            return;
        };
        let tenure = (r.instance_id.as_str(), r.generation);
        let entry = self.renewal_gaps.get_mut(pl);
        let same = entry
            .as_ref()
            .is_some_and(|(id, g, _)| (id.as_str(), *g) == tenure);
        let ratio = (!p.age_unknown)
            .then_some(p.age_s)
            .flatten()
            .map(|a| a.max(0.0) / r.ttl_s as f64);
        match (entry, same, ratio) {
            (Some(e), true, Some(x)) => e.2 = e.2.max(x),
            (Some(_), true, None) => {}
            (_, _, Some(x)) => {
                self.renewal_gaps
                    .insert(pl.clone(), (r.instance_id.clone(), r.generation, x));
            }
            (_, _, None) => {
                self.renewal_gaps.remove(pl);
            }
        }
    }

    /// How long each prefix in `seen` has had its current holder, or none,
    /// at `now`, from the session's history.
    fn update_tenures(
        &mut self,
        seen: &BTreeSet<PrefixLabels>,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        self.holder_seconds.clear();
        self.free_seconds.clear();
        let s = crate::text::sanitize;
        for ((u, p), h) in self.history.iter() {
            let pl = PrefixLabels {
                target: s(u).into(),
                prefix: s(p).into(),
            };
            if !seen.contains(&pl) {
                continue;
            }
            if let Some((held, since)) = h.current_since() {
                let secs = (now - since).num_milliseconds().max(0) as f64 / 1000.0;
                let family = if held {
                    &self.holder_seconds
                } else {
                    &self.free_seconds
                };
                family.get_or_create(&pl).set(secs);
            }
        }
    }

    /// The holder-change counters of the prefixes in `seen`, brought up to
    /// the history; prefixes no longer seen are forgotten.
    fn update_holder_changes(&mut self, seen: &BTreeSet<PrefixLabels>) {
        let s = crate::text::sanitize;
        for ((u, p), h) in self.history.iter() {
            let pl = PrefixLabels {
                target: s(u).into(),
                prefix: s(p).into(),
            };
            if !seen.contains(&pl) {
                continue;
            }
            let done = self
                .holders_counted
                .entry(pl.clone())
                .or_insert([0; COUNTED.len()]);
            // Every `how` created at zero so that an increase() has a
            // starting point, whichever way the holder changes first.
            for (i, kind) in COUNTED.iter().enumerate() {
                self.holder_changes
                    .get_or_create(&HowLabels {
                        target: pl.target.clone(),
                        prefix: pl.prefix.clone(),
                        how: kind.label(),
                    })
                    .inc_by(h.count_by[i].saturating_sub(done[i]));
                done[i] = h.count_by[i].max(done[i]);
            }
        }
        // Bounded: prefixes no longer seen are forgotten.
        let gone: Vec<PrefixLabels> = self
            .holders_counted
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for k in gone {
            self.holders_counted.remove(&k);
            for kind in COUNTED {
                self.holder_changes.remove(&HowLabels {
                    target: k.target.clone(),
                    prefix: k.prefix.clone(),
                    how: kind.label(),
                });
            }
        }
    }

    /// Sets `leasectl_audit_log_ok{path}` for the audit log `path` followed
    /// to name takeovers: 1 when `readable` (read, or missing: it names
    /// none), 0 when it could not be read. Absent until called (a snapshot
    /// with no audit log followed, e.g. `-o prometheus`, has none).
    pub fn set_audit_log(&mut self, path: &std::path::Path, readable: bool) {
        self.audit_log_ok.clear();
        self.audit_log_ok
            .get_or_create(&AuditLogLabels {
                path: crate::text::sanitize(&path.display().to_string()),
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
    }

    /// The text exposition of every metric (OpenMetrics text, which
    /// Prometheus and node_exporter's textfile collector read).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Writes the exposition in the classic Prometheus text format to `out`
    /// as it is encoded, line by line: the same bytes as
    /// `to_text_format(&self.render())`, without ever holding the whole
    /// exposition (at 50,000 prefixes it is tens of megabytes). `out` is
    /// written in pieces of at most a line; wrap it in a `BufWriter`.
    ///
    /// Errors: the first error of `out` (encoding itself cannot fail).
    pub fn write_text_format<W: std::io::Write>(&self, out: W) -> std::io::Result<()> {
        let mut w = TextFormatWriter {
            out,
            line: String::new(),
            help: None,
            error: None,
        };
        let encoded = prometheus_client::encoding::text::encode(&mut w, &self.registry);
        w.finish(encoded)
    }
}

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{gather, GatherOptions, OpenTarget};

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
        let clock = crate::clock::SystemClock::shared();
        let open = vec![OpenTarget {
            target: format!("file://{}/", dir.path().display()).parse().unwrap(),
            endpoint: "local".into(),
            store: std::sync::Arc::new(crate::store::local::LocalStore::open(dir.path()).unwrap()),
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
