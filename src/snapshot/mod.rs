//! Discovery of prefixes under each TARGET, and one consistent [`Snapshot`]
//! value: what the console draws and what `--json` prints.
//!
//! Discovery: a TARGET is itself a prefix if `{TARGET}LEASE` exists; with
//! `depth ≥ 1` every common prefix found by listing (delimiter `/`) down to
//! `depth` levels is a prefix too, shown even without a LEASE when nothing
//! deeper was listed under it. Lists and GETs run concurrently, bounded, each
//! under its own timeout. Nothing a listing returns is dropped: a prefix that
//! cannot be named as a key, or one below the target that cannot be listed,
//! is an error of its own (the target's other rows are kept).

pub mod history;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use futures::stream::{self, StreamExt};
use serde::{Serialize, Serializer};

use crate::bucket::{judge, lease_key, read_lease, LeaseRecord, LeaseState, Observed};
use crate::store::{ObjectRead, StoreError};
use crate::target::Target;
use crate::writer::scan::PodSnapshot;

/// The `--json` schema version. Minor versions only add fields.
pub const SCHEMA_VERSION: &str = "1.2";

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

/// One prefix's row: the LEASE object and its judgement at `generated_at`.
#[derive(Debug, Clone, Serialize)]
pub struct PrefixReport {
    /// The prefix (empty or ending in `/`).
    pub prefix: String,
    /// The lease key, `{prefix}LEASE`.
    pub key: String,
    /// fresh | stale | suspect | malformed | absent.
    pub state: LeaseState,
    /// The record, when the body is a valid one.
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
    pub holder_skew_s: Option<f64>,
    /// Exclusion on this prefix's service.
    pub exclusion: ExclusionReport,
    /// What was read, kept to judge again as the clock moves.
    #[serde(skip)]
    pub observed: Observed,
    /// Set when the row looks stale but this reader's clock is too far from
    /// the service's to say so: its age is unknown (see `problem`).
    #[serde(skip)]
    pub age_unknown: bool,
}

impl PrefixReport {
    /// Builds a row from what was read, judged at `now`.
    pub fn new(prefix: String, observed: Observed, now: DateTime<Utc>) -> Self {
        let mut r = Self {
            key: lease_key(&prefix),
            prefix,
            state: LeaseState::Absent,
            record: None,
            raw: None,
            problem: None,
            etag: observed.etag().map(str::to_owned),
            last_modified: match &observed {
                Observed::Present { last_modified, .. } => *last_modified,
                Observed::Absent => None,
            },
            age_s: None,
            expires_in_s: None,
            holder_skew_s: None,
            exclusion: ExclusionReport::Unprobed,
            observed,
            age_unknown: false,
        };
        r.record = r.observed.record().cloned();
        if let Observed::Present {
            record: Err((_, raw)),
            ..
        } = &r.observed
        {
            r.raw = Some(raw.clone());
        }
        r.rejudge(now);
        r
    }

    /// Judges the row again at `now` (ages tick between refreshes).
    pub fn rejudge(&mut self, now: DateTime<Utc>) {
        let j = judge(&self.observed, now);
        self.state = j.state;
        self.problem = j.problem;
        self.age_s = j.age_s.map(round_ms);
        self.expires_in_s = j.expires_in_s.map(round_ms);
        self.holder_skew_s = j.holder_skew_s.map(round_ms);
        self.age_unknown = false;
    }

    /// Applies the reader-clock rule: a row judged stale by a clock that is
    /// certainly further from the service's than a twelfth of the record's
    /// TTL is not known to be stale. `offset_s` is service minus reader.
    fn check_reader_clock(&mut self, offset_s: f64, error_s: f64) {
        let Some(r) = &self.record else { return };
        let limit = crate::bucket::fence::clock_offset_limit_s(r.ttl_s);
        if self.state == LeaseState::Stale && offset_s.abs() - error_s > limit {
            self.age_unknown = true;
            self.problem = Some(format!(
                "looks stale, but this host's clock is {} {} the storage service's (limit {} for a {} s TTL): \
                 its age is unknown and it may be live; fix this host's time (NTP) before any takeover",
                crate::bucket::format_secs(offset_s.abs()),
                if offset_s > 0.0 { "behind" } else { "ahead of" },
                crate::bucket::format_secs(limit),
                r.ttl_s
            ));
        }
    }

    /// The judgement's explanation at `now`, without the state's name.
    pub fn explanation(&self, now: DateTime<Utc>) -> String {
        judge(&self.observed, now).explanation()
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
    pub addressing_style: Option<crate::store::AddressingStyle>,
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
    pub server_offset_s: Option<f64>,
    /// The uncertainty of `server_offset_s`, ± seconds.
    pub server_offset_error_s: Option<f64>,
    /// Why the service's clock is unknown although it has one (its latest
    /// answer had no `Date`, or one that does not parse): ages are then
    /// judged by this reader's clock alone. Null when known, and for a local
    /// store.
    pub server_clock_note: Option<String>,
}

impl TargetReport {
    /// The URL of `prefix` (a key prefix in this target's store, as in
    /// [`PrefixReport::prefix`]), written as a TARGET that names it:
    /// `s3://bucket/` or the local store's `file://` URL, then the prefix,
    /// percent-encoded where a TARGET needs it ([`crate::target`]).
    pub fn prefix_url(&self, prefix: &str) -> String {
        match &self.bucket {
            Some(b) => format!("s3://{b}/{}", crate::target::encode_path(prefix)),
            None => {
                let slash = if self.url.ends_with('/') { "" } else { "/" };
                format!("{}{slash}{}", self.url, crate::target::encode_path(prefix))
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
    pub server_offset_s: Option<f64>,
    /// Its uncertainty, ± seconds.
    pub server_offset_error_s: Option<f64>,
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
    pub pod_error: Option<String>,
}

/// Exit code: every target gathered and healthy.
pub const EXIT_OK: i32 = crate::exit::Exit::Ok.code();
/// Exit code: some target or prefix could not be gathered, or a lease's age
/// could not be judged (this reader's clock is too far from the service's).
pub const EXIT_UNREACHABLE: i32 = crate::exit::Exit::Failed.code();
/// Exit code: bad usage (flags, TARGET URL).
pub const EXIT_USAGE: i32 = crate::exit::Exit::Usage.code();
/// Exit code: gathered, and something needs attention (stale / suspect /
/// malformed lease, or a pod verdict).
pub const EXIT_ATTENTION: i32 = crate::exit::Exit::Attention.code();

impl Snapshot {
    /// Whether the pod's completeness decides the exit code: the pod was
    /// asked for (`--pod-root`, `--data-dir`, or no TARGET at all: the pod is
    /// all there is), its scan failed, or it was found among the processes
    /// that could be read (a lease participant, a lease variable, a lock
    /// file). Otherwise processes that could not be inspected are only named
    /// in the pod's notes (README: exit codes).
    pub fn pod_in_question(&self) -> bool {
        self.targets.is_empty()
            || self.pod_error.is_some()
            || self.pod.requested()
            || self.pod.found()
    }

    /// The exit code for monitoring: 1 if anything could not be gathered
    /// (including pod processes that could not be inspected, when the pod is
    /// in question: [`Snapshot::pod_in_question`]), else 3 if anything needs
    /// attention, else 0.
    pub fn exit_code(&self) -> i32 {
        if self.targets.iter().any(|t| {
            t.error.is_some() || !t.errors.is_empty() || t.prefixes.iter().any(|p| p.age_unknown)
        }) || self.pod_error.is_some()
            || (self.pod.incomplete() && self.pod_in_question())
        {
            EXIT_UNREACHABLE
        } else if self
            .targets
            .iter()
            .flat_map(|t| &t.prefixes)
            .any(|p| p.state.needs_attention() || p.problem.is_some())
            || !self.pod.verdicts.is_empty()
        {
            EXIT_ATTENTION
        } else {
            EXIT_OK
        }
    }

    /// Judges every row again at `now`.
    pub fn rejudge(&mut self, now: DateTime<Utc>) {
        self.generated_at = now;
        self.reader_clock.now = now;
        self.reader_clock.server_offset_s = None;
        self.reader_clock.server_offset_error_s = None;
        for t in &mut self.targets {
            for p in &mut t.prefixes {
                p.rejudge(now);
                if let (Some(o), Some(e)) = (t.server_offset_s, t.server_offset_error_s) {
                    p.check_reader_clock(o, e);
                }
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

/// Requests in flight at once per target unless `--concurrency` says otherwise:
/// 128, chosen from the latency sweep in PERFORMANCE.md (at 30 ms RTT and
/// 10,000 prefixes: 20.6 s at 32, 9.8 s at 64, 5.1 s at 128, 5.0 s at 256 —
/// as fast as 256 with half the connections). A service that answers
/// `503 SlowDown` gets fewer (the gather halves its limit).
pub const DEFAULT_CONCURRENCY: u16 = 128;

/// How to gather.
#[derive(Debug, Clone)]
pub struct GatherOptions {
    /// Listing depth under each target (default 1).
    pub depth: u32,
    /// Requests in flight at once per target (default [`DEFAULT_CONCURRENCY`]).
    pub concurrency: usize,
    /// Deadline for each request (default 10 s).
    pub request_timeout: Duration,
}

impl Default for GatherOptions {
    fn default() -> Self {
        Self {
            depth: 1,
            concurrency: DEFAULT_CONCURRENCY as usize,
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// A target ready to be gathered: its URL, where it lives, and a read-only handle.
#[derive(Clone)]
pub struct OpenTarget {
    /// The TARGET.
    pub target: Target,
    /// Display endpoint.
    pub endpoint: String,
    /// The store, read side only.
    pub store: Arc<dyn ObjectRead>,
}

async fn timed<T>(
    d: Duration,
    what: &str,
    f: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(d, f)
        .await
        .unwrap_or_else(|_| Err(StoreError::Timeout(d, what.to_owned())))
}

fn is_internal(prefix: &str) -> bool {
    prefix
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .is_some_and(|last| last.starts_with(".leasectl-"))
}

/// The errors for the entries of a listing that cannot be named as keys.
fn unlisted_errors(listing: &crate::store::Listing) -> Vec<PrefixError> {
    listing
        .unlisted
        .iter()
        .map(|u| PrefixError {
            prefix: u.prefix.clone(),
            error: u.problem.clone(),
        })
        .collect()
}

/// Finds the prefixes under `root` per the discovery rule (module docs).
/// Returns the candidate prefixes (sorted) and the prefixes that could not
/// be discovered: one below the root whose listing failed (with what
/// failed; nothing under it was read), and every entry a listing returned
/// that cannot be named as a key ([`crate::store::Listing::unlisted`]).
///
/// Errors: the root's own listing failed (the target as a whole is unknown).
pub async fn discover(
    store: &dyn ObjectRead,
    root: &str,
    opts: &GatherOptions,
) -> Result<(Vec<String>, Vec<PrefixError>), StoreError> {
    let mut errors: Vec<PrefixError> = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    let mut frontier = vec![root.to_owned()];
    for level in 0..opts.depth {
        let lists: Vec<(String, Result<crate::store::Listing, StoreError>)> =
            stream::iter(frontier.iter().cloned())
                .map(|p| async move {
                    let what = format!("listing {} under {p:?}", store.describe());
                    let r = timed(opts.request_timeout, &what, store.list(&p)).await;
                    (p, r)
                })
                .buffer_unordered(opts.concurrency.max(1))
                .collect()
                .await;
        let mut next = Vec::new();
        for (p, r) in lists {
            let listing = match r {
                Ok(l) => l,
                Err(e) if level > 0 => {
                    // One directory that cannot be listed loses only itself.
                    errors.push(PrefixError {
                        error: format!(
                            "cannot list it, so its LEASE and anything under it were not read: {e}"
                        ),
                        prefix: p,
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            errors.extend(unlisted_errors(&listing));
            let children: Vec<String> = listing
                .prefixes
                .into_iter()
                .filter(|c| !is_internal(c))
                .collect();
            // Below the target, a listed prefix is itself shown when it holds a
            // LEASE or has nothing deeper (a container of prefixes is not one).
            if level > 0 {
                let has_lease = listing.objects.iter().any(|o| o.key == lease_key(&p));
                if children.is_empty() || has_lease {
                    shown.push(p.clone());
                }
            }
            if level + 1 == opts.depth {
                shown.extend(children);
            } else {
                next.extend(children);
            }
        }
        frontier = next;
        if frontier.is_empty() {
            break;
        }
    }
    shown.sort();
    shown.dedup();
    errors.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    Ok((shown, errors))
}

/// Reads the LEASE of `prefix` ([`read_lease`]).
pub async fn observe(store: &dyn ObjectRead, prefix: &str) -> Result<Observed, StoreError> {
    read_lease(store, &lease_key(prefix), None).await
}

/// The last read of one LEASE, and when it must be read again.
#[derive(Clone, Debug)]
struct Entry {
    /// What the read gave (an error as its sentence).
    result: Result<Observed, String>,
    /// When it was read (reader's wall clock).
    read_at: DateTime<Utc>,
    /// When it must be read again (reader's monotonic clock).
    due: Duration,
}

/// What a [`Gatherer`] remembers between refreshes of one target.
#[derive(Default, Clone)]
pub struct TargetCache {
    /// Prefixes found by the last listing.
    pub prefixes: Option<Vec<String>>,
    /// What the last listing could not discover ([`discover`]'s errors).
    listing_errors: Vec<PrefixError>,
    /// The target's own prefix, then the listed ones: the rows of its report.
    known: Vec<String>,
    /// Why the last listing failed.
    error: Option<String>,
    entries: BTreeMap<String, Entry>,
    /// Requests in flight allowed now: lowered when the service asks to slow
    /// down, raised again one at a time as answers come back.
    limit: Option<usize>,
}

/// Which rows the reader is looking at: they are read at every refresh,
/// whatever their schedule. Shared between a console and its [`Gatherer`];
/// the lock is held only to swap or test a set, never across an `.await`.
#[derive(Debug, Default)]
pub struct Focus(std::sync::Mutex<std::collections::HashSet<(usize, String)>>);

impl Focus {
    /// Replaces the rows in view: (index of the TARGET, prefix).
    pub fn set(&self, rows: std::collections::HashSet<(usize, String)>) {
        if let Ok(mut g) = self.0.lock() {
            *g = rows;
        }
    }

    fn snapshot(&self) -> std::collections::HashSet<(usize, String)> {
        self.0.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

/// When each LEASE is read again (issue 18: "watching costs what changes,
/// not what exists"). Without a schedule every LEASE is read at every gather.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Time between two gathers.
    pub refresh: Duration,
    /// Time between two reads of a LEASE that is stale, suspect, malformed,
    /// absent or unreadable and not in view (the listing's cadence).
    pub relist: Duration,
}

impl Schedule {
    /// The longest a fresh lease that is not in view goes unread, whatever its
    /// TTL: a release or takeover of a long lease still shows within this.
    pub const MAX_FRESH_WAIT: Duration = Duration::from_secs(300);

    /// When to read again a LEASE read at `mono` (monotonic) / `wall`, that
    /// gave `result`. A fresh lease is read during the last refresh before
    /// it could turn stale (by then a live holder has renewed it: holders
    /// renew every TTL/3), and once more just after, if it had not been
    /// renewed; the others at the relist cadence, spread by ±25 % so that
    /// thousands of them do not come due at once.
    fn next_due(
        &self,
        result: &Result<Observed, String>,
        wall: DateTime<Utc>,
        mono: Duration,
    ) -> Duration {
        let jitter = rand::random_range(0.75..1.25);
        let relist = mono + self.relist.mul_f64(jitter);
        let Ok(obs) = result else { return relist };
        let j = judge(obs, wall);
        let (LeaseState::Fresh, Some(left)) = (j.state, j.expires_in_s) else {
            return relist;
        };
        let left = Duration::try_from_secs_f64(left.max(0.0)).unwrap_or(Self::MAX_FRESH_WAIT);
        let lead = self.refresh + Duration::from_secs(1);
        let wait = if left > lead {
            left - lead
        } else {
            // Read within its last refresh: once more just after the moment
            // it could turn stale, to show that within one refresh (or the
            // late renewal, if its holder cut it close).
            left + Duration::from_millis(500)
        };
        mono + wait.min(Self::MAX_FRESH_WAIT)
    }
}

/// One progress report of a gather that is still running: the rows read so
/// far, for a console to show while the rest arrives.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The partial snapshot (rows not read yet are missing).
    pub snapshot: Snapshot,
    /// LEASEs read so far in this gather.
    pub read: usize,
    /// Prefixes known so far (grows while the listing goes on).
    pub known: usize,
    /// True once every listing is complete.
    pub listed: bool,
}

/// Where progress reports go (at most one every [`PROGRESS_EVERY`]).
pub type ProgressSink<'a> = &'a (dyn Fn(Progress) + Sync);

/// Time between two progress reports of one gather.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// Tries to slow down: how many times a throttled request is sent again
/// within one gather before it is reported as an error.
const THROTTLE_RETRIES: u32 = 6;

/// Reads the LEASE of `prefix`, conditionally on the cached ETag when there is
/// one: a `304 Not Modified` reuses the cached observation.
async fn observe_cached(
    store: &dyn ObjectRead,
    prefix: &str,
    cached: Option<&Observed>,
) -> Result<Observed, StoreError> {
    read_lease(store, &lease_key(prefix), cached).await
}

/// Back-off before the `n`-th retry of a throttled request: 100 ms doubling,
/// at most 5 s, with full jitter (AWS's advice for `SlowDown`).
fn throttle_backoff(n: u32) -> Duration {
    let cap = Duration::from_millis(100)
        .saturating_mul(1 << n.min(6))
        .min(Duration::from_secs(5));
    cap.mul_f64(rand::random_range(0.5..1.0))
}

/// Gathers one target: discovery, then every LEASE read concurrently.
pub async fn gather_target(
    t: &OpenTarget,
    opts: &GatherOptions,
    now: impl Fn() -> DateTime<Utc> + Sync,
) -> TargetReport {
    gather_target_cached(t, opts, now, &mut TargetCache::default(), true).await
}

/// [`gather_target`] with a cache: listing only when `relist` (or nothing is
/// cached), and conditional GETs for prefixes seen before.
pub async fn gather_target_cached(
    t: &OpenTarget,
    opts: &GatherOptions,
    now: impl Fn() -> DateTime<Utc> + Sync,
    cache: &mut TargetCache,
    relist: bool,
) -> TargetReport {
    let clock = FnClock(&now);
    let plan = Plan {
        schedule: None,
        focus: Default::default(),
        index: 0,
    };
    gather_planned(t, opts, &clock, cache, relist, &plan, None).await;
    report_from_cache(t, cache)
}

/// A wall clock given as a function (for [`gather_target_cached`]).
struct FnClock<'a, F: Fn() -> DateTime<Utc> + Sync>(&'a F);

trait WallMono {
    fn wall(&self) -> DateTime<Utc>;
    fn mono(&self) -> Duration;
}

impl<F: Fn() -> DateTime<Utc> + Sync> WallMono for FnClock<'_, F> {
    fn wall(&self) -> DateTime<Utc> {
        (self.0)()
    }
    fn mono(&self) -> Duration {
        Duration::ZERO
    }
}

impl WallMono for crate::clock::SharedClock {
    fn wall(&self) -> DateTime<Utc> {
        self.as_ref().wall()
    }
    fn mono(&self) -> Duration {
        self.as_ref().mono()
    }
}

/// What to read in one gather of one target.
struct Plan {
    /// `None`: read everything.
    schedule: Option<Schedule>,
    /// This target's rows in view.
    focus: std::collections::HashSet<String>,
    /// This target's index (for progress reports).
    index: usize,
}

impl Plan {
    fn wants(&self, prefix: &str, entry: Option<&Entry>, mono: Duration) -> bool {
        let (Some(_), Some(e)) = (self.schedule, entry) else {
            return true;
        };
        e.due <= mono || self.focus.contains(prefix)
    }
}

/// Lists `root` to `opts.depth` levels, page by page; each page's prefixes
/// go to `found` as soon as they are known (progressive discovery). A
/// throttled page is asked again after a back-off. Returns the prefixes and
/// what could not be discovered, as [`discover`].
async fn discover_paged(
    store: &dyn ObjectRead,
    root: &str,
    opts: &GatherOptions,
    found: &mut (dyn FnMut(Vec<String>) + Send),
) -> Result<(Vec<String>, Vec<PrefixError>), StoreError> {
    if opts.depth != 1 {
        let (all, errors) = discover(store, root, opts).await?;
        found(all.clone());
        return Ok((all, errors));
    }
    let mut errors = Vec::new();
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0usize;
    let mut trail = crate::store::TokenTrail::default();
    loop {
        let what = format!("listing {} under {root:?}", store.describe());
        let mut tries = 0;
        let (page, next) = loop {
            match timed(
                opts.request_timeout,
                &what,
                store.list_page(root, token.clone()),
            )
            .await
            {
                Err(e) if e.is_throttle() && tries < THROTTLE_RETRIES => {
                    tokio::time::sleep(throttle_backoff(tries)).await;
                    tries += 1;
                }
                r => break r?,
            }
        };
        errors.extend(unlisted_errors(&page));
        let children: Vec<String> = page
            .prefixes
            .into_iter()
            .filter(|c| !is_internal(c))
            .collect();
        found(children.clone());
        all.extend(children);
        pages += 1;
        match next {
            // A listing that never ends (a hostile service) stops at a
            // million prefixes' worth of pages: an error, not a cut.
            Some(_) if pages >= MAX_LIST_PAGES => {
                return Err(StoreError::Invalid(format!(
                    "the listing under \"{}\" was stopped after {MAX_LIST_PAGES} pages \
                     (about a million entries) and is incomplete; give a TARGET deeper in the \
                     bucket",
                    crate::text::sanitize(root)
                )))
            }
            Some(t) => {
                trail.check(&t, root)?;
                token = Some(t)
            }
            None => break,
        }
    }
    all.sort();
    all.dedup();
    errors.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    Ok((all, errors))
}

/// The most pages one listing of a TARGET follows (1,000 entries each).
const MAX_LIST_PAGES: usize = 1000;

/// One LEASE read in a gather.
struct Read {
    prefix: String,
    result: Result<Observed, StoreError>,
    /// When the answer came (reader's wall and monotonic clocks).
    wall: DateTime<Utc>,
    mono: Duration,
}

/// A target's latest progress: its partial report, LEASEs read, prefixes
/// known, listing complete.
type Partial = (TargetReport, usize, usize, bool);

/// One gather of one target under `plan` (see [`Gatherer`]).
async fn gather_planned(
    t: &OpenTarget,
    opts: &GatherOptions,
    clock: &(dyn WallMono + Sync),
    cache: &mut TargetCache,
    relist: bool,
    plan: &Plan,
    progress: Option<&(dyn Fn(usize, TargetReport, usize, usize, bool) + Sync)>,
) -> bool {
    let store = t.store.as_ref();
    let root = t.target.prefix().to_owned();
    let max = opts.concurrency.max(1);
    let mut limit = cache.limit.unwrap_or(max).clamp(1, max);
    // A store known to be gone (a local directory moved away) fails this
    // gather as a listing would, whatever is scheduled to be read.
    if let Some(e) = store.unavailable() {
        let error = format!("{}: {e}", store.describe());
        let changed = cache.error.as_deref() != Some(error.as_str());
        cache.prefixes = None;
        cache.error = Some(error);
        return changed;
    }

    // Prefixes to read arrive from the listing (page by page) or the cache.
    let (found_tx, mut found_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<String>>();
    let listing = async {
        let mut send = |v: Vec<String>| {
            let _ = found_tx.send(v);
        };
        let r = match (&cache.prefixes, relist) {
            (Some(p), false) => {
                send(p.clone());
                Ok((p.clone(), cache.listing_errors.clone()))
            }
            _ => discover_paged(store, &root, opts, &mut send).await,
        };
        drop(found_tx);
        r
    };
    let cached_entries = &cache.entries;
    let reads = async {
        let mut results: Vec<Read> = Vec::new();
        let mut queue: std::collections::VecDeque<(String, u32)> = Default::default();
        let mut known: Vec<String> = vec![root.clone()];
        if plan.wants(&root, cached_entries.get(&root), clock.mono()) {
            queue.push_back((root.clone(), 0));
        }
        let mut listed = false;
        let mut inflight = futures::stream::FuturesUnordered::new();
        let mut successes = 0usize;
        let mut last_progress = std::time::Instant::now();
        let read = |p: String, tries: u32| {
            let cached = cached_entries.get(&p).and_then(|e| e.result.as_ref().ok());
            async move {
                if tries > 0 {
                    tokio::time::sleep(throttle_backoff(tries - 1)).await;
                }
                let what = format!("reading {} {}", store.describe(), lease_key(&p));
                let r = timed(
                    opts.request_timeout,
                    &what,
                    observe_cached(store, &p, cached),
                )
                .await;
                (p, tries, r)
            }
        };
        loop {
            while inflight.len() < limit {
                let Some((p, tries)) = queue.pop_front() else {
                    break;
                };
                inflight.push(read(p, tries));
            }
            tokio::select! {
                biased;
                more = found_rx.recv(), if !listed => match more {
                    Some(v) => {
                        let mono = clock.mono();
                        for p in v {
                            if p == root {
                                continue;
                            }
                            if plan.wants(&p, cached_entries.get(&p), mono) {
                                queue.push_back((p.clone(), 0));
                            }
                            known.push(p);
                        }
                    }
                    None => listed = true,
                },
                done = inflight.next(), if !inflight.is_empty() => {
                    let Some((p, tries, r)) = done else { continue };
                    match r {
                        Err(e) if e.is_throttle() && tries < THROTTLE_RETRIES => {
                            // The service asks to slow down: half as many at
                            // once, and this one again after a back-off.
                            limit = (limit / 2).max(1);
                            successes = 0;
                            queue.push_back((p, tries + 1));
                        }
                        r => {
                            if r.is_ok() {
                                successes += 1;
                                if successes >= limit && limit < max {
                                    limit += 1;
                                    successes = 0;
                                }
                            }
                            results.push(Read {
                                prefix: p,
                                result: r,
                                wall: clock.wall(),
                                mono: clock.mono(),
                            });
                        }
                    }
                    if let Some(report) = progress {
                        if last_progress.elapsed() >= PROGRESS_EVERY {
                            last_progress = std::time::Instant::now();
                            let partial = assemble(t, &root, cached_entries, &results, &known, &[], true, true);
                            report(plan.index, partial, results.len(), known.len(), listed);
                        }
                    }
                },
                else => break,
            }
        }
        (results, known)
    };
    let (listed, (results, known)) = tokio::join!(listing, reads);
    cache.limit = Some(limit);
    let (listed, listing_errors) = match listed {
        Ok(c) => c,
        Err(e) => {
            let error = format!("{}: {e}", store.describe());
            let changed = cache.error.as_deref() != Some(error.as_str());
            cache.prefixes = None;
            cache.error = Some(error);
            return changed;
        }
    };
    let mut changed = cache.error.take().is_some()
        || cache.prefixes.as_ref() != Some(&listed)
        || cache.listing_errors != listing_errors
        || cache.known.is_empty();
    cache.prefixes = Some(listed);
    cache.listing_errors = listing_errors;
    // Keep what was read, for the next gather; forget prefixes no longer listed.
    let keep: std::collections::HashSet<&String> = known.iter().collect();
    let before = cache.entries.len();
    cache.entries.retain(|p, _| keep.contains(p));
    changed |= cache.entries.len() != before;
    for Read {
        prefix: p,
        result,
        wall,
        mono,
    } in results
    {
        let result = result.map_err(|e| e.to_string());
        let due = match plan.schedule {
            Some(s) => s.next_due(&result, wall, mono),
            None => Duration::ZERO,
        };
        changed |= cache
            .entries
            .get(&p)
            .is_none_or(|old| !same_reading(&old.result, &result));
        cache.entries.insert(
            p,
            Entry {
                result,
                read_at: wall,
                due,
            },
        );
    }
    cache.known = known;
    changed
}

/// Whether two readings of one LEASE show the same thing: the same object
/// (ETag), both absent, or the same error.
fn same_reading(a: &Result<Observed, String>, b: &Result<Observed, String>) -> bool {
    match (a, b) {
        (Ok(Observed::Absent), Ok(Observed::Absent)) => true,
        (Ok(x @ Observed::Present { .. }), Ok(y @ Observed::Present { .. })) => {
            x.etag().is_some() && x.etag() == y.etag()
        }
        (Err(x), Err(y)) => x == y,
        _ => false,
    }
}

/// The report of one target from what its cache holds after a gather.
fn report_from_cache(t: &OpenTarget, cache: &TargetCache) -> TargetReport {
    if let Some(e) = &cache.error {
        let mut report = empty_report(t);
        report.error = Some(e.clone());
        return report;
    }
    assemble(
        t,
        t.target.prefix(),
        &cache.entries,
        &[],
        &cache.known,
        &cache.listing_errors,
        true,
        false,
    )
}

fn empty_report(t: &OpenTarget) -> TargetReport {
    let info = t.store.endpoint_info();
    TargetReport {
        url: t.target.to_string(),
        endpoint: t.endpoint.clone(),
        endpoint_url: info.url,
        region: info.region,
        addressing_style: info.addressing_style,
        bucket: t.target.bucket().map(str::to_owned),
        error: None,
        errors: Vec::new(),
        prefixes: Vec::new(),
        server_offset_s: None,
        server_offset_error_s: None,
        server_clock_note: None,
    }
}

/// The report of one target from this gather's reads and, for rows not read
/// this time, the cached ones (`partial`: rows not read yet and never read
/// before are left out instead of shown from nothing), with what the
/// listing could not discover (`listing_errors`).
#[allow(clippy::too_many_arguments)]
fn assemble(
    t: &OpenTarget,
    root: &str,
    cached: &BTreeMap<String, Entry>,
    fresh: &[Read],
    known: &[String],
    listing_errors: &[PrefixError],
    include_cached: bool,
    partial: bool,
) -> TargetReport {
    let store = t.store.as_ref();
    let mut report = empty_report(t);
    let mut rows: BTreeMap<&str, (Result<&Observed, String>, DateTime<Utc>)> = BTreeMap::new();
    for r in fresh {
        rows.insert(
            &r.prefix,
            (r.result.as_ref().map_err(|e| e.to_string()), r.wall),
        );
    }
    if include_cached || partial {
        for p in known {
            if rows.contains_key(p.as_str()) {
                continue;
            }
            if let Some(e) = cached.get(p) {
                rows.insert(p, (e.result.as_ref().map_err(|s| s.clone()), e.read_at));
            }
        }
    }
    let mut root_error = None;
    for (p, (r, at)) in rows {
        match r {
            Ok(Observed::Absent) if p == root => {}
            Ok(obs) => {
                report
                    .prefixes
                    .push(PrefixReport::new(p.to_owned(), obs.clone(), at));
            }
            Err(e) => {
                if p == root {
                    root_error = Some(e.clone());
                }
                report.errors.push(PrefixError {
                    prefix: p.to_owned(),
                    error: e,
                });
            }
        }
    }
    // If the root itself failed for a reason other than a missing key while
    // nothing else was found, the target as a whole could not be gathered.
    if !partial && report.prefixes.is_empty() && report.errors.len() == 1 && root_error.is_some() {
        let e = report.errors.remove(0);
        report.error = Some(format!("{}: {}", store.describe(), e.error));
    }
    report.errors.extend_from_slice(listing_errors);
    report.errors.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    report
}

/// Gathers snapshots again and again, cheaply: the listing (discovery) runs
/// only every `relist_every` refreshes, each LEASE is read with a
/// conditional GET on the ETag seen last (`304 Not Modified` costs no body),
/// and — with a [`Schedule`] — only when needed: rows in view ([`Focus`]) at
/// every gather, fresh leases around the moment they could turn stale, the
/// others at the relist cadence ([`Schedule::next_due`]). Rows not read in a
/// gather keep their last reading, judged again at the gather's instant.
pub struct Gatherer {
    targets: Vec<OpenTarget>,
    opts: GatherOptions,
    caches: Vec<TargetCache>,
    relist_every: u32,
    count: u32,
    schedule: Option<Schedule>,
    focus: Arc<Focus>,
    /// Each service's clock offset at the last gather, in tenths of a second.
    offsets: Vec<Option<i64>>,
    /// No snapshot returned yet.
    first: bool,
}

impl Gatherer {
    /// A gatherer over `targets`; listings every `relist_every` refreshes (at least 1).
    /// Every LEASE is read at every gather until [`Gatherer::schedule`] is set.
    pub fn new(targets: Vec<OpenTarget>, opts: GatherOptions, relist_every: u32) -> Self {
        let caches = vec![TargetCache::default(); targets.len()];
        Self {
            targets,
            opts,
            caches,
            relist_every: relist_every.max(1),
            count: 0,
            schedule: None,
            focus: Arc::default(),
            offsets: Vec::new(),
            first: true,
        }
    }

    /// Reads each LEASE by need, for gathers `refresh` apart (the listing's
    /// cadence is `refresh × relist_every`).
    pub fn schedule(mut self, refresh: Duration) -> Self {
        self.schedule = Some(Schedule {
            refresh,
            relist: refresh * self.relist_every,
        });
        self
    }

    /// The rows in view, to be set by the console (read at every gather).
    pub fn focus(&self) -> Arc<Focus> {
        self.focus.clone()
    }

    /// How many refreshes pass between two listings.
    pub fn relist_every(&self) -> u32 {
        self.relist_every
    }

    /// One snapshot of every target, judged at one instant.
    pub async fn gather(&mut self, clock: &crate::clock::SharedClock) -> Snapshot {
        self.gather_with_progress(clock, None).await
    }

    /// [`Gatherer::gather`], reporting the rows read so far to `progress`
    /// every [`PROGRESS_EVERY`] while it runs (the first gather only: the
    /// one that reads everything).
    pub async fn gather_with_progress(
        &mut self,
        clock: &crate::clock::SharedClock,
        progress: Option<ProgressSink<'_>>,
    ) -> Snapshot {
        match self.gather_changed(clock, progress, true).await {
            Some(s) => s,
            None => unreachable!("a forced gather always gives a snapshot"),
        }
    }

    /// One gather; the snapshot only when something changed since the last
    /// one returned (or `force`): a row's reading (ETag, absent, error), the
    /// prefixes listed, a listing error, a service's clock offset by more
    /// than 0.1 s. `None` means the last snapshot, judged again at a later
    /// instant, is still what the stores hold — at 10,000 prefixes that
    /// spares assembling and redrawing 10,000 rows every refresh.
    pub async fn gather_changed(
        &mut self,
        clock: &crate::clock::SharedClock,
        progress: Option<ProgressSink<'_>>,
        force: bool,
    ) -> Option<Snapshot> {
        let relist = self.count.is_multiple_of(self.relist_every);
        // Rows are reported as they arrive only until the first snapshot:
        // later gathers read few rows, and a report would cost a whole
        // snapshot of every row.
        let first = self.first;
        self.count = self.count.wrapping_add(1);
        let opts = &self.opts;
        let focus = self.focus.snapshot();
        let n = self.targets.len();
        // Partial reports of each target, combined for `progress`.
        let partials: std::sync::Mutex<Vec<Option<Partial>>> = std::sync::Mutex::new(vec![None; n]);
        let targets = &self.targets;
        let on_target = |i: usize, r: TargetReport, read: usize, known: usize, listed: bool| {
            let Some(sink) = progress else { return };
            let combined = {
                let Ok(mut g) = partials.lock() else { return };
                g[i] = Some((r, read, known, listed));
                let mut reports = Vec::with_capacity(n);
                let (mut read, mut known, mut listed) = (0, 0, true);
                for (j, p) in g.iter().enumerate() {
                    match p {
                        Some((r, rd, kn, ls)) => {
                            reports.push(r.clone());
                            read += rd;
                            known += kn;
                            listed &= ls;
                        }
                        None => {
                            reports.push(empty_report(&targets[j]));
                            listed = false;
                        }
                    }
                }
                (reports, read, known, listed)
            };
            let (reports, read, known, listed) = combined;
            sink(Progress {
                snapshot: finish(reports, targets, clock),
                read,
                known,
                listed,
            });
        };
        let on_target: &(dyn Fn(usize, TargetReport, usize, usize, bool) + Sync) = &on_target;
        let changed = futures::future::join_all(
            self.targets
                .iter()
                .zip(self.caches.iter_mut())
                .enumerate()
                .map(|(index, (t, cache))| {
                    let plan = Plan {
                        schedule: self.schedule,
                        focus: focus
                            .iter()
                            .filter(|(t, _)| *t == index)
                            .map(|(_, p)| p.clone())
                            .collect(),
                        index,
                    };
                    async move {
                        gather_planned(
                            t,
                            opts,
                            clock,
                            cache,
                            relist,
                            &plan,
                            progress.filter(|_| first).map(|_| on_target),
                        )
                        .await
                    }
                }),
        )
        .await;
        let offsets: Vec<Option<i64>> = self
            .targets
            .iter()
            .map(|t| {
                t.store
                    .server_offset()
                    .map(|o| (o.against(clock.as_ref()) * 10.0).round() as i64)
            })
            .collect();
        let offsets_moved = offsets != self.offsets;
        self.offsets = offsets;
        if !(force || self.first || offsets_moved || changed.iter().any(|c| *c)) {
            return None;
        }
        self.first = false;
        let reports = self
            .targets
            .iter()
            .zip(&self.caches)
            .map(|(t, c)| report_from_cache(t, c))
            .collect();
        Some(finish(reports, &self.targets, clock))
    }
}

/// A snapshot of `reports`, with each service's clock offset, judged now.
fn finish(
    mut reports: Vec<TargetReport>,
    targets: &[OpenTarget],
    clock: &crate::clock::SharedClock,
) -> Snapshot {
    for (r, t) in reports.iter_mut().zip(targets) {
        if let Some(o) = t.store.server_offset() {
            r.server_offset_s = Some(round_ms(o.against(clock.as_ref())));
            r.server_offset_error_s = Some(round_ms(o.error_s));
        }
        r.server_clock_note = t.store.server_clock_problem();
    }
    let mut snap = Snapshot {
        schema_version: SCHEMA_VERSION,
        generated_at: clock.wall(),
        reader_clock: ReaderClock {
            now: clock.wall(),
            server_offset_s: None,
            server_offset_error_s: None,
        },
        targets: reports,
        pod: PodSnapshot::default(),
        pod_error: None,
    };
    snap.rejudge(clock.wall());
    snap
}

/// Gathers every target concurrently into one snapshot, judged at one
/// instant (one listing, unconditional GETs: a [`Gatherer`] with no history).
pub async fn gather(
    targets: &[OpenTarget],
    opts: &GatherOptions,
    clock: &crate::clock::SharedClock,
) -> Snapshot {
    Gatherer::new(targets.to_vec(), opts.clone(), 1)
        .gather(clock)
        .await
}

fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

fn ser_ts<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::clock::rfc3339(*t, SecondsFormat::Millis))
}

fn ser_opt_ts<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_ts(t, s),
        None => s.serialize_none(),
    }
}
