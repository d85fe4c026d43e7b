//! The `--json` document: [`Snapshot`] and its parts, as serde types, with
//! the judgement of each row at an instant and the snapshot's exit code.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Serialize, Serializer};

use super::takeovers::TakeoverIndex;
use crate::bucket::fence::{certainly_beyond_limit, clock_offset_limit_s};
use crate::bucket::judge::{judge_view, ObservedView};
use crate::bucket::{lease_key, LeaseRecord, LeaseState, Observed};
use crate::clock::rfc3339;
use crate::exit::Exit;
use crate::store::AddressingStyle;
use crate::target::encode_path;
use crate::text::{format_secs, sanitize, sanitize_message};
use crate::writer::scan::{LockFileState, PodSnapshot};

/// The `--json` schema version. Minor versions only add fields.
pub const SCHEMA_VERSION: &str = "1.6";

/// How strongly the lease excludes a second writer on the prefix's service,
/// as far as this reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExclusionReport {
    /// A probe showed the service refuses failed preconditions.
    Conditional,
    /// Best-effort mode was chosen (`--conditional off`).
    BestEffort,
    /// A probe showed the service ignores a precondition.
    Ignored,
    /// No probe has run against this service.
    Unprobed,
    /// The probe could not finish.
    Error,
}

/// `LEASE` keys found below the depth a TARGET was listed to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct DeeperLeases {
    /// The smallest `--depth` that lists a prefix holding one of them.
    pub depth: u32,
    /// One such prefix (under the TARGET's bucket or store root), ending in `/`.
    pub example: String,
    /// How many `LEASE` keys below the listed depth the look saw (a
    /// bounded look: there may be more).
    pub seen: usize,
}

/// One prefix's row: the LEASE object and its judgement at `generated_at`.
#[derive(Debug, Clone, Serialize)]
pub struct PrefixReport {
    /// The prefix (empty or ending in `/`).
    pub prefix: String,
    /// The lease key, `{prefix}LEASE`.
    pub key: String,
    /// fresh | stale | suspect | malformed | absent | released.
    pub state: LeaseState,
    /// The record, when the body is a valid one. In JSON its `generation`
    /// is always written: `null` when the record has none (unknown).
    #[serde(serialize_with = "ser_record")]
    pub record: Option<LeaseRecord>,
    /// The body, escaped, only when malformed.
    pub raw: Option<String>,
    /// Why it is suspect or malformed, or what is wrong with a record judged
    /// fresh or stale all the same (`renewed_at` before `acquired_at`).
    pub problem: Option<String>,
    /// The object's ETag (quotes removed).
    pub etag: Option<String>,
    /// Last-Modified, server clock, UTC.
    #[serde(serialize_with = "ser_opt_ts")]
    pub last_modified: Option<DateTime<Utc>>,
    /// Seconds since `renewed_at` by the reader's clock.
    pub age_s: Option<f64>,
    /// Seconds until the lease may be taken over (negative: expired).
    pub expires_in_s: Option<f64>,
    /// `renewed_at − Last-Modified` in seconds (±1 s): the holder's clock offset.
    pub(crate) holder_skew_s: Option<f64>,
    /// Exclusion on this prefix's service.
    pub exclusion: ExclusionReport,
    /// The newest takeover of this lease that leasectl's local audit log
    /// records (`--json`, NDJSON, `--watch`); null when it records none, or
    /// when the log was not read or could not be (see
    /// [`Snapshot::audit_log`]).
    /// (Boxed: most rows have none, and a row is kept per prefix.)
    pub(crate) last_takeover: Option<Box<super::takeovers::LastTakeover>>,
    /// Why the object's body is not a record, when it is not (`problem`
    /// says so too, but is judged again). With `record` and
    /// `last_modified`, what is judged again as the clock moves: the row
    /// keeps what was read once ([`PrefixReport::view`]); neither it nor
    /// `record`: no object.
    #[serde(skip)]
    malformed: Option<String>,
    /// Set when the row looks stale but this reader's clock is too far from
    /// the service's to say so: its age is unknown (see `problem`).
    #[serde(skip)]
    pub age_unknown: bool,
    /// Since when (reader's clock, UTC) the console has seen this row's
    /// ETag unchanged (the same object, or no object, read each time): a
    /// suspect or malformed record may be taken over once it was seen
    /// unchanged for a TTL. Set by the console's session when the row comes
    /// in, carried from the row it replaces when their ETags are equal;
    /// `None` elsewhere, and on a row the console has not taken in.
    #[serde(skip)]
    pub etag_seen_since: Option<DateTime<Utc>>,
}

impl PrefixReport {
    /// The record of the prefix's holder: the record, unless it is a
    /// released one (which holds nothing) or there is none.
    pub fn holder(&self) -> Option<&LeaseRecord> {
        self.record.as_ref().filter(|r| !r.is_released())
    }

    /// Builds a row from what was read, judged at `now`.
    pub fn new(prefix: String, observed: Observed, now: DateTime<Utc>) -> Self {
        let (etag, last_modified, record, raw, malformed) = match observed {
            Observed::Absent => (None, None, None, None, None),
            Observed::Present {
                etag,
                last_modified,
                record: Ok(r),
            } => (etag, last_modified, Some(r), None, None),
            Observed::Present {
                etag,
                last_modified,
                record: Err((reason, raw)),
            } => (etag, last_modified, None, Some(raw), Some(reason)),
        };
        let mut r = Self {
            key: lease_key(&prefix),
            prefix,
            state: LeaseState::Absent,
            record,
            raw,
            problem: None,
            etag,
            last_modified,
            age_s: None,
            expires_in_s: None,
            holder_skew_s: None,
            exclusion: ExclusionReport::Unprobed,
            last_takeover: None,
            malformed,
            age_unknown: false,
            etag_seen_since: None,
        };
        r.rejudge(now);
        r
    }

    /// What was read, borrowed, as judging reads it.
    pub fn view(&self) -> ObservedView<'_> {
        let record = match (&self.record, &self.malformed) {
            (Some(r), _) => Ok(r),
            (None, Some(reason)) => Err(reason.as_str()),
            (None, None) => return ObservedView::Absent,
        };
        ObservedView::Present {
            last_modified: self.last_modified,
            record,
        }
    }

    /// What was read, as an [`Observed`] of its own (a copy: the
    /// takeover dialog keeps the object it was opened on).
    pub fn observed(&self) -> Observed {
        let record = match (&self.record, &self.malformed) {
            (Some(r), _) => Ok(r.clone()),
            (None, Some(reason)) => Err((reason.clone(), self.raw.clone().unwrap_or_default())),
            (None, None) => return Observed::Absent,
        };
        Observed::Present {
            etag: self.etag.clone(),
            last_modified: self.last_modified,
            record,
        }
    }

    /// Judges the row again at `now` (ages tick between refreshes).
    pub fn rejudge(&mut self, now: DateTime<Utc>) {
        let j = judge_view(self.view(), now);
        self.state = j.state;
        self.problem = j.problem;
        self.age_s = j.age_s.map(round_ms);
        self.expires_in_s = j.expires_in_s.map(round_ms);
        self.holder_skew_s = j.holder_skew_s.map(round_ms);
        self.age_unknown = false;
    }

    /// Judges the row again at `now`, then applies the reader-clock rule
    /// when its service's clock offset is known (`offset`: service minus
    /// reader and its error, seconds).
    pub(super) fn rejudge_by(&mut self, now: DateTime<Utc>, offset: Option<(f64, f64)>) {
        self.rejudge(now);
        if let Some((o, e)) = offset {
            self.check_reader_clock(o, e);
        }
    }

    /// Applies the reader-clock rule: a row judged stale by a clock that is
    /// certainly further from the service's than a twelfth of the record's
    /// TTL is not known to be stale. `offset_s` is service minus reader.
    fn check_reader_clock(&mut self, offset_s: f64, error_s: f64) {
        let Some(r) = &self.record else { return };
        let limit = clock_offset_limit_s(r.ttl_s);
        if self.state == LeaseState::Stale && certainly_beyond_limit(offset_s, error_s, r.ttl_s) {
            self.age_unknown = true;
            self.problem = Some(format!(
                "looks stale, but this host's clock is {} {} the storage service's (limit {} for a {} s TTL): \
                 its age is unknown and it may be live; fix this host's time (NTP) before any takeover",
                format_secs(offset_s.abs()),
                if offset_s > 0.0 { "behind" } else { "ahead of" },
                format_secs(limit),
                r.ttl_s
            ));
        }
    }

    /// The judgement's explanation at `now`, without the state's name.
    pub(crate) fn explanation(&self, now: DateTime<Utc>) -> String {
        judge_view(self.view(), now).explanation()
    }
}

/// A prefix that could not be read (its LEASE, or its listing), or that a
/// listing returned but cannot be named as a key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrefixError {
    /// The prefix.
    pub prefix: String,
    /// What went wrong (safe to print; never credentials).
    pub error: String,
}

/// Everything gathered for one TARGET.
#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    /// The TARGET URL as normalised.
    pub url: String,
    /// Where requests went, for people (the console header, text output):
    /// `local`, or the endpoint (or `AWS S3`) with region and addressing
    /// style. Not in `--json`, which has [`TargetReport::endpoint_url`],
    /// [`TargetReport::region`] and [`TargetReport::addressing_style`].
    #[serde(skip)]
    pub endpoint: String,
    /// JSON `endpoint`: the endpoint URL requests went to, credentials shown
    /// as `***`; null for the SDK's own AWS endpoint of `region`, and for a
    /// local store.
    #[serde(rename = "endpoint")]
    pub endpoint_url: Option<String>,
    /// The region requests were signed for (null for a local store).
    pub region: Option<String>,
    /// `path` or `virtual_host` (null for a local store).
    pub addressing_style: Option<AddressingStyle>,
    /// Bucket name, for S3.
    pub bucket: Option<String>,
    /// Why the target could not be gathered at all (listing failed).
    pub error: Option<String>,
    /// Prefixes that could not be read.
    pub errors: Vec<PrefixError>,
    /// Prefixes found, sorted by prefix.
    pub prefixes: Vec<PrefixReport>,
    /// The service's clock minus this reader's, in seconds, from the `Date`
    /// of its latest answer (null for a local store: it has no clock of its own).
    pub(crate) server_offset_s: Option<f64>,
    /// The uncertainty of `server_offset_s`, ± seconds.
    pub(crate) server_offset_error_s: Option<f64>,
    /// Why the service's clock is unknown although it has one (its latest
    /// answer had no `Date`, or one that does not parse): ages are then
    /// judged by this reader's clock alone. Null when known, and for a local
    /// store.
    pub(crate) server_clock_note: Option<String>,
    /// Every prefix is absent, but `LEASE` keys lie deeper than the listing
    /// went (one bounded look, by `--json`, `-o table` and `check`): the
    /// `--depth` that finds them. Null when not looked or none was seen.
    pub(crate) deeper_leases: Option<DeeperLeases>,
}

impl TargetReport {
    /// The sentence for [`TargetReport::deeper_leases`], escaped: every
    /// prefix is absent, leases lie deeper, and the `--depth` that finds
    /// them. `None` when there is nothing to say.
    pub(crate) fn deeper_note(&self) -> Option<String> {
        let d = self.deeper_leases.as_ref()?;
        Some(format!(
            "every prefix under {} is absent, but LEASE keys lie deeper (e.g. {}LEASE): \
             give --depth {} to see them",
            sanitize(&self.url),
            sanitize(&self.prefix_url(&d.example)),
            d.depth
        ))
    }

    /// The URL of `prefix` (a key prefix in this target's store, as in
    /// [`PrefixReport::prefix`]), written as a TARGET that names it:
    /// `s3://bucket/` or the local store's `file://` URL, then the prefix,
    /// percent-encoded where a TARGET needs it ([`crate::target`]).
    pub fn prefix_url(&self, prefix: &str) -> String {
        match &self.bucket {
            Some(b) => format!("s3://{b}/{}", encode_path(prefix)),
            None => {
                let slash = if self.url.ends_with('/') { "" } else { "/" };
                format!("{}{slash}{}", self.url, encode_path(prefix))
            }
        }
    }
}

/// The reader's clock, by which every age is computed.
#[derive(Debug, Clone, Serialize)]
pub struct ReaderClock {
    /// The reader's wall-clock time when the snapshot was judged, UTC.
    #[serde(serialize_with = "ser_ts")]
    pub now: DateTime<Utc>,
    /// The storage services' clock minus this reader's, in seconds: of the
    /// targets measured, the one furthest from zero (null when none was).
    pub(crate) server_offset_s: Option<f64>,
    /// Its uncertainty, ± seconds.
    pub(crate) server_offset_error_s: Option<f64>,
}

/// One consistent view of every target (and the pod): the `--json` document.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// [`SCHEMA_VERSION`].
    pub schema_version: &'static str,
    /// When the snapshot was judged (reader's clock, UTC).
    #[serde(serialize_with = "ser_ts")]
    pub generated_at: DateTime<Utc>,
    /// The reader's clock.
    pub reader_clock: ReaderClock,
    /// Targets in the order given.
    pub targets: Vec<TargetReport>,
    /// The local pod.
    pub pod: PodSnapshot,
    /// Why the pod could not be scanned (null when it was, or when not asked).
    pub(crate) pod_error: Option<String>,
    /// The audit log read for the rows' `last_takeover` (`--json`, NDJSON,
    /// `--watch`); absent from the document when none was read (the console,
    /// `serve`). One asked for by `--audit-log` that could not be read makes
    /// the exit code 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_log: Option<super::takeovers::AuditLogReport>,
}

// Here rather than in `takeovers` beside the index: the document names the
// takeovers' types, and the index does not name the document's.
impl TakeoverIndex {
    /// Sets every row's `last_takeover` in `snap` from this index.
    pub(crate) fn attach(&self, snap: &mut Snapshot) {
        for t in &mut snap.targets {
            for p in &mut t.prefixes {
                p.last_takeover = self
                    .newest(&t.url, t.bucket.as_deref(), &p.key)
                    .map(|l| Box::new(l.clone()));
            }
        }
    }
}

impl Snapshot {
    /// Whether the pod's completeness decides the exit code: the pod was
    /// asked for (`--pod-root`, `--data-dir`, or no TARGET at all: the pod is
    /// all there is), its scan failed, or it was found among the processes
    /// that could be read (a lease participant, a lease variable, a lock
    /// file). Otherwise processes that could not be inspected are only named
    /// in the pod's notes (docs/exit-codes.md).
    pub fn pod_in_question(&self) -> bool {
        self.targets.is_empty()
            || self.pod_error.is_some()
            || self.pod.requested()
            || self.pod.found()
    }

    /// The exit code for monitoring: 1 if anything could not be gathered
    /// (including pod processes that could not be inspected, when the pod is
    /// in question: [`Snapshot::pod_in_question`]), else 3 if anything needs
    /// attention (a lease, a pod verdict, or a target whose leases lie
    /// deeper than it was listed: [`TargetReport::deeper_leases`]), else 0
    /// ([`Exit::Failed`], [`Exit::Attention`], [`Exit::Ok`]).
    pub fn exit_code(&self) -> Exit {
        if self.targets.iter().any(|t| {
            t.error.is_some() || !t.errors.is_empty() || t.prefixes.iter().any(|p| p.age_unknown)
        }) || self.pod_error.is_some()
            || self
                .audit_log
                .as_ref()
                .is_some_and(|a| a.error.is_some() && a.requested)
            || (self.pod.incomplete() && self.pod_in_question())
        {
            Exit::Failed
        } else if self
            .targets
            .iter()
            .flat_map(|t| &t.prefixes)
            .any(|p| p.state.needs_attention() || p.problem.is_some())
            || self.targets.iter().any(|t| t.deeper_leases.is_some())
            || !self.pod.verdicts.is_empty()
        {
            Exit::Attention
        } else {
            Exit::Ok
        }
    }

    /// Why [`Snapshot::exit_code`] is not 0 for what the document's own
    /// error fields do not already say: rows whose age is unknown, and a pod
    /// in question that could not be read whole. One sentence each, escaped.
    pub(crate) fn unsaid_reasons(&self) -> Vec<String> {
        let mut out = Vec::new();
        let unknown: usize = self
            .targets
            .iter()
            .map(|t| t.prefixes.iter().filter(|p| p.age_unknown).count())
            .sum();
        if unknown > 0 {
            out.push(format!(
                "{unknown} lease(s) could not be judged: this host's clock is too far from the service's to tell their age (see reader_clock; fix the clock with NTP)"
            ));
        }
        if self.pod.incomplete() && self.pod_in_question() {
            let mut why: Vec<String> = Vec::new();
            if !self.pod.notes.is_empty() {
                // The scan's own notes say it (processes and locks).
            } else if !self.pod.uninspected.is_empty() {
                why.push(format!(
                    "{} process(es) could not be inspected",
                    self.pod.uninspected.len()
                ));
            }
            for l in self
                .pod
                .locks
                .iter()
                .filter(|l| self.pod.notes.is_empty() && l.state == LockFileState::Unknown)
            {
                why.push(format!(
                    "the lock {} is unknown: {}",
                    l.path, l.state_reason
                ));
            }
            why.extend(self.pod.notes.iter().cloned());
            out.push(format!(
                "the pod could not be read whole: {}",
                sanitize_message(&why.join("; "))
            ));
        }
        out
    }

    /// Why [`Snapshot::exit_code`] is 3, in one sentence, when something
    /// needs attention: the leases that do (the first five named with their
    /// state, the rest counted) and the pod's verdicts by kind. `None` when
    /// nothing does (a target whose leases lie deeper says so in its own
    /// note, [`TargetReport::deeper_note`]). Without `verdicts`, the leases
    /// alone (for an output that names each verdict on a line of its own).
    pub(crate) fn attention_reason(&self, verdicts: bool) -> Option<String> {
        let mut named = Vec::new();
        let mut count = 0;
        for t in &self.targets {
            for p in t
                .prefixes
                .iter()
                .filter(|p| p.state.needs_attention() || p.problem.is_some())
            {
                count += 1;
                if named.len() < ATTENTION_NAMED {
                    named.push(attention_item(&t.prefix_url(&p.prefix), p));
                }
            }
        }
        let kinds: Vec<&str> = if verdicts {
            self.pod.verdicts.iter().map(|v| v.kind.as_str()).collect()
        } else {
            Vec::new()
        };
        attention_sentence(count, &named, &kinds)
    }

    /// Judges again at `now` only the rows `rows` names (target index, row
    /// index; names out of range are skipped), with the reader-clock rule;
    /// the others keep their verdicts and ages. The service-clock offsets
    /// are kept: they change only with a new reading. Returns whether the
    /// age of any row judged is unknown (the reader-clock rule).
    pub(crate) fn rejudge_rows(&mut self, now: DateTime<Utc>, rows: &[(usize, usize)]) -> bool {
        self.generated_at = now;
        self.reader_clock.now = now;
        let mut age_unknown = false;
        for &(ti, pi) in rows {
            let Some(t) = self.targets.get_mut(ti) else {
                continue;
            };
            let offset = t.server_offset_s.zip(t.server_offset_error_s);
            if let Some(p) = t.prefixes.get_mut(pi) {
                p.rejudge_by(now, offset);
                age_unknown |= p.age_unknown;
            }
        }
        age_unknown
    }

    /// Judges every row again at `now`.
    pub fn rejudge(&mut self, now: DateTime<Utc>) {
        self.generated_at = now;
        self.reader_clock.now = now;
        self.reader_clock.server_offset_s = None;
        self.reader_clock.server_offset_error_s = None;
        for t in &mut self.targets {
            let offset = t.server_offset_s.zip(t.server_offset_error_s);
            for p in &mut t.prefixes {
                p.rejudge_by(now, offset);
            }
            if let Some(o) = t.server_offset_s {
                if self
                    .reader_clock
                    .server_offset_s
                    .is_none_or(|m| o.abs() > m.abs())
                {
                    self.reader_clock.server_offset_s = Some(o);
                    self.reader_clock.server_offset_error_s = t.server_offset_error_s;
                }
            }
        }
    }
}

/// `s` rounded to the millisecond (the JSON document's precision).
pub(super) fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

fn ser_ts<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*t, SecondsFormat::Millis))
}

/// A row's record as `--json` writes it: the record's fields, and
/// `generation` always (`null` when unknown), unlike the LEASE body, which
/// leaves an unknown generation out.
fn ser_record<S: Serializer>(r: &Option<LeaseRecord>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct RecordOut<'a> {
        instance_id: &'a str,
        acquired_at: String,
        renewed_at: String,
        ttl_s: u64,
        generation: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        released_at: Option<String>,
    }
    let micros = |t: DateTime<Utc>| rfc3339(t, SecondsFormat::Micros);
    match r {
        Some(r) => RecordOut {
            instance_id: &r.instance_id,
            acquired_at: micros(r.acquired_at),
            renewed_at: micros(r.renewed_at),
            ttl_s: r.ttl_s,
            generation: r.generation,
            released_at: r.released_at.map(micros),
        }
        .serialize(s),
        None => s.serialize_none(),
    }
}

fn ser_opt_ts<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_ts(t, s),
        None => s.serialize_none(),
    }
}

/// How many leases [`attention_sentence`] names; the rest are counted.
pub(crate) const ATTENTION_NAMED: usize = 5;

/// A lease that needs attention as [`attention_sentence`] names it: its URL
/// and state (escaped), or its problem when its state is fine.
pub(crate) fn attention_item(url: &str, p: &PrefixReport) -> String {
    let url = sanitize(url);
    if p.state.needs_attention() {
        format!("{url} {}", p.state.as_str())
    } else {
        format!("{url} has a problem noted")
    }
}

/// Why an output exits 3, in one sentence: `count` leases need attention
/// (`named`: the first of them, from [`attention_item`]), and the pod's
/// verdicts by kind. `None` when there is neither.
pub(crate) fn attention_sentence(
    count: usize,
    named: &[String],
    verdicts: &[&str],
) -> Option<String> {
    let mut parts = Vec::new();
    if count > 0 {
        let more = count.saturating_sub(named.len());
        parts.push(format!(
            "{count} lease(s) need attention: {}{}",
            named.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    if !verdicts.is_empty() {
        parts.push(format!(
            "the pod has {} verdict(s): {}",
            verdicts.len(),
            verdicts.join(", ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
