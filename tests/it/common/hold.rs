//! `leasectl bucket hold` as a process under test: spawned in a process
//! group of its own (so a test can SIGSTOP it with its command), its command
//! a shell loop logging one timestamp per line, its clock optionally shifted
//! by libfaketime.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::SETUP;

pub fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Debian's libfaketime (package `faketime`), for this machine's architecture.
pub fn libfaketime() -> String {
    format!(
        "/usr/lib/{}-linux-gnu/faketime/libfaketime.so.1",
        std::env::consts::ARCH
    )
}

/// A shell command writing `date +%s.%N` to `log` every 0.1 s; with
/// `ignore_term` it traps SIGTERM and goes on; with `lines` it stops by itself.
pub fn writer(log: &Path, ignore_term: bool, lines: Option<u32>) -> Vec<String> {
    tagged_writer(log, "", ignore_term, lines)
}

/// [`writer`] whose lines are `TAG TIMESTAMP`; `date` runs with the real
/// clock even when leasectl's is shifted (LD_PRELOAD is dropped).
pub fn tagged_writer(log: &Path, tag: &str, ignore_term: bool, lines: Option<u32>) -> Vec<String> {
    let trap = if ignore_term {
        "trap 'echo TERM ignored >&2' TERM; "
    } else {
        ""
    };
    let body = format!(
        "echo {tag} $(env -u LD_PRELOAD date +%s.%N) >> {}; sleep 0.1",
        log.display()
    );
    let script = match lines {
        Some(n) => format!("{trap}i=0; while [ $i -lt {n} ]; do {body}; i=$((i+1)); done"),
        None => format!("{trap}while :; do {body}; done"),
    };
    unpreloaded_sh(script)
}

/// `env -u LD_PRELOAD sh -c SCRIPT`: the script's commands run with the real
/// clock even when leasectl's is shifted (libfaketime).
pub fn unpreloaded_sh(script: String) -> Vec<String> {
    vec![
        "env".into(),
        "-u".into(),
        "LD_PRELOAD".into(),
        "sh".into(),
        "-c".into(),
        script,
    ]
}

pub struct Hold {
    pub child: Child,
    pub stderr_path: PathBuf,
}

/// `leasectl GLOBAL --endpoint-url ENDPOINT --path-style --timeout TIMEOUT
/// bucket hold URL ARGS -- CMD` with no stdin nor stdout, in a process group
/// of its own (so the test can stop that group); stderr and the environment
/// are the caller's to set.
pub fn hold_command<S: AsRef<std::ffi::OsStr>>(
    global: &[&str],
    endpoint: &str,
    timeout: &str,
    url: &str,
    args: &[&str],
    cmd: &[S],
) -> std::process::Command {
    let mut c = super::bin();
    c.args(global)
        .args([
            "--endpoint-url",
            endpoint,
            "--path-style",
            "--timeout",
            timeout,
        ])
        .args(["bucket", "hold", url])
        .args(args)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0);
    c
}

impl Hold {
    /// `leasectl -v bucket hold URL ARGS -- CMD` through `endpoint`, in a
    /// process group of its own (so the test can stop that group), its log
    /// (`-v`: every step, which the tests read) to a file.
    pub fn spawn(
        dir: &Path,
        name: &str,
        endpoint: &str,
        url: &str,
        args: &[&str],
        cmd: &[String],
        env: &[(&str, String)],
    ) -> Self {
        let stderr = dir.join(format!("{name}.stderr"));
        let mut c = hold_command(&["-v"], endpoint, "1s", url, args, cmd);
        c.envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stderr(std::fs::File::create(&stderr).unwrap());
        Self {
            child: c.spawn().expect("spawn leasectl"),
            stderr_path: stderr,
        }
    }

    pub fn pgid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Waits up to `limit` for leasectl to exit; kills its group if it does not.
    pub async fn exit_code(&mut self, limit: Duration) -> Option<i32> {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            if t.elapsed() > limit {
                signal_group(self.pgid(), libc::SIGCONT);
                signal_group(self.pgid(), libc::SIGKILL);
                let _ = self.child.wait();
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            signal_group(self.pgid(), libc::SIGCONT);
            signal_group(self.pgid(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Holds one test spawns in one directory, through one endpoint, of one URL:
/// what [`Hold::spawn`] takes that stays the same from one hold to the next.
pub struct HoldSite<'a> {
    pub dir: &'a Path,
    pub endpoint: String,
    pub url: String,
}

impl<'a> HoldSite<'a> {
    pub fn new(dir: &'a Path, endpoint: &str, url: &str) -> Self {
        Self {
            dir,
            endpoint: endpoint.into(),
            url: url.into(),
        }
    }

    /// [`Hold::spawn`] of `name` with `args`, its command a [`writer`]
    /// logging to `DIR/NAME.log`: the hold and that log's path.
    pub fn writer(
        &self,
        name: &str,
        args: &[&str],
        ignore_term: bool,
        lines: Option<u32>,
    ) -> (Hold, PathBuf) {
        self.writer_env(name, args, ignore_term, lines, &[])
    }

    /// [`HoldSite::writer`] with `env` added to leasectl's environment.
    pub fn writer_env(
        &self,
        name: &str,
        args: &[&str],
        ignore_term: bool,
        lines: Option<u32>,
        env: &[(&str, String)],
    ) -> (Hold, PathBuf) {
        let log = self.dir.join(format!("{name}.log"));
        let cmd = writer(&log, ignore_term, lines);
        let hold = Hold::spawn(self.dir, name, &self.endpoint, &self.url, args, &cmd, env);
        (hold, log)
    }
}

pub fn signal_group(pgid: i32, sig: i32) {
    // SAFETY: kill(2) on a process group this test created.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// The timestamps a writer logged.
pub fn stamps(log: &Path) -> Vec<f64> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().last()?.parse().ok())
        .collect()
}

/// The latest timestamp a writer logged (0 when none).
pub fn last_stamp(log: &Path) -> f64 {
    stamps(log).into_iter().fold(0.0, f64::max)
}

/// The earliest timestamp a writer logged (`f64::MAX` when none).
pub fn first_stamp(log: &Path) -> f64 {
    stamps(log).into_iter().fold(f64::MAX, f64::min)
}

pub async fn wait_for_lines(log: &Path, n: usize, limit: Duration) {
    let t = Instant::now();
    while stamps(log).len() < n {
        assert!(
            t.elapsed() < limit,
            "the command never ran under the lease ({}); leasectl's stderr:\n{}",
            log.display(),
            // HoldSite's holds write their stderr beside the log.
            std::fs::read_to_string(log.with_extension("stderr")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn faketime_env(file: &Path) -> Vec<(&'static str, String)> {
    let lib = libfaketime();
    assert!(
        Path::new(&lib).exists(),
        "libfaketime is missing ({lib}): run {SETUP} (it installs the faketime package)"
    );
    vec![
        ("LD_PRELOAD", lib),
        ("FAKETIME_TIMESTAMP_FILE", file.display().to_string()),
        ("FAKETIME_NO_CACHE", "1".into()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
    ]
}

/// A Python program (`python3 -c`) that handles every signal named in argv
/// by printing `got N` and exiting 3; prints `ready` once the handlers are
/// in place.
pub const SIGNAL_SCRIPT: &str = "import signal, sys\n\
def h(n, f):\n\
\x20   print('got %d' % n, flush=True)\n\
\x20   sys.exit(3)\n\
for n in sys.argv[1:]:\n\
\x20   signal.signal(int(n), h)\n\
print('ready', flush=True)\n\
while True:\n\
\x20   signal.pause()\n";
