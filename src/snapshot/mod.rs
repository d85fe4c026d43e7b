//! Discovery of prefixes under each TARGET, and one consistent [`Snapshot`]
//! value: what the console draws and what `--json` prints.
//!
//! Discovery: a TARGET is itself a prefix if `{TARGET}LEASE` exists; with
//! `depth ≥ 1` every common prefix found by listing (delimiter `/`) down to
//! `depth` levels is a prefix too, shown even without a LEASE when nothing
//! deeper was listed under it. Lists and GETs run concurrently, bounded, each
//! under its own timeout.

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
pub const SCHEMA_VERSION: &str = "1.1";

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
    /// Why it is suspect or malformed.
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

/// A prefix that could not be read.
#[derive(Debug, Clone, Serialize)]
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
    /// Where requests went (`local`, an endpoint URL, or `AWS S3`).
    pub endpoint: String,
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
    /// `"1.0"`.
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
    /// The exit code for monitoring: 1 if anything could not be gathered
    /// (including pod processes that could not be inspected), else
    /// 3 if anything needs attention, else 0.
    pub fn exit_code(&self) -> i32 {
        if self.targets.iter().any(|t| {
            t.error.is_some() || !t.errors.is_empty() || t.prefixes.iter().any(|p| p.age_unknown)
        }) || self.pod_error.is_some()
            || self.pod.incomplete()
        {
            EXIT_UNREACHABLE
        } else if self
            .targets
            .iter()
            .flat_map(|t| &t.prefixes)
            .any(|p| p.state.needs_attention())
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

/// Requests in flight at once per target unless `--concurrency` says otherwise
/// (PERFORMANCE.md: chosen from the latency sweep).
pub const DEFAULT_CONCURRENCY: u16 = 32;

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

/// Finds the prefixes under `root` per the discovery rule (module docs).
/// Returns the candidate prefixes (sorted); fails only if a listing fails.
pub async fn discover(
    store: &dyn ObjectRead,
    root: &str,
    opts: &GatherOptions,
) -> Result<Vec<String>, StoreError> {
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
            let listing = r?;
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
    Ok(shown)
}

/// Reads the LEASE of `prefix` ([`read_lease`]).
pub async fn observe(store: &dyn ObjectRead, prefix: &str) -> Result<Observed, StoreError> {
    read_lease(store, &lease_key(prefix), None).await
}

/// What a [`Gatherer`] remembers between refreshes of one target.
#[derive(Default, Clone)]
pub struct TargetCache {
    /// Prefixes found by the last listing.
    pub prefixes: Option<Vec<String>>,
    /// The last observation of each prefix's LEASE (for conditional GETs).
    pub observed: BTreeMap<String, Observed>,
}

/// Reads the LEASE of `prefix`, conditionally on the cached ETag when there is
/// one: a `304 Not Modified` reuses the cached observation.
async fn observe_cached(
    store: &dyn ObjectRead,
    prefix: &str,
    cached: Option<&Observed>,
) -> Result<Observed, StoreError> {
    read_lease(store, &lease_key(prefix), cached).await
}

/// Gathers one target: discovery, then every LEASE read concurrently.
pub async fn gather_target(
    t: &OpenTarget,
    opts: &GatherOptions,
    now: impl Fn() -> DateTime<Utc>,
) -> TargetReport {
    gather_target_cached(t, opts, now, &mut TargetCache::default(), true).await
}

/// [`gather_target`] with a cache: listing only when `relist` (or nothing is
/// cached), and conditional GETs for prefixes seen before.
pub async fn gather_target_cached(
    t: &OpenTarget,
    opts: &GatherOptions,
    now: impl Fn() -> DateTime<Utc>,
    cache: &mut TargetCache,
    relist: bool,
) -> TargetReport {
    let mut report = TargetReport {
        url: t.target.to_string(),
        endpoint: t.endpoint.clone(),
        bucket: t.target.bucket().map(str::to_owned),
        error: None,
        errors: Vec::new(),
        prefixes: Vec::new(),
        server_offset_s: None,
        server_offset_error_s: None,
    };
    let store = t.store.as_ref();
    let root = t.target.prefix().to_owned();
    let listed = match (&cache.prefixes, relist) {
        (Some(p), false) => Ok(p.clone()),
        _ => discover(store, &root, opts).await,
    };
    let mut candidates = match listed {
        Ok(c) => {
            cache.prefixes = Some(c.clone());
            c
        }
        Err(e) => {
            cache.prefixes = None;
            report.error = Some(format!("{}: {e}", store.describe()));
            return report;
        }
    };
    candidates.retain(|c| c != &root);
    let cached = &cache.observed;
    let root_what = format!("reading {} {}", store.describe(), lease_key(&root));
    let root_obs = timed(
        opts.request_timeout,
        &root_what,
        observe_cached(store, &root, cached.get(&root)),
    );
    let rows: Vec<(String, Result<Observed, StoreError>)> = stream::iter(candidates)
        .map(|p| async move {
            let what = format!("reading {} {}", store.describe(), lease_key(&p));
            let r = timed(
                opts.request_timeout,
                &what,
                observe_cached(store, &p, cached.get(&p)),
            )
            .await;
            (p, r)
        })
        .buffer_unordered(opts.concurrency.max(1))
        .collect()
        .await;
    let root_obs = root_obs.await;
    let now = now();
    let mut by_prefix: BTreeMap<String, PrefixReport> = BTreeMap::new();
    match root_obs {
        Ok(Observed::Absent) => {}
        Ok(obs) => {
            by_prefix.insert(root.clone(), PrefixReport::new(root.clone(), obs, now));
        }
        Err(e) => report.errors.push(PrefixError {
            prefix: root.clone(),
            error: e.to_string(),
        }),
    }
    for (p, r) in rows {
        match r {
            Ok(obs) => {
                by_prefix.insert(p.clone(), PrefixReport::new(p, obs, now));
            }
            Err(e) => report.errors.push(PrefixError {
                prefix: p,
                error: e.to_string(),
            }),
        }
    }
    // If the root itself failed for a reason other than a missing key while
    // nothing else was found, the target as a whole could not be gathered.
    if by_prefix.is_empty() && !report.errors.is_empty() && report.errors.len() == 1 {
        let e = report.errors.remove(0);
        report.error = Some(format!("{}: {}", store.describe(), e.error));
    }
    report.errors.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    cache.observed = by_prefix
        .iter()
        .map(|(p, r)| (p.clone(), r.observed.clone()))
        .collect();
    report.prefixes = by_prefix.into_values().collect();
    report
}

/// Gathers snapshots again and again, cheaply: the listing (discovery) runs
/// only every `relist_every` refreshes, and each LEASE is read with a
/// conditional GET on the ETag seen last (`304 Not Modified` costs no body).
pub struct Gatherer {
    targets: Vec<OpenTarget>,
    opts: GatherOptions,
    caches: Vec<TargetCache>,
    relist_every: u32,
    count: u32,
}

impl Gatherer {
    /// A gatherer over `targets`; listings every `relist_every` refreshes (at least 1).
    pub fn new(targets: Vec<OpenTarget>, opts: GatherOptions, relist_every: u32) -> Self {
        let caches = vec![TargetCache::default(); targets.len()];
        Self {
            targets,
            opts,
            caches,
            relist_every: relist_every.max(1),
            count: 0,
        }
    }

    /// How many refreshes pass between two listings.
    pub fn relist_every(&self) -> u32 {
        self.relist_every
    }

    /// One snapshot of every target, judged at one instant.
    pub async fn gather(&mut self, clock: &crate::clock::SharedClock) -> Snapshot {
        let relist = self.count.is_multiple_of(self.relist_every);
        self.count = self.count.wrapping_add(1);
        let opts = &self.opts;
        let reports = futures::future::join_all(
            self.targets
                .iter()
                .zip(self.caches.iter_mut())
                .map(|(t, cache)| gather_target_cached(t, opts, || clock.wall(), cache, relist)),
        )
        .await;
        let mut reports = reports;
        for (r, t) in reports.iter_mut().zip(&self.targets) {
            if let Some(o) = t.store.server_offset() {
                r.server_offset_s = Some(round_ms(o.against(clock.as_ref())));
                r.server_offset_error_s = Some(round_ms(o.error_s));
            }
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
    s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

fn ser_opt_ts<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_ts(t, s),
        None => s.serialize_none(),
    }
}
