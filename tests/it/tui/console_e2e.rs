//! The console end to end in tmux against moto: watch mode never writes (a
//! method-counting proxy proves it), and an OPS-mode takeover through the
//! dialog changes the lease's holder and is audited.

use std::time::Duration;

use crate::common::proxy::{Mode, Proxy};
use crate::common::tmux::Tmux;
use crate::common::*;
use leasectl::audit::AuditLog;
use leasectl::bucket::LeaseRecord;

const LONG: Duration = Duration::from_secs(20);

fn stale_record(id: &str) -> Vec<u8> {
    let t = chrono::Utc::now() - chrono::Duration::minutes(5);
    LeaseRecord {
        instance_id: id.into(),
        acquired_at: t,
        renewed_at: t,
        ttl_s: 30,
        generation: None,
        released_at: None,
    }
    .to_body()
}

fn console_cmd(endpoint: &str, extra: &str, url: &str) -> String {
    format!(
        "AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing-secret AWS_REGION=us-east-1 \
         AWS_EC2_METADATA_DISABLED=true {} --endpoint-url {endpoint} --path-style --no-pod \
         --refresh 1s {extra} {url}",
        bin_path()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_mode_sends_no_write_whatever_is_pressed() {
    let (server, client, b) = moto_bucket("watch-mode").await;
    put_raw(&client, &b, "db1/LEASE", &stale_record("dead-holder")).await;
    put_raw(&client, &b, "db2/LEASE", b"not json").await;
    let proxy = Proxy::start(server.port, Mode::Pass).await;
    let tmux = Tmux::start(140, 30);
    let run = tmux.run(&console_cmd(
        &proxy.endpoint(),
        "--read-only",
        &format!("s3://{b}/"),
    ));
    let t = tmux.clone_name();
    tokio::task::spawn_blocking(move || {
        let tmux = Tmux::attach(&t);
        tmux.wait_shown(&run, LONG, "the rows", |s| {
            s.contains("dead-holder") && s.contains("WATCH")
        });
        // A sustained run, pressing every key, write keys included.
        for round in 0..4 {
            for keys in [
                &["t"][..],
                &["Enter"],
                &["t"],
                &["Tab"],
                &["p"],
                &["Tab"],
                &["n"],
                &["s"],
                &["Enter"],
                &["?"],
                &["Escape"],
                &["/"],
                &["d", "b"],
                &["Enter"],
                &["Escape"],
                &["Down"],
                &["t"],
                &["y"],
                &["p"],
            ] {
                tmux.send(keys);
                std::thread::sleep(Duration::from_millis(60));
            }
            let s = tmux.screen();
            assert!(
                !s.contains("take over ") || !s.contains("Replace this lease"),
                "round {round}: a dialog opened in watch mode:\n{s}"
            );
        }
        std::thread::sleep(Duration::from_millis(1500));
        tmux.send(&["q"]);
        let (code, shown) = tmux.wait_exit(&run, LONG);
        assert_eq!(code, 0, "{shown}");
        std::mem::forget(tmux); // the outer guard kills the session
    })
    .await
    .unwrap();
    let counts = proxy.counts();
    assert_eq!(proxy.writes(), 0, "watch mode wrote: {counts:?}");
    assert!(
        counts.get("GET").copied().unwrap_or(0) >= 10,
        "it did read, repeatedly: {counts:?}"
    );
    drop(tmux);
}

#[tokio::test(flavor = "multi_thread")]
async fn takeover_through_the_dialog_changes_the_holder_and_is_audited() {
    let (server, client, b) = moto_bucket("console-takeover").await;
    put_raw(&client, &b, "db1/LEASE", &stale_record("dead-holder")).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let tmux = Tmux::start(140, 34);
    let run = tmux.run(&console_cmd(
        &server.endpoint(),
        &format!("--audit-log {}", log.display()),
        &format!("s3://{b}/"),
    ));
    let t = tmux.clone_name();
    let endpoint = server.endpoint();
    let typed = run.clone();
    tokio::task::spawn_blocking(move || {
        let tmux = Tmux::attach(&t);
        tmux.wait_shown(&typed, LONG, "the stale row", |s| {
            s.contains("dead-holder") && s.contains("stale")
        });
        tmux.send(&["t"]);
        tmux.wait_for(LONG, "the dialog", |s| {
            s.contains("Replace this lease?") && s.contains("dead-holder")
        });
        // The focus starts in the reason field.
        tmux.type_text("INC-99 db host lost");
        tmux.send(&["Tab"]); // → then
        tmux.send(&["Right"]); // release → hold
        tmux.send(&["BTab"]); // → reason
        tmux.send(&["BTab"]); // → Take over
        tmux.send(&["Enter"]);
        // The takeover's write may go the slow way under load (over 100 ms
        // from its read to its answer): the lease is then kept 5/6 of the
        // console's TTL (30 s) before it is handed out.
        let s = tmux.wait_for(LONG + Duration::from_secs(25), "the result", |s| {
            s.contains("taken:") || s.contains("takeover of")
        });
        assert!(s.contains("taken:"), "{s}");
        tmux.wait_for(LONG, "the held marker", |s| s.contains("◆ db1/"));
        let _ = endpoint;
        std::mem::forget(tmux);
    })
    .await
    .unwrap();
    // The LEASE names a new holder now.
    let out = client
        .get_object()
        .bucket(&b)
        .key("db1/LEASE")
        .send()
        .await
        .unwrap();
    let body = out.body.collect().await.unwrap().into_bytes();
    let rec = LeaseRecord::parse(&body, body.len() as u64).unwrap();
    assert_ne!(rec.instance_id, "dead-holder");
    let entries = AuditLog::read(&log).unwrap();
    assert_eq!(entries.len(), 2, "{entries:#?}");
    assert_eq!(entries[0].phase, "intent");
    assert_eq!(entries[0].reason, "INC-99 db host lost");
    assert_eq!(
        entries[0].observed.record.as_ref().unwrap().instance_id,
        "dead-holder"
    );
    assert_eq!(
        entries[1].written.as_ref().unwrap().record.instance_id,
        rec.instance_id
    );
    assert_eq!(entries[1].then, "hold");
    // Quitting asks, then releases the held lease.
    tmux.send(&["q"]);
    tmux.wait_for(LONG, "the quit prompt", |s| {
        s.contains("Release them and quit?")
    });
    tmux.send(&["y"]);
    let (code, shown) = tmux.wait_exit(&run, LONG);
    assert_eq!(code, 0, "{shown}");
    assert!(
        released_record(s3_store(&server.endpoint(), &b).as_ref(), "db1/LEASE")
            .await
            .is_some(),
        "the held lease was released on quit"
    );
}

/// Issue 44 item 5: a signal whose default action would end the console
/// (SIGUSR1 here; SIGTERM and SIGHUP were handled already) ends it as
/// SIGTERM does: the terminal restored, exit 0, what it holds released. On
/// main SIGUSR1 killed it (exit 138) with the terminal left in raw mode.
#[test]
fn a_signal_that_would_kill_the_console_ends_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let pidfile = dir.path().join("console.pid");
    let tmux = Tmux::start(120, 24);
    let run = tmux.run(&format!(
        "sh -c 'echo $$ > {}; exec {} --read-only --no-pod --refresh 1s {}'",
        pidfile.display(),
        bin_path(),
        file_url(dir.path())
    ));
    tmux.wait_shown(&run, LONG, "the console", |s| s.contains("WATCH"));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) of the console this test started.
    unsafe { libc::kill(pid, libc::SIGUSR1) };
    let (code, s) = tmux.wait_exit(&run, LONG);
    assert_eq!(code, 0, "{s}");
    assert!(!s.contains("WATCH"), "the console's screen is gone: {s}");
}
