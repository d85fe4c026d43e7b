//! One target's gather: its listing (or the cached one) and its LEASE reads
//! run together, prefixes flowing from the one to the other as pages arrive,
//! conditional GETs on cached ETags, and the report assembled from the cache.
//! The [`super::Gatherer`] runs one of these per target.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::stream::{FuturesUnordered, StreamExt};

use super::discovery::discover_paged;
use super::model::{PrefixError, PrefixReport, TargetReport};
use super::options::{throttle_backoff, timed, GatherOptions, THROTTLE_RETRIES};
use super::schedule::{Entry, Plan};
use crate::bucket::{lease_key, read_lease, Observed};
use crate::clock::Clock;
use crate::store::{ObjectRead, StoreError};
use crate::target::Target;
use crate::text::sanitize;

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
pub(crate) struct TargetCache {
    /// A listing is cached: its rows are `known` (a failure forgets it).
    pub(super) listed: bool,
    /// What the last listing could not discover ([`discover`]'s errors).
    pub(super) listing_errors: Vec<PrefixError>,
    /// The target's own prefix, then the listed ones: the rows of its report.
    pub(super) known: Vec<String>,
    /// Why the last listing failed.
    pub(super) error: Option<String>,
    pub(super) entries: BTreeMap<String, Entry>,
    /// Requests in flight allowed now: lowered when the service asks to slow
    /// down, raised again one at a time as answers come back.
    pub(super) limit: Option<usize>,
}

/// Reads the LEASE of `prefix`, conditionally on the cached ETag when there is
/// one: a `304 Not Modified` reuses the cached observation.
pub(super) async fn observe_cached(
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
pub(crate) async fn gather_target_cached(
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
        deadline: None,
    };
    gather_planned(t, opts, &clock, cache, relist, &plan, None).await;
    report_from_cache(t, cache)
}

/// A wall clock given as a function (for [`gather_target_cached`]), as a
/// [`Clock`] whose monotonic reading stands still: without a [`Schedule`]
/// nothing is read by its due time.
pub(super) struct FnClock<'a, F: Fn() -> DateTime<Utc> + Sync>(&'a F);

impl<F: Fn() -> DateTime<Utc> + Sync> Clock for FnClock<'_, F> {
    fn wall(&self) -> DateTime<Utc> {
        (self.0)()
    }
    fn mono(&self) -> Duration {
        Duration::ZERO
    }
}

/// One LEASE read in a gather.
pub(super) struct Read {
    pub(super) prefix: String,
    pub(super) result: Result<Observed, StoreError>,
    /// When the answer came (reader's wall and monotonic clocks).
    pub(super) wall: DateTime<Utc>,
    pub(super) mono: Duration,
    /// Not read by the gather's deadline: due again at the next gather.
    pub(super) late: bool,
}

/// A target's latest progress: its partial report, LEASEs read, prefixes
/// known, listing complete.
pub(super) type Partial = (TargetReport, usize, usize, bool);

/// Where one target's partial reports go: (target index, report, LEASEs
/// read, prefixes known, listing complete).
pub(super) type TargetProgress<'a> = &'a (dyn Fn(usize, TargetReport, usize, usize, bool) + Sync);

/// One gather of one target under `plan` (see [`Gatherer`]): the listing (or
/// the cached one) and the reads run together, prefixes flowing from the one
/// to the other as pages arrive; then the cache takes what was read. Returns
/// what the report shows that changed, and how many requests were sent
/// (LEASE reads, retries included, and listing pages).
pub(super) async fn gather_planned(
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
    let reuse = !relist && cache.listed;
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
        let r = discover_paged(store, &root, opts, &mut send, true).await;
        // A listing deeper than one level sends once: count its pages.
        if opts.depth != 1 {
            pages = r.as_ref().map_or(1, |(p, _)| p.len() / 1000 + 1);
        }
        drop(found_tx);
        r.map(Some)
    };
    // Under a deadline, a listing not finished by then fails the target
    // (dropping it closes the channel: the reads stop waiting for pages).
    let listing = async {
        let Some((at, length)) = plan.deadline else {
            return listing.await;
        };
        match tokio::time::timeout_at(at, listing).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Timeout(
                length,
                format!(
                    "listing \"{}\": it did not finish within the deadline",
                    sanitize(&root)
                ),
            )),
        }
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
        queued: 0,
        stream: None,
        names: Names::default(),
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
pub(super) struct Changes {
    /// More than rows: the listing, what it could not discover, the
    /// target's own error, prefixes forgotten. Only a whole report shows it.
    pub(super) whole: bool,
    /// Prefixes whose reading changed (each once).
    pub(super) rows: Vec<String>,
}

impl Changes {
    pub(super) fn whole(changed: bool) -> Self {
        Self {
            whole: changed,
            rows: Vec::new(),
        }
    }

    pub(super) fn any(&self) -> bool {
        self.whole || !self.rows.is_empty()
    }
}

/// Records in `cache` that the target could not be gathered (`error`, a
/// sentence naming the store). Returns whether that is news.
pub(super) fn cache_failure(cache: &mut TargetCache, error: String) -> bool {
    let changed = cache.error.as_deref() != Some(error.as_str());
    cache.listed = false;
    cache.error = Some(error);
    changed
}

/// Keeps in `cache` what one gather found: the new listing if there was one
/// (`listed`: the prefixes, what it could not discover, and the rows
/// `known`; `None`: the cached one stands), and each LEASE read with when it
/// is due again; forgets prefixes no longer listed. Returns what the report
/// shows that changed.
pub(super) fn cache_reads(
    cache: &mut TargetCache,
    plan: &Plan,
    listed: Option<(Listed, Vec<String>)>,
    results: Vec<Read>,
) -> Changes {
    let mut changed = cache.error.take().is_some();
    if let Some(((_, listing_errors), known)) = listed {
        // `known` is the root, then the listing's prefixes as they came:
        // the same listing gives the same rows.
        changed |= !cache.listed
            || cache.known != known
            || cache.listing_errors != listing_errors
            || cache.known.is_empty();
        cache.listed = true;
        cache.listing_errors = listing_errors;
        let mut known = known;
        // Grown by doubling as the pages came: up to half of it spare.
        known.shrink_to_fit();
        // Keep what was read, for the next gather; forget prefixes no longer listed.
        let keep: HashSet<&String> = known.iter().collect();
        let before = cache.entries.len();
        cache.entries.retain(|p, _| keep.contains(p));
        changed |= cache.entries.len() != before;
        cache.known = known;
    }
    let mut rows = Vec::new();
    let before = cache.entries.len();
    for Read {
        prefix: p,
        result,
        wall,
        mono,
        late,
    } in results
    {
        let result = result.map_err(|e| e.to_string());
        let (due, near_expiry) = match plan.schedule {
            Some(_) if late => (mono, false),
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
    super::history::compact_grown(&mut cache.entries, before);
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
pub(super) struct Reads<'a> {
    pub(super) t: &'a OpenTarget,
    pub(super) opts: &'a GatherOptions,
    pub(super) clock: &'a dyn Clock,
    pub(super) plan: &'a Plan,
    /// The target's own prefix.
    pub(super) root: &'a str,
    /// The previous gather's readings (for conditional GETs and the plan).
    pub(super) cached: &'a BTreeMap<String, Entry>,
    /// Requests in flight allowed now (halved on `SlowDown`, raised again one
    /// at a time, at most `max`).
    pub(super) limit: usize,
    pub(super) max: usize,
    /// Reads done, throttled ones given up included.
    pub(super) results: Vec<Read>,
    /// The root, then every prefix the listing gave so far.
    pub(super) known: Vec<String>,
    /// Requests sent (retries included).
    pub(super) sent: usize,
    /// Reads queued so far (each read's place in the order).
    pub(super) queued: u64,
    /// A streamed gather's reads, handed on in the order they were queued
    /// instead of kept in `results` (and no `known`).
    pub(super) stream: Option<Ordered<'a>>,
    /// Every prefix queued, once: a listing may repeat one (a service that
    /// gives the same page again under a new token), and it is read once.
    pub(super) names: Names,
}

/// A streamed gather's reads ([`Reads::stream`]): each handed to `sink` in
/// the order it was queued (the root's first, then the listing's), holding
/// only those that came back before an earlier one.
pub(super) struct Ordered<'a> {
    sink: &'a mut (dyn FnMut(Read) + Send),
    next: u64,
    pending: BTreeMap<u64, Read>,
    /// A listing page arrived: until then the root's read waits (a listing
    /// that fails at once makes the target's error alone, as in a gather
    /// that keeps its rows).
    listed: bool,
    /// The listing's pages not queued yet: taken a few at a time, so that
    /// a page's prefixes are held once, not again as queued reads.
    pages: VecDeque<std::vec::IntoIter<String>>,
}

impl<'a> Ordered<'a> {
    pub(super) fn new(sink: &'a mut (dyn FnMut(Read) + Send)) -> Self {
        Self {
            sink,
            next: 0,
            pending: BTreeMap::new(),
            listed: false,
            pages: VecDeque::new(),
        }
    }

    fn put(&mut self, seq: u64, read: Read) {
        self.pending.insert(seq, read);
        self.flush();
    }

    fn flush(&mut self) {
        while self.listed || self.next > 0 {
            let Some(r) = self.pending.remove(&self.next) else {
                break;
            };
            self.next += 1;
            (self.sink)(r);
        }
    }

    /// The reads held back once every read is done: handed on when the
    /// listing succeeded, dropped when it failed (the target's error says it).
    pub(super) fn finish(mut self, listing_ok: bool) {
        if listing_ok {
            self.listed = true;
            self.flush();
        }
    }
}

/// Prefixes seen, in little room: a listing's are ascending (S3 lists in
/// UTF-8 order, a local store sorts), so each is kept as bytes in one
/// string and found by binary search; one out of order is kept aside.
#[derive(Default)]
pub(super) struct Names {
    text: String,
    ends: Vec<u32>,
    aside: std::collections::BTreeSet<String>,
}

impl Names {
    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// Adds `p`; false when it was there already.
    fn insert(&mut self, p: &str) -> bool {
        let n = self.ends.len();
        let room = u32::try_from(self.text.len() + p.len()).is_ok();
        if room && (n == 0 || p > self.get(n - 1)) {
            self.text.push_str(p);
            self.ends.push(self.text.len() as u32);
            return true;
        }
        let mut found = false;
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).cmp(p) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    found = true;
                    break;
                }
            }
        }
        !found && self.aside.insert(p.to_owned())
    }
}

impl Reads<'_> {
    /// Reads every LEASE the plan wants, the root's first, then each listed
    /// prefix's as `found` names it, at most `limit` at once; a throttled
    /// read is sent again after a back-off, with half as many in flight.
    /// Reports the rows read so far to `progress` every [`PROGRESS_EVERY`].
    pub(super) async fn run(
        &mut self,
        mut found: tokio::sync::mpsc::UnboundedReceiver<Vec<String>>,
        initial: Option<Vec<String>>,
        progress: Option<TargetProgress<'_>>,
    ) {
        let (store, opts, cached) = (self.t.store.as_ref(), self.opts, self.cached);
        let mut queue: VecDeque<(String, u32, u64)> = VecDeque::new();
        // `initial`: the reads of a gather on the cached listing, root
        // included; nothing comes from `found`.
        let mut listed = initial.is_some();
        match initial {
            Some(v) => {
                for p in v {
                    self.enqueue(p, &mut queue);
                }
            }
            None => {
                if self
                    .plan
                    .wants(self.root, cached.get(self.root), self.clock.mono())
                {
                    self.names.insert(self.root);
                    self.enqueue(self.root.to_owned(), &mut queue);
                }
            }
        }
        let mut inflight = FuturesUnordered::new();
        // The prefixes in flight, by their place in the order: what a
        // deadline leaves unread.
        let mut flying: BTreeMap<u64, String> = BTreeMap::new();
        let deadline = self.plan.deadline;
        let expired = async move {
            match deadline {
                Some((at, _)) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(expired);
        let mut successes = 0usize;
        let mut last_progress = std::time::Instant::now();
        let mut reported = false;
        let read = |p: String, tries: u32, seq: u64| {
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
                (p, tries, seq, r)
            }
        };
        loop {
            self.refill(&mut queue);
            while inflight.len() < self.limit {
                let Some((p, tries, seq)) = queue.pop_front() else {
                    break;
                };
                self.sent += 1;
                flying.insert(seq, p.clone());
                inflight.push(read(p, tries, seq));
            }
            tokio::select! {
                biased;
                () = &mut expired, if !listed || !inflight.is_empty() => {
                    // What the listing sent and was not taken yet is queued
                    // first, so that every row it named is accounted for.
                    while let Ok(v) = found.try_recv() {
                        self.found(v, &mut queue);
                    }
                    let unread = flying.into_values().chain(queue.drain(..).map(|(p, _, _)| p));
                    self.not_in_time(unread, deadline.map_or(Duration::ZERO, |(_, l)| l));
                    break;
                }
                more = found.recv(), if !listed => match more {
                    Some(v) => self.found(v, &mut queue),
                    None => listed = true,
                },
                done = inflight.next(), if !inflight.is_empty() => {
                    let Some((p, tries, seq, r)) = done else { continue };
                    flying.remove(&seq);
                    self.done(p, tries, seq, r, &mut queue, &mut successes);
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

    /// The LEASEs of `prefixes` were not read by the gather's deadline
    /// (`length` after it began): each is an error of its row, the reading
    /// of this gather, so that no earlier reading is shown as this one's.
    fn not_in_time(&mut self, prefixes: impl Iterator<Item = String>, length: Duration) {
        let store = self.t.store.describe();
        for p in prefixes {
            let what = format!(
                "reading {store} {}: no answer within the deadline",
                lease_key(&p)
            );
            self.results.push(Read {
                prefix: p,
                result: Err(StoreError::Timeout(length, what)),
                wall: self.clock.wall(),
                mono: self.clock.mono(),
                late: true,
            });
        }
    }

    /// A streamed gather: queues reads from the listing's pages while the
    /// queue is short (each prefix once).
    fn refill(&mut self, queue: &mut VecDeque<(String, u32, u64)>) {
        let Some(o) = &mut self.stream else { return };
        let mut next = Vec::new();
        while queue.len() + next.len() < 4 * self.max {
            let Some(page) = o.pages.front_mut() else {
                break;
            };
            match page.next() {
                Some(p) => {
                    if self.names.insert(&p) {
                        next.push(p);
                    }
                }
                None => {
                    o.pages.pop_front();
                }
            }
        }
        for p in next {
            self.enqueue(p, queue);
        }
    }

    /// Queues a read of `p`'s LEASE, next in the order.
    fn enqueue(&mut self, p: String, queue: &mut VecDeque<(String, u32, u64)>) {
        queue.push_back((p, 0, self.queued));
        self.queued += 1;
    }

    /// Prefixes the listing found: known rows, queued when the plan wants
    /// them (a streamed gather: each once, and not kept).
    pub(super) fn found(
        &mut self,
        prefixes: Vec<String>,
        queue: &mut VecDeque<(String, u32, u64)>,
    ) {
        let mono = self.clock.mono();
        if let Some(o) = &mut self.stream {
            o.listed = true;
            o.flush();
            let mut page = prefixes;
            page.retain(|p| p != self.root);
            o.pages.push_back(page.into_iter());
            return self.refill(queue);
        }
        for p in prefixes {
            if p == self.root || !self.names.insert(&p) {
                continue;
            }
            if self.plan.wants(&p, self.cached.get(&p), mono) {
                self.enqueue(p.clone(), queue);
            }
            self.known.push(p);
        }
    }

    /// One read answered (`tries` retries in): a throttled one is queued again
    /// and halves the limit; others are kept, and `limit` successes in a row
    /// raise the limit by one.
    pub(super) fn done(
        &mut self,
        p: String,
        tries: u32,
        seq: u64,
        r: Result<Observed, StoreError>,
        queue: &mut VecDeque<(String, u32, u64)>,
        successes: &mut usize,
    ) {
        match r {
            Err(e) if e.is_throttle() && tries < THROTTLE_RETRIES => {
                // The service asks to slow down: half as many at
                // once, and this one again after a back-off.
                self.limit = (self.limit / 2).max(1);
                *successes = 0;
                queue.push_back((p, tries + 1, seq));
            }
            r => {
                if r.is_ok() {
                    *successes += 1;
                    if *successes >= self.limit && self.limit < self.max {
                        self.limit += 1;
                        *successes = 0;
                    }
                }
                let read = Read {
                    prefix: p,
                    result: r,
                    wall: self.clock.wall(),
                    mono: self.clock.mono(),
                    late: false,
                };
                match &mut self.stream {
                    Some(o) => o.put(seq, read),
                    None => self.results.push(read),
                }
            }
        }
    }

    /// Sends the rows read so far, with the cached others, to `report`.
    pub(super) fn report(&self, report: TargetProgress<'_>, listed: bool) {
        let partial = assemble(
            self.t,
            ReportParts {
                root: self.root,
                cached: self.cached,
                fresh: &self.results,
                known: &self.known,
                listing_errors: &[],
                include_cached: true,
                partial: true,
            },
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
pub(super) fn same_reading(a: &Result<Observed, String>, b: &Result<Observed, String>) -> bool {
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
pub(super) fn report_from_cache(t: &OpenTarget, cache: &TargetCache) -> TargetReport {
    if let Some(e) = &cache.error {
        let mut report = empty_report(t);
        report.error = Some(e.clone());
        return report;
    }
    assemble(
        t,
        ReportParts {
            root: t.target.prefix(),
            cached: &cache.entries,
            fresh: &[],
            known: &cache.known,
            listing_errors: &cache.listing_errors,
            include_cached: true,
            partial: false,
        },
    )
}

pub(super) fn empty_report(t: &OpenTarget) -> TargetReport {
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
        deeper_leases: None,
    }
}

/// What one target's report is made of (see [`assemble`]).
pub(super) struct ReportParts<'a> {
    /// The target's root prefix (its own LEASE).
    pub(super) root: &'a str,
    /// The rows read before, by prefix.
    pub(super) cached: &'a BTreeMap<String, Entry>,
    /// This gather's reads.
    pub(super) fresh: &'a [Read],
    /// Every prefix the listing found.
    pub(super) known: &'a [String],
    /// What the listing could not discover.
    pub(super) listing_errors: &'a [PrefixError],
    /// Rows not read this time are shown from the cache.
    pub(super) include_cached: bool,
    /// A report while the gather goes on: rows not read yet and never read
    /// before are left out instead of shown from nothing.
    pub(super) partial: bool,
}

/// The report of one target from this gather's reads and, for rows not read
/// this time, the cached ones (`partial`: rows not read yet and never read
/// before are left out instead of shown from nothing), with what the
/// listing could not discover (`listing_errors`).
pub(super) fn assemble(t: &OpenTarget, parts: ReportParts<'_>) -> TargetReport {
    let ReportParts {
        root,
        cached,
        fresh,
        known,
        listing_errors,
        include_cached,
        partial,
    } = parts;
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
    // Sized once: grown by doubling, a 10,000-row Vec held 16,384 rows' room.
    report.prefixes.reserve_exact(rows.len());
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

/// A listing's prefixes and what it could not discover.
pub(super) type Listed = (Vec<String>, Vec<PrefixError>);

/// Time between two progress reports of one gather (while fewer than
/// [`PROGRESS_ROWS_PER_STEP`] rows are read; twice as long up to twice that,
/// and so on).
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// Rows read per step of the growing time between two progress reports.
pub(crate) const PROGRESS_ROWS_PER_STEP: usize = 2500;

/// Rows read when the first progress report goes, without waiting for
/// [`PROGRESS_EVERY`]: a screenful.
pub(super) const FIRST_REPORT_ROWS: usize = 64;

#[cfg(test)]
mod tests {
    use super::Names;

    /// A streamed gather reads each listed prefix once: a repeat is found
    /// whether the listing was in order so far or not, and one out of order
    /// is still read.
    #[test]
    fn names_take_each_prefix_once_in_any_order() {
        let mut n = Names::default();
        for p in ["a/", "b/", "d/"] {
            assert!(n.insert(p), "{p}");
        }
        assert!(!n.insert("d/"));
        assert!(!n.insert("a/"));
        assert!(n.insert("c/"), "out of order, new");
        assert!(!n.insert("c/"));
        assert!(n.insert("e/"));
        assert!(!n.insert("b/"));
        assert!(n.insert(""));
        assert!(!n.insert(""));
    }
}
