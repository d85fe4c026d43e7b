//! The defects of issue 32 §2 as switches, compiled only with the `sim`
//! feature: each makes the engine break one rule, so the simulator's checker
//! can show that it notices.

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
}

/// Every defect with its name, as `--defect NAME` takes it.
pub const ALL: [(&str, Defect); 8] = [
    ("fence-never-closes", Defect::FenceNeverCloses),
    ("fence-at-full-ttl", Defect::FenceAtFullTtl),
    ("renew-unconditional", Defect::RenewUnconditional),
    ("generation-from-clock", Defect::GenerationFromClock),
    ("race-check-skipped", Defect::RaceCheckSkipped),
    ("lost-answer-ignored", Defect::LostAnswerIgnored),
    ("release-deletes-any", Defect::ReleaseDeletesAny),
    ("offset-check-off", Defect::OffsetCheckOff),
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
