//! `leasectl serve`: a Prometheus exporter for a sidecar or a DaemonSet.
//!
//! One task gathers every `--refresh` with the console's request discipline
//! (a [`Gatherer`]: conditional GETs, a listing about every 30 s) and renders
//! the metrics; the HTTP server (axum) only hands out the latest rendering,
//! so scrapes never cause store requests. `/metrics` answers 503 until the
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

use super::prometheus::{Metrics, CONTENT_TYPE};
use super::GatherExtras;

/// What `serve` needs besides the targets.
pub struct ServeOptions {
    /// Where to listen (port 0: any free port, printed on stderr).
    pub listen: SocketAddr,
    /// Between two gathers.
    pub refresh: Duration,
    /// The deadline of each request (for `/healthz`'s patience).
    pub request_timeout: Duration,
}

#[derive(Default)]
struct Latest {
    text: Option<String>,
    at: Option<tokio::time::Instant>,
}

#[derive(Clone)]
struct AppState {
    latest: Arc<Mutex<Latest>>,
    stale_after: Duration,
}

async fn metrics(State(s): State<AppState>) -> Response {
    let text = s.latest.lock().map(|l| l.text.clone()).unwrap_or(None);
    match text {
        Some(t) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], t).into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "The first snapshot is still being gathered.\n",
        )
            .into_response(),
    }
}

async fn healthz(State(s): State<AppState>) -> Response {
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
    let state = AppState {
        latest: Arc::new(Mutex::new(Latest::default())),
        stale_after: opts.refresh * 3 + opts.request_timeout,
    };
    let latest = state.latest.clone();
    let refresh = opts.refresh;
    let gathering = tokio::spawn(async move {
        let mut m = Metrics::new();
        let mut ticker = tokio::time::interval(refresh);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let snap = super::gather(&mut gatherer, &clock, &extras).await;
            m.update(&snap, &counters, extras.pod.is_some());
            let text = m.render();
            if let Ok(mut l) = latest.lock() {
                l.text = Some(text);
                l.at = Some(tokio::time::Instant::now());
            }
        }
    });
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
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
