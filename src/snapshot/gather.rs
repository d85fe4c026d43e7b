//! The gatherer: every LEASE of every target read (concurrently, bounded,
//! throttled by the service's answers) into one [`Snapshot`], judged at one
//! instant by the injected [`Clock`]; again and again, cheaply, with a
//! [`Gatherer`].

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::delta::{Delta, RowUpdate, TargetDelta};
use super::model::{round_ms, PrefixReport, ReaderClock, Snapshot, TargetReport, SCHEMA_VERSION};
use super::options::GatherOptions;
use super::schedule::{pick, rows_of, Focus, Plan, Schedule};
use super::target_read::{
    empty_report, gather_planned, report_from_cache, Changes, OpenTarget, Partial, TargetCache,
};

use crate::bucket::Observed;
use crate::clock::SharedClock;
use crate::writer::scan::PodSnapshot;

/// Requests per minute a console or `serve` sends at most once every LEASE
/// has been read, unless `--max-requests` says otherwise: at 10,000 prefixes
/// this keeps a read-only console under 1 % of a core (about 0.3 ms of CPU a
/// request on a loaded two-core machine: 6,000 a minute would cost ~3 %).
pub(crate) const DEFAULT_MAX_REQUESTS: u32 = 1200;

/// How far (seconds) either bound of a service's clock offset (the offset ±
/// its error) must move since the last snapshot to make a new one, every row
/// judged again by the reader-clock rule. The estimate is the intersection
/// of the answers' `Date` intervals ([`crate::clock::offset`]): its bounds
/// move as it narrows (a few times as answers at new phases come in), by the
/// drift bound's widening (microseconds a second), and at a clock step.
const OFFSET_NEWS_S: f64 = 0.05;

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
pub(crate) type ProgressSink<'a> = &'a (dyn Fn(Progress) + Sync);

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
    pub(crate) fn oldest_reading(&self) -> Option<DateTime<Utc>> {
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

    /// About how many bytes of heap this gatherer holds for its targets'
    /// rows: the listing, each reading (its prefix, record, ETag, error)
    /// and the bookkeeping around them, counted from their sizes and string
    /// lengths (allocator overhead left out). An estimate, for bounding a
    /// cache of gatherers by bytes (`serve`'s probe state).
    pub fn held_bytes(&self) -> usize {
        use std::mem::size_of;
        let string = |s: &String| size_of::<String>() + s.capacity();
        let mut n = size_of::<Self>()
            + self.targets.len() * (size_of::<OpenTarget>() + size_of::<TargetCache>());
        for c in &self.caches {
            n += c.known.iter().map(string).sum::<usize>();
            n += c
                .listing_errors
                .iter()
                .map(|e| string(&e.prefix) + string(&e.error))
                .sum::<usize>();
            for (p, e) in &c.entries {
                // A B-tree slot: key and value, plus a share of its node.
                n += string(p) + size_of::<super::schedule::Entry>() + 16;
                n += size_of::<Result<Observed, String>>();
                n += match &*e.result {
                    Ok(Observed::Present { etag, record, .. }) => {
                        etag.as_ref().map_or(0, |e| e.capacity())
                            + match record {
                                Ok(r) => r.instance_id.capacity(),
                                Err((why, raw)) => why.capacity() + raw.capacity(),
                            }
                    }
                    Ok(Observed::Absent) => 0,
                    Err(e) => e.capacity(),
                };
            }
        }
        n
    }

    /// Sets the time between two gathers of a [`Gatherer::schedule`]d
    /// gatherer whose gathers come when asked (a scrape's probe), with the
    /// listing's cadence: about 30 s, and at least every gather.
    pub fn set_refresh(&mut self, refresh: Duration) {
        let refresh = refresh.max(Duration::from_secs(1));
        self.relist_every = (30 / refresh.as_secs().max(1)).max(1) as u32;
        if let Some(s) = &mut self.schedule {
            s.refresh = refresh;
            s.relist = refresh * self.relist_every;
        }
    }

    /// One snapshot of every target, judged at one instant, gathered by
    /// `deadline` (tokio's clock; a timer, which waits on no request, ends
    /// the gather): a listing not finished by then fails its target, and a
    /// LEASE not read by then is an error of its row, never its last
    /// reading passed off as this one's. What was read by then is kept for
    /// the next gather (ETags for conditional GETs, the listing).
    pub async fn gather_by(
        &mut self,
        clock: &SharedClock,
        deadline: tokio::time::Instant,
    ) -> Snapshot {
        // Its length, for the messages of what it ended (to the millisecond).
        let length = deadline.saturating_duration_since(tokio::time::Instant::now());
        let length = Duration::from_millis(length.as_millis() as u64);
        match self
            .gather_inner(clock, None, true, false, Some((deadline, length)))
            .await
        {
            Refresh::Snapshot(s) => *s,
            Refresh::Rows(_) | Refresh::Unchanged => {
                unreachable!("a forced gather always gives a snapshot")
            }
        }
    }

    /// The rows in view, to be set by the console (read at every gather).
    pub fn focus(&self) -> Arc<Focus> {
        self.focus.clone()
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
        match self.gather_inner(clock, progress, force, false, None).await {
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
        self.gather_inner(clock, progress, false, true, None).await
    }

    async fn gather_inner(
        &mut self,
        clock: &SharedClock,
        progress: Option<ProgressSink<'_>>,
        force: bool,
        rows_alone: bool,
        deadline: Option<(tokio::time::Instant, Duration)>,
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
                        deadline,
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
    /// news since the last snapshot: a bound (offset ± error) moved by more
    /// than [`OFFSET_NEWS_S`], which can change the reader-clock rule's
    /// verdict on a row (an estimate of one answer per refresh wandered
    /// within a second, and rebuilt every row nearly every refresh; the
    /// intersection's bounds only move as it narrows).
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
                    (Some((a, ea)), Some((b, eb))) => {
                        ((a - ea) - (b - eb)).abs() > OFFSET_NEWS_S
                            || ((a + ea) - (b + eb)).abs() > OFFSET_NEWS_S
                    }
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
pub(super) fn service_clock(
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
