//! What this process knows of each store's preconditions, kept for the rest
//! of the process: the acquire's race check, run once per store, and every
//! later finding that a write the store should have refused was carried out.
//! A store once caught is refused before anything is written: an acquire
//! that wrote its record first and removed it again would replace another
//! holder's record on a store that lets such writes through.

use super::*;

type Cell = Arc<tokio::sync::OnceCell<Arc<RaceReport>>>;

/// Why no lease on a store can exclude anyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broken {
    /// Concurrent conditional writes won together: the finding, as a sentence.
    NotAtomic(String),
    /// A write whose precondition should have been refused was carried out:
    /// the header it ignored.
    Ignores(&'static str),
}

/// What is known per store (by [`ObjectStore::describe`]).
#[derive(Default)]
struct Known {
    /// The race check, once.
    checked: BTreeMap<String, Cell>,
    /// The first finding that the store is broken.
    broken: BTreeMap<String, Broken>,
}

fn known() -> std::sync::MutexGuard<'static, Known> {
    static K: OnceLock<Mutex<Known>> = OnceLock::new();
    K.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Forgets what is known of every store whose name starts with `prefix`: the
/// simulator's worlds (`sim` feature) are new stores each run.
#[cfg(feature = "sim")]
pub fn forget(prefix: &str) {
    let mut k = known();
    k.checked.retain(|name, _| !name.starts_with(prefix));
    k.broken.retain(|name, _| !name.starts_with(prefix));
}

/// Remembers that `store` carried out a write it should have refused (the
/// first finding is kept): every later acquire on it in this process is
/// refused before it writes.
pub fn caught(store: &dyn ObjectStore, why: Broken) {
    let name = store.describe();
    tracing::error!("{}: no lease here can exclude anyone: {why:?}", name);
    known().broken.entry(name).or_insert(why);
}

/// The finding that `store` is broken, if this process has made one (its
/// race check included).
pub fn broken(store: &dyn ObjectStore) -> Option<Broken> {
    let k = known();
    let name = store.describe();
    if let Some(b) = k.broken.get(&name) {
        return Some(b.clone());
    }
    let report = k.checked.get(&name)?.get()?.clone();
    drop(k);
    report.broken()
}

/// How long after its write's answer an acquire on `store` reads its record
/// back to confirm it: six times the 90th percentile of the round-trip times
/// of the writes the race check saw carried out there after its first round
/// (whose answers wait on cold starts: a connection opened, a bucket's first
/// write), between
/// [`CONFIRM_AFTER_MIN`] and [`CONFIRM_AFTER_MAX`]; [`CONFIRM_AFTER_UNKNOWN`]
/// before any was measured. (A refusal lands nothing a confirmation must
/// see, and may be answered far later: SeaweedFS answers the losers of a
/// contended write about a second late.) A contender whose own
/// read-to-answer span is longer than [`seen_within`] goes the slow way
/// instead (see `bucket::lease::confirm`).
pub fn confirm_after(store: &dyn ObjectStore) -> Duration {
    let q90 = known()
        .checked
        .get(&store.describe())
        .and_then(|c| c.get())
        .and_then(|r| r.round_trip_q90_us);
    wait_for(q90)
}

/// The confirmation's wait for a 90th percentile of write round trips of
/// `q90_us` microseconds (`None`: not measured): six times it, between
/// [`CONFIRM_AFTER_MIN`] and [`CONFIRM_AFTER_MAX`]; [`CONFIRM_AFTER_UNKNOWN`]
/// when not measured. [`confirm_after`] applies it to the race check's final
/// measurement.
pub fn wait_for(q90_us: Option<u64>) -> Duration {
    match q90_us {
        Some(us) => {
            Duration::from_micros(us.saturating_mul(6)).clamp(CONFIRM_AFTER_MIN, CONFIRM_AFTER_MAX)
        }
        None => CONFIRM_AFTER_UNKNOWN,
    }
}

/// The shortest wait before the confirmation: every contender waits at least
/// this long, so a write whose span was no longer is seen by any of them.
/// Also the wait a write is judged by ([`seen_within`]) before the race
/// check that sizes it has ended: no final wait is shorter, so no write
/// judged able to count on being seen by it is judged otherwise later.
pub const CONFIRM_AFTER_MIN: Duration = Duration::from_millis(100);

/// The longest read-to-answer span with which a write counts on being seen
/// by every contender's confirmation: [`CONFIRM_AFTER_MIN`] (which every
/// contender waits at least), or half of `after` (this store's wait: a
/// contender whose round trips are within a factor of two of ours waits at
/// least that), whichever is longer.
pub fn seen_within(after: Duration) -> Duration {
    (after / 2).max(CONFIRM_AFTER_MIN)
}
/// The longest wait before the confirmation.
pub const CONFIRM_AFTER_MAX: Duration = Duration::from_secs(2);
/// The wait before the confirmation on a store whose round trips were never
/// measured.
pub(super) const CONFIRM_AFTER_UNKNOWN: Duration = Duration::from_millis(250);

/// The acquire path's race check: once per store per process, racing
/// [`ACQUIRE_CONTENDERS`] concurrent requests per primitive on
/// `race_key(probe_key)` until a check-then-write window of [`WINDOW`] would
/// have shown with probability at least `1 - `[`MISS`] (at most
/// [`ACQUIRE_MAX_ROUNDS`] rounds); later calls (and concurrent ones, which
/// wait) get the first finding. A failed check is not remembered: the next
/// acquire checks again.
///
/// Errors: as [`race`].
pub async fn check_once(
    store: &dyn ObjectStore,
    probe_key: &str,
) -> Result<Arc<RaceReport>, StoreError> {
    check_once_ran(store, probe_key).await.map(|(r, _)| r)
}

/// [`check_once`] with an acquire's write beside its later rounds: when this
/// call runs the race and its first round has no two winners, it says so on
/// `overlap.first` (with the 90th percentile of that round's round trips,
/// microseconds, and its duration) and waits for `overlap.go` (sent or dropped: the acquire's
/// write was answered, or it wrote nothing) before its second round, so the
/// acquire's read and write are not slowed by the check's concurrent
/// requests. `overlap.first` is dropped unsent when the store was checked
/// already, when another caller is checking it (this one then waits for that
/// finding), or when the first round ends the race (two winners, a failure):
/// then nothing may be written before the finding.
///
/// Errors: as [`race`].
pub async fn check_once_overlapped(
    store: &dyn ObjectStore,
    probe_key: &str,
    overlap: Overlap,
) -> Result<Arc<RaceReport>, StoreError> {
    let cell = known().checked.entry(store.describe()).or_default().clone();
    if let Some(r) = cell.get() {
        return Ok(r.clone());
    }
    cell.get_or_try_init(|| async {
        let plan = ACQUIRE_ROUNDS;
        race_overlapped(store, probe_key, ACQUIRE_CONTENDERS, plan, Some(overlap))
            .await
            .map(Arc::new)
    })
    .await
    .cloned()
}

/// What an acquire that writes beside the race check's later rounds and the
/// check tell each other ([`check_once_overlapped`]).
pub struct Overlap {
    /// The first round had no two winners: the 90th percentile of its
    /// round trips (microseconds; `None`: none measured), and how long it took.
    pub first: tokio::sync::oneshot::Sender<(Option<u64>, Duration)>,
    /// The acquire's write was answered, or it will write nothing: the
    /// check's later rounds may start (sent or dropped).
    pub go: tokio::sync::oneshot::Receiver<()>,
}

/// [`check_once`], and whether this call waited for a race (true) or found
/// the store checked already (false).
///
/// Errors: as [`race`].
pub async fn check_once_ran(
    store: &dyn ObjectStore,
    probe_key: &str,
) -> Result<(Arc<RaceReport>, bool), StoreError> {
    let cell = known().checked.entry(store.describe()).or_default().clone();
    if let Some(r) = cell.get() {
        return Ok((r.clone(), false));
    }
    cell.get_or_try_init(|| async {
        race_with(store, probe_key, ACQUIRE_CONTENDERS, ACQUIRE_ROUNDS)
            .await
            .map(Arc::new)
    })
    .await
    .map(|r| (r.clone(), true))
}
