//! Issue 26 §2: what `bucket hold` hands its command, end to end with real
//! processes. The command is a Python script with SIGTERM blocked: one
//! thread waits for end of file on `LEASECTL_FENCE_FD` (and then asks
//! `leasectl bucket fence-check`), the main thread waits for SIGTERM with
//! `sigtimedwait` and, the moment it arrives, asks the fence fd whether it
//! is still open. leasectl and its command run pinned to one CPU and (as
//! root) the two threads run `SCHED_FIFO` above leasectl's watchdog: each
//! preempts leasectl the instant its event happens, so the order they record
//! is the order leasectl did the two things, not an accident of scheduling.
//! Renewals fail through a fault proxy in front of moto (503, hanging, or the
//! lease lost to another record), so the fence closes by its watchdog thread
//! or by the renewal task.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::hold::*;
use crate::common::proxy::{Mode, Proxy};
use crate::common::*;

/// The command under the lease (see the module docs). argv: OUT LEASECTL
/// rt|plain.
const CHILD: &str = r#"
import json, os, select, signal, stat, subprocess, sys, threading, time
out, leasectl, want_rt = sys.argv[1], sys.argv[2], sys.argv[3] == "rt"
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
rec = {"env_generation": os.environ.get("LEASECTL_GENERATION")}
lock = threading.Lock()
def save():
    with lock:
        with open(out + ".tmp", "w") as f:
            json.dump(rec, f)
        os.replace(out + ".tmp", out)
def fence_check():
    return subprocess.run([leasectl, "bucket", "fence-check"], pass_fds=(fd,),
                          stderr=subprocess.PIPE, text=True)
def set_rt(prio):
    if not want_rt:
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
        return True
    except OSError as e:
        rec["rt_error"] = str(e)
        return False
fd = int(os.environ["LEASECTL_FENCE_FD"])
rec["fd"] = fd
# Every descriptor of the fence pipe this process holds, with its access mode.
ino = os.fstat(fd).st_ino
ends = []
for name in os.listdir("/proc/self/fd"):
    try:
        st = os.stat("/proc/self/fd/" + name)
    except OSError:
        continue
    if stat.S_ISFIFO(st.st_mode) and st.st_ino == ino:
        with open("/proc/self/fdinfo/" + name) as f:
            flags = int(f.read().split("flags:")[1].split()[0], 8)
        ends.append([int(name), flags & os.O_ACCMODE])
rec["pipe_ends"] = sorted(ends)
rec["check_before"] = fence_check().returncode
waiting = threading.Event()
def watch_eof():
    rec["rt_eof"] = set_rt(98)
    p = select.poll()
    p.register(fd, select.POLLIN)
    waiting.set()
    p.poll()
    rec["t_eof"] = time.monotonic_ns()
    save()
    r = fence_check()
    rec["check_after"], rec["check_after_err"] = r.returncode, r.stderr
    save()
t = threading.Thread(target=watch_eof, daemon=True)
t.start()
rec["rt_term"] = set_rt(99)
waiting.wait()
rec["ready"] = True
save()
if signal.sigtimedwait({signal.SIGTERM}, 60) is not None:
    p = select.poll()
    p.register(fd, select.POLLIN)
    rec["fd_open_at_term"] = not p.poll(0)
    rec["t_term"] = time.monotonic_ns()
    save()
t.join(5)
"#;

/// Whether this test runs as root (then the command's threads must get
/// `SCHED_FIFO`).
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The first CPU this process may run on.
fn first_cpu() -> usize {
    // SAFETY: a zeroed cpu_set_t filled by sched_getaffinity.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            for cpu in 0..libc::CPU_SETSIZE as usize {
                if libc::CPU_ISSET(cpu, &set) {
                    return cpu;
                }
            }
        }
    }
    0
}

/// [`Hold::spawn`], with leasectl (and so its command) pinned to `cpu`.
fn spawn_pinned(
    dir: &Path,
    endpoint: &str,
    url: &str,
    args: &[&str],
    cmd: &[String],
    cpu: usize,
) -> Hold {
    let stderr = dir.join("hold.stderr");
    let mut c = crate::common::hold::hold_command(&[], endpoint, "1s", url, args, cmd);
    // A value in leasectl's own environment never reaches the command.
    c.env("LEASECTL_GENERATION", "424242")
        .stderr(std::fs::File::create(&stderr).unwrap());
    // SAFETY: sched_setaffinity in the forked child, on itself.
    unsafe {
        c.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Hold {
        child: c.spawn().expect("spawn leasectl"),
        stderr_path: stderr,
    }
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Every renewal answered 503: the watchdog closes the fence at its deadline.
    Fail503,
    /// Every renewal hangs: the watchdog closes it while the renewal is in flight.
    Hang,
    /// Another holder's record replaces ours: the renewal task finds the lease lost.
    Lost,
}

async fn read_json(path: &Path, key: &str, limit: Duration) -> serde_json::Value {
    let t = Instant::now();
    loop {
        if let Some(v) = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .filter(|v| !v[key].is_null())
        {
            return v;
        }
        assert!(
            t.elapsed() < limit,
            "the command never wrote {key} to {}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn lease_body(endpoint: &str, bucket: &str, key: &str) -> serde_json::Value {
    let got = sdk_client(endpoint)
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .expect("read the LEASE");
    let bytes = got.body.collect().await.unwrap().into_bytes();
    serde_json::from_slice(&bytes).expect("the LEASE is JSON")
}

/// One run; a failure description, or None.
async fn eof_before_sigterm_run(i: usize, port: u16, bucket: &str, fault: Fault) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    let script = dir.path().join("child.py");
    std::fs::write(&script, CHILD).unwrap();
    let out = dir.path().join("child.json");
    let prefix = format!("fd{i}/");
    let mut hold = spawn_pinned(
        dir.path(),
        &proxy.endpoint(),
        &format!("s3://{bucket}/{prefix}"),
        &["--ttl", "6s", "--grace", "1s"],
        &[
            "python3".into(),
            script.display().to_string(),
            out.display().to_string(),
            bin_path().into(),
            if is_root() { "rt" } else { "plain" }.into(),
        ],
        first_cpu(),
    );
    let before = read_json(&out, "ready", Duration::from_secs(30)).await;
    let moto = format!("http://127.0.0.1:{port}");
    let key = format!("{prefix}LEASE");
    let stored = lease_body(&moto, bucket, &key).await;
    match fault {
        Fault::Fail503 => proxy.fail_requests("PUT", &format!("/{key}"), 503),
        Fault::Hang => proxy.hang_requests("PUT", &format!("/{key}")),
        Fault::Lost => {
            let now = chrono::Utc::now().to_rfc3339();
            put_raw(
                &sdk_client(&moto),
                bucket,
                &key,
                format!(r#"{{"instance_id":"intruder","acquired_at":"{now}","renewed_at":"{now}","ttl_s":6}}"#)
                    .as_bytes(),
            )
            .await;
        }
    }
    let code = hold.exit_code(Duration::from_secs(30)).await;
    let rec: serde_json::Value = std::fs::read(&out)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut problems = Vec::new();
    if code != Some(5) {
        problems.push(format!("exit {code:?} (expected 5)"));
    }
    // Generation: the stored record's (the default record format writes one).
    let want = stored["generation"].as_u64().map(|g| g.to_string());
    if want.is_none() || before["env_generation"].as_str().map(str::to_owned) != want {
        problems.push(format!(
            "LEASECTL_GENERATION {} but the stored LEASE has generation {}",
            before["env_generation"], stored["generation"]
        ));
    }
    // The command holds the read end alone, never the write end.
    let fd = before["fd"].as_i64().unwrap_or(-1);
    if before["pipe_ends"] != serde_json::json!([[fd, libc::O_RDONLY]]) {
        problems.push(format!(
            "the command holds these ends of the fence pipe (fd, access mode): {} (expected only [{fd}, O_RDONLY])",
            before["pipe_ends"]
        ));
    }
    if before["check_before"] != 0 {
        problems.push(format!(
            "fence-check answered {} while the lease was held",
            before["check_before"]
        ));
    }
    if rec["check_after"] != 5 {
        problems.push(format!(
            "fence-check answered {} after the fence closed (stderr {})",
            rec["check_after"], rec["check_after_err"]
        ));
    }
    if is_root() && (before["rt_eof"] != true || before["rt_term"] != true) {
        problems.push(format!(
            "the command's threads did not get SCHED_FIFO as root ({}): the order below would prove nothing",
            before["rt_error"]
        ));
    }
    // Without SCHED_FIFO (not root) the two threads' timestamps race each
    // other; the fd's state at SIGTERM (below) is still exact.
    let rt = before["rt_eof"] == true && before["rt_term"] == true;
    match (rec["t_eof"].as_u64(), rec["t_term"].as_u64()) {
        (Some(eof), Some(term)) if eof < term || !rt => {}
        (eof, term) => problems.push(format!(
            "EOF at {eof:?} ns, SIGTERM at {term:?} ns: EOF did not come first"
        )),
    }
    if rec["fd_open_at_term"] != false {
        problems.push(format!(
            "when SIGTERM arrived the fence fd was open: {}",
            rec["fd_open_at_term"]
        ));
    }
    let err = hold.stderr();
    if !err.contains("fence closed") {
        problems.push("no 'fence closed' message".into());
    }
    (!problems.is_empty()).then(|| {
        format!(
            "run {i} {fault:?}: {}\n-- command's record: {rec}\n-- stderr:\n{err}",
            problems.join("; ")
        )
    })
}

/// Issue 26 §2: with renewals failing (503, hanging, lost), the command sees
/// end of file on LEASECTL_FENCE_FD strictly before SIGTERM, and the fd reads
/// end of file the moment SIGTERM arrives; `bucket fence-check` answers 0 while
/// held and 5 after; the command holds only the read end; LEASECTL_GENERATION
/// is the stored record's (not the value leasectl's own environment held).
/// Six runs, three at a time.
#[tokio::test(flavor = "multi_thread")]
async fn the_fence_fd_reaches_eof_before_sigterm_and_fence_check_follows_it() {
    let server = moto(Moto::Conditional);
    let b = bucket_name("fence-fd");
    create_bucket(&sdk_client(&server.endpoint()), &b).await;
    let faults = [Fault::Fail503, Fault::Hang, Fault::Lost];
    let mut failures = Vec::new();
    for batch in 0..2 {
        let mut tasks = Vec::new();
        for (j, fault) in faults.into_iter().enumerate() {
            let i = batch * 3 + j;
            let b = b.clone();
            let port = server.port;
            tasks.push(tokio::spawn(async move {
                eof_before_sigterm_run(i, port, &b, fault).await
            }));
        }
        for t in tasks {
            if let Some(f) = t.await.unwrap() {
                failures.push(f);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 6 runs failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// `leasectl bucket fence-check` with `fd` (if any) inherited and
/// LEASECTL_FENCE_FD set to `value` (unset for `None`).
fn fence_check(value: Option<&str>, fd: Option<i32>) -> (Option<i32>, String) {
    fence_check_of(value, fd, None)
}

/// [`fence_check`] with LEASECTL_FENCE_PIPE set to `pipe` (`DEV:INODE`).
fn fence_check_of(
    value: Option<&str>,
    fd: Option<i32>,
    pipe: Option<&str>,
) -> (Option<i32>, String) {
    let mut c = bin();
    c.args(["bucket", "fence-check"])
        .env_remove("LEASECTL_FENCE_FD")
        .env_remove("LEASECTL_FENCE_PIPE")
        .stdin(Stdio::null());
    if let Some(v) = value {
        c.env("LEASECTL_FENCE_FD", v);
    }
    if let Some(p) = pipe {
        c.env("LEASECTL_FENCE_PIPE", p);
    }
    if let Some(fd) = fd {
        // SAFETY: fcntl in the forked child on a descriptor it holds.
        unsafe {
            c.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let out = run_with_timeout(c, Duration::from_secs(20));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 26 §2: outside `bucket hold` (variable unset, not a number, no such
/// descriptor, a file, a terminal-like device, a pipe's write end),
/// `fence-check` is a usage error (2) saying to run it under `leasectl bucket
/// hold`; on a pipe's read end it answers 0 while the write end is open and
/// 5 once it closed, without blocking.
#[test]
fn fence_check_outside_bucket_hold_is_a_usage_error_and_follows_a_pipe() {
    let usage = |value: Option<&str>, fd: Option<i32>, why: &str| {
        let (code, err) = fence_check(value, fd);
        assert_eq!(code, Some(2), "{why}: {err}");
        assert!(
            err.contains("leasectl bucket hold") && err.contains("LEASECTL_FENCE_FD"),
            "{why}: {err}"
        );
        assert!(!err.contains("panicked"), "{why}: {err}");
    };
    usage(None, None, "unset");
    for v in ["", "abc", "-1", "3 ", "+3", "99999999999", "\u{1b}[31m"] {
        usage(Some(v), None, &format!("{v:?}"));
    }
    // A hostile value is quoted as the console shows it, escaped once
    // (never Rust's Debug form, which would escape the escape again).
    let (_, err) = fence_check(Some("\u{1b}[31m\"x"), None);
    assert!(
        err.contains(r#"LEASECTL_FENCE_FD is "\x1b[31m\"x", not a file descriptor number"#),
        "{err}"
    );
    usage(Some("987"), None, "no such descriptor");
    let file = tempfile::tempfile().unwrap();
    let f = file.as_raw_fd();
    usage(Some(&f.to_string()), Some(f), "a regular file");
    usage(Some("0"), None, "stdin is /dev/null");

    let mut fds = [-1; 2];
    // SAFETY: pipe2 into a 2-element array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: two new descriptors this test owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let (rn, wn) = (r.as_raw_fd(), w.as_raw_fd());
    usage(Some(&wn.to_string()), Some(wn), "a pipe's write end");
    // Issue 37 item 9: a pipe's read end is not the fence unless
    // LEASECTL_FENCE_PIPE names that very pipe (any idle pipe on stdin said
    // "open" before).
    usage(
        Some(&rn.to_string()),
        Some(rn),
        "a pipe that is not the fence",
    );
    let (code, err) = fence_check_of(Some(&rn.to_string()), Some(rn), Some("1:2"));
    assert_eq!(code, Some(2), "another pipe's identity: {err}");
    let st = std::fs::metadata(format!("/proc/self/fd/{rn}")).unwrap();
    let id = format!(
        "{}:{}",
        std::os::unix::fs::MetadataExt::dev(&st),
        std::os::unix::fs::MetadataExt::ino(&st)
    );
    let t = Instant::now();
    let (code, err) = fence_check_of(Some(&rn.to_string()), Some(rn), Some(&id));
    assert_eq!(code, Some(0), "open pipe: {err}");
    assert!(t.elapsed() < Duration::from_secs(10), "fence-check blocked");
    drop(w);
    let (code, err) = fence_check_of(Some(&rn.to_string()), Some(rn), Some(&id));
    assert_eq!(code, Some(5), "closed pipe: {err}");
    assert!(err.contains("fence has closed"), "{err}");
}

/// Issue 26 §2: the write end is nobody's but leasectl's, so when leasectl
/// dies (SIGKILL: no code of its own runs) the fence fd of what its command
/// started reads end of file at once.
#[tokio::test(flavor = "multi_thread")]
async fn the_fence_fd_reads_eof_when_leasectl_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("p")).unwrap();
    let seen = dir.path().join("seen");
    let started = dir.path().join("started");
    // A grandchild in a session of its own survives leasectl and its
    // command (which dies with leasectl) and waits for end of file. Only
    // without containment can anything survive leasectl (with it, the
    // kernel kills the grandchild too: tests/it/bucket/containment.rs).
    let waiter = format!(
        "import os, select; p = select.poll(); p.register(int(os.environ['LEASECTL_FENCE_FD']), select.POLLIN); \
         open('{}', 'w').close(); p.poll(30000); open('{}', 'w').write('eof')",
        started.display(),
        seen.display()
    );
    let script = format!("setsid python3 -c \"{waiter}\" </dev/null >/dev/null 2>&1 & sleep 60",);
    let mut hold = Hold::spawn(
        dir.path(),
        "hold",
        "http://127.0.0.1:9",
        &format!("{}p/", file_url(dir.path())),
        &["--ttl", "6s", "--containment", "off"],
        &["sh".into(), "-c".into(), script],
        &[],
    );
    let t = Instant::now();
    while !started.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the grandchild never started: {}",
            hold.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!seen.exists(), "end of file while the lease was held");
    // SAFETY: kill(2) of the leasectl process this test started.
    unsafe {
        libc::kill(hold.child.id() as i32, libc::SIGKILL);
    }
    let _ = hold.child.wait();
    let t = Instant::now();
    while !seen.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the fence fd did not read end of file after leasectl was killed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `bucket hold -- sh -c SCRIPT` on a local store, leasectl's own
/// environment holding a stale LEASECTL_GENERATION; `extra` flags.
fn hold_local(dir: &Path, extra: &[&str], script: &str) -> std::process::Output {
    let mut c = bin();
    c.args(["bucket", "hold", "--ttl", "6s"])
        .args(extra)
        .arg(format!("{}p/", file_url(dir)))
        .args(["--", "sh", "-c", script])
        .env("LEASECTL_GENERATION", "424242");
    run_with_timeout(c, Duration::from_secs(30))
}

/// Issue 26 §2: LEASECTL_GENERATION is the held record's generation, read
/// back from the LEASE file by the command itself (never the value in
/// leasectl's own environment); with `--record-format seed` the record
/// carries none and the variable is unset.
#[test]
fn leasectl_generation_is_the_stored_records_and_unset_without_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("p")).unwrap();
    let lease = dir.path().join("p/LEASE");
    let (env_out, lease_out) = (dir.path().join("env"), dir.path().join("lease.json"));
    let script = format!(
        "echo \"${{LEASECTL_GENERATION-unset}}\" > {}; cat {} > {}",
        env_out.display(),
        lease.display(),
        lease_out.display()
    );
    let out = hold_local(dir.path(), &[], &script);
    assert_exit(&out, 0);
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&lease_out).unwrap()).unwrap();
    let generation = stored["generation"]
        .as_u64()
        .unwrap_or_else(|| panic!("the LEASE bucket hold wrote has no generation: {stored}"));
    assert_eq!(
        std::fs::read_to_string(&env_out).unwrap().trim(),
        generation.to_string()
    );

    let out = hold_local(dir.path(), &["--record-format", "seed"], &script);
    assert_exit(&out, 0);
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&lease_out).unwrap()).unwrap();
    assert!(stored.get("generation").is_none(), "{stored}");
    assert_eq!(std::fs::read_to_string(&env_out).unwrap().trim(), "unset");
}
