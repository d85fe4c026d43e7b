//! `leasectl demo` end to end, in a real terminal (tmux): the rows of every
//! kind, the dying holder's lease going stale, the contender taking a lease
//! over, the two demo pods with their verdicts, `--json` from another process
//! agreeing, and nothing left behind — after `q`, and after a `kill -9`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::cli::bin_path;
use crate::common::tmux::Tmux;

/// Generous: the machine may be busy with other builds.
const LONG: Duration = Duration::from_secs(90);

/// Polls `f` every 200 ms until it returns Some, or panics after `limit`.
fn poll<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > limit {
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A process's (ppid, starttime), or None when gone or a zombie.
fn stat(pid: u32) -> Option<(u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(") ")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    if matches!(f.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    Some((f.get(1)?.parse().ok()?, f.get(19)?.parse().ok()?))
}

/// Every live descendant of `root` (and `root`), with its start time so a
/// recycled pid is not mistaken for a survivor.
fn tree(root: u32) -> Vec<(u32, u64)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() {
            if let Some((ppid, start)) = stat(pid) {
                all.push((pid, ppid, start));
            }
        }
    }
    let mut found: BTreeSet<u32> = BTreeSet::from([root]);
    loop {
        let before = found.len();
        for (pid, ppid, _) in &all {
            if found.contains(ppid) {
                found.insert(*pid);
            }
        }
        if found.len() == before {
            break;
        }
    }
    all.iter()
        .filter(|(pid, _, _)| found.contains(pid))
        .map(|(pid, _, start)| (*pid, *start))
        .collect()
}

fn survivors(procs: &[(u32, u64)]) -> Vec<u32> {
    procs
        .iter()
        .filter(|(pid, start)| stat(*pid).is_some_and(|(_, s)| s == *start))
        .map(|(pid, _)| *pid)
        .collect()
}

/// `{state}/pids` of a demo directory: (name, pid) pairs.
fn pids(demo_dir: &Path) -> Vec<(String, u32)> {
    std::fs::read_to_string(demo_dir.join(".leasectl-demo/pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, pid) = l.rsplit_once(' ')?;
            Some((name.to_owned(), pid.parse().ok()?))
        })
        .collect()
}

fn pid_of(demo_dir: &Path, name: &str) -> u32 {
    pids(demo_dir)
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} in the pids file"))
        .1
}

/// Waits until the demo in `dir` has written all its pids (its pods are started).
fn wait_started(dir: &Path) {
    poll(LONG, "the demo's pods to start", || {
        (pids(dir).len() == 4).then_some(())
    });
}

/// The one `leasectl-demo-*` directory under `tmp`, once it is complete.
fn demo_dir_in(tmp: &Path) -> PathBuf {
    poll(LONG, "the demo directory and its pods", || {
        let d = std::fs::read_dir(tmp)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("leasectl-demo-")
            })?;
        (pids(&d).len() == 4).then_some(d)
    })
}

/// The screen line that mentions `needle`.
fn line_of<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?}:\n{screen}"))
}

/// The STATE cell of a row: the one word of the row that names a state.
fn row_state(screen: &str, prefix: &str) -> String {
    const STATES: [&str; 5] = ["fresh", "stale", "suspect", "malformed", "absent"];
    line_of(screen, prefix)
        .split([' ', '│'])
        .find(|w| STATES.contains(w))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn demo_console_shows_every_state_and_both_pods_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(160, 40);
    let run = tmux.run(&format!(
        "TMPDIR={} {} demo --die-after 3s",
        tmp.path().display(),
        bin_path()
    ));
    let screen = tmux.wait_shown(&run, LONG, "the demo's rows", |s| {
        s.contains("healthy-holder")
            && s.contains("dying-holder")
            && s.contains("clock-6h-fast")
            && s.contains("ledger-db/")
            && s.contains("archive-db/")
    });
    assert!(
        screen.contains(" OPS "),
        "not in operations mode:\n{screen}"
    );
    assert_eq!(row_state(&screen, "orders-db/"), "fresh", "{screen}");
    assert_eq!(row_state(&screen, "audit-db/"), "suspect", "{screen}");
    assert_eq!(row_state(&screen, "ledger-db/"), "malformed", "{screen}");
    assert_eq!(row_state(&screen, "archive-db/"), "absent", "{screen}");
    assert_eq!(row_state(&screen, "metrics-db/"), "fresh", "{screen}");
    assert!(line_of(&screen, "metrics-db/").contains("best-effort-holder"));
    let dir = demo_dir_in(tmp.path());

    // The dying holder stops renewing: one TTL later its row is stale, while
    // the healthy holder's stays fresh.
    let screen = tmux.wait_for(LONG, "billing-db/ to go stale", |s| {
        s.contains("billing-db/") && row_state(s, "billing-db/") == "stale"
    });
    assert!(line_of(&screen, "billing-db/").contains("dying-holder"));
    assert_eq!(row_state(&screen, "orders-db/"), "fresh", "{screen}");
    // The contender takes events-db/ over once the crashed holder's lease expires.
    let screen = tmux.wait_for(LONG, "the contender on events-db/", |s| {
        s.contains("events-db/") && line_of(s, "events-db/").contains("contender")
    });
    assert_eq!(row_state(&screen, "events-db/"), "fresh", "{screen}");

    // Tab: the pod view shows both pods and the racing pair's verdicts.
    tmux.send(&["Tab"]);
    let healthy = pid_of(&dir, "pod healthy");
    let racing = pid_of(&dir, "pod racing");
    // Wait for a whole frame (a capture can land mid-redraw): both racers'
    // rows drawn to their lock column, and the process count in the title.
    let screen = tmux.wait_for(LONG, "both pods with their verdicts", |s| {
        s.contains("view  pod ")
            && s.contains("siblings_racing")
            && s.contains("waiting [pid")
            && s.contains("sleep 86400 & sleep 86400 & wait")
            && s.contains("processes 1/8")
            && s.lines()
                .filter(|l| {
                    l.contains("└ leasectl writer exec")
                        && (l.contains("holds") || l.contains("open"))
                })
                .count()
                == 2
    });
    let root = line_of(&screen, &format!("  {healthy}  "));
    assert!(
        root.contains("writer exec") && root.contains("take") && root.contains("holds"),
        "{root}"
    );
    let shell = line_of(&screen, "└ sh -c sleep 86400 & sleep 86400 & wait");
    assert!(shell.contains("inherit"), "{shell}");
    let racing_root = line_of(&screen, &format!("  {racing}  "));
    assert!(racing_root.contains("off"), "{racing_root}");
    let racers: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("└ leasectl writer exec"))
        .collect();
    assert_eq!(racers.len(), 2, "{screen}");
    assert!(racers.iter().all(|l| l.contains("take")), "{screen}");
    assert!(racers.iter().any(|l| l.contains("holds")), "{screen}");
    assert!(racers.iter().any(|l| l.contains("open")), "{screen}");
    // Exactly the demo's processes: two roots, a shell and its two sleeps,
    // two racers and the holder's sleep.
    assert!(screen.contains("processes 1/8"), "{screen}");

    let demo = pid_of(&dir, "demo");
    let procs = tree(demo);
    assert!(
        procs.len() >= 10,
        "demo, watchdog and 8 pod processes: {procs:?}"
    );
    tmux.send(&["q"]);
    let (code, shown) = tmux.wait_exit(&run, Duration::from_secs(20));
    assert_eq!(code, 0, "{shown}");
    poll(Duration::from_secs(10), "every demo process to end", || {
        survivors(&procs).is_empty().then_some(())
    });
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "the temporary demo directory was left behind"
    );
}

fn json(args: &[&str]) -> (i32, serde_json::Value) {
    let out = Command::new(bin_path())
        .args(["--json"])
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), doc)
}

fn state_of(doc: &serde_json::Value, prefix: &str) -> (String, String) {
    let p = doc["targets"][0]["prefixes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["prefix"] == prefix)
        .unwrap_or_else(|| panic!("no {prefix} in {doc:#}"));
    (
        p["state"].as_str().unwrap().to_owned(),
        p["record"]["instance_id"].as_str().unwrap_or("").to_owned(),
    )
}

#[test]
fn json_snapshot_from_another_process_agrees_with_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("demo");
    let tmux = Tmux::start(140, 30);
    let run = tmux.run(&format!(
        "{} demo --dir {} --die-after 2s",
        bin_path(),
        d.display()
    ));
    tmux.wait_shown(&run, LONG, "the demo's rows", |s| {
        s.contains("healthy-holder")
    });
    wait_started(&d);
    let target = format!("file://{}/", d.display());

    let (code, doc) = json(&["--no-pod", &target]);
    assert_eq!(code, 3, "stale/suspect/malformed need attention: {doc:#}");
    let prefixes: Vec<&str> = doc["targets"][0]["prefixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["prefix"].as_str().unwrap())
        .collect();
    assert_eq!(
        prefixes,
        [
            "archive-db/",
            "audit-db/",
            "billing-db/",
            "events-db/",
            "ledger-db/",
            "metrics-db/",
            "orders-db/"
        ],
        "the demo's internal directory is not a prefix"
    );
    assert_eq!(
        state_of(&doc, "orders-db/"),
        ("fresh".into(), "healthy-holder".into())
    );
    assert_eq!(
        state_of(&doc, "metrics-db/"),
        ("fresh".into(), "best-effort-holder".into())
    );
    assert_eq!(
        state_of(&doc, "audit-db/"),
        ("suspect".into(), "clock-6h-fast".into())
    );
    assert_eq!(state_of(&doc, "ledger-db/").0, "malformed");
    assert_eq!(state_of(&doc, "archive-db/").0, "absent");

    // The dying holder's lease goes stale; the contender takes events-db/ over.
    poll(LONG, "billing-db/ stale and events-db/ taken over", || {
        let (_, doc) = json(&["--no-pod", &target]);
        (state_of(&doc, "billing-db/") == ("stale".into(), "dying-holder".into())
            && state_of(&doc, "events-db/") == ("fresh".into(), "contender".into()))
            .then_some(())
    });

    // The pods, one at a time, as an operator would inspect them.
    let racing = pid_of(&d, "pod racing").to_string();
    let racing_dir = d.join(".leasectl-demo/pods/racing");
    let (_, doc) = json(&[
        "--pod-root",
        &racing,
        "--data-dir",
        racing_dir.to_str().unwrap(),
        &target,
    ]);
    let kinds: BTreeSet<&str> = doc["pod"]["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["siblings_racing", "waiting"]),
        "{doc:#}"
    );
    let healthy = pid_of(&d, "pod healthy").to_string();
    let healthy_dir = d.join(".leasectl-demo/pods/healthy");
    let out = Command::new(bin_path())
        .args(["--json", "--pod-root", &healthy, "--data-dir"])
        .arg(&healthy_dir)
        .arg(&target)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["pod"]["verdicts"].as_array().unwrap().is_empty(),
        "{doc:#}"
    );
    let root = doc["pod"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_u64().map(|n| n.to_string()) == Some(healthy.clone()))
        .unwrap();
    assert_eq!(
        (root["duty"].as_str(), root["lock"].as_str()),
        (Some("take"), Some("holds"))
    );

    let procs = tree(pid_of(&d, "demo"));
    tmux.send(&["q"]);
    let (code, shown) = tmux.wait_exit(&run, Duration::from_secs(20));
    assert_eq!(code, 0, "{shown}");
    poll(Duration::from_secs(10), "every demo process to end", || {
        survivors(&procs).is_empty().then_some(())
    });
    // A --dir is kept.
    assert!(d.join("orders-db").is_dir());
}

/// A crash (`kill -9` of the demo): the watchdog stops the pods and removes
/// the temporary directory.
#[test]
fn nothing_survives_a_killed_demo() {
    let tmp = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(140, 30);
    let run = tmux.run(&format!(
        "TMPDIR={} {} demo",
        tmp.path().display(),
        bin_path()
    ));
    tmux.wait_shown(&run, LONG, "the demo's rows", |s| {
        s.contains("healthy-holder")
    });
    let dir = demo_dir_in(tmp.path());
    let demo = pid_of(&dir, "demo");
    // Wait until the racing pod has all its processes (2 racers + a sleep).
    let procs = poll(LONG, "the whole demo process tree", || {
        let t = tree(demo);
        (t.len() >= 10).then_some(t)
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(demo as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    poll(Duration::from_secs(15), "every demo process to end", || {
        survivors(&procs).is_empty().then_some(())
    });
    poll(
        Duration::from_secs(15),
        "the temporary directory to go",
        || {
            std::fs::read_dir(tmp.path())
                .unwrap()
                .next()
                .is_none()
                .then_some(())
        },
    );
}

/// Usage errors come before anything starts: no terminal, a `--dir` that is
/// not a demo's. Nothing is left behind.
#[test]
fn demo_refuses_without_a_terminal_or_with_a_foreign_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(bin_path())
        .arg("demo")
        .env("TMPDIR", tmp.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs a terminal"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());

    let other = tmp.path().join("not-a-demo");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("precious.txt"), "keep me").unwrap();
    let out = Command::new(bin_path())
        .args(["demo", "--dir"])
        .arg(&other)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not empty"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(other.join("precious.txt").exists());
    assert!(!other.join(".leasectl-demo").exists());
}
