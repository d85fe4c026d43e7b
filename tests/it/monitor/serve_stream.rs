//! Issue 38: `serve` writes `/metrics` as the client reads it, from the rows
//! of the snapshot current when the request came (no scrape holds the whole
//! text, nor the lock the next snapshot is applied under). Against a real
//! `leasectl serve` on a local store of 6,000 prefixes (an exposition of
//! several megabytes, more than the loopback socket buffers hold), with raw
//! TCP clients: one that stalls halfway, some that go away.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::cli::{bin, record, write_lease};
use crate::common::file_url;
use crate::common::serve::{Serve, SERVE_ARGS};

const PREFIXES: usize = 6_000;

/// Sends `GET path` on a new connection (closed after the answer) whose
/// receive buffer is small, so that the server has to wait for the reader.
fn request(port: u16, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let small: libc::c_int = 16 * 1024;
    // SAFETY: setsockopt on a socket this test owns, with a c_int value.
    unsafe {
        use std::os::fd::AsRawFd;
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    s
}

/// The status and the body of a whole HTTP/1.1 answer (chunked or not).
fn answer(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw);
    let (head, mut rest) = text.split_once("\r\n\r\n").expect("a whole head");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return (status, rest.to_owned());
    }
    let mut body = String::new();
    loop {
        let (size, tail) = rest.split_once("\r\n").expect("a chunk size");
        let n = usize::from_str_radix(size.trim(), 16).expect("a hex chunk size");
        if n == 0 {
            return (status, body);
        }
        body.push_str(&tail[..n]);
        rest = tail[n..].strip_prefix("\r\n").expect("a chunk's end");
    }
}

fn scrape(port: u16) -> (u16, String) {
    let mut s = request(port, "/metrics");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    answer(&raw)
}

fn sample(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the exposition"))
}

/// A whole exposition of every prefix: each one's seven state series, one
/// `# EOF`, at the end.
fn assert_whole(body: &str) {
    assert!(body.ends_with("# EOF\n"), "{}", &body[body.len() - 200..]);
    assert_eq!(body.matches("# EOF").count(), 1);
    let states = body
        .lines()
        .filter(|l| l.starts_with("leasectl_lease_state{"))
        .count();
    assert_eq!(states, PREFIXES * 7);
    for i in (0..PREFIXES).step_by(997) {
        assert!(
            body.contains(&format!("prefix=\"p{i:05}/\",state=\"fresh\"}}")),
            "p{i:05}"
        );
    }
}

#[test]
fn a_stalled_scrape_gets_its_own_snapshot_whole_while_gathers_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    for i in 0..PREFIXES {
        let body = match i % 3 {
            0 => record(&format!("holder-{i}"), 2, 3600),
            1 => record(&format!("holder-{i}"), 7200, 60),
            _ => "{torn".to_owned(),
        };
        write_lease(&store, &format!("p{i:05}"), &body);
    }
    let stderr = dir.path().join("serve.stderr");
    let serve = Serve::spawn(bin().args(SERVE_ARGS).arg(file_url(&store)), &stderr);
    let port = serve.port;
    let end = Instant::now() + Duration::from_secs(60);
    let first = loop {
        let (status, body) = scrape(port);
        if status == 200 {
            break body;
        }
        assert!(Instant::now() < end, "no snapshot in 60 s: {status} {body}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_whole(&first);
    assert!(first.len() > 4 << 20, "{} bytes", first.len());

    // Clients that read a little and go away, mid-body.
    for _ in 0..5 {
        let mut s = request(port, "/metrics");
        let mut some = [0u8; 4096];
        s.read_exact(&mut some).unwrap();
    }
    // One that stalls for three refreshes after its first bytes.
    let mut stalled = request(port, "/metrics");
    let mut raw = vec![0u8; 4096];
    stalled.read_exact(&mut raw).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let (status, meanwhile) = scrape(port);
    assert_eq!(status, 200);
    assert_whole(&meanwhile);
    stalled.read_to_end(&mut raw).unwrap();
    let (status, late) = answer(&raw);
    assert_eq!(status, 200);
    assert_whole(&late);
    // The stalled answer is the snapshot of its request's time: the
    // gathers went on while it was being written.
    let gathers = |b: &str| sample(b, "leasectl_gathers_total");
    assert!(
        gathers(&late) < gathers(&meanwhile),
        "gathers: stalled {} vs meanwhile {}",
        gathers(&late),
        gathers(&meanwhile)
    );
    // The clients that went away count as answered; the server still is.
    assert!(
        sample(
            &meanwhile,
            "leasectl_http_requests_total{path=\"/metrics\",code=\"200\"}"
        ) >= 7.0
    );
    let mut h = request(port, "/healthz");
    let mut raw = Vec::new();
    h.read_to_end(&mut raw).unwrap();
    assert_eq!(answer(&raw), (200, "ok\n".to_owned()));
}
