//! The leasectl binary as the tests run it, and the LEASE bodies they write:
//! each helper defined once (issue 36 §5).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};

use super::{run_with_timeout, s3_env};

/// The path of the leasectl binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_leasectl");

/// The leasectl binary with the test credentials ([`s3_env`]) and no
/// S3-specific endpoint from the tester's environment.
pub fn bin() -> Command {
    let mut c = Command::new(BIN);
    s3_env(&mut c).env_remove("AWS_ENDPOINT_URL_S3");
    c
}

/// The binary's path, for tests that build their own command line.
pub fn bin_path() -> &'static str {
    BIN
}

/// `leasectl ARGS` ([`bin`]), waited for up to 60 s.
pub fn run(args: &[&str]) -> Output {
    let mut c = bin();
    c.args(args);
    run_with_timeout(c, Duration::from_secs(60))
}

/// [`run`] on a blocking thread, so that the test's runtime goes on meanwhile.
pub async fn run_async(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args)
    })
    .await
    .unwrap()
}

/// `--endpoint-url ENDPOINT --path-style REST`, owned (for [`run_async`]).
pub fn at_endpoint(endpoint: &str, rest: &[&str]) -> Vec<String> {
    ["--endpoint-url", endpoint, "--path-style"]
        .iter()
        .chain(rest)
        .map(|s| s.to_string())
        .collect()
}

/// `leasectl ARGS` with nothing added to the environment (no credentials),
/// waited for up to `limit`.
pub fn run_bare(args: &[&str], limit: Duration) -> Output {
    let mut c = Command::new(BIN);
    c.args(args);
    run_with_timeout(c, limit)
}

/// Bytes as text (lossy).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A process's stdout followed by its stderr, as text.
pub fn output_text(o: &Output) -> String {
    format!("{}{}", text(&o.stdout), text(&o.stderr))
}

/// Asserts that `out` exited with `code`; its stdout and stderr say why not.
#[track_caller]
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{}", output_text(out));
}

/// A LEASE body (the seed's four fields) for `holder`, renewed `age_s`
/// seconds ago.
pub fn record(holder: &str, age_s: i64, ttl_s: u64) -> String {
    let t = (Utc::now() - chrono::Duration::seconds(age_s))
        .to_rfc3339_opts(SecondsFormat::Micros, true);
    serde_json::json!({"instance_id": holder, "acquired_at": t, "renewed_at": t, "ttl_s": ttl_s})
        .to_string()
}

/// A LEASE body of `holder` acquired and renewed now, TTL 30 s, with
/// `generation`.
pub fn generation_body(holder: &str, generation: u64) -> Vec<u8> {
    let now = Utc::now();
    leasectl::bucket::LeaseRecord {
        instance_id: holder.into(),
        acquired_at: now,
        renewed_at: now,
        ttl_s: 30,
        generation: Some(generation),
        released_at: None,
    }
    .to_body()
}

/// Writes `body` as `root/prefix/LEASE` (a local store's LEASE).
pub fn write_lease(root: &Path, prefix: &str, body: &str) {
    let d = root.join(prefix);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("LEASE"), body).unwrap();
}
