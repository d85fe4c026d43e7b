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
//! The acquire path's check ([`check_once`], once per store per process,
//! beside the acquire's write: `bucket::lease::checked`;
//! [`check_once_overlapped`] where its first round comes before the write)
//! does not stop after a fixed number of rounds:
//! a check-then-write window is seen only when a second request arrives inside
//! it, which with requests spread by the network may take many rounds. It
//! races on until a window of [`WINDOW`] would have shown two winners with
//! probability at least `1 - `[`MISS`], judged from the spread of the answers
//! it measures ([`confidence`]), at most [`ACQUIRE_MAX_ROUNDS`] rounds. Two
//! winners in a round are then told apart from a service that ignores the
//! precondition outright by one request at a time on the scratch key
//! ([`RaceReport::ignores`]).
//!
//! Cost: a round is `3 N` concurrent requests plus 3 reads (`2 N` + 3 where
//! conditional DELETE is not raced; the acquire's check races DELETE in its
//! first round only), and 3 requests more per race: the probe's default
//! (N = [`PROBE_CONTENDERS`], [`PROBE_ROUNDS`] rounds) is 258 requests. The
//! acquire's check (N = [`ACQUIRE_CONTENDERS`]) runs as many rounds as the
//! spread asks for, at most [`ACQUIRE_MAX_ROUNDS`] (2 on a loopback service
//! whose answers come within a millisecond of each other: 23 requests; at
//! most 5, about 57 requests), and starts no round once it has taken
//! [`ACQUIRE_BUDGET`] (its first two rounds always run, and every round
//! while requests go unanswered; a round counts with each race at its median
//! request, so one straggler does not end a check unsure): two rounds, or about 1 s plus one round,
//! at worst on a store that answers. Its contenders' PUTs are sent once, without the client's
//! retries ([`ObjectStore::put_once`]): an answer in doubt is read back. An
//! `If-Match` round in which every contender was refused on the ETag the
//! key holds, sent quoted, is run again with the ETag bare and the store
//! keeps that form when it then has a winner (Ceph RGW refuses the quoted
//! form: the round measured nothing, and a holder's release was refused on
//! its own unchanged record). Measured
//! on loopback before the stopping rule (one round of 4): 40 ms on moto,
//! 150-210 ms on Ceph RGW, 15 ms to 2 s on SeaweedFS (its losers of a
//! contended conditional write wait about a second each); the probe's
//! default 0.5 s on moto, 3.5 s on Ceph RGW (the SDK retries the 500 it
//! answers some losers of an If-Match race after a second), up to 30 s on
//! SeaweedFS.
//!
//! What it costs an acquire's start: with the default TTL, nothing before
//! the acquire writes; the whole check runs after the write's answer, beside
//! its probe and its confirmation's wait, and the lease is handed out once
//! it has ended (`bucket::lease::checked`). On moto the command then waits
//! for the longer of the wait's 100 ms floor and the check's 47 requests
//! (plus the probe's 7, all answered one at a time there): `bucket hold`
//! started its command 137–142 ms (medians) after its launch where main
//! before this order took 220–228 ms and the single round before issue 48
//! 80 ms (1.72–1.77×; `scripts/hold_start.py`, load average 3.4–4.1;
//! docs/simulator.md, "What it costs an acquire"): at the floor when the
//! machine is quiet, the check's requests when it is not.
//!
//! The scratch key is removed whatever happens, after an interruption too:
//! its name is derived from the probe's key ([`race_key`]), so the
//! interrupted probe removes it with its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
// tokio's Instant reads the same monotonic clock as std's in production,
// and follows paused time in the simulator (`sim` feature).
use tokio::time::Instant;

use serde::Serialize;

use crate::store::{Capabilities, DeleteSupport, EtagForm, ObjectStore, PutCondition, StoreError};
use crate::text::format_secs;

/// A made-up ETag no real object has (the race's and the probe's).
pub const MADE_UP_ETAG: &str = "00000000000000000000000000000000-leasectl-probe";

/// Concurrent requests per round of `leasectl probe --race` (without `=N`).
pub const PROBE_CONTENDERS: usize = 16;
/// Rounds per primitive of `leasectl probe --race`.
pub const PROBE_ROUNDS: usize = 5;
/// Concurrent requests per round of the check on the acquire path.
pub const ACQUIRE_CONTENDERS: usize = 4;
/// The shortest check-then-write window the acquire's check is sized to see.
pub const WINDOW: Duration = Duration::from_millis(1);
/// The largest chance the acquire's check may leave that such a window went
/// unseen (under the spread of the answers it measured). The check is the
/// first line only: what it misses, the acquire's confirmation catches when
/// two contenders are let in ([`crate::bucket::BucketLease::acquire_as`]).
pub const MISS: f64 = 1e-2;
/// The most rounds the acquire's check runs (about 50 requests).
pub const ACQUIRE_MAX_ROUNDS: usize = 5;
/// The time after which the acquire's check starts no new round: it runs
/// its first two rounds whatever they take, and others only while it has
/// taken less than this, or while requests went unanswered (their rounds'
/// winners are in doubt) or were answered later than 1.5 s. A round counts
/// with each of its races at its median request, not its slowest: one
/// straggler does not spend it. On a slow or loaded store (Ceph RGW under
/// CI's load took 2.6 s for four rounds) the check ends less sure than
/// [`MISS`] (it says so, with the chance it reached), and the acquire's
/// confirmation is what catches two contenders let in. SeaweedFS answers the
/// losers queued behind its lock one to three seconds late, so there the
/// check runs to its target or [`ACQUIRE_MAX_ROUNDS`]: 1–9 s of rounds
/// measured quiet on loopback (docs/simulator.md, "What it costs an acquire").
pub const ACQUIRE_BUDGET: Duration = Duration::from_secs(1);
/// How the acquire's check decides how many rounds to run.
pub const ACQUIRE_ROUNDS: Rounds = Rounds::Until {
    window: WINDOW,
    miss: MISS,
    most: ACQUIRE_MAX_ROUNDS,
    budget: ACQUIRE_BUDGET,
};
/// The fewest rounds a check with a target runs (its first estimate of the
/// spread rests on more than one round).
const MIN_ROUNDS: usize = 2;

/// How many rounds a race runs (each stops early on two winners in a round).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rounds {
    /// This many (`leasectl probe --race`).
    Fixed(usize),
    /// Until a check-then-write window of `window` would have shown with
    /// probability at least `1 - miss`, at most `most` rounds (the acquire's
    /// check).
    Until {
        /// The window to see.
        window: Duration,
        /// The chance of missing it to get below.
        miss: f64,
        /// The most rounds.
        most: usize,
        /// No round starts after the race has taken this long (the first
        /// two always run, and every round while requests went unanswered).
        budget: Duration,
    },
}

impl Rounds {
    /// The most rounds it may run (at least 1).
    fn most(self) -> usize {
        match self {
            Rounds::Fixed(n) => n.max(1),
            Rounds::Until { most, .. } => most.max(1),
        }
    }
}
/// The fewest concurrent requests a race can have.
pub const MIN_CONTENDERS: usize = 2;
/// The most concurrent requests a race may have (`--race=N` is refused above).
pub const MAX_CONTENDERS: usize = 64;

/// A primitive a lease uses, raced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Primitive {
    /// `PUT If-None-Match: *` on one absent key (the acquire of an absent lease).
    CreateAbsent,
    /// `PUT If-Match: <ETag>` on one current ETag (a takeover of a stale lease, a renewal).
    IfMatchCurrent,
    /// `DELETE If-Match: <ETag>` on one current ETag (a release).
    DeleteCurrent,
}

impl Primitive {
    /// The request, for people.
    pub fn request(self) -> &'static str {
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
pub enum RaceVerdict {
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
    pub fn as_str(self) -> &'static str {
        match self {
            RaceVerdict::Atomic => "atomic",
            RaceVerdict::NotAtomic => "not atomic",
            RaceVerdict::NotRun => "not run",
        }
    }
}

/// The rounds of one primitive.
#[derive(Debug, Clone, Serialize)]
pub struct Race {
    /// Which primitive.
    pub primitive: Primitive,
    /// The request, for people.
    pub request: &'static str,
    /// Concurrent requests per round.
    pub contenders: usize,
    /// Rounds run.
    pub rounds: usize,
    /// Winners in each round, in order (exactly 1 each on an atomic service).
    pub winners: Vec<usize>,
    /// The most winners seen in one round.
    pub max_winners: usize,
    /// Answers seen over all rounds, by kind (`200`, `412`, `409, read back: written`, ...).
    pub answers: BTreeMap<String, usize>,
    /// The verdict.
    pub verdict: RaceVerdict,
    /// Wall time of its rounds (their read-backs included), milliseconds.
    pub elapsed_ms: u64,
    /// Why it was not run, or what a round without a winner means.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Race {
    /// One line for the text report.
    pub fn line(&self) -> String {
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
pub struct RaceReport {
    /// The scratch key raced on (removed again).
    pub scratch_key: String,
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
    pub elapsed_ms: u64,
    /// Problems removing the scratch key (empty when it was removed).
    pub changed: Vec<String>,
    /// How sure the race got, where it ran to a target (the acquire's check).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Confidence>,
    /// After two winners: the header the service ignored outright when asked
    /// one request at a time (`If-None-Match`, `If-Match`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignores: Option<&'static str>,
    /// The 90th percentile of the round-trip times of the contenders' writes
    /// answered as carried out after the first round (of every contender's,
    /// when none was),
    /// microseconds: what the acquire's confirmation waits by
    /// ([`confirm_after`]).
    #[serde(skip)]
    pub round_trip_q90_us: Option<u64>,
}

impl RaceReport {
    /// The first primitive with two winners in one round, if any.
    pub fn not_atomic(&self) -> Option<&Race> {
        self.races
            .iter()
            .find(|r| r.verdict == RaceVerdict::NotAtomic)
    }

    /// One sentence on a not-atomic finding: which request, how many winners.
    pub fn finding(&self) -> Option<String> {
        self.not_atomic().map(|r| {
            format!(
                "{} is not atomic: {} of {} concurrent requests won one round",
                r.request, r.max_winners, r.contenders
            )
        })
    }

    /// Why no lease on this service can exclude anyone, if the race found it.
    pub fn broken(&self) -> Option<Broken> {
        match (self.ignores, self.finding()) {
            (Some(h), _) => Some(Broken::Ignores(h)),
            (None, Some(f)) => Some(Broken::NotAtomic(f)),
            (None, None) => None,
        }
    }

    /// What it cost, for people: `260 requests in 1.2s`.
    pub fn cost(&self) -> String {
        format!(
            "{} requests in {}",
            self.requests,
            format_secs(self.elapsed_ms as f64 / 1000.0)
        )
    }
}

/// The race probe's scratch key for a probe scratch key `probe_key`
/// (`{root}.leasectl-probe/{id}` → `{root}.leasectl-probe/{id}.race`).
pub fn race_key(probe_key: &str) -> String {
    format!("{probe_key}.race")
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
/// concurrent requests each (fewer when a round had two winners) (`n` clamped
/// to [`MIN_CONTENDERS`]..=[`MAX_CONTENDERS`]): `leasectl probe --race`. See
/// [`race_with`].
///
/// Errors: as [`race_with`].
pub async fn race(
    store: &dyn ObjectStore,
    probe_key: &str,
    n: usize,
    rounds: usize,
) -> Result<RaceReport, StoreError> {
    race_with(store, probe_key, n, Rounds::Fixed(rounds)).await
}

/// Races the primitives on `race_key(probe_key)`, rounds of `n` concurrent
/// requests each (`n` clamped to [`MIN_CONTENDERS`]..=[`MAX_CONTENDERS`]) as
/// `plan` says, ending after a round with two winners (the verdict cannot
/// change). The conditional DELETE race runs only where the store's
/// [`crate::store::Capabilities`] say conditional DELETE is honoured (the
/// seven steps or the acquire's check find that out first), and with a
/// target only in the first round. The scratch key is removed afterwards,
/// whatever happened.
///
/// Errors: a store failure that is not a contender's answer (access denied,
/// credentials, a read-back that failed); the scratch key is still removed.
pub async fn race_with(
    store: &dyn ObjectStore,
    probe_key: &str,
    n: usize,
    plan: Rounds,
) -> Result<RaceReport, StoreError> {
    race_overlapped(store, probe_key, n, plan, None).await
}

/// [`race_with`], with an acquire's write beside its later rounds where
/// `overlap` is given ([`check_once_overlapped`]). The time spent waiting for
/// the acquire's write is not counted in the report's `elapsed_ms`.
async fn race_overlapped(
    store: &dyn ObjectStore,
    probe_key: &str,
    n: usize,
    plan: Rounds,
    overlap: Option<Overlap>,
) -> Result<RaceReport, StoreError> {
    let n = n.clamp(MIN_CONTENDERS, MAX_CONTENDERS);
    let key = race_key(probe_key);
    let started = Instant::now();
    let mut t = Tally::default();
    t.lean = matches!(plan, Rounds::Until { .. });
    t.overlap = overlap;
    let result = run(store, &key, n, plan, &mut t).await;
    let changed = remove(store, &key, &mut t).await;
    let ran = result?;
    let races = ran.races;
    let verdict = if races.iter().any(|r| r.verdict == RaceVerdict::NotAtomic) {
        RaceVerdict::NotAtomic
    } else if races.iter().any(|r| r.verdict == RaceVerdict::Atomic) {
        RaceVerdict::Atomic
    } else {
        RaceVerdict::NotRun
    };
    let rounds = match plan {
        Rounds::Fixed(r) => r.max(1),
        Rounds::Until { .. } => races.iter().map(|r| r.rounds).max().unwrap_or(0),
    };
    let report = RaceReport {
        scratch_key: key,
        contenders: n,
        rounds,
        races,
        verdict,
        requests: t.requests,
        elapsed_ms: started.elapsed().saturating_sub(t.beside).as_millis() as u64,
        changed,
        confidence: ran.confidence,
        ignores: ran.ignores,
        round_trip_q90_us: ran.round_trip_q90_us,
    };
    log_report(store, &report);
    Ok(report)
}

/// Says what a race found: an error for a broken service, else what it cost
/// and, with a target, how sure it got (the acquire's confirmation catches
/// what the check may have missed: not a warning).
fn log_report(store: &dyn ObjectStore, report: &RaceReport) {
    let name = store.describe();
    if let Some(f) = report.finding() {
        tracing::error!("{name}: {f}");
        return;
    }
    tracing::info!(
        "{name}: conditional requests atomic under {} rounds of {} concurrent requests ({}{})",
        report.rounds,
        report.contenders,
        report.cost(),
        report
            .confidence
            .map(|c| format!("; {}", c.sentence()))
            .unwrap_or_default()
    );
}

pub mod confidence;
mod rounds;
mod verdict;

pub use confidence::Confidence;
pub use rounds::creates_at_once;
use rounds::{remove, run, Tally};
#[cfg(feature = "sim")]
pub use verdict::forget;
pub use verdict::{
    broken, caught, check_once, check_once_overlapped, check_once_ran, confirm_after, seen_within,
    wait_for, Broken, Overlap, CONFIRM_AFTER_MAX, CONFIRM_AFTER_MIN,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::local::LocalStore;

    /// A race's verdict and note, as `probe --json` writes them: an atomic
    /// race with a round of no winner says so in its note; one where every
    /// round had its winner, and a not-atomic one, carry none.
    #[test]
    fn the_no_winner_note_only_on_an_atomic_race_with_such_a_round() {
        let judged = |winners: Vec<usize>| {
            let mut r = new_race(Primitive::CreateAbsent, 4);
            r.winners = winners;
            judge(&mut r);
            (r.verdict, r.note.is_some())
        };
        assert_eq!(judged(vec![1, 0]), (RaceVerdict::Atomic, true));
        assert_eq!(judged(vec![1, 1]), (RaceVerdict::Atomic, false));
        assert_eq!(judged(vec![2, 0]), (RaceVerdict::NotAtomic, false));
    }

    /// What `probe` shows of a race: the request raced (`probe --json`'s
    /// `request`: its method and precondition) and the verdict in words.
    #[test]
    fn a_race_names_its_request_and_verdict() {
        for (p, method, header) in [
            (Primitive::CreateAbsent, "PUT ", "If-None-Match: *"),
            (Primitive::IfMatchCurrent, "PUT ", "If-Match: <"),
            (Primitive::DeleteCurrent, "DELETE ", "If-Match: <"),
        ] {
            let request = p.request();
            assert!(
                request.starts_with(method) && request.contains(header),
                "{p:?}: {request:?}"
            );
        }
        let line = |winners: Vec<usize>| {
            let mut r = new_race(Primitive::CreateAbsent, 4);
            r.winners = winners;
            judge(&mut r);
            r.line()
        };
        assert!(
            line(vec![2, 1]).ends_with("most 2 — not atomic"),
            "{}",
            line(vec![2, 1])
        );
        assert!(
            line(vec![1, 1]).ends_with("most 1 — atomic"),
            "{}",
            line(vec![1, 1])
        );
        assert!(
            line(vec![]).ends_with("most 0 — not run"),
            "{}",
            line(vec![])
        );
    }

    /// On an atomic store (a directory's, whose create and replace are
    /// atomic) the race says `atomic`, overall and for each primitive it ran.
    #[tokio::test]
    async fn an_atomic_store_is_found_atomic() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let report = race(&store, "db/.leasectl-probe/t", 4, 2).await.unwrap();
        assert_eq!(report.verdict, RaceVerdict::Atomic, "{report:?}");
        for r in &report.races {
            assert_eq!(r.verdict, RaceVerdict::Atomic, "{r:?}");
        }
    }
}
