//! What a person reads on stderr (issue 45 §3, §4): every exit other than 0
//! says why in a line `leasectl: …`, and nothing there is a log line (a
//! timestamp, a level) unless the log was asked for (`-v`, `--log-file`).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::{bin, bin_path, file_url, record, run_with_timeout, text, write_lease};
use crate::writer_support::{wrapper, Guard};

/// `leasectl ARGS` as a person runs it: no log filter from the tester's
/// environment (`LEASECTL_LOG` turns stderr into the log).
fn person(args: &[&str]) -> Output {
    let mut c = bin();
    c.env_remove("LEASECTL_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .args(args);
    run_with_timeout(c, Duration::from_secs(60))
}

/// A line of a log (`2026-12-07T05:13:45.745488Z  WARN …`) rather than a
/// sentence: it starts with a timestamp or carries a level word.
fn is_log_line(l: &str) -> bool {
    let stamped = l.len() > 20
        && l.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && l.as_bytes()[4] == b'-'
        && l.as_bytes()[10] == b'T';
    stamped
        || [" INFO ", " WARN ", " ERROR ", " DEBUG "]
            .iter()
            .any(|w| l.contains(w))
}

/// The reason lines of `err`: `leasectl: …`, each one line.
fn reasons(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.starts_with("leasectl: "))
        .collect()
}

/// A store whose `db/` lease is stale (renewed 100 s ago, TTL 30 s).
fn stale_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_lease(dir.path(), "db", &record("gone-holder", 100, 30));
    dir
}

/// Every output of a snapshot that finds a stale lease exits 3 and says
/// which lease, and why, on stderr — `--json`, `-o table|ndjson|prometheus`
/// (they said nothing there: a script keeping stdout lost the why).
#[test]
fn every_output_that_exits_3_says_why_on_stderr() {
    let dir = stale_store();
    let url = file_url(dir.path());
    for args in [
        vec!["--json"],
        vec!["-o", "json"],
        vec!["-o", "table"],
        vec!["-o", "ndjson"],
        vec!["-o", "prometheus"],
    ] {
        let mut a = args.clone();
        a.extend(["--no-pod", &url]);
        let o = person(&a);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        let why = reasons(&err);
        assert!(
            why.iter()
                .any(|l| l.contains("need attention") && l.contains("db/ stale")),
            "{args:?} exits 3 without saying which lease and why:\n{err}"
        );
        assert!(
            !err.lines().any(is_log_line),
            "{args:?}: a log line among the sentences:\n{err}"
        );
    }
}

/// `takeover` refused: the reason is on stderr (stdout keeps the lease it
/// looked at), for each refusal before anything is written.
#[test]
fn a_refused_takeover_says_why_on_stderr() {
    let dir = stale_store();
    let log = dir.path().join("audit.jsonl");
    let log = log.to_str().unwrap();
    let url = format!("{}db/", file_url(dir.path()));
    let fresh = tempfile::tempdir().unwrap();
    write_lease(fresh.path(), "db", &record("live-holder", 1, 30));
    let fresh_url = format!("{}db/", file_url(fresh.path()));
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "takeover",
                &url,
                "--reason",
                "r",
                "--yes",
                "--expect-etag",
                "nope",
            ],
            "refused: the LEASE's ETag is",
        ),
        (
            &["takeover", &fresh_url, "--reason", "r", "--yes"],
            "refused: the lease is fresh",
        ),
        (
            &["takeover", &url, "--reason", "r"],
            "not a terminal: confirm interactively or pass --yes",
        ),
    ];
    for (args, why) in cases {
        let mut a = args.to_vec();
        a.extend(["--audit-log", log]);
        let o = person(&a);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        assert!(
            reasons(&err).iter().any(|l| l.contains(why)),
            "{args:?}: the reason is not on stderr:\nstdout:\n{out}\nstderr:\n{err}"
        );
        assert!(out.contains("ETag "), "stdout still shows the lease: {out}");
        assert!(!out.contains(why), "said once, on stderr: {out}");
    }
}

/// `takeover` prints sentences and its result, no log line ("…Z  WARN
/// takeover: intent recorded, writing"); the log is there with `-v`, and in
/// `--log-file` with stderr left to sentences.
#[test]
fn takeover_prints_no_log_lines_unless_the_log_is_asked_for() {
    let dir = stale_store();
    let url = format!("{}db/", file_url(dir.path()));
    let log = dir.path().join("audit.jsonl");
    let take = |extra: &[&str]| {
        write_lease(dir.path(), "db", &record("gone-holder", 100, 30));
        let mut a = vec![
            "takeover", &url, "--reason", "r", "--yes", "--then", "release",
        ];
        a.extend(["--audit-log", log.to_str().unwrap()]);
        a.extend(extra);
        person(&a)
    };
    let o = take(&[]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("taken: "), "{out}");
    let all = format!("{out}{err}");
    assert!(
        !all.lines().any(is_log_line),
        "a log line in the output of a takeover:\n{all}"
    );
    assert!(!all.contains("intent recorded"), "{all}");

    // -v: the log on stderr, each step timestamped.
    let o = take(&["-v"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.lines()
            .any(|l| is_log_line(l) && l.contains("intent recorded")),
        "-v shows the log:\n{err}"
    );

    // --log-file: the log there, sentences on stderr.
    let file = dir.path().join("leasectl.log");
    let o = take(&["--log-file", file.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.lines().any(is_log_line), "{err}");
    let logged = std::fs::read_to_string(&file).unwrap();
    assert!(
        logged
            .lines()
            .any(|l| is_log_line(l) && l.contains("intent recorded")),
        "{logged}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the log file is private");
}

/// `writer exec` refused (the lock still held after `--wait`): its reason is
/// one sentence starting `leasectl: …/.writer.lock is still held`, as the
/// README's troubleshooting table says, not an ERROR log line.
#[test]
fn writer_exec_refusal_is_a_sentence() {
    let data = tempfile::tempdir().unwrap();
    let mut holder = wrapper(data.path(), "2s", &["sleep", "30"]);
    holder.env("CLOUD_WRITER_LEASE", "1").stderr(Stdio::null());
    let _holder = Guard::spawn(holder);
    wait_held(data.path());
    let mut c = Command::new(bin_path());
    c.env_remove("LEASECTL_LOG")
        .env_remove("CLOUD_WRITER_LEASE_HELD")
        .env("CLOUD_WRITER_LEASE", "1")
        .args(["writer", "exec", "--wait", "1s", "--data-dir"])
        .arg(data.path())
        .args(["--", "true"]);
    let o = run_with_timeout(c, Duration::from_secs(30));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(!err.lines().any(is_log_line), "{err}");
    let lock = data.path().join(".writer.lock");
    let start = format!("leasectl: {} is still held", lock.display());
    assert!(
        err.lines()
            .any(|l| l.starts_with(&start) && l.contains("fail closed")),
        "{err}"
    );
}

/// Waits until `.writer.lock` in `data` is held (up to 10 s).
fn wait_held(data: &Path) {
    use nix::fcntl::{Flock, FlockArg};
    let path = data.join(".writer.lock");
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if let Ok(f) = std::fs::File::open(&path) {
            match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
                Err(_) => return,
                Ok(l) => drop(l),
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} was never held", path.display());
}

/// More exits other than 0, each with its line on stderr: usage errors,
/// `bucket fence-check` outside `bucket hold`, `config view` without a file.
#[test]
fn other_failures_say_why_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.toml");
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], i32);
    let cases: [Case; 4] = [
        (&["--json", "--no-pod"], &[], 2),
        (&["bucket", "fence-check"], &[], 2),
        (
            &["config", "view"],
            &[("LEASECTL_CONFIG", missing.to_str().unwrap())],
            2,
        ),
        (
            &["--json", "--no-pod", "file:///nonexistent-dir-45/"],
            &[],
            1,
        ),
    ];
    for (args, env, code) in cases {
        let mut c = bin();
        c.env_remove("LEASECTL_LOG")
            .env_remove("LEASECTL_FENCE_FD")
            .envs(env.iter().copied())
            .args(args);
        let o = run_with_timeout(c, Duration::from_secs(30));
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(!reasons(&err).is_empty(), "{args:?} says nothing:\n{err}");
    }
}

/// A command run under `bucket hold` that fails: leasectl exits with its
/// status and, as nothing else said why, `main` says it (the one place that
/// gives every exit other than 0 its line).
#[test]
fn a_held_commands_failure_is_said_by_main() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let url = format!("{}db/", file_url(dir.path()));
    let o = person(&["bucket", "hold", &url, "--", "sh", "-c", "exit 7"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(7), "{err}");
    assert_eq!(
        reasons(&err).last().copied(),
        Some("leasectl: the command exited with status 7"),
        "{err}"
    );
    assert!(!err.lines().any(is_log_line), "{err}");
}

/// What one process's stderr received, a `write(2)` a datagram: stderr is
/// one end of a datagram socket pair, so each write arrives whole and
/// alone. Reads until the process ends (its end of the pair is closed and
/// nothing is left) or `limit`; `during` runs once the first line is in.
fn writes_of(mut c: Command, limit: Duration, during: impl FnOnce(u32)) -> Vec<Vec<u8>> {
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixDatagram;
    let (ours, theirs) = UnixDatagram::pair().unwrap();
    c.env_remove("LEASECTL_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(OwnedFd::from(theirs)));
    let mut child = c.spawn().unwrap();
    drop(c); // the parent's copy of the child's end, so the end is seen
    ours.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = std::time::Instant::now() + limit;
    let mut writes = Vec::new();
    let mut during = Some(during);
    let mut buf = vec![0u8; 65536];
    while std::time::Instant::now() < deadline {
        match ours.recv(&mut buf) {
            Ok(n) => {
                writes.push(buf[..n].to_vec());
                if let Some(f) = during.take() {
                    f(child.id());
                }
            }
            Err(_) => {
                if child.try_wait().unwrap().is_some() {
                    // Whatever was written before the exit is queued.
                    while let Ok(n) = ours.recv(&mut buf) {
                        writes.push(buf[..n].to_vec());
                    }
                    return writes;
                }
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "the command did not end in {limit:?}; it wrote {:?}",
        writes
            .iter()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect::<Vec<_>>()
    );
}

/// Every line leasectl writes on stderr is one `write(2)`, whole (CI: a
/// shell's prompt landed inside `leasectl: serve stopped: |prompt|SIGTERM
/// received…`, as `eprintln!` wrote each piece of its format on its own):
/// `serve`'s start and stop, a refusal's reason, a warning, and `main`'s
/// line for a held command's failure.
#[test]
fn every_line_on_stderr_is_written_whole_at_once() {
    let dir = stale_store();
    let url = file_url(dir.path());
    std::fs::create_dir_all(dir.path().join("held")).unwrap();
    let held = format!("{url}held/");
    let stale = format!("{url}db/");
    let serve = {
        let mut c = bin();
        c.args(["serve", "--no-pod", &url, "--listen", "127.0.0.1:0"]);
        c
    };
    let mut cases: Vec<(&str, Vec<Vec<u8>>)> = vec![(
        "serve, stopped by SIGTERM",
        writes_of(serve, Duration::from_secs(60), |pid| {
            // SAFETY: a signal to the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }),
    )];
    for (what, args) in [
        ("a snapshot that exits 3", vec!["--json", "--no-pod", &url]),
        (
            "a refused takeover",
            vec![
                "takeover",
                &stale,
                "--reason",
                "r",
                "--audit-log",
                "/dev/null",
            ],
        ),
        (
            "a held command's failure",
            vec!["bucket", "hold", &held, "--", "sh", "-c", "exit 7"],
        ),
    ] {
        let mut c = bin();
        c.args(&args);
        cases.push((what, writes_of(c, Duration::from_secs(60), |_| {})));
    }
    for (what, writes) in cases {
        let shown: Vec<String> = writes
            .iter()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        assert!(!writes.is_empty(), "{what}: nothing on stderr");
        for w in &shown {
            assert!(
                w.starts_with("leasectl: ") && w.ends_with('\n') && w.matches('\n').count() == 1,
                "{what}: a write that is not one whole line: {w:?}; all the writes: {shown:#?}"
            );
        }
    }
}
