//! The README's tutorial ("Ten minutes with a real S3 service"), typed as
//! it is written (issue 45 §1): its commands are read from README.md itself,
//! each `$ ` line typed in order into one bash in tmux (background jobs,
//! `$holder`, the alias and the takeover's confirmation included), the
//! console's keys from the table under its step; after each command, the
//! lines the README shows under it must be in what the terminal shows, in
//! order (`…` stands for any text), and each console key must show what its
//! row names. A step whose output no longer matches the README fails here.
//!
//! The shell runs in network and user namespaces of its own when the kernel
//! allows (`unshare -rn`), so its moto on port 5000 and `serve` on 9898
//! collide with nothing; otherwise on this host's loopback, when those ports
//! are free. Its HOME (the audit log, the config) is a temporary directory;
//! `target/release`, `.venv/moto-5.2.5` and `scripts` there are links to this
//! test's binary, the moto of `$LEASECTL_VENV_DIR` and the repository's
//! scripts. Every process started from that directory is killed at the end.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::tmux::Tmux;
use crate::common::{bin_path, repo, SETUP};

/// One `$ ` line of the tutorial: the command typed, the lines shown under
/// it, and the console's keys when it opens the console.
#[derive(Debug, Default)]
struct Step {
    command: String,
    expect: Vec<String>,
    /// (key, what the screen shows then); the first key is `None`: the
    /// console as it opens.
    keys: Vec<(Option<String>, Vec<String>)>,
}

/// The tutorial's steps, as README.md writes them: the `console` blocks'
/// `$ ` lines and the lines under each, and a key table's rows (`| `KEY` |
/// … `shown` … |`) after the block of the command that opens the console.
fn tutorial() -> Vec<Step> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section: Vec<&str> = readme
        .lines()
        .skip_while(|l| *l != "## Ten minutes with a real S3 service")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect();
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    // A block is indented as its list item is: its lines lose that much.
    let mut indent = 0;
    for raw in section {
        let l = raw.trim_start();
        if l.starts_with("```") {
            in_console = !in_console && l == "```console";
            indent = raw.len() - l.len();
            continue;
        }
        if in_console {
            let line = raw.get(indent..).unwrap_or(l);
            match line.strip_prefix("$ ") {
                Some(c) => steps.push(Step {
                    command: c.to_owned(),
                    ..Step::default()
                }),
                None => steps
                    .last_mut()
                    .expect("output before a command")
                    .expect
                    .push(line.to_owned()),
            }
            continue;
        }
        if let Some(row) = l.strip_prefix("| ") {
            let cells: Vec<&str> = row.split(" | ").collect();
            if cells.len() < 2 || cells[0].starts_with("key") || cells[0].starts_with("---") {
                continue;
            }
            let key = cells[0].trim().trim_matches('`');
            let key = (!key.starts_with('(')).then(|| key.to_owned());
            let shown: Vec<String> = cells[1]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
            steps
                .last_mut()
                .expect("a key table before a command")
                .keys
                .push((key, shown));
        }
    }
    steps
}

/// Whether `line` matches `pattern`, where `…` stands for any text (and the
/// confirmation's answer, typed by this test, is not compared).
fn matches(pattern: &str, line: &str) -> bool {
    let pattern = match pattern.find("to confirm: ") {
        Some(i) => &pattern[..i + "to confirm:".len()],
        None => pattern,
    };
    let line = line.trim_end();
    let parts: Vec<&str> = pattern.split('…').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    let open_end = pattern.ends_with('…') || pattern.ends_with("to confirm:");
    if !line.starts_with(first) || (!open_end && !line.ends_with(last)) {
        return false;
    }
    let mut rest = &line[first.len()..];
    for (i, p) in parts.iter().enumerate().skip(1) {
        if p.is_empty() {
            continue;
        }
        let last_part = i == parts.len() - 1;
        match if last_part && !open_end {
            rest.rfind(p)
        } else {
            rest.find(p)
        } {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    true
}

/// The README's lines for a step, in order, within `output` (any other line
/// may stand between them); the first that is missing, if one is.
fn missing<'a>(expect: &'a [String], output: &[String]) -> Option<&'a str> {
    let mut at = 0;
    for e in expect.iter().filter(|e| e.as_str() != "…") {
        match output[at..].iter().position(|l| matches(e, l)) {
            Some(i) => at += i + 1,
            None => return Some(e),
        }
    }
    None
}

/// How the shell is isolated: `unshare` arguments and whether it has a
/// loopback of its own.
fn isolation() -> Option<Vec<&'static str>> {
    let works = |args: &[&str]| {
        Command::new("unshare")
            .args(args)
            .args(["sh", "-c", "ip link set lo up"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    [vec!["-rn"], vec!["-n"]].into_iter().find(|a| works(a))
}

/// The directory the tutorial runs in, with the links it needs.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bin = PathBuf::from(bin_path());
    let venv = std::env::var_os("LEASECTL_VENV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv"));
    let moto = venv.join("moto-5.2.5");
    assert!(
        moto.join("bin/python").exists(),
        "moto is not set up in {}: run {SETUP}",
        venv.display()
    );
    std::fs::create_dir_all(d.join("target")).unwrap();
    std::fs::create_dir_all(d.join(".venv")).unwrap();
    std::fs::create_dir_all(d.join("home")).unwrap();
    std::os::unix::fs::symlink(bin.parent().unwrap(), d.join("target/release")).unwrap();
    std::os::unix::fs::symlink(&moto, d.join(".venv/moto-5.2.5")).unwrap();
    std::os::unix::fs::symlink(repo().join("scripts"), d.join("scripts")).unwrap();
    dir
}

/// Kills every process whose working directory is under `dir` (what the
/// tutorial started and left running, should it fail half-way).
fn kill_under(dir: &Path) {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c.starts_with(dir)) {
            // SAFETY: kill(2) on a process this test's shell started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// The session, and the directory whose processes die with it.
struct Session {
    tmux: Tmux,
    dir: tempfile::TempDir,
}

impl Drop for Session {
    /// The processes first, then the session (the tmux field's own drop).
    fn drop(&mut self) {
        kill_under(self.dir.path());
    }
}

/// The marker the shell prints before each prompt, with the last status.
const MARKER: &str = "@@tutorial-status ";

/// How many prompts the shell has printed: wherever the marker stands, as
/// a job in the background may have written the start of a line just
/// before it.
fn markers(history: &str) -> usize {
    history.matches(MARKER).count()
}

/// `line` without the prompts' markers in it (`@@tutorial-status 0`).
fn unmarked(line: &str) -> String {
    let mut rest = line;
    let mut kept = String::new();
    while let Some(at) = rest.find(MARKER) {
        kept.push_str(&rest[..at]);
        let after = &rest[at + MARKER.len()..];
        rest = after.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    kept.push_str(rest);
    kept
}

#[test]
fn the_readme_tutorial_works_as_written() {
    let steps = tutorial();
    assert!(
        steps.len() >= 15 && steps.iter().any(|s| !s.keys.is_empty()),
        "the tutorial was not read from README.md: {steps:#?}"
    );
    let dir = workdir();
    let d = dir.path().to_owned();
    let home = d.join("home");
    let path = std::env::var("PATH").unwrap_or_default();
    let env: Vec<String> = vec![
        format!("PATH={path}"),
        format!("HOME={}", home.display()),
        "TERM=xterm-256color".into(),
        "LANG=C.UTF-8".into(),
        "PS1=$ ".into(),
        format!("PROMPT_COMMAND=printf '{MARKER}%s\\n' $?"),
    ];
    let shell = "bash --norc --noprofile";
    let mut argv: Vec<String> = vec!["env".into(), "-i".into()];
    argv.extend(env);
    match isolation() {
        Some(u) => {
            argv.push("unshare".into());
            argv.extend(u.iter().map(|s| s.to_string()));
            argv.extend([
                "sh".into(),
                "-c".into(),
                format!("ip link set lo up && exec {shell}"),
            ]);
        }
        None => {
            for port in [5000, 9898] {
                assert!(
                    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
                    "port {port} is taken and no network namespace can be made here: \
                     the tutorial's servers cannot start"
                );
            }
            argv.extend(shell.split(' ').map(str::to_owned));
        }
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let s = Session {
        tmux: Tmux::start_command(220, 50, &d, &argv),
        dir,
    };
    let t = &s.tmux;
    t.wait_for(Duration::from_secs(20), "the shell", |h| h.contains(MARKER));
    let started = Instant::now();
    for step in &steps {
        let before = markers(&t.history());
        t.type_at_marked_prompt(&step.command);
        if !step.keys.is_empty() {
            console(t, step);
        }
        if step.expect.iter().any(|e| e.contains("to confirm: ")) {
            t.wait_for(Duration::from_secs(60), "the confirmation", |s| {
                s.lines().any(|l| l.trim_end().ends_with("to confirm:"))
            });
            let answer = step
                .expect
                .iter()
                .find_map(|e| e.split("to confirm: ").nth(1))
                .unwrap();
            t.type_at_marked_prompt(answer);
        }
        let limit = Instant::now() + Duration::from_secs(90);
        while markers(&t.history()) <= before {
            assert!(
                Instant::now() < limit,
                "`{}` did not end; the terminal:\n{}",
                step.command,
                t.history()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // What a job in the background (or one just killed) prints comes
        // after the prompt: a person reads it before typing on.
        let limit = Instant::now() + Duration::from_secs(20);
        while missing(&step.expect, &output_of(t, &step.command)).is_some()
            && Instant::now() < limit
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        if step.command.trim_end().ends_with("=$!") {
            std::thread::sleep(Duration::from_secs(1));
        }
        let out = output_of(t, &step.command);
        if let Some(m) = missing(&step.expect, &out) {
            panic!(
                "README.md's tutorial: after `{}` the README shows\n  {m}\nwhich the terminal does not (in that order):\n{}",
                step.command,
                out.join("\n")
            );
        }
    }
    // Kept for a look when LEASECTL_TEST_TUTORIAL names a file.
    if let Some(path) = std::env::var_os("LEASECTL_TEST_TUTORIAL") {
        std::fs::write(path, t.history()).unwrap();
    }
    eprintln!(
        "the README's tutorial: {} commands in {:.0} s",
        steps.len(),
        started.elapsed().as_secs_f64()
    );
}

/// What the terminal showed after `command` was typed (the typed line
/// itself excluded), the prompts' markers left out and a prompt before a
/// line a background job printed after it (`$ leasectl: …`) taken off.
fn output_of(t: &Tmux, command: &str) -> Vec<String> {
    let h = t.history();
    let lines: Vec<&str> = h.lines().collect();
    // After its prompt, or alone on a line when a job in the background
    // printed after the prompt.
    let typed = format!("$ {command}");
    let Some(start) = lines.iter().rposition(|l| {
        let l = l.trim_end();
        l == typed.trim_end() || l == command.trim_end()
    }) else {
        return Vec::new();
    };
    lines[start + 1..]
        .iter()
        .filter(|l| !l.starts_with(MARKER))
        .map(|l| unmarked(l))
        .map(|l| l.strip_prefix("$ ").map(str::to_owned).unwrap_or(l))
        .collect()
}

/// The console step: each key of its table, and what the screen must then show.
fn console(t: &Tmux, step: &Step) {
    for (key, shown) in &step.keys {
        if let Some(k) = key {
            // tmux's key names are the README's (`Enter`, `?`, `q`).
            t.send(&[k.as_str()]);
        }
        if key.as_deref() == Some("q") {
            return;
        }
        let what = format!("{key:?} to show {shown:?}");
        t.wait_for(Duration::from_secs(30), &what, |s| {
            // The console's own screen (the typed command is not on it).
            !s.contains(&format!("$ {}", step.command))
                && shown.iter().all(|w| s.contains(w.as_str()))
        });
    }
}

#[test]
fn the_tutorial_reader_reads_the_readme() {
    let steps = tutorial();
    let takeover = steps
        .iter()
        .find(|s| s.command.contains("takeover"))
        .expect("a takeover step");
    assert!(takeover
        .expect
        .iter()
        .any(|e| e.ends_with("to confirm: db1/")));
    let console = steps
        .iter()
        .find(|s| !s.keys.is_empty())
        .expect("the console step");
    assert_eq!(console.keys[0].0, None);
    assert!(console.keys.iter().any(|(k, _)| k.as_deref() == Some("q")));
    assert!(matches(
        "LEASES OK - 1 lease (1 fresh, 0 stale, 0 suspect, 0 malformed) | …",
        "LEASES OK - 1 lease (1 fresh, 0 stale, 0 suspect, 0 malformed) | fresh=1;;;0"
    ));
    assert!(!matches("exit 2", "exit 0"));
    assert!(matches("…  outcome  …  reason: tutorial  → taken, then released …", "2026-12-07T05:13:45Z  outcome  root@vm  s3://b/  reason: tutorial  → taken, then released (x)"));
    assert!(matches(
        "This replaces the lease above (guarded, then release). Type the prefix (db1/) to confirm: db1/",
        "This replaces the lease above (guarded, then release). Type the prefix (db1/) to confirm: db1/"
    ));
    assert!(!matches("state    stale: …", "state    fresh: renewed"));
}
