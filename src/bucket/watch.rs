//! [`LeaseWatch`]: what a contender has seen of a suspect or malformed lease,
//! and since when, on its own monotonic clock.

use std::time::Duration;

/// Tracks one foreign record across attempts. A suspect or malformed record
/// may be taken over once the same ETag has been seen unchanged for one of
/// the contender's own TTLs (bucket-lease spec, "A lease stamped far in the
/// future"); any change of ETag starts the watch again.
#[derive(Debug, Clone)]
pub struct LeaseWatch {
    seen: Option<(String, Duration)>,
    /// The microsecond phase this contender's stamps fall on
    /// ([`super::own::stamp`]), kept by the lease it acquires.
    pub(crate) phase: u16,
    /// The bodies this contender sent whose answers it did not see: a record
    /// naming its id is adopted only when it is one of them
    /// ([`super::own`]).
    pub(crate) sent: super::own::Sent,
    /// The bodies of this contender's writes that were answered too long
    /// after their read to count on being seen by a contender's
    /// confirmation, and not handed out (left to expire, where they may hide
    /// a holder): a later try that adopts one goes the slow way too.
    pub(crate) hiding: super::own::Sent,
}

impl Default for LeaseWatch {
    fn default() -> Self {
        Self {
            seen: None,
            phase: super::own::new_phase(),
            sent: super::own::Sent::default(),
            hiding: super::own::Sent::default(),
        }
    }
}

impl LeaseWatch {
    /// An empty watch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `etag` was seen at monotonic time `mono`; returns for how
    /// long it has been seen unchanged (zero when new or changed).
    pub fn observe(&mut self, etag: &str, mono: Duration) -> Duration {
        match &self.seen {
            Some((e, since)) if e == etag => mono.saturating_sub(*since),
            _ => {
                self.seen = Some((etag.to_owned(), mono));
                Duration::ZERO
            }
        }
    }

    /// The ETag being watched, and the monotonic time it was first seen.
    pub fn current(&self) -> Option<(&str, Duration)> {
        self.seen.as_ref().map(|(e, t)| (e.as_str(), *t))
    }

    /// Forgets what was seen.
    pub fn reset(&mut self) {
        self.seen = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_on_change() {
        let mut w = LeaseWatch::new();
        let s = Duration::from_secs;
        assert_eq!(w.observe("a", s(10)), s(0));
        assert_eq!(w.observe("a", s(25)), s(15));
        assert_eq!(w.observe("b", s(30)), s(0));
        assert_eq!(w.observe("b", s(31)), s(1));
    }
}
