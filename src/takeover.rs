//! The operator's guarded, audited takeover of a bucket lease (ARCHITECTURE.md, "Where each rule lives").
//!
//! A takeover replaces exactly the LEASE the operator looked at, or nothing:
//! 1. a read-only store cannot reach this code (it needs an [`ObjectStore`]);
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

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::audit::{AuditEntry, AuditError, AuditLog, AuditObserved, AuditTarget, AuditWritten};
use crate::bucket::fence::{clock_offset_limit_s, offset_beyond_limit};
use crate::bucket::probe::probe_scratch;
use crate::bucket::{
    format_secs, judge, lease_key, new_instance_id, read_lease, BucketLease, Exclusion,
    FenceStatus, Judgement, KeepAlive, LeaseConfig, LeaseRecord, LeaseState, Observed, Released,
    CONDITIONAL_SWITCH,
};
use crate::clock::SharedClock;
use crate::store::{ObjectStore, PutCondition, StoreError};
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
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "release" => Ok(Then::Release),
            "hold" => Ok(Then::Hold),
            _ => match s.strip_prefix("handover:") {
                Some(id)
                    if !id.is_empty() && !id.chars().any(char::is_control) && id.len() <= 256 =>
                {
                    Ok(Then::Handover(id.to_owned()))
                }
                _ => Err("expected release, hold or handover:INSTANCE_ID".into()),
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
    /// Where, for the audit entry.
    pub target: AuditTarget,
}

/// What a successful takeover did. Its `Display` is the report shown by
/// `leasectl takeover` and the console: one line per fact, the first
/// `taken: KEY now names ID (ETag E)`.
#[derive(Debug)]
pub struct TakeoverOutcome {
    /// The lease key.
    pub key: String,
    /// The record written.
    pub written: LeaseRecord,
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
    pub audit_entry: AuditEntry,
    /// The audit log written.
    pub audit_path: std::path::PathBuf,
    /// The id pairing the audit entries.
    pub audit_id: String,
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
        if let Some(t) = self.writes_safe_from {
            write!(
                f,
                "\nthe replaced holder was live: writes under the new lease are safe from {} (its fence has closed by then)",
                t.to_rfc3339()
            )?;
        }
        if let Some(r) = &self.released {
            write!(f, "\nreleased ({r}); the prefix is free")?;
        }
        if let Some(d) = self.handover_deadline {
            write!(
                f,
                "\nhanded over: the successor must start (acquire_as its id) before {}",
                d.to_rfc3339()
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
    /// The lease changed between the look and the PUT.
    #[error("{key} changed since you looked: {now}. Nothing was written; look again")]
    Changed {
        /// The key.
        key: String,
        /// Who holds it now (escaped sentence).
        now: String,
        /// The record now there, if readable.
        record: Option<LeaseRecord>,
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
    #[error("a lease TTL must be between 1 and {max} seconds, not {0}", max = crate::bucket::MAX_SANE_TTL_S)]
    BadTtl(u64),
    /// The audit log could not be written: nothing was sent.
    #[error("{0}; nothing was sent to the bucket")]
    Audit(#[from] AuditError),
    /// This host's clock is too far from the service's to judge the lease stale.
    #[error("{0}")]
    ReaderClock(String),
    /// The store failed; the outcome may be unknown (see the message).
    #[error("{0}")]
    Store(String),
}

impl TakeoverError {
    /// True for refusals by a guard (nothing written to the lease).
    pub fn is_refusal(&self) -> bool {
        !matches!(self, TakeoverError::Store(_) | TakeoverError::Audit(_))
    }
}

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
            r.renewed_at.to_rfc3339(),
            etag.as_deref().unwrap_or("?")
        ),
        Observed::Present { etag, .. } => format!(
            "now a malformed record (ETag {})",
            etag.as_deref().unwrap_or("?")
        ),
    }
}

/// The guards that need no I/O, shared by `leasectl takeover` and the
/// console's dialog: a reason, a sane TTL, `force` for a fresh lease, one TTL
/// of watching for a suspect or malformed record. Returns the judgement of
/// `seen` (the LEASE at `{prefix}LEASE` as the operator saw it; a suspect or
/// malformed one unchanged for `watched_for`) at `now` (reader's clock, UTC).
///
/// Errors: [`TakeoverError::NoReason`], [`TakeoverError::BadTtl`],
/// [`TakeoverError::Fresh`], [`TakeoverError::UnderWatch`].
pub fn preflight(
    prefix: &str,
    seen: &Observed,
    watched_for: Duration,
    reason: &str,
    ttl_s: u64,
    force: bool,
    now: DateTime<Utc>,
) -> Result<Judgement, TakeoverError> {
    let key = lease_key(prefix);
    if reason.trim().is_empty() {
        return Err(TakeoverError::NoReason);
    }
    if ttl_s == 0 || ttl_s > crate::bucket::MAX_SANE_TTL_S {
        return Err(TakeoverError::BadTtl(ttl_s));
    }
    let j = judge(seen, now);
    match j.state {
        LeaseState::Fresh if !force => Err(TakeoverError::Fresh {
            key,
            holder: seen
                .record()
                .map(|r| sanitize(&r.instance_id))
                .unwrap_or_default(),
            age: format_secs(j.age_s.unwrap_or(0.0)),
        }),
        LeaseState::Suspect | LeaseState::Malformed if watched_for < Duration::from_secs(ttl_s) => {
            Err(TakeoverError::UnderWatch {
                key,
                state: j.state,
                remaining: Duration::from_secs(ttl_s) - watched_for,
            })
        }
        _ => Ok(j),
    }
}

/// Performs the takeover (see the module docs for the order of steps).
///
/// Errors: guards ([`TakeoverError::Fresh`], [`TakeoverError::UnderWatch`],
/// [`TakeoverError::PreconditionsIgnored`], [`TakeoverError::NoReason`]) refuse
/// before anything is written; [`TakeoverError::Audit`] refuses before the
/// PUT; [`TakeoverError::Changed`] is the conditional PUT refused (audited);
/// [`TakeoverError::Store`] a failure (audited, with a re-read when possible).
pub async fn takeover(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    audit: &AuditLog,
    req: TakeoverRequest,
) -> Result<TakeoverOutcome, TakeoverError> {
    let key = lease_key(&req.prefix);
    let now = clock.wall();
    let j = preflight(
        &req.prefix,
        &req.seen,
        req.watched_for,
        &req.reason,
        req.ttl_s,
        req.force,
        now,
    )?;
    // Precondition probe on a scratch key next to the lease.
    if req.exclusion == Exclusion::Conditional {
        let scratch = crate::bucket::probe::scratch_key(&req.prefix);
        match probe_scratch(store.as_ref(), &scratch).await {
            Ok(report) => {
                if let Some(header) = report.ignored_header().or(report.unsupported()) {
                    return Err(TakeoverError::PreconditionsIgnored {
                        header,
                        service: store.describe(),
                    });
                }
                // Once per store per process, as at acquire: atomic under concurrency?
                match crate::bucket::race::check_once(store.as_ref(), &scratch).await {
                    Ok(r) => {
                        if let Some(finding) = r.finding() {
                            return Err(TakeoverError::NotAtomic {
                                finding,
                                service: store.describe(),
                            });
                        }
                    }
                    Err(e) => {
                        return Err(TakeoverError::Store(format!(
                            "race check of the preconditions failed: {e}"
                        )))
                    }
                }
            }
            Err(e) => {
                return Err(TakeoverError::Store(format!(
                    "precondition probe failed: {e}"
                )))
            }
        }
    }

    // A lease judged stale by a clock that is off cannot be trusted to be stale.
    if j.state == LeaseState::Stale {
        if let (Some(o), Some(r)) = (store.server_offset(), req.seen.record()) {
            if let Some(off) = offset_beyond_limit(&o, clock.as_ref(), r.ttl_s) {
                return Err(TakeoverError::ReaderClock(
                    crate::bucket::LeaseError::ReaderClock {
                        key,
                        offset_s: off,
                        error_s: o.error_s,
                        limit_s: clock_offset_limit_s(r.ttl_s),
                        ttl_s: r.ttl_s,
                    }
                    .to_string(),
                ));
            }
        }
    }
    // Replacing a live lease: its holder may write until its fence closes
    // (bucket hold kills its command at most 5/6 of its TTL after its last
    // renewal, which began before this PUT). Nothing we start or hand over
    // writes before then.
    let old_fence = (j.state == LeaseState::Fresh)
        .then(|| {
            req.seen
                .record()
                .map(|r| Duration::from_secs(r.ttl_s) * 5 / 6)
        })
        .flatten();

    let id = new_instance_id();
    let holder_id = match (&req.then, old_fence) {
        (Then::Handover(successor), None) => successor.clone(),
        _ => new_instance_id(),
    };
    let record = LeaseRecord {
        instance_id: holder_id,
        acquired_at: now,
        renewed_at: now,
        ttl_s: req.ttl_s,
    };
    let mut entry = AuditEntry {
        time: now,
        phase: "intent".into(),
        id: id.clone(),
        operator: crate::audit::operator(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        action: "takeover".into(),
        target: req.target.clone(),
        observed: AuditObserved {
            record: req.seen.record().cloned(),
            etag: req.seen.etag().map(str::to_owned),
            judgement: j.state.as_str().into(),
            age_s: j.age_s,
            reader_clock: now,
        },
        written: Some(AuditWritten {
            record: record.clone(),
            etag: None,
        }),
        reason: req.reason.clone(),
        exclusion: match req.exclusion {
            Exclusion::Conditional => "conditional".into(),
            Exclusion::BestEffort => "best_effort".into(),
        },
        forced: req.force && j.state == LeaseState::Fresh,
        then: req.then.to_string(),
        outcome: None,
        writes_safe_from: None,
    };
    audit.append(&entry).await?;
    tracing::warn!(key = %key, reason = %sanitize(&req.reason), "takeover: intent recorded, writing");

    let mono = clock.mono();
    let body = record.to_body();
    let put = match req.exclusion {
        Exclusion::Conditional => {
            let cond = match req.seen.etag() {
                Some(e) => PutCondition::IfMatch(e.to_owned()),
                None => PutCondition::IfNoneMatch,
            };
            store.put(&key, body, cond).await
        }
        Exclusion::BestEffort => {
            // Read, check it is what the operator saw, then write unconditionally.
            match read_lease(store.as_ref(), &key, None).await {
                Ok(cur) if cur.etag() == req.seen.etag() => {
                    store.put(&key, body, PutCondition::None).await
                }
                Ok(_) => Err(StoreError::PreconditionFailed),
                Err(e) => Err(e),
            }
        }
    };
    let finish = |mut entry: AuditEntry, outcome: String, etag: Option<String>| {
        entry.phase = "outcome".into();
        entry.time = clock.wall();
        entry.outcome = Some(outcome);
        if let Some(w) = &mut entry.written {
            w.etag = etag;
        }
        entry
    };
    let etag = match put {
        Ok(etag) => etag,
        Err(StoreError::PreconditionFailed | StoreError::Conflict | StoreError::NotFound(_)) => {
            let now_there = read_lease(store.as_ref(), &key, None).await;
            let now_sentence = match &now_there {
                Ok(o) => holder_sentence(o),
                Err(e) => format!("could not re-read: {e}"),
            };
            entry.written = None;
            let out = finish(
                entry,
                format!("refused: lease changed since seen; {now_sentence}"),
                None,
            );
            audit.append(&out).await?;
            return Err(TakeoverError::Changed {
                key,
                now: now_sentence,
                record: now_there.ok().and_then(|o| o.record().cloned()),
            });
        }
        Err(e) => {
            let now_sentence = match read_lease(store.as_ref(), &key, None).await {
                Ok(o) if o.record().map(|r| &r.instance_id) == Some(&record.instance_id) => {
                    "but the record was written (the answer was lost)".to_owned()
                }
                Ok(o) => format!("the prefix is {}", holder_sentence(&o)),
                Err(e2) => format!("unknown whether it landed (re-read failed: {e2}); look again"),
            };
            let out = finish(entry, format!("failed: {e}; {now_sentence}"), None);
            audit.append(&out).await?;
            return Err(TakeoverError::Store(format!(
                "takeover of {key} failed: {e}; {now_sentence}"
            )));
        }
    };
    let etag = match etag {
        Some(e) => e,
        None => read_lease(store.as_ref(), &key, None)
            .await
            .ok()
            .and_then(|o| o.etag().map(str::to_owned))
            .unwrap_or_default(),
    };

    let config = LeaseConfig {
        ttl_s: req.ttl_s,
        exclusion: req.exclusion,
    };
    // The lease just written, as a holder of it (used by release and hold).
    let mut written = BucketLease::from_written(
        store.clone(),
        clock.clone(),
        key.clone(),
        record.clone(),
        etag.clone(),
        config,
        mono,
    );
    let safe_from = old_fence.map(|w| {
        written.set_not_before(mono + w);
        clock.wall()
            + chrono::Duration::from_std(w.saturating_sub(clock.mono().saturating_sub(mono)))
                .unwrap_or_default()
    });
    if let Some(t) = safe_from {
        tracing::warn!(key = %key, "a live lease was replaced: its holder may write until its fence closes; writes are safe from {}", t.to_rfc3339());
        entry.writes_safe_from = Some(t);
    }
    let mut outcome = TakeoverOutcome {
        written: record.clone(),
        etag: etag.clone(),
        released: None,
        held: None,
        handover_deadline: None,
        writes_safe_from: safe_from,
        audit_entry: entry.clone(),
        audit_path: audit.path().to_owned(),
        audit_id: id.clone(),
        key: key.clone(),
    };
    // Release and hand-over act only once the old holder's fence has closed.
    let written = match (&req.then, safe_from) {
        (Then::Release | Then::Handover(_), Some(_)) => match wait_for_old_fence(written).await {
            Ok(l) => l,
            Err(why) => {
                let out = finish(
                    entry,
                    format!("taken, but lost while waiting for the old holder's fence: {why}"),
                    Some(etag),
                );
                audit.append(&out).await?;
                return Err(TakeoverError::Store(format!(
                    "{key} was taken, but lost while waiting for the old holder's fence to close: {why}"
                )));
            }
        },
        _ => written,
    };
    let mut final_etag = written.etag().to_owned();
    let result_text = match &req.then {
        Then::Release => {
            let r = written.release().await;
            let text = match &r {
                Ok(how) => format!("taken, then released ({how})"),
                Err(e) => format!(
                    "taken, but the release failed ({e}); the lease expires after {} s",
                    req.ttl_s
                ),
            };
            outcome.released = r.ok();
            text
        }
        Then::Hold => {
            outcome.held = Some(written);
            match safe_from {
                Some(t) => format!(
                    "taken and held by leasectl; writes safe from {}",
                    t.to_rfc3339()
                ),
                None => "taken and held by leasectl".to_owned(),
            }
        }
        Then::Handover(successor) if safe_from.is_some() => {
            // Our own record first (it fenced the old holder out); now the
            // successor's, conditional on ours.
            let at = clock.wall();
            let handed = LeaseRecord {
                instance_id: successor.clone(),
                acquired_at: at,
                renewed_at: at,
                ttl_s: req.ttl_s,
            };
            let cond = match req.exclusion {
                Exclusion::Conditional => PutCondition::IfMatch(written.etag().to_owned()),
                Exclusion::BestEffort => PutCondition::None,
            };
            match store.put(&key, handed.to_body(), cond).await {
                Ok(e) => {
                    final_etag = e.unwrap_or_default();
                    let deadline = at + chrono::Duration::seconds(req.ttl_s as i64);
                    outcome.handover_deadline = Some(deadline);
                    outcome.written = handed.clone();
                    outcome.etag = final_etag.clone();
                    if let Some(w) = &mut entry.written {
                        w.record = handed;
                    }
                    format!(
                        "taken, then handed over to {} once the old holder's fence closed; it must start before {}",
                        sanitize(successor),
                        deadline.to_rfc3339()
                    )
                }
                Err(e) => {
                    let out = finish(entry, format!("taken, but the hand-over write failed: {e}; the lease (ours) expires after {} s", req.ttl_s), Some(final_etag));
                    audit.append(&out).await?;
                    return Err(TakeoverError::Store(format!(
                        "{key} was taken, but handing it over failed: {e}; our lease expires after {} s",
                        req.ttl_s
                    )));
                }
            }
        }
        Then::Handover(successor) => {
            let deadline = now + chrono::Duration::seconds(req.ttl_s as i64);
            outcome.handover_deadline = Some(deadline);
            format!(
                "taken and handed over to {}; it must start before {}",
                sanitize(successor),
                deadline.to_rfc3339()
            )
        }
    };
    let out = finish(entry, result_text, Some(final_etag));
    audit.append(&out).await?;
    outcome.audit_entry = out;
    Ok(outcome)
}

/// Keeps `lease` renewed until its fence opens (the old holder's has closed),
/// then returns it; an error says why the lease was lost meanwhile.
async fn wait_for_old_fence(lease: BucketLease) -> Result<BucketLease, String> {
    let keep = KeepAlive::start(lease);
    loop {
        match keep.status() {
            FenceStatus::Waiting(d) => {
                tokio::time::sleep(d.min(Duration::from_millis(200))).await;
            }
            FenceStatus::Open(_) => break,
            FenceStatus::Closed(why) => {
                let _ = keep.stop().await;
                return Err(why.to_string());
            }
        }
    }
    keep.stop().await.map_err(|e| e.to_string())
}
