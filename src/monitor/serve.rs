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

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::prometheus::{HttpLabels, Metrics, CONTENT_TYPE};
use super::GatherExtras;

/// What `serve` needs besides the targets.
pub struct ServeOptions {
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
    http: Family<HttpLabels, Counter>,
    stale_after: Duration,
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
            ([(header::CONTENT_TYPE, CONTENT_TYPE)], l.metrics.render()).into_response()
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

async fn not_found(State(s): State<AppState>) -> Response {
    let r = (
        StatusCode::NOT_FOUND,
        "Not found: leasectl serve answers /metrics and /healthz.\n",
    )
        .into_response();
    s.count("other", r)
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
                crate::bucket::format_secs(at.elapsed().as_secs_f64())
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

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {},
                _ = i.recv() => {},
            }
        }
        _ => std::future::pending::<()>().await,
    }
}

/// Serves until SIGTERM or SIGINT (status 0). Failing to listen is status 1,
/// with a sentence on stderr.
pub async fn serve(
    mut gatherer: Gatherer,
    clock: SharedClock,
    extras: GatherExtras,
    counters: Arc<Counters>,
    opts: ServeOptions,
) -> i32 {
    let listener = match tokio::net::TcpListener::bind(opts.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("leasectl: could not listen on {}: {e}", opts.listen);
            return crate::exit::Exit::Failed.code();
        }
    };
    let addr = listener.local_addr().unwrap_or(opts.listen);
    eprintln!("leasectl: serving metrics on http://{addr}/metrics and http://{addr}/healthz");
    let metrics_ = Metrics::new();
    let state = AppState {
        http: metrics_.http_requests(),
        latest: Arc::new(Mutex::new(Latest {
            metrics: metrics_,
            at: None,
        })),
        stale_after: opts.refresh * 3 + opts.request_timeout,
    };
    let latest = state.latest.clone();
    let refresh = opts.refresh;
    let audit_path = opts.audit_path;
    let gathering = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(refresh);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let audit = read_audit(audit_path.clone());
            let (snap, audit) = tokio::join!(super::gather(&mut gatherer, &clock, &extras), audit);
            // Updated under the lock (no await inside): a scrape sees one
            // whole snapshot or the previous one.
            if let Ok(mut l) = latest.lock() {
                l.metrics
                    .update(&snap, &counters, extras.pod.is_some(), &audit);
                l.at = Some(tokio::time::Instant::now());
            }
        }
    });
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .fallback(not_found)
        .with_state(state);
    let r = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await;
    gathering.abort();
    match r {
        Ok(()) => crate::exit::Exit::Ok.code(),
        Err(e) => {
            eprintln!("leasectl: the metrics server failed: {e}");
            crate::exit::Exit::Failed.code()
        }
    }
}

/// The last 200 entries of the audit log at `path` (read on a blocking
/// thread); nothing when there is no log or it cannot be read (a takeover is
/// then classified by what was seen, not named).
async fn read_audit(path: Option<std::path::PathBuf>) -> Vec<crate::audit::AuditEntry> {
    let Some(path) = path else {
        return Vec::new();
    };
    tokio::task::spawn_blocking(move || {
        let mut v = crate::audit::AuditLog::read(&path).unwrap_or_default();
        let n = v.len();
        v.drain(..n.saturating_sub(200));
        v
    })
    .await
    .unwrap_or_default()
}
