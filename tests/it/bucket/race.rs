//! The race probe (`probe --race`) and the acquire path's once-per-process
//! race check: a non-atomic service (the proxy's check, pause, unconditional
//! write in front of moto) is caught every time and no lease is taken there;
//! the real servers of the matrix pass.

use std::process::Command;
use std::time::Duration;

use leasectl::bucket::error::{BEST_EFFORT, FAIL_CLOSED};

use crate::common::proxy::{Mode, Proxy};
use crate::common::*;

fn run_cmd(c: Command) -> std::process::Output {
    run_with_timeout(c, Duration::from_secs(120))
}

async fn probe(endpoint: &str, url: &str, extra: &[&str]) -> std::process::Output {
    let mut c = bin();
    c.args(["--endpoint-url", endpoint, "--path-style", "probe"])
        .args(extra)
        .arg(url);
    tokio::task::spawn_blocking(move || run_cmd(c))
        .await
        .unwrap()
}

/// moto behind the non-atomic proxy: `(moto endpoint, bucket, proxy)`.
async fn non_atomic(test: &str) -> (String, String, Proxy) {
    let (endpoint, b) = Server::Moto(Moto::Conditional).bucket(test).await;
    let proxy = Proxy::start(moto(Moto::Conditional).port, Mode::NonAtomic).await;
    (endpoint, b, proxy)
}

/// Each precondition alone is answered as S3 does, so the seven steps one
/// request at a time pass; the eighth (creates at once) already tells, and
/// `--race` says "not atomic" (exit 3) in 20 of 20 runs, with the acquire's
/// sentences, and leaves no scratch key behind.
#[tokio::test(flavor = "multi_thread")]
async fn probe_race_says_not_atomic_20_of_20_on_a_non_atomic_service() {
    let (endpoint, b, proxy) = non_atomic("race-not-atomic").await;
    let url = format!("s3://{b}/db/");
    // Without --race, the eighth step's concurrent creates tell.
    let out = probe(&proxy.endpoint(), &url, &[]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("verdict: not atomic"), "{text}");
    assert!(
        text.contains("8. PUT If-None-Match: * x4 at once (absent)"),
        "{text}"
    );
    for run in 0..20 {
        let out = probe(&proxy.endpoint(), &url, &["--race"]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(3), "run {run}: {text}");
        assert!(text.contains("verdict: not atomic"), "run {run}: {text}");
        assert!(
            text.contains("PUT If-None-Match: * (one absent key) is not atomic"),
            "run {run}: {text}"
        );
        assert!(text.contains(FAIL_CLOSED), "run {run}: {text}");
        assert!(text.contains(BEST_EFFORT), "run {run}: {text}");
        let left = list_keys(&endpoint, &b).await;
        assert!(left.is_empty(), "run {run}: left behind {left:?}");
    }
}

/// `probe --race --json`: each race with its rounds, winners per round and
/// verdict; the overall verdict and the cost.
#[tokio::test(flavor = "multi_thread")]
async fn probe_race_json_names_rounds_winners_and_verdicts() {
    let (endpoint, b, proxy) = non_atomic("race-json").await;
    let out = probe(
        &proxy.endpoint(),
        &format!("s3://{b}/db/"),
        &["--json", "--race=6"],
    )
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("one JSON document");
    assert_eq!(doc["verdict"], "not_atomic", "{text}");
    assert_eq!(doc["exit_code"], 3, "{text}");
    let race = &doc["race"];
    assert_eq!(race["verdict"], "not_atomic", "{text}");
    assert_eq!(race["contenders"], 6, "{text}");
    assert!(race["requests"].as_u64().unwrap() > 0, "{text}");
    assert!(race["elapsed_ms"].is_u64(), "{text}");
    let races = race["races"].as_array().unwrap();
    assert_eq!(races.len(), 3, "{text}");
    let create = &races[0];
    assert_eq!(create["primitive"], "create_absent", "{text}");
    assert_eq!(create["verdict"], "not_atomic", "{text}");
    let winners = create["winners"].as_array().unwrap();
    assert_eq!(winners.len(), create["rounds"].as_u64().unwrap() as usize);
    assert!(
        winners.iter().all(|w| w.as_u64().unwrap() > 1),
        "every round had several winners: {text}"
    );
    assert_eq!(races[1]["primitive"], "if_match_current", "{text}");
    assert_eq!(races[1]["verdict"], "not_atomic", "{text}");
    assert_eq!(races[2]["primitive"], "delete_current", "{text}");
    assert!(list_keys(&endpoint, &b).await.is_empty());
}

/// Eight `bucket hold`s started together on one prefix through the
/// non-atomic proxy: without the race check several ran their command at
/// once; with it none runs, each refuses (exit 4) naming the switch, and
/// nothing is left in the bucket.
#[tokio::test(flavor = "multi_thread")]
async fn eight_concurrent_holds_on_a_non_atomic_service_run_nothing() {
    let (endpoint, b, proxy) = non_atomic("race-holds").await;
    let dir = tempfile::tempdir().unwrap();
    let mut handles = Vec::new();
    for i in 0..8 {
        let marker = dir.path().join(format!("ran-{i}"));
        let c = crate::bucket::hold_touching(&proxy.endpoint(), &format!("s3://{b}/db/"), &marker);
        handles.push(tokio::task::spawn_blocking(move || run_cmd(c)));
    }
    let mut not_atomic = 0;
    for h in handles {
        let out = h.await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{err}");
        if err.contains("is not atomic") {
            not_atomic += 1;
            assert!(err.contains(FAIL_CLOSED), "{err}");
            assert!(err.contains(BEST_EFFORT), "{err}");
        }
    }
    assert!(not_atomic >= 1, "at least one hold got to the race check");
    let ran: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(ran.is_empty(), "no command ran: {ran:?}");
    let left = list_keys(&endpoint, &b).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A takeover on the non-atomic service is refused before anything is written.
#[tokio::test(flavor = "multi_thread")]
async fn takeover_on_a_non_atomic_service_is_refused() {
    let (endpoint, b, proxy) = non_atomic("race-takeover").await;
    // A dead holder's stale record: there is something to take over (a
    // takeover of an absent LEASE is refused before any check).
    let stale = br#"{"instance_id":"dead","acquired_at":"2020-01-01T00:00:00Z","renewed_at":"2020-01-01T00:00:00Z","ttl_s":30}"#;
    put_raw(&sdk_client(&endpoint), &b, "db/LEASE", stale).await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = bin();
    c.args([
        "--endpoint-url",
        &proxy.endpoint(),
        "--path-style",
        "takeover",
    ])
    .arg(format!("s3://{b}/db/"))
    .args(["--reason", "race test", "--yes", "--audit-log"])
    .arg(dir.path().join("audit.jsonl"));
    let out = tokio::task::spawn_blocking(move || run_cmd(c))
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.contains("is not atomic"), "{text}");
    assert!(text.contains("--conditional off"), "{text}");
    // Nothing written: only the dead holder's record, unchanged.
    assert_eq!(list_keys(&endpoint, &b).await, vec!["db/LEASE".to_owned()]);
    let body = sdk_client(&endpoint)
        .get_object()
        .bucket(&b)
        .key("db/LEASE")
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert_eq!(&body[..], &stale[..]);
}

/// Ctrl-C in the middle of a race: the scratch keys are removed, exit 130.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_race_removes_its_scratch_keys() {
    let (endpoint, b, proxy) = non_atomic("race-ctrl-c").await;
    let mut c = bin();
    c.args([
        "--endpoint-url",
        &proxy.endpoint(),
        "--path-style",
        "probe",
        "--race=64",
    ])
    .arg(format!("s3://{b}/db/"))
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped());
    let child = c.spawn().unwrap();
    // Wait until the race's scratch key exists.
    let started = std::time::Instant::now();
    loop {
        let k = list_keys(&endpoint, &b).await;
        if k.iter().any(|k| k.ends_with(".race")) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no race key appeared: {k:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SAFETY: kill(2) on the child we spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("scratch keys were removed"), "{err}");
    // In-flight requests the proxy still forwards land within its pause.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let left = list_keys(&endpoint, &b).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

server_matrix! {
    /// The real servers are atomic references: `probe --race` passes (exit 0,
    /// every round exactly one winner), and a `bucket hold` (which runs the
    /// race check once) runs its command.
    async fn race_passes_on_real_servers(server: Server) {
        let (endpoint, b) = server.bucket("race-ok").await;
        // 8 contenders: SeaweedFS makes each loser of a contended write wait about a
        // second, so the default 16 costs it 10-30 s (scripts/compat.sh runs those,
        // 20 times per server).
        for run in 0..1 {
            let out = probe(&endpoint, &format!("s3://{b}/db/"), &["--json", "--race=8"]).await;
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "{} run {run}: {text}", server.name());
            let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(doc["race"]["verdict"], "atomic", "{text}");
            for r in doc["race"]["races"].as_array().unwrap() {
                if r["verdict"] == "not_run" {
                    continue;
                }
                assert!(
                    r["winners"].as_array().unwrap().iter().all(|w| w == 1),
                    "{}: {text}",
                    server.name()
                );
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let c = crate::bucket::hold_touching(&endpoint, &format!("s3://{b}/db/"), &marker);
        let out = tokio::task::spawn_blocking(move || run_cmd(c)).await.unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(marker.exists());
        assert_eq!(list_keys(&endpoint, &b).await, ["db/LEASE"]);
        assert!(released_record(s3_store(&endpoint, &b).as_ref(), "db/LEASE").await.is_some());
    }
}

/// The console's `p` (the write task's probe): the steps pass on the
/// non-atomic service, the race does not — the line says "not atomic" and the
/// target is marked as not excluding; on moto the line carries the race's
/// verdict and cost. Drawn on a TestBackend, the status line shows it.
#[tokio::test(flavor = "multi_thread")]
async fn console_probe_reports_the_race() {
    use leasectl::snapshot::ExclusionReport;
    use leasectl::tui::action::{Action, WriteRequest};
    /// The result and the message of a `ProbeDone`.
    fn probe_done(a: &Action) -> (&ExclusionReport, &str) {
        let Action::ProbeDone {
            result, message, ..
        } = a
        else {
            unreachable!()
        };
        (result, message)
    }
    use leasectl::tui::ops::{Ops, OpsTarget};

    let (endpoint, b, proxy) = non_atomic("race-console").await;
    let dir = tempfile::tempdir().unwrap();
    let target = |ep: &str| OpsTarget {
        url: "s3://race-console/db/".into(),
        endpoint: ep.to_owned(),
        bucket: Some(b.clone()),
        store: s3_store(ep, &b),
        root: "db/".into(),
    };
    let clock = leasectl::clock::SystemClock::shared();
    let ops = Ops {
        targets: vec![target(&proxy.endpoint()), target(&endpoint)],
        audit: leasectl::audit::AuditLog::open(dir.path().join("audit.jsonl")).unwrap(),
        clock,
    };
    let (atx, mut arx) = tokio::sync::mpsc::channel(16);
    let (tx, _task) = ops.start(atx);
    let mut done = Vec::new();
    for target in [0, 1] {
        tx.send(WriteRequest::Probe { target }).await.unwrap();
        let a = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                match arx.recv().await.unwrap() {
                    a @ Action::ProbeDone { .. } => break a,
                    _ => continue,
                }
            }
        })
        .await
        .expect("the probe finished");
        done.push(a);
    }
    let (result, message) = probe_done(&done[0]);
    assert_eq!(*result, ExclusionReport::Ignored, "{message}");
    assert!(
        message.starts_with("s3://race-console/db/: not atomic — PUT If-None-Match: * (one absent key) is not atomic"),
        "{message}"
    );
    let (result, message) = probe_done(&done[1]);
    assert_eq!(*result, ExclusionReport::Conditional, "{message}");
    assert!(
        message.contains("; race: atomic (5 rounds of 16 concurrent requests, "),
        "{message}"
    );
    assert!(list_keys(&endpoint, &b).await.is_empty());
    // The status line of the console, drawn.
    let mut app = leasectl::tui::app::App::new(
        vec!["s3://race-console/db/".parse().unwrap()],
        false,
        Duration::from_secs(5),
        chrono::Utc::now(),
    )
    .without_pod();
    app.update(Action::Resize(200, 12));
    app.update(done.remove(0));
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 12)).unwrap();
    t.draw(|f| leasectl::tui::ui::render(&app, f)).unwrap();
    let buf = t.backend().buffer().clone();
    let screen: String = (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        screen.contains("not atomic — PUT If-None-Match: *"),
        "{screen}"
    );
}

/// One row of the compatibility table: `leasectl probe --race --json` run
/// `runs` times on `endpoint` (the steps from the first run).
async fn compat_row(name: &str, endpoint: &str, runs: usize, adapts: &str) -> String {
    let b = bucket_name("compat");
    create_bucket(&sdk_client(endpoint), &b).await;
    let mut steps = String::new();
    let mut not_atomic = 0;
    let mut most = 0u64;
    let mut cost = String::new();
    for run in 0..runs {
        let out = probe(endpoint, &format!("s3://{b}/db/"), &["--json", "--race"]).await;
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("probe --json prints one document");
        if run == 0 {
            let s = doc["report"]["steps"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let a = |i: usize| {
                s.get(i)
                    .and_then(|x| x["answer"].as_str())
                    .unwrap_or("?")
                    .to_owned()
            };
            steps = format!(
                "{} / {} | {} | {} | {} | {} / {}",
                a(0),
                a(1),
                a(2),
                a(3),
                a(4),
                a(5),
                a(6)
            );
        }
        let race = &doc["race"];
        if race.is_null() {
            // The steps already refused the service: the race is not run.
            cost = "not run: the steps refuse the service".into();
            continue;
        }
        if race["verdict"] == "not_atomic" {
            not_atomic += 1;
        }
        for r in race["races"].as_array().unwrap() {
            most = most.max(r["max_winners"].as_u64().unwrap_or(0));
        }
        cost = format!("{} requests, {} ms", race["requests"], race["elapsed_ms"]);
    }
    let race = if cost.starts_with("not run") {
        cost.clone()
    } else if not_atomic > 0 {
        format!("**not atomic** in {not_atomic} of {runs} runs (up to {most} winners in a round); last run {cost}")
    } else {
        format!("atomic in {runs} of {runs} runs (one winner every round); last run {cost}")
    };
    format!("| {name} (measured) | {steps} | {race} | {adapts} |")
}

/// The measured rows of the README's compatibility table (`scripts/compat.sh`
/// runs this): every server of the harness and the non-atomic emulation,
/// `LEASECTL_COMPAT_RUNS` race probes each (default 20).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by scripts/compat.sh"]
async fn compat_table() {
    let runs = crate::bucket::runs_from_env("LEASECTL_COMPAT_RUNS", 20);
    let proxy = Proxy::start(moto(Moto::Conditional).port, Mode::NonAtomic).await;
    let rows = [
        (
            "moto 5.2.5",
            moto(Moto::Conditional).endpoint(),
            "conditional, as on AWS",
        ),
        (
            "Ceph RGW 16.2.15",
            rgw_endpoint(),
            "conditional, adapted: `etag_form: unquoted`; release by read-check-delete; 409/500 on a write read back",
        ),
        (
            "SeaweedFS 4.48",
            seaweedfs().endpoint(),
            "conditional, as on AWS (losers of a contended conditional write wait about a second)",
        ),
        (
            "moto 5.0.14",
            moto(Moto::Ignoring).endpoint(),
            "refused (exit 3 / 4): ignores preconditions; best-effort only with the switch",
        ),
        (
            "non-atomic emulation (check, 50 ms pause, unconditional write; tests/it/common/proxy.rs)",
            proxy.endpoint(),
            "refused (exit 3 / 4): not atomic; best-effort only with the switch",
        ),
    ];
    println!("| service | steps 1–2 | step 3 | step 4 | step 5 | steps 6–7 | race (`probe --race`) | what leasectl does |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, endpoint, adapts) in rows {
        println!("{}", compat_row(name, &endpoint, runs, adapts).await);
    }
}

/// The acquire's race check runs once per store per process: the first
/// acquire on a store sends the race's writes (4 creates and 4 `If-Match`
/// writes on a scratch key, then a renewal), a second acquire on the same
/// store sends none of them.
#[tokio::test(flavor = "multi_thread")]
async fn the_acquire_races_once_per_store() {
    use leasectl::bucket::{BucketLease, LeaseConfig, LeaseWatch};
    use leasectl::clock::SystemClock;
    use leasectl::store::ObjectStore;

    let (endpoint, b) = Server::Moto(Moto::Conditional).bucket("race-once").await;
    let proxy = Proxy::start(moto(Moto::Conditional).port, Mode::Pass).await;
    let store: std::sync::Arc<dyn ObjectStore> = s3_store(&proxy.endpoint(), &b);
    let puts = || proxy.counts().get("PUT").copied().unwrap_or(0);
    let mut spent = Vec::new();
    for prefix in ["a/", "b/"] {
        let before = puts();
        let lease = BucketLease::acquire(
            store.clone(),
            SystemClock::shared(),
            prefix,
            LeaseConfig::default(),
            &mut LeaseWatch::new(),
        )
        .await
        .expect("moto is atomic");
        assert!(lease.may_write());
        spent.push(puts() - before);
        lease.release().await.unwrap();
    }
    assert!(
        spent[0] >= spent[1] + 9,
        "the first acquire raced (8 PUTs and a renewal), the second did not: {spent:?}"
    );
    // Nothing left but the released records (no scratch key).
    assert_eq!(list_keys(&endpoint, &b).await, ["a/LEASE", "b/LEASE"]);
    for key in ["a/LEASE", "b/LEASE"] {
        assert!(
            released_record(store.as_ref(), key).await.is_some(),
            "{key}"
        );
    }
}

/// A contender's create answered late, but answered (SeaweedFS answers the
/// losers queued behind its lock one to three seconds late), was sent once:
/// nothing of it is left to be carried out, and the scratch key is removed
/// without being watched (it was watched for twice the slowest answer, which
/// held the acquire's race check on SeaweedFS 4–6.5 s past its last round,
/// beside a write whose fence was running). A create whose answer was given
/// up on (the client's timeout) may still land, and is watched for. One
/// round of four creates on moto, the proxy holding one answer back; the
/// GETs counted: the round's read-back, then the watch's, one every 0.5 s.
#[tokio::test(flavor = "multi_thread")]
async fn a_late_answer_is_not_watched_for_and_one_given_up_on_is() {
    use leasectl::bucket::race::creates_at_once;
    use leasectl::store::ObjectRead;

    let proxy = Proxy::start(moto(Moto::Conditional).port, Mode::Pass).await;
    let (_, b) = Server::Moto(Moto::Conditional).bucket("late-answer").await;
    let gets = || proxy.counts().get("GET").copied().unwrap_or(0);
    // Held back 2 s, answered within the client's 10 s.
    let store = s3_store_timeout(&proxy.endpoint(), &b, Duration::from_secs(10), 1);
    proxy.delay_next_answers_of("PUT", "/db/late.race", 1, Duration::from_secs(2));
    let before = gets();
    let race = creates_at_once(store.as_ref(), "db/late.race", 4)
        .await
        .unwrap();
    assert_eq!(proxy.delays_pending(), 0, "one create was held back");
    assert_eq!(race.winners, vec![1], "{race:?}");
    assert_eq!(gets() - before, 1, "the read-back only: {race:?}");
    assert!(store.get("db/late.race", None).await.is_err(), "removed");
    // Held back 3 s, given up on after the client's 1 s: watched for 2 s.
    let store = s3_store_timeout(&proxy.endpoint(), &b, Duration::from_secs(1), 1);
    proxy.delay_next_answers_of("PUT", "/db/given-up.race", 1, Duration::from_secs(3));
    let before = gets();
    let race = creates_at_once(store.as_ref(), "db/given-up.race", 4)
        .await
        .unwrap();
    assert_eq!(proxy.delays_pending(), 0, "one create was held back");
    assert!(
        gets() - before >= 4,
        "watched: {} GETs, {race:?}",
        gets() - before
    );
}
