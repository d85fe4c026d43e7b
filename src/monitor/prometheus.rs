//! Prometheus metrics of the snapshots (`-o prometheus` and `leasectl
//! serve`), built with the `prometheus-client` crate: the registry, the
//! families and the text exposition (label values escaped by the crate per
//! the format, after [`crate::text::sanitize`] has escaped untrusted text).
//!
//! Gauges describe the latest snapshot (a prefix that is gone is removed);
//! counters accumulate over the life of a [`Metrics`] (one for `-o
//! prometheus`, the process for `serve`). Memory is bounded by the prefixes
//! currently seen.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::audit::AuditEntry;
use crate::snapshot::history::History;
use crate::snapshot::{ExclusionReport, Snapshot};
use crate::store::Counters;
use crate::writer::scan::VerdictKind;

/// `{target, prefix}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct PrefixLabels {
    /// The TARGET URL (escaped).
    pub target: String,
    /// The prefix (escaped).
    pub prefix: String,
}

/// `{target, prefix, state}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// The TARGET URL (escaped).
    pub target: String,
    /// The prefix (escaped).
    pub prefix: String,
    /// fresh, stale, suspect, malformed, absent or unknown.
    pub state: String,
}

/// `{target}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabels {
    /// The TARGET URL (escaped).
    pub target: String,
}

/// `{target, check}` of a precondition probe result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    /// The TARGET URL (escaped).
    pub target: String,
    /// What was checked: `preconditions` (the service refuses failed
    /// `If-None-Match` / `If-Match` writes, so a lease excludes).
    pub check: String,
}

/// `{path, code}` of an HTTP request to the exporter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// `/metrics`, `/healthz`, or `other` for any other path (bounded).
    pub path: String,
    /// The HTTP status code answered.
    pub code: String,
}

/// `{kind}` of a pod verdict.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabels {
    /// The verdict's snake_case name.
    pub kind: String,
}

/// The states of `leasectl_lease_state`: the judged states, and `unknown`
/// for a row whose age cannot be judged (this reader's clock is too far
/// from the service's).
pub const STATES: [&str; 6] = [
    "fresh",
    "stale",
    "suspect",
    "malformed",
    "absent",
    "unknown",
];

const VERDICTS: [VerdictKind; 8] = [
    VerdictKind::InvalidEnable,
    VerdictKind::ArmedHoldsNothing,
    VerdictKind::SiblingsRacing,
    VerdictKind::HolderNotTake,
    VerdictKind::StrayStamp,
    VerdictKind::Waiting,
    VerdictKind::HolderOutsidePod,
    VerdictKind::OrphanedWriter,
];

type FGauge = Gauge<f64, AtomicU64>;

/// The metric families and what they remember between snapshots.
pub struct Metrics {
    registry: Registry,
    state: Family<StateLabels, Gauge>,
    age: Family<PrefixLabels, FGauge>,
    ttl: Family<PrefixLabels, FGauge>,
    expires_in: Family<PrefixLabels, FGauge>,
    skew: Family<PrefixLabels, FGauge>,
    holder_changes: Family<PrefixLabels, Counter>,
    probe_ok: Family<ProbeLabels, Gauge>,
    probe_known: Family<TargetLabels, Gauge>,
    http_requests: Family<HttpLabels, Counter>,
    server_offset: Family<TargetLabels, FGauge>,
    target_up: Family<TargetLabels, Gauge>,
    gather_errors: Family<TargetLabels, Counter>,
    verdicts: Family<VerdictLabels, Gauge>,
    pod_scan_ok: Gauge,
    requests: Counter,
    request_errors: Counter,
    gathers: Counter,
    last_gather: FGauge,
    /// The holder changes of the session, per prefix.
    history: History,
    /// The part of each prefix's history count already added to its counter.
    holders_counted: BTreeMap<PrefixLabels, u64>,
    counted: (u64, u64),
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty metrics, registered under `leasectl_`.
    pub fn new() -> Self {
        let mut m = Self {
            registry: Registry::with_prefix("leasectl"),
            state: Family::default(),
            age: Family::default(),
            ttl: Family::default(),
            expires_in: Family::default(),
            skew: Family::default(),
            holder_changes: Family::default(),
            probe_ok: Family::default(),
            probe_known: Family::default(),
            http_requests: Family::default(),
            server_offset: Family::default(),
            target_up: Family::default(),
            gather_errors: Family::default(),
            verdicts: Family::default(),
            pod_scan_ok: Gauge::default(),
            requests: Counter::default(),
            request_errors: Counter::default(),
            gathers: Counter::default(),
            last_gather: FGauge::default(),
            history: History::new(),
            holders_counted: BTreeMap::new(),
            counted: (0, 0),
        };
        let r = &mut m.registry;
        r.register(
            "lease_state",
            "1 for the lease's current state (fresh, stale, suspect, malformed, absent; unknown when this reader's clock is too far from the service's to judge), else 0",
            m.state.clone(),
        );
        r.register(
            "lease_age_seconds",
            "Seconds since the lease was last renewed, by this reader's clock",
            m.age.clone(),
        );
        r.register(
            "lease_ttl_seconds",
            "The lease record's TTL in seconds",
            m.ttl.clone(),
        );
        r.register(
            "lease_expires_in_seconds",
            "Seconds until the lease may be taken over (negative: expired)",
            m.expires_in.clone(),
        );
        r.register(
            "lease_holder_skew_seconds",
            "renewed_at minus Last-Modified: the holder's clock offset from the service's (about 1 s resolution)",
            m.skew.clone(),
        );
        r.register(
            "lease_holder_changes",
            "Times a different holder was seen on the prefix during this process (takeover, hand-over, a new holder after a release or expiry, or a change while fresh)",
            m.holder_changes.clone(),
        );
        r.register(
            "probe_ok",
            "1 when the precondition probe found the service honours conditional writes, 0 when it found it does not; absent while unknown (see leasectl_probe_known)",
            m.probe_ok.clone(),
        );
        r.register(
            "probe_known",
            "1 when a precondition probe result is known for the target, 0 when not (serve never writes, so it never probes; best-effort mode is not a probe result)",
            m.probe_known.clone(),
        );
        r.register(
            "http_requests",
            "HTTP requests answered by leasectl serve, by path and status code",
            m.http_requests.clone(),
        );
        r.register(
            "reader_server_offset_seconds",
            "The storage service's clock minus this reader's, from the HTTP Date of its answers",
            m.server_offset.clone(),
        );
        r.register(
            "target_up",
            "1 when the target was listed and read, else 0",
            m.target_up.clone(),
        );
        r.register(
            "gather_errors",
            "Targets and prefixes that could not be gathered, summed over gathers",
            m.gather_errors.clone(),
        );
        r.register(
            "pod_verdicts",
            "Pod writer-lease verdicts currently raised, by kind",
            m.verdicts.clone(),
        );
        r.register(
            "pod_scan_ok",
            "1 when the pod was scanned, 0 when the scan failed or was not asked for",
            m.pod_scan_ok.clone(),
        );
        r.register(
            "store_requests",
            "Requests sent to the stores (S3 or local)",
            m.requests.clone(),
        );
        r.register(
            "store_errors",
            "Store requests that failed (not counting the expected 304, 404 and 412 answers)",
            m.request_errors.clone(),
        );
        r.register("gathers", "Snapshots gathered", m.gathers.clone());
        r.register(
            "last_gather_timestamp_seconds",
            "When the latest snapshot was judged, Unix time",
            m.last_gather.clone(),
        );
        m
    }

    /// The HTTP request counters (`leasectl_http_requests_total`), shared:
    /// the exporter's handlers count into this handle.
    pub fn http_requests(&self) -> Family<HttpLabels, Counter> {
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
        let s = crate::text::sanitize;
        self.history.observe(snap, audit);
        self.gathers.inc();
        self.last_gather
            .set(snap.generated_at.timestamp_millis() as f64 / 1000.0);
        let (req, err) = counters.read();
        self.requests.inc_by(req.saturating_sub(self.counted.0));
        self.request_errors
            .inc_by(err.saturating_sub(self.counted.1));
        self.counted = (req, err);

        for f in [&self.age, &self.ttl, &self.expires_in, &self.skew] {
            f.clear();
        }
        self.state.clear();
        self.probe_ok.clear();
        self.probe_known.clear();
        self.server_offset.clear();
        self.target_up.clear();
        let mut seen = BTreeSet::new();
        for t in &snap.targets {
            let target = s(&t.url);
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
                let pl = PrefixLabels {
                    target: target.clone(),
                    prefix: s(&p.prefix),
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
                            state: st.to_owned(),
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
                }
                if let Some(k) = p.holder_skew_s {
                    self.skew.get_or_create(&pl).set(k);
                }
                seen.insert(pl);
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
                        target: target.clone(),
                        prefix: s(p),
                    });
                }
            }
        }
        for ((u, p), h) in self.history.iter() {
            let pl = PrefixLabels {
                target: s(u),
                prefix: s(p),
            };
            if !seen.contains(&pl) {
                continue;
            }
            let done = self.holders_counted.entry(pl.clone()).or_insert(0);
            // Created at zero so that an increase() has a starting point.
            self.holder_changes
                .get_or_create(&pl)
                .inc_by(h.count.saturating_sub(*done));
            *done = h.count.max(*done);
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
            self.holder_changes.remove(&k);
        }
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
}

/// [`Metrics::render`] in the classic Prometheus text format (0.0.4), which
/// node_exporter's textfile collector parses: a counter's `# HELP` and `#
/// TYPE` name its `_total` sample, and there is no `# EOF`.
pub fn to_text_format(openmetrics: &str) -> String {
    let mut counters = BTreeSet::new();
    for l in openmetrics.lines() {
        if let Some(name) = l
            .strip_prefix("# TYPE ")
            .and_then(|r| r.strip_suffix(" counter"))
        {
            counters.insert(name.to_owned());
        }
    }
    let mut out = String::new();
    for l in openmetrics.lines() {
        if l == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| Some((*p, l.strip_prefix(p)?)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(p);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
