//! The keep-alive task: renews a [`BucketLease`] every third of its TTL and
//! publishes the fence, so a worker can cancel in-flight writes the moment the
//! lease may no longer be written under.

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::error::LeaseError;
use super::lease::BucketLease;

/// A running keep-alive. Dropping it stops renewing (the lease then expires
/// after one TTL); call [`KeepAlive::stop`] to get the lease back for release.
pub struct KeepAlive {
    fence: watch::Receiver<bool>,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<BucketLease, LeaseError>>>,
}

impl Drop for KeepAlive {
    /// Stops renewing: the lease then expires after one TTL.
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl KeepAlive {
    /// Starts renewing `lease` on the current tokio runtime.
    pub fn start(lease: BucketLease) -> Self {
        let (tx, rx) = watch::channel(lease.may_write());
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(lease, tx, cancel.clone()));
        Self {
            fence: rx,
            cancel,
            task: Some(task),
        }
    }

    /// The fence: `true` while writes may start. It turns `false` two thirds
    /// of a TTL after the last successful renewal, or at once when the lease
    /// is lost, and `true` again only after a successful renewal.
    pub fn fence(&self) -> watch::Receiver<bool> {
        self.fence.clone()
    }

    /// True once the task has ended (lease lost).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops renewing and returns the lease (to release it), or the error
    /// that ended the task (e.g. [`LeaseError::Lost`]).
    pub async fn stop(mut self) -> Result<BucketLease, LeaseError> {
        self.cancel.cancel();
        self.join().await
    }

    /// Waits until the task ends by itself (the lease was lost).
    pub async fn lost(&mut self) -> Result<BucketLease, LeaseError> {
        self.join().await
    }

    /// Waits for the task and returns what it ended with.
    async fn join(&mut self) -> Result<BucketLease, LeaseError> {
        let failed = |m: String| LeaseError::Store(crate::store::StoreError::Invalid(m));
        match self.task.take() {
            None => Err(failed("keep-alive task already ended".into())),
            Some(task) => task
                .await
                .unwrap_or_else(|e| Err(failed(format!("keep-alive task failed: {e}")))),
        }
    }
}

async fn run(
    mut lease: BucketLease,
    fence: watch::Sender<bool>,
    cancel: CancellationToken,
) -> Result<BucketLease, LeaseError> {
    let retry =
        (lease.renew_interval() / 5).clamp(Duration::from_millis(100), Duration::from_secs(2));
    let mut wait = lease.renew_interval();
    loop {
        let open = lease.may_write();
        fence.send_if_modified(|v| std::mem::replace(v, open) != open);
        let fence_in = lease.fence_remaining();
        tokio::select! {
            _ = cancel.cancelled() => return Ok(lease),
            _ = tokio::time::sleep(fence_in), if open => {
                tracing::warn!(key = %lease.key(), "fence closed: no renewal for two thirds of a TTL; writes must stop");
                fence.send_replace(false);
                continue;
            }
            _ = tokio::time::sleep(wait) => {}
        }
        // Renew, while still closing the fence on time if the request hangs.
        let key = lease.key().to_owned();
        let fence_at = tokio::time::Instant::now() + lease.fence_remaining();
        let mut fence_open = lease.may_write();
        let result = {
            let renewal = lease.renew();
            tokio::pin!(renewal);
            loop {
                tokio::select! {
                    r = &mut renewal => break Some(r),
                    _ = tokio::time::sleep_until(fence_at), if fence_open => {
                        tracing::warn!(key = %key, "fence closed while a renewal is in flight");
                        fence.send_replace(false);
                        fence_open = false;
                    }
                    _ = cancel.cancelled() => break None,
                }
            }
        };
        match result {
            None => return Ok(lease),
            Some(Ok(())) => {
                fence.send_replace(lease.may_write());
                wait = lease.renew_interval();
            }
            Some(Err(e @ LeaseError::Lost { .. })) => {
                fence.send_replace(false);
                return Err(e);
            }
            Some(Err(e)) => {
                tracing::warn!(key = %key, error = %e, "renewal failed; retrying");
                wait = retry;
            }
        }
    }
}
