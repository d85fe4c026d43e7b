//! Why a lease could not be taken, renewed or released.

use std::time::Duration;

use super::record::LeaseRecord;
use super::LeaseState;
use crate::store::StoreError;
use crate::text::format_secs;
use crate::text::sanitize;

/// The part of the acquire's refusal that says what it means (the same
/// words as for an ignored precondition).
pub const FAIL_CLOSED: &str = "it cannot give exclusion, so the lease was not taken";
/// The acquire's sentence naming the best-effort switch.
pub const BEST_EFFORT: &str = "To run anyway with best-effort exclusion, set \
     MUSHROOMDB_BACKUP_LEASE_CONDITIONAL=off or pass --conditional off";

/// The environment switch deployed fleets use to run best-effort
/// ([`BEST_EFFORT`] spells it out too).
pub(crate) const CONDITIONAL_SWITCH: &str = "MUSHROOMDB_BACKUP_LEASE_CONDITIONAL=off";

/// Why a lease operation failed. Every message is safe to print (untrusted
/// text escaped, never a credential).
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another instance holds a fresh lease.
    #[error("{key} is held by {} (renewed {} ago, TTL {} s); it may be taken over in {}",
        sanitize(&.record.instance_id), format_secs(*.age_s), .record.ttl_s, format_secs(*.may_take_in_s))]
    HeldByOther {
        /// The lease key.
        key: String,
        /// The holder's record (boxed: it keeps every `Result<_, LeaseError>` small).
        record: Box<LeaseRecord>,
        /// Its ETag.
        etag: String,
        /// Seconds since it was renewed, by our clock.
        age_s: f64,
        /// Seconds until it goes stale by our clock.
        may_take_in_s: f64,
    },
    /// The service answered the lease's write with an ETag that cannot be sent
    /// in `If-Match` (empty, or not a plain token): nothing conditional could
    /// follow. What was written was removed.
    #[error("{service} answered the lease's write with ETag \"{etag}\" ({why}): it cannot be sent in If-Match, so {FAIL_CLOSED} (our record was removed). {BEST_EFFORT}")]
    UnusableEtag {
        /// The service.
        service: String,
        /// The ETag as given (escaped).
        etag: String,
        /// Why it is unusable.
        why: &'static str,
    },
    /// The LEASE names this instance id, but this process did not write it and
    /// no takeover handed it over: another process holds it under the same id.
    #[error("{key} is held by another process under the same instance id {} (renewed {} ago): \
        two holders must never share an instance id (a hand-over's successor is started once: the \
        first process under its id takes it up). Stop the other process, or start this one \
        without --instance-id (a new random id); the lease may be taken over in {}",
        sanitize(.instance_id), format_secs(*.age_s), format_secs(*.may_take_in_s))]
    SameInstanceId {
        /// The lease key.
        key: String,
        /// The instance id both processes use.
        instance_id: String,
        /// Seconds since it was renewed, by our clock.
        age_s: f64,
        /// Seconds until it goes stale by our clock.
        may_take_in_s: f64,
    },
    /// A suspect or malformed record not yet watched unchanged for one TTL.
    #[error("{key} is {state}: {problem}; it may be taken over once seen unchanged for {} more", format_secs(.remaining.as_secs_f64()))]
    UnderWatch {
        /// The lease key.
        key: String,
        /// Suspect or malformed.
        state: LeaseState,
        /// Why.
        problem: String,
        /// How much longer it must stay unchanged.
        remaining: Duration,
    },
    /// Our lease was taken over, deleted or replaced by someone else.
    #[error("lease {key} lost: {}", lost_to(.by.as_deref(), .found.as_deref()))]
    Lost {
        /// The lease key.
        key: String,
        /// Who holds it now, if anyone (boxed, as above).
        by: Option<Box<LeaseRecord>>,
        /// What is at the key instead when it is no record and not absent,
        /// or why nothing is known of it (a sentence safe to print); `None`
        /// with `by` `None`: the key was found deleted.
        found: Option<String>,
    },
    /// The service accepted a write whose precondition should have been refused.
    #[error("{service} ignores {header}: it cannot give exclusion, so the lease was not taken ({changed}). \
             To run anyway with best-effort exclusion, set {CONDITIONAL_SWITCH} or pass --conditional off")]
    PreconditionsIgnored {
        /// `If-None-Match` or `If-Match`.
        header: &'static str,
        /// The store, as described to the operator.
        service: String,
        /// What the attempt changed on the service (`nothing left behind`, or a
        /// previous record overwritten and removed).
        changed: String,
    },
    /// The service honours each precondition alone, but concurrent conditional
    /// requests each won a round of the race check ([`super::race`]).
    #[error("{service}: {finding}: {FAIL_CLOSED} ({changed}). {BEST_EFFORT}")]
    NotAtomic {
        /// Which request, and how many of how many won one round.
        finding: String,
        /// The store.
        service: String,
        /// What the attempt changed on the service (as for `PreconditionsIgnored`).
        changed: String,
    },
    /// The service refused conditional writes outright (HTTP 501).
    #[error("{service} does not support conditional writes ({detail}). \
             To run anyway with best-effort exclusion, set {CONDITIONAL_SWITCH} or pass --conditional off")]
    PreconditionsUnsupported {
        /// The store.
        service: String,
        /// What it answered.
        detail: String,
    },
    /// The TTL asked for is zero or over [`super::MAX_SANE_TTL_S`]: every
    /// reader would judge such a record suspect.
    #[error("a lease TTL must be between 1 and {max} seconds, not {0}", max = super::MAX_SANE_TTL_S)]
    InvalidTtl(u64),
    /// The confirmation an acquire waits for on this store
    /// ([`super::race::confirm_after`]) would not fit in the fence the TTL
    /// gives (two thirds of it): the lease would close before it could be
    /// handed out. Refused before anything is written, unless the race
    /// check ran beside the write (a TTL over 12 s) and measured a wait that
    /// does not fit there (`changed` says what was done with ours).
    #[error("{service} answers writes slowly: an acquire there reads its record back {} after its write's answer \
             (six times the 90th percentile of its write round trips, {}), which does not fit in the {} fence \
             a {ttl_s} s TTL gives; {changed}. Use a TTL of at least {min_ttl_s} s (--ttl {min_ttl_s}s), \
             or a store nearer this host",
        format_secs(*.wait_s), format_secs(*.round_trip_s), format_secs(*.ttl_s as f64 * 2.0 / 3.0))]
    TtlTooShort {
        /// The store.
        service: String,
        /// The TTL asked for, seconds.
        ttl_s: u64,
        /// The confirmation's wait, seconds.
        wait_s: f64,
        /// The 90th percentile of the write round trips measured, seconds.
        round_trip_s: f64,
        /// The shortest TTL the wait fits in, seconds.
        min_ttl_s: u64,
        /// What the attempt changed on the store (`nothing was written`).
        changed: String,
    },
    /// The service refused `If-Match` with the ETag the object has now: it
    /// does not implement the precondition as S3 does.
    #[error("{service} refused If-Match with the current ETag of {key} (\"{etag}\"), a precondition that holds: \
             it does not implement If-Match as S3 does, so a lease there can be neither renewed nor taken over. \
             Run `leasectl probe` on it; use a service that passes, or run best-effort ({CONDITIONAL_SWITCH})")]
    IfMatchRefused {
        /// The lease key.
        key: String,
        /// The store.
        service: String,
        /// The ETag sent, which the object still has.
        etag: String,
    },
    /// The service refused `If-None-Match: *` on a key it reports absent.
    #[error("{service} refused to create {key} with If-None-Match: * although it reports no object there: \
             it does not implement the precondition as S3 does. Run `leasectl probe` on it")]
    CreateRefused {
        /// The lease key.
        key: String,
        /// The store.
        service: String,
    },
    /// Every attempt was answered 409 ConditionalRequestConflict.
    #[error(
        "{service} answered 409 ConditionalRequestConflict to every write of {key}: \
             other conditional writes to it were in flight each time; try again"
    )]
    Conflicts {
        /// The lease key.
        key: String,
        /// The store.
        service: String,
    },
    /// This host's clock differs from the service's too much to judge a lease's age.
    #[error("this host's clock is {} {} the storage service's (±{}), more than {} (a twelfth of the {} s TTL): \
             the age of {key} cannot be judged, so it is not taken over. Fix this host's time (NTP: `chronyc tracking`, `timedatectl`)",
        format_secs(.offset_s.abs()), if *.offset_s > 0.0 { "behind" } else { "ahead of" }, format_secs(*.error_s), format_secs(*.limit_s), .ttl_s)]
    ReaderClock {
        /// The lease key.
        key: String,
        /// Service minus this host, seconds.
        offset_s: f64,
        /// Uncertainty of the estimate, seconds.
        error_s: f64,
        /// The limit, seconds.
        limit_s: f64,
        /// The TTL of the record judged.
        ttl_s: u64,
    },
    /// This host's clock differs from the service's too much for a lease it
    /// writes to be judged right by others: its `renewed_at` stamps would
    /// make the record look older or younger than it is.
    #[error("this host's clock is {} {} the storage service's (±{}), more than {} (a twelfth of the {} s TTL): \
             a record stamped by it would be judged wrongly by every other reader, so {key} is not taken. \
             Fix this host's time (NTP: `chronyc tracking`, `timedatectl`)",
        format_secs(.offset_s.abs()), if *.offset_s > 0.0 { "behind" } else { "ahead of" }, format_secs(*.error_s), format_secs(*.limit_s), .ttl_s)]
    HolderClock {
        /// The lease key.
        key: String,
        /// Service minus this host, seconds.
        offset_s: f64,
        /// Uncertainty of the estimate, seconds.
        error_s: f64,
        /// The limit, seconds.
        limit_s: f64,
        /// The TTL of the record that would be written.
        ttl_s: u64,
    },
    /// The record to take over carries a generation no greater one can follow
    /// ([`super::RecordFormat::cannot_replace`]): taking it would hand the new
    /// holder the replaced holder's fencing token.
    #[error("{key} was not taken over: {why}")]
    GenerationExhausted {
        /// The lease key.
        key: String,
        /// Why, and what to do (safe to print).
        why: String,
    },
    /// Concurrent writers kept the key changing; gave up after several re-reads.
    #[error("{key} kept changing under concurrent writes; try again")]
    Contended {
        /// The lease key.
        key: String,
    },
    /// The store could not be reached or answered unexpectedly.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a lost lease was lost to, as [`LeaseError::Lost`] says it: another
/// holder (`by`), something at the key that is no record (`found`), or
/// nothing (the key deleted).
pub(crate) fn lost_to(by: Option<&LeaseRecord>, found: Option<&str>) -> String {
    match (by, found) {
        (Some(r), _) => format!("now held by {}", sanitize(&r.instance_id)),
        (None, Some(found)) => found.to_owned(),
        (None, None) => "the LEASE object was deleted".to_owned(),
    }
}
