//! The last takeover the local audit log records for each prefix, as
//! `--json` and NDJSON carry it (`last_takeover`), and the state of the log
//! they read (`audit_log`).
//!
//! A takeover is an `outcome` entry of action `takeover` that wrote a record
//! (a refused or failed attempt wrote nothing and is not one). Entries are
//! matched to rows by store and key, however either TARGET was spelled
//! ([`crate::audit::AuditTarget::is_lease`]); [`TakeoverIndex`] does that
//! with one lookup per row, so a long log and a large store cost their
//! sizes added, not multiplied.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::audit::{AuditEntry, AuditLog, AuditTail, LeaseLocation};
use crate::clock::ser_rfc3339;

/// One takeover of a prefix, from leasectl's audit log (the strings as
/// written there: the JSON outputs escape them, the console escapes them
/// when drawing).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastTakeover {
    /// When the outcome entry was written (the operator's host clock, UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub time: DateTime<Utc>,
    /// `user@host` of the operator.
    pub operator: String,
    /// The operator's reason.
    pub reason: String,
    /// What followed: `release`, `hold` or `handover:ID`.
    pub then: String,
    /// The result as recorded (e.g. `taken`).
    pub outcome: Option<String>,
    /// The generation of the record the takeover wrote (null when that
    /// record carried none).
    pub generation: Option<u64>,
    /// The entry's id (pairs the `intent` with this `outcome` in the log).
    pub id: String,
}

impl LastTakeover {
    /// The takeover `e` records, if it is one: an `outcome` of a `takeover`
    /// that wrote a record, or its `intent` (what it was about to write;
    /// `outcome` null) — the holder history matches either, the index only
    /// outcomes.
    pub(crate) fn of_entry(e: &AuditEntry) -> Option<Self> {
        if e.action != "takeover" || !(e.phase == "outcome" || e.phase == "intent") {
            return None;
        }
        let written = e.written.as_ref()?;
        Some(Self {
            time: e.time,
            operator: e.operator.clone(),
            reason: e.reason.clone(),
            then: e.then.clone(),
            outcome: e.outcome.clone(),
            generation: written.record.generation,
            id: e.id.clone(),
        })
    }
}

/// The audit log `--json`, NDJSON and `--watch` read for `last_takeover`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditLogReport {
    /// The log's path (null: there is no default location, no home
    /// directory, and none was given: no takeover can be named).
    pub path: Option<String>,
    /// Why the log could not be read (null when it was, or does not exist:
    /// a missing log records no takeover). When set, every `last_takeover`
    /// is unknown, not "none"; the exit code is 1 when the log was asked
    /// for ([`AuditLogReport::requested`]).
    pub error: Option<String>,
    /// Whether the log was named by `--audit-log` (true) or is the default
    /// location (false). Only a log asked for decides the exit code: one
    /// nobody named that cannot be read (a HOME the user cannot read) is a
    /// note, as the issue-22 rule for what nobody asked about says.
    pub(crate) requested: bool,
    /// Lines of the log that are not entries (each is named on stderr).
    pub(crate) unreadable_lines: usize,
}

/// `(bucket, key)` of an entry or a row.
type KeyOf = (Option<String>, String);

/// The newest takeover per lease, built from audit entries in any order.
/// Memory: one [`LastTakeover`] per lease the log has taken over (twice for
/// entries whose URL is no TARGET).
#[derive(Debug, Default)]
pub(crate) struct TakeoverIndex {
    by_location: HashMap<LeaseLocation, LastTakeover>,
    /// Entries whose URL is no TARGET: matched by bucket and key.
    unplaced: HashMap<KeyOf, LastTakeover>,
    /// Every entry by bucket and key, for rows whose TARGET does not parse.
    by_key: HashMap<KeyOf, LastTakeover>,
}

fn keep_newer(slot: Option<&mut LastTakeover>, t: &LastTakeover) -> bool {
    match slot {
        Some(old) if old.time > t.time => false,
        Some(old) => {
            *old = t.clone();
            false
        }
        None => true,
    }
}

fn insert<K: std::hash::Hash + Eq>(map: &mut HashMap<K, LastTakeover>, k: K, t: &LastTakeover) {
    if keep_newer(map.get_mut(&k), t) {
        map.insert(k, t.clone());
    }
}

impl TakeoverIndex {
    /// An index of `entries`.
    pub(crate) fn of(entries: &[AuditEntry]) -> Self {
        let mut i = Self::default();
        for e in entries {
            i.add(e);
        }
        i
    }

    /// Adds `e` if it is a takeover ([`LastTakeover::of_entry`]); an entry
    /// older than the one known for its lease changes nothing.
    pub(crate) fn add(&mut self, e: &AuditEntry) {
        if e.phase != "outcome" {
            return;
        }
        let Some(t) = LastTakeover::of_entry(e) else {
            return;
        };
        let key = (e.target.bucket.clone(), e.target.key.clone());
        match e.target.location() {
            Some(loc) => insert(&mut self.by_location, loc, &t),
            None => insert(&mut self.unplaced, key.clone(), &t),
        }
        insert(&mut self.by_key, key, &t);
    }

    /// The newest takeover of the lease at `key` read through `target_url`
    /// (bucket `bucket`, for S3), by the rule of
    /// [`crate::audit::AuditTarget::is_lease`].
    pub(crate) fn newest(
        &self,
        target_url: &str,
        bucket: Option<&str>,
        key: &str,
    ) -> Option<&LastTakeover> {
        let k = (bucket.map(str::to_owned), key.to_owned());
        let found = match LeaseLocation::of_row(target_url, bucket, key) {
            Some(loc) => [self.by_location.get(&loc), self.unplaced.get(&k)],
            None => [self.by_key.get(&k), None],
        };
        found.into_iter().flatten().max_by_key(|t| t.time)
    }
}

/// Reads the audit log at `path` whole (as `leasectl audit` does: at most
/// its newest 64 MiB) and returns the index of its takeovers and the
/// report for the document. Each unreadable line is warned about. Blocking
/// I/O.
pub(crate) fn read_log(path: Option<&std::path::Path>) -> (TakeoverIndex, AuditLogReport) {
    let mut report = AuditLogReport {
        path: path.map(|p| p.display().to_string()),
        error: None,
        requested: false,
        unreadable_lines: 0,
    };
    let Some(path) = path else {
        return (TakeoverIndex::default(), report);
    };
    match AuditLog::read_report(path) {
        Ok(r) => {
            r.unreadable.warn(path);
            report.unreadable_lines = r.unreadable.len();
            (TakeoverIndex::of(&r.entries), report)
        }
        Err(e) => {
            report.error = Some(e.to_string());
            (TakeoverIndex::default(), report)
        }
    }
}

/// An audit log followed as it grows (`--watch`): each
/// [`FollowedLog::poll`] reads what was appended since the last one
/// ([`crate::audit::AuditTail`]: the first read of a long log starts 4 MiB
/// from its end), adds its takeovers to the index and keeps the newest
/// entries for the holder history.
pub(crate) struct FollowedLog {
    tail: Option<AuditTail>,
    index: TakeoverIndex,
    report: AuditLogReport,
}

impl FollowedLog {
    /// Follows the log at `path` (`None`: no log, nothing is ever named),
    /// keeping its newest `keep` entries. Nothing is read before the first
    /// poll.
    pub(crate) fn new(path: Option<std::path::PathBuf>, keep: usize) -> Self {
        Self {
            report: AuditLogReport {
                path: path.as_ref().map(|p| p.display().to_string()),
                error: None,
                requested: false,
                unreadable_lines: 0,
            },
            tail: path.map(|p| AuditTail::new(p, keep)),
            index: TakeoverIndex::default(),
        }
    }

    /// Reads what was appended (blocking I/O). A read that fails is the
    /// report's `error` until a later poll succeeds; what was read before is
    /// kept.
    pub(crate) fn poll(&mut self) {
        let Some(tail) = &mut self.tail else { return };
        let index = &mut self.index;
        match tail.poll_with(&mut |e| index.add(e)) {
            Ok(bad) => {
                self.report.error = None;
                self.report.unreadable_lines += bad.len();
            }
            Err(e) => {
                tracing::warn!("{e}");
                self.report.error = Some(e.to_string());
            }
        }
    }

    /// The takeovers read so far.
    pub(crate) fn index(&self) -> &TakeoverIndex {
        &self.index
    }

    /// The log's state, for the document.
    pub(crate) fn report(&self) -> &AuditLogReport {
        &self.report
    }

    /// The newest entries read, oldest first.
    pub(crate) fn entries(&self) -> Vec<AuditEntry> {
        self.tail.as_ref().map(|t| t.entries()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditTarget, AuditWritten};
    use crate::bucket::LeaseRecord;

    fn entry(url: &str, bucket: Option<&str>, key: &str, t: i64, written: bool) -> AuditEntry {
        let at = DateTime::<Utc>::from_timestamp(1_800_000_000 + t, 0).unwrap();
        let sample = AuditEntry::sample(at, url, key);
        AuditEntry {
            phase: "outcome".into(),
            id: format!("id{t}"),
            target: AuditTarget {
                bucket: bucket.map(str::to_owned),
                ..sample.target.clone()
            },
            written: written.then(|| AuditWritten {
                record: LeaseRecord {
                    instance_id: "new".into(),
                    acquired_at: at,
                    renewed_at: at,
                    ttl_s: 30,
                    generation: Some(t as u64),
                    released_at: None,
                },
                etag: None,
            }),
            reason: format!("reason {t}"),
            outcome: Some(if written { "taken" } else { "refused: x" }.into()),
            ..sample
        }
    }

    /// The newest takeover wins, in any order; a refused attempt (nothing
    /// written) is none; spellings of the same lease match, others do not.
    #[test]
    fn the_newest_takeover_of_the_same_lease_is_found() {
        let i = TakeoverIndex::of(&[
            entry("file:///srv/l/db/", None, "LEASE", 20, true),
            entry("file:///srv/l/db/", None, "LEASE", 10, true),
            entry("file:///srv/l/db/", None, "LEASE", 30, false),
            // The console's form: the prefix URL, the key relative to its TARGET.
            entry("file:///srv/l/web/", None, "web/LEASE", 5, true),
            entry("s3://b/p/s1/", Some("b"), "p/s1/LEASE", 7, true),
            entry("not a url", Some("c"), "k/LEASE", 9, true),
        ]);
        let t = i.newest("file:///srv/l/", None, "db/LEASE").unwrap();
        assert_eq!((t.reason.as_str(), t.generation), ("reason 20", Some(20)));
        assert_eq!(
            i.newest("file:///srv/l/web/", None, "LEASE")
                .map(|t| t.id.as_str()),
            Some("id5")
        );
        assert!(i.newest("file:///srv/other/", None, "db/LEASE").is_none());
        assert_eq!(
            i.newest("s3://b/", Some("b"), "p/s1/LEASE")
                .map(|t| t.id.as_str()),
            Some("id7")
        );
        assert!(i.newest("s3://b/", Some("x"), "p/s1/LEASE").is_none());
        assert_eq!(
            i.newest("s3://c/", Some("c"), "k/LEASE")
                .map(|t| t.id.as_str()),
            Some("id9")
        );
        let none = TakeoverIndex::of(&[entry("file:///srv/l/db/", None, "LEASE", 30, false)]);
        assert!(none.newest("file:///srv/l/", None, "db/LEASE").is_none());
    }
}
