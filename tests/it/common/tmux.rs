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
        let t = Self { name };
        // Keys typed before the shell's line editor has the terminal are
        // echoed by the terminal itself and then drawn a second time by the
        // editor, which does not know where the first echo left the cursor:
        // the two drawings of the typed line overlap the lines printed after
        // it (seen under load: the begin marker drawn over the echo). Bash's
        // readline takes the terminal before it shows the prompt.
        t.wait_for(Duration::from_secs(30), "the shell's prompt", |s| {
            s.lines().any(|l| l.trim_end() == "$")
        });
        t
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

    /// Types a literal line and Enter as an answer to a prompt of the
    /// command `to` (started by [`Tmux::run`], the only way a test types a
    /// shell command, so its output can always be told apart from the line
    /// typed).
    pub fn answer(&self, to: &Typed, line: &str) {
        let _ = to;
        self.type_line(line);
    }

    /// Types `line` exactly as a person would, at a shell whose prompt
    /// prints a marker of its own (the README tutorial's `PROMPT_COMMAND`):
    /// what the line shows is read from [`Tmux::history`] between markers,
    /// the typed line left out, never from the screen as a whole. Every
    /// other test starts its command with [`Tmux::run`].
    pub fn type_at_marked_prompt(&self, line: &str) {
        self.type_line(line);
    }

    /// Types a literal line and Enter.
    fn type_line(&self, line: &str) {
        assert!(tmux()
            .args(["send-keys", "-t", &self.name, "-l", line])
            .status()
            .unwrap()
            .success());
        self.send(&["Enter"]);
    }

    /// Types `command` at the shell, framed by two markers: a begin marker
    /// printed before it runs and an end marker with its exit status after.
    /// Each marker is assembled by `printf` from two pieces and carries an id
    /// made at run time, so the typed line (wherever the terminal wraps it)
    /// never contains one; [`Tmux::shown`] reads only what comes after the
    /// begin marker.
    pub fn run(&self, command: &str) -> Typed {
        let id = format!("{:08x}", rand::random::<u32>());
        self.type_line(&format!(
            "printf '%s-%s\\n' LCT-BEGIN {id}; {command} ; printf '%s-%s:%s\\n' LCT-END {id} \"$?\""
        ));
        Typed { id }
    }

    /// What the command `run` started shows, never its typed line: while a
    /// full-screen program is on the alternate screen, that screen (which
    /// starts blank); otherwise the lines after `run`'s begin marker, from
    /// the pane's history on (empty until the shell has started it).
    pub fn shown(&self, run: &Typed) -> String {
        if self.alternate_screen() {
            return self.screen();
        }
        let out = tmux()
            .args(["capture-pane", "-p", "-S", "-", "-t", &self.name])
            .output()
            .unwrap();
        let all = String::from_utf8_lossy(&out.stdout).into_owned();
        // Anywhere in a line: the marker is printed at the start of a line,
        // but the terminal may have drawn it over an echo of the typed line
        // (whose rest then follows it on that line). The typed line never
        // contains the marker (see `run`), so no echo of it can match.
        let begin = run.begin();
        match all.lines().position(|l| l.contains(&begin)) {
            Some(i) => all.lines().skip(i + 1).collect::<Vec<_>>().join("\n"),
            None => String::new(),
        }
    }

    /// Waits until what `run` shows satisfies `pred`, up to `limit`; returns it.
    pub fn wait_shown(
        &self,
        run: &Typed,
        limit: Duration,
        what: &str,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let start = Instant::now();
        loop {
            let s = self.shown(run);
            if pred(&s) {
                return s;
            }
            if start.elapsed() > limit {
                panic!(
                    "timed out waiting for {what}; shown:\n{s}\nscreen:\n{}",
                    self.screen()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until `run`'s command has ended; returns its exit status and what
    /// it showed before its end marker.
    pub fn wait_exit(&self, run: &Typed, limit: Duration) -> (i32, String) {
        let s = self.wait_shown(run, limit, "the command to end", |s| {
            s.lines().any(|l| run.ended(l).is_some())
        });
        let mut shown = Vec::new();
        for line in s.lines() {
            if let Some((before, code)) = run.ended(line) {
                // Output without a final newline ends on the marker's line.
                if !before.is_empty() {
                    shown.push(before);
                }
                return (code, shown.join("\n"));
            }
            shown.push(line);
        }
        unreachable!("the end marker was seen")
    }

    /// Whether a full-screen program holds the alternate screen.
    fn alternate_screen(&self) -> bool {
        let out = tmux()
            .args(["display-message", "-p", "-t", &self.name, "#{alternate_on}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
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

/// A command started by [`Tmux::run`]: the id of its markers.
#[derive(Clone)]
pub struct Typed {
    id: String,
}

impl Typed {
    /// The line printed before the command runs.
    fn begin(&self) -> String {
        format!("LCT-BEGIN-{}", self.id)
    }

    /// The start of the line printed after it ended (its status follows).
    fn end(&self) -> String {
        format!("LCT-END-{}:", self.id)
    }

    /// When `line` shows the end marker with its exit status, wherever in the
    /// line it is drawn: what comes before the marker on that line (the
    /// command's last output when it did not end with a newline) and the
    /// status. The typed line never contains the marker (see [`Tmux::run`]).
    fn ended<'a>(&self, line: &'a str) -> Option<(&'a str, i32)> {
        let end = self.end();
        let at = line.find(&end)?;
        let rest = &line[at + end.len()..];
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let code = rest[..digits].parse().ok()?;
        Some((&line[..at], code))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = tmux().args(["kill-session", "-t", &self.name]).status();
    }
}
