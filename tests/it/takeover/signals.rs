//! Issue 23 item 2 and issue 22 §6, with the real binary: SIGTERM, SIGHUP
//! and SIGINT sent to a real `leasectl takeover --force` while it waits for
//! the replaced holder's fence (`--then release` and `--then handover:ID`),
//! on a local store and on moto, then the LEASE and the audit log checked;
//! and a takeover of a prefix without a LEASE refused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use leasectl::audit::{AuditEntry, AuditLog};
use leasectl::bucket::{
    judge, BucketLease, Exclusion, LeaseConfig, LeaseError, LeaseState, LeaseWatch, Observed,
};
use leasectl::clock::SystemClock;
use leasectl::store::local::LocalStore;
use leasectl::store::ObjectStore;

/// Where the prefix under test lives: a local directory or a moto bucket.
enum Place {
    Local(tempfile::TempDir),
    Moto(String, String),
}

impl Place {
    fn local() -> Self {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("db")).unwrap();
        Place::Local(d)
    }

    async fn moto(test: &str) -> Self {
        let (endpoint, bucket) = Server::Moto(Moto::Conditional).bucket(test).await;
        Place::Moto(endpoint, bucket)
    }

    /// The prefix URL given to `leasectl takeover`.
    fn url(&self) -> String {
        match self {
            Place::Local(d) => format!("file://{}/db/", d.path().display()),
            Place::Moto(_, b) => format!("s3://{b}/db/"),
        }
    }

    /// The store as the test's holder opens it, and the prefix in it.
    fn store(&self) -> (Arc<dyn ObjectStore>, &'static str) {
        match self {
            Place::Local(d) => (Arc::new(LocalStore::open(d.path().join("db")).unwrap()), ""),
            Place::Moto(e, b) => (s3_store(e, b), "db/"),
        }
    }

    fn key(&self) -> String {
        leasectl::bucket::lease_key(self.store().1)
    }

    fn command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_leasectl"));
        s3_env(&mut c);
        if let Place::Moto(e, _) = self {
            c.args(["--endpoint-url", e, "--path-style", "--timeout", "5s"]);
        }
        c
    }

    async fn look(&self) -> Observed {
        let (store, prefix) = self.store();
        leasectl::bucket::read_lease(store.as_ref(), &leasectl::bucket::lease_key(prefix), None)
            .await
            .unwrap()
    }
}

fn cfg(ttl_s: u64) -> LeaseConfig {
    LeaseConfig {
        ttl_s,
        exclusion: Exclusion::Conditional,
        ..LeaseConfig::default()
    }
}

/// A live holder: just acquired with a 9 s TTL, so a forced takeover waits
/// five sixths of it (7.5 s) before it may release or hand over.
async fn live_holder(place: &Place) -> BucketLease {
    let (store, prefix) = place.store();
    let _ = store.delete(&place.key(), None).await;
    BucketLease::acquire(
        store,
        SystemClock::shared(),
        prefix,
        cfg(9),
        &mut LeaseWatch::new(),
    )
    .await
    .expect("the live holder acquires")
}

fn spawn_takeover(place: &Place, then: &str, log: &Path, out: &Path) -> Child {
    place
        .command()
        .args(["takeover", &place.url(), "--force", "--yes", "--ttl", "6s"])
        .args(["--reason", "signal test", "--then", then, "--audit-log"])
        .arg(log)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(std::fs::File::create(out.with_extension("stderr")).unwrap())
        .spawn()
        .expect("spawn leasectl takeover")
}

fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(
            t.elapsed() < limit,
            "{what} did not happen within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn exit_code(child: &mut Child, limit: Duration) -> Option<i32> {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("leasectl takeover did not exit within {limit:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// When the signal is sent.
#[derive(Clone, Copy, Debug)]
enum When {
    /// As soon as the intent is in the audit log (the PUT may be in flight).
    AtIntent,
    /// Once the wait was announced, plus this many milliseconds.
    Waiting(u64),
}

/// One round: a live holder, a forced takeover, `sig` at `when`; then the
/// LEASE and the audit log are checked.
async fn round(place: &Place, dir: &Path, n: usize, sig: i32, then: &str, when: When) {
    let holder = live_holder(place).await;
    let old_id = holder.record().instance_id.clone();
    let log: PathBuf = dir.join(format!("audit-{n}.jsonl"));
    let out = dir.join(format!("takeover-{n}.out"));
    let mut child = spawn_takeover(place, then, &log, &out);
    match when {
        When::AtIntent => wait_until("the intent entry", Duration::from_secs(20), || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("\"intent\"")
        }),
        When::Waiting(ms) => {
            wait_until("the wait's announcement", Duration::from_secs(20), || {
                std::fs::read_to_string(&out)
                    .unwrap_or_default()
                    .contains("waiting until")
            });
            std::thread::sleep(Duration::from_millis(ms));
        }
    }
    // SAFETY: kill(2) on the child this test spawned.
    unsafe { libc::kill(child.id() as i32, sig) };
    let code = exit_code(&mut child, Duration::from_secs(15));
    let exited_at = chrono::Utc::now();
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    let ctx = format!("round {n} ({sig}, {then}, {when:?}):\n{stdout}\n{stderr}");
    assert_eq!(code, Some(6), "{ctx}");
    let name = match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "SIGINT",
    };
    assert!(
        stdout.contains("waiting until") && stdout.contains("fence to close before"),
        "it says what it waits for and until when: {ctx}"
    );
    // Why it exits 6 is said on stderr (issue 45 §3).
    assert!(
        stderr.contains(&format!("leasectl: interrupted: stopped by {name}")),
        "{ctx}"
    );

    // The audit log: the intent and its outcome, saying what was left.
    let entries: Vec<AuditEntry> = AuditLog::read(&log).unwrap();
    assert_eq!(entries.len(), 2, "{entries:#?}\n{ctx}");
    assert_eq!(
        (entries[0].phase.as_str(), entries[1].phase.as_str()),
        ("intent", "outcome")
    );
    assert_eq!(entries[0].id, entries[1].id);
    let outcome = &entries[1];
    let text = outcome.outcome.as_deref().unwrap();
    assert!(text.starts_with(&format!("stopped by {name}")), "{text}");
    let not_done = if then == "release" {
        "not released"
    } else {
        "not handed over"
    };
    assert!(text.contains(not_done), "{text}");
    assert!(text.contains("was rewritten to expire at"), "{text}");
    let safe = outcome.writes_safe_from.expect("writes_safe_from");
    assert!(exited_at < safe, "the signal ended the wait early: {ctx}");
    let written = outcome.written.as_ref().expect("what was left is audited");

    // The LEASE: our record, as audited, fresh until the old holder's fence
    // has closed — never deleted, never the successor's before it.
    let now = place.look().await;
    let r = now.record().expect("a record is left at the key").clone();
    assert_eq!(now.etag(), written.etag.as_deref(), "{ctx}");
    assert_eq!(r, written.record);
    assert_ne!(r.instance_id, old_id);
    assert_ne!(r.instance_id, "succ-1", "not handed over before the fence");
    let expires = r.renewed_at + chrono::Duration::seconds(r.ttl_s as i64);
    assert!(expires >= safe, "expires {expires} before the fence {safe}");
    assert!(
        expires <= safe + chrono::Duration::seconds(4),
        "and not much later: {expires} vs {safe}"
    );
    assert_eq!(judge(&now, chrono::Utc::now()).state, LeaseState::Fresh);
    // Nobody can take it before then.
    let (store, prefix) = place.store();
    let err = BucketLease::acquire(
        store,
        SystemClock::shared(),
        prefix,
        cfg(6),
        &mut LeaseWatch::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, LeaseError::HeldByOther { .. }), "{err}");
    drop(holder);
}

/// The rounds, run on one place: every signal, both `--then`s, the signal
/// at the intent (before the wait) and during it, twice over.
async fn rounds(place: Place) {
    let dir = tempfile::tempdir().unwrap();
    let plan = [
        (libc::SIGTERM, "release", When::Waiting(300)),
        (libc::SIGHUP, "handover:succ-1", When::Waiting(1500)),
        (libc::SIGINT, "release", When::Waiting(0)),
        (libc::SIGTERM, "handover:succ-1", When::AtIntent),
        (libc::SIGINT, "handover:succ-1", When::Waiting(2500)),
        (libc::SIGHUP, "release", When::AtIntent),
    ];
    for (n, (sig, then, when)) in plan.into_iter().enumerate() {
        round(&place, dir.path(), n, sig, then, when).await;
    }
    // The record left expires after the fence: then the successor takes it.
    let (store, prefix) = place.store();
    let t = Instant::now();
    let lease = loop {
        match BucketLease::acquire_as(
            store.clone(),
            SystemClock::shared(),
            prefix,
            "succ-1",
            cfg(6),
            &mut LeaseWatch::new(),
        )
        .await
        {
            Ok(l) => break l,
            Err(LeaseError::HeldByOther { .. }) if t.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(250)).await
            }
            Err(e) => panic!("the successor could not take the expired record: {e}"),
        }
    };
    lease.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_during_a_forced_takeovers_wait_leaves_the_lease_to_expire_local() {
    rounds(Place::local()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_during_a_forced_takeovers_wait_leaves_the_lease_to_expire_moto() {
    rounds(Place::moto("takeover-signal").await).await;
}

/// Issue 22 §6: nothing to take over is refused (exit 4) with that
/// sentence; nothing is written to the store or the audit log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_of_a_prefix_without_a_lease_is_refused() {
    for place in [Place::local(), Place::moto("takeover-absent").await] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        for then in ["release", "hold", "handover:succ-1"] {
            let mut c = place.command();
            c.args([
                "takeover",
                &place.url(),
                "--yes",
                "--reason",
                "nothing there",
            ])
            .args(["--then", then, "--audit-log"])
            .arg(&log);
            let out = run_with_timeout(c, Duration::from_secs(60));
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(4), "{stdout}{stderr}");
            // The refusal is said on stderr (issue 45 §3).
            assert!(
                stderr.contains("does not exist: there is nothing to take over"),
                "{stdout}{stderr}"
            );
            assert!(matches!(place.look().await, Observed::Absent), "{stdout}");
            assert!(AuditLog::read(&log).unwrap().is_empty(), "nothing audited");
        }
        // The library refuses it too (the console's path).
        let (store, prefix) = place.store();
        let audit = AuditLog::open(&log).unwrap();
        let req = leasectl::takeover::TakeoverRequest {
            prefix: prefix.into(),
            seen: Observed::Absent,
            watched_for: Duration::ZERO,
            reason: "nothing there".into(),
            then: leasectl::takeover::Then::Release,
            force: true,
            ttl_s: 30,
            exclusion: Exclusion::Conditional,
            record_format: leasectl::bucket::RecordFormat::Leasectl,
            target: leasectl::audit::AuditTarget {
                endpoint: None,
                region: None,
                addressing_style: None,
                bucket: None,
                key: place.key(),
                url: place.url(),
            },
        };
        let err = leasectl::takeover::takeover(store, SystemClock::shared(), &audit, req)
            .await
            .unwrap_err();
        assert!(
            matches!(err, leasectl::takeover::TakeoverError::Absent { .. }),
            "{err}"
        );
        assert!(err.is_refusal());
        assert!(AuditLog::read(&log).unwrap().is_empty());
        assert!(matches!(place.look().await, Observed::Absent));
    }
}

/// The console's path: [`leasectl::takeover::takeover_with`] whose stop
/// completes (the console quitting) during the wait ends it the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_ended_by_its_caller_leaves_the_lease_to_expire_too() {
    use leasectl::takeover::{takeover_with, TakeoverError, TakeoverRequest, Then, WaitControl};
    let place = Place::local();
    let holder = live_holder(&place).await;
    let (store, prefix) = place.store();
    let dir = tempfile::tempdir().unwrap();
    let audit = AuditLog::open(dir.path().join("audit.jsonl")).unwrap();
    let told = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let t2 = told.clone();
    let wait = WaitControl {
        notify: Box::new(move |s: &str| t2.lock().unwrap().push(s.to_owned())),
        stop: Box::pin(async {
            tokio::time::sleep(Duration::from_millis(800)).await;
            "the console quitting".to_owned()
        }),
    };
    let req = TakeoverRequest {
        prefix: prefix.into(),
        seen: place.look().await,
        watched_for: Duration::ZERO,
        reason: "console quit test".into(),
        then: Then::Handover("succ-2".into()),
        force: true,
        ttl_s: 6,
        exclusion: Exclusion::Conditional,
        record_format: leasectl::bucket::RecordFormat::Leasectl,
        target: leasectl::audit::AuditTarget {
            endpoint: None,
            region: None,
            addressing_style: None,
            bucket: None,
            key: place.key(),
            url: place.url(),
        },
    };
    let err = takeover_with(store, SystemClock::shared(), &audit, req, wait)
        .await
        .unwrap_err();
    let TakeoverError::Interrupted(text) = &err else {
        panic!("expected Interrupted, got {err}");
    };
    assert!(
        text.starts_with("stopped by the console quitting") && text.contains("not handed over"),
        "{text}"
    );
    assert!(!err.is_refusal());
    let told = told.lock().unwrap().clone();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].starts_with("waiting until "), "{told:?}");
    let entries = AuditLog::read(audit.path()).unwrap();
    assert_eq!(entries.len(), 2);
    let out = &entries[1];
    let left = place.look().await;
    assert_eq!(left.etag(), out.written.as_ref().unwrap().etag.as_deref());
    let r = left.record().unwrap();
    assert_ne!(r.instance_id, holder.record().instance_id);
    assert_ne!(r.instance_id, "succ-2");
    assert!(
        r.renewed_at + chrono::Duration::seconds(r.ttl_s as i64) >= out.writes_safe_from.unwrap()
    );
}

/// SIGKILL cannot be handled: the record a forced takeover writes must then
/// exclude everyone by itself until the replaced holder's fence has closed.
/// With `--ttl 6s` over a 9 s lease (fence: 7.5 s after the PUT), its TTL is
/// raised so that, renewed by nobody, it is fresh until after that fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_killed_during_its_wait_still_excludes_until_the_old_fence() {
    for place in [Place::local(), Place::moto("takeover-kill9").await] {
        let dir = tempfile::tempdir().unwrap();
        let _holder = live_holder(&place).await;
        let log = dir.path().join("audit.jsonl");
        let out = dir.path().join("takeover.out");
        let mut child = spawn_takeover(&place, "release", &log, &out);
        wait_until("the wait's announcement", Duration::from_secs(20), || {
            std::fs::read_to_string(&out)
                .unwrap_or_default()
                .contains("waiting until")
        });
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let entries = AuditLog::read(&log).unwrap();
        assert_eq!(entries.len(), 1, "only the intent: {entries:#?}");
        let intent = &entries[0];
        let written = &intent.written.as_ref().unwrap().record;
        assert_eq!(written.ttl_s, 10, "6/5 of the 7.5 s fence, plus a second");
        let left = place.look().await;
        let r = left.record().expect("our record is left");
        assert_eq!(r.instance_id, written.instance_id);
        let fence_end = intent.time + chrono::Duration::milliseconds(7500);
        let expires = r.renewed_at + chrono::Duration::seconds(r.ttl_s as i64);
        assert!(
            expires >= fence_end,
            "renewed by nobody, it expires at {expires}, before the old fence closes at {fence_end}"
        );
    }
}

/// A signal sent just before, at, or just after the moment the replaced
/// holder's fence closes: either the wait ended early (exit 6, our record
/// left to expire after the fence) or it had ended and the release was done
/// as asked (exit 0, no LEASE) — never anything in between, never silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_at_the_fences_end_either_finishes_or_leaves_the_lease_to_expire() {
    let place = Place::local();
    let dir = tempfile::tempdir().unwrap();
    for (n, delta_ms) in [-40i64, -5, 0, 5, 40].into_iter().enumerate() {
        let _holder = live_holder(&place).await;
        let log = dir.path().join(format!("audit-{n}.jsonl"));
        let out = dir.path().join(format!("takeover-{n}.out"));
        let mut child = spawn_takeover(&place, "release", &log, &out);
        wait_until("the wait's announcement", Duration::from_secs(20), || {
            std::fs::read_to_string(&out)
                .unwrap_or_default()
                .contains("waiting until")
        });
        let text = std::fs::read_to_string(&out).unwrap();
        let until: chrono::DateTime<chrono::Utc> = text
            .split("waiting until ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|t| t.parse().ok())
            .expect("the announced time parses");
        let at = until + chrono::Duration::milliseconds(delta_ms);
        if let Ok(d) = (at - chrono::Utc::now()).to_std() {
            std::thread::sleep(d);
        }
        // SAFETY: kill(2) on the child this test spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let code = exit_code(&mut child, Duration::from_secs(15));
        let stdout = std::fs::read_to_string(&out).unwrap_or_default();
        let entries = AuditLog::read(&log).unwrap();
        assert_eq!(entries.len(), 2, "{stdout}");
        let outcome = entries[1].outcome.clone().unwrap();
        match code {
            Some(0) => {
                assert!(outcome.starts_with("taken, then released"), "{outcome}");
                assert!(
                    matches!(place.look().await, Observed::Present { record: Ok(ref r), .. } if r.is_released()),
                    "{stdout}"
                );
            }
            Some(6) => {
                assert!(outcome.starts_with("stopped by SIGTERM"), "{outcome}");
                let r = place
                    .look()
                    .await
                    .record()
                    .cloned()
                    .expect("left to expire");
                let expires = r.renewed_at + chrono::Duration::seconds(r.ttl_s as i64);
                assert!(expires >= entries[1].writes_safe_from.unwrap());
            }
            other => panic!("exit {other:?} at {delta_ms} ms: {stdout}"),
        }
    }
}

/// Issue 44 item 5: `takeover --then hold` holds the lease until a signal;
/// any signal whose default action would end it (SIGUSR1, a real-time
/// signal, SIGXCPU …) ends the hold as SIGTERM does: the lease released,
/// exit 0. On main SIGUSR1 ended it with 138 and the lease held a TTL.
#[test]
fn a_held_takeover_ends_cleanly_on_any_signal_that_would_end_it() {
    for sig in [
        libc::SIGUSR1,
        libc::SIGALRM,
        libc::SIGRTMIN() + 1,
        libc::SIGXCPU,
    ] {
        let name = leasectl::supervise::signal_name(sig);
        let place = Place::local();
        let Place::Local(dir) = &place else {
            unreachable!()
        };
        let lease = dir.path().join("db/LEASE");
        let t = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
        std::fs::write(
            &lease,
            format!(
                r#"{{"instance_id":"dead","acquired_at":"{t}","renewed_at":"{t}","ttl_s":30}}"#
            ),
        )
        .unwrap();
        let out = dir.path().join("takeover.out");
        let mut child = place
            .command()
            .args(["takeover", &place.url(), "--yes", "--ttl", "30s"])
            .args(["--reason", "signal test", "--then", "hold", "--audit-log"])
            .arg(dir.path().join("audit.jsonl"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(out.with_extension("stderr")).unwrap())
            .spawn()
            .unwrap();
        wait_until("the hold", Duration::from_secs(20), || {
            std::fs::read_to_string(&out)
                .unwrap_or_default()
                .contains("holding the lease")
        });
        // SAFETY: kill(2) on the child this test spawned.
        unsafe { libc::kill(child.id() as i32, sig) };
        let code = exit_code(&mut child, Duration::from_secs(15));
        let said = format!(
            "{}{}",
            std::fs::read_to_string(&out).unwrap_or_default(),
            std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default()
        );
        assert_eq!(code, Some(0), "{name}: {said}");
        assert!(released_file(&lease), "{name}: not released: {said}");
    }
}
