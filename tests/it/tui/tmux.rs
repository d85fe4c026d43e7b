//! End to end in a real terminal (tmux): the console starts on a local store,
//! shows the rows, quits with `q` and leaves the shell usable; with a real pod,
//! Tab shows the pod's processes and duties.

use std::time::Duration;

use crate::common::bin_path;
use crate::common::tmux::{Tmux, Typed};
use crate::writer_support::{scan_until, spawn_armed, wrapper};
use leasectl::writer::scan::LockState;

/// Quits the console of `run` with `q`: it exits 0 and leaves no alternate
/// screen behind (`word`, which only the console draws, is gone).
fn quit_leaving_no_screen(tmux: &Tmux, run: &Typed, word: &str) {
    tmux.send(&["q"]);
    let (code, screen) = tmux.wait_exit(run, Duration::from_secs(10));
    assert_eq!(code, 0, "{screen}");
    assert!(
        !screen.contains(word),
        "alternate screen left behind:\n{screen}"
    );
}

#[test]
fn console_shows_rows_and_quits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let now = chrono::Utc::now();
    for (p, age, ttl) in [("alpha", 2, 30), ("beta", 300, 30)] {
        let d = dir.path().join(p);
        std::fs::create_dir_all(&d).unwrap();
        let t = (now - chrono::Duration::seconds(age)).to_rfc3339();
        std::fs::write(
            d.join("LEASE"),
            format!(r#"{{"instance_id":"holder-{p}","acquired_at":"{t}","renewed_at":"{t}","ttl_s":{ttl}}}"#),
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.path().join("gamma")).unwrap();

    let tmux = Tmux::start(120, 30);
    let run = tmux.run(&format!("{} file://{}/", bin_path(), dir.path().display()));
    let screen = tmux.wait_shown(&run, Duration::from_secs(15), "the lease rows", |s| {
        s.contains("holder-alpha") && s.contains("stale") && s.contains("absent")
    });
    assert!(
        screen.contains("alpha/") && screen.contains("fresh"),
        "{screen}"
    );
    tmux.send(&["Down"]);
    quit_leaving_no_screen(&tmux, &run, "PREFIX");
    // The terminal is sane again: the shell echoes and runs a command.
    let sane = tmux.run("echo sane-$((40+2))");
    tmux.wait_shown(&sane, Duration::from_secs(5), "the shell to answer", |s| {
        s.contains("sane-42")
    });
}

/// A real pod (root `writer exec` wrapper, a shell, two sleeps) next to a
/// file:/// target: Tab shows the pod view with its processes and duties, Tab
/// again the leases, `q` quits cleanly.
#[test]
fn console_pod_view_shows_a_real_pod() {
    let store = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(store.path().join("alpha")).unwrap();
    let data = tempfile::tempdir().unwrap();
    let root = spawn_armed(wrapper(
        data.path(),
        "2s",
        &["sh", "-c", "sleep 31 & sleep 32 & wait"],
    ));
    scan_until(root.pid, data.path(), |s| {
        s.processes.len() == 4
            && s.processes
                .iter()
                .any(|p| p.pid == root.pid && p.lock == LockState::Holds)
    });

    let tmux = Tmux::start(140, 30);
    let run = tmux.run(&format!(
        "{} --refresh 1s --pod-root {} --data-dir {} file://{}/",
        bin_path(),
        root.pid,
        data.path().display(),
        store.path().display()
    ));
    tmux.wait_shown(&run, Duration::from_secs(15), "the lease rows", |s| {
        s.contains("alpha/") && s.contains("absent") && s.contains("Tab leases/pod")
    });
    tmux.send(&["Tab"]);
    let root_row = format!("{}", root.pid);
    let screen = tmux.wait_for(Duration::from_secs(10), "the pod view", |s| {
        s.contains("view  pod ")
            && s.contains("sleep 31")
            && s.contains("sleep 32")
            && s.contains("writer exec")
    });
    assert!(!screen.contains("PREFIX"), "{screen}");
    assert!(screen.contains("no verdicts"), "{screen}");
    let root_line = screen
        .lines()
        .find(|l| l.contains(&root_row) && l.contains("writer exec"))
        .unwrap_or_else(|| panic!("no row for the root:\n{screen}"));
    assert!(
        root_line.contains("take") && root_line.contains("holds"),
        "{root_line}"
    );
    let shell_line = screen
        .lines()
        .find(|l| l.contains("└ sh -c sleep 31"))
        .unwrap_or_else(|| panic!("no row for the shell:\n{screen}"));
    assert!(shell_line.contains("inherit"), "{shell_line}");
    // The sleeps see their grandparent's stamp: duty take, but they never
    // open the lock, so no verdict.
    let sleep_line = screen
        .lines()
        .find(|l| l.contains("└ sleep 31"))
        .unwrap_or_else(|| panic!("no row for a sleep:\n{screen}"));
    assert!(
        sleep_line.contains("take") && sleep_line.contains("none"),
        "{sleep_line}"
    );
    // The selected row's duty sentence; move down to the shell.
    tmux.send(&["Down"]);
    tmux.wait_for(Duration::from_secs(5), "the shell's duty sentence", |s| {
        s.contains("writer lease inherit:")
    });

    tmux.send(&["Tab"]);
    tmux.wait_for(Duration::from_secs(5), "the leases view again", |s| {
        s.contains("view  leases ") && s.contains("PREFIX")
    });
    quit_leaving_no_screen(&tmux, &run, "COMMAND");
}

/// `leasectl takeover` asks for the prefix to be typed: a prefix holding an
/// invisible character (a zero-width space) is accepted as the prompt shows it
/// (escaped), so it can always be confirmed, and a look-alike is not.
#[test]
fn takeover_confirmation_accepts_the_escaped_prefix() {
    let store = tempfile::tempdir().unwrap();
    let prefix = "bad\u{200b}name/";
    std::fs::create_dir_all(store.path().join(prefix)).unwrap();
    let old = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    std::fs::write(
        store.path().join(prefix).join("LEASE"),
        format!(
            r#"{{"instance_id":"gone","acquired_at":"{old}","renewed_at":"{old}","ttl_s":30}}"#
        ),
    )
    .unwrap();
    let url = format!("file://{}/bad%E2%80%8Bname/", store.path().display());
    let audit = store.path().join("audit.jsonl");
    let tmux = Tmux::start(160, 30);
    let command = format!(
        "{} takeover '{url}' --reason test --audit-log {}",
        bin_path(),
        audit.display()
    );
    // A wrong answer is refused and writes nothing.
    let run = tmux.run(&command);
    tmux.wait_shown(&run, Duration::from_secs(15), "the prompt", |s| {
        s.contains("to confirm:")
    });
    tmux.answer(&run, &format!("file://{}/badname/", store.path().display()));
    let (code, s) = tmux.wait_exit(&run, Duration::from_secs(15));
    assert!(s.contains("not confirmed") && code == 4, "exit {code}: {s}");
    assert!(
        !s.contains('\u{200b}'),
        "an invisible character reached the terminal: {s}"
    );
    assert!(store.path().join(prefix).join("LEASE").exists());
    // The escaped form, as shown, confirms it. (The second run's markers
    // are its own: nothing of the first run is read for it.)
    let run = tmux.run(&command);
    tmux.wait_shown(&run, Duration::from_secs(15), "the prompt", |s| {
        s.contains("to confirm:")
    });
    // The URL as the prompt's header shows it: the zero-width space escaped.
    let shown = format!("file://{}/{prefix}", store.path().display());
    tmux.answer(&run, &leasectl::text::sanitize(&shown));
    let (code, s) = tmux.wait_exit(&run, Duration::from_secs(15));
    assert!(s.contains("taken:") && code == 0, "exit {code}: {s}");
    assert!(
        crate::common::released_file(&store.path().join(prefix).join("LEASE")),
        "taken, then released"
    );
}

/// Issue 34 §2 end to end: a real console in tmux watches one prefix change
/// hands (holder-a, then holder-b over a fresh record, then none, then
/// holder-c); `h` opens the timeline pane with a lane per holder, the time
/// without a holder, and the fresh record replaced as an overlap; `Esc`
/// closes it and `q` quits.
#[test]
fn the_timeline_pane_draws_the_session_history() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    std::fs::create_dir_all(&db).unwrap();
    let write = |holder: &str| {
        let t = chrono::Utc::now().to_rfc3339();
        std::fs::write(
            db.join("LEASE"),
            format!(
                r#"{{"instance_id":"{holder}","acquired_at":"{t}","renewed_at":"{t}","ttl_s":60}}"#
            ),
        )
        .unwrap();
    };
    write("holder-a");
    let tmux = Tmux::start(140, 36);
    let run = tmux.run(&format!(
        "{} --read-only --no-pod --refresh 1s file://{}/",
        bin_path(),
        dir.path().display()
    ));
    tmux.wait_shown(&run, Duration::from_secs(15), "holder-a", |s| {
        s.contains("holder-a")
    });
    write("holder-b");
    tmux.wait_for(Duration::from_secs(15), "holder-b", |s| {
        s.contains("holder-b")
    });
    std::fs::remove_file(db.join("LEASE")).unwrap();
    tmux.wait_for(Duration::from_secs(15), "the lease gone", |s| {
        s.contains("absent")
    });
    write("holder-c");
    tmux.wait_for(Duration::from_secs(15), "holder-c", |s| {
        s.contains("holder-c")
    });
    tmux.send(&["h"]);
    let screen = tmux.wait_for(Duration::from_secs(10), "the timeline pane", |s| {
        s.contains("timeline of db/")
    });
    for lane in ["holder-a", "holder-b", "holder-c", "(no holder)"] {
        assert!(
            screen
                .lines()
                .any(|l| l.contains(lane) && (l.contains('█') || l.contains('░'))),
            "no lane for {lane}:\n{screen}"
        );
    }
    assert!(
        screen.contains("OVERLAP (this session)") && screen.contains('▓'),
        "holder-b replaced a fresh record: an overlap\n{screen}"
    );
    tmux.send(&["Escape"]);
    tmux.wait_for(Duration::from_secs(10), "the table again", |s| {
        s.contains("PREFIX") && !s.contains("timeline of db/")
    });
    tmux.send(&["q"]);
    let (code, shown) = tmux.wait_exit(&run, Duration::from_secs(10));
    assert_eq!(code, 0, "{shown}");
}

/// The harness finds its markers however the terminal draws them, and never
/// in the typed line. A shell whose `PS0` moves the cursor up one line has
/// the begin marker drawn over the start of the echoed command line (what a
/// loaded CI run showed once: the echo garbled over the begin marker, the end
/// marker on screen, and the wait for it timed out); a command whose output
/// has no final newline has the end marker drawn after it on its line.
#[test]
fn the_markers_are_found_however_the_terminal_draws_them() {
    let tmux = Tmux::start(120, 20);
    let setup = tmux.run("PS0=$'\\e[A'");
    assert_eq!(tmux.wait_exit(&setup, Duration::from_secs(10)).0, 0);
    let over = tmux.run("echo drawn-$((20+1))");
    let (code, shown) = tmux.wait_exit(&over, Duration::from_secs(10));
    assert_eq!((code, shown.as_str()), (0, "drawn-21"));
    let partial = tmux.run("printf '%s' no-newline-$((6*7)); false");
    let (code, shown) = tmux.wait_exit(&partial, Duration::from_secs(10));
    assert_eq!((code, shown.as_str()), (1, "no-newline-42"));
}
