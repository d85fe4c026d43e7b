//! Shared helpers for the writer-lease integration tests: real processes,
//! real flock, real /proc. Every spawned process tree is killed and reaped by
//! a guard at the end of the test.
#![allow(dead_code)]

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use leasectl::writer::scan::{scan, PodSnapshot, ProcessInfo, ScanOptions};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

pub use crate::common::cli::bin_path;

pub mod pods;

/// A command with a clean lease environment: both lease variables removed,
/// logs plain.
pub fn command(program: &str) -> Command {
    let mut c = Command::new(program);
    c.env_remove("CLOUD_WRITER_LEASE")
        .env_remove("CLOUD_WRITER_LEASE_HELD")
        .env("LEASECTL_LOG", "info")
        .env("NO_COLOR", "1");
    c
}

/// `leasectl writer exec --data-dir DIR --wait WAIT -- CMD...` as a Command.
pub fn wrapper(dir: &Path, wait: &str, cmd: &[&str]) -> Command {
    let mut c = command(bin_path());
    c.args(["writer", "exec", "--data-dir"])
        .arg(dir)
        .args(["--wait", wait, "--"])
        .args(cmd);
    c
}

/// A spawned process in its own process group; dropping the guard SIGKILLs
/// the whole group and reaps the leader.
pub struct Guard {
    pub child: Option<Child>,
    pub pid: u32,
}

impl Guard {
    /// Spawns `cmd` as the leader of a new process group, stderr and stdout
    /// captured to pipes only when asked by the caller's Stdio settings.
    pub fn spawn(mut cmd: Command) -> Guard {
        cmd.process_group(0);
        let child = cmd.spawn().expect("spawn");
        let pid = child.id();
        Guard {
            child: Some(child),
            pid,
        }
    }

    /// Waits for the leader to exit, up to `timeout`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut().expect("child");
        loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for exit and returns status plus captured stdout and stderr,
    /// read while it runs (a process writing more than a pipe holds would
    /// otherwise wait for a reader forever). A process that does not exit in
    /// time is killed with its group, and the panic shows its process tree
    /// and what it wrote.
    pub fn output(mut self, timeout: Duration) -> (ExitStatus, String, String) {
        use std::io::Read;
        let reader = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut text = Vec::new();
                if let Some(mut p) = pipe {
                    p.read_to_end(&mut text).ok();
                }
                String::from_utf8_lossy(&text).into_owned()
            })
        };
        let child = self.child.as_mut().expect("child");
        let out_reader = reader(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let err_reader = reader(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let status = self.wait_timeout(timeout);
        let tree = if status.is_none() {
            let group = self.pid.to_string();
            Command::new("ps")
                .args(["-eo", "pgid,pid,ppid,stat,wchan:20,args"])
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .filter(|l| l.split_whitespace().next() == Some(group.as_str()))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default()
        } else {
            String::new()
        };
        // Kill what is left of the group first: a lingering grandchild would
        // keep the pipes open.
        let _ = killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        let mut child = self.child.take().expect("child");
        let out = out_reader.join().unwrap_or_default();
        let err = err_reader.join().unwrap_or_default();
        let _ = child.wait();
        let Some(status) = status else {
            panic!(
                "process {} did not exit within {timeout:?}; its group then:\n{tree}\nstdout:\n{out}\nstderr:\n{err}",
                self.pid
            );
        };
        (status, out, err)
    }

    pub fn signal(&self, sig: Signal) {
        nix::sys::signal::kill(Pid::from_raw(self.pid as i32), sig).expect("kill");
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Scans the pod rooted at `root` with the lock of `dir`.
pub fn scan_pod(root: u32, dir: &Path) -> PodSnapshot {
    scan(&ScanOptions {
        proc_root: PathBuf::from("/proc"),
        data_dirs: vec![dir.to_path_buf()],
        pod_root: Some(root),
        node: false,
    })
    .expect("scan")
}

/// Polls `f` every 50 ms until it returns Some or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls the pod scan until `ready` accepts it; panics with the last
/// snapshot otherwise.
pub fn scan_until(root: u32, dir: &Path, ready: impl Fn(&PodSnapshot) -> bool) -> PodSnapshot {
    let mut last = None;
    let got = wait_for(Duration::from_secs(4), || {
        let s = scan_pod(root, dir);
        if ready(&s) {
            Some(s)
        } else {
            last = Some(s);
            None
        }
    });
    got.unwrap_or_else(|| {
        panic!(
            "pod never reached the expected state; last scan:\n{}",
            serde_json::to_string_pretty(&last).unwrap()
        )
    })
}

/// The process with this pid in a snapshot.
pub fn proc_of(s: &PodSnapshot, pid: u32) -> &ProcessInfo {
    s.processes
        .iter()
        .find(|p| p.pid == pid)
        .unwrap_or_else(|| panic!("pid {pid} not in snapshot: {s:#?}"))
}

/// Why a new PID namespace cannot be made here, if it cannot.
pub fn cannot_unshare() -> Option<String> {
    match std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .stderr(std::process::Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!(
            "unshare --pid --fork --mount-proc is not permitted ({s})"
        )),
        Err(e) => Some(format!("unshare is not available ({e})")),
    }
}

/// The viewer binary where uid 65534 can run it: hard-linked (or copied) into
/// a world-readable directory (the build directory may be under a private home).
pub fn viewer_for_nobody(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let to = dir.join("leasectl-viewer");
    let from = leasectl_bin();
    if std::fs::hard_link(&from, &to).is_err() {
        std::fs::copy(&from, &to).unwrap();
    }
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    to
}

/// A temporary directory everyone may enter (mode 0755).
pub fn enterable_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    t
}

/// Two sibling writers racing for the lock of `data`: `sh -c "ONE & ONE &
/// wait"` (stderr discarded), ONE being `writer exec --data-dir DATA --wait
/// 300s -- sleep 60` of [`leasectl_bin`] with `CLOUD_WRITER_LEASE=1`.
pub fn racing_siblings(data: &Path) -> Guard {
    let b = leasectl_bin();
    let d = data.to_str().unwrap();
    let one = format!("{b} writer exec --data-dir {d} --wait 300s -- sleep 60");
    let mut cmd = command("sh");
    cmd.args(["-c", &format!("{one} & {one} & wait")])
        .env("CLOUD_WRITER_LEASE", "1")
        .stderr(std::process::Stdio::null());
    Guard::spawn(cmd)
}

/// `c` — a `writer exec --data-dir DIR` taking the lock — spawned with its
/// stderr discarded, once it holds the lock (within `limit`; else the test
/// fails saying `what`).
pub fn lock_held(mut c: Command, dir: &Path, limit: Duration, what: &str) -> Guard {
    c.stderr(std::process::Stdio::null());
    let g = Guard::spawn(c);
    wait_for(limit, || (!lock_is_free(dir)).then_some(())).expect(what);
    g
}

/// Whether the lock of `dir` can be taken right now (taken and released at once).
pub fn lock_is_free(dir: &Path) -> bool {
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(".writer.lock"))
        .expect("open lock");
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
}

/// Whether a pid is alive and not a zombie.
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s.rsplit(") ").next().and_then(|r| r.chars().next());
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

/// Children pids of `pid` (from /proc/PID/task/PID/children).
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// SIGKILLs a pid (and its process group, if it leads one) on drop; for
/// processes a [`Guard`] does not cover. Zombies are reaped by their parent
/// or by init.
pub struct KillOnDrop(pub u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let pid = Pid::from_raw(self.0 as i32);
        let _ = killpg(pid, Signal::SIGKILL);
        let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
    }
}

/// The leasectl binary: `LEASECTL_TEST_BIN` or the one under test.
pub fn leasectl_bin() -> String {
    std::env::var("LEASECTL_TEST_BIN").unwrap_or_else(|_| bin_path().to_string())
}

/// [`wrapper`] of [`leasectl_bin`].
pub fn wrapper_of_test_bin(dir: &Path, wait: &str, cmd: &[&str]) -> Command {
    let mut c = command(&leasectl_bin());
    c.args(["writer", "exec", "--data-dir"])
        .arg(dir)
        .args(["--wait", wait, "--"])
        .args(cmd);
    c
}

/// A shell script that daemonizes a writer (`setsid sh -c … &`), then runs
/// `tail`. The daemon writes its pid to `pidfile`, then loops until
/// `stopfile` exists (SIGTERM ends it with status 7).
pub fn daemonizing_command(pidfile: &Path, stopfile: &Path, tail: &str) -> String {
    let inner = format!(
        "trap 'exit 7' TERM; echo \\$\\$ > {}; while [ ! -e {} ]; do sleep 0.05; done",
        pidfile.display(),
        stopfile.display()
    );
    format!("setsid sh -c \"{inner}\" & {tail}")
}

/// Spawns `cmd` (a [`wrapper`] or [`wrapper_of_test_bin`]) with the lease on
/// and stderr to /dev/null: a pod root that takes.
pub fn spawn_armed(mut cmd: Command) -> Guard {
    cmd.env("CLOUD_WRITER_LEASE", "1").stderr(Stdio::null());
    Guard::spawn(cmd)
}

/// Spawns `sh -c "W & W & … wait"` with `n` siblings W, each a `writer exec`
/// of [`bin_path`] on the data directory `d`, the lease on, waiting up to 30 s
/// for the lock and running `sleep 30`: siblings racing for one lock (stderr
/// to /dev/null).
pub fn spawn_siblings(d: &str, n: usize) -> Guard {
    let b = bin_path();
    let one = format!("CLOUD_WRITER_LEASE=1 {b} writer exec --data-dir {d} --wait 30s -- sleep 30");
    let script = format!("{}wait", format!("{one} & ").repeat(n));
    let mut cmd = command("sh");
    cmd.args(["-c", &script]).stderr(Stdio::null());
    Guard::spawn(cmd)
}

/// A lease-on [`wrapper_of_test_bin`] (wait 2 s) of a shell that daemonizes a
/// writer ([`daemonizing_command`], its pid file `DIR/daemon.pid`, stopped by
/// `stopfile`) and then runs `tail`; stdout to /dev/null, stderr to `stderr`.
/// Returns the command and the pid file.
pub fn daemonizing_wrapper(
    dir: &Path,
    stopfile: &Path,
    tail: &str,
    stderr: Stdio,
) -> (Command, PathBuf) {
    let pidfile = dir.join("daemon.pid");
    let script = daemonizing_command(&pidfile, stopfile, tail);
    let mut cmd = wrapper_of_test_bin(dir, "2s", &["sh", "-c", &script]);
    cmd.env("CLOUD_WRITER_LEASE", "1")
        .stdout(Stdio::null())
        .stderr(stderr);
    (cmd, pidfile)
}

/// [`daemonizing_wrapper`] with stderr to the file `DIR/stderr.log` (a daemon
/// that outlives the test would hold a pipe open): the command, the pid file
/// and the log.
pub fn daemonizing_wrapper_logged(
    dir: &Path,
    stopfile: &Path,
    tail: &str,
) -> (Command, PathBuf, PathBuf) {
    let log = dir.join("stderr.log");
    let stderr = Stdio::from(File::create(&log).unwrap());
    let (cmd, pidfile) = daemonizing_wrapper(dir, stopfile, tail, stderr);
    (cmd, pidfile, log)
}

pub fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Runs a viewer command, returns its exit code and the parsed JSON.
pub fn run_json(mut cmd: Command) -> (i32, serde_json::Value) {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let (status, out, err) = Guard::spawn(cmd).output(Duration::from_secs(30));
    let doc: serde_json::Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{out}\nstderr:\n{err}"));
    (status.code().expect("exit code"), doc)
}

/// The process `pid` of a `--json` document's pod.
pub fn pod_process(doc: &serde_json::Value, pid: u32) -> &serde_json::Value {
    doc["pod"]["processes"]
        .as_array()
        .expect("pod.processes")
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not in {doc:#}"))
}

/// The string `v` holds (panics when it holds none): `text_of(&v["message"])`.
pub fn text_of(v: &serde_json::Value) -> &str {
    v.as_str().unwrap()
}

/// The verdict of kind `kind` in a `--json` document's pod (panics, showing
/// the document, when there is none).
pub fn verdict<'a>(doc: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    doc["pod"]["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} verdict: {doc:#}"))
}

/// Whether a `--json` document's pod has a verdict of kind `kind`.
pub fn has_verdict(doc: &serde_json::Value, kind: &str) -> bool {
    verdict_kinds(doc).iter().any(|k| k == kind)
}

/// The kinds of a `--json` document's pod verdicts, in order.
pub fn verdict_kinds(doc: &serde_json::Value) -> Vec<String> {
    doc["pod"]["verdicts"]
        .as_array()
        .expect("pod.verdicts")
        .iter()
        .map(|v| v["kind"].as_str().unwrap().to_string())
        .collect()
}
