//! Renewing the lease: the conditional rewrite, its precondition, and what
//! a refused renewal means.

use super::*;

use crate::bucket::error::lost_to;

#[cfg(feature = "sim")]
use crate::bucket::defect::{self, Defect};

impl BucketLease {
    /// Renews the lease: a PUT with `If-Match` on the held ETag, stamped with
    /// our wall clock. On success the fence is extended.
    ///
    /// Errors: [`LeaseError::Lost`] (someone else's record, or none: `may_write`
    /// is false from now on); [`LeaseError::Store`] (transport: the lease may
    /// still be ours; the fence keeps running down); [`LeaseError::Contended`].
    pub async fn renew(&mut self) -> Result<(), LeaseError> {
        self.renew_with(None).await
    }

    /// Renews with a fresh generation (`max(its own + 1, now in µs)`): what a
    /// write that may have replaced a holder unseen does once that holder has
    /// certainly stopped (a slow takeover, after its wait), so that its
    /// generation is greater than any that holder was handed.
    ///
    /// Errors: as [`BucketLease::renew`].
    pub(crate) async fn refresh_generation(&mut self) -> Result<(), LeaseError> {
        let fresh = self
            .config
            .record_format
            .generation(self.record.generation, self.clock.wall());
        self.renew_with(fresh).await
    }

    /// [`BucketLease::renew`], writing `generation` instead of the record's
    /// own when given (a slow acquire's last write before it hands the lease
    /// out: [`super::confirm`]).
    ///
    /// Errors: as [`BucketLease::renew`].
    pub(super) async fn renew_with(&mut self, generation: Option<u64>) -> Result<(), LeaseError> {
        if self.lost {
            return Err(LeaseError::Lost {
                key: self.key.clone(),
                by: None,
                found: Some("it was lost before this renewal (said then)".to_owned()),
            });
        }
        let mut tally = Conflicts::default();
        for _ in 0..MAX_ROUNDS {
            // On this contender's phase: no other process writes these bytes.
            let now = stamp(self.clock.wall(), self.phase);
            let mono = self.clock.mono();
            let record = LeaseRecord {
                renewed_at: holder_stamps(self.record.acquired_at, now).1,
                generation: generation.or(self.record.generation),
                ..self.record.clone()
            };
            let cond = self.renew_condition().await?;
            let form = self.store.capabilities().etag_form;
            let body = record.to_body();
            // Remembered before it is sent: a renewal cancelled while in
            // flight (the holder letting go) may still land, and the release
            // must know that body as ours. An answer clears it.
            self.unanswered.add(&body);
            match self.store.put(&self.key, body.clone(), cond).await {
                Ok(etag) => {
                    self.etag = match etag {
                        Some(e) => e,
                        // No ETag in the answer: read back; only our own body is ours
                        // (a stranger may have written right after it landed).
                        None => match read_back(self.store.as_ref(), &self.key).await? {
                            rb if rb.holds(&body) && rb.etag().is_some() => {
                                rb.etag().unwrap_or_default().to_owned()
                            }
                            rb => return Err(self.mark_lost(&rb.observed)),
                        },
                    };
                    self.record = record;
                    self.body = body;
                    self.unanswered.clear();
                    self.renewed_mono = mono;
                    return Ok(());
                }
                Err(
                    refused @ (StoreError::PreconditionFailed
                    | StoreError::Conflict
                    | StoreError::NotFound(_)
                    | StoreError::Other { status: 500.., .. }),
                ) => {
                    // 409 and 5xx: the write may have landed, and so may a
                    // 412's (an earlier attempt of it landed, its answer lost):
                    // the body stays remembered.
                    self.renewal_refused(refused, form, &mut tally).await?
                }
                Err(e) => {
                    // No answer (a timeout, a dropped connection): it may have
                    // landed; the body stays remembered.
                    return Err(e.into());
                }
            }
        }
        Err(tally.give_up(self.key.clone(), self.store.as_ref()))
    }

    /// Ends a forced takeover's wait for the replaced holder's fence
    /// ([`FenceDeadline::not_before_mono`]) once it has run out, by reading
    /// the record back: writes may start only while the record at the key is
    /// still ours. During the wait a service that carries out a conditional
    /// write against its precondition (MinIO without read quorum, a
    /// check-then-write store) may have let the replaced holder's renewal put
    /// its record back; told it succeeded, that holder writes on, and no
    /// request of ours may come between that write and the end of the wait to
    /// say so. After the wait the replaced holder's fence has closed, so a
    /// renewal of its own landing later cannot reopen it. Returns whether the
    /// wait is over (`false`: it has not run out yet, nothing read).
    ///
    /// Errors: [`LeaseError::Lost`] (someone else's record, or none: the lease
    /// is marked lost); [`LeaseError::Store`] (not read: the wait goes on;
    /// try again).
    pub(crate) async fn end_wait(&mut self) -> Result<bool, LeaseError> {
        match self.not_before_mono {
            None => return Ok(true),
            Some(nb) if self.clock.mono() < nb => return Ok(false),
            Some(_) => {}
        }
        if let Err(e) = self.read_back_ours().await {
            if matches!(e, LeaseError::Lost { .. }) {
                tracing::error!(
                    key = %self.key,
                    "the replaced holder's fence has closed, but the record is not ours any more: \
                     the service carried out a write against its precondition during the wait"
                );
            }
            return Err(e);
        }
        self.not_before_mono = None;
        Ok(true)
    }

    /// Reads the record back and takes up what it finds when it is ours (a
    /// body we wrote, [`BucketLease::is_ours`]): its ETag, body and record,
    /// which differ when a write of ours landed though its answer was lost.
    ///
    /// Errors: [`LeaseError::Lost`] (someone else's record, or none: the
    /// lease is marked lost); [`LeaseError::Store`].
    async fn read_back_ours(&mut self) -> Result<(), LeaseError> {
        let rb = read_back(self.store.as_ref(), &self.key).await?;
        let ours = self.is_ours(&rb);
        match rb.observed {
            Observed::Present {
                etag: Some(e),
                record: Ok(r),
                ..
            } if ours => {
                if e != self.etag {
                    self.etag = e;
                    self.body = rb.body.unwrap_or_default();
                    self.record = r;
                    self.unanswered.clear();
                }
                Ok(())
            }
            other => Err(self.mark_lost(&other)),
        }
    }

    /// The precondition of the next renewal: `If-Match` on the held ETag, or
    /// (best-effort) none, after a read that finds the record still ours.
    ///
    /// Errors: [`LeaseError::Lost`] (best-effort: not ours any more), [`LeaseError::Store`].
    async fn renew_condition(&mut self) -> Result<PutCondition, LeaseError> {
        Ok(match self.config.exclusion {
            #[cfg(feature = "sim")]
            Exclusion::Conditional if defect::on(Defect::RenewUnconditional) => PutCondition::None,
            Exclusion::Conditional => PutCondition::IfMatch(self.etag.clone()),
            Exclusion::BestEffort => {
                // Read, check it is still ours (a body we wrote), then write.
                self.read_back_ours().await?;
                PutCondition::None
            }
        })
    }

    /// A renewal sent with the ETag form `form` was `refused` (412, 404, or the
    /// ambiguous 409 and 5xx, counted in `tally`): reads back and judges. `Ok`
    /// means renew again: our earlier write had landed (its ETag adopted), ours
    /// is there unchanged after a 409/5xx (after a back-off), or the service
    /// wants the ETag unquoted (checked and switched).
    ///
    /// Errors: [`LeaseError::Lost`] (someone else's record, or none),
    /// [`LeaseError::IfMatchRefused`], [`LeaseError::Store`].
    async fn renewal_refused(
        &mut self,
        refused: StoreError,
        form: EtagForm,
        tally: &mut Conflicts,
    ) -> Result<(), LeaseError> {
        // 409 and 5xx are ambiguous: the write may have landed. Read back.
        let conflict = matches!(refused, StoreError::Conflict | StoreError::Other { .. });
        if conflict {
            tally.conflicts += 1;
        }
        let answer = match &refused {
            StoreError::Conflict => {
                tally.saw_409 = true;
                "409 ConditionalRequestConflict".to_owned()
            }
            StoreError::Other { status, .. } => {
                tally.last_5xx = Some(refused.clone());
                format!("{status}")
            }
            _ => String::new(),
        };
        let rb = read_back(self.store.as_ref(), &self.key).await?;
        let ours = self.is_ours(&rb);
        let stored = rb.body.as_deref().unwrap_or_default();
        match rb.observed {
            Observed::Present {
                etag: Some(e),
                record: Ok(r),
                ..
            } if ours => {
                if e != self.etag {
                    // Our earlier write landed though its answer was lost (its
                    // body is one we sent): adopt it and renew again (the fence
                    // is not extended by it).
                    tracing::info!(key = %self.key, "renewal refused: an earlier renewal landed though its answer was lost; adopting its ETag");
                    self.etag = e;
                    self.body = stored.to_vec();
                    self.record = r;
                    self.unanswered.clear();
                } else if conflict {
                    // 409/5xx: not written; ours is still there.
                    tracing::info!(key = %self.key, "renewal answered {answer}; read back: ours is still there unchanged; retrying");
                    tokio::time::sleep(Duration::from_millis(50 * tally.conflicts as u64)).await;
                } else if form == EtagForm::Quoted
                    && probe::adapt_etag_form(
                        self.store.as_ref(),
                        &scratch_key(&self.key, &self.record.instance_id),
                        self.clock.as_ref(),
                    )
                    .await?
                {
                    // The service wants the ETag unquoted (checked): renew again.
                } else {
                    // The object still has the ETag we sent, yet If-Match was refused.
                    return Err(LeaseError::IfMatchRefused {
                        key: self.key.clone(),
                        service: self.store.describe(),
                        etag: e,
                    });
                }
                Ok(())
            }
            other => {
                if other
                    .record()
                    .is_some_and(|r| r.instance_id == self.record.instance_id)
                {
                    tracing::error!(key = %self.key, "the LEASE names our instance id but is not a record this process wrote: another process holds it under the same instance id");
                }
                Err(self.mark_lost(&other))
            }
        }
    }

    /// Marks the lease lost to what `now` shows at its key, said as it is:
    /// another holder's record, nothing, or something that is no record
    /// (with why, e.g. a local file replaced by a link to another file).
    pub(super) fn mark_lost(&mut self, now: &Observed) -> LeaseError {
        self.lost = true;
        let by = now.record().cloned();
        let found = match now {
            Observed::Present {
                record: Err((why, _)),
                ..
            } => Some(format!(
                "the LEASE was replaced by something that is not a lease record: {why}"
            )),
            _ => None,
        };
        tracing::error!(key = %self.key, "lease lost: {}", lost_to(by.as_ref(), found.as_deref()));
        LeaseError::Lost {
            key: self.key.clone(),
            by: by.map(Box::new),
            found,
        }
    }

    /// Marks the lease lost without a look at its key, for `why` (a
    /// sentence, safe to print: a record left to expire, a fence that ran
    /// out before the lease was handed out): nothing is written again.
    pub(super) fn mark_lost_unread(&mut self, why: &str) -> LeaseError {
        self.lost = true;
        LeaseError::Lost {
            key: self.key.clone(),
            by: None,
            found: Some(why.to_owned()),
        }
    }
}
