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
//! - [`ChangeKind::Release`]: the LEASE is gone or released (or the prefix
//!   no longer listed while its target was gathered);
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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::delta::{Delta, RowUpdate};
use super::model::{PrefixReport, Snapshot, TargetReport};
use super::takeovers::LastTakeover;
use crate::audit::AuditEntry;
use crate::bucket::LeaseState;
use crate::text::sanitize;

mod changes;
pub use changes::Changes;

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
pub(crate) const COUNTED: [ChangeKind; 5] = [
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
    pub(crate) previous: Option<String>,
    /// For a takeover: `operator — reason` from the audit entry, escaped.
    pub audit: Option<String>,
    /// The new record's generation (`None`: unknown, or no record).
    pub generation: Option<u64>,
    /// The previous record's generation (`None`: unknown, or no record).
    pub(crate) previous_generation: Option<u64>,
    /// The new holder's instance id as read (unescaped: for JSON, which
    /// escapes it itself).
    pub(crate) holder_id: Option<Arc<str>>,
    /// The previous holder's instance id as read (unescaped).
    pub(crate) previous_id: Option<Arc<str>>,
    /// For a takeover or hand-over: the audit log's entry of it (boxed:
    /// most changes have none).
    pub takeover: Option<Box<LastTakeover>>,
}

impl HolderChange {
    /// Whether this counts as a holder change for
    /// `leasectl_lease_holder_changes_total`: a (new) holder was seen.
    pub fn counts(&self) -> bool {
        self.kind != ChangeKind::FirstSeen && self.holder.is_some()
    }

    /// `generation 7 → 8` (`-` for an unknown one; `generation 8` for the
    /// first sighting); to no holder, `generation 7 → 8, released` (a
    /// released record keeps its generation) or `generation 7, no record
    /// now` (the LEASE deleted); `None` when neither record has a generation.
    pub(crate) fn generation_text(&self) -> Option<String> {
        let g = |g: Option<u64>| g.map_or_else(|| "-".to_owned(), |g| g.to_string());
        match (self.kind, self.previous_generation, self.generation) {
            (_, None, None) => None,
            (ChangeKind::FirstSeen, _, now) => Some(format!("generation {}", g(now))),
            (ChangeKind::Release | ChangeKind::Takeover, before, Some(now))
                if self.holder.is_none() =>
            {
                Some(format!("generation {} → {now}, released", g(before)))
            }
            (ChangeKind::Release | ChangeKind::Takeover, before, None) if self.holder.is_none() => {
                Some(format!("generation {}, no record now", g(before)))
            }
            (_, before, now) => Some(format!("generation {} → {}", g(before), g(now))),
        }
    }
}

/// What was last seen of one prefix (64 bytes: one is kept per prefix).
#[derive(Debug, Clone)]
struct Seen {
    /// The raw holder (compared unescaped), shared with the changes that
    /// name it (a `Box<str>` would be 16 bytes less, but the first sighting's
    /// change would then copy it: at the first snapshot every prefix's copy
    /// is made, then dropped with the change, leaving holes among the live
    /// ones that the resident set keeps).
    holder: Option<Arc<str>>,
    /// The record's generation and the last one this holder was seen with,
    /// as [`Generations`] says ([`Seen::generation`],
    /// [`Seen::known_generation`]).
    generation_value: u64,
    generations: Generations,
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

/// Which of a record's generation and the last generation its holder was
/// seen with [`Seen::generation_value`] is. Whenever both are known they are
/// equal (the second is the first, or kept while the record has none), so
/// one value holds both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generations {
    /// Neither is known.
    Unknown,
    /// The record's; the holder's is unknown (a released record, which
    /// holds nothing, at its first sighting).
    Record,
    /// The record's, and the holder's.
    Both,
    /// The record has none; the holder's last one, kept: a holder whose
    /// record lost its generation between two reads and came back under
    /// another is a change.
    Kept,
}

impl Seen {
    /// The record's generation.
    fn generation(&self) -> Option<u64> {
        matches!(self.generations, Generations::Record | Generations::Both)
            .then_some(self.generation_value)
    }

    /// The last generation this holder was seen with, kept across reads of
    /// a record without one.
    fn known_generation(&self) -> Option<u64> {
        matches!(self.generations, Generations::Both | Generations::Kept)
            .then_some(self.generation_value)
    }

    /// Sets the record's generation; the holder's is the same when `held`
    /// (a record that holds the lease), unknown otherwise.
    fn set_generation(&mut self, generation: Option<u64>, held: bool) {
        (self.generation_value, self.generations) = match generation {
            None => (0, Generations::Unknown),
            Some(g) if held => (g, Generations::Both),
            Some(g) => (g, Generations::Record),
        };
    }

    /// The holder's generation: the record's when it has one, else the one
    /// `prev` (the same holder) was last seen with.
    fn keep_known_generation(&mut self, prev: &Seen) {
        (self.generation_value, self.generations) =
            match (self.generation(), prev.known_generation()) {
                (Some(g), _) => (g, Generations::Both),
                (None, Some(k)) => (k, Generations::Kept),
                (None, None) => (0, Generations::Unknown),
            };
    }
}

/// One prefix's timeline.
#[derive(Debug, Clone, Default)]
pub struct PrefixHistory {
    /// The changes kept, oldest first (at most [`Limits::per_prefix`]).
    pub changes: Changes,
    /// Holder changes counted since the session started ([`HolderChange::counts`]);
    /// never decreases when old changes are dropped.
    pub count: u64,
    /// [`PrefixHistory::count`] by kind, in the order of [`COUNTED`];
    /// saturating. A `u32` is enough: a change is counted only when a read
    /// of the LEASE shows a new holder (or generation), that is one written
    /// to the object in between, at most once a snapshot (a refresh is at
    /// least 1 s): 4.29 billion takeovers of one lease in one session.
    pub(crate) count_by: [u32; COUNTED.len()],
    last: Option<Seen>,
}

impl PrefixHistory {
    /// Whether the prefix had a holder at its last observation, and since
    /// when (UTC, this reader's clock) that holder — or the lack of one — was
    /// first seen in this session; `None` before any observation.
    pub(crate) fn current_since(&self) -> Option<(bool, DateTime<Utc>)> {
        self.last.as_ref().map(|s| (s.holder.is_some(), s.since))
    }
}

/// Memory bounds of a [`History`].
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Changes kept per prefix (default 32); 0: none, only the counts and
    /// what was last seen (the exporter's families show no change itself).
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

/// Builds `map` again when it grew by more than half since it held
/// `before` entries: keys inserted in order leave a B-tree's nodes about
/// half full, one built from sorted entries fills them (at 50,000 prefixes,
/// ~21 MB of history became ~12 MB). Linear in the entries, and only after
/// a snapshot that brought many new ones (the first).
pub(crate) fn compact_grown<K: Ord, V>(map: &mut BTreeMap<K, V>, before: usize) {
    if map.len() > before + before / 2 + 64 {
        *map = std::mem::take(map).into_iter().collect();
    }
}

/// `(target URL, prefix)`, both as in the snapshot (unescaped). The URL is
/// shared by every prefix of its target.
/// The prefix is a `Box<str>`: a key is kept per prefix, 8 bytes less
/// than a `String`.
pub(crate) type PrefixKey = (Arc<str>, Box<str>);

/// A change's `(target URL, prefix)`, as [`History::observe_changes`]
/// hands it on.
pub(crate) type ChangeKey = (Arc<str>, String);

/// The [`ChangeKey`] of `key`.
fn change_key(key: &PrefixKey) -> ChangeKey {
    (key.0.clone(), key.1.to_string())
}

/// The session's holder changes, per prefix.
#[derive(Debug, Clone, Default)]
pub struct History {
    prefixes: BTreeMap<PrefixKey, PrefixHistory>,
    limits: Limits,
    total: usize,
    /// The target URLs seen, each allocated once for every key of its
    /// prefixes (at 50,000 prefixes a URL per key was ~3 MB).
    urls: Vec<Arc<str>>,
}

/// Grace, in seconds, between an audit entry's time and this reader's
/// observations (both are this host's clock, but written at different steps).
const AUDIT_SLACK_S: i64 = 5;

impl History {
    /// An empty history with the default [`Limits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty history with these limits (`total` and `prefixes` at least 1).
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            limits: Limits {
                per_prefix: limits.per_prefix,
                total: limits.total.max(1),
                prefixes: limits.prefixes.max(1),
            },
            ..Self::default()
        }
    }

    /// The timeline of one prefix, if it was seen.
    pub fn get(&self, target: &str, prefix: &str) -> Option<&PrefixHistory> {
        self.prefixes.get(&(Arc::from(target), Box::from(prefix)))
    }

    /// The shared copy of the target URL `url`.
    fn url(&mut self, url: &str) -> Arc<str> {
        if let Some(u) = self.urls.iter().find(|u| ***u == *url) {
            return u.clone();
        }
        let u: Arc<str> = url.into();
        self.urls.push(u.clone());
        u
    }

    /// Every tracked prefix with its timeline.
    pub fn iter(&self) -> impl Iterator<Item = (&PrefixKey, &PrefixHistory)> {
        self.prefixes.iter()
    }

    /// Prefixes tracked.
    pub fn prefixes(&self) -> usize {
        self.prefixes.len()
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
    pub(crate) fn observe_changes(
        &mut self,
        snap: &Snapshot,
        audit: &[AuditEntry],
    ) -> Vec<(ChangeKey, HolderChange)> {
        let mut out = Vec::new();
        self.observe_into(snap, audit, Some(&mut out));
        out
    }

    fn observe_into(
        &mut self,
        snap: &Snapshot,
        audit: &[AuditEntry],
        mut out: Option<&mut Vec<(ChangeKey, HolderChange)>>,
    ) {
        let now = snap.generated_at;
        let before = self.prefixes.len();
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
            let entries = self.prefixes.keys().filter(|(u, _)| **u == *t.url).count();
            if t.error.is_none() && entries > t.prefixes.len() {
                let unread: BTreeSet<&str> = t.errors.iter().map(|e| e.prefix.as_str()).collect();
                let gone: Vec<PrefixKey> = self
                    .prefixes
                    .iter()
                    .filter(|((u, p), h)| {
                        **u == *t.url
                            && !seen_now.contains(&(u.clone(), p.clone()))
                            && !unread.contains(&**p)
                            && h.last.as_ref().is_some_and(|s| s.present)
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in gone {
                    let cur = Seen {
                        holder: None,
                        generation_value: 0,
                        generations: Generations::Unknown,
                        present: false,
                        state: LeaseState::Absent,
                        expires_at: None,
                        at: now,
                        since: now,
                    };
                    let want = out.is_some();
                    let kept = want.then(|| change_key(&k));
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
        drop(seen_now);
        compact_grown(&mut self.prefixes, before);
    }

    /// Observes one row `p` of target `t` at `now`; returns its key.
    fn observe_row(
        &mut self,
        t: &TargetReport,
        p: &PrefixReport,
        now: DateTime<Utc>,
        audit: &[AuditEntry],
        out: Option<&mut Vec<(ChangeKey, HolderChange)>>,
    ) -> PrefixKey {
        let key = (self.url(&t.url), Box::from(p.prefix.as_str()));
        // A released record holds nothing: seen as no holder, like no LEASE;
        // its generation (kept from its last holder's) is the record's.
        let held = p
            .record
            .as_ref()
            .filter(|_| p.state != LeaseState::Released);
        let mut cur = Seen {
            holder: held.map(|r| r.instance_id.as_str().into()),
            generation_value: 0,
            generations: Generations::Unknown,
            present: !matches!(p.state, LeaseState::Absent | LeaseState::Released),
            state: p.state,
            expires_at: p
                .expires_in_s
                .filter(|_| p.record.is_some())
                .and_then(|x| chrono::Duration::try_milliseconds((x * 1000.0) as i64))
                .map(|d| now + d),
            at: now,
            since: now,
        };
        cur.set_generation(p.record.as_ref().and_then(|r| r.generation), held.is_some());
        // The audit log is searched only when the holder changed.
        let unchanged = match self.prefixes.get(&key).and_then(|h| h.last.as_ref()) {
            Some(prev) if same_holder(prev, &cur) => {
                cur.since = prev.since;
                cur.keep_known_generation(prev);
                true
            }
            _ => false,
        };
        let found = if unchanged {
            None
        } else if cur.holder.is_none() {
            // No holder now: a takeover that released at once (the
            // operator's own `--then release`) is still a takeover.
            let prev = self.prefixes.get(&key).and_then(|h| h.last.as_ref());
            released_takeover(audit, t, p, prev.and_then(|s| s.holder.as_deref()))
        } else {
            audit_match(audit, t, p, cur.holder.as_deref())
        };
        let change = self.apply(key.clone(), cur, found, out.is_some());
        if let (Some(out), Some(c)) = (out, change) {
            out.push((change_key(&key), c));
        }
        key
    }

    /// [`History::observe`] of only the rows `delta` names, once it is
    /// applied to `snap` (the console's refresh that read a few of many
    /// rows): the other rows were not read again, so nothing changed on
    /// them; a row whose LEASE could not be read keeps its last state, as
    /// in a whole snapshot. No prefix vanishes in a delta (a listing that
    /// changed comes as a whole snapshot).
    pub(crate) fn observe_rows(&mut self, snap: &Snapshot, delta: &Delta, audit: &[AuditEntry]) {
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
                generation: cur.generation(),
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
                    h.count_by[i] = h.count_by[i].saturating_add(1);
                }
            }
            let copy = (want && c.kind != ChangeKind::FirstSeen).then(|| c.clone());
            if self.limits.per_prefix == 0 {
                return copy;
            }
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
    let generation_kept = match (prev.known_generation(), cur.generation()) {
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
        // A takeover that released at once, read after its release.
        if audit.is_some() {
            ChangeKind::Takeover
        } else {
            ChangeKind::Release
        }
    } else if cur.holder.is_none() {
        // Present but unreadable: overwritten with something that is no record.
        ChangeKind::Unexpected
    } else if let Some(e) = audit {
        // A hand-over's record names the successor now holding the lease.
        let handed = e.then.starts_with("handover:")
            && e.written
                .as_ref()
                .is_some_and(|w| Some(w.record.instance_id.as_str()) == cur.holder.as_deref());
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
        audit: audit.map(|e| {
            format!(
                "{} — {}{}",
                sanitize(&e.operator),
                sanitize(&e.reason),
                if cur.present {
                    ""
                } else {
                    "; released at once"
                }
            )
        }),
        generation: cur.generation(),
        previous_generation: prev.generation(),
        holder_id: cur.holder.clone(),
        previous_id: prev.holder.clone(),
        takeover: audit.and_then(LastTakeover::of_entry).map(Box::new),
    })
}

/// The newest takeover of the lease of row `p` of target `t` in `audit`
/// that replaced the record of `previous` (the holder seen before) and was
/// released at once (`--then release`: its `outcome` wrote a record): how a
/// prefix seen held by `previous` and now without a holder lost it, when
/// the record the takeover wrote was never read.
fn released_takeover<'a>(
    audit: &'a [AuditEntry],
    t: &TargetReport,
    p: &PrefixReport,
    previous: Option<&str>,
) -> Option<&'a AuditEntry> {
    let previous = previous?;
    audit
        .iter()
        .filter(|e| {
            e.phase == "outcome"
                && e.action == "takeover"
                && e.then == "release"
                && e.written.is_some()
                && e.target.is_lease(&t.url, t.bucket.as_deref(), &p.key)
                && e.observed
                    .record
                    .as_ref()
                    .is_some_and(|r| r.instance_id == previous)
        })
        .max_by_key(|e| e.time)
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
    t: &TargetReport,
    p: &PrefixReport,
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
mod tests;
