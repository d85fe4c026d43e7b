//! The session's data: what the console has read and judged (the snapshot,
//! the reader's clock, when each ETag was first seen, the holder history,
//! the audit tail, the gather's progress, probe results, the leases it
//! holds), and how each refresh, tick and result changes it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::judging::Judging;
use crate::audit::AuditEntry;
use crate::bucket::Exclusion;
use crate::snapshot::history::History;
use crate::snapshot::{Delta, ExclusionReport, PrefixReport, RowUpdate, Snapshot};
use crate::writer::scan::PodSnapshot;

/// When the console first saw each key's current ETag: key → (ETag, since).
pub(crate) type FirstSeen = HashMap<String, (Option<String>, DateTime<Utc>)>;

/// The session's data.
#[derive(Debug)]
pub struct Session {
    /// The latest snapshot, judged at `now`.
    snapshot: Option<Snapshot>,
    /// When the latest snapshot arrived (reader's clock).
    last_refresh: Option<DateTime<Utc>>,
    /// The reader's clock at the last tick.
    now: DateTime<Utc>,
    /// When the console first saw each key's current ETag (for suspect/malformed takeovers).
    first_seen: FirstSeen,
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
            first_seen: HashMap::new(),
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

    /// When the console first saw each key's current ETag.
    pub fn first_seen(&self) -> &FirstSeen {
        &self.first_seen
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

    /// How long the console has seen `key`'s current ETag unchanged.
    pub fn watched_for(&self, key: &str) -> Duration {
        self.first_seen
            .get(key)
            .and_then(|(_, since)| (self.now - *since).to_std().ok())
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

    /// A new snapshot: judged at the clock (moved on to it if later), the
    /// ETag-seen map and the holder history updated.
    pub(super) fn apply_snapshot(&mut self, mut s: Snapshot) {
        s.rejudge(self.now.max(s.generated_at));
        self.last_refresh = Some(s.generated_at);
        self.now = self.now.max(s.generated_at);
        // Track how long each key's ETag has been seen unchanged (in place:
        // at 10,000 rows, rebuilding the map copied every key at each snapshot).
        let mut rows = 0;
        for t in &s.targets {
            for p in &t.prefixes {
                rows += 1;
                see_etag(&mut self.first_seen, p, s.generated_at);
            }
        }
        if self.first_seen.len() > rows {
            let keys: std::collections::HashSet<&str> = s
                .targets
                .iter()
                .flat_map(|t| t.prefixes.iter().map(|p| p.key.as_str()))
                .collect();
            self.first_seen.retain(|k, _| keys.contains(k.as_str()));
        }
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
        s.apply_delta(d, self.now);
        self.judging.partial = false;
        for t in &d.targets {
            for (prefix, update) in &t.rows {
                match update {
                    RowUpdate::Report(p) => see_etag(&mut self.first_seen, p, d.generated_at),
                    RowUpdate::Error(_) => {
                        self.first_seen.remove(&crate::bucket::lease_key(prefix));
                    }
                }
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

/// Records in `first_seen` that row `p`'s ETag was seen at `at`, unless it
/// was already seen (in place: at 10,000 rows, rebuilding the map copied
/// every key at each snapshot).
fn see_etag(first_seen: &mut FirstSeen, p: &PrefixReport, at: DateTime<Utc>) {
    match first_seen.get_mut(&p.key) {
        Some((e, _)) if *e == p.etag => {}
        Some(seen) => *seen = (p.etag.clone(), at),
        None => {
            first_seen.insert(p.key.clone(), (p.etag.clone(), at));
        }
    }
}
