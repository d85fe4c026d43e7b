//! `leasectl probe` and `leasectl bucket hold`, as an operator runs them.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::proxy::{Mode, Proxy};
use crate::common::*;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_leasectl"));
    s3_env(&mut c);
    c
}

async fn bucket(kind: Moto, test: &str) -> (String, String) {
    let server = moto(kind);
    let b = bucket_name(test);
    create_bucket(&sdk_client(&server.endpoint()), &b).await;
    (server.endpoint(), b)
}

async fn keys(endpoint: &str, bucket: &str) -> Vec<String> {
    let out = sdk_client(endpoint)
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

fn run(mut c: Command) -> std::process::Output {
    run_with_timeout(
        std::mem::replace(&mut c, Command::new("true")),
        Duration::from_secs(60),
    )
}

/// `leasectl probe URL` against `endpoint`, off the async runtime.
async fn probe_s3(endpoint: &str, url: String) -> std::process::Output {
    let mut c = bin();
    c.args(["--endpoint-url", endpoint, "--path-style", "probe", &url]);
    tokio::task::spawn_blocking(move || run(c)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn probe_tells_a_conditional_service_from_an_ignoring_one() {
    let (endpoint, b) = bucket(Moto::Conditional, "probe-ok").await;
    let out = probe_s3(&endpoint, format!("s3://{b}/backups/")).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("verdict: conditional"), "{text}");
    assert!(text.contains("DELETE If-Match         honoured"), "{text}");
    assert!(
        keys(&endpoint, &b).await.is_empty(),
        "the scratch key is removed"
    );

    let (endpoint, b) = bucket(Moto::Ignoring, "probe-ignoring").await;
    let out = probe_s3(&endpoint, format!("s3://{b}/")).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("ignores If-None-Match"), "{text}");
    assert!(
        keys(&endpoint, &b).await.is_empty(),
        "nothing left behind: {:?}",
        keys(&endpoint, &b).await
    );
}

#[test]
fn probe_on_the_local_store_is_conditional() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = bin();
    c.args(["probe", &file_url(dir.path())]);
    let out = run(c);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!dir
        .path()
        .join(".leasectl-probe")
        .read_dir()
        .unwrap()
        .any(|_| true));
}

#[test]
fn hold_runs_the_command_under_the_lease_and_releases_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let mut c = bin();
    c.args([
        "bucket",
        "hold",
        &format!("file://{d}/db/"),
        "--ttl",
        "3s",
        "--",
    ])
    .args([
        "sh",
        "-c",
        &format!("cat {d}/db/LEASE > {d}/seen; echo $LEASECTL_INSTANCE_ID > {d}/id; exit 7"),
    ]);
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let out = run(c);
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
    let id = std::fs::read_to_string(dir.path().join("id")).unwrap();
    assert!(
        seen.contains(id.trim()),
        "the command ran while the LEASE named us: {seen}"
    );
    assert!(!dir.path().join("db/LEASE").exists(), "released at exit");
}

#[test]
fn hold_refuses_a_prefix_someone_else_holds() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let now = chrono::Utc::now().to_rfc3339();
    std::fs::write(
        dir.path().join("db/LEASE"),
        format!(r#"{{"instance_id":"other-writer","acquired_at":"{now}","renewed_at":"{now}","ttl_s":30}}"#),
    )
    .unwrap();
    let marker = dir.path().join("ran");
    let mut c = bin();
    c.args([
        "bucket",
        "hold",
        &file_url(&dir.path().join("db")),
        "--",
        "touch",
    ])
    .arg(&marker);
    let out = run(c);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("held by other-writer"), "{err}");
    assert!(!marker.exists(), "the command never ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn hold_stops_the_command_when_a_partition_closes_the_fence() {
    let (endpoint, b) = bucket(Moto::Conditional, "hold-partition").await;
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut c = bin();
    c.args([
        "--endpoint-url",
        &proxy.endpoint(),
        "--path-style",
        "--timeout",
        "1s",
    ])
    .args([
        "bucket",
        "hold",
        &format!("s3://{b}/db/"),
        "--ttl",
        "3s",
        "--grace",
        "1s",
        "--",
    ])
    .args([
        "sh",
        "-c",
        &format!("echo $$ > {}; exec sleep 60", pidfile.display()),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    // Wait for the command to start under the lease, and a renewal or two.
    let t = Instant::now();
    while !pidfile.exists() && t.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let cmd_pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    proxy.set_mode(Mode::BlackHole);
    let cut = Instant::now();
    // The command must be gone within the fence window (2 s after the last
    // renewal, itself at most ~1 s before the cut) plus signal delivery.
    let mut stopped_after = None;
    while cut.elapsed() < Duration::from_secs(10) {
        if !std::path::Path::new(&format!("/proc/{cmd_pid}")).exists() || is_zombie(cmd_pid) {
            stopped_after = Some(cut.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopped_after = stopped_after.expect("the command was stopped");
    assert!(
        stopped_after < Duration::from_millis(2600),
        "stopped after {stopped_after:?}"
    );
    // leasectl then tries to release (bounded by --timeout) and exits with 5.
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("fence closed"), "{err}");
    assert!(cut.elapsed() < Duration::from_secs(10));
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

#[test]
fn best_effort_mode_is_logged_at_warn() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let mut c = bin();
    c.env("MUSHROOMDB_BACKUP_LEASE_CONDITIONAL", "off").args([
        "bucket",
        "hold",
        &file_url(&dir.path().join("db")),
        "--",
        "true",
    ]);
    let out = run(c);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("WARN") && err.contains("best-effort"), "{err}");
    assert!(err.contains("exclusion=best_effort"), "{err}");
}

#[test]
fn a_handed_over_lease_is_adopted_by_bucket_hold_with_that_instance_id() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let t = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    std::fs::write(
        dir.path().join("db/LEASE"),
        format!(r#"{{"instance_id":"dead","acquired_at":"{t}","renewed_at":"{t}","ttl_s":30}}"#),
    )
    .unwrap();
    let url = file_url(&dir.path().join("db"));
    let log = dir.path().join("audit.jsonl").display().to_string();
    let mut c = bin();
    c.args(["takeover", &url, "--reason", "move to successor", "--yes"])
        .args(["--then", "handover:successor-7", "--audit-log", &log]);
    let out = run(c);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Someone else is refused: the handed-over lease is fresh.
    let mut c = bin();
    c.args(["bucket", "hold", &url, "--", "true"]);
    assert_eq!(run(c).status.code(), Some(4));
    // The named successor adopts it at once.
    let marker = dir.path().join("ran");
    let mut c = bin();
    c.args([
        "bucket",
        "hold",
        &url,
        "--instance-id",
        "successor-7",
        "--",
        "touch",
    ])
    .arg(&marker);
    let out = run(c);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(marker.exists());
}
