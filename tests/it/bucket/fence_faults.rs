//! The fence under faults, end to end: real `leasectl bucket hold` processes
//! on moto, fault-injecting proxies in front of it, real signals (SIGSTOP,
//! SIGCONT), real clocks shifted with libfaketime. Each command under a lease
//! writes one timestamp per line; the checks read those lines.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::hold::*;
use crate::common::proxy::{Mode, Proxy};
use crate::common::*;

async fn bucket(test: &str) -> (u16, String) {
    let server = moto(Moto::Conditional);
    let b = bucket_name(test);
    create_bucket(&sdk_client(&server.endpoint()), &b).await;
    (server.port, b)
}

/// Returns right after the next PUT passes `proxy` (a renewal), or after `limit`.
async fn next_put(proxy: &Proxy, limit: Duration) {
    let puts = || proxy.counts().get("PUT").copied().unwrap_or(0);
    let (before, t) = (puts(), Instant::now());
    while puts() == before && t.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs `run(i)` for `i` in `0..batches * size`, `size` at a time: the
/// failures they describe.
async fn in_batches<F, Fut>(batches: usize, size: usize, run: F) -> Vec<String>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Option<String>> + Send + 'static,
{
    let mut failures = Vec::new();
    for batch in 0..batches {
        let tasks: Vec<_> = (0..size)
            .map(|j| tokio::spawn(run(batch * size + j)))
            .collect();
        for t in tasks {
            if let Some(f) = t.await.unwrap() {
                failures.push(f);
            }
        }
    }
    failures
}

/// `leasectl --endpoint-url ENDPOINT --path-style takeover URL ARGS
/// --audit-log AUDIT`, not started.
fn takeover(endpoint: &str, url: &str, args: &[&str], audit: &Path) -> std::process::Command {
    let mut c = bin();
    c.args(["--endpoint-url", endpoint, "--path-style", "takeover", url])
        .args(args)
        .arg("--audit-log")
        .arg(audit);
    c
}

/// `c` started with no stdin, its stdout and stderr kept.
fn spawn_piped(mut c: std::process::Command) -> std::process::Child {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Reads `key` until its body passes `done`; fails the test naming `what`
/// after `limit`.
async fn wait_for_body(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    limit: Duration,
    what: &str,
    done: impl Fn(&str) -> bool,
) {
    let t = Instant::now();
    loop {
        let got = client.get_object().bucket(bucket).key(key).send().await;
        if let Ok(o) = got {
            let body = o.body.collect().await.unwrap().into_bytes();
            if done(&String::from_utf8_lossy(&body)) {
                return;
            }
        }
        assert!(t.elapsed() < limit, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `leasectl --json --no-pod URL` through `endpoint` with `env`: the output
/// and its JSON document.
fn json_snapshot(endpoint: &str, url: &str, env: &[(&str, String)]) -> (Output, serde_json::Value) {
    let mut c = bin();
    c.envs(env.iter().map(|(k, v)| (*k, v.as_str()))).args([
        "--endpoint-url",
        endpoint,
        "--path-style",
        "--json",
        "--no-pod",
        url,
    ]);
    let out = run_with_timeout(c, Duration::from_secs(30));
    let doc = serde_json::from_slice(&out.stdout).unwrap();
    (out, doc)
}

/// Run `i`'s failure when its takeover did not exit 0 saying `said` in
/// `text`.
fn takeover_failure(i: usize, out: &Output, text: &str, said: &str) -> Option<String> {
    (out.status.code() != Some(0) || !text.contains(said))
        .then(|| format!("run {i}: takeover {:?}: {text}", out.status.code()))
}

/// Run `i`'s failure when the writer logging to `old` wrote at or after the
/// first line of the one logging to `new`.
fn two_writers(i: usize, old: &Path, new: &Path) -> Option<String> {
    let (h_last, c_first) = (last_stamp(old), first_stamp(new));
    (h_last >= c_first).then(|| format!("run {i}: two writers for {:.3} s", h_last - c_first))
}

/// A forced takeover's arguments (before `--audit-log`).
const FORCED: &[&str] = &["--force", "--yes", "--reason", "test"];

#[derive(Clone, Copy, Debug)]
enum Fault {
    Fail503,
    Fail403,
    Hang,
}

/// The TTL of the deadlock scenario's holds: fence 4 s, grace capped at a
/// sixth, 1 s. (It was 3 s: under the load of the whole suite, ten holds at
/// once, moto's write round trips reached a 90th percentile of 223 ms, and
/// the confirmation's wait, six times that, no longer fitted a 2 s fence:
/// the acquire was refused, rightly, with "Use a TTL of at least 4 s", and
/// the run had no command to stop.)
const FENCE_RUN_TTL_S: f64 = 6.0;

/// One run of the deadlock scenario: hold with [`FENCE_RUN_TTL_S`], then
/// every renewal fails or hangs. Returns a failure description, or None.
async fn fence_closes_run(
    i: usize,
    moto_port: u16,
    bucket: &str,
    fault: Fault,
    ignore_term: bool,
) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(moto_port, Mode::Pass).await;
    let prefix = format!("run{i}/");
    let site = HoldSite::new(
        dir.path(),
        &proxy.endpoint(),
        &format!("s3://{bucket}/{prefix}"),
    );
    let ttl = format!("{FENCE_RUN_TTL_S}s");
    let (mut hold, log) = site.writer("hold", &["--ttl", &ttl, "--grace", "2s"], ignore_term, None);
    wait_for_lines(&log, 1, Duration::from_secs(20)).await;
    // Let at least one renewal through (every third of the TTL).
    next_put(&proxy, Duration::from_secs(5)).await;
    let fault_at = now_s();
    let key = format!("/{prefix}LEASE");
    match fault {
        Fault::Fail503 => proxy.fail_requests("PUT", &key, 503),
        Fault::Fail403 => proxy.fail_requests("PUT", &key, 403),
        Fault::Hang => proxy.hang_requests("PUT", &key),
    }
    let code = hold.exit_code(Duration::from_secs(15)).await;
    let err = hold.stderr();
    let last = last_stamp(&log);
    // The last successful renewal began before the fault: the fence closes
    // within two thirds of the TTL of it, SIGKILL follows within the grace
    // (capped at a sixth of the TTL), plus 1 s.
    let bound = fault_at + FENCE_RUN_TTL_S * 2.0 / 3.0 + FENCE_RUN_TTL_S / 6.0 + 1.0;
    let mut problems = Vec::new();
    if code != Some(5) {
        problems.push(format!("exit {code:?} (expected 5)"));
    }
    if last > bound {
        problems.push(format!(
            "the command wrote {:.2} s after the fault (bound {:.2} s)",
            last - fault_at,
            bound - fault_at
        ));
    }
    if !err.contains("fence closed") {
        problems.push("no 'fence closed' message".into());
    }
    if ignore_term && !err.contains("SIGKILL") {
        problems.push("a command ignoring SIGTERM was not SIGKILLed".into());
    }
    // Released, or (its command stopped after a grace longer than a twelfth
    // of the TTL past the deadline, when a contender may have taken the
    // lease) deliberately left to expire.
    if !(err.contains("lease released")
        || err.contains("release failed")
        || err.contains("lease not released: its fence ran out"))
    {
        problems.push("neither released nor left to expire".into());
    }
    // Nothing writes any more.
    let n = stamps(&log).len();
    tokio::time::sleep(Duration::from_millis(400)).await;
    if stamps(&log).len() != n {
        problems.push("the command still writes after leasectl exited".into());
    }
    (!problems.is_empty()).then(|| {
        format!(
            "run {i} {fault:?} ignore_term={ignore_term}: {} -- stderr:\n{err}",
            problems.join("; ")
        )
    })
}

/// Issue 11 §1: the fence closing never deadlocks; SIGTERM, SIGKILL within
/// the grace + 1 s, exit 5 and a release attempt, 50 times, 10 at a time.
#[tokio::test(flavor = "multi_thread")]
async fn fence_closing_stops_the_command_every_time() {
    let (port, b) = bucket("fence-closes").await;
    let faults = [Fault::Fail503, Fault::Fail403, Fault::Hang];
    let failures = in_batches(5, 10, |i| {
        let b = b.clone();
        async move { fence_closes_run(i, port, &b, faults[i % 3], i % 2 == 0).await }
    })
    .await;
    assert!(
        failures.is_empty(),
        "{} of 50 runs failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Holder and contender on their own proxies; the holder's process group is
/// stopped right after a renewal for `stop` while its next renewal hangs and
/// a contender waits. Returns a failure description, or None.
async fn paused_holder_run(
    i: usize,
    moto_port: u16,
    bucket: &str,
    stop: Duration,
) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let holder_proxy = Proxy::start(moto_port, Mode::Pass).await;
    let contender_proxy = Proxy::start(moto_port, Mode::Pass).await;
    let url = format!("s3://{bucket}/paused{i}/");
    let holder_site = HoldSite::new(dir.path(), &holder_proxy.endpoint(), &url);
    let (mut holder, hlog) = holder_site.writer("holder", &["--ttl", "9s"], false, None);
    wait_for_lines(&hlog, 1, Duration::from_secs(20)).await;
    next_put(&holder_proxy, Duration::from_secs(8)).await;
    // Right after a renewal: stop the holder, make its next renewal hang.
    signal_group(holder.pgid(), libc::SIGSTOP);
    holder_proxy.hang_requests("PUT", "/LEASE");
    let contender_site = HoldSite::new(dir.path(), &contender_proxy.endpoint(), &url);
    let args = ["--ttl", "9s", "--wait", "40s"];
    let (mut contender, clog) = contender_site.writer("contender", &args, false, Some(20));
    tokio::time::sleep(stop).await;
    let resumed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    signal_group(holder.pgid(), libc::SIGCONT);
    let hcode = holder.exit_code(Duration::from_secs(30)).await;
    let ccode = contender.exit_code(Duration::from_secs(60)).await;
    let h = stamps(&hlog);
    let c = stamps(&clog);
    let mut problems = Vec::new();
    if hcode != Some(5) {
        problems.push(format!("holder exit {hcode:?} (expected 5)"));
    }
    if ccode != Some(0) || c.is_empty() {
        problems.push(format!("contender exit {ccode:?} with {} lines", c.len()));
    }
    // The holder's command resumes with leasectl (docs/bucket-leases.md,
    // "What the fence guarantees, and where it stops"): a line it stamps in
    // the instant between the resume and the SIGKILL is that documented
    // limit, seen under CI's load. Any other line after the contender's
    // first — before the resume, or later than one watchdog tick after it —
    // is two writers.
    let c_first = first_stamp(&clog);
    let at_resume = |t: f64| t >= resumed && t - resumed <= RESUME_INSTANT.as_secs_f64();
    let overlap: Vec<f64> = h.iter().copied().filter(|&t| t >= c_first).collect();
    if overlap.iter().any(|&t| !at_resume(t)) {
        problems.push(format!(
            "two writers: the holder wrote {} line(s) after the contender's first, up to {:.3} s after it, not only as it resumed (at {:.3} s)",
            overlap.len(),
            last_stamp(&hlog) - c_first,
            resumed - c_first
        ));
    }
    (!problems.is_empty()).then(|| {
        format!(
            "run {i} (stopped {stop:?}): {}\n-- holder:\n{}\n-- contender:\n{}",
            problems.join("; "),
            holder.stderr(),
            contender.stderr()
        )
    })
}

/// How long after a resume a paused holder's command may still stamp a
/// line: the watchdog's tick (`bucket::fence::WATCHDOG_TICK`, 100 ms).
const RESUME_INSTANT: Duration = Duration::from_millis(100);

/// Issue 11 §2 and §3: a holder paused right after a renewal, whose next
/// renewal hangs, stops writing at its deadline however long the pause: 7 s
/// (past its 6 s fence, before the 9 s TTL) and 15 s (past the TTL: the
/// contender holds the lease when it resumes). No line of the holder's
/// command may follow the contender's first, but for the documented limit:
/// the command, stopped with leasectl, runs in the instant between their
/// resume and leasectl's SIGKILL (CI: one line, in the same millisecond as
/// the SIGKILL, 3.2 s after the contender's first).
#[tokio::test(flavor = "multi_thread")]
async fn a_paused_holder_with_a_renewal_in_flight_never_overlaps_its_successor() {
    let (port, b) = bucket("paused-holder").await;
    let failures = in_batches(2, 4, |i| {
        let b = b.clone();
        let stop = if i % 2 == 0 { 7 } else { 15 };
        async move { paused_holder_run(i, port, &b, Duration::from_secs(stop)).await }
    })
    .await;
    assert!(
        failures.is_empty(),
        "{} of 8 runs failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Issue 11 §3: the holder's wall clock is stepped (±2 TTL) while it holds:
/// its fence closes at once, the command is stopped, exit 5.
#[tokio::test(flavor = "multi_thread")]
async fn a_stepped_wall_clock_closes_the_holders_fence() {
    let (port, b) = bucket("clock-step").await;
    for (i, step) in ["-12", "+12", "-12", "+12"].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let offset = dir.path().join("offset");
        std::fs::write(&offset, "+0\n").unwrap();
        let endpoint = format!("http://127.0.0.1:{port}");
        let site = HoldSite::new(dir.path(), &endpoint, &format!("s3://{b}/step{i}/"));
        let args = ["--ttl", "6s", "--grace", "5s"];
        let (mut hold, log) = site.writer_env("hold", &args, true, None, &faketime_env(&offset));
        wait_for_lines(&log, 3, Duration::from_secs(20)).await;
        std::fs::write(&offset, format!("{step}\n")).unwrap();
        // Clock readings by the test (not faked) bound the command's last line;
        // its own lines are stamped by `date`, faked too: count lines instead.
        let t = Instant::now();
        let code = hold.exit_code(Duration::from_secs(15)).await;
        let err = hold.stderr();
        assert_eq!(code, Some(5), "step {step}: {err}");
        assert!(err.contains("wall clock was stepped"), "step {step}: {err}");
        // Closed within a watchdog tick; SIGKILL within the 1 s grace cap.
        assert!(
            t.elapsed() < Duration::from_millis(2500),
            "step {step}: stopped after {:?}",
            t.elapsed()
        );
    }
}

/// Issue 11 §4: a contender whose clock runs 120 s ahead of the service
/// finds a live lease "stale" by its clock, and is refused, naming the
/// offset and NTP; `takeover` likewise.
#[tokio::test(flavor = "multi_thread")]
async fn a_reader_clock_far_ahead_is_refused() {
    let (port, b) = bucket("reader-clock").await;
    let endpoint = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let offset = dir.path().join("offset");
    std::fs::write(&offset, "+120\n").unwrap();
    let url = format!("s3://{b}/db/");
    let site = HoldSite::new(dir.path(), &endpoint, &url);
    let (mut holder, hlog) = site.writer("holder", &["--ttl", "30s"], false, None);
    wait_for_lines(&hlog, 1, Duration::from_secs(20)).await;
    let fake = faketime_env(&offset);
    let (mut contender, clog) =
        site.writer_env("contender", &["--ttl", "30s"], false, Some(5), &fake);
    let code = contender.exit_code(Duration::from_secs(20)).await;
    let err = contender.stderr();
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("ahead of the storage service") && err.contains("NTP"),
        "{err}"
    );
    assert!(stamps(&clog).is_empty(), "the contender's command ran");
    // The console's takeover path, as a command.
    let audit = dir.path().join("audit.jsonl");
    let mut c = takeover(
        &endpoint,
        &url,
        &["--reason", "clock test", "--yes"],
        &audit,
    );
    c.envs(faketime_env(&offset));
    let out = run_with_timeout(c, Duration::from_secs(30));
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.contains("ahead of the storage service"), "{text}");
    // The snapshot shows the offset, and does not call the live lease stale.
    let (out, doc) = json_snapshot(&endpoint, &url, &faketime_env(&offset));
    let off = doc["reader_clock"]["server_offset_s"].as_f64().unwrap();
    assert!((off + 120.0).abs() < 2.0, "{doc:#}");
    let row = &doc["targets"][0]["prefixes"][0];
    assert!(
        row["problem"]
            .as_str()
            .unwrap()
            .contains("its age is unknown"),
        "{doc:#}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "unknown is not healthy: {doc:#}"
    );
    // The same snapshot from a correct clock: offset near zero, fresh, exit 0.
    let (out, doc) = json_snapshot(&endpoint, &url, &[]);
    assert!(
        doc["reader_clock"]["server_offset_s"]
            .as_f64()
            .unwrap()
            .abs()
            < 1.5,
        "{doc:#}"
    );
    assert_eq!(doc["targets"][0]["prefixes"][0]["state"], "fresh");
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    // The holder was never disturbed.
    assert!(
        holder.child.try_wait().unwrap().is_none(),
        "{}",
        holder.stderr()
    );
    let n = stamps(&hlog).len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(stamps(&hlog).len() > n, "the holder still writes");
}

/// Issue 11 §5: `takeover --force --then handover:ID` against a live
/// `bucket hold`: the successor adopting the hand-over writes only after the
/// old holder's command has stopped.
#[tokio::test(flavor = "multi_thread")]
async fn a_forced_handover_waits_for_the_old_holders_fence() {
    let (port, b) = bucket("forced-handover").await;
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut failures = Vec::new();
    for i in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let site = HoldSite::new(dir.path(), &endpoint, &format!("s3://{b}/forced{i}/"));
        let args = ["--ttl", "6s", "--grace", "1s"];
        let (mut holder, hlog) = site.writer("holder", &args, i % 2 == 0, None);
        wait_for_lines(&hlog, 3, Duration::from_secs(20)).await;
        let successor = format!("successor-{i}");
        let args = ["--ttl", "6s", "--wait", "30s", "--instance-id", &successor];
        let (mut succ, slog) = site.writer("successor", &args, false, Some(10));
        let audit = dir.path().join("audit.jsonl");
        let mut c = takeover(&endpoint, &site.url, FORCED, &audit);
        c.arg("--then").arg(format!("handover:{successor}"));
        let out = run_with_timeout(c, Duration::from_secs(60));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let hcode = holder.exit_code(Duration::from_secs(30)).await;
        let scode = succ.exit_code(Duration::from_secs(60)).await;
        let s = stamps(&slog);
        let said = "writes under the new lease are safe from";
        failures.extend(takeover_failure(i, &out, &text, said));
        if hcode != Some(5) || scode != Some(0) || s.is_empty() {
            failures.push(format!(
                "run {i}: holder {hcode:?}, successor {scode:?} ({} lines)\n{}",
                s.len(),
                succ.stderr()
            ));
        }
        failures.extend(two_writers(i, &hlog, &slog));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Holds `s3://{bucket}/{name}/` (TTL 3 s) through a proxy that, once the
/// command runs, answers every renewal with `status`; returns leasectl's
/// stderr after it exited 5.
async fn renewals_answered(port: u16, bucket: &str, dir: &Path, name: &str, status: u16) -> String {
    let proxy = Proxy::start(port, Mode::Pass).await;
    let site = HoldSite::new(dir, &proxy.endpoint(), &format!("s3://{bucket}/{name}/"));
    // 6 s: the first renewal (at 2 s) has 2 s before the fence closes to
    // get its answer, the SDK's retry and the read-back, even on a loaded machine.
    let (mut hold, log) = site.writer(name, &["--ttl", "6s"], false, None);
    wait_for_lines(&log, 1, Duration::from_secs(20)).await;
    proxy.fail_requests("PUT", &format!("/{name}/LEASE"), status);
    assert_eq!(
        hold.exit_code(Duration::from_secs(15)).await,
        Some(5),
        "{}",
        hold.stderr()
    );
    hold.stderr()
}

/// Issue 11 §6: each cause of a refused write gets its own sentence.
#[tokio::test(flavor = "multi_thread")]
async fn refused_writes_are_diagnosed_by_cause() {
    let (port, b) = bucket("diagnoses").await;
    // A service that refuses If-Match with the current ETag (as Ceph RGW 16
    // does with quoted ETags): renewals are refused, the fence closes.
    let dir = tempfile::tempdir().unwrap();
    let err = renewals_answered(port, &b, dir.path(), "ifmatch", 412).await;
    assert!(
        err.contains("refused If-Match with the current ETag"),
        "{err}"
    );
    assert!(
        !err.contains("answer was lost") && !err.contains("kept changing"),
        "{err}"
    );
    // 409 ConditionalRequestConflict on every write.
    let err = renewals_answered(port, &b, dir.path(), "conflict", 409).await;
    assert!(err.contains("409 ConditionalRequestConflict"), "{err}");

    // A create refused on a key the service reports absent.
    let proxy = Proxy::start(port, Mode::Pass).await;
    proxy.fail_requests("PUT", "/create/LEASE", 412);
    let site = HoldSite::new(dir.path(), &proxy.endpoint(), &format!("s3://{b}/create/"));
    let (mut hold, log) = site.writer("create", &["--ttl", "3s"], false, Some(1));
    assert_eq!(hold.exit_code(Duration::from_secs(15)).await, Some(4));
    let err = hold.stderr();
    assert!(
        err.contains("refused to create") && err.contains("reports no object there"),
        "{err}"
    );
    assert!(stamps(&log).is_empty());
}

/// Issue 11 §6: `takeover --then hold` that loses its lease exits 5 and
/// records the loss in the audit log.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_takeover_that_loses_its_lease_exits_5_and_audits_it() {
    let (port, b) = bucket("held-lost").await;
    let endpoint = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    // A holder that died ten minutes ago: there is something to take over.
    let client = sdk_client(&endpoint);
    let dead = record("dead-holder", 600, 3);
    put_raw(&client, &b, "db/LEASE", dead.as_bytes()).await;
    let url = format!("s3://{b}/db/");
    let mut c = takeover(&endpoint, &url, &["--yes", "--reason", "hold test"], &audit);
    c.args(["--then", "hold", "--ttl", "3s"]);
    let child = spawn_piped(c);
    // Wait until it holds, then overwrite the lease as an intruder would.
    let ours = |body: &str| !body.contains("dead-holder");
    let key = "db/LEASE";
    wait_for_body(
        &client,
        &b,
        key,
        Duration::from_secs(20),
        "never held",
        ours,
    )
    .await;
    // Its record is there; it holds once its confirmation (a read-back once
    // every write that raced it has landed, 50 ms or so on moto) found it.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let intruder = record("intruder", 0, 3);
    put_raw(&client, &b, "db/LEASE", intruder.as_bytes()).await;
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    // Why it exits 5 is said on stderr (issue 45 §3).
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the held lease ended: the lease was lost"),
        "{text}"
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(lines[2]["phase"], "outcome");
    assert_eq!(lines[2]["id"], lines[0]["id"]);
    assert!(
        lines[2]["outcome"]
            .as_str()
            .unwrap()
            .contains("held lease ended"),
        "{lines:#?}"
    );
}

/// Issue 12: a 500 to a conditional renewal is ambiguous: the record is read
/// back; ours unchanged → retried, reported as the 500 it was (not as 409).
#[tokio::test(flavor = "multi_thread")]
async fn renewals_answered_500_are_read_back_and_reported_as_such() {
    let (port, b) = bucket("renew-500").await;
    let dir = tempfile::tempdir().unwrap();
    let err = renewals_answered(port, &b, dir.path(), "e500", 500).await;
    // Each 500 is read back (ours unchanged: retried); the SDK may also retry
    // it once itself, or time out under load, but never calls it a 409 or a loss.
    assert!(
        err.contains("renewal answered 500; read back: ours is still there unchanged"),
        "{err}"
    );
    assert!(!err.contains("409 ConditionalRequestConflict"), "{err}");
    assert!(!err.contains("lease lost"), "{err}");
}

/// Issue 48: `takeover --force --then hold` of a live lease, ended (SIGTERM)
/// before writes under it are safe: its lease is not marked released — a
/// released record let the next holder in at once while the replaced
/// holder's command still wrote (found by the simulator: the takeover's
/// fence closed on its clock offset and it released). It is left to expire:
/// a waiting contender writes only after the replaced holder has stopped.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_forced_takeover_ended_early_is_never_released() {
    let (port, b) = bucket("forced-hold-early").await;
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut failures = Vec::new();
    for i in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let site = HoldSite::new(dir.path(), &endpoint, &format!("s3://{b}/early{i}/"));
        // TTL 12 s: renewed every 4 s, so it learns of the takeover up to 4 s
        // late; its command is stopped within the 2 s grace after that.
        let args = ["--ttl", "12s", "--grace", "2s"];
        let (mut holder, hlog) = site.writer("holder", &args, true, None);
        wait_for_lines(&hlog, 3, Duration::from_secs(20)).await;
        let mut c = takeover(
            &endpoint,
            &site.url,
            FORCED,
            &dir.path().join("audit.jsonl"),
        );
        c.args(["--then", "hold", "--ttl", "6s"]);
        let taker = spawn_piped(c);
        // Holding once its record is at the key; then a contender waits.
        let client = sdk_client(&endpoint);
        let key = format!("early{i}/LEASE");
        let taken = |body: &str| !body.contains(r#""ttl_s":12"#);
        wait_for_body(
            &client,
            &b,
            &key,
            Duration::from_secs(30),
            "never taken over",
            taken,
        )
        .await;
        let args = ["--ttl", "6s", "--wait", "60s"];
        let (mut contender, clog) = site.writer("contender", &args, false, Some(5));
        tokio::time::sleep(Duration::from_millis(300)).await;
        // SAFETY: kill(2) on the child this test spawned (not yet reaped).
        unsafe { libc::kill(taker.id() as i32, libc::SIGTERM) };
        let out = tokio::task::spawn_blocking(move || taker.wait_with_output().unwrap())
            .await
            .unwrap();
        let text = output_text(&out);
        let hcode = holder.exit_code(Duration::from_secs(30)).await;
        let ccode = contender.exit_code(Duration::from_secs(60)).await;
        failures.extend(takeover_failure(i, &out, &text, "not marked released"));
        if hcode != Some(5) || ccode != Some(0) {
            failures.push(format!(
                "run {i}: holder {hcode:?}, contender {ccode:?}\n{}",
                contender.stderr()
            ));
        }
        failures.extend(two_writers(i, &hlog, &clog));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
