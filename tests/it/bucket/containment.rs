//! `bucket hold`'s containment (issue 33): the command's whole tree in a PID
//! namespace of its own, so that the kernel ends it when leasectl dies, by
//! SIGKILL at a random moment of a renewal cycle, on a local store and on
//! moto; a kernel that refuses namespaces (a real seccomp filter); what the
//! command sees inside (pid, environment, fence fd, uid); signals and a TTY.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::hold::{now_s, signal_group};
use crate::common::lines::cannot_drop_privileges;
use crate::common::{
    bucket_name, create_bucket, file_url, moto, run_with_timeout, s3_env, sdk_client,
    support_script, Moto,
};

use crate::common::cli::BIN;

/// The daemon a backup wrapper starts: appends a timestamp every 50 ms.
/// `kind` 0: `setsid` in the background; 1: a double fork (Python) that
/// starts a new session and closes every descriptor, the fence fd among
/// them, stdin/stdout/stderr to /dev/null; 2: `setsid` with SIGTERM and
/// SIGHUP ignored.
fn daemon_command(dir: &Path, kind: usize) -> Vec<String> {
    let log = dir.join("gc.log");
    let gc = dir.join("gc.sh");
    let trap = if kind == 2 { "trap '' TERM HUP\n" } else { "" };
    std::fs::write(
        &gc,
        format!(
            "{trap}while :; do date +%s.%N >> {}; sleep 0.05; done\n",
            log.display()
        ),
    )
    .unwrap();
    let script = match kind {
        1 => {
            let py = dir.join("daemonize.py");
            std::fs::write(
                &py,
                format!(
                    "import os\n\
                     if os.fork(): os._exit(0)\n\
                     os.setsid()\n\
                     if os.fork(): os._exit(0)\n\
                     os.closerange(0, 65536)\n\
                     fd = os.open('/dev/null', os.O_RDWR)\n\
                     os.dup2(fd, 1); os.dup2(fd, 2)\n\
                     os.execvp('sh', ['sh', '{}'])\n",
                    gc.display()
                ),
            )
            .unwrap();
            format!("python3 {}; sleep 600", py.display())
        }
        _ => format!("setsid sh {} & sleep 600", gc.display()),
    };
    vec!["sh".into(), "-c".into(), script]
}

fn stamps(log: &Path) -> Vec<f64> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// `leasectl [--endpoint-url E] bucket hold URL ARGS -- CMD` in a process group
/// of its own, stderr to `dir/NAME.stderr`.
fn spawn_hold(
    dir: &Path,
    name: &str,
    endpoint: Option<&str>,
    url: &str,
    args: &[&str],
    cmd: &[String],
) -> (Child, PathBuf) {
    let stderr = dir.join(format!("{name}.stderr"));
    let mut c = Command::new(BIN);
    s3_env(&mut c);
    if let Some(e) = endpoint {
        c.args(["--endpoint-url", e, "--path-style", "--timeout", "1s"]);
    }
    c.args(["-v", "bucket", "hold", url])
        .args(args)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .process_group(0);
    (c.spawn().expect("spawn leasectl"), stderr)
}

fn processes_mentioning(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for p in procfs::process::all_processes().unwrap().flatten() {
        if let Ok(cmd) = p.cmdline() {
            if cmd.iter().any(|a| a.contains(needle)) {
                out.push(p.pid);
            }
        }
    }
    out
}

/// Ten rounds of: hold with a daemonizing command, SIGKILL leasectl at a
/// random moment of its renewal cycle, then check that the daemon wrote
/// nothing after kill + 1 s and is gone. Round 0 also starts a successor and
/// checks that the daemon's last write precedes the successor's lease.
/// Returns each round's kill → last write, seconds (negative: before).
async fn sigkill_rounds(endpoint: Option<&str>, base_url: &str, dir: &Path) -> Vec<f64> {
    let ttl = 6.0;
    let mut figures = Vec::new();
    for round in 0..10 {
        let rdir = dir.join(format!("r{round}"));
        std::fs::create_dir_all(&rdir).unwrap();
        let url = format!("{base_url}r{round}/");
        if url.starts_with("file://") {
            std::fs::create_dir_all(dir.join(format!("store/r{round}"))).unwrap();
        }
        let kind = round % 3;
        let (mut hold, stderr) = spawn_hold(
            &rdir,
            "hold",
            endpoint,
            &url,
            &["--ttl", "6s"],
            &daemon_command(&rdir, kind),
        );
        let log = rdir.join("gc.log");
        let t = Instant::now();
        while stamps(&log).is_empty() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the command never ran: {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let err = std::fs::read_to_string(&stderr).unwrap_or_default();
        assert!(
            err.contains("containment=pid-namespace"),
            "round {round}: {err}"
        );
        // A random moment of a renewal cycle (renewals every TTL/3 = 2 s).
        let pause = rand::random_range(0.0..ttl / 3.0);
        tokio::time::sleep(Duration::from_secs_f64(pause)).await;
        // SAFETY: kill(2) of the leasectl this test started.
        unsafe { libc::kill(hold.id() as i32, libc::SIGKILL) };
        let killed = now_s();
        let _ = hold.wait();
        let succ_log = rdir.join("successor");
        let successor = (round == 0).then(|| {
            spawn_hold(
                &rdir,
                "successor",
                endpoint,
                &url,
                &["--ttl", "6s", "--wait", "20s"],
                &[
                    "sh".into(),
                    "-c".into(),
                    format!("date +%s.%N > {}", succ_log.display()),
                ],
            )
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let gc = rdir.join("gc.sh");
        let left = processes_mentioning(gc.to_str().unwrap());
        let last = stamps(&log).last().copied().unwrap();
        figures.push(last - killed);
        assert!(
            left.is_empty(),
            "round {round} (kind {kind}): the daemon outlived leasectl: pids {left:?}"
        );
        assert!(
            last <= killed + 1.0,
            "round {round} (kind {kind}): the daemon wrote {:.3} s after leasectl was killed",
            last - killed
        );
        if let Some((mut succ, succ_err)) = successor {
            let t = Instant::now();
            while succ.try_wait().unwrap().is_none() {
                assert!(t.elapsed() < Duration::from_secs(30), "successor hung");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let took: f64 = std::fs::read_to_string(&succ_log)
                .unwrap_or_default()
                .trim()
                .parse()
                .unwrap_or_else(|_| {
                    panic!(
                        "the successor never ran: {}",
                        std::fs::read_to_string(&succ_err).unwrap_or_default()
                    )
                });
            assert!(
                took > last,
                "the successor ran at {took} while the daemon wrote until {last}"
            );
            // The daemon's log did not grow while the successor held the lease.
            assert_eq!(stamps(&log).last().copied(), Some(last));
        }
        signal_group(hold.id() as i32, libc::SIGKILL);
    }
    let mut sorted = figures.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    eprintln!(
        "kill -> last write over {} rounds: median {:.3} s, max {:.3} s ({})",
        sorted.len(),
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
        base_url
    );
    figures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_hold_ends_every_daemon_local() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("store")).unwrap();
    let base = file_url(&dir.path().join("store"));
    sigkill_rounds(None, &base, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_hold_ends_every_daemon_moto() {
    let server = moto(Moto::Conditional);
    let b = bucket_name("contain-kill");
    create_bucket(&sdk_client(&server.endpoint()), &b).await;
    let dir = tempfile::tempdir().unwrap();
    sigkill_rounds(Some(&server.endpoint()), &format!("s3://{b}/"), dir.path()).await;
}

/// Before containment the same daemon outlived leasectl: `--containment off`
/// keeps that behaviour (and so shows what containment is for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_containment_a_daemon_outlives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("store/p")).unwrap();
    let url = format!("{}p/", file_url(&dir.path().join("store")));
    let (mut hold, stderr) = spawn_hold(
        dir.path(),
        "hold",
        None,
        &url,
        &["--ttl", "6s", "--containment", "off"],
        &daemon_command(dir.path(), 0),
    );
    let log = dir.path().join("gc.log");
    let t = Instant::now();
    while stamps(&log).is_empty() {
        assert!(t.elapsed() < Duration::from_secs(20), "never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = std::fs::read_to_string(&stderr).unwrap();
    assert!(err.contains("containment=subreaper"), "{err}");
    assert!(!err.contains("refused a PID namespace"), "{err}");
    // SAFETY: kill(2) of the leasectl this test started.
    unsafe { libc::kill(hold.id() as i32, libc::SIGKILL) };
    let killed = now_s();
    let _ = hold.wait();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let gc = dir.path().join("gc.sh");
    let left = processes_mentioning(gc.to_str().unwrap());
    for pid in &left {
        // SAFETY: kill(2) of the daemon this test started.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(!left.is_empty(), "the daemon was expected to survive");
    assert!(stamps(&log).last().copied().unwrap() > killed + 1.0);
}

fn run_wrapped(args: &[&str], wrap: &[&str]) -> std::process::Output {
    let mut c = if wrap.is_empty() {
        Command::new(BIN)
    } else {
        let mut c = Command::new(wrap[0]);
        c.args(&wrap[1..]).arg(BIN);
        c
    };
    c.args(args);
    run_with_timeout(c, Duration::from_secs(60))
}

/// A real seccomp filter refuses unshare(2): `auto` says once why and what is
/// lost and runs the command as before; `require` refuses to start, exit 125,
/// nothing acquired; `off` says nothing.
#[test]
fn a_kernel_that_refuses_namespaces_is_said_once_and_require_refuses() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("p")).unwrap();
    let url = format!("{}p/", file_url(dir.path()));
    let deny = support_script("deny_unshare.py");
    let deny = deny.to_str().unwrap();
    let pid_file = dir.path().join("pid");
    let cmd = format!("echo $$ > {}", pid_file.display());
    let hold = |mode: &str| {
        run_wrapped(
            &[
                "-v",
                "bucket",
                "hold",
                &url,
                "--ttl",
                "3s",
                "--containment",
                mode,
                "--",
                "sh",
                "-c",
                &cmd,
            ],
            &["python3", deny],
        )
    };
    let out = hold("auto");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        err.matches("the kernel refused a PID namespace").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("survives a SIGKILL of leasectl"),
        "what is lost is said: {err}"
    );
    assert!(err.contains("containment=subreaper"), "{err}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        pid > 2,
        "the command ran in the host's PID namespace ({pid})"
    );

    std::fs::remove_dir_all(dir.path().join("p")).unwrap();
    std::fs::create_dir_all(dir.path().join("p")).unwrap();
    let out = hold("require");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("--containment require: not starting"), "{err}");
    assert!(
        !dir.path().join("p/LEASE").exists(),
        "nothing is acquired when containment is required and refused"
    );

    let out = hold("off");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("refused"), "{err}");
    assert!(err.contains("containment=subreaper"), "{err}");
}

/// Inside: pid 2 with the init as parent 1, the same working directory and
/// environment, the host's /proc (`/proc/self` is the host pid), and the
/// fence fd that `bucket fence-check` answers for.
#[test]
fn the_command_sees_its_environment_and_fence_inside() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("p")).unwrap();
    let url = format!("{}p/", file_url(dir.path()));
    let script = format!(
        "echo \"$$ $PPID $(pwd) $LEASECTL_LEASE_KEY $LEASECTL_GENERATION $(readlink /proc/self) $CONTAIN_TEST_VAR\"; {BIN} bucket fence-check; echo fence=$?"
    );
    let mut c = Command::new(BIN);
    c.args([
        "-v", "bucket", "hold", &url, "--ttl", "3s", "--", "sh", "-c", &script,
    ])
    .current_dir(dir.path())
    .env("CONTAIN_TEST_VAR", "kept");
    let out = run_with_timeout(c, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}{err}");
    assert!(err.contains("containment=pid-namespace"), "{err}");
    let first = stdout.lines().next().unwrap_or_default();
    let f: Vec<&str> = first.split(' ').collect();
    assert_eq!(f.len(), 7, "{first}");
    assert_eq!((f[0], f[1]), ("2", "1"), "pid and parent in the namespace");
    assert_eq!(
        Path::new(f[2]).canonicalize().unwrap(),
        dir.path().canonicalize().unwrap()
    );
    assert_eq!(f[3], "LEASE");
    assert!(f[4].parse::<u64>().is_ok(), "generation: {first}");
    let host_pid: i32 = f[5].parse().unwrap();
    assert!(host_pid > 2, "/proc is the host's: {first}");
    assert_eq!(f[6], "kept");
    assert!(
        stdout.contains("fence=0"),
        "fence-check inside: {stdout}{err}"
    );
}

/// As an unprivileged user the namespace is a user namespace with the
/// caller's uid mapped to itself: the command's files are the user's own.
#[test]
fn an_unprivileged_user_gets_a_user_namespace() {
    skip_unless_able!(cannot_drop_privileges());
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir_all(store.join("p")).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    for d in [dir.path(), &store, &store.join("p"), &work] {
        std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    }
    let url = format!("{}p/", file_url(&store));
    let made = work.join("made");
    let script = format!("id -u > {}; echo $$ >> {}", made.display(), made.display());
    let out = run_wrapped(
        &[
            "-v", "bucket", "hold", &url, "--ttl", "3s", "--", "sh", "-c", &script,
        ],
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("containment=user-pid-namespace"), "{err}");
    let text = std::fs::read_to_string(&made).unwrap();
    assert_eq!(text, "65534\n2\n");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&made).unwrap().uid(), 65534);
}

/// Signals sent to leasectl reach the command inside (SIGTERM, SIGHUP), and
/// the command's own status is leasectl's; a command killed by a signal is
/// 128 + its number; one that cannot be found is 127.
#[test]
fn signals_and_statuses_pass_through_containment() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("p")).unwrap();
    let url = format!("{}p/", file_url(dir.path()));
    for (sig, name, code) in [(libc::SIGTERM, "TERM", 3), (libc::SIGHUP, "HUP", 4)] {
        let got = dir.path().join(format!("got-{name}"));
        let ready = dir.path().join(format!("ready-{name}"));
        let script = format!(
            "trap 'echo {name} > {}; exit {code}' {name}; touch {}; while :; do sleep 0.05; done",
            got.display(),
            ready.display()
        );
        let mut c = Command::new(BIN);
        c.args([
            "-v", "bucket", "hold", &url, "--ttl", "3s", "--", "sh", "-c", &script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let child = c.spawn().unwrap();
        let t = Instant::now();
        while !ready.exists() {
            assert!(t.elapsed() < Duration::from_secs(20), "never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: kill(2) of leasectl alone (not its group).
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "{name}: {err}");
        assert_eq!(std::fs::read_to_string(&got).unwrap().trim(), name, "{err}");
    }
    let out = run_wrapped(
        &[
            "-v",
            "bucket",
            "hold",
            &url,
            "--ttl",
            "3s",
            "--",
            "sh",
            "-c",
            "kill -TERM $$",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM));
    let out = run_wrapped(
        &[
            "-v",
            "bucket",
            "hold",
            &url,
            "--ttl",
            "3s",
            "--",
            "/no/such/command",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(127), "{err}");
    assert!(err.contains("cannot run"), "{err}");
}

/// A command that reads the terminal works inside: it sees a TTY on stdin
/// and reads what the operator types.
#[test]
fn a_command_reading_the_terminal_works_inside() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("p")).unwrap();
    let url = format!("{}p/", file_url(dir.path()));
    let out = dir.path().join("typed");
    let t = crate::common::tmux::Tmux::start(120, 30);
    let run = t.run(&format!(
        "{BIN} bucket hold {url} --ttl 6s -- sh -c 'if [ -t 0 ]; then echo TTY-YES; fi; printf \"name? \"; read x; echo \"got $x\" > {}'",
        out.display()
    ));
    // (tmux drops the prompt's trailing space from the line it captures)
    let shown = t.wait_shown(&run, Duration::from_secs(30), "the prompt", |s| {
        s.lines().any(|l| l.trim_end() == "name?")
    });
    assert!(shown.contains("TTY-YES"), "{shown}");
    t.answer(&run, "hello");
    let (code, shown) = t.wait_exit(&run, Duration::from_secs(30));
    assert_eq!(code, 0, "{shown}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "got hello\n");
}

/// `writer exec` keeps no namespace (README, "Pod writer leases": the seed's
/// stamp names the holder's pid as the host sees it). What it guarantees when
/// SIGKILLed: its command dies with it at once (parent-death signal) and the
/// kernel frees the lock at once, so a successor starts; a daemon the command
/// detached is named `orphaned_writer` by the pod view (writer_truth).
#[test]
fn writer_exec_sigkilled_takes_its_command_and_frees_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let pidfile = dir.path().join("pid");
    let mut c = Command::new(BIN);
    c.args(["writer", "exec", "--data-dir", data, "--", "sh", "-c"])
        .arg(format!("echo $$ > {}; exec sleep 600", pidfile.display()))
        .env("CLOUD_WRITER_LEASE", "1")
        .env_remove("CLOUD_WRITER_LEASE_HELD")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut w = c.spawn().unwrap();
    let t = Instant::now();
    let child: i32 = loop {
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break p;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: kill(2) of the writer exec this test started.
    unsafe { libc::kill(w.id() as i32, libc::SIGKILL) };
    let killed = Instant::now();
    let _ = w.wait();
    let gone = |pid: i32| {
        procfs::process::Process::new(pid)
            .and_then(|p| p.stat())
            .map(|s| s.state == 'Z')
            .unwrap_or(true)
    };
    while !gone(child) {
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "the command outlived writer exec by a second"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut next = Command::new(BIN);
    next.args([
        "writer",
        "exec",
        "--data-dir",
        data,
        "--wait",
        "1s",
        "--",
        "true",
    ])
    .env("CLOUD_WRITER_LEASE", "1")
    .env_remove("CLOUD_WRITER_LEASE_HELD");
    let out = run_with_timeout(next, Duration::from_secs(30));
    assert_eq!(
        out.status.code(),
        Some(0),
        "the successor could not take the lock: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
