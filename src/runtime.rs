//! A background loop on a thread of its own, on a current-thread tokio
//! runtime: the console's refresher and `serve`'s gatherer.
//!
//! Why: on the shared multi-threaded runtime, each S3 request's future and
//! hyper's connection task were handed from one worker to the other, and
//! the futex wake-ups and context switches of that hand-off were about a
//! sixth of the request path's CPU (measured: 172.9 µs → 88.3 µs per `304`).
//! On one thread the request and its connection meet on the same run
//! queue. The loop's CPU-heavy steps (judging and sorting 10,000 rows) no
//! longer compete with the console's event loop for a worker either.
//!
//! Connections opened here are driven by this thread's runtime, and other
//! runtimes may borrow them from the client's pool: so the thread is
//! stopped only when nothing else needs the store ([`RuntimeThread::stop`]
//! after the write task released its leases), and it is never joined, so
//! a request stuck in a hung network call cannot hold the process.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// A future running on its own thread; awaiting this waits for its output.
/// Dropping it does not stop the thread: call [`RuntimeThread::stop`].
#[derive(Debug)]
pub(crate) struct RuntimeThread<T> {
    done: oneshot::Receiver<Result<Option<T>, String>>,
    stop: CancellationToken,
}

/// How a [`RuntimeThread`] ended, when it was not stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended<T> {
    /// The future returned this.
    Returned(T),
    /// It was stopped ([`RuntimeThread::stop`]) before it returned.
    Stopped,
    /// It panicked (the panic's message), or its runtime could not start.
    Failed(String),
}

impl<T> RuntimeThread<T> {
    /// Asks the loop to end at its next `.await`; what it holds is dropped
    /// on its own thread.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }
}

impl<T> Future for RuntimeThread<T> {
    type Output = Ended<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.done).poll(cx).map(|r| match r {
            Ok(Ok(Some(t))) => Ended::Returned(t),
            Ok(Ok(None)) => Ended::Stopped,
            Ok(Err(e)) => Ended::Failed(e),
            Err(_) => Ended::Failed("its thread ended without a word".into()),
        })
    }
}

/// Runs `fut` on a new thread named `name`, on a current-thread runtime
/// with I/O and timers.
///
/// # Errors
/// The thread could not be created (the process is out of threads or
/// memory); `fut` is dropped unpolled.
pub(crate) fn spawn<F>(name: &str, fut: F) -> std::io::Result<RuntimeThread<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, done) = oneshot::channel();
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(format!("its runtime did not start: {e}")));
                    return;
                }
            };
            let run = std::panic::AssertUnwindSafe(|| {
                rt.block_on(async move {
                    tokio::select! {
                        out = fut => Some(out),
                        () = stopped.cancelled() => None,
                    }
                })
            });
            let out = std::panic::catch_unwind(run).map_err(|p| {
                p.downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "it panicked".into())
            });
            let _ = tx.send(out);
            // Tasks spawned on this runtime (hyper's connections) end here;
            // a blocking task still running is not waited for.
            rt.shutdown_background();
        })?;
    Ok(RuntimeThread { done, stop })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_loop_returns_is_stopped_or_fails_on_its_own_thread() {
        let main = std::thread::current().id();
        let t = spawn("test-returns", async move {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            std::thread::current().id() != main
        })
        .unwrap();
        assert_eq!(t.await, Ended::Returned(true));

        let t = spawn("test-stopped", std::future::pending::<()>()).unwrap();
        t.stop();
        assert_eq!(t.await, Ended::Stopped);

        let t = spawn("test-panics", async {
            tokio::task::yield_now().await;
            panic!("boom {}", 1)
        })
        .unwrap();
        assert_eq!(t.await, Ended::<()>::Failed("boom 1".into()));
    }
}
