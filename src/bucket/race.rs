//! The race probe: are the service's conditional requests atomic?
//!
//! The seven steps of [`super::probe`] send one request at a time. A service
//! whose conditional write is a check followed by a write (not one atomic
//! step) passes all of them and still lets several concurrent contenders win:
//! then a lease there excludes nobody. So rounds of N concurrent requests are
//! sent on one scratch key, for each primitive a lease uses:
//!
//! 1. `PUT If-None-Match: *` on the absent key, N different bodies;
//! 2. `PUT If-Match: <the current ETag>` (in the ETag form the store uses), N bodies;
//! 3. `DELETE If-Match: <the current ETag>`, where the service honours
//!    conditional DELETE and refuses it on an absent key (otherwise the
//!    winners cannot be told apart, and this race is not run).
//!
//! Each round must have exactly one winner. A 2xx answer is a win; a 409, a
//! 5xx or a lost answer is ambiguous and is read back: a write that landed
//! (the key holds that contender's body) counts as a win. Two winners in any
//! round is "not atomic", and ends the race after that round (the verdict
//! cannot change).
//!
//! Cost: a round is `3 N` concurrent requests plus 3 reads (`2 N` + 3 where
//! conditional DELETE is not raced), and 3 requests more per race: the probe's
//! default (N = [`PROBE_CONTENDERS`], [`PROBE_ROUNDS`] rounds) is 258 requests,
//! the acquire path's once-per-process check (N = [`ACQUIRE_CONTENDERS`],
//! [`ACQUIRE_ROUNDS`] round) 18. Measured on loopback: the acquire check takes
//! 40 ms on moto, 150-210 ms on Ceph RGW, 15 ms to 2 s on SeaweedFS (its
//! losers of a contended conditional write wait about a second each); the
//! probe's default 0.5 s on moto, 3.5 s on Ceph RGW (the SDK retries the 500
//! it answers some losers of an If-Match race after a second), up to 30 s on
//! SeaweedFS.
//!
//! The scratch key is removed whatever happens, after an interruption too:
//! its name is derived from the probe's key ([`race_key`]), so the
//! interrupted probe removes it with its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
// tokio's Instant reads the same monotonic clock as std's in production,
// and follows paused time in the simulator (`sim` feature).
use tokio::time::Instant;

use serde::Serialize;

use crate::store::{DeleteSupport, ObjectStore, PutCondition, StoreError};
use crate::text::{format_secs, sanitize};

/// Concurrent requests per round of `leasectl probe --race` (without `=N`).
pub(crate) const PROBE_CONTENDERS: usize = 16;
/// Rounds per primitive of `leasectl probe --race`.
pub(crate) const PROBE_ROUNDS: usize = 5;
/// Concurrent requests per round of the check on the acquire path.
pub(crate) const ACQUIRE_CONTENDERS: usize = 4;
/// Rounds per primitive of the check on the acquire path.
pub(crate) const ACQUIRE_ROUNDS: usize = 1;
/// The fewest concurrent requests a race can have.
pub(crate) const MIN_CONTENDERS: usize = 2;
/// The most concurrent requests a race may have (`--race=N` is refused above).
pub(crate) const MAX_CONTENDERS: usize = 64;

/// A primitive a lease uses, raced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Primitive {
    /// `PUT If-None-Match: *` on one absent key (the acquire of an absent lease).
    CreateAbsent,
    /// `PUT If-Match: <ETag>` on one current ETag (a takeover of a stale lease, a renewal).
    IfMatchCurrent,
    /// `DELETE If-Match: <ETag>` on one current ETag (a release).
    DeleteCurrent,
}

impl Primitive {
    /// The request, for people.
    pub(crate) fn request(self) -> &'static str {
        match self {
            Primitive::CreateAbsent => "PUT If-None-Match: * (one absent key)",
            Primitive::IfMatchCurrent => "PUT If-Match: <one current ETag>",
            Primitive::DeleteCurrent => "DELETE If-Match: <one current ETag>",
        }
    }
}

/// What a race found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RaceVerdict {
    /// No round had more than one winner.
    Atomic,
    /// Some round had two or more winners: the precondition is a check and a
    /// separate write, and a lease there excludes nobody.
    NotAtomic,
    /// Not raced (see the note).
    NotRun,
}

impl RaceVerdict {
    /// `atomic`, `not atomic`, `not run`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RaceVerdict::Atomic => "atomic",
            RaceVerdict::NotAtomic => "not atomic",
            RaceVerdict::NotRun => "not run",
        }
    }
}

/// The rounds of one primitive.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Race {
    /// Which primitive.
    pub(crate) primitive: Primitive,
    /// The request, for people.
    pub request: &'static str,
    /// Concurrent requests per round.
    pub contenders: usize,
    /// Rounds run.
    pub rounds: usize,
    /// Winners in each round, in order (exactly 1 each on an atomic service).
    pub winners: Vec<usize>,
    /// The most winners seen in one round.
    pub(crate) max_winners: usize,
    /// Answers seen over all rounds, by kind (`200`, `412`, `409, read back: written`, ...).
    pub answers: BTreeMap<String, usize>,
    /// The verdict.
    pub verdict: RaceVerdict,
    /// Wall time of its rounds (their read-backs included), milliseconds.
    pub(crate) elapsed_ms: u64,
    /// Why it was not run, or what a round without a winner means.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Race {
    /// One line for the text report.
    pub(crate) fn line(&self) -> String {
        let mut s = format!(
            "{:<38} {} round(s) of {}: winners {:?}, most {} — {}",
            self.request,
            self.rounds,
            self.contenders,
            self.winners,
            self.max_winners,
            self.verdict.as_str()
        );
        if let Some(n) = &self.note {
            s.push_str(" (");
            s.push_str(n);
            s.push(')');
        }
        s
    }
}

/// The race probe's findings.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RaceReport {
    /// The scratch key raced on (removed again).
    pub(crate) scratch_key: String,
    /// Concurrent requests per round.
    pub contenders: usize,
    /// Rounds asked for per primitive (each race says how many it ran).
    pub rounds: usize,
    /// One entry per primitive, in order.
    pub races: Vec<Race>,
    /// `atomic` or `not_atomic` over all primitives raced.
    pub verdict: RaceVerdict,
    /// Requests sent, reads and cleanup included.
    pub requests: usize,
    /// Wall time of the race probe, milliseconds.
    pub(crate) elapsed_ms: u64,
    /// Problems removing the scratch key (empty when it was removed).
    pub changed: Vec<String>,
}

impl RaceReport {
    /// The first primitive with two winners in one round, if any.
    pub(crate) fn not_atomic(&self) -> Option<&Race> {
        self.races
            .iter()
            .find(|r| r.verdict == RaceVerdict::NotAtomic)
    }

    /// One sentence on a not-atomic finding: which request, how many winners.
    pub(crate) fn finding(&self) -> Option<String> {
        self.not_atomic().map(|r| {
            format!(
                "{} is not atomic: {} of {} concurrent requests won one round",
                r.request, r.max_winners, r.contenders
            )
        })
    }

    /// What it cost, for people: `260 requests in 1.2s`.
    pub(crate) fn cost(&self) -> String {
        format!(
            "{} requests in {}",
            self.requests,
            format_secs(self.elapsed_ms as f64 / 1000.0)
        )
    }
}

/// The race probe's scratch key for a probe scratch key `probe_key`
/// (`{root}.leasectl-probe/{id}` → `{root}.leasectl-probe/{id}.race`).
pub(crate) fn race_key(probe_key: &str) -> String {
    format!("{probe_key}.race")
}

/// How one contender's request went.
enum Answer {
    Won(String),
    Lost(String),
    /// 409, 5xx, timeout, reset: the write may have landed.
    Ambiguous(String),
    /// The service refused the conditional request itself (400/501).
    Unsupported(String),
}

fn classify_put(r: &Result<Option<String>, StoreError>) -> Answer {
    match r {
        Ok(_) => Answer::Won("200".into()),
        Err(e) => classify_err(e),
    }
}

fn classify_err(e: &StoreError) -> Answer {
    match e {
        StoreError::PreconditionFailed => Answer::Lost("412".into()),
        StoreError::NotFound(_) => Answer::Lost("404".into()),
        StoreError::Conflict => Answer::Ambiguous("409".into()),
        StoreError::NotImplemented(_) => Answer::Unsupported("501".into()),
        StoreError::Other { status: 400, .. } => Answer::Unsupported("400".into()),
        StoreError::Other { status, .. } if *status >= 500 => Answer::Ambiguous(status.to_string()),
        StoreError::Timeout(..) => Answer::Ambiguous("timeout".into()),
        StoreError::Transport { .. } => Answer::Ambiguous("no answer".into()),
        _ => Answer::Ambiguous("error".into()),
    }
}

/// A body no other contender sends.
fn body(primitive: &str, round: usize, i: usize) -> Vec<u8> {
    format!(
        "{{\"leasectl_probe\":true,\"race\":\"{primitive}\",\"round\":{round},\"contender\":{i},\"nonce\":\"{}\"}}",
        super::record::new_instance_id()
    )
    .into_bytes()
}

struct Tally {
    requests: usize,
    /// Requests given up without an answer (timeout, reset), or slow enough
    /// that an attempt may have been given up and retried: the service may
    /// still carry them out later (SeaweedFS queues the losers of a contended
    /// conditional write behind a lock).
    in_flight: usize,
    /// The slowest contender's request.
    slowest: std::time::Duration,
}

/// A contender's request slower than this may have been retried by the SDK
/// after an attempt timed out: the attempt given up on may still be carried out.
const SLOW: std::time::Duration = std::time::Duration::from_millis(1500);

/// Runs `f`, and says how long it took.
async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, std::time::Duration) {
    let started = Instant::now();
    let out = f.await;
    (out, started.elapsed())
}

impl Tally {
    fn took(&mut self, d: std::time::Duration) {
        self.slowest = self.slowest.max(d);
        self.in_flight += usize::from(d > SLOW);
    }
}

/// True for an ambiguous answer that is no answer at all.
fn unanswered(a: &str) -> bool {
    matches!(a, "timeout" | "no answer" | "error")
}

/// What is at `key`: body and ETag.
async fn read(
    store: &dyn ObjectStore,
    key: &str,
    t: &mut Tally,
) -> Result<Option<(Vec<u8>, Option<String>)>, StoreError> {
    t.requests += 1;
    match store.get(key, None).await {
        Ok(o) => Ok(Some((o.body, o.meta.etag))),
        Err(StoreError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Errors that end the race: not answers of a contender, but the store
/// refusing us (credentials, a bad key) — no round can be judged.
fn fatal(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::AccessDenied(_) | StoreError::Credentials(_) | StoreError::Invalid(_)
    )
}

/// One round of N concurrent PUTs with `cond` on `key`. Returns the winners
/// after read-back, and leaves `key` holding one of the bodies (or absent).
async fn put_round(
    store: &dyn ObjectStore,
    key: &str,
    (name, round): (&str, usize),
    n: usize,
    cond: PutCondition,
    race: &mut Race,
    t: &mut Tally,
) -> Result<Option<(Vec<u8>, Option<String>)>, StoreError> {
    let started = Instant::now();
    let bodies: Vec<Vec<u8>> = (0..n).map(|i| body(name, round, i)).collect();
    let results = futures::future::join_all(
        bodies
            .iter()
            .map(|b| timed(store.put(key, b.clone(), cond.clone()))),
    )
    .await;
    t.requests += n;
    let results: Vec<_> = results
        .into_iter()
        .map(|(r, took)| {
            t.took(took);
            r
        })
        .collect();
    let mut won = vec![false; n];
    let mut ambiguous = vec![false; n];
    for (i, r) in results.iter().enumerate() {
        if let Err(e) = r {
            if fatal(e) {
                return Err(e.clone());
            }
        }
        match classify_put(r) {
            Answer::Won(a) => {
                won[i] = true;
                *race.answers.entry(a).or_default() += 1;
            }
            Answer::Lost(a) => *race.answers.entry(a).or_default() += 1,
            Answer::Ambiguous(a) => {
                ambiguous[i] = true;
                t.in_flight += usize::from(unanswered(&a));
                *race.answers.entry(a).or_default() += 1;
            }
            Answer::Unsupported(a) => {
                *race.answers.entry(a.clone()).or_default() += 1;
                race.note = Some(format!(
                    "the service refused the conditional request itself ({a})"
                ));
            }
        }
    }
    let back = read(store, key, t).await?;
    if let Some((b, _)) = &back {
        if let Some(i) = bodies.iter().position(|x| x == b) {
            if ambiguous[i] && !won[i] {
                won[i] = true;
                *race
                    .answers
                    .entry("ambiguous, read back: written".into())
                    .or_default() += 1;
            }
        }
    }
    race.winners.push(won.iter().filter(|w| **w).count());
    race.elapsed_ms += started.elapsed().as_millis() as u64;
    Ok(back)
}

/// One round of N concurrent `DELETE If-Match: etag` on `key`.
async fn delete_round(
    store: &dyn ObjectStore,
    key: &str,
    etag: &str,
    n: usize,
    race: &mut Race,
    t: &mut Tally,
) -> Result<(), StoreError> {
    let started = Instant::now();
    let results =
        futures::future::join_all((0..n).map(|_| timed(store.delete(key, Some(etag))))).await;
    t.requests += n;
    let results: Vec<_> = results
        .into_iter()
        .map(|(r, took)| {
            t.took(took);
            r
        })
        .collect();
    let mut wins = 0;
    let mut ambiguous = 0;
    for r in &results {
        match r {
            Ok(()) => {
                wins += 1;
                *race.answers.entry("204".into()).or_default() += 1;
            }
            Err(e) if fatal(e) => return Err(e.clone()),
            Err(e) => match classify_err(e) {
                Answer::Ambiguous(a) => {
                    ambiguous += 1;
                    t.in_flight += usize::from(unanswered(&a));
                    *race.answers.entry(a).or_default() += 1;
                }
                Answer::Won(a) | Answer::Lost(a) | Answer::Unsupported(a) => {
                    *race.answers.entry(a).or_default() += 1
                }
            },
        }
    }
    let back = read(store, key, t).await?;
    if wins == 0 && ambiguous > 0 && back.is_none() {
        wins = 1;
        *race
            .answers
            .entry("ambiguous, read back: deleted".into())
            .or_default() += 1;
    }
    if back.is_some() {
        // Nobody won: reset for the next round.
        t.requests += 1;
        store.delete(key, None).await?;
    }
    race.winners.push(wins);
    race.elapsed_ms += started.elapsed().as_millis() as u64;
    Ok(())
}

fn new_race(p: Primitive, n: usize) -> Race {
    Race {
        primitive: p,
        request: p.request(),
        contenders: n,
        rounds: 0,
        winners: Vec::new(),
        max_winners: 0,
        answers: BTreeMap::new(),
        verdict: RaceVerdict::NotRun,
        elapsed_ms: 0,
        note: None,
    }
}

fn judge(r: &mut Race) {
    r.rounds = r.winners.len();
    r.max_winners = r.winners.iter().copied().max().unwrap_or(0);
    if r.rounds == 0 {
        r.verdict = RaceVerdict::NotRun;
        return;
    }
    r.verdict = if r.max_winners > 1 {
        RaceVerdict::NotAtomic
    } else {
        RaceVerdict::Atomic
    };
    if r.verdict == RaceVerdict::Atomic && r.winners.contains(&0) && r.note.is_none() {
        r.note =
            Some("a round had no winner: exclusion holds, a contended acquire tries again".into());
    }
}

/// Races the primitives on `race_key(probe_key)`: `rounds` rounds of `n`
/// concurrent requests each (fewer when a round had two winners) (`n` clamped to [`MIN_CONTENDERS`]..=[`MAX_CONTENDERS`]).
/// The conditional DELETE race runs only where the store's [`crate::store::Capabilities`]
/// say conditional DELETE is honoured (the seven steps or the acquire's check
/// find that out first). The scratch key is removed afterwards, whatever happened.
///
/// Errors: a store failure that is not a contender's answer (access denied,
/// credentials, a read-back that failed); the scratch key is still removed.
pub(crate) async fn race(
    store: &dyn ObjectStore,
    probe_key: &str,
    n: usize,
    rounds: usize,
) -> Result<RaceReport, StoreError> {
    let n = n.clamp(MIN_CONTENDERS, MAX_CONTENDERS);
    let rounds = rounds.max(1);
    let key = race_key(probe_key);
    let started = Instant::now();
    let mut t = Tally {
        requests: 0,
        in_flight: 0,
        slowest: std::time::Duration::ZERO,
    };
    let result = run(store, &key, n, rounds, &mut t).await;
    let changed = remove(store, &key, &mut t).await;
    let races = result?;
    let verdict = if races.iter().any(|r| r.verdict == RaceVerdict::NotAtomic) {
        RaceVerdict::NotAtomic
    } else if races.iter().any(|r| r.verdict == RaceVerdict::Atomic) {
        RaceVerdict::Atomic
    } else {
        RaceVerdict::NotRun
    };
    let report = RaceReport {
        scratch_key: key,
        contenders: n,
        rounds,
        races,
        verdict,
        requests: t.requests,
        elapsed_ms: started.elapsed().as_millis() as u64,
        changed,
    };
    match report.finding() {
        Some(f) => tracing::error!("{}: {f}", store.describe()),
        None => tracing::info!(
            "{}: conditional requests atomic under {} rounds of {} concurrent requests ({})",
            store.describe(),
            rounds,
            n,
            report.cost()
        ),
    }
    Ok(report)
}

/// Removes the scratch key. Where requests went unanswered or were slow (an
/// attempt may have been given up and retried), the service may still carry
/// out what was given up on — a queued create lands once the key is gone — so
/// the key is then watched every [`SETTLE`] for twice the slowest request
/// (1 to 15 s) and removed again whenever it reappears, at most
/// [`SETTLE_TRIES`] times. Returns what could not be removed, as sentences.
async fn remove(store: &dyn ObjectStore, key: &str, t: &mut Tally) -> Vec<String> {
    let window = (t.slowest * 2).clamp(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(15),
    );
    for _ in 0..SETTLE_TRIES {
        t.requests += 1;
        if let Err(e) = store.delete(key, None).await {
            return vec![format!(
                "could not remove the scratch key {}: {e}",
                sanitize(key)
            )];
        }
        if t.in_flight == 0 {
            return Vec::new();
        }
        let quiet_since = Instant::now();
        loop {
            if quiet_since.elapsed() >= window {
                return Vec::new();
            }
            tokio::time::sleep(SETTLE).await;
            t.requests += 1;
            match store.get(key, None).await {
                Err(StoreError::NotFound(_)) => {}
                Ok(_) => break,
                Err(e) => {
                    return vec![format!(
                        "could not check that the scratch key {} is gone: {e}",
                        sanitize(key)
                    )]
                }
            }
        }
    }
    vec![format!(
        "the scratch key {} kept reappearing (requests given up on were still carried out); \
         a later probe removes it after 10 minutes",
        sanitize(key)
    )]
}

/// The pause between checks that a given-up request has not recreated the scratch key.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(500);
/// The most removals of a scratch key that given-up requests recreate.
const SETTLE_TRIES: usize = 10;

async fn run(
    store: &dyn ObjectStore,
    key: &str,
    n: usize,
    rounds: usize,
    t: &mut Tally,
) -> Result<Vec<Race>, StoreError> {
    let mut create = new_race(Primitive::CreateAbsent, n);
    let mut if_match = new_race(Primitive::IfMatchCurrent, n);
    let mut delete = new_race(Primitive::DeleteCurrent, n);
    // Start from an absent key (a leftover of an interrupted race of the same name).
    t.requests += 1;
    store.delete(key, None).await?;
    // Can the DELETE winners be counted? Only where a made-up ETag is refused
    // and a conditional DELETE of an absent key is refused too.
    let race_deletes = match store.capabilities().conditional_delete {
        DeleteSupport::Honoured => {
            t.requests += 1;
            match store.delete(key, Some(super::probe::MADE_UP_ETAG)).await {
                Ok(()) => {
                    delete.note = Some(
                        "the service answers 2xx to a conditional DELETE of an absent key, so \
                         the winners cannot be told apart"
                            .into(),
                    );
                    false
                }
                Err(StoreError::PreconditionFailed) | Err(StoreError::NotFound(_)) => true,
                Err(e) if fatal(&e) => return Err(e),
                Err(_) => {
                    delete.note = Some("a conditional DELETE of an absent key failed".into());
                    false
                }
            }
        }
        DeleteSupport::Ignored => {
            delete.note = Some(
                "the service ignores If-Match on DELETE; a release reads, checks, deletes".into(),
            );
            false
        }
        DeleteSupport::Unknown => {
            delete.note = Some("conditional DELETE not probed yet".into());
            false
        }
    };
    for round in 0..rounds {
        // 1. Creates on the absent key.
        let back = put_round(
            store,
            key,
            ("create_absent", round),
            n,
            PutCondition::IfNoneMatch,
            &mut create,
            t,
        )
        .await?;
        let etag = match back {
            Some((_, Some(e))) => e,
            _ => {
                // Nobody created it: seed it for the If-Match race.
                t.requests += 2;
                store
                    .put(key, body("seed", round, 0), PutCondition::None)
                    .await?;
                match read(store, key, t).await?.and_then(|(_, e)| e) {
                    Some(e) => e,
                    None => return Err(StoreError::Invalid("the scratch key has no ETag".into())),
                }
            }
        };
        // 2. If-Match writes on its one ETag.
        let back = put_round(
            store,
            key,
            ("if_match_current", round),
            n,
            PutCondition::IfMatch(etag),
            &mut if_match,
            t,
        )
        .await?;
        // 3. Conditional deletes on the ETag now there.
        match (race_deletes, back) {
            (true, Some((_, Some(e)))) => delete_round(store, key, &e, n, &mut delete, t).await?,
            _ => {
                t.requests += 1;
                store.delete(key, None).await?;
            }
        }
        // Two winners anywhere decide the verdict: no need for more rounds.
        if [&create, &if_match, &delete]
            .iter()
            .any(|r| r.winners.iter().any(|w| *w > 1))
        {
            break;
        }
    }
    judge(&mut create);
    judge(&mut if_match);
    judge(&mut delete);
    Ok(vec![create, if_match, delete])
}

type Cell = Arc<tokio::sync::OnceCell<Arc<RaceReport>>>;

/// The findings of [`check_once`], per store (by [`ObjectStore::describe`]).
fn checked() -> &'static Mutex<BTreeMap<String, Cell>> {
    static C: OnceLock<Mutex<BTreeMap<String, Cell>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// Forgets the findings of every store whose name starts with `prefix`: the
/// simulator's worlds (`sim` feature) are new stores each run.
#[cfg(feature = "sim")]
pub(crate) fn forget(prefix: &str) {
    checked()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|k, _| !k.starts_with(prefix));
}

/// The acquire path's race check: once per store per process
/// ([`ACQUIRE_ROUNDS`] rounds of [`ACQUIRE_CONTENDERS`]) on `race_key(probe_key)`;
/// later calls (and concurrent ones, which wait) get the first finding.
/// A failed check is not remembered: the next acquire checks again.
///
/// Errors: as [`race`].
pub(crate) async fn check_once(
    store: &dyn ObjectStore,
    probe_key: &str,
) -> Result<Arc<RaceReport>, StoreError> {
    check_once_ran(store, probe_key).await.map(|(r, _)| r)
}

/// [`check_once`], and whether this call waited for a race (true) or found
/// the store checked already (false).
///
/// Errors: as [`race`].
pub(crate) async fn check_once_ran(
    store: &dyn ObjectStore,
    probe_key: &str,
) -> Result<(Arc<RaceReport>, bool), StoreError> {
    let cell = {
        let mut map = checked().lock().unwrap_or_else(|e| e.into_inner());
        map.entry(store.describe()).or_default().clone()
    };
    if let Some(r) = cell.get() {
        return Ok((r.clone(), false));
    }
    cell.get_or_try_init(|| async {
        race(store, probe_key, ACQUIRE_CONTENDERS, ACQUIRE_ROUNDS)
            .await
            .map(Arc::new)
    })
    .await
    .map(|r| (r.clone(), true))
}
