//! moto spread over several processes behind one loopback port.
//!
//! moto serves one request at a time (that is what makes its conditional
//! writes atomic, see scripts/moto_server.py), so one moto for the whole
//! suite is a queue every test thread waits in: under the suite's load its
//! write round trips reached a 90th percentile of 223–676 ms, and the race
//! check of a 3 s TTL rightly refused to acquire (issue 50 §2). Here each
//! bucket lives on one of [`MOTO_PROCESSES`] moto processes, chosen from the
//! bucket's name, behind a router on one port: the tests keep one endpoint,
//! every request about a bucket reaches the one process that has it, and a
//! process queues only the requests of its own share of the buckets.
//!
//! The router reads a connection's request head, takes the bucket from the
//! path (path-style; the first label of the `Host` header when that is not
//! an IP address or `localhost`), connects to that bucket's process, sends
//! the head on and then copies both ways until the process has answered and
//! closed (moto single-threaded answers HTTP/1.0: one request a connection).
//! A request naming no bucket (ListBuckets) goes to the first process.

use std::sync::OnceLock;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{Moto, MotoProcess};

/// How many moto processes share the buckets of one kind of moto.
pub const MOTO_PROCESSES: usize = 4;

/// The longest request head the router reads before it routes (moto's
/// requests here carry a few headers; a longer head is a test's mistake).
const MAX_HEAD: usize = 64 * 1024;

/// A moto endpoint made of `n` moto processes of one kind, the first started
/// with it, each other one on the first request routed to it; all stop with
/// this test process (their standard input closes).
pub struct MotoServer {
    pub port: u16,
}

impl MotoServer {
    /// Starts the router (on a thread of its own, with a runtime of its own:
    /// the caller may be on a runtime that a test will end).
    pub fn start(kind: Moto, n: usize) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let backends: &'static [OnceLock<MotoProcess>] =
            Vec::leak((0..n).map(|_| OnceLock::new()).collect());
        // The first here, so that a moto that cannot start says why in the
        // test that first asked for it (the others start on the router's
        // thread, where a failure only closes the connection).
        backends[0].get_or_init(|| MotoProcess::start(kind));
        std::thread::Builder::new()
            .name(format!("moto-router-{port}"))
            .spawn(move || {
                super::serve_promptly_this_thread();
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .on_thread_start(super::serve_promptly_this_thread)
                    .enable_all()
                    .build()
                    .expect("a runtime");
                rt.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("a tokio listener");
                    loop {
                        let Ok((client, _)) = listener.accept().await else {
                            continue;
                        };
                        tokio::spawn(route(client, kind, backends));
                    }
                })
            })
            .expect("the moto router's thread");
        Self { port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Forwards one client connection to the moto process of its bucket.
async fn route(mut client: TcpStream, kind: Moto, backends: &'static [OnceLock<MotoProcess>]) {
    let mut head = Vec::with_capacity(2048);
    let mut buf = [0u8; 8192];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match client.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > MAX_HEAD {
            return;
        }
    }
    let i = bucket_of(&head).map_or(0, |b| fnv1a(b.as_bytes()) as usize % backends.len());
    let port = match backends[i].get() {
        Some(p) => p.port,
        None => match tokio::task::spawn_blocking(move || {
            backends[i].get_or_init(|| MotoProcess::start(kind)).port
        })
        .await
        {
            Ok(port) => port,
            Err(_) => return,
        },
    };
    let Ok(backend) = TcpStream::connect(("127.0.0.1", port)).await else {
        return;
    };
    let (mut cr, mut cw) = client.into_split();
    let (mut br, mut bw) = backend.into_split();
    if bw.write_all(&head).await.is_err() {
        return;
    }
    let up = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut cr, &mut bw).await;
        let _ = bw.shutdown().await;
    });
    // The answer ends when moto closes the connection; then so does the client's.
    let _ = tokio::io::copy(&mut br, &mut cw).await;
    let _ = cw.shutdown().await;
    up.abort();
}

/// The bucket a request head names: the first label of a `Host` that is a
/// name other than `localhost` (virtual-host addressing), else the first
/// segment of the path (path-style); `None` for the service itself.
fn bucket_of(head: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let target = lines.next()?.split(' ').nth(1)?;
    let host = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.trim().to_owned());
    if let Some(host) = host {
        let name = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
        let is_ip = name.parse::<std::net::IpAddr>().is_ok() || name.starts_with('[');
        if !is_ip && name != "localhost" {
            if let Some((bucket, _)) = name.split_once('.') {
                return Some(bucket.to_owned());
            }
        }
    }
    // An absolute target (a proxy's request line) has its path after the authority.
    let path = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let segment = path
        .trim_start_matches('/')
        .split(['/', '?'])
        .next()
        .unwrap_or("");
    (!segment.is_empty()).then(|| segment.to_owned())
}

/// FNV-1a, 64 bits: the same bucket goes to the same process in every run.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn a_request_is_routed_by_its_bucket() {
    let get =
        |line: &str, host: &str| bucket_of(format!("{line}\r\nHost: {host}\r\n\r\n").as_bytes());
    assert_eq!(
        get("PUT /b-1/k/x HTTP/1.1", "127.0.0.1:9000"),
        Some("b-1".into())
    );
    assert_eq!(
        get("GET /b-1?list-type=2 HTTP/1.1", "localhost:9000"),
        Some("b-1".into())
    );
    assert_eq!(
        get("GET /?list-type=2 HTTP/1.1", "b-2.localhost:9000"),
        Some("b-2".into())
    );
    assert_eq!(get("GET / HTTP/1.1", "127.0.0.1:9000"), None);
    assert_eq!(
        get("GET http://127.0.0.1:9/b-3/k HTTP/1.1", "127.0.0.1:9"),
        Some("b-3".into())
    );
}
