//! The holder changes observed per prefix during one session (the console,
//! `serve`): who took the lease, when this reader saw it, and how.
//!
//! Each [`History::observe`] compares a snapshot with the previous
//! observation of every prefix. A different holder (or none) is a
//! [`HolderChange`], classified as:
//!
//! - [`ChangeKind::Takeover`]: an `outcome` entry of leasectl's audit log
//!   names this lease key (and bucket) and wrote the record now seen (its
//!   ETag or its holder), after the previous holder was last seen;
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
//! Renewals (same holder, new ETag) are not changes. A prefix that could not
//! be read keeps its last observation: an error is never a release. Times are
//! this reader's clock (the snapshot's `generated_at`), UTC. Memory is
//! bounded: [`Limits`] caps the changes kept per prefix, in all, and the
//! prefixes tracked.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::{DateTime, Utc};

use crate::audit::AuditEntry;
use crate::bucket::LeaseState;
use crate::snapshot::Snapshot;
use crate::text::sanitize;

/// How a holder change came about (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The first time this session saw the prefix (not a change).
    FirstSeen,
    /// A takeover recorded in leasectl's audit log.
    Takeover,
    /// A new holder after the previous record had expired (or was suspect or
    /// malformed).
    Expiry,
    /// A holder on a prefix that had no LEASE.
    Acquired,
    /// The LEASE is gone.
    Release,
    /// Changed while the previous record was still fresh, with no takeover
    /// recorded here, or overwritten by something unreadable.
    Unexpected,
}

impl ChangeKind {
    /// The kind in words, for the console and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::FirstSeen => "first seen",
            ChangeKind::Takeover => "takeover",
            ChangeKind::Expiry => "after expiry",
            ChangeKind::Acquired => "acquired",
            ChangeKind::Release => "released",
            ChangeKind::Unexpected => "CHANGED WHILE FRESH",
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
}

impl HolderChange {
    /// Whether this counts as a holder change for
    /// `leasectl_lease_holder_changes_total`: a (new) holder was seen.
    pub fn counts(&self) -> bool {
        self.kind != ChangeKind::FirstSeen && self.holder.is_some()
    }
}

/// What was last seen of one prefix.
#[derive(Debug, Clone)]
struct Seen {
    /// The raw holder (compared unescaped).
    holder: Option<String>,
    /// A LEASE object exists.
    present: bool,
    state: LeaseState,
    /// When the record expires by this reader's clock, if it has one.
    expires_at: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
}

/// One prefix's timeline.
#[derive(Debug, Clone, Default)]
pub struct PrefixHistory {
    /// The changes kept, oldest first (at most [`Limits::per_prefix`]).
    pub changes: VecDeque<HolderChange>,
    /// Holder changes counted since the session started ([`HolderChange::counts`]);
    /// never decreases when old changes are dropped.
    pub count: u64,
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
        let now = snap.generated_at;
        let mut seen_now: BTreeSet<PrefixKey> = BTreeSet::new();
        for t in &snap.targets {
            for p in &t.prefixes {
                let key = (t.url.clone(), p.prefix.clone());
                let cur = Seen {
                    holder: p.record.as_ref().map(|r| r.instance_id.clone()),
                    present: p.state != LeaseState::Absent,
                    state: p.state,
                    expires_at: p
                        .expires_in_s
                        .filter(|_| p.record.is_some())
                        .and_then(|x| chrono::Duration::try_milliseconds((x * 1000.0) as i64))
                        .map(|d| now + d),
                    at: now,
                };
                // The audit log is searched only when the holder changed.
                let unchanged = self
                    .prefixes
                    .get(&key)
                    .and_then(|h| h.last.as_ref())
                    .is_some_and(|prev| prev.holder == cur.holder && prev.present == cur.present);
                let found = if unchanged {
                    None
                } else {
                    audit_match(audit, t, p, cur.holder.as_deref())
                };
                self.apply(key.clone(), cur, found);
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
                        present: false,
                        state: LeaseState::Absent,
                        expires_at: None,
                        at: now,
                    };
                    self.apply(k, cur, None);
                }
            }
        }
        self.evict_prefixes(&seen_now);
        self.trim_total();
    }

    fn apply(&mut self, key: PrefixKey, cur: Seen, audit: Option<(DateTime<Utc>, String)>) {
        let h = self.prefixes.entry(key).or_default();
        let change = match &h.last {
            None => Some(HolderChange {
                at: cur.at,
                kind: ChangeKind::FirstSeen,
                holder: cur.holder.as_deref().map(sanitize),
                previous: None,
                audit: None,
            }),
            Some(prev) => classify(prev, &cur, audit),
        };
        h.last = Some(cur);
        if let Some(c) = change {
            if c.counts() {
                h.count += 1;
            }
            h.changes.push_back(c);
            self.total += 1;
            if h.changes.len() > self.limits.per_prefix {
                h.changes.pop_front();
                self.total -= 1;
            }
        }
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

/// How `prev` became `cur`, if the holder changed.
fn classify(
    prev: &Seen,
    cur: &Seen,
    audit: Option<(DateTime<Utc>, String)>,
) -> Option<HolderChange> {
    if prev.holder == cur.holder && prev.present == cur.present {
        return None;
    }
    let audit = audit.filter(|(at, _)| {
        *at >= prev.at - chrono::Duration::seconds(AUDIT_SLACK_S)
            && *at <= cur.at + chrono::Duration::seconds(AUDIT_SLACK_S)
    });
    let kind = if !cur.present {
        ChangeKind::Release
    } else if cur.holder.is_none() {
        // Present but unreadable: overwritten with something that is no record.
        ChangeKind::Unexpected
    } else if audit.is_some() {
        ChangeKind::Takeover
    } else if !prev.present {
        ChangeKind::Acquired
    } else if prev.state != LeaseState::Fresh || prev.expires_at.is_none_or(|x| cur.at >= x) {
        ChangeKind::Expiry
    } else {
        ChangeKind::Unexpected
    };
    Some(HolderChange {
        at: cur.at,
        kind,
        holder: cur.holder.as_deref().map(sanitize),
        previous: prev.holder.as_deref().map(sanitize),
        audit: audit
            .filter(|_| kind == ChangeKind::Takeover)
            .map(|(_, text)| text),
    })
}

/// The newest takeover outcome in `audit` that wrote the record now seen on
/// `p` of target `t`: the same lease (store and key, however the takeover's
/// TARGET was spelled: [`crate::audit::AuditTarget::is_lease`]), and its
/// written ETag or holder is the current one. Returns its time and
/// `operator — reason`, escaped.
fn audit_match(
    audit: &[AuditEntry],
    t: &crate::snapshot::TargetReport,
    p: &crate::snapshot::PrefixReport,
    holder: Option<&str>,
) -> Option<(DateTime<Utc>, String)> {
    let holder = holder?;
    audit
        .iter()
        .filter(|e| {
            e.phase == "outcome"
                && e.action == "takeover"
                && e.target.is_lease(&t.url, t.bucket.as_deref(), &p.key)
                && e.written.as_ref().is_some_and(|w| {
                    (w.etag.is_some() && w.etag == p.etag) || w.record.instance_id == holder
                })
        })
        .max_by_key(|e| e.time)
        .map(|e| {
            (
                e.time,
                format!("{} — {}", sanitize(&e.operator), sanitize(&e.reason)),
            )
        })
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
