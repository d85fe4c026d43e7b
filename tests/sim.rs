//! The deterministic simulator's CI budget (issue 32): `cargo test --features
//! sim --test sim`. The real engine runs against the simulated store and
//! clocks (src/sim/); these tests check that a seed replays byte for byte,
//! that the default run finds no violation, that stores breaking exclusion
//! (checking then writing, ignoring a precondition now and then) never let a
//! lost exclusion reach a command, that best-effort's overlaps stay bounded,
//! and that each defect is caught within its seed budget.

use leasectl::sim::defect::{self, Defect};
use leasectl::sim::Variant;
use leasectl::sim::{run_seed, Options, Property};

/// Seeds of the default run in CI.
const DEFAULT_SEEDS: u64 = 400;

#[test]
fn a_seed_replays_byte_for_byte() {
    for seed in [3, 18, 59] {
        let a = run_seed(Options::new(seed));
        let b = run_seed(Options::new(seed));
        assert!(a.history.lines().count() > 10, "{}", a.history);
        assert_eq!(a.history, b.history, "seed {seed}");
        assert_eq!((a.lifetimes, a.writes), (b.lifetimes, b.writes));
    }
    // Seed 92 suspends a holder past its renewal: when it resumes, its
    // keep-alive's stop, closed fence and renewal timer are ready at once,
    // and a random pick among them (tokio's default) made the seed replay
    // differently about one run in three. Eight runs, one history.
    let first = run_seed(Options::new(92));
    for _ in 0..7 {
        let again = run_seed(Options::new(92));
        assert_eq!(first.history, again.history, "seed 92");
        assert_eq!(
            (first.lifetimes, first.writes),
            (again.lifetimes, again.writes)
        );
    }
    // Different seeds, different worlds.
    assert_ne!(
        run_seed(Options::new(1)).history,
        run_seed(Options::new(2)).history
    );
}

/// The default run: no violation of S1, S2, S3, S4, S5 or L1 over the CI
/// seeds (every store variant drawn: healthy, ignoring every precondition,
/// checking then writing, ignoring one request in 100 or in 1,000).
///
/// S4 on a store that checks then writes was reported, not asserted, while
/// the acquire's race check was one round of four concurrent creates (it
/// missed a 5-40 ms window under 1-30 ms of jitter in a few percent of
/// checks). It is asserted since the acquire confirms its record once every
/// write that raced it has landed, and a process that caught the store
/// refuses it before writing (`RACE_CHECK_CERTAIN`).
#[test]
fn default_run() {
    const MONOTONIC_GENERATION: bool = true;
    const RACE_CHECK_CERTAIN: bool = true;
    let mut lifetimes = 0;
    let (mut s2, mut s4_not_atomic) = (0, 0);
    let mut bad = Vec::new();
    for seed in 0..DEFAULT_SEEDS {
        let out = run_seed(Options::new(seed));
        lifetimes += out.lifetimes;
        for v in out.violations {
            if v.property == Property::S2 && !MONOTONIC_GENERATION {
                s2 += 1;
                continue;
            }
            if v.property == Property::S4 && v.what.contains("not-atomic") && !RACE_CHECK_CERTAIN {
                s4_not_atomic += 1;
                continue;
            }
            bad.push(format!(
                "seed {seed}: {:?} {} (replay: scripts/simulate.sh --seed {seed} --history)",
                v.property, v.what
            ));
        }
    }
    eprintln!(
        "{DEFAULT_SEEDS} seeds, {lifetimes} lifetimes; known findings: {s2} S2, \
         {s4_not_atomic} S4 on not-atomic stores"
    );
    assert!(lifetimes > DEFAULT_SEEDS * 5, "{lifetimes}");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Runs `seeds` seeds from `first` with `opts` changed by `set`, and returns
/// the violations found (as replay lines) and the outcomes.
fn run_many(
    first: u64,
    seeds: u64,
    set: impl Fn(&mut Options),
) -> (Vec<String>, Vec<leasectl::sim::Outcome>) {
    let mut bad = Vec::new();
    let mut outs = Vec::new();
    for seed in first..first + seeds {
        let mut o = Options::new(seed);
        set(&mut o);
        let out = run_seed(o);
        for v in &out.violations {
            bad.push(format!("seed {seed}: {:?} {}", v.property, v.what));
        }
        outs.push(out);
    }
    (bad, outs)
}

/// Stores that break exclusion, every seed: one that checks then writes
/// (1-40 ms later, under 1-30 ms of jitter), and ones that carry out one
/// conditional write in 100 or in 1,000 whose precondition did not hold. No
/// violation of any property (S4: no acquire on the first; on the others,
/// no lost exclusion reaches a command), though the stores do break it.
/// (`scripts/simulate.sh --seeds 10000 --store NAME` runs the 10,000 seeds
/// of docs/simulator.md.)
#[test]
fn broken_stores_are_caught() {
    for (name, seeds) in [
        ("not-atomic", 60),
        ("ignores-1-in-100", 60),
        ("ignores-1-in-1000", 40),
    ] {
        let v = Variant::by_name(name).expect("a store variant of that name");
        let (bad, outs) = run_many(1_000, seeds, |o| o.store = Some(v));
        let lies: u64 = outs.iter().map(|o| o.lies).sum();
        let lifetimes: u64 = outs.iter().map(|o| o.lifetimes).sum();
        eprintln!("{name}: {seeds} seeds, {lifetimes} lifetimes, {lies} writes let through against their precondition");
        assert!(lies > 0, "{name}: the store never broke exclusion");
        if v == Variant::NotAtomic {
            assert_eq!(lifetimes, 0, "{name}: no lease was ever taken");
        } else {
            assert!(
                lifetimes > seeds,
                "{name}: leases were taken between its lapses"
            );
        }
        assert!(
            bad.is_empty(),
            "{name} (replay with --store {name}):\n{}",
            bad.join("\n")
        );
    }
}

/// Seeds whose not-atomic store a holder's race check passed before the
/// budget counted each race at its median request: one contender's request
/// answered 1.5 s late spent the 1 s budget in two rounds, and the check
/// ended unsure ("unseen with probability 8e-1") and let the holder acquire
/// (S4; found by the 10,000-seed run of docs/simulator.md).
#[test]
fn a_straggler_does_not_end_the_race_check_unsure() {
    let v = Variant::by_name("not-atomic").expect("a store variant of that name");
    for seed in [1115, 1610, 5182] {
        let (bad, outs) = run_many(seed, 1, |o| o.store = Some(v));
        assert!(
            outs[0].lies > 0,
            "seed {seed}: the store never broke exclusion"
        );
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}

/// A seed whose store ignored a probe's precondition after a holder took
/// over its own released record: the acquire refused the store and deleted
/// its record, the generation went with it, and the next holder, whose clock
/// was 0.68 s behind, created a smaller one (S2; found by the 10,000-seed
/// run of docs/simulator.md). A refusal over a record now marks ours
/// released, keeping the generation.
#[test]
fn a_refusal_over_a_record_keeps_its_generation() {
    let v = Variant::by_name("ignores-1-in-100").expect("a store variant of that name");
    let (bad, outs) = run_many(9576, 1, |o| o.store = Some(v));
    assert!(outs[0].lies > 0, "the store never broke exclusion");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Seeds whose store ignored a precondition while the race check ran beside
/// the acquire's write: a write answered too late to count on being seen was
/// left to expire after a failure after it, and the next try took it up as
/// a write of its own — handing the lease out at once, with a generation
/// smaller than that of a holder it had replaced unseen (S2; found by the
/// 10,000-seed run of this branch, seeds 4483, 5832 and 6570). A write of
/// ours that may hide a holder now goes the slow way when taken up again.
#[test]
fn a_write_left_to_expire_is_taken_up_the_slow_way() {
    let v = Variant::by_name("ignores-1-in-100").expect("a store variant of that name");
    for seed in [4483, 5832, 6570] {
        let (bad, outs) = run_many(seed, 1, |o| o.store = Some(v));
        assert!(
            outs[0].lies > 0,
            "seed {seed}: the store never broke exclusion"
        );
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}

/// Best-effort exclusion in the world: lost updates happen and let two
/// holders write (measured, as docs/simulator.md reports), but each overlap
/// ends within five sixths of a TTL (B1), every loser learns it lost (S3)
/// and has its command stopped within the grace (S5).
#[test]
fn best_effort_overlaps_are_bounded() {
    let (bad, outs) = run_many(0, 60, |o| o.best_effort = true);
    let lost: u64 = outs.iter().map(|o| o.lost_updates).sum();
    let overlaps: Vec<u64> = outs.iter().flat_map(|o| o.overlaps_ms.clone()).collect();
    eprintln!(
        "best-effort: {lost} lost updates, {} with two writers, longest {} ms",
        overlaps.len(),
        overlaps.iter().max().copied().unwrap_or(0)
    );
    assert!(
        lost > 0 && !overlaps.is_empty(),
        "best-effort lets two writers in"
    );
    let bounded: Vec<_> = bad
        .iter()
        .filter(|v| {
            ["B1", "S3", "S5"]
                .iter()
                .any(|p| v.contains(&format!(": {p} ")))
        })
        .collect();
    assert!(bounded.is_empty(), "{bounded:?}");
}

/// Whether `d` gives a violation of `property` at `seed`: on a healthy store
/// (where the engine without the defect finds none), or for the race check
/// on a not-atomic one.
fn finds(d: Defect, property: Property, seed: u64) -> bool {
    let mut o = Options::new(seed);
    o.defect = Some(d);
    let out = run_seed(o);
    let store_ok = match d {
        Defect::RaceCheckSkipped => out.variant == Some(Variant::NotAtomic),
        _ => out.variant == Some(Variant::Healthy),
    };
    store_ok && out.violations.iter().any(|v| v.property == property)
}

/// The first seed from 0 at which `d` gives a violation of `property`.
fn caught(d: Defect, property: Property, budget: u64) -> Option<u64> {
    (0..budget).find(|&seed| finds(d, property, seed))
}

fn assert_caught(name: &str, property: Property, budget: u64) {
    let d = defect::by_name(name).expect("a defect of that name");
    let seed = caught(d, property, budget);
    eprintln!("{name}: {property:?} at seed {seed:?} (replay: scripts/simulate.sh --seed {} --defect {name} --history)", seed.unwrap_or(0));
    assert!(
        seed.is_some(),
        "{name} not caught as {property:?} within {budget} seeds"
    );
    // And it replays: the same seed, the same violation.
    assert!(finds(d, property, seed.unwrap_or(0)));
}

/// One test a defect: `caught!(test_name, "defect-name", property, seed budget)`
/// asserts that the defect is caught within the budget and replays.
macro_rules! caught {
    ($($(#[$doc:meta])* $test:ident, $name:literal, $property:ident, $budget:literal;)*) => {$(
        $(#[$doc])*
        #[test]
        fn $test() {
            assert_caught($name, Property::$property, $budget);
        }
    )*};
}

caught! {
    fence_never_closes_is_caught, "fence-never-closes", S1, 200;
    fence_at_full_ttl_is_caught, "fence-at-full-ttl", S1, 400;
    renew_unconditional_is_caught, "renew-unconditional", S1, 400;
    generation_from_clock_is_caught, "generation-from-clock", S2, 400;
    race_check_skipped_is_caught, "race-check-skipped", S4, 200;
    /// The holder refused its own record (its create's answer lost) is L1: the
    /// next process must wait the lease out (`World::check_refused_own`).
    lost_answer_ignored_is_caught, "lost-answer-ignored", L1, 400;
    /// A release that deletes without checking the record is still its own
    /// (and so without leaving a released record): since a lease whose fence ran
    /// out is left to expire rather than released, the deletion no longer meets
    /// another holder's record (S1, as it did); it loses the generation, and the
    /// next holder's, taken from a clock behind, goes back (S2).
    release_deletes_any_is_caught, "release-deletes-any", S2, 400;
    /// A forced takeover whose new holder writes at once, while the replaced
    /// holder's fence is still open: two writers (the simulated operator's
    /// forced takeovers, then hold).
    takeover_fence_ignored_is_caught, "takeover-fence-ignored", S1, 400;
    /// A fence that closes before the renewal that would keep it open: the
    /// holder evicts itself on a store that failed nothing (L1).
    fence_closes_early_is_caught, "fence-closes-early", L1, 400;
    /// `FenceCell::close` made a no-op: `may_write` and the fence's status still
    /// read the deadline, so a writer that asked them stopped anyway; a command
    /// run as `bucket hold` runs it is stopped only by the close's hook, which
    /// never runs (S5: it writes past its deadline and the grace).
    fence_close_noop_is_caught, "fence-close-noop", S5, 100;
}
