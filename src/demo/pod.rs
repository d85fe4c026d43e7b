//! The demo pods (real process trees under `leasectl writer exec`) and the
//! watchdog process that removes them if the demo dies without saying goodbye.

use crate::exit::tell;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::{DemoDir, DemoError, STATE_DIR};
use crate::exit::Exit;
use crate::writer::scan::ScanOptions;
use crate::writer::{ENABLE, HELD};

/// A running demo pod: its root process, leader of its own process group.
pub(crate) struct DemoPod {
    /// The pod's data directory (holds `.writer.lock`).
    pub data_dir: PathBuf,
    child: Child,
}

impl DemoPod {
    /// The root's pid (= its process group id).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The scan that shows exactly this pod: its root's subtree and its lock.
    pub(crate) fn scan_options(&self) -> ScanOptions {
        ScanOptions {
            proc_root: PathBuf::from("/proc"),
            data_dirs: vec![self.data_dir.clone()],
            pod_root: Some(self.pid()),
            node: false,
        }
    }

    /// SIGKILLs the whole process group and reaps the root.
    pub(super) fn kill(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for DemoPod {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The watchdog's end of the conversation: lines on its stdin.
pub(super) struct Watchdog {
    pub(super) stdin: Option<ChildStdin>,
    pub(super) child: Child,
}

impl Watchdog {
    pub(super) fn tell(&mut self, line: &str) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{line}");
            let _ = s.flush();
        }
    }

    /// A clean goodbye: the demo has cleaned up itself.
    pub(super) fn dismiss(mut self) {
        self.tell("clean");
        self.stdin.take();
        let _ = self.child.wait();
    }
}

pub(super) fn spawn_watchdog(leasectl: &Path, dir: &DemoDir) -> Result<Watchdog, DemoError> {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.log_file())
        .map_err(|source| DemoError::Spawn {
            what: "the watchdog's log".into(),
            source,
        })?;
    let mut child = Command::new(leasectl)
        .arg0("leasectl")
        .args(["demo", "--watchdog"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(log)
        // Its own group: a signal to the terminal's foreground group spares it.
        .process_group(0)
        .spawn()
        .map_err(|source| DemoError::Spawn {
            what: "the demo watchdog".into(),
            source,
        })?;
    Ok(Watchdog {
        stdin: child.stdin.take(),
        child,
    })
}

/// The racing pod's script: two children that both take (the lease is on in
/// their environment only, so their parent never took and stamped).
/// `leasectl` is found through `PATH` (a link in the state directory), so
/// the pod view shows `leasectl writer exec …` rather than a build path.
pub(super) const RACING_SCRIPT: &str =
    "CLOUD_WRITER_LEASE=1 leasectl writer exec --data-dir \"$1\" --wait 24h -- sleep 86400 & \
CLOUD_WRITER_LEASE=1 leasectl writer exec --data-dir \"$1\" --wait 24h -- sleep 86400 & wait";

/// The healthy pod's command under its root: a shell (inherit) with two workers.
pub(super) const HEALTHY_SCRIPT: &str = "sleep 86400 & sleep 86400 & wait";

pub(super) fn spawn_pod(
    leasectl: &Path,
    dir: &DemoDir,
    name: &'static str,
    log: &fs::File,
) -> Result<DemoPod, DemoError> {
    let data_dir = dir.pod_dir(name);
    let mut cmd = Command::new(leasectl);
    cmd.arg0("leasectl")
        .args(["writer", "exec", "--data-dir"])
        .arg(&data_dir)
        .env_remove(ENABLE)
        .env_remove(HELD)
        .env("LEASECTL_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    match name {
        "healthy" => {
            cmd.env(ENABLE, "1")
                .args(["--wait", "10s", "--", "sh", "-c", HEALTHY_SCRIPT]);
        }
        _ => {
            let bin = dir.state_dir().join("bin");
            let link = bin.join("leasectl");
            let spawn_err = |source| DemoError::Spawn {
                what: format!("the {name} pod"),
                source,
            };
            fs::create_dir_all(&bin).map_err(spawn_err)?;
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(leasectl, &link).map_err(spawn_err)?;
            let mut path = OsString::from(bin.as_os_str());
            if let Some(p) = std::env::var_os("PATH") {
                path.push(":");
                path.push(p);
            }
            cmd.env("PATH", path)
                .args(["--", "sh", "-c", RACING_SCRIPT, "sh"])
                .arg(&data_dir);
        }
    }
    let err_log = log.try_clone().map_err(|source| DemoError::Spawn {
        what: format!("the {name} pod"),
        source,
    })?;
    cmd.stderr(err_log).process_group(0);
    let me = std::process::id();
    // SAFETY: runs in the forked child before exec; prctl and getppid are
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            if nix::unistd::getppid().as_raw() as u32 != me {
                return Err(std::io::Error::other(
                    "the demo exited before the pod started",
                ));
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|source| DemoError::Spawn {
        what: format!("the {name} pod ({})", leasectl.display()),
        source,
    })?;
    Ok(DemoPod { data_dir, child })
}

/// `leasectl demo --watchdog` (internal): reads lines from stdin — `group
/// PGID`, `remove DIR`, `clean` — until end of file. If the demo closed the
/// pipe without `clean` (it crashed or was killed), SIGKILLs every group and
/// removes every directory it was told of (only a demo directory: one that
/// holds [`STATE_DIR`]). Returns the exit code.
pub(crate) fn watchdog() -> Exit {
    use nix::sys::signal::{signal, SigHandler};
    // The terminal's hang-up and Ctrl-C are for the demo, not for us.
    for s in [Signal::SIGHUP, Signal::SIGINT, Signal::SIGQUIT] {
        // SAFETY: installing SIG_IGN has no handler code to be unsafe.
        let _ = unsafe { signal(s, SigHandler::SigIgn) };
    }
    let mut groups = BTreeSet::new();
    let mut remove = Vec::new();
    let mut clean = false;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.split_once(' ') {
            Some(("group", g)) => {
                if let Ok(g) = g.trim().parse::<i32>() {
                    if g > 1 {
                        groups.insert(g);
                    }
                }
            }
            Some(("remove", d)) => remove.push(PathBuf::from(d)),
            _ if line.trim() == "clean" => clean = true,
            _ => {}
        }
    }
    if clean {
        return Exit::Ok;
    }
    tell(format_args!(
        "demo watchdog: the demo ended without cleaning up; stopping its pods"
    ));
    for g in groups {
        let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
    }
    for d in remove {
        if d.join(STATE_DIR).is_dir() {
            let _ = fs::remove_dir_all(&d);
        }
    }
    Exit::Ok
}
