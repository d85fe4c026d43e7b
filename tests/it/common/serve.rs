//! A real `leasectl serve` as the tests run it: spawned with its stderr in a
//! file, the port it listens on read from that file, killed and waited for
//! when dropped (even when the test fails), so that none outlives its test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `serve --no-pod --listen 127.0.0.1:0 --refresh 1s`: serving on a free
/// loopback port ([`Serve::port`] says which), no pod scan, a gather a second.
pub const SERVE_ARGS: [&str; 6] = [
    "serve",
    "--no-pod",
    "--listen",
    "127.0.0.1:0",
    "--refresh",
    "1s",
];

/// Every `how` label of `leasectl_lease_holder_changes_total` (a bounded
/// label: no other exists).
pub const HOWS: [&str; 5] = [
    "takeover",
    "handover",
    "after_expiry",
    "acquired",
    "changed_while_fresh",
];

/// A running `leasectl serve`.
pub struct Serve {
    pub child: Child,
    stderr: PathBuf,
    /// The port it listens on (it was told `--listen 127.0.0.1:0`).
    pub port: u16,
}

impl Serve {
    /// Spawns `cmd` — a `leasectl … serve --listen 127.0.0.1:0 …` command
    /// line — with no stdin nor stdout and its stderr written to `stderr`,
    /// and waits (up to 20 s) for the port it says it listens on.
    pub fn spawn(cmd: &mut Command, stderr: &Path) -> Self {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(stderr).unwrap())
            .spawn()
            .expect("spawn leasectl serve");
        // Killed by Drop should reading the port fail.
        let mut s = Serve {
            child,
            stderr: stderr.to_owned(),
            port: 0,
        };
        s.port = super::lines::serve_port(stderr);
        s
    }

    /// What it has written to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Sends SIGTERM and waits: its exit code (`None` if a signal ended it).
    pub fn terminate(&mut self) -> Option<i32> {
        // SAFETY: kill(2) on a child this test spawned and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap().code()
    }

    /// Kills it and waits for it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Serve {
    /// `leasectl serve --no-pod --listen 127.0.0.1:0 ARGS` with the config
    /// file `config` (its data and home in `dir`), its stderr in
    /// `dir/NAME.stderr`.
    pub fn start(dir: &Path, name: &str, config: &Path, args: &[&str]) -> Self {
        let mut c = super::cli::bin();
        c.args(["serve", "--no-pod", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("LEASECTL_CONFIG", config)
            .env("XDG_DATA_HOME", dir)
            .env("HOME", dir);
        Self::spawn(&mut c, &dir.join(format!("{name}.stderr")))
    }
}

/// The probe path of `target` through `module`.
pub fn probe_path(target: &str, module: &str) -> String {
    let q = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("target", target)
        .append_pair("module", module)
        .finish();
    format!("/probe?{q}")
}

/// GET http://127.0.0.1:PORT/PATH with hyper's client: (status, body).
pub async fn http_get(port: u16, path: &str) -> (u16, String) {
    use http_body_util::{BodyExt, Empty};
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<hyper::body::Bytes>>();
    let uri: hyper::Uri = format!("http://127.0.0.1:{port}{path}").parse().unwrap();
    let res = client.get(uri).await.expect("GET");
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The value of the sample `name{labels}` in an exposition.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}
