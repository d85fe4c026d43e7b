//! The deterministic simulator's CI budget (issue 32): `cargo test --features
//! sim --test sim`. The real engine runs against the simulated store and
//! clocks (src/sim/); these tests check that a seed replays byte for byte,
//! that the default run finds no violation (S2 excepted until the monotonic
//! generation lands: see `default_run`), and that each defect of §2 is caught
//! within its seed budget.

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

/// The default run: no violation of S1, S3, S4 or L1 over the CI seeds.
///
/// Two findings are reported, not asserted, until the engine changes:
/// - S2, while the generation after a release is taken from the creator's
///   clock (`bucket::record::next_generation`, issue 32 §3): a host whose
///   clock is behind hands out a smaller generation. Once §3 lands, S2 joins
///   the assertion (`MONOTONIC_GENERATION`).
/// - S4 on a not-atomic store: the acquire's race check is one round of four
///   concurrent creates (`bucket::race::ACQUIRE_ROUNDS`), which misses a
///   check-then-write window of 5-40 ms under 1-30 ms of request jitter in a
///   few percent of checks; each holder checks once, so a fleet finds one
///   that misses (`RACE_CHECK_CERTAIN` once the check is made certain).
#[test]
fn default_run() {
    const MONOTONIC_GENERATION: bool = true;
    const RACE_CHECK_CERTAIN: bool = false;
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
        "{DEFAULT_SEEDS} seeds, {lifetimes} lifetimes; known findings: {s2} S2 (until §3), \
         {s4_not_atomic} S4 on not-atomic stores (race check missed)"
    );
    assert!(lifetimes > DEFAULT_SEEDS * 5, "{lifetimes}");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
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
    release_deletes_any_is_caught, "release-deletes-any", S1, 400;
    /// A forced takeover whose new holder writes at once, while the replaced
    /// holder's fence is still open: two writers (the simulated operator's
    /// forced takeovers, then hold).
    takeover_fence_ignored_is_caught, "takeover-fence-ignored", S1, 400;
    /// A fence that closes before the renewal that would keep it open: the
    /// holder evicts itself on a store that failed nothing (L1).
    fence_closes_early_is_caught, "fence-closes-early", L1, 400;
}
