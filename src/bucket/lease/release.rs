//! Releasing the lease: the released record written with `If-Match` on our
//! ETag, or a delete where the record format asks for it, never over a
//! record that is not ours.

use super::*;

#[cfg(feature = "sim")]
use crate::bucket::defect::{self, Defect};

impl BucketLease {
    /// Releases the lease (see [`Released`]). Never deletes or replaces a
    /// lease that is no longer ours, and never lets the next holder in while
    /// a live holder this lease replaced may still write
    /// ([`Released::LeftToExpire`]: nothing is sent).
    ///
    /// A record with a generation is not deleted: it is replaced by a released
    /// record that keeps the generation ([`LeaseRecord::released`]; readers
    /// judge it free), so the next holder writes a greater one whatever its
    /// clock says. A record without one (the seed's format) is deleted.
    ///
    /// Errors: [`LeaseError::Store`] when the store cannot be reached (the lease
    /// then expires by itself after one TTL); [`LeaseError::Contended`] when
    /// the record kept changing under us.
    pub async fn release(mut self) -> Result<Released, LeaseError> {
        self.lost = true; // no more writes under this lease, whatever happens
                          // A takeover of a live lease whose holder may still write: nobody
                          // may be let in before that holder's fence has closed.
        if let Some(nb) = self.not_before_mono {
            let now = self.clock.mono();
            if now < nb {
                tracing::warn!(key = %self.key, "the lease is not released before the replaced holder's fence has closed; it expires after its TTL");
                return Ok(Released::LeftToExpire {
                    fence_closes_in_ms: (nb - now).as_millis().try_into().unwrap_or(u64::MAX),
                    ttl_s: self.config.ttl_s,
                });
            }
        }
        #[cfg(feature = "sim")]
        if defect::on(Defect::ReleaseDeletesAny) {
            return self.read_check_delete().await;
        }
        // The defect `generation-from-clock`: the rule before issue 32 §3 —
        // delete on release, so the next creator counts from its own clock.
        #[cfg(feature = "sim")]
        if defect::on(Defect::GenerationFromClock) {
            return self.delete_release().await;
        }
        if let Some(generation) = self.record.generation {
            return self.mark_released(generation).await;
        }
        self.delete_release().await
    }

    /// Deletes our record: `DELETE If-Match` where the service honours it,
    /// else read, check it is still ours, delete.
    async fn delete_release(&self) -> Result<Released, LeaseError> {
        if self.config.exclusion == Exclusion::Conditional
            && self.store.capabilities().conditional_delete == DeleteSupport::Honoured
        {
            match self.store.delete(&self.key, Some(&self.etag)).await {
                Ok(()) => {
                    tracing::info!(key = %self.key, "lease released (conditional DELETE)");
                    return Ok(Released::ConditionalDelete);
                }
                Err(StoreError::PreconditionFailed) => {
                    return match self.gone_or_foreign().await? {
                        Some(done) => Ok(done),
                        // Ours but with another ETag (a lost renewal answer): fall back.
                        None => self.read_check_delete().await,
                    };
                }
                Err(StoreError::NotFound(_)) => return Ok(Released::AlreadyGone),
                Err(StoreError::NotImplemented(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.read_check_delete().await
    }

    /// Replaces our record by a released one that keeps `generation`: with
    /// `If-Match` on our ETag (or, best-effort, after a read that finds it
    /// still ours). A refusal is diagnosed by reading back: gone, our released
    /// record already (an answer lost and retried), another holder's, or ours
    /// under another ETag (a lost renewal answer: once more on that ETag).
    pub(super) async fn mark_released(&self, generation: u64) -> Result<Released, LeaseError> {
        let released = self.record.released(self.clock.wall());
        let body = released.to_body();
        let done = Released::Recorded { generation };
        let mut etag = self.etag.clone();
        let mut transient: Option<StoreError> = None;
        for _ in 0..MAX_ROUNDS {
            let form = self.store.capabilities().etag_form;
            let cond = if self.config.exclusion == Exclusion::Conditional {
                PutCondition::IfMatch(etag.clone())
            } else {
                let rb = read_back(self.store.as_ref(), &self.key).await?;
                if !self.is_ours(&rb) {
                    return Ok(self.not_ours_any_more(rb, &body, done));
                }
                PutCondition::None
            };
            match self.store.put(&self.key, body.clone(), cond).await {
                Ok(_) => {
                    tracing::info!(key = %self.key, generation, "lease released (a released record keeps its generation)");
                    return Ok(done);
                }
                Err(
                    refused @ (StoreError::PreconditionFailed
                    | StoreError::NotFound(_)
                    | StoreError::Conflict
                    | StoreError::Other { status: 500.., .. }),
                ) => {
                    let rb = read_back(self.store.as_ref(), &self.key).await?;
                    if self.is_ours(&rb) && !rb.holds(&body) {
                        match rb.etag() {
                            // Our record, unchanged, and the precondition refused
                            // anyway: the service does not take If-Match on this
                            // ETag. Delete it as a release without a generation
                            // does. (A 409 or 5xx over it is transient: once more.)
                            // A service that wants the ETag unquoted (Ceph RGW;
                            // checked on a scratch key, as a renewal does):
                            // once more in that form.
                            Some(e)
                                if e == etag
                                    && matches!(refused, StoreError::PreconditionFailed)
                                    && form == EtagForm::Quoted
                                    && probe::adapt_etag_form(
                                        self.store.as_ref(),
                                        &scratch_key(&self.key, &self.record.instance_id),
                                        self.clock.as_ref(),
                                    )
                                    .await? =>
                            {
                                continue;
                            }
                            Some(e)
                                if e == etag
                                    && matches!(refused, StoreError::PreconditionFailed) =>
                            {
                                tracing::warn!(key = %self.key, "the service refused the released record over our unchanged record; deleting it instead (the next holder's generation then counts from its clock)");
                                return self.delete_release().await;
                            }
                            Some(e) => etag = e.to_owned(),
                            None => {
                                return Err(LeaseError::Contended {
                                    key: self.key.clone(),
                                })
                            }
                        }
                        if !matches!(
                            refused,
                            StoreError::PreconditionFailed | StoreError::NotFound(_)
                        ) {
                            transient = Some(refused);
                        }
                        continue;
                    }
                    return Ok(self.not_ours_any_more(rb, &body, done));
                }
                Err(e) => return Err(e.into()),
            }
        }
        // Our record is still there: it expires by itself after one TTL.
        Err(match transient {
            Some(e) => e.into(),
            None => LeaseError::Contended {
                key: self.key.clone(),
            },
        })
    }

    /// What a read-back that is not ours (as a holder) says of a release
    /// whose released record is `body`: already done (our released record is
    /// there: an answer lost), gone, or someone else's.
    fn not_ours_any_more(&self, rb: ReadBack, body: &[u8], done: Released) -> Released {
        if rb.holds(body) {
            tracing::info!(key = %self.key, "lease released (our released record was found in place)");
            return done;
        }
        match rb.observed {
            Observed::Absent => Released::AlreadyGone,
            Observed::Present { record: Ok(r), .. } => Released::NotOurs(r),
            Observed::Present { .. } => Released::NotOurs(self.malformed_holder()),
        }
    }

    /// Stands for a malformed record found where ours was.
    fn malformed_holder(&self) -> LeaseRecord {
        LeaseRecord {
            instance_id: "(malformed record)".into(),
            acquired_at: self.clock.wall(),
            renewed_at: self.clock.wall(),
            ttl_s: 0,
            generation: None,
            released_at: None,
        }
    }

    /// After a conditional DELETE was refused: re-reads the key and says
    /// whether it is gone or someone else's (`None`: still ours).
    async fn gone_or_foreign(&self) -> Result<Option<Released>, LeaseError> {
        let rb = read_back(self.store.as_ref(), &self.key).await?;
        let ours = self.is_ours(&rb);
        Ok(match rb.observed {
            Observed::Absent => Some(Released::AlreadyGone),
            Observed::Present { record: Ok(r), .. } if !ours => Some(Released::NotOurs(r)),
            _ => None,
        })
    }

    async fn read_check_delete(&self) -> Result<Released, LeaseError> {
        let rb = read_back(self.store.as_ref(), &self.key).await?;
        let ours = self.is_ours(&rb);
        #[cfg(feature = "sim")]
        let ours = ours || defect::on(Defect::ReleaseDeletesAny);
        match rb.observed {
            Observed::Absent => Ok(Released::AlreadyGone),
            Observed::Present {
                record: Ok(_),
                etag,
                ..
            } if ours => {
                // Still with If-Match where there is an ETag: a service that honours
                // it closes the window between read and delete.
                match self.store.delete(&self.key, etag.as_deref()).await {
                    Ok(()) => {}
                    Err(StoreError::PreconditionFailed) => {
                        return self.gone_or_foreign().await?.ok_or(LeaseError::Contended {
                            key: self.key.clone(),
                        });
                    }
                    Err(StoreError::NotImplemented(_))
                    | Err(StoreError::Other { status: 400, .. }) => {
                        self.store.delete(&self.key, None).await?
                    }
                    Err(e) => return Err(e.into()),
                }
                tracing::info!(key = %self.key, "lease released (read, checked, deleted)");
                Ok(Released::ReadCheckDelete)
            }
            Observed::Present { record: Ok(r), .. } => Ok(Released::NotOurs(r)),
            Observed::Present { .. } => Ok(Released::NotOurs(self.malformed_holder())),
        }
    }
}
