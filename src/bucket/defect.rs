//! The defects of issue 32 §2 as switches, used only by the simulator (the
//! `sim` feature): each makes the engine break one rule, so the simulator's
//! checker can show that it notices. Also the simulator's seams: seeded
//! instance ids ([`seed_ids`]), so that a takeover's made-up ids replay, and
//! fence watchdogs on the runtime's tasks ([`watchdog_on_task`]), so that
//! they read simulated time.

use std::cell::Cell;

/// One defect the checker must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// `may_write` always true; the fence never closes.
    FenceNeverCloses,
    /// The fence closes at a full TTL instead of two thirds.
    FenceAtFullTtl,
    /// A renewal sent without `If-Match`.
    RenewUnconditional,
    /// The generation taken from the creator's clock after a release. Today's
    /// rule is that one already ([`crate::bucket::next_generation`]); once the
    /// monotonic rule lands, its call site tests [`on`] for this defect and
    /// restores the clock rule.
    GenerationFromClock,
    /// The race check skipped (a non-atomic store passes).
    RaceCheckSkipped,
    /// A lost answer not adopted: the holder waits out its own lease.
    LostAnswerIgnored,
    /// A release deletes the LEASE without checking it is still ours.
    ReleaseDeletesAny,
    /// The clock-offset check against the service is skipped: a holder or
    /// contender whose clock is beyond TTL/12 of the service's goes on. Used
    /// to measure the safety envelope (with offsets drawn beyond TTL/12).
    OffsetCheckOff,
    /// A forced takeover of a live lease does not wait for the replaced
    /// holder's fence: the new holder may write at once.
    TakeoverFenceIgnored,
    /// The fence closes at a sixth of the TTL, before the renewal due at a
    /// third: a live holder evicts itself (a surviving mutant of
    /// `fence_window`, `*` → `/`, until L1 looked for it).
    FenceClosesEarly,
    /// `FenceCell::close` does nothing: the fence still reports its deadline
    /// (`may_write` and the status read the clocks), but its close never
    /// reaches the command (no hook runs: no SIGTERM, no fence fd closed) —
    /// a mutant no simulated writer that asked `may_write` could see, until
    /// the commands ran as `bucket hold` runs them (S5).
    FenceCloseNoop,
}

/// Every defect with its name, as `--defect NAME` takes it.
pub const ALL: [(&str, Defect); 11] = [
    ("fence-never-closes", Defect::FenceNeverCloses),
    ("fence-at-full-ttl", Defect::FenceAtFullTtl),
    ("renew-unconditional", Defect::RenewUnconditional),
    ("generation-from-clock", Defect::GenerationFromClock),
    ("race-check-skipped", Defect::RaceCheckSkipped),
    ("lost-answer-ignored", Defect::LostAnswerIgnored),
    ("release-deletes-any", Defect::ReleaseDeletesAny),
    ("offset-check-off", Defect::OffsetCheckOff),
    ("takeover-fence-ignored", Defect::TakeoverFenceIgnored),
    ("fence-closes-early", Defect::FenceClosesEarly),
    ("fence-close-noop", Defect::FenceCloseNoop),
];

/// The defect of `name`, if any.
pub fn by_name(name: &str) -> Option<Defect> {
    ALL.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

/// The name of `d`.
pub fn name(d: Defect) -> &'static str {
    ALL.iter()
        .find(|(_, x)| *x == d)
        .map(|(n, _)| *n)
        .unwrap_or("?")
}

thread_local! {
    static ACTIVE: Cell<Option<Defect>> = const { Cell::new(None) };
}

/// Applies `d` (or none) on this thread (the simulator's runtime is
/// single-threaded).
pub fn set(d: Option<Defect>) {
    ACTIVE.with(|a| a.set(d));
}

/// True while `d` is applied on this thread.
pub fn on(d: Defect) -> bool {
    ACTIVE.with(|a| a.get()) == Some(d)
}

thread_local! {
    static IDS: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
    /// How many stamp phases and scratch keys this thread made while seeded.
    static COUNTS: Cell<Option<(u32, u64)>> = const { Cell::new(None) };
}

/// Makes [`crate::bucket::new_instance_id`] draw from `seed` on this thread
/// (`None`: from the system's generator again), so that the ids a takeover
/// makes up replay with the simulator's seed; the contenders' stamp phases
/// and the scratch keys' numbers are counted on this thread too (the
/// process-wide counts run on with every test of the binary).
pub(crate) fn seed_ids(seed: Option<u64>) {
    IDS.with(|i| i.set(seed.map(|s| (s, 0))));
    COUNTS.with(|c| c.set(seed.map(|_| (0, 0))));
}

/// While seeded: the next contender's stamp phase (1, 2, … in the order the
/// contenders are made, [`crate::bucket::own::new_phase`]).
pub(crate) fn next_phase() -> Option<u16> {
    COUNTS.with(|c| {
        let (phases, keys) = c.get()?;
        c.set(Some((phases + 1, keys)));
        Some((1 + phases % 999) as u16)
    })
}

/// While seeded: the next scratch key's number on this thread.
pub(crate) fn next_scratch() -> Option<u64> {
    COUNTS.with(|c| {
        let (phases, keys) = c.get()?;
        c.set(Some((phases, keys + 1)));
        Some(keys)
    })
}

/// The next id of the seeded sequence, if [`seed_ids`] set one: 32 hex
/// digits, as the system's ids.
pub(crate) fn next_id() -> Option<String> {
    IDS.with(|i| {
        let (seed, n) = i.get()?;
        i.set(Some((seed, n + 1)));
        use rand::{Rng, SeedableRng};
        let mut rng =
            rand::rngs::StdRng::seed_from_u64(seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        Some(hex::encode(rng.random::<[u8; 16]>()))
    })
}

thread_local! {
    static TASK_WATCHDOG: Cell<bool> = const { Cell::new(false) };
}

/// Makes [`crate::bucket::KeepAlive::start`] on this thread watch its fence
/// from a task of the runtime instead of an OS thread, whose time is not the
/// simulation's: the keep-alives the takeover executor starts for itself.
pub(crate) fn watchdog_on_task(on: bool) {
    TASK_WATCHDOG.with(|t| t.set(on));
}

/// True while [`watchdog_on_task`] is set on this thread.
pub(crate) fn task_watchdog() -> bool {
    TASK_WATCHDOG.with(|t| t.get())
}
