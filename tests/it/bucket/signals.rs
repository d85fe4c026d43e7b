//! Issue 44 item 5: every signal whose default action would end `bucket
//! hold` has a fate that leaves no lease held (docs/bucket-hold.md, "Signals";
//! `supervise::signals`). A real `bucket hold` against moto per signal, its
//! command a Python script that says which signal it got: a forwarded signal
//! reaches the command, whose exit code is leasectl's, and the lease is
//! released; SIGXCPU and SIGXFSZ stop the command (it gets SIGTERM) and
//! release the lease, leasectl exiting 128 + that signal; SIGPIPE is
//! ignored (the hold goes on). On main, SIGUSR1 ended leasectl with 138 and
//! left the lease held for a TTL; a command killed by a real-time signal hung
//! the contained hold for ever (its init lost the status).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::cli::bin;
use crate::common::{self, moto_bucket};
use leasectl::store::ObjectRead;

use crate::common::hold::SIGNAL_SCRIPT as SCRIPT;

/// A `bucket hold` running [`SCRIPT`], its stdout (the command's) read line
/// by line.
struct Held {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    /// leasectl's stderr.
    log: tempfile::NamedTempFile,
}

impl Held {
    fn start(endpoint: &str, url: &str, extra: &[&str], handled: &[i32]) -> Self {
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut c: Command = super::hold_on(endpoint, url);
        c.args(["--ttl", "20s"])
            .args(extra)
            .args(["--", "python3", "-c", SCRIPT])
            .args(handled.iter().map(|n| n.to_string()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log.reopen().unwrap());
        let mut child = c.spawn().expect("spawn leasectl");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let held = Self {
            child,
            lines: rx,
            log,
        };
        let l = held.line(Duration::from_secs(60));
        assert_eq!(l.as_deref(), Some("ready"), "{}", held.stderr());
        held
    }

    fn line(&self, limit: Duration) -> Option<String> {
        self.lines.recv_timeout(limit).ok()
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) of leasectl alone, a child of this test.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Waits for leasectl's exit (killing it after `limit`): its code and stderr.
    fn finish(&mut self, limit: Duration) -> (Option<i32>, String) {
        let t = Instant::now();
        let code = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s.code();
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (code, self.stderr())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What a signal sent to `bucket hold` must do.
#[derive(Clone, Copy, Debug)]
enum Fate {
    /// The command gets it; leasectl exits with the command's code.
    Forwarded,
    /// The command gets SIGTERM; leasectl exits 128 + the signal.
    Ends,
}

/// One hold on `prefix`, `sig` sent once the command is ready; asserts the
/// fate and that the lease was released. Returns a problem, if any.
async fn one(
    endpoint: &str,
    store: &Arc<leasectl::store::s3::S3Store>,
    bucket_url: &str,
    prefix: &str,
    extra: Vec<&'static str>,
    sig: i32,
    fate: Fate,
) -> Option<String> {
    let name = leasectl::supervise::signal_name(sig);
    let (endpoint, url) = (endpoint.to_owned(), format!("{bucket_url}{prefix}"));
    let (got, code, err) = tokio::task::spawn_blocking(move || {
        let handled = match fate {
            Fate::Forwarded => vec![sig, libc::SIGTERM],
            Fate::Ends => vec![libc::SIGTERM],
        };
        let mut held = Held::start(&endpoint, &url, &extra, &handled);
        held.signal(sig);
        let got = held.line(Duration::from_secs(30));
        let (code, err) = held.finish(Duration::from_secs(30));
        (got, code, err)
    })
    .await
    .unwrap();
    let (want_got, want_code) = match fate {
        Fate::Forwarded => (sig, 3),
        Fate::Ends => (libc::SIGTERM, 128 + sig),
    };
    if got.as_deref() != Some(&format!("got {want_got}")) {
        return Some(format!(
            "{name}: the command said {got:?}, not got {want_got}\n{err}"
        ));
    }
    if code != Some(want_code) {
        return Some(format!("{name}: exit {code:?}, not {want_code}\n{err}"));
    }
    let key = format!("{prefix}LEASE");
    if common::released_record(store.as_ref() as &dyn ObjectRead, &key)
        .await
        .is_none()
    {
        return Some(format!("{name}: the lease was not released\n{err}"));
    }
    None
}

/// Every signal forwarded or ending the hold, each on a hold of its own
/// (contained: through the PID namespace's shim and init), a few at once;
/// a few again without containment (straight to the command).
#[tokio::test(flavor = "multi_thread")]
async fn every_signal_that_would_end_a_hold_is_forwarded_or_ends_it_cleanly() {
    let (m, _client, bucket) = moto_bucket("hold-signals").await;
    let store = common::s3_store(&m.endpoint(), &bucket);
    let bucket_url = format!("s3://{bucket}/");
    let mut cases: Vec<(i32, Fate, Vec<&'static str>)> = Vec::new();
    for s in leasectl::supervise::forwarded() {
        cases.push((s, Fate::Forwarded, vec![]));
    }
    for s in leasectl::supervise::ENDING {
        cases.push((s, Fate::Ends, vec![]));
    }
    for s in [libc::SIGUSR1, libc::SIGRTMIN() + 1, libc::SIGXCPU] {
        let fate = if s == libc::SIGXCPU {
            Fate::Ends
        } else {
            Fate::Forwarded
        };
        cases.push((s, fate, vec!["--containment", "off"]));
    }
    let mut problems = Vec::new();
    for (i, batch) in cases.chunks(6).enumerate() {
        let runs = batch.iter().enumerate().map(|(j, (sig, fate, extra))| {
            let prefix = format!("p{i}-{j}/");
            let (endpoint, store, bucket_url) = (m.endpoint(), store.clone(), bucket_url.clone());
            let (sig, fate, extra) = (*sig, *fate, extra.clone());
            async move { one(&endpoint, &store, &bucket_url, &prefix, extra, sig, fate).await }
        });
        problems.extend(futures::future::join_all(runs).await.into_iter().flatten());
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// SIGPIPE is ignored: the hold goes on (the lease renewed, the command
/// running), and a SIGTERM afterwards ends it as usual.
#[tokio::test(flavor = "multi_thread")]
async fn sigpipe_is_ignored_and_the_hold_goes_on() {
    let (m, _client, bucket) = moto_bucket("hold-sigpipe").await;
    let store = common::s3_store(&m.endpoint(), &bucket);
    let url = format!("s3://{bucket}/db/");
    let endpoint = m.endpoint();
    let (after_pipe, got, code, err) = tokio::task::spawn_blocking(move || {
        let mut held = Held::start(&endpoint, &url, &[], &[libc::SIGPIPE, libc::SIGTERM]);
        held.signal(libc::SIGPIPE);
        let after_pipe = held.line(Duration::from_secs(2));
        held.signal(libc::SIGTERM);
        let got = held.line(Duration::from_secs(30));
        let (code, err) = held.finish(Duration::from_secs(30));
        (after_pipe, got, code, err)
    })
    .await
    .unwrap();
    assert_eq!(after_pipe, None, "SIGPIPE reached the command: {err}");
    assert_eq!(got.as_deref(), Some("got 15"), "{err}");
    assert_eq!(code, Some(3), "{err}");
    assert!(
        common::released_record(store.as_ref() as &dyn ObjectRead, "db/LEASE")
            .await
            .is_some(),
        "{err}"
    );
}

/// A command killed by a real-time signal: its status is leasectl's (128 +
/// the signal), contained or not, and the lease is released (on main the
/// contained hold never ended: the namespace's init lost the status).
#[tokio::test(flavor = "multi_thread")]
async fn a_command_killed_by_a_real_time_signal_ends_the_hold() {
    let (m, _client, bucket) = moto_bucket("hold-rt-death").await;
    let store = common::s3_store(&m.endpoint(), &bucket);
    let sig = libc::SIGRTMIN() + 2;
    for (prefix, extra) in [
        ("contained/", vec![]),
        ("plain/", vec!["--containment", "off"]),
    ] {
        let mut c = super::hold_on(&m.endpoint(), &format!("s3://{bucket}/{prefix}"));
        c.args(["--ttl", "20s"])
            .args(&extra)
            .args(["--", "sh", "-c", &format!("kill -{sig} $$")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let out = tokio::task::spawn_blocking(move || {
            common::run_with_timeout(c, Duration::from_secs(60))
        })
        .await
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(128 + sig), "{prefix}: {err}");
        let key = format!("{prefix}LEASE");
        assert!(
            common::released_record(store.as_ref() as &dyn ObjectRead, &key)
                .await
                .is_some(),
            "{prefix}: {err}"
        );
    }
}

/// A signal sent the moment the command exists — before it could say it is
/// ready — still has its fate: passed on to the command, leasectl exiting
/// with the command's status and the lease released. The handlers were
/// installed after the command was spawned: a signal in between took its
/// default action and ended leasectl with the lease held (seen once in CI as
/// "the command said None" for SIGRTMIN+28). 30 trials, each signalling
/// leasectl as soon as `/proc` lists its child.
#[test]
fn a_signal_as_the_command_starts_is_passed_on() {
    let dir = tempfile::tempdir().unwrap();
    let url = common::file_url(dir.path());
    let mut problems = Vec::new();
    for trial in 0..30 {
        let prefix = format!("t{trial}");
        std::fs::create_dir(dir.path().join(&prefix)).unwrap();
        let mut c = bin();
        c.args(["bucket", "hold", &format!("{url}{prefix}/")])
            .args(["--ttl", "20s", "--containment", "off", "--", "sleep", "30"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let pid = child.id();
        let t = Instant::now();
        // As soon as the command is a child of one of leasectl's threads.
        while !has_child(pid) {
            if t.elapsed() > Duration::from_secs(30) || child.try_wait().unwrap().is_some() {
                panic!("trial {trial}: the hold never started its command");
            }
            std::hint::spin_loop();
        }
        // SAFETY: kill(2) of leasectl alone, a child of this test.
        unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
        let status = child.wait().unwrap();
        let released = common::released_file(&dir.path().join(&prefix).join("LEASE"));
        // sleep ended by the forwarded SIGUSR1: 128 + 10.
        if status.code() != Some(128 + libc::SIGUSR1) || !released {
            problems.push(format!(
                "trial {trial}: leasectl {status}, lease released: {released}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Whether a thread of `pid` has a child (`/proc/PID/task/*/children`).
fn has_child(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("children")).is_ok_and(|s| !s.trim().is_empty())
    })
}
