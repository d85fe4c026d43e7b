//! The read scheduler: when each LEASE is read again, and which rows are in
//! view ([`Focus`]) and so read at every refresh.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::bucket::{judge, LeaseState, Observed};

/// The last read of one LEASE, and when it must be read again.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    /// What the read gave (an error as its sentence).
    pub(super) result: Result<Observed, String>,
    /// When it was read (reader's wall clock).
    pub(super) read_at: DateTime<Utc>,
    /// When it must be read again (reader's monotonic clock).
    pub(super) due: Duration,
}

/// Which rows the reader is looking at: they are read at every refresh,
/// whatever their schedule. Shared between a console and its [`Gatherer`](super::Gatherer);
/// the lock is held only to swap or test a set, never across an `.await`.
#[derive(Debug, Default)]
pub struct Focus(std::sync::Mutex<HashSet<(usize, String)>>);

impl Focus {
    /// Replaces the rows in view: (index of the TARGET, prefix).
    pub fn set(&self, rows: HashSet<(usize, String)>) {
        if let Ok(mut g) = self.0.lock() {
            *g = rows;
        }
    }

    /// The rows in view now.
    pub(super) fn snapshot(&self) -> HashSet<(usize, String)> {
        self.0.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

/// When each LEASE is read again (issue 18: "watching costs what changes,
/// not what exists"). Without a schedule every LEASE is read at every gather.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Time between two gathers.
    pub refresh: Duration,
    /// Time between two reads of a LEASE that is stale, suspect, malformed,
    /// absent or unreadable and not in view (the listing's cadence).
    pub relist: Duration,
}

impl Schedule {
    /// The longest a fresh lease that is not in view goes unread, whatever its
    /// TTL: a release or takeover of a long lease still shows within this.
    pub const MAX_FRESH_WAIT: Duration = Duration::from_secs(300);

    /// When to read again a LEASE read at `mono` (monotonic) / `wall`, that
    /// gave `result`. A fresh lease is read during the last refresh before
    /// it could turn stale (by then a live holder has renewed it: holders
    /// renew every TTL/3), and once more just after, if it had not been
    /// renewed; the others at the relist cadence, spread by ±25 % so that
    /// thousands of them do not come due at once.
    pub(super) fn next_due(
        &self,
        result: &Result<Observed, String>,
        wall: DateTime<Utc>,
        mono: Duration,
    ) -> Duration {
        let jitter = rand::random_range(0.75..1.25);
        let relist = mono + self.relist.mul_f64(jitter);
        let Ok(obs) = result else { return relist };
        let j = judge(obs, wall);
        let (LeaseState::Fresh, Some(left)) = (j.state, j.expires_in_s) else {
            return relist;
        };
        let left = Duration::try_from_secs_f64(left.max(0.0)).unwrap_or(Self::MAX_FRESH_WAIT);
        let lead = self.refresh + Duration::from_secs(1);
        let wait = if left > lead {
            left - lead
        } else {
            // Read within its last refresh: once more just after the moment
            // it could turn stale, to show that within one refresh (or the
            // late renewal, if its holder cut it close).
            left + Duration::from_millis(500)
        };
        mono + wait.min(Self::MAX_FRESH_WAIT)
    }
}

/// What to read in one gather of one target.
pub(super) struct Plan {
    /// `None`: read everything.
    pub(super) schedule: Option<Schedule>,
    /// This target's rows in view.
    pub(super) focus: HashSet<String>,
    /// This target's index (for progress reports).
    pub(super) index: usize,
}

impl Plan {
    /// Whether to read `prefix` (last read as `entry`) at monotonic `mono`.
    pub(super) fn wants(&self, prefix: &str, entry: Option<&Entry>, mono: Duration) -> bool {
        let (Some(_), Some(e)) = (self.schedule, entry) else {
            return true;
        };
        e.due <= mono || self.focus.contains(prefix)
    }
}
