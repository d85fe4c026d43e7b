//! The leases table's sort: the columns `s` cycles through and how each
//! orders the rows.

use super::LeaseRow;
use crate::bucket::LeaseState;
use crate::snapshot::{ExclusionReport, PrefixReport, Snapshot};

/// The column the leases table is sorted by (`s` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Target, then prefix (the default).
    Prefix,
    /// Holder instance id.
    Holder,
    /// Age, oldest first.
    Age,
    /// TTL.
    Ttl,
    /// Expires-in, soonest (or longest expired) first.
    Expires,
    /// State, most urgent first.
    State,
    /// Exclusion.
    Exclusion,
    /// Holder clock skew, largest first.
    Skew,
}

impl SortKey {
    /// Every column, in table order.
    pub const ALL: [SortKey; 8] = [
        SortKey::Prefix,
        SortKey::Holder,
        SortKey::Age,
        SortKey::Ttl,
        SortKey::Expires,
        SortKey::State,
        SortKey::Exclusion,
        SortKey::Skew,
    ];

    /// The next column.
    pub fn next(self) -> Self {
        let i = Self::ALL.iter().position(|k| *k == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }

    /// The column header it sorts.
    pub fn column(self) -> &'static str {
        match self {
            SortKey::Prefix => "PREFIX",
            SortKey::Holder => "HOLDER",
            SortKey::Age => "AGE",
            SortKey::Ttl => "TTL",
            SortKey::Expires => "EXPIRES",
            SortKey::State => "STATE",
            SortKey::Exclusion => "EXCLUSION",
            SortKey::Skew => "SKEW",
        }
    }

    /// Sorts `rows` of snapshot `s` by this column (stable: rows that
    /// compare equal keep the snapshot's order); `exclusion` is the
    /// exclusion shown for a row of a target.
    pub(super) fn sort(
        self,
        rows: &mut [LeaseRow],
        s: &Snapshot,
        exclusion: impl Fn(usize, &PrefixReport) -> ExclusionReport,
    ) {
        let get = |r: &LeaseRow| &s.targets[r.target].prefixes[r.index];
        let f = |x: Option<f64>| x.unwrap_or(f64::NEG_INFINITY);
        match self {
            SortKey::Prefix => {}
            SortKey::Holder => rows.sort_by(|a, b| {
                let h = |r| get(r).record.as_ref().map(|x| x.instance_id.clone());
                h(a).cmp(&h(b))
            }),
            SortKey::Age => rows.sort_by(|a, b| f(get(b).age_s).total_cmp(&f(get(a).age_s))),
            SortKey::Ttl => {
                rows.sort_by_key(|r| std::cmp::Reverse(get(r).record.as_ref().map(|x| x.ttl_s)))
            }
            SortKey::Expires => rows.sort_by(|a, b| {
                let e = |r| get(r).expires_in_s.unwrap_or(f64::INFINITY);
                e(a).total_cmp(&e(b))
            }),
            SortKey::State => rows.sort_by_key(|r| state_rank(get(r).state)),
            SortKey::Exclusion => {
                rows.sort_by_key(|r| format!("{:?}", exclusion(r.target, get(r))))
            }
            SortKey::Skew => rows.sort_by(|a, b| {
                let k = |r| get(r).holder_skew_s.map(f64::abs);
                f(k(b)).total_cmp(&f(k(a)))
            }),
        }
    }
}

fn state_rank(s: LeaseState) -> u8 {
    match s {
        LeaseState::Malformed => 0,
        LeaseState::Suspect => 1,
        LeaseState::Stale => 2,
        LeaseState::Fresh => 3,
        LeaseState::Absent | LeaseState::Released => 4,
    }
}
