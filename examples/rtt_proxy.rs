//! An HTTP/1.1 proxy that adds a round-trip time to every request, for the
//! latency-realistic comparison in `scripts/compare.py` (see PERFORMANCE.md).
//!
//! Clients talk to it over keep-alive connections as they would to S3 (the
//! upstream's hop-by-hop headers, such as moto's `Connection: close` on
//! every answer, are not passed on); each
//! request waits `--rtt-ms` before it is forwarded to `--upstream` (over a
//! pool of keep-alive connections), so every request costs one round trip, as
//! on a real network (connection set-up and TLS are not modelled). Bodies
//! pass through untouched, and so does the `Host` header, so SigV4 signatures
//! made for the proxy's address still verify upstream.
//!
//! It counts requests by kind (`list`: GET of a bucket, or with `list-type`;
//! `get`: GET of an object; `head`; `put`; `other`), the bytes of the
//! answers' bodies as they pass (`answer_body_bytes`), and answers by status:
//! `GET /__proxy/stats` returns them as JSON, `POST /__proxy/reset` zeroes
//! them, and `POST /__proxy/config?rtt_ms=N&slowdown_above=M` changes the
//! delay and the rate limit while it runs (`slowdown_above=0` removes the
//! limit). With `--slowdown-above N`, requests beyond N in one second are
//! answered `503 SlowDown` with S3's XML error body (after the round trip),
//! as S3 does past its per-prefix request rates.
//!
//! With `--tls-cert` and `--tls-key` (PEM files) it serves HTTPS (rustls,
//! TLS 1.2 and 1.3), as S3 does: a client trusts it through `AWS_CA_BUNDLE`
//! naming the CA that signed the certificate. `--connect-rtts K` makes a new
//! connection wait K round trips before its first byte is read (1: TCP's
//! handshake; 2: TCP and TLS 1.3's), so that opening connections costs what
//! it costs on a network.
//!
//! With `--trace`, it keeps one JSON line per connection (when accepted, when
//! its TLS handshake ended) and per request (its connection and place on it,
//! kind, status; when it arrived, was forwarded, its answer's head came back
//! from upstream and its body was passed on whole), in milliseconds since the
//! last reset: `GET /__proxy/trace` returns them (NDJSON), `POST
//! /__proxy/reset` clears them. They are held in memory until then, ~200
//! bytes a request: a benchmark's tool, reset between runs.
//!
//! ```text
//! cargo run --release --example rtt_proxy -- --listen 127.0.0.1:9000 \
//!     --upstream http://127.0.0.1:9001 --rtt-ms 30
//! ```

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

/// Command line.
#[derive(Parser, Debug)]
#[command(about = "An HTTP proxy that delays every request by a round-trip time")]
struct Opts {
    /// Address to listen on (port 0: any; the bound address is printed first).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Server to forward to, `http://host:port`.
    #[arg(long)]
    upstream: Uri,
    /// Delay added to each request before it is forwarded, in milliseconds.
    #[arg(long, default_value_t = 0)]
    rtt_ms: u64,
    /// Answer `503 SlowDown` to the requests beyond this many in one second.
    #[arg(long)]
    slowdown_above: Option<u64>,
    /// Serve HTTPS with this certificate chain (PEM; needs `--tls-key`).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Round trips a new connection waits before its first byte is read.
    #[arg(long, default_value_t = 0)]
    connect_rtts: u32,
    /// Keep a trace of connections and requests (`GET /__proxy/trace`).
    #[arg(long)]
    trace: bool,
}

type Body = BoxBody<Bytes, hyper::Error>;

#[derive(Default)]
struct Counts {
    by_kind: BTreeMap<&'static str, u64>,
    by_status: BTreeMap<u16, u64>,
    requests: u64,
    in_flight: u64,
    max_in_flight: u64,
    connections: u64,
    since: Option<Instant>,
    last: Option<Instant>,
}

struct State {
    /// Bytes of the answers' bodies passed on to the clients.
    answer_body_bytes: Arc<AtomicU64>,
    upstream_scheme: String,
    upstream_authority: String,
    client: Client<HttpConnector, Incoming>,
    rtt_us: AtomicU64,
    /// 0: no limit.
    slowdown_above: AtomicU64,
    counts: Mutex<Counts>,
    /// (second since start, requests in it) for `--slowdown-above`.
    window: Mutex<(u64, u64)>,
    started: Instant,
    /// `Some` with `--trace`: the lines kept, and the instant they count from.
    trace: Option<Mutex<(Instant, Vec<String>)>>,
    connect_rtts: u32,
}

/// One request's trace line, written when dropped: when the answer's body
/// has been passed on whole (or the request was abandoned).
struct Rec {
    state: Arc<State>,
    conn: u64,
    seq: u64,
    kind: &'static str,
    status: u16,
    t_in: f64,
    t_fwd: f64,
    t_head: f64,
}

impl Drop for Rec {
    fn drop(&mut self) {
        let t_end = self.state.trace_ms();
        self.state.trace_line(serde_json::json!({
            "ev": "req", "conn": self.conn, "seq": self.seq, "kind": self.kind,
            "status": self.status, "in": self.t_in, "fwd": self.t_fwd,
            "head": self.t_head, "end": t_end,
        }));
    }
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(
            Full::new(body.into())
                .map_err(|never| match never {})
                .boxed(),
        )
        .expect("a valid response")
}

/// The kind of an S3 request (path-style addressing).
fn kind(req: &Request<Incoming>) -> &'static str {
    let path = req.uri().path().trim_start_matches('/');
    let has_key = path.split_once('/').is_some_and(|(_, key)| !key.is_empty());
    let query = req.uri().query().unwrap_or("");
    let listing = query.split('&').any(|p| p.starts_with("list-type="));
    match *req.method() {
        Method::GET if listing || !has_key => "list",
        Method::GET => "get",
        Method::HEAD => "head",
        Method::PUT => "put",
        _ => "other",
    }
}

fn query_u64(query: &str, name: &str) -> Option<u64> {
    query
        .split('&')
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
}

impl State {
    /// Milliseconds since the trace's start (0 without `--trace`).
    fn trace_ms(&self) -> f64 {
        match &self.trace {
            Some(t) => t.lock().unwrap().0.elapsed().as_secs_f64() * 1000.0,
            None => 0.0,
        }
    }

    fn trace_line(&self, line: serde_json::Value) {
        if let Some(t) = &self.trace {
            t.lock().unwrap().1.push(line.to_string());
        }
    }

    fn trace_doc(&self) -> Response<Body> {
        let lines = match &self.trace {
            Some(t) => t.lock().unwrap().1.join("\n"),
            None => String::new(),
        };
        full(StatusCode::OK, "application/x-ndjson", lines)
    }

    fn stats(&self) -> Response<Body> {
        let c = self.counts.lock().unwrap();
        let seconds = match (c.since, c.last) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        let doc = serde_json::json!({
            "requests": c.requests,
            "answer_body_bytes": self.answer_body_bytes.load(Ordering::Relaxed),
            "by_kind": c.by_kind,
            "by_status": c.by_status.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
            "max_in_flight": c.max_in_flight,
            "in_flight": c.in_flight,
            "connections": c.connections,
            "seconds_first_to_last": seconds,
            "rtt_ms": self.rtt_us.load(Ordering::Relaxed) as f64 / 1000.0,
            "slowdown_above": self.slowdown_above.load(Ordering::Relaxed),
        });
        full(StatusCode::OK, "application/json", doc.to_string())
    }

    fn reset(&self) {
        let mut c = self.counts.lock().unwrap();
        let in_flight = c.in_flight;
        *c = Counts {
            in_flight,
            ..Counts::default()
        };
        self.answer_body_bytes.store(0, Ordering::Relaxed);
        if let Some(t) = &self.trace {
            *t.lock().unwrap() = (Instant::now(), Vec::new());
        }
    }

    /// True when this request is beyond the per-second limit.
    fn over_limit(&self) -> bool {
        let limit = self.slowdown_above.load(Ordering::Relaxed);
        if limit == 0 {
            return false;
        }
        let second = self.started.elapsed().as_secs();
        let mut w = self.window.lock().unwrap();
        if w.0 != second {
            *w = (second, 0);
        }
        w.1 += 1;
        w.1 > limit
    }

    async fn forward(&self, mut req: Request<Incoming>) -> Response<Body> {
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let uri = format!(
            "{}://{}{}",
            self.upstream_scheme, self.upstream_authority, path
        );
        *req.uri_mut() = match uri.parse() {
            Ok(u) => u,
            Err(e) => return full(StatusCode::BAD_REQUEST, "text/plain", e.to_string()),
        };
        strip_hop_by_hop(req.headers_mut());
        match self.client.request(req).await {
            Ok(mut resp) => {
                // moto's server answers `Connection: close` to every request:
                // passed on, it made the client open a connection per
                // request, which S3 does not make it do.
                strip_hop_by_hop(resp.headers_mut());
                let bytes = self.answer_body_bytes.clone();
                resp.map(|b| {
                    b.map_frame(move |f| {
                        if let Some(d) = f.data_ref() {
                            bytes.fetch_add(d.len() as u64, Ordering::Relaxed);
                        }
                        f
                    })
                    .boxed()
                })
            }
            Err(e) => full(
                StatusCode::BAD_GATEWAY,
                "text/plain",
                format!("rtt_proxy: upstream: {e}"),
            ),
        }
    }

    async fn handle(
        self: Arc<Self>,
        conn: u64,
        seq: u64,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, Infallible> {
        match (req.method(), req.uri().path()) {
            (&Method::GET, "/__proxy/stats") => return Ok(self.stats()),
            (&Method::GET, "/__proxy/trace") => return Ok(self.trace_doc()),
            (&Method::POST, "/__proxy/reset") => {
                self.reset();
                return Ok(full(StatusCode::NO_CONTENT, "text/plain", ""));
            }
            (&Method::POST, "/__proxy/config") => {
                let q = req.uri().query().unwrap_or("");
                if let Some(ms) = query_u64(q, "rtt_ms") {
                    self.rtt_us.store(ms * 1000, Ordering::Relaxed);
                }
                if let Some(n) = query_u64(q, "slowdown_above") {
                    self.slowdown_above.store(n, Ordering::Relaxed);
                }
                return Ok(full(StatusCode::NO_CONTENT, "text/plain", ""));
            }
            _ => {}
        }
        let kind = kind(&req);
        let t_in = self.trace_ms();
        {
            let mut c = self.counts.lock().unwrap();
            let now = Instant::now();
            c.since.get_or_insert(now);
            c.requests += 1;
            *c.by_kind.entry(kind).or_default() += 1;
            c.in_flight += 1;
            c.max_in_flight = c.max_in_flight.max(c.in_flight);
        }
        // Counted out when the request ends, answered or not (a client that
        // closes its connection mid-request drops this future).
        let _in_flight = InFlight(&self);
        let rtt = Duration::from_micros(self.rtt_us.load(Ordering::Relaxed));
        if !rtt.is_zero() {
            tokio::time::sleep(rtt).await;
        }
        let t_fwd = self.trace_ms();
        let resp = if self.over_limit() {
            full(
                StatusCode::SERVICE_UNAVAILABLE,
                "application/xml",
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>\
                 <Message>Please reduce your request rate.</Message>\
                 <RequestId>rtt-proxy</RequestId></Error>",
            )
        } else {
            self.forward(req).await
        };
        {
            let mut c = self.counts.lock().unwrap();
            *c.by_status.entry(resp.status().as_u16()).or_default() += 1;
            c.last = Some(Instant::now());
        }
        if self.trace.is_none() {
            return Ok(resp);
        }
        let rec = Rec {
            state: self.clone(),
            conn,
            seq,
            kind,
            status: resp.status().as_u16(),
            t_in,
            t_fwd,
            t_head: self.trace_ms(),
        };
        // The line is written when the body is dropped: passed on whole.
        Ok(resp.map(|b| {
            b.map_frame(move |f| {
                let _ = &rec;
                f
            })
            .boxed()
        }))
    }
}

/// Removes the headers that concern one connection only (RFC 9110, 7.6.1:
/// `Connection`, the headers it names, `Keep-Alive`, `Proxy-Connection`,
/// `Upgrade`): the proxy's two sides are separate connections, each kept
/// alive on its own.
fn strip_hop_by_hop(h: &mut hyper::HeaderMap) {
    let named: Vec<hyper::header::HeaderName> = h
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in ["connection", "keep-alive", "proxy-connection", "upgrade"] {
        h.remove(n);
    }
}

/// Decrements the requests in flight when dropped.
struct InFlight<'a>(&'a State);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut c = self.0.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.in_flight = c.in_flight.saturating_sub(1);
    }
}

/// Serves one accepted connection (plain or TLS) as HTTP/1.1 with keep-alive.
async fn serve<I>(state: Arc<State>, conn: u64, io: I)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let seq = Arc::new(AtomicU64::new(0));
    let service = hyper::service::service_fn(move |req| {
        let n = seq.fetch_add(1, Ordering::Relaxed);
        state.clone().handle(conn, n, req)
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// The TLS acceptor of `--tls-cert` and `--tls-key`.
fn tls_acceptor(cert: &PathBuf, key: &PathBuf) -> std::io::Result<tokio_rustls::TlsAcceptor> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |what: &PathBuf, e: &dyn std::fmt::Display| {
        std::io::Error::other(format!("{}: {e}", what.display()))
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| bad(cert, &e))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, &e))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(std::io::Error::other)?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let opts = Opts::parse();
    let upstream_scheme = opts.upstream.scheme_str().unwrap_or("http").to_owned();
    let upstream_authority = opts
        .upstream
        .authority()
        .map(|a| a.to_string())
        .expect("--upstream needs host:port");
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .build(connector);
    let state = Arc::new(State {
        answer_body_bytes: Arc::new(AtomicU64::new(0)),
        upstream_scheme,
        upstream_authority,
        client,
        rtt_us: AtomicU64::new(opts.rtt_ms * 1000),
        slowdown_above: AtomicU64::new(opts.slowdown_above.unwrap_or(0)),
        counts: Mutex::new(Counts::default()),
        window: Mutex::new((0, 0)),
        started: Instant::now(),
        trace: opts.trace.then(|| Mutex::new((Instant::now(), Vec::new()))),
        connect_rtts: opts.connect_rtts,
    });
    let tls = match (&opts.tls_cert, &opts.tls_key) {
        (Some(c), Some(k)) => Some(tls_acceptor(c, k)?),
        _ => None,
    };
    let next_conn = AtomicU64::new(0);
    let listener = TcpListener::bind(opts.listen).await?;
    // The first line of output is the address, for scripts that asked for port 0.
    println!("{}", listener.local_addr()?);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("rtt_proxy: accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        state.counts.lock().unwrap().connections += 1;
        let state = state.clone();
        let conn = next_conn.fetch_add(1, Ordering::Relaxed);
        let tls = tls.clone();
        tokio::spawn(async move {
            let t_accept = state.trace_ms();
            let setup =
                state.connect_rtts * Duration::from_micros(state.rtt_us.load(Ordering::Relaxed));
            if !setup.is_zero() {
                tokio::time::sleep(setup).await;
            }
            let Some(tls) = tls else {
                state.trace_line(
                    serde_json::json!({"ev": "conn", "conn": conn, "accept": t_accept}),
                );
                return serve(state, conn, stream).await;
            };
            let t_hello = state.trace_ms();
            match tls.accept(stream).await {
                Ok(stream) => {
                    state.trace_line(serde_json::json!({
                        "ev": "conn", "conn": conn, "accept": t_accept,
                        "tls_start": t_hello, "tls_end": state.trace_ms(),
                    }));
                    serve(state, conn, stream).await
                }
                Err(e) => eprintln!("rtt_proxy: TLS handshake: {e}"),
            }
        });
    }
}
