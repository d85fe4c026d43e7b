//! The gatherer: every LEASE of every target read (concurrently, bounded,
//! throttled by the service's answers) into one [`Snapshot`], judged at one
//! instant by the injected [`Clock`]; again and again, cheaply, with a
//! [`Gatherer`].

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::stream::{FuturesUnordered, StreamExt};

use super::delta::{Delta, RowUpdate, TargetDelta};
use super::discovery::discover_paged;
use super::model::{
    round_ms, PrefixError, PrefixReport, ReaderClock, Snapshot, TargetReport, SCHEMA_VERSION,
};
use super::options::{throttle_backoff, timed, GatherOptions, THROTTLE_RETRIES};
use super::schedule::{pick, rows_of, Entry, Focus, Plan, Schedule};
use crate::bucket::{lease_key, read_lease, Observed};
use crate::clock::{Clock, SharedClock};
use crate::store::{ObjectRead, StoreError};
use crate::target::Target;
use crate::writer::scan::PodSnapshot;

/// Requests per minute a console or `serve` sends at most once every LEASE
/// has been read, unless `--max-requests` says otherwise (PERFORMANCE.md: at
/// 10,000 prefixes this keeps a read-only console under 1 % of a core).
pub const DEFAULT_MAX_REQUESTS: u32 = 1200;

/// How far (seconds) a service's clock offset must move since the last
/// snapshot, beyond the two estimates' errors (half the round trip each),
/// to make a new one: the `Date` header's resolution.
const OFFSET_NEWS_S: f64 = 1.0;

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

/// Time between two progress reports of one gather (while fewer than
/// [`PROGRESS_ROWS_PER_STEP`] rows are read; twice as long up to twice that,
/// and so on).
pub const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// Rows read per step of the growing time between two progress reports.
pub const PROGRESS_ROWS_PER_STEP: usize = 2500;

/// Rows read when the first progress report goes, without waiting for
/// [`PROGRESS_EVERY`]: a screenful.
const FIRST_REPORT_ROWS: usize = 64;

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
        picked: None,
        picked_order: Vec::new(),
        focus: Default::default(),
        index: 0,
    };
    gather_planned(t, opts, &clock, cache, relist, &plan, None).await;
    report_from_cache(t, cache)
}

/// A wall clock given as a function (for [`gather_target_cached`]), as a
/// [`Clock`] whose monotonic reading stands still: without a [`Schedule`]
/// nothing is read by its due time.
struct FnClock<'a, F: Fn() -> DateTime<Utc> + Sync>(&'a F);

impl<F: Fn() -> DateTime<Utc> + Sync> Clock for FnClock<'_, F> {
    fn wall(&self) -> DateTime<Utc> {
        (self.0)()
    }
    fn mono(&self) -> Duration {
        Duration::ZERO
    }
}

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

/// Where one target's partial reports go: (target index, report, LEASEs
/// read, prefixes known, listing complete).
type TargetProgress<'a> = &'a (dyn Fn(usize, TargetReport, usize, usize, bool) + Sync);

/// One gather of one target under `plan` (see [`Gatherer`]): the listing (or
/// the cached one) and the reads run together, prefixes flowing from the one
/// to the other as pages arrive; then the cache takes what was read. Returns
/// what the report shows that changed, and how many requests were sent
/// (LEASE reads, retries included, and listing pages).
async fn gather_planned(
    t: &OpenTarget,
    opts: &GatherOptions,
    clock: &dyn Clock,
    cache: &mut TargetCache,
    relist: bool,
    plan: &Plan,
    progress: Option<TargetProgress<'_>>,
) -> (Changes, usize) {
    let store = t.store.as_ref();
    let root = t.target.prefix().to_owned();
    // A store known to be gone (a local directory moved away) fails this
    // gather as a listing would, whatever is scheduled to be read.
    if let Some(e) = store.unavailable() {
        return (
            Changes::whole(cache_failure(cache, format!("{}: {e}", store.describe()))),
            0,
        );
    }

    // Prefixes to read arrive from the listing (page by page) or the cache.
    let (found_tx, found_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<String>>();
    // Without a new listing the rows are the cached ones, unchanged: the
    // reads the plan wants are queued at once, and nothing is rebuilt
    // (`Ok(None)`: the listing stands).
    let reuse = !relist && cache.prefixes.is_some();
    let initial = reuse.then(|| {
        let mono = clock.mono();
        match &plan.picked {
            Some(_) => plan.picked_order.clone(),
            None => cache
                .known
                .iter()
                .filter(|p| plan.wants(p, cache.entries.get(*p), mono))
                .cloned()
                .collect(),
        }
    });
    let mut pages = 0usize;
    let listing = async {
        if reuse {
            drop(found_tx);
            return Ok(None);
        }
        let mut send = |v: Vec<String>| {
            pages += 1;
            let _ = found_tx.send(v);
        };
        let r = discover_paged(store, &root, opts, &mut send).await;
        // A listing deeper than one level sends once: count its pages.
        if opts.depth != 1 {
            pages = r.as_ref().map_or(1, |(p, _)| p.len() / 1000 + 1);
        }
        drop(found_tx);
        r.map(Some)
    };
    let max = opts.concurrency.max(1);
    let mut reads = Reads {
        t,
        opts,
        clock,
        plan,
        root: &root,
        cached: &cache.entries,
        limit: cache.limit.unwrap_or(max).clamp(1, max),
        max,
        results: Vec::new(),
        known: vec![root.clone()],
        sent: 0,
    };
    let (listed, ()) = tokio::join!(listing, reads.run(found_rx, initial, progress));
    let Reads {
        limit,
        results,
        known,
        sent,
        ..
    } = reads;
    cache.limit = Some(limit);
    let changed = match listed {
        Ok(Some(listing)) => cache_reads(cache, plan, Some((listing, known)), results),
        Ok(None) => cache_reads(cache, plan, None, results),
        Err(e) => Changes::whole(cache_failure(cache, format!("{}: {e}", store.describe()))),
    };
    (changed, sent + pages)
}

/// What one gather of one target changed in what its report shows.
#[derive(Debug, Default)]
struct Changes {
    /// More than rows: the listing, what it could not discover, the
    /// target's own error, prefixes forgotten. Only a whole report shows it.
    whole: bool,
    /// Prefixes whose reading changed (each once).
    rows: Vec<String>,
}

impl Changes {
    fn whole(changed: bool) -> Self {
        Self {
            whole: changed,
            rows: Vec::new(),
        }
    }

    fn any(&self) -> bool {
        self.whole || !self.rows.is_empty()
    }
}

/// Records in `cache` that the target could not be gathered (`error`, a
/// sentence naming the store). Returns whether that is news.
fn cache_failure(cache: &mut TargetCache, error: String) -> bool {
    let changed = cache.error.as_deref() != Some(error.as_str());
    cache.prefixes = None;
    cache.error = Some(error);
    changed
}

/// A listing's prefixes and what it could not discover.
type Listed = (Vec<String>, Vec<PrefixError>);

/// Keeps in `cache` what one gather found: the new listing if there was one
/// (`listed`: the prefixes, what it could not discover, and the rows
/// `known`; `None`: the cached one stands), and each LEASE read with when it
/// is due again; forgets prefixes no longer listed. Returns what the report
/// shows that changed.
fn cache_reads(
    cache: &mut TargetCache,
    plan: &Plan,
    listed: Option<(Listed, Vec<String>)>,
    results: Vec<Read>,
) -> Changes {
    let mut changed = cache.error.take().is_some();
    if let Some(((listed, listing_errors), known)) = listed {
        changed |= cache.prefixes.as_ref() != Some(&listed)
            || cache.listing_errors != listing_errors
            || cache.known.is_empty();
        cache.prefixes = Some(listed);
        cache.listing_errors = listing_errors;
        // Keep what was read, for the next gather; forget prefixes no longer listed.
        let keep: HashSet<&String> = known.iter().collect();
        let before = cache.entries.len();
        cache.entries.retain(|p, _| keep.contains(p));
        changed |= cache.entries.len() != before;
        cache.known = known;
    }
    let mut rows = Vec::new();
    for Read {
        prefix: p,
        result,
        wall,
        mono,
    } in results
    {
        let result = result.map_err(|e| e.to_string());
        let (due, near_expiry) = match plan.schedule {
            Some(s) => s.next_due(&result, wall, mono),
            None => (Duration::ZERO, false),
        };
        if cache
            .entries
            .get(&p)
            .is_none_or(|old| !same_reading(&old.result, &result))
        {
            rows.push(p.clone());
        }
        cache.entries.insert(
            p,
            Entry {
                result: Box::new(result),
                read_at: wall,
                read_mono: mono,
                due,
                near_expiry,
            },
        );
    }
    // A prefix read twice in one gather (a throttled read given up, then
    // read again) is named once.
    rows.sort_unstable();
    rows.dedup();
    Changes {
        whole: changed,
        rows,
    }
}

/// The LEASE reads of one gather of one target: what to read, how many at
/// once, and what was read so far.
struct Reads<'a> {
    t: &'a OpenTarget,
    opts: &'a GatherOptions,
    clock: &'a dyn Clock,
    plan: &'a Plan,
    /// The target's own prefix.
    root: &'a str,
    /// The previous gather's readings (for conditional GETs and the plan).
    cached: &'a BTreeMap<String, Entry>,
    /// Requests in flight allowed now (halved on `SlowDown`, raised again one
    /// at a time, at most `max`).
    limit: usize,
    max: usize,
    /// Reads done, throttled ones given up included.
    results: Vec<Read>,
    /// The root, then every prefix the listing gave so far.
    known: Vec<String>,
    /// Requests sent (retries included).
    sent: usize,
}

impl Reads<'_> {
    /// Reads every LEASE the plan wants, the root's first, then each listed
    /// prefix's as `found` names it, at most `limit` at once; a throttled
    /// read is sent again after a back-off, with half as many in flight.
    /// Reports the rows read so far to `progress` every [`PROGRESS_EVERY`].
    async fn run(
        &mut self,
        mut found: tokio::sync::mpsc::UnboundedReceiver<Vec<String>>,
        initial: Option<Vec<String>>,
        progress: Option<TargetProgress<'_>>,
    ) {
        let (store, opts, cached) = (self.t.store.as_ref(), self.opts, self.cached);
        let mut queue: VecDeque<(String, u32)> = VecDeque::new();
        // `initial`: the reads of a gather on the cached listing, root
        // included; nothing comes from `found`.
        let mut listed = initial.is_some();
        match initial {
            Some(v) => queue.extend(v.into_iter().map(|p| (p, 0))),
            None => {
                if self
                    .plan
                    .wants(self.root, cached.get(self.root), self.clock.mono())
                {
                    queue.push_back((self.root.to_owned(), 0));
                }
            }
        }
        let mut inflight = FuturesUnordered::new();
        let mut successes = 0usize;
        let mut last_progress = std::time::Instant::now();
        let mut reported = false;
        let read = |p: String, tries: u32| {
            let cached = cached.get(&p).and_then(|e| (*e.result).as_ref().ok());
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
            while inflight.len() < self.limit {
                let Some((p, tries)) = queue.pop_front() else {
                    break;
                };
                self.sent += 1;
                inflight.push(read(p, tries));
            }
            tokio::select! {
                biased;
                more = found.recv(), if !listed => match more {
                    Some(v) => self.found(v, &mut queue),
                    None => listed = true,
                },
                done = inflight.next(), if !inflight.is_empty() => {
                    let Some((p, tries, r)) = done else { continue };
                    self.done(p, tries, r, &mut queue, &mut successes);
                    if let Some(report) = progress {
                        // The first screenful at once; then every
                            // PROGRESS_EVERY, spaced out as rows pile up (each
                            // report holds every row read so far: evenly
                            // spaced, their cost would grow with the square
                            // of the rows).
                            let n = self.results.len();
                            let every = PROGRESS_EVERY * (1 + (n / PROGRESS_ROWS_PER_STEP) as u32);
                            let first_screen = !reported && n >= FIRST_REPORT_ROWS;
                            if first_screen || last_progress.elapsed() >= every {
                            reported = true;
                            last_progress = std::time::Instant::now();
                            self.report(report, listed);
                        }
                    }
                },
                else => break,
            }
        }
    }

    /// Prefixes the listing found: known rows, queued when the plan wants them.
    fn found(&mut self, prefixes: Vec<String>, queue: &mut VecDeque<(String, u32)>) {
        let mono = self.clock.mono();
        for p in prefixes {
            if p == self.root {
                continue;
            }
            if self.plan.wants(&p, self.cached.get(&p), mono) {
                queue.push_back((p.clone(), 0));
            }
            self.known.push(p);
        }
    }

    /// One read answered (`tries` retries in): a throttled one is queued again
    /// and halves the limit; others are kept, and `limit` successes in a row
    /// raise the limit by one.
    fn done(
        &mut self,
        p: String,
        tries: u32,
        r: Result<Observed, StoreError>,
        queue: &mut VecDeque<(String, u32)>,
        successes: &mut usize,
    ) {
        match r {
            Err(e) if e.is_throttle() && tries < THROTTLE_RETRIES => {
                // The service asks to slow down: half as many at
                // once, and this one again after a back-off.
                self.limit = (self.limit / 2).max(1);
                *successes = 0;
                queue.push_back((p, tries + 1));
            }
            r => {
                if r.is_ok() {
                    *successes += 1;
                    if *successes >= self.limit && self.limit < self.max {
                        self.limit += 1;
                        *successes = 0;
                    }
                }
                self.results.push(Read {
                    prefix: p,
                    result: r,
                    wall: self.clock.wall(),
                    mono: self.clock.mono(),
                });
            }
        }
    }

    /// Sends the rows read so far, with the cached others, to `report`.
    fn report(&self, report: TargetProgress<'_>, listed: bool) {
        let partial = assemble(
            self.t,
            self.root,
            self.cached,
            &self.results,
            &self.known,
            &[],
            true,
            true,
        );
        report(
            self.plan.index,
            partial,
            self.results.len(),
            self.known.len(),
            listed,
        );
    }
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
                rows.insert(p, ((*e.result).as_ref().map_err(|s| s.clone()), e.read_at));
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
/// others at the relist cadence (`Schedule::next_due`). Rows not read in a
/// gather keep their last reading, judged again at the gather's instant.
pub struct Gatherer {
    targets: Vec<OpenTarget>,
    opts: GatherOptions,
    caches: Vec<TargetCache>,
    relist_every: u32,
    count: u32,
    schedule: Option<Schedule>,
    focus: Arc<Focus>,
    /// Each service's clock offset and its error (seconds) in the last
    /// snapshot returned.
    offsets: Vec<Option<(f64, f64)>>,
    /// No snapshot returned yet.
    first: bool,
    /// Requests the budget allows now (may be negative: a listing overdrew
    /// it), and when it was last topped up (monotonic).
    tokens: f64,
    tokens_at: Option<Duration>,
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
            tokens: 0.0,
            tokens_at: None,
        }
    }

    /// Reads each LEASE by need, for gathers `refresh` apart (the listing's
    /// cadence is `refresh × relist_every`).
    pub fn schedule(mut self, refresh: Duration) -> Self {
        self.schedule = Some(Schedule {
            refresh,
            relist: refresh * self.relist_every,
            budget: self.schedule.and_then(|s| s.budget),
        });
        self
    }

    /// Sends at most `per_min` requests a minute once the first gather has
    /// read every LEASE (see [`Schedule::budget`]); with [`Gatherer::schedule`].
    /// What is due beyond it waits, the most pressing first: rows in view,
    /// fresh leases at their expiry, rows never read, then the others round
    /// robin (oldest reading first). `per_min` is at least 1.
    pub fn budget(mut self, per_min: u32) -> Self {
        if let Some(s) = &mut self.schedule {
            s.budget = Some(per_min.max(1));
        }
        self
    }

    /// When the oldest reading of any row was taken (reader's wall clock):
    /// how stale the budget lets the table become. `None` before any read.
    pub fn oldest_reading(&self) -> Option<DateTime<Utc>> {
        self.caches
            .iter()
            .flat_map(|c| c.entries.values())
            .map(|e| e.read_at)
            .min()
    }

    /// Under a budget, the reads of each target this gather makes (most
    /// pressing first; see [`Gatherer::budget`]); `None` without one, and
    /// for the first gather. Tops up the budget for the time since the last
    /// gather, holding at most one refresh's worth, and sets aside the
    /// pages of a listing when `relist`.
    fn plan_budget(
        &mut self,
        clock: &SharedClock,
        relist: bool,
        focus: &[HashSet<String>],
    ) -> Option<Vec<Vec<String>>> {
        let s = self.schedule?;
        let per_min = s.budget?;
        if self.first {
            return None;
        }
        let now = clock.mono();
        let rate = f64::from(per_min) / 60.0;
        let cap = (rate * s.refresh.as_secs_f64()).max(1.0);
        let since = self
            .tokens_at
            .map_or(s.refresh, |t| now.saturating_sub(t))
            .as_secs_f64();
        self.tokens = (self.tokens + rate * since).min(cap);
        self.tokens_at = Some(now);
        let mut allowance = self.tokens.max(0.0).floor() as usize;
        if relist {
            let pages: usize = self.caches.iter().map(|c| c.known.len() / 1000 + 1).sum();
            allowance = allowance.saturating_sub(pages);
        }
        // One pick over every target, so the budget goes where it is most
        // needed whichever target that is.
        let mut all: Vec<(super::schedule::Priority, usize, usize, &str)> = Vec::new();
        for (i, c) in self.caches.iter().enumerate() {
            let in_view = focus[i]
                .iter()
                .filter_map(|p| c.entries.get_key_value(p))
                .map(|(p, e)| (p.as_str(), e));
            let picked = pick(
                rows_of(&c.known, &c.entries),
                in_view,
                &focus[i],
                now,
                allowance,
            );
            all.extend(
                picked
                    .into_iter()
                    .enumerate()
                    .map(|(rank, (p, why))| (why, rank, i, p)),
            );
        }
        if all.len() > allowance {
            all.sort_unstable_by_key(|(why, rank, i, _)| (*why, *rank, *i));
            all.truncate(allowance);
        }
        let mut out = vec![Vec::new(); self.caches.len()];
        for (_, _, i, p) in all {
            out[i].push(p.to_owned());
        }
        Some(out)
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
    pub async fn gather(&mut self, clock: &SharedClock) -> Snapshot {
        self.gather_with_progress(clock, None).await
    }

    /// [`Gatherer::gather`], reporting the rows read so far to `progress`
    /// every [`PROGRESS_EVERY`] while it runs (the first gather only: the
    /// one that reads everything).
    pub async fn gather_with_progress(
        &mut self,
        clock: &SharedClock,
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
        clock: &SharedClock,
        progress: Option<ProgressSink<'_>>,
        force: bool,
    ) -> Option<Snapshot> {
        match self.gather_inner(clock, progress, force, false).await {
            Refresh::Snapshot(s) => Some(*s),
            Refresh::Rows(_) | Refresh::Unchanged => None,
        }
    }

    /// [`Gatherer::gather_changed`] for a console that keeps the last
    /// snapshot: when only rows changed (no listing, target error or clock
    /// offset news), their new readings alone ([`Refresh::Rows`], to apply
    /// with [`Snapshot::apply_delta`]), so a refresh that read a hundred of
    /// 10,000 rows costs a hundred rows.
    pub async fn gather_refresh(
        &mut self,
        clock: &SharedClock,
        progress: Option<ProgressSink<'_>>,
    ) -> Refresh {
        self.gather_inner(clock, progress, false, true).await
    }

    async fn gather_inner(
        &mut self,
        clock: &SharedClock,
        progress: Option<ProgressSink<'_>>,
        force: bool,
        rows_alone: bool,
    ) -> Refresh {
        let relist = self.count.is_multiple_of(self.relist_every);
        // Rows are reported as they arrive only until the first snapshot:
        // later gathers read few rows, and a report would cost a whole
        // snapshot of every row.
        let first = self.first;
        self.count = self.count.wrapping_add(1);
        let focus = self.focus.snapshot();
        let n = self.targets.len();
        let focus: Vec<HashSet<String>> = (0..n)
            .map(|index| {
                focus
                    .iter()
                    .filter(|(t, _)| *t == index)
                    .map(|(_, p)| p.clone())
                    .collect()
            })
            .collect();
        let mut picks = self.plan_budget(clock, relist, &focus);
        let budgeted = picks.is_some();
        let opts = &self.opts;
        // Partial reports of each target, combined for `progress`.
        let partials: std::sync::Mutex<Vec<Option<Partial>>> = std::sync::Mutex::new(vec![None; n]);
        let targets = &self.targets;
        let on_target = |i: usize, r: TargetReport, read: usize, known: usize, listed: bool| {
            let Some(sink) = progress else { return };
            let Some(p) = combine_partials(&partials, i, (r, read, known, listed), targets, clock)
            else {
                return;
            };
            sink(p);
        };
        let on_target: &(dyn Fn(usize, TargetReport, usize, usize, bool) + Sync) = &on_target;
        let changed = futures::future::join_all(
            self.targets
                .iter()
                .zip(self.caches.iter_mut())
                .enumerate()
                .map(|(index, (t, cache))| {
                    let picked_order = picks.as_mut().map(|p| std::mem::take(&mut p[index]));
                    let plan = Plan {
                        schedule: self.schedule,
                        picked: picked_order.as_ref().map(|v| v.iter().cloned().collect()),
                        picked_order: picked_order.unwrap_or_default(),
                        focus: focus[index].clone(),
                        index,
                    };
                    async move {
                        gather_planned(
                            t,
                            opts,
                            clock.as_ref(),
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
        let sent: usize = changed.iter().map(|(_, n)| n).sum();
        if budgeted {
            self.tokens -= sent as f64;
        } else if self.first {
            // The budget starts after the first gather (which reads everything).
            self.tokens = 0.0;
            self.tokens_at = Some(clock.mono());
        }
        let (offsets, offsets_moved) = self.offsets_now(clock);
        let whole = force || self.first || offsets_moved || changed.iter().any(|(c, _)| c.whole);
        if !whole && !changed.iter().any(|(c, _)| c.any()) {
            return Refresh::Unchanged;
        }
        if rows_alone && !whole {
            if let Some(d) = self.delta(&changed, clock) {
                return Refresh::Rows(d);
            }
        }
        self.offsets = offsets;
        self.first = false;
        let reports = self
            .targets
            .iter()
            .zip(&self.caches)
            .map(|(t, c)| report_from_cache(t, c))
            .collect();
        Refresh::Snapshot(Box::new(finish(reports, &self.targets, clock)))
    }

    /// Each service's clock offset and its error now, and whether that is
    /// news since the last snapshot. Each answer's `Date` (whole seconds)
    /// gives a new estimate, which wanders within a second (plus its error)
    /// of the true offset: only a move of more than that is news (at 0.1 s,
    /// nearly every refresh on S3 rebuilt every row).
    fn offsets_now(&self, clock: &SharedClock) -> (Vec<Option<(f64, f64)>>, bool) {
        let offsets: Vec<Option<(f64, f64)>> = self
            .targets
            .iter()
            .map(|t| {
                t.store
                    .server_offset()
                    .map(|o| (o.against(clock.as_ref()), o.error_s))
            })
            .collect();
        let moved = offsets.len() != self.offsets.len()
            || offsets
                .iter()
                .zip(&self.offsets)
                .any(|(a, b)| match (a, b) {
                    (Some((a, ea)), Some((b, eb))) => (a - b).abs() > OFFSET_NEWS_S + ea + eb,
                    (a, b) => a.is_some() != b.is_some(),
                });
        (offsets, moved)
    }

    /// The changed rows as a [`Delta`], judged now; `None` when a whole
    /// report must go instead: a target's own prefix changed (it decides
    /// whether the target failed as a whole) or a row shares its prefix with
    /// a listing error (both are rows of `errors`).
    fn delta(&self, changed: &[(Changes, usize)], clock: &SharedClock) -> Option<Delta> {
        let mut targets = Vec::new();
        for (index, ((c, _), (t, cache))) in changed
            .iter()
            .zip(self.targets.iter().zip(&self.caches))
            .enumerate()
        {
            if c.rows.is_empty() {
                continue;
            }
            let root = t.target.prefix();
            let mut rows = Vec::with_capacity(c.rows.len());
            for p in &c.rows {
                if p == root || cache.listing_errors.iter().any(|e| &e.prefix == p) {
                    return None;
                }
                let e = cache.entries.get(p)?;
                rows.push((
                    p.clone(),
                    match &*e.result {
                        Ok(obs) => RowUpdate::Report(Box::new(PrefixReport::new(
                            p.clone(),
                            obs.clone(),
                            e.read_at,
                        ))),
                        Err(msg) => RowUpdate::Error(msg.clone()),
                    },
                ));
            }
            let (server_offset_s, server_offset_error_s, server_clock_note) =
                service_clock(t, clock);
            targets.push(TargetDelta {
                index,
                rows,
                server_offset_s,
                server_offset_error_s,
                server_clock_note,
            });
        }
        Some(Delta {
            generated_at: clock.wall(),
            targets,
        })
    }
}

/// What a console's refresh brings ([`Gatherer::gather_refresh`]).
#[derive(Debug)]
pub enum Refresh {
    /// A whole new snapshot.
    Snapshot(Box<Snapshot>),
    /// Only these rows changed.
    Rows(Delta),
    /// Nothing changed: the last snapshot, judged again, stands.
    Unchanged,
}

/// What a target's report says of its service's clock now: the offset and
/// its error (seconds, to the millisecond; `None` when unmeasured) and why it
/// is unknown, if it is.
fn service_clock(
    t: &OpenTarget,
    clock: &SharedClock,
) -> (Option<f64>, Option<f64>, Option<String>) {
    let o = t.store.server_offset();
    (
        o.map(|o| round_ms(o.against(clock.as_ref()))),
        o.map(|o| round_ms(o.error_s)),
        t.store.server_clock_problem(),
    )
}

/// The progress report of a gather of every target, once target `i` sent
/// `partial`: the partial reports so far (an empty one for a target not
/// heard from yet, whose listing is then not complete). `None` if the lock
/// was poisoned.
fn combine_partials(
    partials: &std::sync::Mutex<Vec<Option<Partial>>>,
    i: usize,
    partial: Partial,
    targets: &[OpenTarget],
    clock: &SharedClock,
) -> Option<Progress> {
    let (reports, read, known, listed) = {
        let mut g = partials.lock().ok()?;
        g[i] = Some(partial);
        let mut reports = Vec::with_capacity(targets.len());
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
    Some(Progress {
        snapshot: finish(reports, targets, clock),
        read,
        known,
        listed,
    })
}

/// A snapshot of `reports`, with each service's clock offset, judged now.
fn finish(mut reports: Vec<TargetReport>, targets: &[OpenTarget], clock: &SharedClock) -> Snapshot {
    for (r, t) in reports.iter_mut().zip(targets) {
        let (offset, error, note) = service_clock(t, clock);
        if offset.is_some() {
            r.server_offset_s = offset;
            r.server_offset_error_s = error;
        }
        r.server_clock_note = note;
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
        audit_log: None,
    };
    snap.rejudge(clock.wall());
    snap
}

/// Gathers every target concurrently into one snapshot, judged at one
/// instant (one listing, unconditional GETs: a [`Gatherer`] with no history).
pub async fn gather(targets: &[OpenTarget], opts: &GatherOptions, clock: &SharedClock) -> Snapshot {
    Gatherer::new(targets.to_vec(), opts.clone(), 1)
        .gather(clock)
        .await
}
