//! `leasectl serve`: a Prometheus exporter for a sidecar or a DaemonSet.
//!
//! One task gathers every `--refresh` with the console's request discipline
//! (a [`Gatherer`]: conditional GETs, a listing about every 30 s) and renders
//! the metrics (and the session's holder history, with takeovers named from
//! the local audit log); the HTTP server (axum) renders the latest metrics,
//! so scrapes never cause store requests. Every answer is counted in
//! `leasectl_http_requests_total{path,code}`. `/metrics` answers 503 until the
//! first snapshot; `/healthz` answers 200 while snapshots keep coming (the
//! last one at most three refreshes plus a request timeout ago), else 503.
//!
//! No client can starve the server: a request's headers must arrive within
//! [`HEADER_READ_TIMEOUT`] (also the longest a kept-alive connection waits
//! for its next request), a connection that moves no byte for
//! [`IDLE_TIMEOUT`] is closed, and at most [`connection_limit`] connections
//! are open at once: a new one beyond it closes the oldest connection that
//! is not being answered (or is itself closed when every one is).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::clock::SharedClock;
use crate::snapshot::Gatherer;
use crate::store::Counters;

use crate::monitor::family::SortedFamily;
use prometheus_client::metrics::counter::Counter;

use super::probe::{ProbeAnswer, ProbeRunner, Prober};
use super::prometheus::{HttpLabels, Metrics, CONTENT_TYPE};
use crate::audit::{AuditEntry, AuditTail};
use crate::exit::{say, tell, Exit};
use crate::runtime;
use crate::snapshot::Recipe;
use crate::text::{format_secs, sanitize};

/// What `serve` needs besides the targets.
pub(crate) struct ServeOptions {
    /// Where to listen (port 0: any free port, printed on stderr).
    pub listen: SocketAddr,
    /// Between two gathers.
    pub refresh: Duration,
    /// The deadline of each request (for `/healthz`'s patience).
    pub request_timeout: Duration,
    /// leasectl's audit log, read at each gather to name takeovers in the
    /// holder history (None or missing: none are named).
    pub audit_path: Option<std::path::PathBuf>,
}

struct Latest {
    metrics: Metrics,
    /// When the latest snapshot was applied (None: not yet).
    at: Option<tokio::time::Instant>,
}

#[derive(Clone)]
struct AppState {
    latest: Arc<Mutex<Latest>>,
    http: SortedFamily<HttpLabels, Counter>,
    stale_after: Duration,
    /// Where probes are answered (None: `/probe` is not found).
    probes: Option<Arc<ProbeRunner>>,
}

impl AppState {
    fn count(&self, path: &str, r: Response) -> Response {
        self.http
            .get_or_create(&HttpLabels {
                path: path.to_owned(),
                code: r.status().as_u16().to_string(),
            })
            .inc();
        r
    }
}

async fn metrics(State(s): State<AppState>) -> Response {
    let ready = s.latest.lock().map(|l| l.at.is_some()).unwrap_or(false);
    if !ready {
        let r = (
            StatusCode::SERVICE_UNAVAILABLE,
            "The first snapshot is still being gathered.\n",
        )
            .into_response();
        return s.count("/metrics", r);
    }
    match s.latest.lock() {
        Ok(l) => {
            // Counted first, so that this scrape is in its own answer.
            s.http
                .get_or_create(&HttpLabels {
                    path: "/metrics".to_owned(),
                    code: "200".to_owned(),
                })
                .inc();
            let exposition = l.metrics.exposition();
            drop(l);
            ([(header::CONTENT_TYPE, CONTENT_TYPE)], streamed(exposition)).into_response()
        }
        Err(_) => {
            let r = (
                StatusCode::INTERNAL_SERVER_ERROR,
                "The metrics are unavailable: the gathering task failed.\n",
            )
                .into_response();
            s.count("/metrics", r)
        }
    }
}

/// The body of a `/metrics` answer: `exposition` written on a blocking
/// thread in pieces of about [`CHUNK`] bytes as the client reads them, so
/// that no scrape holds the whole text (tens of megabytes at 50,000
/// prefixes) and the lock the next snapshot is applied under is not held
/// while it is written. A client that goes away ends the writing (its
/// pieces have nowhere to go); a slow one is closed by [`IDLE_TIMEOUT`].
fn streamed(exposition: super::prometheus::Exposition) -> axum::body::Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<axum::body::Bytes>(2);
    tokio::task::spawn_blocking(move || {
        let mut w = ChunkSender {
            tx,
            piece: String::with_capacity(CHUNK),
        };
        if exposition.write_to(&mut w).is_ok() {
            w.send();
        }
    });
    let pieces = futures::stream::unfold(rx, |mut rx| async move {
        let piece = rx.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(piece), rx))
    });
    axum::body::Body::from_stream(pieces)
}

/// The most prefixes a probe's answer is written for at once, in the
/// request's task; a larger one is [`streamed`].
const INLINE_ROWS: usize = 100;

/// About how many bytes of the exposition a piece of a `/metrics` body
/// holds: 64 KiB.
const CHUNK: usize = 64 * 1024;

/// Sends what is written to it in pieces of about [`CHUNK`] bytes; fails
/// once the receiver is gone.
struct ChunkSender {
    tx: tokio::sync::mpsc::Sender<axum::body::Bytes>,
    piece: String,
}

impl ChunkSender {
    /// Sends the piece so far (waiting while the client has two unread);
    /// false when the receiver is gone.
    fn send(&mut self) -> bool {
        if self.piece.is_empty() {
            return true;
        }
        let piece = std::mem::replace(&mut self.piece, String::with_capacity(CHUNK));
        self.tx.blocking_send(piece.into()).is_ok()
    }
}

impl std::fmt::Write for ChunkSender {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.piece.push_str(s);
        if self.piece.len() >= CHUNK && !self.send() {
            return Err(std::fmt::Error);
        }
        Ok(())
    }
}

async fn not_found(State(s): State<AppState>) -> Response {
    let r = (
        StatusCode::NOT_FOUND,
        if s.probes.is_some() {
            "Not found: leasectl serve answers /metrics, /healthz and /probe?target=URL&module=NAME.\n"
        } else {
            "Not found: leasectl serve answers /metrics and /healthz.\n"
        },
    )
        .into_response();
    s.count("other", r)
}

/// `/probe?target=URL&module=NAME` ([`crate::monitor::probe`]): the
/// target's families within the scrape's timeout (200, also when the
/// target could not be read: `leasectl_probe_success` says so), or why
/// the request is refused (400); not found when serve has no modules.
async fn probe(
    State(s): State<AppState>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Response {
    let Some(probes) = s.probes.clone() else {
        return not_found(State(s)).await;
    };
    let timeout = headers
        .get(super::probe::SCRAPE_TIMEOUT_HEADER)
        .map(|v| v.to_str().unwrap_or("(not text)"));
    let Some(answer) = probes.ask(uri.query().unwrap_or(""), timeout).await else {
        let r = (
            StatusCode::SERVICE_UNAVAILABLE,
            "serve is stopping: the probe was not answered.\n",
        )
            .into_response();
        return s.count("/probe", r);
    };
    match answer {
        ProbeAnswer::Refused(why) => {
            let r = (StatusCode::BAD_REQUEST, format!("{why}\n")).into_response();
            s.count("/probe", r)
        }
        ProbeAnswer::Metrics(exposition) => {
            let body = if exposition.rows() <= INLINE_ROWS {
                // A target of a few prefixes: written here, at once (a blocking
                // thread and a channel cost more than the text).
                let mut text = String::with_capacity(2048 + 1280 * exposition.rows());
                let _ = exposition.write_to(&mut text);
                axum::body::Body::from(text)
            } else {
                streamed(exposition)
            };
            let r = ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response();
            s.count("/probe", r)
        }
    }
}

async fn healthz(State(s): State<AppState>) -> Response {
    let r = healthz_answer(&s);
    s.count("/healthz", r)
}

fn healthz_answer(s: &AppState) -> Response {
    let at = s.latest.lock().map(|l| l.at).unwrap_or(None);
    match at {
        Some(at) if at.elapsed() <= s.stale_after => (StatusCode::OK, "ok\n").into_response(),
        Some(at) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "The last snapshot was gathered {} ago; snapshots are not keeping up.\n",
                format_secs(at.elapsed().as_secs_f64())
            ),
        )
            .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "The first snapshot is still being gathered.\n",
        )
            .into_response(),
    }
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => "SIGTERM",
                _ = i.recv() => "SIGINT",
            }
        }
        _ => {
            tracing::warn!(
                "cannot install the SIGTERM and SIGINT handlers: serve stops only when killed"
            );
            std::future::pending::<&'static str>().await
        }
    }
}

/// Serves until SIGTERM or SIGINT (status 0), answering `/probe` with
/// `prober` too (None: `/probe` is not found); the probes' state has its
/// families on `/metrics`. Failing to listen is status 1, with a sentence on
/// stderr. Connections are served under the timeouts and the limit of the
/// module docs.
pub(crate) async fn serve_with_probes(
    mut gatherer: Gatherer,
    clock: SharedClock,
    extras: Recipe,
    counters: Arc<Counters>,
    opts: ServeOptions,
    prober: Option<Arc<Prober>>,
) -> Exit {
    let listener = match tokio::net::TcpListener::bind(opts.listen).await {
        Ok(l) => l,
        Err(e) => {
            say(format!("could not listen on {}: {e}", opts.listen));
            return Exit::Failed;
        }
    };
    let addr = listener.local_addr().unwrap_or(opts.listen);
    tell(format_args!(
        "serving metrics on http://{addr}/metrics and http://{addr}/healthz"
    ));
    if let Some(p) = &prober {
        let names: Vec<&str> = p.module_names().collect();
        tell(format_args!(
            "answering probes on http://{addr}/probe?target=URL&module=NAME (modules: {})",
            sanitize(&names.join(", "))
        ));
    }
    let mut metrics_ = Metrics::new();
    if let Some(p) = prober.clone() {
        metrics_.add_families(Arc::new(
            move |r: &mut prometheus_client::registry::Registry| p.register(r),
        ));
    }
    let probes = match prober.clone().map(ProbeRunner::start).transpose() {
        Ok(p) => p.map(Arc::new),
        Err(e) => {
            say(format!("could not start the probes' thread: {e}"));
            return Exit::Failed;
        }
    };
    let state = AppState {
        probes: probes.clone(),
        http: metrics_.http_requests(),
        latest: Arc::new(Mutex::new(Latest {
            metrics: metrics_,
            at: None,
        })),
        stale_after: opts.refresh * 3 + opts.request_timeout,
    };
    let latest = state.latest.clone();
    let refresh = opts.refresh;
    let mut audit_tail = opts.audit_path.map(|p| AuditTail::new(p, AUDIT_KEEP));
    // The gatherer runs on a thread and current-thread runtime of its own
    // (a request costs half the CPU there: no hand-off between workers); scrapes are
    // answered on the command's runtime.
    let gathering = runtime::spawn("leasectl-gather", async move {
        // The audit log's last error: warned once, and again only when it
        // changes; its recovery is told too.
        let mut audit_error: Option<String> = None;
        let mut ticker = tokio::time::interval(refresh);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let audit = read_audit(audit_tail.take());
            let (snap, (tail, audit, error)) =
                tokio::join!(extras.take(&mut gatherer, &clock), audit);
            audit_tail = tail;
            if error != audit_error {
                match (&error, audit_tail.as_ref()) {
                    (Some(e), _) => tracing::warn!(
                        "{e}; takeovers cannot be told from other holder changes until it can be read (leasectl_audit_log_ok 0)"
                    ),
                    (None, Some(t)) => tracing::info!(
                        "the audit log {} can be read again",
                        sanitize(&t.path().display().to_string())
                    ),
                    (None, None) => {}
                }
                audit_error = error;
            }
            // Updated under the lock (no await inside): a scrape sees one
            // whole snapshot or the previous one.
            if let Ok(mut l) = latest.lock() {
                l.metrics
                    .update(&snap, &counters, extras.scans_pod(), &audit);
                if let Some(t) = audit_tail.as_ref() {
                    l.metrics.set_audit_log(t.path(), audit_error.is_none());
                }
                l.at = Some(tokio::time::Instant::now());
            }
        }
    });
    let gathering = match gathering {
        Ok(g) => g,
        Err(e) => {
            say(format!("could not start the gathering thread: {e}"));
            return Exit::Failed;
        }
    };
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/probe", get(probe))
        .fallback(not_found)
        .with_state(state);
    let why = accept_loop(listener, app, connection_limit()).await;
    gathering.stop();
    if let Some(p) = &probes {
        p.stop();
    }
    // A serve that stops says why, always.
    tell(format_args!(
        "serve stopped: {why} received; connections were closed"
    ));
    Exit::Ok
}

/// The longest a client may take to send a request's headers, and the
/// longest a kept-alive connection waits for its next request: 10 s.
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a connection may move no byte (read or written) while a
/// request or its answer is under way: 30 s.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most connections `serve` keeps open at once: half the descriptors
/// this process may open (`RLIMIT_NOFILE`) beyond 64 kept for the stores,
/// between 8 and 256 (96 with 256 descriptors; 256 from 576 up).
pub(crate) fn connection_limit() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        1024
    };
    (soft.saturating_sub(64) / 2).clamp(8, 256) as usize
}

/// One open connection: whether a request on it is being answered, and how
/// to close it.
struct Conn {
    busy: std::sync::atomic::AtomicUsize,
    close: tokio_util::sync::CancellationToken,
}

/// The open connections, oldest first (ids grow).
#[derive(Default)]
struct Conns {
    next: u64,
    open: std::collections::BTreeMap<u64, Arc<Conn>>,
    /// Connections closed for the limit since the last warning.
    shed: u64,
    warned: Option<tokio::time::Instant>,
}

impl Conns {
    /// Closes the oldest connection not being answered; false if every one is.
    fn shed_idle(&mut self) -> bool {
        let idle = self
            .open
            .iter()
            .find(|(_, c)| c.busy.load(std::sync::atomic::Ordering::SeqCst) == 0)
            .map(|(id, _)| *id);
        match idle.and_then(|id| self.open.remove(&id)) {
            Some(c) => {
                c.close.cancel();
                self.shed += 1;
                true
            }
            None => false,
        }
    }

    /// Says how many connections were closed for the limit, at most once a minute.
    fn warn_shed(&mut self, limit: usize) {
        let due = self
            .warned
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(60));
        if self.shed > 0 && due {
            tracing::warn!(
                "{} connection(s) closed: more than {limit} were open at once (clients that hold \
                 connections without finishing a request?)",
                self.shed
            );
            self.shed = 0;
            self.warned = Some(tokio::time::Instant::now());
        }
    }
}

/// Decrements a connection's busy count when the answer is done (or dropped).
struct Busy(Arc<Conn>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0
            .busy
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Accepts connections until SIGTERM or SIGINT, serving each with `app`
/// under the timeouts and the connection limit (module docs); then lets the
/// answers under way finish (at most 5 s).
/// Accepts and serves connections until SIGTERM or SIGINT, whose name it
/// returns. Nothing else ends it: a failed accept (EMFILE) pauses, and a
/// connection task that panicked is reported and reaped.
async fn accept_loop(listener: tokio::net::TcpListener, app: Router, limit: usize) -> &'static str {
    let conns = Arc::new(Mutex::new(Conns::default()));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let why = loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            sig = &mut shutdown => break sig,
        };
        // Reap finished connection tasks; one that panicked is said.
        while let Some(done) = tasks.try_join_next() {
            if let Err(e) = done {
                if e.is_panic() {
                    tracing::error!("a connection's task panicked (the connection was closed; serving goes on): {e}");
                }
            }
        }
        let stream = match accepted {
            Ok((s, _)) => {
                // An answer is written in pieces (headers, the body's chunks,
                // its end): without this, Nagle's algorithm held the last piece
                // until the client's delayed ACK, 40 ms into every answer on a
                // kept-alive connection.
                if let Err(e) = s.set_nodelay(true) {
                    tracing::debug!("TCP_NODELAY could not be set on a connection: {e}");
                }
                s
            }
            Err(e) => {
                // Out of descriptors (EMFILE) or a connection reset before it was
                // accepted: make room, pause briefly, go on.
                tracing::warn!("accepting a connection failed: {e}");
                conns.lock().unwrap_or_else(|e| e.into_inner()).shed_idle();
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let conn = {
            // A task that panicked while holding it leaves the table usable.
            let mut c = conns.lock().unwrap_or_else(|e| e.into_inner());
            if c.open.len() >= limit && !c.shed_idle() {
                c.shed += 1;
                c.warn_shed(limit);
                drop(stream);
                continue;
            }
            c.warn_shed(limit);
            let id = c.next;
            c.next += 1;
            let conn = Arc::new(Conn {
                busy: 0.into(),
                close: tokio_util::sync::CancellationToken::new(),
            });
            c.open.insert(id, conn.clone());
            (id, conn)
        };
        tasks.spawn(serve_connection(
            stream,
            app.clone(),
            conn,
            conns.clone(),
            stop.clone(),
        ));
    };
    drop(listener);
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    why
}

/// Serves one connection (HTTP/1.1) until it ends, times out, is closed for
/// the limit, or the server stops.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    app: Router,
    (id, conn): (u64, Arc<Conn>),
    conns: Arc<Mutex<Conns>>,
    stop: tokio_util::sync::CancellationToken,
) {
    let inner = hyper_util::service::TowerToHyperService::new(app);
    let busy = conn.clone();
    let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        busy.busy.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let guard = Busy(busy.clone());
        let answer = hyper::service::Service::call(&inner, req);
        async move {
            let r = answer.await;
            drop(guard);
            r
        }
    });
    let io = hyper_util::rt::TokioIo::new(IdleTimeout::new(stream, IDLE_TIMEOUT));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true)
        // A client that sends its requests and then closes its side
        // (`printf … | nc`) still gets every answer: without this, hyper
        // stopped at the end of the client's stream and answered only the
        // requests it had already parsed.
        .half_close(true);
    let served = builder.serve_connection(io, svc);
    tokio::pin!(served);
    tokio::select! {
        r = served.as_mut() => {
            if let Err(e) = r {
                tracing::debug!("connection ended: {e}");
            }
        }
        _ = conn.close.cancelled() => {}
        _ = stop.cancelled() => {
            served.as_mut().graceful_shutdown();
            let _ = served.await;
        }
    }
    conns
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .open
        .remove(&id);
}

/// A stream that fails with `TimedOut` once it has moved no byte for `idle`
/// while being read or written.
struct IdleTimeout<T> {
    inner: T,
    idle: Duration,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl<T> IdleTimeout<T> {
    fn new(inner: T, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }

    fn moved(&mut self) {
        let at = tokio::time::Instant::now() + self.idle;
        self.deadline.as_mut().reset(at);
    }

    fn timed_out<R>(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<R>> {
        use std::future::Future;
        match self.deadline.as_mut().poll(cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no byte moved on the connection for too long",
            ))),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for IdleTimeout<T> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        match std::pin::Pin::new(&mut this.inner).poll_read(cx, buf) {
            std::task::Poll::Ready(r) => {
                this.moved();
                std::task::Poll::Ready(r)
            }
            std::task::Poll::Pending => this.timed_out(cx),
        }
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for IdleTimeout<T> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        match std::pin::Pin::new(&mut this.inner).poll_write(cx, buf) {
            std::task::Poll::Ready(r) => {
                this.moved();
                std::task::Poll::Ready(r)
            }
            std::task::Poll::Pending => this.timed_out(cx),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        match std::pin::Pin::new(&mut this.inner).poll_flush(cx) {
            std::task::Poll::Ready(r) => std::task::Poll::Ready(r),
            std::task::Poll::Pending => this.timed_out(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        match std::pin::Pin::new(&mut this.inner).poll_shutdown(cx) {
            std::task::Poll::Ready(r) => std::task::Poll::Ready(r),
            std::task::Poll::Pending => this.timed_out(cx),
        }
    }
}

/// The audit entries kept to name takeovers in the holder history.
const AUDIT_KEEP: usize = 200;

/// Reads what was appended to the audit log since the last gather (on a
/// blocking thread) and returns the tail with its newest [`AUDIT_KEEP`]
/// entries, and why the log could not be read (`None`: read, or missing);
/// nothing when there is no log. The entries of a log that cannot be read
/// already read are kept (a takeover is then classified by what was seen,
/// not named); the caller warns and sets `leasectl_audit_log_ok`.
async fn read_audit(
    tail: Option<AuditTail>,
) -> (Option<AuditTail>, Vec<AuditEntry>, Option<String>) {
    let Some(mut tail) = tail else {
        return (None, Vec::new(), None);
    };
    let path = tail.path().to_owned();
    match tokio::task::spawn_blocking(move || {
        let error = tail.poll().err().map(|e| e.to_string());
        let v = tail.entries();
        (tail, v, error)
    })
    .await
    {
        Ok((tail, v, error)) => (Some(tail), v, error),
        // The blocking task failed (it cannot, short of a panic): start over.
        Err(_) => (
            Some(AuditTail::new(path, AUDIT_KEEP)),
            Vec::new(),
            Some("the audit log could not be read (its reader failed)".to_owned()),
        ),
    }
}
