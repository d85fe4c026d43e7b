//! The precondition probe: does this service really refuse a failed
//! `If-None-Match: *` and `If-Match`?
//!
//! Some services accept conditional headers and then ignore them. A lease on
//! such a service excludes nobody, so the probe runs at every acquire (on the
//! lease just written) and from `leasectl probe` (on a scratch key
//! `{root}.leasectl-probe/{instance_id}`, removed afterwards).

use serde::Serialize;

use crate::store::{ObjectStore, PutCondition, StoreError};

/// What the service did with one precondition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Honoured {
    /// Refused the write as it should (412).
    Yes,
    /// Accepted the write: the precondition was ignored.
    Ignored,
    /// Refused the conditional request itself (501).
    Unsupported,
}

/// The probe's findings.
#[derive(Debug, Clone, Serialize)]
pub struct PreconditionReport {
    /// `If-None-Match: *` over an existing key.
    pub if_none_match: Honoured,
    /// `If-Match` with a made-up ETag.
    pub if_match: Honoured,
    /// `DELETE` with `If-Match` on a made-up ETag (only from `leasectl probe`).
    pub conditional_delete: Option<Honoured>,
}

impl PreconditionReport {
    /// True when both write preconditions are honoured.
    pub fn conditional(&self) -> bool {
        self.if_none_match == Honoured::Yes && self.if_match == Honoured::Yes
    }

    /// The first ignored header, if any.
    pub fn ignored_header(&self) -> Option<&'static str> {
        if self.if_none_match != Honoured::Yes {
            Some("If-None-Match")
        } else if self.if_match != Honoured::Yes {
            Some("If-Match")
        } else {
            None
        }
    }
}

/// A new scratch key for a probe next to `prefix`:
/// `{prefix}.leasectl-probe/{random id}` (discovery never lists it as a prefix).
pub fn scratch_key(prefix: &str) -> String {
    format!(
        "{prefix}.leasectl-probe/{}",
        super::record::new_instance_id()
    )
}

/// A made-up ETag no real object has.
pub const MADE_UP_ETAG: &str = "00000000000000000000000000000000-leasectl-probe";

fn outcome(r: Result<Option<String>, StoreError>) -> Result<Honoured, StoreError> {
    match r {
        Ok(_) => Ok(Honoured::Ignored),
        Err(StoreError::PreconditionFailed) | Err(StoreError::Conflict) => Ok(Honoured::Yes),
        // If-Match on a key that (to the service) does not match anything.
        Err(StoreError::NotFound(_)) => Ok(Honoured::Yes),
        Err(StoreError::NotImplemented(_)) => Ok(Honoured::Unsupported),
        Err(e) => Err(e),
    }
}

/// Probes the write preconditions on `key`, which must already hold `body`
/// (written by the caller). Each PUT that should be refused re-sends the same
/// `body`, so a service that ignores the header leaves the content unchanged.
///
/// Errors: any store failure other than the expected refusals.
pub async fn check_writes(
    store: &dyn ObjectStore,
    key: &str,
    body: &[u8],
) -> Result<PreconditionReport, StoreError> {
    let inm = outcome(
        store
            .put(key, body.to_vec(), PutCondition::IfNoneMatch)
            .await,
    )?;
    let im = outcome(
        store
            .put(
                key,
                body.to_vec(),
                PutCondition::IfMatch(MADE_UP_ETAG.into()),
            )
            .await,
    )?;
    Ok(PreconditionReport {
        if_none_match: inm,
        if_match: im,
        conditional_delete: None,
    })
}

/// The full probe on a scratch key: create it, check both write preconditions
/// and conditional DELETE, then remove it.
///
/// Errors: store failures (403 → `AccessDenied`: the credentials may not write there).
pub async fn probe_scratch(
    store: &dyn ObjectStore,
    key: &str,
) -> Result<PreconditionReport, StoreError> {
    let body = format!(
        "{{\"leasectl_probe\":true,\"at\":\"{}\"}}",
        chrono::Utc::now().to_rfc3339()
    )
    .into_bytes();
    let etag = match store
        .put(key, body.clone(), PutCondition::IfNoneMatch)
        .await
    {
        Ok(e) => e,
        // Left over from an interrupted probe: take it over.
        Err(StoreError::PreconditionFailed) => {
            store.put(key, body.clone(), PutCondition::None).await?
        }
        Err(StoreError::NotImplemented(d)) => return Err(StoreError::NotImplemented(d)),
        Err(e) => return Err(e),
    };
    let result = async {
        let mut report = check_writes(store, key, &body).await?;
        let del = match store.delete(key, Some(MADE_UP_ETAG)).await {
            Ok(()) => Honoured::Ignored,
            Err(StoreError::PreconditionFailed) => Honoured::Yes,
            Err(StoreError::NotImplemented(_)) => Honoured::Unsupported,
            Err(e) => return Err(e),
        };
        report.conditional_delete = Some(del);
        Ok(report)
    }
    .await;
    // Remove what we wrote, whatever happened.
    let cleanup = match &etag {
        Some(e) => match store.delete(key, Some(e)).await {
            Err(StoreError::PreconditionFailed) | Err(StoreError::NotImplemented(_)) => {
                store.delete(key, None).await
            }
            other => other,
        },
        None => store.delete(key, None).await,
    };
    let report = result?;
    cleanup?;
    Ok(report)
}
