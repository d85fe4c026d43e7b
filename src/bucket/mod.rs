//! The bucket lease: an advisory single-writer lock object `{prefix}/LEASE`.
//!
//! It catches the common operator error — two machines configured with one
//! backup bucket — on services that honour conditional writes; it does not make
//! two writers safe. See [`lease`] for the protocol and what it promises; the
//! operator's statement of it, with its guarantees and limits, is
//! `docs/bucket-leases.md` (one copy: keep the two in step).
//!
//! - [`record`]: the LEASE record, its parsing and writing, `lease_key`, `new_instance_id`.
//! - [`mod@judge`]: fresh / stale / suspect / malformed / absent by the reader's clock.
//! - [`lease`]: [`BucketLease`] — acquire, renew, fence, release; [`Exclusion`].
//! - [`fence`]: when a holder may write: deadlines, clock checks, the watchdog.
//! - [`keepalive`]: the renewal task and the fence watchdog.
//! - [`probe`]: does the service honour `If-None-Match` / `If-Match`?
//! - [`race`]: are those preconditions atomic under concurrent requests?
//! - [`watch`]: [`LeaseWatch`] for suspect and malformed records.
//!
//! # What the core guarantees
//!
//! For a lease of TTL `T` on a service that honours conditional writes (the
//! probe says so, [`Exclusion::Conditional`]); docs/bucket-leases.md, "What the fence
//! guarantees, and where it stops", is the user's account of the same rules:
//!
//! - **One winner per write of the LEASE.** Every acquire, renewal and
//!   takeover is one conditional PUT (`If-None-Match: *` or `If-Match` on the
//!   ETag read); of two contenders at most one succeeds, and a refused one
//!   re-reads and judges again ([`lease`]). A service that ignores either
//!   precondition is found by the probe on every acquire, and the lease is
//!   removed and refused rather than held ([`probe`]).
//! - **A holder stops a sixth of a TTL before anyone may start.** A contender
//!   may take a record only once it is `T` old by its own clock ([`mod@judge`]).
//!   The holder's fence closes at the start of its last successful renewal +
//!   `2T/3`, on the boot-time clock (which counts suspend) and the wall clock
//!   both; a wall clock stepped since closes it at once ([`fence`]).
//! - **The fence is enforced by its own thread.** A watchdog thread, not the
//!   renewal task and not the async runtime, closes it at the deadline: a hung
//!   renewal, a silent store, a busy runtime or a resume from `SIGSTOP` cannot
//!   hold it open ([`fence`], [`keepalive`]). Closed is closed: no renewal, in flight or
//!   late, reopens it.
//! - **Clocks are checked, not trusted.** Time is read only through the
//!   injected [`crate::clock::Clock`]. Each answer's `Date` gives this host's
//!   offset from the service; a holder certainly more than `T/12` off closes
//!   its fence, and a contender that far off refuses to judge a record stale
//!   ([`fence::clock_offset_limit_s`]). Two hosts within `T/12` each stay
//!   within the `T/6` margin above.
//! - **A release never deletes someone else's lease**: `If-Match` on our ETag,
//!   or read, check it is ours, delete, where conditional `DELETE` is ignored.
//!
//! # The generation (fencing token)
//!
//! Every writer sets the record's `generation` ([`record::next_generation`]):
//! a renewal keeps it; taking a record over (stale, suspect, malformed,
//! forced, a hand-over) writes `max(replaced + 1, now in µs)`; creating on an
//! absent key writes `now in µs`; a hand-over's successor, and a holder
//! adopting its own record, keep the one there. A release leaves a released
//! record that keeps the generation ([`LeaseRecord::released`], judged free),
//! and its taker writes `max(released + 1, now in µs)`: it grows across
//! releases whatever the clocks say. Only a create on a key whose object was
//! deleted (by hand, or by a seed-format holder) counts from the clock alone;
//! it fails behind a writer that drops the field (the seed's format,
//! [`RecordFormat::Seed`]), and at `u64::MAX` (saturates: a record carrying
//! it is not taken over, [`RecordFormat::cannot_replace`]).
//!
//! # What it does not guarantee
//!
//! - **It is advisory.** It catches two machines configured with one bucket; it
//!   does not make a second writer that ignores it safe, and on a service
//!   without conditional writes ([`Exclusion::BestEffort`]) two contenders
//!   starting together may both pass (the later writer wins at the next
//!   renewal).
//! - **A request already sent cannot be recalled.** A holder paused between
//!   checking [`BucketLease::may_write`] and sending a request sends it when it
//!   resumes; on a conditional service such a late write can only fail a
//!   precondition or create an object nobody refers to, without conditional
//!   writes it can overwrite.
//! - **A process frozen together with leasectl** (its process group stopped, a
//!   frozen VM) runs for the instant between its resume and the watchdog's
//!   `SIGKILL`.
//! - **Clock offsets are only as good as one-second `Date` headers**: under a
//!   12 s TTL the `T/12` rule catches gross errors only. A local `file://`
//!   store has no clock of its own; holder and reader share this host's.
//! - **A forced takeover of a fresh lease** cannot know when the replaced
//!   holder's last renewal began: it waits the old lease's `5T/6` after its
//!   PUT before anything it starts may write, and says from when writes are
//!   safe.

#[cfg(feature = "sim")]
pub mod defect;
pub mod error;
pub(crate) mod fence;
pub mod judge;
pub(crate) mod keepalive;
pub(crate) mod lease;
pub(crate) mod own;
pub mod probe;
pub mod race;
pub(crate) mod record;
pub(crate) mod watch;

pub use error::LeaseError;
pub(crate) use error::CONDITIONAL_SWITCH;
pub(crate) use fence::{FenceClose, FenceClosed, FenceStatus};
pub(crate) use judge::Judgement;
pub use judge::{judge, LeaseState, Observed};
#[cfg(feature = "sim")]
pub(crate) use keepalive::Watchdog;
pub use keepalive::{KeepAlive, ReleaseReport};
pub use lease::{read_lease, BucketLease, Exclusion, LeaseConfig, Released};
pub(crate) use record::{fmt_generation, parse_ttl, MAX_SANE_TTL_S};
pub use record::{
    lease_key, new_instance_id, next_generation, LeaseRecord, Malformed, RecordFormat,
};
pub use watch::LeaseWatch;
