//! The holder changes observed per prefix during one session (the console,
//! `serve`): who took the lease, when this reader saw it, and how.
//!
//! Each [`History::observe`] compares a snapshot with the previous
//! observation of every prefix. A different holder (or none) is a
//! [`HolderChange`], classified as:
//!
//! - [`ChangeKind::Takeover`]: an `outcome` (or `intent`) entry of
//!   leasectl's audit log names this lease key (and bucket) and wrote the
//!   record now seen (its ETag or its holder), after the previous holder was
//!   last seen;
//! - [`ChangeKind::Handover`]: such a takeover done with `--then
//!   handover:ID`, whose record names the successor now seen;
//! - [`ChangeKind::Expiry`]: a new holder after the previous record had
//!   expired (its TTL had run out by this reader's clock), or was suspect or
//!   malformed;
//! - [`ChangeKind::Acquired`]: a holder on a prefix seen without a LEASE;
//! - [`ChangeKind::Release`]: the LEASE is gone (or the prefix no longer
//!   listed while its target was gathered);
//! - [`ChangeKind::Unexpected`]: the record changed hands while it was still
//!   fresh with no takeover recorded here, or became unreadable: someone
//!   wrote over a live lease.
//!
//! Renewals (same holder, new ETag, same generation) are not changes; the
//! same holder under a new generation (it released and took the lease
//! again between two reads) is one. Each change carries the generations
//! before and after (`None` where a record had none). A prefix that could not
//! be read keeps its last observation: an error is never a release. Times are
//! this reader's clock (the snapshot's `generated_at`), UTC. Memory is
//! bounded: [`Limits`] caps the changes kept per prefix, in all, and the
//! prefixes tracked.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::{DateTime, Utc};

use crate::audit::AuditEntry;
use crate::bucket::LeaseState;
use crate::snapshot::{Delta, PrefixReport, RowUpdate, Snapshot, TargetReport};
use crate::text::sanitize;

/// How a holder change came about (module docs).
/// Serialised as its [`ChangeKind::label`] (`--watch`'s `how`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ChangeKind {
    /// The first time this session saw the prefix (not a change).
    #[serde(rename = "first_seen")]
    FirstSeen,
    /// A takeover recorded in leasectl's audit log.
    #[serde(rename = "takeover")]
    Takeover,
    /// A takeover recorded in leasectl's audit log with `--then
    /// handover:ID`, whose record names the successor now seen.
    #[serde(rename = "handover")]
    Handover,
    /// A new holder after the previous record had expired (or was suspect or
    /// malformed).
    #[serde(rename = "after_expiry")]
    Expiry,
    /// A holder on a prefix that had no LEASE.
    #[serde(rename = "acquired")]
    Acquired,
    /// The LEASE is gone.
    #[serde(rename = "released")]
    Release,
    /// Changed while the previous record was still fresh, with no takeover
    /// recorded here, or overwritten by something unreadable.
    #[serde(rename = "changed_while_fresh")]
    Unexpected,
}

/// The kinds that count as a holder change (a new holder was seen), in the
/// order of [`PrefixHistory::count_by`]: the values of
/// `leasectl_lease_holder_changes_total`'s `how` label.
pub const COUNTED: [ChangeKind; 5] = [
    ChangeKind::Takeover,
    ChangeKind::Handover,
    ChangeKind::Expiry,
    ChangeKind::Acquired,
    ChangeKind::Unexpected,
];

impl ChangeKind {
    /// The kind in words, for the console and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::FirstSeen => "first seen",
            ChangeKind::Takeover => "takeover",
            ChangeKind::Handover => "hand-over",
            ChangeKind::Expiry => "after expiry",
            ChangeKind::Acquired => "acquired",
            ChangeKind::Release => "released",
            ChangeKind::Unexpected => "CHANGED WHILE FRESH",
        }
    }

    /// The kind as a fixed token, for machines: `first_seen`, `takeover`,
    /// `handover`, `after_expiry`, `acquired`, `released`,
    /// `changed_while_fresh` (`--watch`'s `how`, the Prometheus `how` label).
    pub fn label(self) -> &'static str {
        match self {
            ChangeKind::FirstSeen => "first_seen",
            ChangeKind::Takeover => "takeover",
            ChangeKind::Handover => "handover",
            ChangeKind::Expiry => "after_expiry",
            ChangeKind::Acquired => "acquired",
            ChangeKind::Release => "released",
            ChangeKind::Unexpected => "changed_while_fresh",
        }
    }
}

/// One observed change of a prefix's holder.
#[derive(Debug, Clone, PartialEq)]
pub struct HolderChange {
    /// When this reader saw it (the snapshot's `generated_at`, reader's clock, UTC).
    pub at: DateTime<Utc>,
    /// How.
    pub kind: ChangeKind,
    /// The new holder's instance id, escaped ([`crate::text::sanitize`]);
    /// `None` when there is no readable holder (released, malformed).
    pub holder: Option<String>,
    /// The previous holder, escaped; `None` when there was none.
    pub previous: Option<String>,
    /// For a takeover: `operator — reason` from the audit entry, escaped.
    pub audit: Option<String>,
    /// The new record's generation (`None`: unknown, or no record).
    pub generation: Option<u64>,
    /// The previous record's generation (`None`: unknown, or no record).
    pub previous_generation: Option<u64>,
    /// The new holder's instance id as read (unescaped: for JSON, which
    /// escapes it itself).
    pub holder_id: Option<String>,
    /// The previous holder's instance id as read (unescaped).
    pub previous_id: Option<String>,
    /// For a takeover or hand-over: the audit log's entry of it.
    pub takeover: Option<crate::snapshot::LastTakeover>,
}

impl HolderChange {
    /// Whether this counts as a holder change for
    /// `leasectl_lease_holder_changes_total`: a (new) holder was seen.
    pub fn counts(&self) -> bool {
        self.kind != ChangeKind::FirstSeen && self.holder.is_some()
    }

    /// `generation 7 → 8` (`-` for an unknown one; `generation 8` for the
    /// first sighting), or `None` when neither record has a generation.
    pub fn generation_text(&self) -> Option<String> {
        let g = |g: Option<u64>| g.map_or_else(|| "-".to_owned(), |g| g.to_string());
        match (self.kind, self.previous_generation, self.generation) {
            (_, None, None) => None,
            (ChangeKind::FirstSeen, _, now) => Some(format!("generation {}", g(now))),
            (_, before, now) => Some(format!("generation {} → {}", g(before), g(now))),
        }
    }
}

/// What was last seen of one prefix.
#[derive(Debug, Clone)]
struct Seen {
    /// The raw holder (compared unescaped).
    holder: Option<String>,
    /// The record's generation.
    generation: Option<u64>,
    /// The last generation this holder was seen with, kept across reads of
    /// a record without one: a holder whose record lost its generation
    /// between two reads and came back under another is a change.
    known_generation: Option<u64>,
    /// A LEASE object exists.
    present: bool,
    state: LeaseState,
    /// When the record expires by this reader's clock, if it has one.
    expires_at: Option<DateTime<Utc>>,
    /// When this was last observed.
    at: DateTime<Utc>,
    /// When this holder was first observed: a takeover that replaced it was
    /// recorded after that (a row read by need, at the listing's cadence,
    /// may show the change long after it happened).
    since: DateTime<Utc>,
}

/// One prefix's timeline.
#[derive(Debug, Clone, Default)]
pub struct PrefixHistory {
    /// The changes kept, oldest first (at most [`Limits::per_prefix`]).
    pub changes: VecDeque<HolderChange>,
    /// Holder changes counted since the session started ([`HolderChange::counts`]);
    /// never decreases when old changes are dropped.
    pub count: u64,
    /// [`PrefixHistory::count`] by kind, in the order of [`COUNTED`].
    pub count_by: [u64; COUNTED.len()],
    last: Option<Seen>,
}

/// Memory bounds of a [`History`].
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Changes kept per prefix (default 32).
    pub per_prefix: usize,
    /// Changes kept in all (default 4096); the oldest go first.
    pub total: usize,
    /// Prefixes tracked (default 100,000: every prefix of a large console,
    /// so none is forgotten and seen again as new at every refresh); those not
    /// seen longest go first.
    pub prefixes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            per_prefix: 32,
            total: 4096,
            prefixes: 100_000,
        }
    }
}

/// `(target URL, prefix)`, both as in the snapshot (unescaped).
pub type PrefixKey = (String, String);

/// The session's holder changes, per prefix.
#[derive(Debug, Clone, Default)]
pub struct History {
    prefixes: BTreeMap<PrefixKey, PrefixHistory>,
    limits: Limits,
    total: usize,
}

/// Grace, in seconds, between an audit entry's time and this reader's
/// observations (both are this host's clock, but written at different steps).
const AUDIT_SLACK_S: i64 = 5;

impl History {
    /// An empty history with the default [`Limits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty history with these limits (each at least 1).
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            limits: Limits {
                per_prefix: limits.per_prefix.max(1),
                total: limits.total.max(1),
                prefixes: limits.prefixes.max(1),
            },
            ..Self::default()
        }
    }

    /// The timeline of one prefix, if it was seen.
    pub fn get(&self, target: &str, prefix: &str) -> Option<&PrefixHistory> {
        self.prefixes.get(&(target.to_owned(), prefix.to_owned()))
    }

    /// Every tracked prefix with its timeline.
    pub fn iter(&self) -> impl Iterator<Item = (&PrefixKey, &PrefixHistory)> {
        self.prefixes.iter()
    }

    /// Changes kept in all.
    pub fn len(&self) -> usize {
        self.total
    }

    /// No change kept.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Compares `snap` with what was seen before and records each change.
    /// `audit`: recent entries of leasectl's audit log (any order).
    pub fn observe(&mut self, snap: &Snapshot, audit: &[AuditEntry]) {
        self.observe_into(snap, audit, None);
    }

    /// [`History::observe`], returning the changes it recorded (first
    /// sightings left out), in the order of the snapshot's rows: what
    /// `--watch` writes as `holder_change` lines.
    pub fn observe_changes(
        &mut self,
        snap: &Snapshot,
        audit: &[AuditEntry],
    ) -> Vec<(PrefixKey, HolderChange)> {
        let mut out = Vec::new();
        self.observe_into(snap, audit, Some(&mut out));
        out
    }

    fn observe_into(
        &mut self,
        snap: &Snapshot,
        audit: &[AuditEntry],
        mut out: Option<&mut Vec<(PrefixKey, HolderChange)>>,
    ) {
        let now = snap.generated_at;
        let mut seen_now: BTreeSet<PrefixKey> = BTreeSet::new();
        for t in &snap.targets {
            for p in &t.prefixes {
                let key = self.observe_row(t, p, now, audit, out.as_deref_mut());
                seen_now.insert(key);
            }
            // A prefix no longer listed under a target gathered in full is
            // gone: its LEASE with it. Unread prefixes keep their last state.
            // (Only when this target has history entries beyond the rows seen:
            // the search below copies every key.)
            let entries = self.prefixes.keys().filter(|(u, _)| *u == t.url).count();
            if t.error.is_none() && entries > t.prefixes.len() {
                let unread: BTreeSet<&str> = t.errors.iter().map(|e| e.prefix.as_str()).collect();
                let gone: Vec<PrefixKey> = self
                    .prefixes
                    .iter()
                    .filter(|((u, p), h)| {
                        *u == t.url
                            && !seen_now.contains(&(u.clone(), p.clone()))
                            && !unread.contains(p.as_str())
                            && h.last.as_ref().is_some_and(|s| s.present)
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in gone {
                    let cur = Seen {
                        holder: None,
                        generation: None,
                        known_generation: None,
                        present: false,
                        state: LeaseState::Absent,
                        expires_at: None,
                        at: now,
                        since: now,
                    };
                    let want = out.is_some();
                    let kept = want.then(|| k.clone());
                    if let (Some(out), Some(c), Some(k)) =
                        (out.as_deref_mut(), self.apply(k, cur, None, want), kept)
                    {
                        out.push((k, c));
                    }
                }
            }
        }
        self.evict_prefixes(&seen_now);
        self.trim_total();
    }

    /// Observes one row `p` of target `t` at `now`; returns its key.
    fn observe_row(
        &mut self,
        t: &TargetReport,
        p: &PrefixReport,
        now: DateTime<Utc>,
        audit: &[AuditEntry],
        out: Option<&mut Vec<(PrefixKey, HolderChange)>>,
    ) -> PrefixKey {
        let key = (t.url.clone(), p.prefix.clone());
        let mut cur = Seen {
            holder: p.record.as_ref().map(|r| r.instance_id.clone()),
            generation: p.record.as_ref().and_then(|r| r.generation),
            known_generation: p.record.as_ref().and_then(|r| r.generation),
            present: p.state != LeaseState::Absent,
            state: p.state,
            expires_at: p
                .expires_in_s
                .filter(|_| p.record.is_some())
                .and_then(|x| chrono::Duration::try_milliseconds((x * 1000.0) as i64))
                .map(|d| now + d),
            at: now,
            since: now,
        };
        // The audit log is searched only when the holder changed.
        let unchanged = match self.prefixes.get(&key).and_then(|h| h.last.as_ref()) {
            Some(prev) if same_holder(prev, &cur) => {
                cur.since = prev.since;
                cur.known_generation = cur.generation.or(prev.known_generation);
                true
            }
            _ => false,
        };
        let found = if unchanged {
            None
        } else {
            audit_match(audit, t, p, cur.holder.as_deref())
        };
        let change = self.apply(key.clone(), cur, found, out.is_some());
        if let (Some(out), Some(c)) = (out, change) {
            out.push((key.clone(), c));
        }
        key
    }

    /// [`History::observe`] of only the rows `delta` names, once it is
    /// applied to `snap` (the console's refresh that read a few of many
    /// rows): the other rows were not read again, so nothing changed on
    /// them; a row whose LEASE could not be read keeps its last state, as
    /// in a whole snapshot. No prefix vanishes in a delta (a listing that
    /// changed comes as a whole snapshot).
    pub fn observe_rows(&mut self, snap: &Snapshot, delta: &Delta, audit: &[AuditEntry]) {
        let mut seen: BTreeSet<PrefixKey> = BTreeSet::new();
        for d in &delta.targets {
            let Some(t) = snap.targets.get(d.index) else {
                continue;
            };
            for (prefix, update) in &d.rows {
                if !matches!(update, RowUpdate::Report(_)) {
                    continue;
                }
                let Ok(i) = t
                    .prefixes
                    .binary_search_by(|p| p.prefix.as_str().cmp(prefix))
                else {
                    continue;
                };
                seen.insert(self.observe_row(t, &t.prefixes[i], snap.generated_at, audit, None));
            }
        }
        self.evict_prefixes(&seen);
        self.trim_total();
    }

    /// Records what `cur` changed on `key`; returns a copy of the change
    /// when `want` (first sightings left out).
    fn apply(
        &mut self,
        key: PrefixKey,
        cur: Seen,
        audit: Option<&AuditEntry>,
        want: bool,
    ) -> Option<HolderChange> {
        let h = self.prefixes.entry(key).or_default();
        let change = match &h.last {
            None => Some(HolderChange {
                at: cur.at,
                kind: ChangeKind::FirstSeen,
                holder: cur.holder.as_deref().map(sanitize),
                previous: None,
                audit: None,
                generation: cur.generation,
                previous_generation: None,
                holder_id: cur.holder.clone(),
                previous_id: None,
                takeover: None,
            }),
            Some(prev) => classify(prev, &cur, audit),
        };
        h.last = Some(cur);
        if let Some(c) = change {
            if c.counts() {
                h.count += 1;
                if let Some(i) = COUNTED.iter().position(|k| *k == c.kind) {
                    h.count_by[i] += 1;
                }
            }
            let copy = (want && c.kind != ChangeKind::FirstSeen).then(|| c.clone());
            h.changes.push_back(c);
            self.total += 1;
            if h.changes.len() > self.limits.per_prefix {
                h.changes.pop_front();
                self.total -= 1;
            }
            return copy;
        }
        None
    }

    /// Drops the oldest changes of all beyond [`Limits::total`], in one pass
    /// (linear in the changes kept: a refresh of 10,000 prefixes stays cheap).
    fn trim_total(&mut self) {
        let excess = self.total.saturating_sub(self.limits.total);
        if excess == 0 {
            return;
        }
        // The `excess`-th oldest time: every change before it goes, then
        // changes at exactly that time until enough went.
        let mut times: Vec<DateTime<Utc>> = self
            .prefixes
            .values()
            .flat_map(|h| h.changes.iter().map(|c| c.at))
            .collect();
        let (_, cut, _) = times.select_nth_unstable(excess - 1);
        let cut = *cut;
        let mut left = excess;
        for h in self.prefixes.values_mut() {
            while left > 0 && h.changes.front().is_some_and(|c| c.at < cut) {
                h.changes.pop_front();
                left -= 1;
            }
        }
        for h in self.prefixes.values_mut() {
            while left > 0 && h.changes.front().is_some_and(|c| c.at == cut) {
                h.changes.pop_front();
                left -= 1;
            }
        }
        self.total = self.prefixes.values().map(|h| h.changes.len()).sum();
    }

    /// Forgets the prefixes seen longest ago beyond [`Limits::prefixes`]
    /// (never one seen in this snapshot unless there are more of those).
    fn evict_prefixes(&mut self, seen_now: &BTreeSet<PrefixKey>) {
        let excess = self.prefixes.len().saturating_sub(self.limits.prefixes);
        if excess == 0 {
            return;
        }
        // One sort, not one scan per prefix evicted.
        let mut order: Vec<(bool, Option<DateTime<Utc>>, PrefixKey)> = self
            .prefixes
            .iter()
            .map(|(k, h)| {
                (
                    seen_now.contains(k),
                    h.last.as_ref().map(|s| s.at),
                    k.clone(),
                )
            })
            .collect();
        order.sort_unstable();
        for (_, _, k) in order.into_iter().take(excess) {
            if let Some(h) = self.prefixes.remove(&k) {
                self.total -= h.changes.len();
            }
        }
    }
}

/// Whether `cur` has the holder `prev` had: the same instance id (or none),
/// the LEASE still there (or still not), and no new generation (compared
/// with the last one this holder was seen with, when the record carries one:
/// an unknown generation is no evidence of a change).
fn same_holder(prev: &Seen, cur: &Seen) -> bool {
    let generation_kept = match (prev.known_generation, cur.generation) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    prev.holder == cur.holder && prev.present == cur.present && generation_kept
}

/// How `prev` became `cur`, if the holder changed.
fn classify(prev: &Seen, cur: &Seen, audit: Option<&AuditEntry>) -> Option<HolderChange> {
    if same_holder(prev, cur) {
        return None;
    }
    let audit = audit.filter(|e| {
        e.time >= prev.since - chrono::Duration::seconds(AUDIT_SLACK_S)
            && e.time <= cur.at + chrono::Duration::seconds(AUDIT_SLACK_S)
    });
    let kind = if !cur.present {
        ChangeKind::Release
    } else if cur.holder.is_none() {
        // Present but unreadable: overwritten with something that is no record.
        ChangeKind::Unexpected
    } else if let Some(e) = audit {
        // A hand-over's record names the successor now holding the lease.
        let handed = e.then.starts_with("handover:")
            && e.written
                .as_ref()
                .is_some_and(|w| Some(&w.record.instance_id) == cur.holder.as_ref());
        if handed {
            ChangeKind::Handover
        } else {
            ChangeKind::Takeover
        }
    } else if !prev.present {
        ChangeKind::Acquired
    } else if prev.state != LeaseState::Fresh || prev.expires_at.is_none_or(|x| cur.at >= x) {
        ChangeKind::Expiry
    } else {
        ChangeKind::Unexpected
    };
    let audit = audit.filter(|_| matches!(kind, ChangeKind::Takeover | ChangeKind::Handover));
    Some(HolderChange {
        at: cur.at,
        kind,
        holder: cur.holder.as_deref().map(sanitize),
        previous: prev.holder.as_deref().map(sanitize),
        audit: audit.map(|e| format!("{} — {}", sanitize(&e.operator), sanitize(&e.reason))),
        generation: cur.generation,
        previous_generation: prev.generation,
        holder_id: cur.holder.clone(),
        previous_id: prev.holder.clone(),
        takeover: audit.and_then(crate::snapshot::LastTakeover::of_entry),
    })
}

/// The newest takeover entry in `audit` that wrote the record now seen on
/// `p` of target `t`: the same lease (store and key, however the takeover's
/// TARGET was spelled: [`crate::audit::AuditTarget::is_lease`]), and its
/// written ETag or holder is the current one. An `intent` counts too (it
/// names the holder it is about to write, and is fsynced before the PUT):
/// a reader that sees the new record before the `outcome` is appended still
/// knows it for a takeover.
fn audit_match<'a>(
    audit: &'a [AuditEntry],
    t: &crate::snapshot::TargetReport,
    p: &crate::snapshot::PrefixReport,
    holder: Option<&str>,
) -> Option<&'a AuditEntry> {
    let holder = holder?;
    audit
        .iter()
        .filter(|e| {
            (e.phase == "outcome" || e.phase == "intent")
                && e.action == "takeover"
                && e.target.is_lease(&t.url, t.bucket.as_deref(), &p.key)
                && e.written.as_ref().is_some_and(|w| {
                    (w.etag.is_some() && w.etag == p.etag) || w.record.instance_id == holder
                })
        })
        .max_by_key(|e| e.time)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditObserved, AuditTarget, AuditWritten};
    use crate::bucket::{LeaseRecord, Observed};
    use crate::snapshot::{PrefixReport, ReaderClock, TargetReport};

    const URL: &str = "file:///srv/leases/";

    fn t0() -> DateTime<Utc> {
        "2026-01-01T12:00:00Z".parse().unwrap()
    }

    fn at(s: i64) -> DateTime<Utc> {
        t0() + chrono::Duration::seconds(s)
    }

    fn record(holder: &str, renewed: DateTime<Utc>) -> LeaseRecord {
        LeaseRecord {
            instance_id: holder.into(),
            acquired_at: renewed,
            renewed_at: renewed,
            ttl_s: 30,
            generation: None,
        }
    }

    /// A row for `db/` held by `holder` (renewed at `renewed`), or absent.
    fn row(holder: Option<(&str, DateTime<Utc>)>, etag: &str, now: DateTime<Utc>) -> PrefixReport {
        let observed = match holder {
            Some((h, renewed)) => Observed::Present {
                etag: Some(etag.into()),
                last_modified: Some(renewed),
                record: Ok(record(h, renewed)),
            },
            None => Observed::Absent,
        };
        PrefixReport::new("db/".into(), observed, now)
    }

    fn snap(now: DateTime<Utc>, rows: Vec<PrefixReport>, error: Option<&str>) -> Snapshot {
        Snapshot {
            schema_version: crate::snapshot::SCHEMA_VERSION,
            generated_at: now,
            reader_clock: ReaderClock {
                now,
                server_offset_s: None,
                server_offset_error_s: None,
            },
            targets: vec![TargetReport {
                url: URL.into(),
                endpoint: "local".into(),
                endpoint_url: None,
                region: None,
                addressing_style: None,
                bucket: None,
                error: error.map(str::to_owned),
                errors: Vec::new(),
                prefixes: rows,
                server_offset_s: None,
                server_offset_error_s: None,
                server_clock_note: None,
            }],
            pod: Default::default(),
            pod_error: None,
            audit_log: None,
        }
    }

    fn kinds(h: &History) -> Vec<ChangeKind> {
        h.get(URL, "db/")
            .unwrap()
            .changes
            .iter()
            .map(|c| c.kind)
            .collect()
    }

    #[test]
    fn renewals_are_not_changes_and_expiry_release_acquire_are() {
        let mut h = History::new();
        h.observe(
            &snap(at(0), vec![row(Some(("a", at(0))), "e1", at(0))], None),
            &[],
        );
        h.observe(
            &snap(at(10), vec![row(Some(("a", at(10))), "e2", at(10))], None),
            &[],
        );
        assert_eq!(kinds(&h), [ChangeKind::FirstSeen]);
        // a stops renewing at 10 s (TTL 30 s): b after the expiry.
        h.observe(
            &snap(at(45), vec![row(Some(("b", at(45))), "e3", at(45))], None),
            &[],
        );
        // Released, then acquired again.
        h.observe(&snap(at(50), vec![row(None, "", at(50))], None), &[]);
        h.observe(
            &snap(at(55), vec![row(Some(("c", at(55))), "e4", at(55))], None),
            &[],
        );
        assert_eq!(
            kinds(&h),
            [
                ChangeKind::FirstSeen,
                ChangeKind::Expiry,
                ChangeKind::Release,
                ChangeKind::Acquired
            ]
        );
        let p = h.get(URL, "db/").unwrap();
        assert_eq!(p.count, 2, "b and c");
        assert_eq!(p.changes[1].previous.as_deref(), Some("a"));
        assert_eq!(p.changes[1].holder.as_deref(), Some("b"));
        assert_eq!(p.changes[1].at, at(45));
    }

    #[test]
    fn a_change_while_fresh_is_unexpected_unless_audited() {
        let mut h = History::new();
        h.observe(
            &snap(at(0), vec![row(Some(("a", at(0))), "e1", at(0))], None),
            &[],
        );
        h.observe(
            &snap(at(5), vec![row(Some(("b", at(5))), "e2", at(5))], None),
            &[],
        );
        assert_eq!(kinds(&h)[1], ChangeKind::Unexpected);

        let entry = AuditEntry {
            time: at(8),
            phase: "outcome".into(),
            id: "x".into(),
            operator: "ops@host\x1b[2J".into(),
            tool_version: "0".into(),
            action: "takeover".into(),
            target: AuditTarget {
                endpoint: None,
                region: None,
                addressing_style: None,
                bucket: None,
                key: "db/LEASE".into(),
                url: format!("{URL}db/"),
            },
            observed: AuditObserved {
                record: None,
                etag: Some("e2".into()),
                judgement: "fresh".into(),
                age_s: None,
                reader_clock: at(8),
            },
            written: Some(AuditWritten {
                record: record("c", at(8)),
                etag: Some("e3".into()),
            }),
            reason: "stuck".into(),
            exclusion: "conditional".into(),
            forced: true,
            then: "hold".into(),
            outcome: Some("taken".into()),
            writes_safe_from: None,
        };
        h.observe(
            &snap(at(10), vec![row(Some(("c", at(8))), "e3", at(10))], None),
            std::slice::from_ref(&entry),
        );
        let p = h.get(URL, "db/").unwrap();
        assert_eq!(p.changes[2].kind, ChangeKind::Takeover);
        assert_eq!(
            p.changes[2].audit.as_deref(),
            Some("ops@host\\x1b[2J — stuck")
        );
        // An old entry for the same key does not make a later change a takeover.
        h.observe(
            &snap(
                at(100),
                vec![row(Some(("d", at(100))), "e9", at(100))],
                None,
            ),
            &[entry],
        );
        assert_eq!(kinds(&h)[3], ChangeKind::Expiry);
    }

    /// A takeover outcome of the lease `key` reached through `url` (bucket
    /// `bucket`) that wrote holder `holder` at `t`.
    fn outcome(url: &str, bucket: Option<&str>, key: &str, holder: &str, t: i64) -> AuditEntry {
        AuditEntry {
            time: at(t),
            phase: "outcome".into(),
            id: "x".into(),
            operator: "ops@host".into(),
            tool_version: "0".into(),
            action: "takeover".into(),
            target: AuditTarget {
                endpoint: None,
                region: None,
                addressing_style: None,
                bucket: bucket.map(str::to_owned),
                key: key.into(),
                url: url.into(),
            },
            observed: AuditObserved {
                record: None,
                etag: None,
                judgement: "fresh".into(),
                age_s: None,
                reader_clock: at(t),
            },
            written: Some(AuditWritten {
                record: record(holder, at(t)),
                etag: None,
            }),
            reason: "stuck".into(),
            exclusion: "conditional".into(),
            forced: true,
            then: "hold".into(),
            outcome: Some("taken".into()),
            writes_safe_from: None,
        }
    }

    /// Issue 23 item 4: `leasectl takeover --force file:///srv/leases/db/`
    /// audits key `LEASE` (the prefix directory is its store); a console
    /// watching `file:///srv/leases/` reads the same file as `db/LEASE`. On
    /// S3, `s3://b/p/s1/` and `s3://b/` name the same key of bucket `b`.
    #[test]
    fn a_takeover_is_recognised_however_its_target_was_spelled() {
        // (url of the takeover, its bucket, its key, recognised?)
        let local = [
            ("file:///srv/leases/db/", None, "LEASE", true),
            ("file:///srv/leases/db", None, "LEASE", true),
            // The console's form: the key relative to the TARGET it watches.
            ("file:///srv/leases/db/", None, "db/LEASE", true),
            ("file:///srv/leases/db/x/", None, "LEASE", false),
            ("file:///srv/other/db/", None, "LEASE", false),
        ];
        for (url, bucket, key, yes) in local {
            let mut h = History::new();
            h.observe(
                &snap(at(0), vec![row(Some(("a", at(0))), "e1", at(0))], None),
                &[],
            );
            let entry = outcome(url, bucket, key, "b", 4);
            h.observe(
                &snap(at(5), vec![row(Some(("b", at(4))), "e2", at(5))], None),
                &[entry],
            );
            let want = if yes {
                ChangeKind::Takeover
            } else {
                ChangeKind::Unexpected
            };
            assert_eq!(kinds(&h)[1], want, "{url} {key}");
        }
        let s3 = [
            ("s3://b/p/s1/", Some("b"), "p/s1/LEASE", true),
            ("s3://b/", Some("b"), "p/s1/LEASE", true),
            ("s3://b/p/s1/", Some("c"), "p/s1/LEASE", false),
            ("s3://b/p/s1/", Some("b"), "s1/LEASE", false),
        ];
        for (url, bucket, key, yes) in s3 {
            let snap_s3 = |t: i64, holder: &str| {
                let mut r = row(Some((holder, at(t))), holder, at(t));
                r.prefix = "p/s1/".into();
                r.key = "p/s1/LEASE".into();
                let mut s = snap(at(t), vec![r], None);
                s.targets[0].url = "s3://b/p/".into();
                s.targets[0].bucket = Some("b".into());
                s
            };
            let mut h = History::new();
            h.observe(&snap_s3(0, "a"), &[]);
            h.observe(&snap_s3(5, "b"), &[outcome(url, bucket, key, "b", 4)]);
            let got = h.get("s3://b/p/", "p/s1/").unwrap().changes[1].kind;
            let want = if yes {
                ChangeKind::Takeover
            } else {
                ChangeKind::Unexpected
            };
            assert_eq!(got, want, "{url} {bucket:?} {key}");
        }
    }

    /// A row for `db/` held by `holder` under `generation`.
    fn row_gen(holder: &str, generation: Option<u64>, etag: &str, t: i64) -> PrefixReport {
        let mut rec = record(holder, at(t));
        rec.generation = generation;
        let observed = Observed::Present {
            etag: Some(etag.into()),
            last_modified: Some(at(t)),
            record: Ok(rec),
        };
        PrefixReport::new("db/".into(), observed, at(t))
    }

    /// Issue 26: each change carries the generations before and after; the
    /// same holder under a new generation is a change; a hand-over (audited
    /// with `--then handover:ID`) is told from a takeover; the counts by
    /// kind add up to the count.
    #[test]
    fn generations_are_recorded_and_a_hand_over_is_named() {
        let mut h = History::new();
        h.observe(
            &snap(at(0), vec![row_gen("a", Some(7), "e1", 0)], None),
            &[],
        );
        // A renewal keeps the generation: nothing.
        let none = h.observe_changes(
            &snap(at(5), vec![row_gen("a", Some(7), "e2", 5)], None),
            &[],
        );
        assert!(none.is_empty());
        // b after a's expiry, generation 8.
        let c = h.observe_changes(
            &snap(at(45), vec![row_gen("b", Some(8), "e3", 45)], None),
            &[],
        );
        assert_eq!(c.len(), 1);
        let (key, c) = &c[0];
        assert_eq!(key, &(URL.to_owned(), "db/".to_owned()));
        assert_eq!(c.kind, ChangeKind::Expiry);
        assert_eq!((c.previous_generation, c.generation), (Some(7), Some(8)));
        assert_eq!(c.generation_text().as_deref(), Some("generation 7 → 8"));
        assert_eq!(
            (c.previous_id.as_deref(), c.holder_id.as_deref()),
            (Some("a"), Some("b"))
        );
        // b again, but a new generation (released and re-acquired between reads).
        let c = h.observe_changes(
            &snap(at(90), vec![row_gen("b", Some(9), "e4", 90)], None),
            &[],
        );
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].1.kind, ChangeKind::Expiry);
        // A hand-over to s while b is fresh, audited.
        let mut e = outcome(&format!("{URL}db/"), None, "db/LEASE", "s", 93);
        e.then = "handover:s".into();
        if let Some(w) = &mut e.written {
            w.record.generation = Some(10);
        }
        let c = h.observe_changes(
            &snap(at(95), vec![row_gen("s", Some(10), "e5", 95)], None),
            std::slice::from_ref(&e),
        );
        assert_eq!(c[0].1.kind, ChangeKind::Handover);
        assert_eq!(c[0].1.kind.as_str(), "hand-over");
        assert_eq!(c[0].1.kind.label(), "handover");
        let t = c[0].1.takeover.as_ref().unwrap();
        assert_eq!((t.then.as_str(), t.generation), ("handover:s", Some(10)));
        // Unknown generations: no text; an unknown one is no evidence of a change.
        let c = h.observe_changes(&snap(at(97), vec![row_gen("s", None, "e6", 97)], None), &[]);
        assert!(c.is_empty(), "{c:?}");
        let p = h.get(URL, "db/").unwrap();
        assert_eq!(p.count, 3);
        assert_eq!(p.count_by, [0, 1, 2, 0, 0]);
        let first = &p.changes[0];
        assert_eq!(first.generation_text().as_deref(), Some("generation 7"));
        let mut plain = first.clone();
        plain.generation = None;
        assert_eq!(plain.generation_text(), None);
    }

    /// A record that lost its generation between two reads (same holder)
    /// and came back under another one is a change of generation, as if the
    /// read without one had not happened: it hides no re-acquire (nor a
    /// write over a live lease).
    #[test]
    fn a_generation_lost_between_two_reads_hides_no_change() {
        let mut h = History::new();
        h.observe(
            &snap(at(0), vec![row_gen("a", Some(7), "e1", 0)], None),
            &[],
        );
        let none = h.observe_changes(&snap(at(5), vec![row_gen("a", None, "e2", 5)], None), &[]);
        assert!(none.is_empty(), "{none:?}");
        let c = h.observe_changes(
            &snap(at(10), vec![row_gen("a", Some(9), "e3", 10)], None),
            &[],
        );
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].1.kind, ChangeKind::Unexpected, "{c:?}");
        // The generation it came back with is kept: nothing more.
        let none = h.observe_changes(
            &snap(at(15), vec![row_gen("a", Some(9), "e4", 15)], None),
            &[],
        );
        assert!(none.is_empty(), "{none:?}");
    }

    /// A reader that sees the new record before the takeover's `outcome` is
    /// appended knows it by the `intent` (fsynced before the PUT), which
    /// names the holder about to be written.
    #[test]
    fn a_takeover_is_known_by_its_intent_before_its_outcome() {
        let mut h = History::new();
        h.observe(
            &snap(at(0), vec![row_gen("a", Some(7), "e1", 0)], None),
            &[],
        );
        let mut intent = outcome(&format!("{URL}db/"), None, "db/LEASE", "t", 4);
        intent.phase = "intent".into();
        intent.outcome = None;
        let c = h.observe_changes(
            &snap(at(5), vec![row_gen("t", Some(8), "e2", 5)], None),
            std::slice::from_ref(&intent),
        );
        assert_eq!(c[0].1.kind, ChangeKind::Takeover, "{c:?}");
        assert_eq!(c[0].1.takeover.as_ref().unwrap().outcome, None);
        // The index of last takeovers counts outcomes only.
        let i = crate::snapshot::TakeoverIndex::of(&[intent]);
        assert!(i.newest(URL, None, "db/LEASE").is_none());
    }

    /// `serve` and the console read an off-screen stale row at the listing's
    /// cadence, keeping its last reading in between: a takeover found only
    /// at the next read, long after its audit entry, is still a takeover
    /// (the entry is after the replaced holder was first seen).
    #[test]
    fn a_takeover_read_late_is_still_a_takeover() {
        let mut h = History::new();
        let stale = |t: i64| {
            let mut r = row_gen("a", Some(7), "e1", -300);
            r.rejudge(at(t));
            r
        };
        for t in [0, 10, 20, 30] {
            h.observe(&snap(at(t), vec![stale(t)], None), &[]);
        }
        let e = outcome(&format!("{URL}db/"), None, "db/LEASE", "t", 12);
        let c = h.observe_changes(
            &snap(at(40), vec![row_gen("t", Some(8), "e2", 12)], None),
            std::slice::from_ref(&e),
        );
        assert_eq!(c[0].1.kind, ChangeKind::Takeover, "{c:?}");
    }

    #[test]
    fn errors_are_not_releases_and_vanished_prefixes_are() {
        let mut h = History::new();
        h.observe(
            &snap(at(0), vec![row(Some(("a", at(0))), "e1", at(0))], None),
            &[],
        );
        // The target could not be gathered: nothing is concluded.
        h.observe(&snap(at(5), vec![], Some("listing failed")), &[]);
        assert_eq!(kinds(&h), [ChangeKind::FirstSeen]);
        // Gathered, and db/ is no longer listed: gone.
        h.observe(&snap(at(10), vec![], None), &[]);
        assert_eq!(kinds(&h), [ChangeKind::FirstSeen, ChangeKind::Release]);
        // Gone stays gone: no second release.
        h.observe(&snap(at(15), vec![], None), &[]);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn holders_are_escaped() {
        let mut h = History::new();
        h.observe(
            &snap(
                at(0),
                vec![row(Some(("ev\x1b]0;il\n", at(0))), "e1", at(0))],
                None,
            ),
            &[],
        );
        let c = &h.get(URL, "db/").unwrap().changes[0];
        assert!(!c.holder.as_deref().unwrap().contains('\x1b'));
    }

    #[test]
    fn a_console_of_ten_thousand_prefixes_keeps_every_one() {
        // Beyond the prefix cap, each refresh would forget prefixes and see
        // them again as new (and, with a scan per eviction, take quadratic time).
        let mut h = History::new();
        let rows = |now| {
            (0..10_000)
                .map(|i| {
                    let mut r = row(Some(("h", at(0))), "e", now);
                    r.prefix = format!("db{i:05}/");
                    r
                })
                .collect::<Vec<_>>()
        };
        h.observe(&snap(at(0), rows(at(0)), None), &[]);
        let first = h.len();
        assert_eq!(h.iter().count(), 10_000);
        assert!(first <= Limits::default().total);
        h.observe(&snap(at(5), rows(at(5)), None), &[]);
        assert_eq!(h.iter().count(), 10_000);
        assert_eq!(h.len(), first, "an unchanged refresh records nothing");
        assert!(h.iter().all(|(_, p)| p.count == 0));
    }

    #[test]
    fn memory_is_bounded() {
        let mut h = History::with_limits(Limits {
            per_prefix: 4,
            total: 6,
            prefixes: 2,
        });
        for i in 0..20 {
            let holder = format!("h{i}");
            h.observe(
                &snap(
                    at(i * 40),
                    vec![row(Some((&holder, at(i * 40))), "e", at(i * 40))],
                    None,
                ),
                &[],
            );
        }
        let p = h.get(URL, "db/").unwrap();
        assert_eq!(p.changes.len(), 4);
        assert_eq!(p.count, 19, "the count survives dropped entries");
        assert_eq!(p.changes.back().unwrap().holder.as_deref(), Some("h19"));
        // Three prefixes under a two-prefix cap: the one not seen goes.
        let mut rows = vec![row(Some(("x", at(900))), "e", at(900))];
        rows[0].prefix = "one/".into();
        let mut r2 = row(Some(("y", at(900))), "e", at(900));
        r2.prefix = "two/".into();
        rows.push(r2);
        h.observe(&snap(at(900), rows, Some("partial")), &[]);
        assert!(h.get(URL, "db/").is_none());
        assert!(h.len() <= 6);
        assert_eq!(h.iter().count(), 2);
    }
}
