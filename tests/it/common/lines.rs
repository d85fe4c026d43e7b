//! Helpers shared by tests that run leasectl as another user or read its
//! NDJSON output line by line, and that list a test bucket's keys.

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Why uid 65534 cannot be used here (not root, or `setpriv` cannot drop
/// privileges), if it cannot: the tests that need it skip with this reason.
pub fn cannot_drop_privileges() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not running as root: cannot switch to uid 65534".into());
    }
    match Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("setpriv cannot drop privileges here ({s})")),
        Err(e) => Some(format!("setpriv is not available ({e})")),
    }
}

/// Lines of a child's stdout, read on a thread.
pub fn line_reader(stdout: std::process::ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Spawns `cmd` with no stdin and its stdout piped (stderr as the caller
/// set it): the child, and the lines of its stdout ([`line_reader`]).
pub fn spawn_lines(
    cmd: &mut std::process::Command,
) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let rx = line_reader(child.stdout.take().unwrap());
    (child, rx)
}

/// Waits up to `limit` for an NDJSON line matching `pred` and returns it;
/// every line read goes to `seen`. Panics, with every line seen, on a line
/// that is not JSON or when none matches in time.
pub fn wait_json_line(
    rx: &mpsc::Receiver<String>,
    seen: &mut Vec<Value>,
    limit: Duration,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let end = Instant::now() + limit;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                let v: Value =
                    serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
                seen.push(v.clone());
                if pred(&v) {
                    return v;
                }
            }
            Err(_) => panic!("no line {what} within {limit:?}; lines: {seen:#?}"),
        }
    }
}

/// Every key in `bucket` (one ListObjectsV2 page, enough for a test bucket).
pub async fn list_keys(endpoint: &str, bucket: &str) -> Vec<String> {
    let out = super::sdk_client(endpoint)
        .list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .unwrap();
    out.contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

/// The port a `leasectl serve --listen 127.0.0.1:0` says it listens on, read
/// from its stderr as redirected to the file `stderr_path` (waits up to 20 s;
/// panics, naming what it said, if it says nothing).
pub fn serve_port(stderr_path: &std::path::Path) -> u16 {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let s = std::fs::read_to_string(stderr_path).unwrap_or_default();
        if let Some(p) = s
            .split("http://127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .and_then(|p| p.parse().ok())
        {
            return p;
        }
        assert!(
            std::time::Instant::now() < end,
            "serve did not say where it listens: {s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
