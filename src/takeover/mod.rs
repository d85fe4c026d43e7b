//! The operator's guarded, audited takeover of a bucket lease (ARCHITECTURE.md, "Where each rule lives").
//!
//! A takeover replaces exactly the LEASE the operator looked at, or nothing:
//! 1. a read-only store cannot reach this code (it needs an [`ObjectStore`](crate::store::ObjectStore));
//! 2. a `fresh` lease needs `force`; a `suspect` or `malformed` one must have
//!    been watched unchanged for one TTL;
//! 3. the audit log is opened first; the precondition probe runs (a service
//!    that ignores preconditions refuses the takeover unless best-effort was
//!    chosen); an `intent` entry is fsynced before the PUT;
//! 4. the PUT is conditional on the ETag the operator saw (`If-Match`, or
//!    `If-None-Match: *` when it saw no lease): if the holder renewed meanwhile
//!    it is refused and the operator is told who holds it now;
//! 5. an `outcome` entry follows; then, as chosen, the new lease is released,
//!    held (renewed until the caller releases it), or handed over to a named
//!    successor whose `acquire_as` adopts it.
//!
//! One path for `leasectl takeover` and the console (`tui::ops`):
//! [`preflight`] (the pure guards, and [`typed_confirms`], the typed-prefix
//! rule), `watch` (the one-TTL watch of a suspect or malformed record),
//! `execute` (probe → clock check → intent → PUT → diagnosis: [`takeover_with`]),
//! `then` (the wait for a replaced holder's fence, then release / hold /
//! hand-over; [`hold_until`] for a command-line holder).

mod execute;
pub(crate) mod operator;
mod preflight;
mod then;
mod watch;

/// Requests for the takeover's unit tests.
#[cfg(test)]
pub(crate) mod tests {
    use super::{TakeoverRequest, Then};
    use crate::audit::AuditTarget;
    use crate::bucket::{Exclusion, Observed, RecordFormat};

    /// A request to take over the LEASE at `db/` of a directory store, seen
    /// as `seen`, writing a `ttl_s` TTL, then `then`.
    pub(crate) fn request(
        seen: Observed,
        then: Then,
        ttl_s: u64,
        force: bool,
        exclusion: Exclusion,
    ) -> TakeoverRequest {
        TakeoverRequest {
            prefix: "db/".into(),
            seen,
            watched_for: std::time::Duration::ZERO,
            reason: "a unit test".into(),
            then,
            force,
            ttl_s,
            exclusion,
            record_format: RecordFormat::Leasectl,
            target: AuditTarget {
                endpoint: None,
                region: None,
                addressing_style: None,
                bucket: None,
                key: "db/LEASE".into(),
                url: "file:///db/".into(),
            },
        }
    }
}

pub(crate) use execute::{check_store, takeover_checked, StoreChecks};
pub use execute::{takeover, takeover_with};
pub(crate) use operator::{takeover_cmd, OperatorTakeover};
pub(crate) use preflight::{check_request, preflight, something_to_take_over, typed_confirms};
pub(crate) use then::{hold_until, record_loss};
pub(crate) use watch::{watch_one_ttl, Watched};

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::audit::{AuditEntry, AuditError, AuditTarget};
use crate::bucket::lease;
use crate::bucket::{
    fmt_generation, BucketLease, Exclusion, LeaseRecord, LeaseState, Observed, RecordFormat,
    Released, CONDITIONAL_SWITCH, MAX_SANE_TTL_S,
};
use crate::clock::{shown, SharedClock};
use crate::store::ObjectStore;
use crate::text::format_secs;
use crate::text::sanitize;

/// What to do once the takeover's record is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Then {
    /// Delete the new lease at once: the prefix is free.
    Release,
    /// Keep it: the caller renews it (e.g. with a `KeepAlive`) and releases it later.
    Hold,
    /// Write the record in the name of this instance id: that successor's
    /// `acquire_as(id)` adopts it without waiting.
    Handover(String),
}

impl std::fmt::Display for Then {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Then::Release => f.write_str("release"),
            Then::Hold => f.write_str("hold"),
            Then::Handover(id) => write!(f, "handover:{}", sanitize(id)),
        }
    }
}

impl std::str::FromStr for Then {
    type Err = String;

    /// Parses what [`Display`](std::fmt::Display) writes (`leasectl takeover
    /// --then`): `release`, `hold` or `handover:INSTANCE_ID` (an id without
    /// blanks or control characters, at most 256 bytes).
    ///
    /// # Errors
    /// A sentence naming the accepted forms.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "release" => Ok(Then::Release),
            "hold" => Ok(Then::Hold),
            _ => match s.strip_prefix("handover:") {
                // An id a successor can be started with: no blank, no control character.
                Some(id)
                    if !id.is_empty()
                        && !id.chars().any(|c| c.is_control() || c.is_whitespace())
                        && id.len() <= 256 =>
                {
                    Ok(Then::Handover(id.to_owned()))
                }
                _ => Err(
                    "expected release, hold or handover:INSTANCE_ID (an id without blanks or control characters)"
                        .into(),
                ),
            },
        }
    }
}

/// One takeover, as the operator asked for it.
#[derive(Debug, Clone)]
pub struct TakeoverRequest {
    /// The prefix (its lease key is `{prefix}LEASE`).
    pub prefix: String,
    /// What the operator looked at (its ETag is the precondition).
    pub seen: Observed,
    /// For a suspect or malformed record: how long the same ETag has been seen unchanged.
    pub watched_for: Duration,
    /// Why (required, non-empty).
    pub reason: String,
    /// What to do after.
    pub then: Then,
    /// Override a fresh lease.
    pub force: bool,
    /// TTL of the lease written, in seconds.
    pub ttl_s: u64,
    /// Conditional, or best-effort (chosen by the operator).
    pub exclusion: Exclusion,
    /// The fields written: with a generation greater than the replaced
    /// record's (the default), or the seed's four (no generation).
    pub record_format: RecordFormat,
    /// Where, for the audit entry.
    pub target: AuditTarget,
}

/// What a successful takeover did. Its `Display` is the report shown by
/// `leasectl takeover` and the console: one line per fact, the first
/// `taken: KEY now names ID (ETag E)`, the second the generation observed
/// and the one written (`generation 7 → 8`, `-` when unknown), or, in the
/// seed's record format, that no generation was written.
#[derive(Debug)]
pub struct TakeoverOutcome {
    /// The lease key.
    pub key: String,
    /// The record written.
    pub written: LeaseRecord,
    /// The generation of the record replaced (`None`: unknown — no record,
    /// a malformed one, or one without the field).
    pub(crate) replaced_generation: Option<u64>,
    /// The record format written.
    pub record_format: RecordFormat,
    /// Its ETag.
    pub etag: String,
    /// `Then::Release`: how the release went.
    pub released: Option<Released>,
    /// `Then::Hold`: the lease, to keep alive and release later.
    pub held: Option<BucketLease>,
    /// `Then::Handover`: the successor must start before this time (UTC) —
    /// after it the record is stale and anyone may take it.
    pub handover_deadline: Option<DateTime<Utc>>,
    /// After a forced takeover of a live lease: from when (UTC) the new holder
    /// may write — the old holder's fence has certainly closed by then.
    /// `Then::Release` and `Then::Handover` wait for it before they act; a
    /// `Then::Hold` lease's fence opens only then.
    pub writes_safe_from: Option<DateTime<Utc>>,
    /// The outcome entry written to the audit log (a later loss of a held
    /// lease is appended as another outcome with the same id).
    pub(crate) audit_entry: AuditEntry,
    /// The audit log written.
    pub audit_path: std::path::PathBuf,
    /// The id pairing the audit entries.
    pub(crate) audit_id: String,
    /// The PUT was answered with an error (a refusal to the client's retry
    /// of a write whose answer was lost), yet read back the LEASE held
    /// exactly the record written: how it was answered (`None`: answered as
    /// written).
    pub(crate) answer_lost: Option<String>,
}

impl std::fmt::Display for TakeoverOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "taken: {} now names {} (ETag {})",
            sanitize(&self.key),
            sanitize(&self.written.instance_id),
            self.etag
        )?;
        match self.record_format {
            RecordFormat::Leasectl => write!(
                f,
                "\ngeneration {} → {}",
                fmt_generation(self.replaced_generation),
                fmt_generation(self.written.generation)
            )?,
            RecordFormat::Seed => write!(
                f,
                "\nrecord format seed: no generation written (observed {}); the record has the seed's four fields",
                fmt_generation(self.replaced_generation)
            )?,
        }
        if let Some(note) = &self.answer_lost {
            write!(f, "\n{note}")?;
        }
        if let Some(t) = self.writes_safe_from {
            write!(
                f,
                "\nthe replaced holder was live: writes under the new lease are safe from {} (its fence has closed by then)",
                shown(t)
            )?;
        }
        if let Some(r) = &self.released {
            write!(f, "\nreleased ({r}); the prefix is free")?;
        }
        if let Some(d) = self.handover_deadline {
            // The record names the successor: how it is started from the
            // command line (the library's `acquire_as` is the same).
            let id = sanitize(&self.written.instance_id);
            write!(
                f,
                "\nhanded over to {id}: start the successor once, with `leasectl bucket hold --instance-id {id}`, before {}",
                shown(d)
            )?;
        }
        write!(
            f,
            "\naudit: {} (id {})",
            self.audit_path.display(),
            self.audit_id
        )
    }
}

/// Why a takeover was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    /// No reason given.
    #[error("a reason is required: it goes into the audit log")]
    NoReason,
    /// The lease is fresh and `force` was not given.
    #[error(
        "{key} is fresh: held by {holder}, renewed {age} ago; a takeover would make two writers. \
             Use --force (and type the prefix) only if you know that holder is gone"
    )]
    Fresh {
        /// The key.
        key: String,
        /// The holder (escaped).
        holder: String,
        /// Its age, formatted.
        age: String,
    },
    /// A suspect or malformed record not watched for one TTL.
    #[error("{key} is {state}: it must be seen unchanged for one TTL first ({} more)", format_secs(.remaining.as_secs_f64()))]
    UnderWatch {
        /// The key.
        key: String,
        /// suspect or malformed.
        state: LeaseState,
        /// Time left.
        remaining: Duration,
    },
    /// The record seen carries a generation no greater one can follow
    /// ([`crate::bucket::RecordFormat::cannot_replace`]): nothing was written.
    #[error("{key} cannot be taken over: {why}; nothing was written")]
    GenerationExhausted {
        /// The key.
        key: String,
        /// Why, and what to do (safe to print).
        why: String,
    },
    /// The lease changed between the look and the PUT: the PUT was refused
    /// and, read back, the LEASE holds another record or none (never ours:
    /// a refusal that answers a retry of a write that landed is a success).
    #[error(
        "{key} changed since you looked: {now}. This takeover's record is not stored; look again"
    )]
    Changed {
        /// The key.
        key: String,
        /// Who holds it now (escaped sentence).
        now: String,
        /// The record now there, if readable.
        record: Option<Box<LeaseRecord>>,
    },
    /// The service ignores preconditions and best-effort was not chosen.
    #[error("{service} ignores {header}: a takeover there cannot be made safe; refused. \
             To proceed anyway with best-effort exclusion use --conditional off ({CONDITIONAL_SWITCH})")]
    PreconditionsIgnored {
        /// The header.
        header: &'static str,
        /// The store.
        service: String,
    },
    /// Concurrent conditional requests each won a round of the race check:
    /// the service's preconditions are not atomic. Nothing was written.
    #[error("{service}: {finding}: a takeover there cannot be made safe; refused. \
             To proceed anyway with best-effort exclusion use --conditional off ({CONDITIONAL_SWITCH})")]
    NotAtomic {
        /// Which request, and how many of how many won one round.
        finding: String,
        /// The store.
        service: String,
    },
    /// The TTL asked for is zero or over one hour (readers would call it suspect).
    #[error("a lease TTL must be between 1 and {max} seconds, not {0}", max = MAX_SANE_TTL_S)]
    BadTtl(u64),
    /// The audit log could not be written: nothing was sent.
    #[error("{0}; nothing was sent to the bucket")]
    Audit(#[from] AuditError),
    /// This host's clock is too far from the service's to judge the lease
    /// stale, or to write a record others would judge right.
    #[error("{0}")]
    ReaderClock(String),
    /// The store failed; the outcome may be unknown (see the message).
    #[error("{0}")]
    Store(String),
    /// There is no LEASE at the key: nothing to take over (nothing written).
    #[error("{key} does not exist: there is nothing to take over (the prefix is free); nothing was written")]
    Absent {
        /// The key.
        key: String,
    },
    /// The LEASE is a released record: nobody holds the prefix, nothing to
    /// take over (nothing written).
    #[error("{key} was released: nobody holds it, there is nothing to take over (the prefix is free; a holder takes it at once); nothing was written")]
    Released {
        /// The key.
        key: String,
    },
    /// The wait for the replaced holder's fence was stopped (a signal)
    /// before the release or hand-over: neither was done early; the message
    /// says what was left at the key and from when it may be taken (audited).
    #[error("{0}")]
    Interrupted(String),
}

impl TakeoverError {
    /// True for refusals by a guard (nothing written to the lease).
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            TakeoverError::Store(_) | TakeoverError::Audit(_) | TakeoverError::Interrupted(_)
        )
    }
}

/// How the wait for a replaced holder's fence (a forced takeover with
/// `Then::Release` or `Then::Handover`) is reported and ended early; see
/// [`takeover_with`]. The default tells the log and never ends early.
pub struct WaitControl<'a> {
    /// Told once, as the wait starts, what it waits for and until when (one sentence).
    pub notify: Box<dyn FnMut(&str) + Send + 'a>,
    /// Completes when the wait must end early, with what ended it (e.g. `SIGTERM`).
    /// Polled only during the wait: what arrives before is acted on when it starts.
    pub stop: Pin<Box<dyn Future<Output = String> + Send + 'a>>,
}

impl Default for WaitControl<'_> {
    fn default() -> Self {
        Self {
            notify: Box::new(|s| tracing::warn!("{s}")),
            stop: Box::pin(std::future::pending()),
        }
    }
}

/// Who holds the lease now, as read after a refused or failed write.
fn holder_sentence(obs: &Observed) -> String {
    match obs {
        Observed::Absent => "the LEASE was deleted".into(),
        Observed::Present {
            record: Ok(r),
            etag,
            ..
        } => format!(
            "now held by {} (renewed_at {}, ETag {})",
            sanitize(&r.instance_id),
            shown(r.renewed_at),
            etag.as_deref().unwrap_or("?")
        ),
        Observed::Present { etag, .. } => format!(
            "now a malformed record (ETag {})",
            etag.as_deref().unwrap_or("?")
        ),
    }
}

/// The intent `entry` made an `outcome` entry: `outcome` (a sentence), the
/// ETag left at the key, stamped now.
pub(super) fn outcome_entry(
    clock: &SharedClock,
    mut entry: AuditEntry,
    outcome: String,
    etag: Option<String>,
) -> AuditEntry {
    entry.phase = "outcome".into();
    entry.time = clock.wall();
    entry.outcome = Some(outcome);
    if let Some(w) = &mut entry.written {
        w.etag = etag;
    }
    entry
}
/// Why a write of the takeover's (its PUT, a hand-over, a rewrite) answered
/// without an ETag, refused, or not answered is not known to be in effect:
/// what a read-back found ([`landed`]).
pub(super) enum NotStored {
    /// The LEASE holds another record, or none: what was read.
    Other(Observed),
    /// Unknown whether the body written is stored: why (the re-read failed,
    /// or it holds our body but the service gave it no ETag).
    Unknown(String),
}

/// Reads `key` back after a write of `body` whose answer did not prove it
/// landed, judged by [`crate::bucket::own::whose`] — the rule every
/// read-back follows: only the exact body written is proof. `Ok` is the ETag
/// of our record, stored.
pub(super) async fn landed(
    store: &dyn ObjectStore,
    key: &str,
    body: &[u8],
) -> Result<String, NotStored> {
    landed_late(store, key, body).await.map(|(etag, _)| etag)
}

/// [`landed`], and whether the store carried our record out long after it
/// was stamped ([`crate::bucket::lease::landed_late`]).
pub(super) async fn landed_late(
    store: &dyn ObjectStore,
    key: &str,
    body: &[u8],
) -> Result<(String, bool), NotStored> {
    use crate::bucket::own::{read_back, whose, Whose};
    let rb = read_back(store, key)
        .await
        .map_err(|e| NotStored::Unknown(format!("the re-read failed: {e}")))?;
    // The takeover's record names an id of its own or the successor's: only
    // the bytes decide.
    let id = rb.observed.record().map(|r| r.instance_id.clone());
    let owner = whose(
        &rb.observed,
        rb.body.as_deref(),
        id.as_deref().unwrap_or_default(),
        |b| b == body,
    );
    match (owner, rb.etag()) {
        (Whose::Ours, Some(e)) => Ok((e.to_owned(), lease::landed_late(&rb.observed))),
        (Whose::Ours, None) => Err(NotStored::Unknown(
            "the LEASE holds our record, but the service gives it no ETag, so nothing \
             conditional can follow"
                .into(),
        )),
        _ => Err(NotStored::Other(rb.observed)),
    }
}
