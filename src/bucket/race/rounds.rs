//! The rounds of a race: N concurrent requests per primitive on the
//! scratch key, each answer judged (read back where ambiguous), and the
//! scratch key removed again.

use super::*;
use tokio::time::Instant;

use crate::bucket::record::new_instance_id;
use crate::text::sanitize;

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
        new_instance_id()
    )
    .into_bytes()
}

#[derive(Default)]
pub(super) struct Tally {
    pub(super) requests: usize,
    /// Requests given up without an answer (timeout, reset), or slow enough
    /// that an attempt may have been given up and retried: the service may
    /// still carry them out later (SeaweedFS queues the losers of a contended
    /// conditional write behind a lock). The scratch key is watched for them
    /// before the race ends ([`remove`]).
    in_flight: usize,
    /// Contenders' writes sent once ([`ObjectStore::put_once`]: no attempt
    /// given up and retried) and answered later than [`SLOW`]. Nothing of
    /// them is left to be carried out, so the scratch key is not watched for
    /// them: on SeaweedFS, whose losers of a contended write are answered one
    /// to three seconds late, that watch (twice the slowest answer) held the
    /// acquire's check 4–6.5 s past its last round. A check with a target
    /// still runs every round while any were ([`run`]'s budget counts them
    /// as before: the check's certainty is unchanged).
    late: usize,
    /// The slowest contender's request.
    slowest: std::time::Duration,
    /// Every contender's round-trip time in the PUT races, microseconds:
    /// the spread a target is judged by ([`super::confidence`]).
    samples: Vec<u64>,
    /// The round-trip times of the PUTs answered as carried out after the
    /// first round, microseconds: how long a write that lands takes to be answered (what
    /// the acquire's confirmation waits by; a refusal can take far longer —
    /// SeaweedFS answers the losers of a contended write about a second
    /// late — and lands nothing that a confirmation would have to see).
    carried_out: Vec<u64>,
    /// No read-back of a round whose one winner answered with its ETag and
    /// whose other answers are refusals (the acquire's check).
    pub(super) lean: bool,
    /// An acquire writing beside the later rounds
    /// ([`super::check_once_overlapped`]): told after the first round.
    pub(super) overlap: Option<Overlap>,
    /// How long the rounds waited for that acquire's write.
    pub(super) beside: std::time::Duration,
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
    /// A request the client may have sent again after giving up on an
    /// attempt, answered after `d`.
    fn took(&mut self, d: std::time::Duration) {
        self.slowest = self.slowest.max(d);
        self.in_flight += usize::from(d > SLOW);
    }

    /// A contender's write sent once, answered after `d`.
    fn took_once(&mut self, d: std::time::Duration) {
        self.slowest = self.slowest.max(d);
        self.late += usize::from(d > SLOW);
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
            .map(|b| timed(store.put_once(key, b.clone(), cond.clone()))),
    )
    .await;
    t.requests += n;
    let results_took: Vec<u64> = results.iter().map(|(_, d)| d.as_micros() as u64).collect();
    let results: Vec<_> = results
        .into_iter()
        .map(|(r, took)| {
            t.took_once(took);
            t.samples.push(took.as_micros() as u64);
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
                // The first round's answers wait on cold starts (a
                // connection opened, a bucket's first write: 200 ms on
                // SeaweedFS) no later write of an acquire waits on.
                if round > 0 {
                    t.carried_out.push(results_took[i]);
                }
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
    // One winner answered with its ETag and no answer in doubt: what the
    // key holds is known without a read (the acquire's check, `lean`).
    let sole = (won.iter().filter(|w| **w).count() == 1 && !ambiguous.contains(&true))
        .then(|| won.iter().position(|w| *w))
        .flatten()
        .and_then(|i| match &results[i] {
            Ok(Some(e)) if t.lean => Some((bodies[i].clone(), Some(e.clone()))),
            _ => None,
        });
    let back = match sole {
        Some(known) => Some(known),
        None => read(store, key, t).await?,
    };
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
    tracing::debug!(
        race = name,
        round,
        took_ms = started.elapsed().as_millis() as u64,
        answers = ?results.iter().zip(&results_took).map(|(r, d)| format!("{}@{}ms", match classify_put(r) { Answer::Won(a) | Answer::Lost(a) | Answer::Ambiguous(a) | Answer::Unsupported(a) => a }, d / 1000)).collect::<Vec<_>>(),
        winners = won.iter().filter(|w| **w).count(),
        "race round"
    );
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
    tracing::debug!(
        race = "delete_current",
        took_ms = started.elapsed().as_millis() as u64,
        wins,
        "race round"
    );
    Ok(())
}

/// Removes the scratch key. Where requests went unanswered or were slow (an
/// attempt may have been given up and retried; not a contender's write sent
/// once and answered, however late: `Tally::late`), the service may still carry
/// out what was given up on — a queued create lands once the key is gone — so
/// the key is then watched every [`SETTLE`] for twice the slowest request
/// (1 to 15 s) and removed again whenever it reappears, at most
/// [`SETTLE_TRIES`] times. Returns what could not be removed, as sentences.
pub(super) async fn remove(store: &dyn ObjectStore, key: &str, t: &mut Tally) -> Vec<String> {
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
        tracing::debug!(
            in_flight = t.in_flight,
            window_ms = window.as_millis() as u64,
            "scratch key removed; watching it settle"
        );
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

/// What the rounds found: the three races, how sure a race with a target
/// got, and the header a service with two winners ignored outright.
pub(super) struct Ran {
    pub(super) races: Vec<Race>,
    pub(super) confidence: Option<Confidence>,
    pub(super) ignores: Option<&'static str>,
    /// The 90th percentile of the round-trip times of the writes answered as
    /// carried out after the first round (of every contender's, when none
    /// was), microseconds.
    pub(super) round_trip_q90_us: Option<u64>,
}

/// Whether DELETE can be raced on `key`: only where conditional DELETE is
/// honoured and refused on an absent key (otherwise the winners cannot be
/// told apart); `delete` gets the note saying why not.
async fn can_race_deletes(
    store: &dyn ObjectStore,
    key: &str,
    delete: &mut Race,
    t: &mut Tally,
) -> Result<bool, StoreError> {
    Ok(match store.capabilities().conditional_delete {
        DeleteSupport::Honoured => {
            t.requests += 1;
            match store.delete(key, Some(MADE_UP_ETAG)).await {
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
    })
}

/// After a round with two winners: does the service ignore a precondition
/// outright (a create over the key it holds, an `If-Match` with a made-up
/// ETag, one request at a time)? The more exact diagnosis, if so.
async fn ignored_alone(
    store: &dyn ObjectStore,
    key: &str,
    t: &mut Tally,
) -> Result<Option<&'static str>, StoreError> {
    let held = body("alone", 0, 0);
    t.requests += 3;
    store.put(key, held.clone(), PutCondition::None).await?;
    // As the probe's `check_writes`: a create over the key it holds, then an
    // `If-Match` with a made-up ETag, each re-sending the same body.
    let inm = carried_out(
        store
            .put(key, held.clone(), PutCondition::IfNoneMatch)
            .await,
    )?;
    let im = carried_out(
        store
            .put(key, held, PutCondition::IfMatch(MADE_UP_ETAG.into()))
            .await,
    )?;
    Ok(if inm {
        Some("If-None-Match")
    } else if im {
        Some("If-Match")
    } else {
        None
    })
}

/// Whether a write that should have been refused was carried out: a refusal
/// (412, 409, 404) or a precondition the service does not evaluate (501,
/// 400) is not; any other failure is the error.
fn carried_out(r: Result<Option<String>, StoreError>) -> Result<bool, StoreError> {
    match r {
        Ok(_) => Ok(true),
        Err(
            StoreError::PreconditionFailed
            | StoreError::Conflict
            | StoreError::NotFound(_)
            | StoreError::NotImplemented(_)
            | StoreError::Other { status: 400, .. },
        ) => Ok(false),
        Err(e) => Err(e),
    }
}

pub(super) async fn run(
    store: &dyn ObjectStore,
    key: &str,
    n: usize,
    plan: Rounds,
    t: &mut Tally,
) -> Result<Ran, StoreError> {
    let mut create = new_race(Primitive::CreateAbsent, n);
    let mut if_match = new_race(Primitive::IfMatchCurrent, n);
    let mut delete = new_race(Primitive::DeleteCurrent, n);
    // Start from an absent key (a leftover of an interrupted race of the same name).
    t.requests += 1;
    store.delete(key, None).await?;
    let race_deletes = can_race_deletes(store, key, &mut delete, t).await?;
    let mut confidence = None;
    // The store's pace so far: what the budget is spent by ([`paced`]).
    let mut pace = std::time::Duration::ZERO;
    for round in 0..plan.most() {
        let round_started = Instant::now();
        let from = t.samples.len();
        let back = one_round(store, key, n, round, &mut [&mut create, &mut if_match], t).await?;
        // 3. Conditional deletes on the ETag now there (with a target, in the
        // first round only: the creates and If-Match writes are what it counts).
        let deletes_now = race_deletes && (round == 0 || matches!(plan, Rounds::Fixed(_)));
        match (deletes_now, back) {
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
        if let Rounds::Until {
            window,
            miss,
            budget,
            ..
        } = plan
        {
            let races = create.winners.len() + if_match.winners.len();
            let window_us = window.as_micros() as u64;
            let c = confidence::assess(&t.samples, n, races, window_us, miss);
            confidence = Some(c);
            // The budget ends a check slowed by the store's answers, never
            // one whose rounds lost requests (a timeout eats the budget and
            // leaves that round's winners in doubt).
            pace += paced(round_started.elapsed(), &t.samples[from..], n);
            let spent = pace >= budget && t.in_flight == 0 && t.late == 0;
            tracing::debug!(
                round,
                round_ms = round_started.elapsed().as_millis() as u64,
                pace_ms = pace.as_millis() as u64,
                in_flight = t.in_flight,
                late = t.late,
                miss = c.miss,
                reached = c.reached(),
                spent,
                "race check round ended"
            );
            if round + 1 >= MIN_ROUNDS && (c.reached() || spent) {
                break;
            }
        }
        if let Some(o) = t.overlap.take() {
            let waited = Instant::now();
            let q90 = confidence::quantile(&t.samples, 0.9);
            let _ = o.first.send((q90, round_started.elapsed()));
            let _ = o.go.await;
            t.beside += waited.elapsed();
        }
    }
    judge(&mut create);
    judge(&mut if_match);
    judge(&mut delete);
    let two = [&create, &if_match, &delete]
        .iter()
        .any(|r| r.verdict == RaceVerdict::NotAtomic);
    let ignores = match two {
        true => ignored_alone(store, key, t).await?,
        false => None,
    };
    Ok(Ran {
        races: vec![create, if_match, delete],
        confidence,
        ignores,
        // No write carried out at all (every answer in doubt): every round trip.
        round_trip_q90_us: confidence::quantile(&t.carried_out, 0.9)
            .or_else(|| confidence::quantile(&t.samples, 0.9)),
    })
}

/// How much of the budget a round that took `took` spends: its time with
/// each of its races (`samples`, the round trips of its contenders' PUTs, `n`
/// a race) counted at its median request instead of its slowest. One
/// straggler — a request now and then answered a second late (the
/// simulator draws one in twenty at 0.1–1.5 s) — does not end a check unsure
/// after two rounds; a store whose losers are all answered late (SeaweedFS)
/// still spends it as before.
fn paced(took: std::time::Duration, samples: &[u64], n: usize) -> std::time::Duration {
    let excess: u64 = samples
        .chunks(n.max(1))
        .map(|race| {
            let slowest = race.iter().copied().max().unwrap_or(0);
            slowest.saturating_sub(confidence::quantile(race, 0.5).unwrap_or(slowest))
        })
        .sum();
    took.saturating_sub(std::time::Duration::from_micros(excess))
}

/// One round's PUT races on `key`: creates on the absent key, then
/// `If-Match` writes on the ETag they left (seeded when nobody created it).
/// Returns what the key holds after them (body and ETag).
async fn one_round(
    store: &dyn ObjectStore,
    key: &str,
    n: usize,
    round: usize,
    races: &mut [&mut Race; 2],
    t: &mut Tally,
) -> Result<Option<(Vec<u8>, Option<String>)>, StoreError> {
    let [create, if_match] = races;
    // 1. Creates on the absent key.
    let back = put_round(
        store,
        key,
        ("create_absent", round),
        n,
        PutCondition::IfNoneMatch,
        create,
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
    let cond = PutCondition::IfMatch(etag.clone());
    let name = ("if_match_current", round);
    let back = put_round(store, key, name, n, cond.clone(), if_match, t).await?;
    let caps = store.capabilities();
    let refused_current = if_match.winners.last() == Some(&0)
        && back.as_ref().and_then(|(_, e)| e.as_deref()) == Some(etag.as_str());
    if !refused_current || caps.etag_form != EtagForm::Quoted {
        return Ok(back);
    }
    // Every one refused with the ETag the key still holds: a service that
    // wants it unquoted (Ceph RGW). The round again in that form, which is
    // kept when it has a winner (a service ignoring the bare form shows
    // several); else nothing measured If-Match here, and the form goes back.
    if_match.winners.pop();
    let bare = Capabilities {
        etag_form: EtagForm::Unquoted,
        ..caps
    };
    store.set_capabilities(bare);
    let back = put_round(store, key, name, n, cond, if_match, t).await?;
    if if_match.winners.last() == Some(&0) {
        store.set_capabilities(caps);
    } else {
        tracing::info!(service = %store.describe(), "the service refuses If-Match with the current ETag quoted and takes it unquoted: sending ETags unquoted from now on");
    }
    Ok(back)
}

/// One round of `n` concurrent creates (`PUT If-None-Match: *`, each its own
/// body) on `key`, absent first and removed after (with a race's rules for
/// requests given up on): the probe's eighth step. Returns the race, its one
/// round's winners and answers; what could not be removed is its note.
///
/// Errors: as [`super::race_with`].
pub async fn creates_at_once(
    store: &dyn ObjectStore,
    key: &str,
    n: usize,
) -> Result<Race, StoreError> {
    let n = n.clamp(MIN_CONTENDERS, MAX_CONTENDERS);
    let mut t = Tally::default();
    let mut create = new_race(Primitive::CreateAbsent, n);
    t.requests += 1;
    let result = match store.delete(key, None).await {
        Ok(()) => put_round(
            store,
            key,
            ("concurrent_creates", 0),
            n,
            PutCondition::IfNoneMatch,
            &mut create,
            &mut t,
        )
        .await
        .map(|_| ()),
        Err(e) => Err(e),
    };
    let changed = remove(store, key, &mut t).await;
    result?;
    judge(&mut create);
    if let Some(c) = changed.into_iter().next() {
        create.note = Some(c);
    }
    Ok(create)
}
