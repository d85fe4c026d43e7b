//! What the console's once-a-second tick judges again.
//!
//! At 10,000 rows, judging every row every second was a third of the
//! console's own CPU. Between two
//! whole judgements (each snapshot and refresh), a row's verdict changes
//! only at an instant the rules give ([`crate::bucket::judge::next_change_view`]):
//! a fresh lease turns stale at its expiry; a problem that quotes a moving
//! time changes at any tick. So a tick judges the rows on screen (their
//! ages move), the rows due to change, and the rows that always may; the
//! others keep their verdict and their last ages, which only the rows on
//! screen show. A sort (by age or expiry among them) first judges every row.

use chrono::{DateTime, Utc};

use crate::bucket::judge::{next_change_view, VerdictChange};
use crate::snapshot::Snapshot;

/// The rows a tick must judge again, planned at the last whole judgement.
#[derive(Debug, Default)]
pub(super) struct Judging {
    /// (instant, target, row) of each verdict due to change, latest first
    /// (the next one is popped from the end).
    due: Vec<(DateTime<Utc>, usize, usize)>,
    /// (target, row) of each verdict that may change at any tick.
    always: Vec<(usize, usize)>,
    /// Some rows were judged at a tick and the others not since.
    pub(super) partial: bool,
    /// Whether any row's age is unknown (the reader's clock is too far from
    /// the service's): the header's CLOCK OFF, without walking every row at
    /// every frame.
    pub(super) age_unknown: bool,
}

impl Judging {
    /// The plan for `s`, just judged as a whole at `now`.
    pub(super) fn of(s: &Snapshot, now: DateTime<Utc>) -> Self {
        let mut j = Self::default();
        for (ti, t) in s.targets.iter().enumerate() {
            for (pi, p) in t.prefixes.iter().enumerate() {
                j.age_unknown |= p.age_unknown;
                match next_change_view(p.view(), now) {
                    VerdictChange::Never => {}
                    VerdictChange::At(at) => j.due.push((at, ti, pi)),
                    VerdictChange::Always => j.always.push((ti, pi)),
                }
            }
        }
        j.due.sort_unstable_by(|a, b| b.cmp(a));
        j
    }

    /// The rows whose verdict is due at `now` (taken from the plan) and
    /// those that may change at any tick.
    pub(super) fn take_due(&mut self, now: DateTime<Utc>) -> Vec<(usize, usize)> {
        let mut out = self.always.clone();
        while let Some(&(at, ti, pi)) = self.due.last() {
            if at > now {
                break;
            }
            self.due.pop();
            out.push((ti, pi));
        }
        out
    }
}
