//! A tmux session driven like an operator would: type keys, read the screen.
#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

/// tmux on a private server socket, so the tests never touch the user's sessions.
fn tmux() -> Command {
    let mut c = Command::new("tmux");
    c.args(["-L", "leasectl-tests"]);
    c
}

pub struct Tmux {
    pub name: String,
}

impl Tmux {
    /// A detached session of `w`×`h` running a plain bash.
    pub fn start(w: u16, h: u16) -> Self {
        if Command::new("tmux").arg("-V").output().is_err() {
            // (checked with the user's tmux: only whether it is installed)
            panic!("tmux is not installed: run scripts/setup-test-env.sh");
        }
        let name = format!("leasectl-test-{:08x}", rand::random::<u32>());
        let ok = tmux()
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                &w.to_string(),
                "-y",
                &h.to_string(),
            ])
            .args([
                "env",
                "PS1=$ ",
                "TERM=xterm-256color",
                "bash",
                "--norc",
                "--noprofile",
            ])
            .status()
            .expect("tmux new-session")
            .success();
        assert!(ok, "tmux new-session failed");
        Self { name }
    }

    /// A detached session of `w`×`h` in directory `dir` running `argv` (the
    /// caller's shell, environment and all).
    pub fn start_command(w: u16, h: u16, dir: &std::path::Path, argv: &[&str]) -> Self {
        if Command::new("tmux").arg("-V").output().is_err() {
            panic!("tmux is not installed: run scripts/setup-test-env.sh");
        }
        let name = format!("leasectl-test-{:08x}", rand::random::<u32>());
        let ok = tmux()
            .args(["new-session", "-d", "-s", &name, "-x", &w.to_string()])
            .args(["-y", &h.to_string(), "-c"])
            .arg(dir)
            .args(argv)
            .status()
            .expect("tmux new-session")
            .success();
        assert!(ok, "tmux new-session failed");
        Self { name }
    }

    /// Everything the session's terminal has shown on its main screen,
    /// scrollback included, wrapped lines joined.
    pub fn history(&self) -> String {
        let out = tmux()
            .args(["capture-pane", "-p", "-J", "-S", "-", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The session name (to attach from another thread).
    pub fn clone_name(&self) -> String {
        self.name.clone()
    }

    /// A handle on an existing session (its drop kills the session: forget it
    /// when the original owner should).
    pub fn attach(name: &str) -> Self {
        Self {
            name: name.to_owned(),
        }
    }

    /// Types literal text (no Enter).
    pub fn type_text(&self, text: &str) {
        assert!(tmux()
            .args(["send-keys", "-t", &self.name, "-l", text])
            .status()
            .unwrap()
            .success());
    }

    /// Types `keys` (tmux key names, e.g. "q", "Enter", "Down").
    pub fn send(&self, keys: &[&str]) {
        let ok = tmux()
            .args(["send-keys", "-t", &self.name])
            .args(keys)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    /// Types a literal line and Enter.
    pub fn type_line(&self, line: &str) {
        assert!(tmux()
            .args(["send-keys", "-t", &self.name, "-l", line])
            .status()
            .unwrap()
            .success());
        self.send(&["Enter"]);
    }

    /// The visible screen as text.
    pub fn screen(&self) -> String {
        let out = tmux()
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen satisfies `pred`, up to `limit`; returns the screen.
    pub fn wait_for(&self, limit: Duration, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            if start.elapsed() > limit {
                panic!("timed out waiting for {what}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = tmux().args(["kill-session", "-t", &self.name]).status();
    }
}
