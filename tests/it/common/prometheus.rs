//! Real Prometheus servers (Debian's `prometheus` 2.42, installed by
//! scripts/setup-test-env.sh) on free loopback ports, each with its
//! configuration, rule and service-discovery files and its storage in a
//! temporary directory; and a small client of their HTTP API.
//!
//! A server runs under a shell that waits for its standard input to close:
//! when the test process exits (however it exits), the shell stops
//! Prometheus and removes the directory, as for SeaweedFS.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::SETUP;

/// One Prometheus server.
pub struct Prometheus {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its HTTP port on 127.0.0.1.
    pub port: u16,
    /// Its configuration directory (`prometheus.yml` and the files it names).
    pub dir: PathBuf,
}

/// The `prometheus` binary, or a panic naming the setup.
fn binary() -> PathBuf {
    let p = PathBuf::from("/usr/bin/prometheus");
    assert!(
        p.exists(),
        "Prometheus is not installed (/usr/bin/prometheus): run {SETUP} (it installs Debian's prometheus)"
    );
    p
}

impl Prometheus {
    /// Starts Prometheus with `config` as `prometheus.yml` and `files`
    /// (name, text) beside it (relative paths in the configuration name
    /// them), and waits (up to 60 s) until it is ready. A port taken
    /// between being found free and bound is tried again (three times).
    pub fn start(config: &str, files: &[(&str, &str)]) -> Self {
        let bin = binary();
        let dir = tempfile::Builder::new()
            .prefix("leasectl-prometheus-")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        let mut last = String::new();
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free loopback port")
                .port();
            let mut child = Command::new("sh")
                .arg("-c")
                .arg(
                    "cd \"$LEASECTL_PROM_DIR\" && \"$0\" \"$@\" >prometheus.log 2>&1 </dev/null & w=$!; \
                     cat >/dev/null; kill $w 2>/dev/null; wait $w; rm -rf \"$LEASECTL_PROM_DIR\"",
                )
                .arg(&bin)
                .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
                .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                // The rules' `for:` state is not restored from a previous run.
                .arg("--rules.alert.for-grace-period=1s")
                .env("LEASECTL_PROM_DIR", &dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("starting prometheus");
            let stdin = child.stdin.take();
            let mut p = Prometheus {
                child,
                stdin,
                port,
                dir: dir.clone(),
            };
            let end = Instant::now() + Duration::from_secs(60);
            while Instant::now() < end {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break;
                }
                if raw_get(port, "/-/ready").is_some_and(|(c, _)| c == 200) {
                    return p;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            last = p.log();
            p.stop();
        }
        panic!("Prometheus did not start; its log:\n{last}");
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        let s = std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default();
        s[s.len().saturating_sub(6000)..].to_owned()
    }

    /// Stops it (and removes its directory).
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }

    /// `GET /api/v1/PATH` (PATH with its query string, already encoded):
    /// the `data` of a successful answer, or a panic with the answer.
    pub fn api(&self, path_and_query: &str) -> Value {
        let (code, body) = raw_get(self.port, &format!("/api/v1/{path_and_query}"))
            .unwrap_or_else(|| panic!("Prometheus did not answer /api/v1/{path_and_query}"));
        let v: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{code} from /api/v1/{path_and_query}: {e}: {body}"));
        assert_eq!(v["status"], "success", "/api/v1/{path_and_query}: {body}");
        v["data"].clone()
    }

    /// An instant query: its result vector (each `{metric, value}`).
    pub fn query(&self, promql: &str) -> Vec<Value> {
        let q = percent_encoding::utf8_percent_encode(promql, percent_encoding::NON_ALPHANUMERIC);
        match self.api(&format!("query?query={q}"))["result"].as_array() {
            Some(v) => v.clone(),
            None => Vec::new(),
        }
    }

    /// The alerts the rules hold now (pending and firing).
    pub fn alerts(&self) -> Vec<Value> {
        self.api("alerts")["alerts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The active scrape targets.
    pub fn targets(&self) -> Vec<Value> {
        self.api("targets?state=active")["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits up to `limit` for `pred` to hold of the query's result.
    pub fn wait_query(
        &self,
        promql: &str,
        limit: Duration,
        what: &str,
        pred: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let end = Instant::now() + limit;
        loop {
            let r = self.query(promql);
            if pred(&r) {
                return r;
            }
            assert!(
                Instant::now() < end,
                "Prometheus never showed {what} ({promql}); last answer: {r:?}\nits log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The value of one result of an instant query.
pub fn value(v: &Value) -> f64 {
    v["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

/// One GET on a new connection: `(status, body)`, or `None` when it is not
/// answered within 10 s. Plain HTTP/1.1 with `Connection: close` (the
/// answer is read to its end; a chunked body is joined).
pub fn raw_get(port: u16, path: &str) -> Option<(u16, String)> {
    raw_get_with(port, path, &[])
}

/// [`raw_get`] with extra request headers.
pub fn raw_get_with(port: u16, path: &str, headers: &[(&str, &str)]) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(5),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let end = out.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&out[..end]).into_owned();
    let code = head.split(' ').nth(1)?.parse().ok()?;
    let body = &out[end + 4..];
    let chunked = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    Some((code, String::from_utf8_lossy(&body).into_owned()))
}

/// A chunked body, joined.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&body[..eol]);
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        let rest = &body[eol + 2..];
        if n == 0 || rest.len() < n {
            break;
        }
        out.extend_from_slice(&rest[..n]);
        body = rest[n..].strip_prefix(b"\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// The shipped alert rules (assets/monitoring/leasectl.rules.yml), verbatim.
pub fn shipped_rules() -> String {
    std::fs::read_to_string(super::repo().join("assets/monitoring/leasectl.rules.yml")).unwrap()
}

/// Where a file of the test lives in a server's directory.
pub fn file_in(p: &Prometheus, name: &str) -> PathBuf {
    Path::new(&p.dir).join(name)
}
