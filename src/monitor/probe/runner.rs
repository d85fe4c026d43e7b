//! Probes answered on a thread and current-thread runtime of their own, as
//! `serve`'s gatherer runs (`crate::runtime`): an S3 request and its
//! connection then meet on one run queue, where on the command's
//! multi-threaded runtime each was handed between workers (about twice the
//! CPU a request). The HTTP side hands a probe over and waits for its answer;
//! a scrape that goes away leaves its probe to finish, so the target's state
//! is put back rather than forgotten.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{ProbeAnswer, Prober};
use crate::runtime;
use crate::runtime::RuntimeThread;

/// One probe handed over: its query, its scrape timeout header, and where
/// its answer goes.
struct Job {
    query: String,
    timeout: Option<String>,
    reply: oneshot::Sender<ProbeAnswer>,
}

/// The thread that answers probes, and the way to it.
pub struct ProbeRunner {
    jobs: mpsc::UnboundedSender<Job>,
    thread: RuntimeThread<()>,
}

impl ProbeRunner {
    /// Starts the thread `leasectl-probe`, answering with `prober`.
    ///
    /// # Errors
    /// The thread could not be created.
    pub fn start(prober: Arc<Prober>) -> std::io::Result<Self> {
        let (jobs, mut rx) = mpsc::unbounded_channel::<Job>();
        let thread = runtime::spawn("leasectl-probe", async move {
            // Each probe a task of its own: they run concurrently, one
            // waiting on a store while another is judged.
            while let Some(job) = rx.recv().await {
                let prober = prober.clone();
                tokio::spawn(async move {
                    let answer = prober.answer(&job.query, job.timeout.as_deref()).await;
                    let _ = job.reply.send(answer);
                });
            }
        })?;
        Ok(Self { jobs, thread })
    }

    /// The answer to a probe of `query` with the scrape timeout header
    /// `timeout` (none: the thread stopped before it answered).
    pub async fn ask(&self, query: &str, timeout: Option<&str>) -> Option<ProbeAnswer> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job {
                query: query.to_owned(),
                timeout: timeout.map(str::to_owned),
                reply,
            })
            .ok()?;
        answer.await.ok()
    }

    /// Stops the thread at its next `.await`; probes under way are dropped.
    pub fn stop(&self) {
        self.thread.stop();
    }
}
