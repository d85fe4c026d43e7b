//! The session's data: what the console has read and judged (the snapshot,
//! the reader's clock, when each ETag was first seen, the holder history,
//! the audit tail, the gather's progress, probe results, the leases it
//! holds), and how each refresh, tick and result changes it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::judging::Judging;
use crate::audit::AuditEntry;
use crate::bucket::Exclusion;
use crate::snapshot::history::History;
use crate::snapshot::{Delta, ExclusionReport, PrefixReport, RowUpdate, Snapshot};
use crate::writer::scan::PodSnapshot;

/// When the console first saw each row's current ETag: (target URL, lease
/// key) → (ETag, since), as [`Session::first_seen`] lists it.
pub(super) type FirstSeen = BTreeMap<(String, String), (Option<String>, DateTime<Utc>)>;

/// The session's data.
#[derive(Debug)]
pub struct Session {
    /// The latest snapshot, judged at `now`.
    snapshot: Option<Snapshot>,
    /// When the latest snapshot arrived (reader's clock).
    last_refresh: Option<DateTime<Utc>>,
    /// The reader's clock at the last tick.
    now: DateTime<Utc>,
    /// Recent audit entries (newest last).
    audit: Vec<AuditEntry>,
    /// The holder changes seen this session, per prefix (updated with each snapshot).
    history: History,
    /// A gather still running: (LEASEs read, prefixes known, listing complete).
    loading: Option<(usize, usize, bool)>,
    /// When the oldest reading of any row was taken (reader's clock).
    oldest_reading: Option<DateTime<Utc>>,
    /// Probe results by target index.
    probes: BTreeMap<usize, ExclusionReport>,
    /// Lease keys this console holds (taken with "hold").
    held: BTreeSet<String>,
    /// What the next tick judges again (module `judging`).
    judging: Judging,
}

impl Session {
    /// A session with nothing read yet, its clock at `now`.
    pub(super) fn new(now: DateTime<Utc>) -> Self {
        Self {
            snapshot: None,
            last_refresh: None,
            now,
            audit: Vec::new(),
            history: History::new(),
            loading: None,
            oldest_reading: None,
            probes: BTreeMap::new(),
            held: BTreeSet::new(),
            judging: Judging::default(),
        }
    }

    /// The latest snapshot, judged at [`Session::now`].
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    /// The reader's clock at the last tick (or the latest refresh, if later).
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// When the latest refresh ended (reader's clock).
    pub(crate) fn last_refresh(&self) -> Option<DateTime<Utc>> {
        self.last_refresh
    }

    /// When the console first saw each row's current ETag, listed from the
    /// rows of the snapshot (each row keeps its own:
    /// [`PrefixReport::etag_seen_since`]).
    pub fn first_seen(&self) -> FirstSeen {
        let mut out = FirstSeen::new();
        for t in self.snapshot.iter().flat_map(|s| &s.targets) {
            for p in &t.prefixes {
                if let Some(since) = p.etag_seen_since {
                    out.insert((t.url.to_string(), p.key.clone()), (p.etag.clone(), since));
                }
            }
        }
        out
    }

    /// Recent audit entries (newest last).
    pub fn audit(&self) -> &[AuditEntry] {
        &self.audit
    }

    /// The holder changes seen this session, per prefix.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// A gather still running: (LEASEs read, prefixes known, listing complete).
    pub(crate) fn loading(&self) -> Option<(usize, usize, bool)> {
        self.loading
    }

    /// When the oldest reading of any row was taken (reader's clock): the
    /// status bar shows its age, what the request budget costs in freshness.
    pub(crate) fn oldest_reading(&self) -> Option<DateTime<Utc>> {
        self.oldest_reading
    }

    /// Lease keys this console holds (taken with "hold").
    pub fn held(&self) -> &BTreeSet<String> {
        &self.held
    }

    /// Whether the age of any row is unknown because this host's clock is
    /// too far from a storage service's (the header's CLOCK OFF).
    pub(crate) fn ages_unknown(&self) -> bool {
        self.judging.age_unknown
    }

    /// How long the console has seen row `p`'s current ETag unchanged (zero
    /// for a row it has not taken in).
    pub fn watched_for(&self, p: &PrefixReport) -> Duration {
        p.etag_seen_since
            .and_then(|since| (self.now - since).to_std().ok())
            .unwrap_or(Duration::ZERO)
    }

    /// The exclusion shown for a row of target `t` in exclusion `mode`:
    /// best-effort mode, else the probe result, else what the snapshot says
    /// (unprobed).
    pub(crate) fn exclusion_of(
        &self,
        mode: Exclusion,
        t: usize,
        p: &PrefixReport,
    ) -> ExclusionReport {
        if mode == Exclusion::BestEffort {
            ExclusionReport::BestEffort
        } else {
            self.probes.get(&t).copied().unwrap_or(p.exclusion)
        }
    }

    /// The last `n` audit entries about the lease of row `p` of target `t`
    /// (the same store and key, however the takeover's TARGET was spelled),
    /// newest first.
    pub fn audit_for(&self, t: usize, p: &PrefixReport, n: usize) -> Vec<&AuditEntry> {
        let Some(target) = self.snapshot.as_ref().and_then(|s| s.targets.get(t)) else {
            return Vec::new();
        };
        self.audit
            .iter()
            .rev()
            .filter(|e| {
                e.target
                    .is_lease(&target.url, target.bucket.as_deref(), &p.key)
            })
            .take(n)
            .collect()
    }

    /// Error lines to show (targets or prefixes that could not be read).
    pub(crate) fn error_lines(&self) -> Vec<String> {
        let Some(s) = &self.snapshot else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for t in &s.targets {
            if let Some(e) = &t.error {
                out.push(format!("{}: {}", t.url, e));
            }
            for e in &t.errors {
                out.push(format!("{}: {}", t.prefix_url(&e.prefix), e.error));
            }
        }
        out
    }

    /// The once-a-second tick: the clock moves to `now`, and the rows
    /// `shown` (target, row), with those whose verdict is due, are judged
    /// again; the others cannot change before the next whole judgement
    /// (module `judging`).
    pub(super) fn tick(&mut self, now: DateTime<Utc>, shown: Vec<(usize, usize)>) {
        self.now = now;
        let mut rows = self.judging.take_due(now);
        rows.extend(shown);
        if let Some(s) = &mut self.snapshot {
            self.judging.age_unknown |= s.rejudge_rows(now, &rows);
            self.judging.partial = true;
        }
    }

    /// Judges every row at one instant if a tick judged only some since the
    /// last whole judgement, and plans the next ticks from it.
    pub(super) fn judge_whole(&mut self) {
        if let Some(s) = &mut self.snapshot {
            if self.judging.partial {
                s.rejudge(self.now.max(s.generated_at));
            }
            self.judging = Judging::of(s, s.generated_at);
        }
    }

    /// A new snapshot: judged at the clock (moved on to it if later), each
    /// row's ETag watch carried from the row it replaces, the holder history
    /// updated.
    pub(super) fn apply_snapshot(&mut self, mut s: Snapshot) {
        s.rejudge(self.now.max(s.generated_at));
        self.last_refresh = Some(s.generated_at);
        self.now = self.now.max(s.generated_at);
        carry_etag_watch(self.snapshot.as_ref(), &mut s);
        self.history.observe(&s, &self.audit);
        self.snapshot = Some(s);
        self.judging.partial = false;
    }

    /// The rows a refresh changed, patched into the snapshot: the ETag-seen
    /// map and the holder history take only those rows (a refresh of 10,000
    /// rows that read a hundred costs a hundred). False when there is no
    /// snapshot to patch (nothing changes).
    pub(super) fn apply_rows(&mut self, d: &Delta) -> bool {
        let Some(s) = &mut self.snapshot else {
            return false;
        };
        self.now = self.now.max(d.generated_at);
        self.last_refresh = Some(d.generated_at);
        // Each new row's watch, from the row it replaces (before it goes);
        // a row that could not be read is watched again from scratch.
        let mut since = Vec::new();
        for t in &d.targets {
            let rows = s.targets.get(t.index).map_or(&[][..], |t| &t.prefixes[..]);
            for (prefix, update) in &t.rows {
                if let RowUpdate::Report(p) = update {
                    let old = rows
                        .binary_search_by(|o| o.prefix.as_str().cmp(prefix))
                        .ok()
                        .map(|i| &rows[i]);
                    since.push((
                        t.index,
                        prefix.as_str(),
                        watched_since(old, p, d.generated_at),
                    ));
                }
            }
        }
        s.apply_delta(d, self.now);
        self.judging.partial = false;
        for (index, prefix, at) in since {
            let Some(t) = s.targets.get_mut(index) else {
                continue;
            };
            if let Ok(i) = t
                .prefixes
                .binary_search_by(|o| o.prefix.as_str().cmp(prefix))
            {
                t.prefixes[i].etag_seen_since = Some(at);
            }
        }
        self.history.observe_rows(s, d, &self.audit);
        true
    }

    /// A refresh ended at `at` and nothing had changed. `at` was read by the
    /// refresher after the last tick: the clock moves on to it (as with a
    /// new snapshot), so the refresh is never later than "now".
    pub(super) fn unchanged(&mut self, at: DateTime<Utc>) {
        self.loading = None;
        self.last_refresh = Some(at);
        if at > self.now {
            self.now = at;
            if let Some(s) = &mut self.snapshot {
                s.rejudge(at);
                self.judging = Judging::of(s, at);
            }
        }
    }

    /// A gather's progress (`None`: no gather running).
    pub(super) fn set_loading(&mut self, loading: Option<(usize, usize, bool)>) {
        self.loading = loading;
    }

    /// The audit tail as last read.
    pub(super) fn set_audit(&mut self, entries: Vec<AuditEntry>) {
        self.audit = entries;
    }

    /// When the oldest reading of any row was taken.
    pub(super) fn set_oldest_reading(&mut self, at: Option<DateTime<Utc>>) {
        self.oldest_reading = at;
    }

    /// A new pod scan while the leases stood: only the pod changes.
    pub(super) fn set_pod(&mut self, pod: PodSnapshot) {
        if let Some(s) = &mut self.snapshot {
            s.pod = pod;
        }
    }

    /// A probe of target `target` found `result`.
    pub(super) fn probed(&mut self, target: usize, result: ExclusionReport) {
        self.probes.insert(target, result);
    }

    /// The console now holds lease `key`.
    pub(super) fn hold(&mut self, key: String) {
        self.held.insert(key);
    }

    /// The held leases were released.
    pub(super) fn released(&mut self) {
        self.held.clear();
    }
}

/// Since when row `p` (read at `at`) has been seen with its ETag: since
/// `old`'s, the row it replaces, when that one has the same ETag (or, as it,
/// none) and was watched; else since `at`. ETags are compared whole: a
/// suspect or malformed record's takeover waits on this.
fn watched_since(old: Option<&PrefixReport>, p: &PrefixReport, at: DateTime<Utc>) -> DateTime<Utc> {
    match old {
        Some(o) if o.etag == p.etag => o.etag_seen_since.unwrap_or(at),
        _ => at,
    }
}

/// Sets each row's [`PrefixReport::etag_seen_since`] of the new snapshot
/// `new` from the row of the same target URL and prefix in `old` (both
/// sorted by prefix: one merge per target). A row that was not in `old`
/// (new, or unread then) is watched from `new`'s time: a read that failed
/// starts the watch again.
fn carry_etag_watch(old: Option<&Snapshot>, new: &mut Snapshot) {
    let at = new.generated_at;
    for t in &mut new.targets {
        let before = old
            .and_then(|o| o.targets.iter().find(|o| o.url == t.url))
            .map_or(&[][..], |o| &o.prefixes[..]);
        let mut j = 0;
        for p in &mut t.prefixes {
            while before.get(j).is_some_and(|o| o.prefix < p.prefix) {
                j += 1;
            }
            let o = before.get(j).filter(|o| o.prefix == p.prefix);
            p.etag_seen_since = Some(watched_since(o, p, at));
        }
    }
}

#[cfg(test)]
mod tests;
