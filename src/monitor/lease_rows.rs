//! The per-prefix families of the exposition (`leasectl_lease_*`), kept as
//! one compact row per prefix and encoded from the rows when a scrape or `-o
//! prometheus` writes them.
//!
//! A registry of gauges would hold a series object per prefix and family:
//! eleven families, seven series of `leasectl_lease_state` and five of
//! `leasectl_lease_holder_changes_total` per prefix, 850,000 objects at
//! 50,000 prefixes (issue 38: `serve` held 201 MiB there). A row holds the
//! same values in about 150 bytes, and the rows are shared (`Arc`) with a
//! scrape that is still writing them while the next snapshot is applied (it
//! then gets a copy of its own: [`Arc::make_mut`]).
//!
//! The bytes are those the `prometheus-client` encoder writes for a family
//! of gauges or counters: the rows go through its [`MetricEncoder`], in the
//! order of their labels, as [`super::family::SortedFamily`] orders them.

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::snapshot::history::COUNTED;

/// `{target, prefix}`. The strings are shared (`Arc`) by every series of
/// the prefix: at 50,000 prefixes there are 550,000 series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct PrefixLabels {
    /// The TARGET URL (escaped).
    pub target: Arc<str>,
    /// The prefix (escaped).
    pub prefix: Arc<str>,
}

/// `{target, prefix, state}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct StateLabels {
    /// The TARGET URL (escaped).
    pub target: Arc<str>,
    /// The prefix (escaped).
    pub prefix: Arc<str>,
    /// fresh, stale, suspect, malformed, absent, released or unknown ([`STATES`]).
    pub state: &'static str,
}

/// `{target, prefix, how}` of a holder change.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct HowLabels {
    /// The TARGET URL (escaped).
    pub target: Arc<str>,
    /// The prefix (escaped).
    pub prefix: Arc<str>,
    /// How the holder changed: `takeover`, `handover`, `after_expiry`,
    /// `acquired` or `changed_while_fresh` ([`COUNTED`]'s labels).
    pub how: &'static str,
}

/// The states of `leasectl_lease_state`: the judged states, and `unknown`
/// for a row whose age cannot be judged (this reader's clock is too far
/// from the service's).
pub(crate) const STATES: [&str; 7] = [
    "fresh",
    "stale",
    "suspect",
    "malformed",
    "absent",
    "released",
    "unknown",
];

/// A per-prefix gauge of one value, set from each snapshot.
#[derive(Clone, Copy, Debug)]
pub(super) enum G {
    /// `leasectl_lease_age_seconds`.
    Age,
    /// `leasectl_lease_ttl_seconds`.
    Ttl,
    /// `leasectl_lease_expires_in_seconds`.
    ExpiresIn,
    /// `leasectl_lease_holder_skew_seconds`.
    Skew,
    /// `leasectl_lease_generation` (a float, as every sample is).
    Generation,
    /// `leasectl_lease_holder_seconds`.
    Held,
    /// `leasectl_lease_free_seconds`.
    Free,
}

/// One prefix's values, as the families show them (about 150 bytes with
/// its labels). A value that is not set: the prefix has no series in that
/// family (not read this time, or not known).
#[derive(Clone, Debug, Default)]
pub(super) struct Row {
    /// `leasectl_lease_state`: the index in [`STATES`] of the current state.
    pub(super) state: Option<u8>,
    /// Which of `gauges` are set (bit `G as u8`).
    set: u8,
    /// The values of the [`G`] gauges, by `G as usize`.
    gauges: [f64; 7],
    /// `leasectl_lease_holder_changes_total`, by [`COUNTED`] kind: the
    /// counts of the history already counted (a counter's value).
    pub(super) changes: Option<[u64; COUNTED.len()]>,
    /// The current tenure (holder, generation) and the largest age of its
    /// record seen at a reading, as a fraction of its TTL
    /// (`leasectl_lease_renewal_gap_ttl_ratio`).
    pub(super) gap: Option<Box<Gap>>,
    /// Seen in the latest snapshot (read, or kept because it could not be
    /// read this time); a row not seen is forgotten.
    pub(super) seen: bool,
}

/// A tenure's largest renewal gap so far.
#[derive(Clone, Debug)]
pub(super) struct Gap {
    /// The holder's `instance_id`.
    pub(super) holder: Box<str>,
    /// The record's generation.
    pub(super) generation: Option<u64>,
    /// The largest age / TTL seen.
    pub(super) ratio: f64,
}

impl Row {
    /// Forgets what the previous snapshot said (the gauges that are set
    /// again from each snapshot); counters and the tenure's gap stay.
    pub(super) fn clear_gauges(&mut self) {
        self.state = None;
        self.set = 0;
        self.seen = false;
    }

    /// The value of gauge `g`, if set.
    pub(super) fn get(&self, g: G) -> Option<f64> {
        (self.set & (1 << g as u8) != 0).then_some(self.gauges[g as usize])
    }

    /// Sets gauge `g` to `v`.
    pub(super) fn set(&mut self, g: G, v: f64) {
        self.set |= 1 << g as u8;
        self.gauges[g as usize] = v;
    }
}

/// Every row, in the order of their labels.
pub(super) type Rows = BTreeMap<PrefixLabels, Row>;

/// Which value of a row a family shows.
#[derive(Clone, Copy, Debug)]
enum Column {
    /// `leasectl_lease_state`: a series per state, 1 for the current one.
    State,
    /// A gauge of one value.
    Gauge(G),
    /// `leasectl_lease_renewal_gap_ttl_ratio`.
    Gap,
    /// `leasectl_lease_holder_changes_total`: a counter per kind.
    Changes,
}

/// One family over the shared rows.
#[derive(Debug)]
struct Family {
    rows: Arc<Rows>,
    column: Column,
}

impl Family {
    /// The value of a gauge column in `row`.
    fn value(&self, row: &Row) -> Option<f64> {
        match self.column {
            Column::Gauge(g) => row.get(g),
            Column::Gap => row.gap.as_ref().map(|g| g.ratio),
            Column::State | Column::Changes => None,
        }
    }
}

impl EncodeMetric for Family {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        match self.column {
            Column::State => {
                // The series of a prefix in the order of their `state` label.
                let mut order: Vec<usize> = (0..STATES.len()).collect();
                order.sort_by_key(|&i| STATES[i]);
                for (pl, row) in self.rows.iter() {
                    let Some(current) = row.state else { continue };
                    for &i in &order {
                        let labels = StateLabels {
                            target: pl.target.clone(),
                            prefix: pl.prefix.clone(),
                            state: STATES[i],
                        };
                        let v = i64::from(i == usize::from(current));
                        encoder.encode_family(&labels)?.encode_gauge(&v)?;
                    }
                }
            }
            Column::Gauge(_) | Column::Gap => {
                for (pl, row) in self.rows.iter() {
                    if let Some(v) = self.value(row) {
                        encoder.encode_family(pl)?.encode_gauge(&v)?;
                    }
                }
            }
            Column::Changes => {
                let mut order: Vec<usize> = (0..COUNTED.len()).collect();
                order.sort_by_key(|&i| COUNTED[i].label());
                for (pl, row) in self.rows.iter() {
                    let Some(counts) = row.changes else { continue };
                    for &i in &order {
                        let labels = HowLabels {
                            target: pl.target.clone(),
                            prefix: pl.prefix.clone(),
                            how: COUNTED[i].label(),
                        };
                        encoder
                            .encode_family(&labels)?
                            .encode_counter::<NoLabelSet, _, u64>(&counts[i], None)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        match self.column {
            Column::Changes => MetricType::Counter,
            _ => MetricType::Gauge,
        }
    }

    fn is_empty(&self) -> bool {
        !self.rows.values().any(|r| match self.column {
            Column::State => r.state.is_some(),
            Column::Gauge(_) | Column::Gap => self.value(r).is_some(),
            Column::Changes => r.changes.is_some(),
        })
    }
}

/// The `leasectl_lease_*` families of `rows`, registered in the order of
/// the exposition (as a registry of gauges had them), under `leasectl_`;
/// `one_shot`: without the holder-change counters (one snapshot cannot see
/// a change).
pub(super) fn registry(rows: &Arc<Rows>, one_shot: bool) -> Registry {
    let mut r = Registry::with_prefix("leasectl");
    let family = |column| Family {
        rows: rows.clone(),
        column,
    };
    r.register(
        "lease_state",
        "1 for the lease's current state (fresh, stale, suspect, malformed, absent, released; unknown when this reader's clock is too far from the service's to judge), else 0",
        family(Column::State),
    );
    r.register(
        "lease_age_seconds",
        "Seconds since the lease was last renewed, by this reader's clock",
        family(Column::Gauge(G::Age)),
    );
    r.register(
        "lease_ttl_seconds",
        "The lease record's TTL in seconds",
        family(Column::Gauge(G::Ttl)),
    );
    r.register(
        "lease_expires_in_seconds",
        "Seconds until the lease may be taken over (negative: expired)",
        family(Column::Gauge(G::ExpiresIn)),
    );
    r.register(
        "lease_holder_skew_seconds",
        "renewed_at minus Last-Modified: the holder's clock offset from the service's (about 1 s resolution)",
        family(Column::Gauge(G::Skew)),
    );
    r.register(
        "lease_generation",
        "The lease record's generation (fencing token); absent when the record has none",
        family(Column::Gauge(G::Generation)),
    );
    if !one_shot {
        r.register(
            "lease_holder_changes",
            "Times a different holder was seen on the prefix during this process, by how: takeover, handover, after_expiry, acquired (no LEASE before, e.g. after a release), changed_while_fresh",
            family(Column::Changes),
        );
    }
    r.register(
        "lease_holder_seconds",
        "Seconds since the current holder was first seen by this process (its tenure so far, as far as this process knows); absent while nobody holds the prefix",
        family(Column::Gauge(G::Held)),
    );
    r.register(
        "lease_free_seconds",
        "Seconds the prefix has been seen without a holder (no LEASE, or a released one) by this process; absent while someone holds it",
        family(Column::Gauge(G::Free)),
    );
    r.register(
        "lease_renewal_gap_ttl_ratio",
        "The largest age of the current holder's record seen at any reading since this process first saw its tenure, as a fraction of its TTL: its renewals were at least that late once (renewing every TTL/3 keeps it near 0.33; above 0.5 a renewal came more than TTL/6 late). A lower bound, as fine as the refresh; absent while nobody holds the prefix or its age is unknown",
        family(Column::Gap),
    );
    r
}
