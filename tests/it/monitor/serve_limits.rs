//! Issue 23 items 7 and 8, against a real `leasectl serve`: slow clients
//! (raw TCP connections that send part of a request and then nothing, or a
//! byte now and then) cannot starve `/metrics` and `/healthz` of a process
//! limited to 256 descriptors; and the audit log is read as it grows, each
//! bad line warned about once however many gathers run.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::serve::{Serve, SERVE_ARGS};
use crate::common::*;

/// `leasectl serve --refresh 1s` on a local store holding one fresh
/// lease, its audit log under `data` (`XDG_DATA_HOME`), with at most
/// `nofile` descriptors.
fn start(dir: &Path, data: &Path, nofile: u64) -> Serve {
    let store = dir.join("store");
    std::fs::create_dir_all(store.join("db")).unwrap();
    let t = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    std::fs::write(
        store.join("db/LEASE"),
        serde_json::json!({"instance_id": "h", "acquired_at": t, "renewed_at": t, "ttl_s": 3600})
            .to_string(),
    )
    .unwrap();
    let stderr = dir.join("serve.stderr");
    let mut c = bin();
    c.args(SERVE_ARGS)
        .arg(file_url(&store))
        .env("XDG_DATA_HOME", data)
        .env("HOME", data);
    // SAFETY: setrlimit in the child before exec; no allocation.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: nofile,
                rlim_max: nofile,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let s = Serve::spawn(&mut c, &stderr);
    let end = Instant::now() + Duration::from_secs(20);
    while get(s.port, "/metrics").map(|(c, _)| c) != Some(200) {
        assert!(Instant::now() < end, "no first snapshot: {}", s.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    s
}

/// One whole request on a new connection: `(status, body)`, or `None` when
/// it is not answered within 5 s.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_secs(5),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    Some((code, text))
}

/// Whether the server has closed `s` (EOF or reset), without waiting.
fn closed(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 64];
    let mut r = s;
    match r.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

#[test]
fn slow_clients_cannot_starve_metrics_or_healthz() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start(dir.path(), &dir.path().join("data"), 256);
    // 300 clients that send part of a request's headers and then nothing:
    // more than the 256 descriptors the server may open.
    let slow: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", serve.port)).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect();
    // And one that sends a header byte every 300 ms, forever.
    let mut dribbler = TcpStream::connect(("127.0.0.1", serve.port)).unwrap();
    dribbler
        .write_all(b"GET /healthz HTTP/1.1\r\nX-Dribble: ")
        .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    // Scrapes are answered meanwhile.
    for path in ["/metrics", "/healthz", "/metrics"] {
        let answer = get(serve.port, path);
        assert_eq!(
            answer.as_ref().map(|(c, _)| *c),
            Some(200),
            "{path} while 300 slow clients are connected: {answer:?}\n{}",
            serve.log()
        );
    }
    // Beyond the limit (96 with 256 descriptors) connections were closed,
    // not left to use up descriptors.
    let open = slow.iter().filter(|s| !closed(s)).count();
    assert!(open <= 96, "{open} slow connections still open");
    // Within the header-read timeout (10 s) every slow one is closed, the
    // dribbler too although it keeps sending.
    let mut dribbler_closed = false;
    while started.elapsed() < Duration::from_secs(13) {
        if dribbler.write_all(b"a").is_err() || closed(&dribbler) {
            dribbler_closed = true;
        }
        dribbler.set_nonblocking(false).unwrap();
        if dribbler_closed && slow.iter().all(closed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let open = slow.iter().filter(|s| !closed(s)).count();
    assert_eq!(
        open,
        0,
        "slow connections still open after {:?}",
        started.elapsed()
    );
    assert!(dribbler_closed, "the dribbler is still connected");
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "the timeout is the header-read timeout, not shorter"
    );
    assert_eq!(get(serve.port, "/healthz").map(|(c, _)| c), Some(200));
    assert!(
        serve
            .log()
            .contains("connection(s) closed: more than 96 were open at once"),
        "{}",
        serve.log()
    );
}

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

#[test]
fn the_audit_log_is_read_as_it_grows_and_each_bad_line_warned_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = data.join("leasectl/audit.jsonl");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    append(&log, "{not an entry\n");
    let serve = start(dir.path(), &data, 1024);
    let warnings = || serve.log().matches("is unreadable").count();
    let settle = || std::thread::sleep(Duration::from_millis(2600));
    settle();
    settle();
    assert_eq!(
        warnings(),
        1,
        "one bad line, several gathers:\n{}",
        serve.log()
    );
    // A bad line appended: warned about once more (what was appended is read).
    append(&log, "{second bad line\n");
    settle();
    assert_eq!(warnings(), 2, "{}", serve.log());
    // A line still being written is not judged before its newline.
    append(&log, "{third, half");
    settle();
    assert_eq!(warnings(), 2, "{}", serve.log());
    append(&log, " written\n");
    settle();
    assert_eq!(warnings(), 3, "{}", serve.log());
    assert!(serve.log().contains("line 3 (byte "), "{}", serve.log());
    // Rotated: the new file is read from its start.
    std::fs::rename(&log, log.with_extension("jsonl.1")).unwrap();
    append(&log, "{rotated bad line\n");
    settle();
    assert_eq!(warnings(), 4, "{}", serve.log());
    assert!(serve.log().contains("line 1 (byte 0)"), "{}", serve.log());
}

/// Issue 37 item 9: four pipelined requests, the client's side closed right
/// after them (`printf … | nc`), get four answers, for `/healthz` and
/// `/metrics`; ten rounds each.
#[test]
fn pipelined_requests_are_all_answered_also_after_the_client_closes_its_side() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = start(dir.path(), &data, 1024);
    for path in ["/healthz", "/metrics"] {
        for round in 0..10 {
            let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
            c.write_all(req.repeat(4).as_bytes()).unwrap();
            c.shutdown(std::net::Shutdown::Write).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut got = Vec::new();
            let _ = c.read_to_end(&mut got);
            let answers = String::from_utf8_lossy(&got)
                .matches("HTTP/1.1 200")
                .count();
            assert_eq!(answers, 4, "{path}, round {round}: {}", s.log());
        }
    }
}

/// Issue 37 item 9: a `serve` that stops says why, always: SIGTERM and
/// SIGINT each end it with status 0 and a sentence naming the signal.
#[test]
fn serve_says_why_it_stops() {
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut s = start(dir.path(), &data, 1024);
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(s.child.id() as i32, sig);
        }
        let status = s.child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{name}: {}", s.log());
        assert!(
            s.log().contains(&format!("serve stopped: {name} received")),
            "{name}: {}",
            s.log()
        );
    }
}
