//! Test harness: real S3-compatible servers (moto) on loopback, real files,
//! and the real `leasectl` binary.
#![allow(dead_code)]

pub mod cli;
pub mod hold;
pub mod lines;
pub mod moto_pool;
pub mod prometheus;
pub mod proxy;
pub mod serve;
pub mod tmux;
pub mod trials;

#[allow(unused_imports)]
pub use cli::{
    assert_exit, bin, bin_path, generation_body, output_text, record, run, run_bare, text,
    write_lease,
};
pub use lines::{cannot_drop_privileges, list_keys, spawn_lines, wait_json_line};
pub use moto_pool::MotoServer;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The command that installs the test servers.
pub const SETUP: &str = "scripts/setup-test-env.sh (or simply scripts/test.sh)";

/// Which moto: the one that answers like AWS, or the one that ignores preconditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moto {
    /// moto[server]==5.2.5, single-threaded.
    Conditional,
    /// moto[server]==5.0.14: ignores If-None-Match / If-Match.
    Ignoring,
}

/// The real S3 servers the end-to-end tests run against (the server matrix):
/// moto (answers like AWS), Ceph RGW 16 (refuses quoted ETags in `If-Match`,
/// ignores `If-Match` on DELETE) and SeaweedFS 4.48 (answers like AWS, its
/// own implementation). See [`server_matrix!`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// A moto server started by this test binary.
    Moto(Moto),
    /// The Ceph RADOS Gateway started by scripts/ceph-rgw.sh (scripts/test.sh starts it).
    Rgw,
    /// A SeaweedFS server (`weed mini`) started by this test binary.
    Seaweed,
}

impl Server {
    /// The servers every matrix test runs on.
    pub const MATRIX: [Server; 3] = [
        Server::Moto(Moto::Conditional),
        Server::Rgw,
        Server::Seaweed,
    ];

    /// For messages.
    pub fn name(self) -> &'static str {
        match self {
            Server::Moto(Moto::Conditional) => "moto",
            Server::Moto(Moto::Ignoring) => "moto-ignoring",
            Server::Rgw => "ceph-rgw",
            Server::Seaweed => "seaweedfs",
        }
    }

    /// Its S3 endpoint URL (path-style; the credentials of [`s3_env`]).
    pub fn endpoint(self) -> String {
        match self {
            Server::Moto(kind) => moto(kind).endpoint(),
            Server::Rgw => rgw_endpoint(),
            Server::Seaweed => seaweedfs().endpoint(),
        }
    }

    /// A fresh bucket for one test: `(endpoint, bucket)`.
    pub async fn bucket(self, test: &str) -> (String, String) {
        let endpoint = self.endpoint();
        let bucket = bucket_name(test);
        create_bucket(&sdk_client(&endpoint), &bucket).await;
        (endpoint, bucket)
    }
}

/// The Ceph RGW endpoint: `LEASECTL_RGW_ENDPOINT`, else the `endpoint` file
/// scripts/ceph-rgw.sh writes in `LEASECTL_RGW_DIR` (default `.rgw` in the repository).
pub fn rgw_endpoint() -> String {
    if let Ok(e) = std::env::var("LEASECTL_RGW_ENDPOINT") {
        return e;
    }
    let dir = std::env::var_os("LEASECTL_RGW_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".rgw"));
    match std::fs::read_to_string(dir.join("endpoint")) {
        Ok(e) => e.trim().to_owned(),
        Err(_) => panic!(
            "Ceph RGW (the second S3 test server) is not running: {} is missing.\n\
             Start it with scripts/ceph-rgw.sh start (scripts/test.sh does).",
            dir.join("endpoint").display()
        ),
    }
}

/// Defines one test per server of [`Server::MATRIX`] (`#[macro_use] mod common`
/// in main.rs makes it visible to every module): a module `NAME` with
/// tests `moto`, `rgw` and `seaweedfs`, each calling the body with its server.
macro_rules! server_matrix {
    ($(#[$m:meta])* async fn $name:ident($s:ident : Server) $body:block) => {
        $(#[$m])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn matrix_body($s: Server) $body
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn moto() {
                matrix_body(Server::Moto(Moto::Conditional)).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn rgw() {
                matrix_body(Server::Rgw).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn seaweedfs() {
                matrix_body(Server::Seaweed).await
            }
        }
    };
}

/// Ends the test early, saying on stderr that it was skipped (naming the test
/// function) and why, when `$why` (an `Option<String>`: what this machine
/// lacks for it) is `Some`: `skip_unless_able!(cannot_drop_privileges());`.
macro_rules! skip_unless_able {
    ($why:expr) => {
        if let Some(why) = $why {
            fn here() {}
            let test = std::any::type_name_of_val(&here).trim_end_matches("::here");
            eprintln!("SKIPPED {test}: {why}");
            return;
        }
    };
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python of the main test server's virtualenv (it has boto3), for the
/// scripts under `tests/support/`.
pub fn moto_python() -> PathBuf {
    venv_python("5.2.5")
}

/// A script under `tests/support/`.
pub fn support_script(name: &str) -> PathBuf {
    repo().join("tests/support").join(name)
}

fn venv_python(version: &str) -> PathBuf {
    let dir = std::env::var_os("LEASECTL_VENV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv"));
    let py = dir.join(format!("moto-{version}")).join("bin/python");
    if !py.exists() {
        panic!(
            "the S3 test server (moto {version}) is not set up: {} is missing.\n\
             Run {SETUP} first (LEASECTL_VENV_DIR={}).",
            py.display(),
            dir.display()
        );
    }
    py
}

/// How much higher than the tests' own processes the S3 test servers run
/// (`nice` -10): a real service answers from CPUs of its own, but these share
/// the machine's cores with the leasectl processes under test. Starved of
/// CPU, moto took over 100 ms from a write's read to its answer, so acquires
/// went the slow way (5/6 of the TTL) and tests timed for the usual way
/// failed (clean-clone CI runs at six tests at a time, 2026-12-07). Raising
/// a priority needs root or `CAP_SYS_NICE`; without it the servers run at
/// the tests' own priority, as before.
pub const SERVER_NICE: i32 = -10;

/// Makes `cmd`'s process (and what it starts) run at [`SERVER_NICE`], when
/// this process may raise a priority; else leaves it as it is.
pub fn serve_promptly(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: `setpriority` is a single system call, async-signal-safe, and
    // touches no memory of this process; its failure is ignored.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpriority(libc::PRIO_PROCESS, 0, SERVER_NICE);
            Ok(())
        })
    }
}

/// Runs the calling thread at [`SERVER_NICE`] when it may (the moto router's
/// thread: it carries every request to moto).
pub fn serve_promptly_this_thread() {
    // SAFETY: a single system call on this thread's own id.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, SERVER_NICE);
    }
}

/// One moto process on 127.0.0.1, stopped when dropped (or when this process
/// exits: the server exits when its stdin closes). The tests reach moto
/// through [`moto`], which spreads the buckets over several of these.
pub struct MotoProcess {
    child: Child,
    _stdin: ChildStdin,
    pub port: u16,
}

impl MotoProcess {
    pub fn start(kind: Moto) -> Self {
        let version = match kind {
            Moto::Conditional => "5.2.5",
            Moto::Ignoring => "5.0.14",
        };
        let mut child = serve_promptly(&mut Command::new(venv_python(version)))
            .arg(repo().join("scripts/moto_server.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting moto");
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("reading moto's port");
        let port: u16 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("moto did not print its port: {line:?}"));
        Self {
            child,
            _stdin: stdin,
            port,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for MotoProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One shared endpoint of each kind per test binary: the conditional moto
/// the suite's tests share, spread over [`moto_pool::MOTO_PROCESSES`]
/// processes by bucket (see [`moto_pool`]); the ignoring one, which few
/// tests use, one process.
pub fn moto(kind: Moto) -> &'static MotoServer {
    static C: OnceLock<MotoServer> = OnceLock::new();
    static I: OnceLock<MotoServer> = OnceLock::new();
    match kind {
        Moto::Conditional => C.get_or_init(|| MotoServer::start(kind, moto_pool::MOTO_PROCESSES)),
        Moto::Ignoring => I.get_or_init(|| MotoServer::start(kind, 1)),
    }
}

/// The SeaweedFS version the harness runs (scripts/setup-test-env.sh installs it).
pub const SEAWEEDFS_VERSION: &str = "4.48";

/// How many volumes (one a bucket) `weed mini` may make, whatever the free
/// disk (see [`SeaweedServer`]'s start).
pub const SEAWEEDFS_VOLUMES: u32 = 2000;

/// A SeaweedFS server (`weed mini`) on 127.0.0.1 with its data in a
/// temporary directory. It runs under a shell that waits for its standard
/// input to close: when this test process exits (however it exits), the
/// shell stops `weed` and removes the directory, so nothing is left running.
pub struct SeaweedServer {
    child: Child,
    stdin: Option<ChildStdin>,
    pub port: u16,
}

/// `n` distinct free loopback ports (all bound at once, then released).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("its address").port())
        .collect()
}

/// The `weed mini` services given ports of their own: left to their fixed
/// defaults (9333, 8888, …), a server still shutting down from a previous
/// test process keeps the next one from starting.
const SEAWEEDFS_PORTS: [&str; 11] = [
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "webdav.port",
    "admin.port",
    "admin.port.grpc",
];

impl SeaweedServer {
    /// Starts `weed mini` and waits (up to 90 s) until its S3 API answers.
    pub fn start() -> Self {
        let dir = std::env::var_os("LEASECTL_VENV_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join(".venv"));
        let weed = dir.join(format!("seaweedfs-{SEAWEEDFS_VERSION}/bin/weed"));
        if !weed.exists() {
            panic!(
                "the S3 test server SeaweedFS {SEAWEEDFS_VERSION} is not set up: {} is missing.\n\
                 Run {SETUP} first (LEASECTL_VENV_DIR={}).",
                weed.display(),
                dir.display()
            );
        }
        let data = tempfile::Builder::new()
            .prefix("leasectl-seaweedfs-")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        let ports = free_ports(SEAWEEDFS_PORTS.len());
        let port = ports[0];
        let mut child = serve_promptly(&mut Command::new("sh"))
            .arg("-c")
            .arg(
                "\"$0\" \"$@\" >\"$LEASECTL_SW_DATA/weed.log\" 2>&1 </dev/null & w=$!; \
                 cat >/dev/null; kill $w 2>/dev/null; wait $w; rm -rf \"$LEASECTL_SW_DATA\"",
            )
            .arg(&weed)
            .arg("mini")
            .arg(format!("-dir={}", data.display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .args(
                SEAWEEDFS_PORTS
                    .iter()
                    .zip(&ports)
                    .map(|(flag, p)| format!("-{flag}={p}")),
            )
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            // A bucket takes a volume of its own, and left to itself `weed
            // mini` allows one volume per GiB of free disk: on a disk with
            // 13 GiB free, the suite's 14th bucket got 500 InternalError. The
            // volumes are sparse (a few KB each here).
            .arg(format!("-volume.max={SEAWEEDFS_VOLUMES}"))
            // Its unix sockets too go where the shell removes them (default: /tmp).
            .arg(format!(
                "-filer.localSocket={}",
                data.join("filer.sock").display()
            ))
            .arg(format!(
                "-s3.localSocket={}",
                data.join("s3.sock").display()
            ))
            .env("LEASECTL_SW_DATA", &data)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing-secret")
            .env_remove("S3_BUCKET")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting SeaweedFS");
        let stdin = child.stdin.take().unwrap();
        let started = std::time::Instant::now();
        let endpoint = format!("http://127.0.0.1:{port}");
        loop {
            // It answers HTTP before it can store anything (500 InternalError for a
            // few seconds): ready once a bucket, an object and a delete work.
            if s3_answers(port) && writes_work(&endpoint) {
                break;
            }
            if started.elapsed() > Duration::from_secs(90) {
                let log = std::fs::read_to_string(data.join("weed.log")).unwrap_or_default();
                panic!(
                    "SeaweedFS did not answer on port {port} within 90 s; its log:\n{}",
                    &log[log.len().saturating_sub(4000)..]
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Self {
            child,
            stdin: Some(stdin),
            port,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// True when a bucket can be created (or exists) and an object written, read
/// and deleted at `endpoint` (on a thread of its own: the caller may be on a
/// tokio runtime).
fn writes_work(endpoint: &str) -> bool {
    let endpoint = endpoint.to_owned();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let c = sdk_client(&endpoint);
            let b = "leasectl-ready";
            if let Err(e) = c.create_bucket().bucket(b).send().await {
                let owned = e
                    .as_service_error()
                    .is_some_and(|s| s.is_bucket_already_owned_by_you());
                if !owned {
                    return false;
                }
            }
            c.put_object()
                .bucket(b)
                .key("ready")
                .body(b"ready".to_vec().into())
                .send()
                .await
                .is_ok()
                && c.get_object().bucket(b).key("ready").send().await.is_ok()
                && c.delete_object()
                    .bucket(b)
                    .key("ready")
                    .send()
                    .await
                    .is_ok()
        })
    })
    .join()
    .unwrap_or(false)
}

/// True when something answers HTTP on `port` with an S3 answer (ListBuckets:
/// 200, or 403 without credentials).
fn s3_answers(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    let line = String::from_utf8_lossy(&buf[..n]);
    line.starts_with("HTTP/1.1 200") || line.starts_with("HTTP/1.1 403")
}

impl Drop for SeaweedServer {
    fn drop(&mut self) {
        // Closing stdin stops weed and removes its data (see the type's docs).
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

static SEAWEEDFS: OnceLock<SeaweedServer> = OnceLock::new();

/// One shared SeaweedFS per test binary.
pub fn seaweedfs() -> &'static SeaweedServer {
    SEAWEEDFS.get_or_init(SeaweedServer::start)
}

/// True when `endpoint` is the SeaweedFS this test binary started.
fn is_seaweedfs(endpoint: &str) -> bool {
    SEAWEEDFS.get().is_some_and(|s| s.endpoint() == endpoint)
}

/// Environment for talking to moto: fake credentials, fixed region, no IMDS.
pub fn s3_env(cmd: &mut Command) -> &mut Command {
    cmd.env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing-secret")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_PROFILE")
        .env_remove("MUSHROOMDB_BACKUP_LEASE_CONDITIONAL")
        // No context of the tester's own config applies.
        .env("LEASECTL_CONFIG", "/nonexistent/leasectl-tests/config.toml")
}

/// A raw SDK client for seeding a server (bucket creation, raw objects).
pub fn sdk_client(endpoint: &str) -> aws_sdk_s3::Client {
    let creds =
        aws_sdk_s3::config::Credentials::new("testing", "testing-secret", None, None, "test");
    let conf = aws_sdk_s3::config::Builder::new()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(creds)
        .force_path_style(true)
        // The SDK has no default HTTP client in this build (leasectl gives
        // its own); the test servers are plain HTTP.
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

/// A fresh bucket name for one test.
pub fn bucket_name(test: &str) -> String {
    let clean: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!(
        "{}-{:08x}",
        &clean[..clean.len().min(40)],
        rand::random::<u32>()
    )
}

pub async fn create_bucket(client: &aws_sdk_s3::Client, bucket: &str) {
    client
        .create_bucket()
        .bucket(bucket)
        .send()
        .await
        .expect("create bucket");
}

pub async fn put_raw(client: &aws_sdk_s3::Client, bucket: &str, key: &str, body: &[u8]) {
    client
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(body.to_vec().into())
        .send()
        .await
        .expect("put object");
}

/// Writes [`cli::record`]`(holder, age_s, ttl_s)` as `key` in `bucket`.
pub async fn put_record(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    holder: &str,
    age_s: i64,
    ttl_s: u64,
) {
    put_raw(
        client,
        bucket,
        key,
        cli::record(holder, age_s, ttl_s).as_bytes(),
    )
    .await
}

/// Runs the leasectl binary with `args` against `endpoint` (if any); waits up to 60 s.
pub fn leasectl(endpoint: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = bin();
    if let Some(e) = endpoint {
        cmd.args(["--endpoint-url", e, "--path-style"]);
    }
    cmd.args(args);
    run_with_timeout(cmd, Duration::from_secs(60))
}

/// [`leasectl`] as (exit code, or -1 when killed by a signal; stdout;
/// stderr), the outputs as text (lossy).
pub fn leasectl_parts(endpoint: Option<&str>, args: &[&str]) -> (i32, String, String) {
    let out = leasectl(endpoint, args);
    (
        out.status.code().unwrap_or(-1),
        cli::text(&out.stdout),
        cli::text(&out.stderr),
    )
}

pub fn run_with_timeout(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn leasectl");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait leasectl"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("leasectl did not finish within {limit:?}");
        }
    }
}

/// A fresh bucket for `test` on moto with conditional writes: the server, a
/// client of it and the bucket's name.
pub async fn moto_bucket(test: &str) -> (&'static MotoServer, aws_sdk_s3::Client, String) {
    let server = moto(Moto::Conditional);
    let client = sdk_client(&server.endpoint());
    let bucket = bucket_name(test);
    create_bucket(&client, &bucket).await;
    (server, client, bucket)
}

/// Turns versioning on for `bucket`.
pub async fn enable_versioning(client: &aws_sdk_s3::Client, bucket: &str) {
    client
        .put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .expect("versioning on");
}

/// A new bucket on `server` for `test`, versioned: (endpoint, bucket).
pub async fn versioned_bucket_on(server: Server, test: &str) -> (String, String) {
    let (endpoint, b) = server.bucket(test).await;
    enable_versioning(&sdk_client(&endpoint), &b).await;
    (endpoint, b)
}

/// [`versioned_bucket_on`] moto with conditional writes.
pub async fn versioned_bucket(test: &str) -> (String, String) {
    versioned_bucket_on(Server::Moto(Moto::Conditional), test).await
}

/// A bucket lease's configuration: TTL `ttl_s` seconds, conditional writes,
/// the rest the defaults.
pub fn cfg(ttl_s: u64) -> leasectl::bucket::LeaseConfig {
    leasectl::bucket::LeaseConfig {
        ttl_s,
        exclusion: leasectl::bucket::Exclusion::Conditional,
        ..leasectl::bucket::LeaseConfig::default()
    }
}

pub fn file_url(dir: &Path) -> String {
    format!("file://{}/", dir.display())
}

/// An S3 store for `bucket` at `endpoint` with test credentials, short
/// timeouts (2 s; 20 s on SeaweedFS, which answers contended conditional
/// writes on one key one per round of its lock, about a second apart: the
/// 16th of 16 contenders starting together waits 13.3–14.4 s, measured with
/// boto3 against SeaweedFS 4.48) and no retries (so a lost answer surfaces to
/// the engine).
pub fn s3_store(endpoint: &str, bucket: &str) -> std::sync::Arc<leasectl::store::s3::S3Store> {
    s3_store_attempts(endpoint, bucket, 1)
}

/// [`s3_store`] whose SDK makes up to `attempts` attempts per request, as
/// leasectl's own stores do (2): a lost answer is then sent again, and the
/// retry of a conditional write that landed is refused (412).
pub fn s3_store_attempts(
    endpoint: &str,
    bucket: &str,
    attempts: u32,
) -> std::sync::Arc<leasectl::store::s3::S3Store> {
    let timeout = if is_seaweedfs(endpoint) {
        Duration::from_secs(20)
    } else {
        Duration::from_secs(2)
    };
    s3_store_timeout(endpoint, bucket, timeout, attempts)
}

/// [`s3_store_attempts`] whose requests wait up to `timeout` for an answer.
pub fn s3_store_timeout(
    endpoint: &str,
    bucket: &str,
    timeout: Duration,
    attempts: u32,
) -> std::sync::Arc<leasectl::store::s3::S3Store> {
    let cfg = sdk_config(endpoint, timeout, attempts);
    let opts = leasectl::store::s3::S3Options {
        path_style: true,
        // The same deadline as the SDK's, so a timeout names it rightly.
        request_timeout: Some(timeout),
        ..Default::default()
    };
    std::sync::Arc::new(leasectl::store::s3::S3Store::with_config(
        &cfg, bucket, &opts,
    ))
}

/// The SDK configuration of the test stores: `endpoint`, the test
/// credentials, `timeout` per attempt, `attempts` attempts per request.
pub fn sdk_config(endpoint: &str, timeout: Duration, attempts: u32) -> aws_config::SdkConfig {
    use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};
    aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "testing",
            "testing-secret",
            None,
            None,
            "test",
        )))
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(timeout)
                .operation_attempt_timeout(timeout)
                .operation_timeout(timeout * (attempts + 1))
                .build(),
        )
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(attempts))
        .build()
}

/// The released record at `key` — what a release leaves (issue 32 §3): it
/// holds nothing and keeps the generation — or `None` when the key holds
/// anything else (a holder's record, a malformed body) or nothing.
pub async fn released_record(
    store: &dyn leasectl::store::ObjectRead,
    key: &str,
) -> Option<leasectl::bucket::LeaseRecord> {
    let out = store.get(key, None).await.ok()?;
    leasectl::bucket::LeaseRecord::parse(&out.body, out.meta.size)
        .ok()
        .filter(|r| r.is_released())
}

/// True when the local LEASE file at `path` holds a released record (what a
/// release leaves, issue 32 §3: it holds nothing and keeps the generation).
pub fn released_file(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| {
        leasectl::bucket::LeaseRecord::parse(&b, b.len() as u64).is_ok_and(|r| r.is_released())
    })
}

/// The engine's tracing on stderr, filtered by `RUST_LOG` (nothing when
/// unset): how a test's timings are traced (the race check's rounds, the
/// acquire's write and confirmation, at debug level).
pub fn trace_from_env() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
}
