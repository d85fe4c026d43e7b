//! `leasectl writer exec` end to end: real wrappers, real children, real flock.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::writer_support::*;
use nix::sys::signal::Signal;

fn taking(dir: &std::path::Path, wait: &str, cmd: &[&str]) -> std::process::Command {
    let mut c = wrapper(dir, wait, cmd);
    c.env("CLOUD_WRITER_LEASE", "1");
    c
}

/// Waits until the wrapper has a running child and returns its pid.
/// True once `pid` ignores SIGTERM (bit 15 of SigIgn in /proc/PID/status).
fn ignores_sigterm(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let hex = s
                .lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))?
                .trim()
                .to_owned();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
}

fn child_of(pid: u32) -> u32 {
    wait_for(Duration::from_secs(4), || children(pid).first().copied()).expect("child started")
}

#[test]
fn second_wrapper_fails_closed_naming_holder() {
    let dir = tempfile::tempdir().unwrap();
    let first = taking(dir.path(), "2s", &["sleep", "30"]);
    let first = lock_held(first, dir.path(), Duration::from_secs(4), "first holds");

    let marker = dir.path().join("ran");
    let mut second = taking(dir.path(), "1s", &["touch", marker.to_str().unwrap()]);
    second.stderr(Stdio::piped());
    let started = Instant::now();
    let (status, _, err) = Guard::spawn(second).output(Duration::from_secs(5));
    let took = started.elapsed();
    assert_eq!(status.code(), Some(125), "{err}");
    assert!(
        took >= Duration::from_millis(900),
        "gave up after {took:?}, before --wait"
    );
    assert!(
        err.contains(&format!("pid {}", first.pid)),
        "holder not named: {err}"
    );
    assert!(
        err.contains("writer exec"),
        "holder command not named: {err}"
    );
    assert!(err.contains("fail closed"), "{err}");
    assert!(!marker.exists(), "the command ran without the lock");
    assert!(running(first.pid));
}

#[test]
fn duty_sentence_logged_and_exit_status_propagates() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = taking(dir.path(), "2s", &["sh", "-c", "exit 7"]);
    c.stderr(Stdio::piped());
    let (status, _, err) = Guard::spawn(c).output(Duration::from_secs(5));
    assert_eq!(status.code(), Some(7));
    assert!(err.contains("writer lease take"), "{err}");
    assert!(err.contains("pod root"), "{err}");
    assert!(lock_is_free(dir.path()));

    // A child killed by a signal: 128 + signal number.
    let mut c = taking(dir.path(), "2s", &["sh", "-c", "kill -9 $$"]);
    c.stderr(Stdio::null());
    let (status, _, _) = Guard::spawn(c).output(Duration::from_secs(5));
    assert_eq!(status.code(), Some(128 + 9));
}

#[test]
fn child_gets_stamp_naming_wrapper() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = taking(
        dir.path(),
        "2s",
        &["sh", "-c", "echo \"$CLOUD_WRITER_LEASE_HELD $PPID\""],
    );
    c.stdout(Stdio::piped()).stderr(Stdio::null());
    let g = Guard::spawn(c);
    let pid = g.pid;
    let (status, out, _) = g.output(Duration::from_secs(5));
    assert!(status.success());
    assert_eq!(out.trim(), format!("{pid} {pid}"));
}

#[test]
fn signals_are_forwarded_to_the_child() {
    for (sig, code) in [
        (Signal::SIGTERM, 41),
        (Signal::SIGINT, 42),
        (Signal::SIGHUP, 43),
        (Signal::SIGQUIT, 44),
    ] {
        let dir = tempfile::tempdir().unwrap();
        // A child that exits with its own code for each signal and forks
        // nothing. The former child, a dash loop of `sleep`s with traps, went
        // on looping after leasectl had logged forwarding SIGINT to it (CI,
        // 2026-12-02; its process group then: dash in do_wait, a new sleep),
        // in a run where it passed 60 times alone: the trapped signal seems
        // lost when it meets the shell's fork, which is dash's behaviour,
        // not what this test checks.
        let script = "import signal, sys, time\n\
                      for s, c in ((signal.SIGTERM, 41), (signal.SIGINT, 42), (signal.SIGHUP, 43), (signal.SIGQUIT, 44)):\n\
                      \x20   signal.signal(s, lambda n, f, c=c: sys.exit(c))\n\
                      print('ready', flush=True)\n\
                      while True:\n\
                      \x20   time.sleep(1)\n";
        let mut c = taking(dir.path(), "2s", &["python3", "-c", script]);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut g = Guard::spawn(c);
        // Wait until the traps are installed.
        let mut out = g.child.as_mut().unwrap().stdout.take().unwrap();
        let mut buf = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut buf).unwrap();
        g.signal(sig);
        let (status, _, err) = g.output(Duration::from_secs(5));
        assert_eq!(status.code(), Some(code), "{sig}: {err}");
        assert!(err.contains("forwarding signal"), "{err}");
    }
}

#[test]
fn term_kills_a_plain_child_with_128_plus_signal() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = taking(dir.path(), "2s", &["sleep", "30"]);
    c.stderr(Stdio::null());
    let g = Guard::spawn(c);
    let child = child_of(g.pid);
    g.signal(Signal::SIGTERM);
    let (status, _, _) = g.output(Duration::from_secs(5));
    assert_eq!(status.code(), Some(128 + 15));
    assert!(!running(child));
}

#[test]
fn lock_released_only_after_child_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    // The child shrugs off SIGTERM and lingers about a second.
    let script = "trap '' TERM; i=0; while [ $i -lt 10 ]; do sleep 0.1; i=$((i+1)); done; exit 5";
    let mut c = taking(dir.path(), "2s", &["sh", "-c", script]);
    c.stderr(Stdio::null());
    let mut g = Guard::spawn(c);
    let child = child_of(g.pid);
    // Signal only once the shell has installed its trap (SigIgn has SIGTERM):
    // before that, SIGTERM would end it at once, under load especially.
    wait_for(Duration::from_secs(4), || {
        ignores_sigterm(child).then_some(())
    })
    .expect("the child ignores SIGTERM");
    g.signal(Signal::SIGTERM);
    let mut polls_while_child_ran = 0;
    loop {
        let child_alive = running(child);
        let free = lock_is_free(dir.path());
        if child_alive {
            assert!(!free, "lock was free while the child {child} still ran");
            polls_while_child_ran += 1;
        }
        if g.child.as_mut().unwrap().try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        polls_while_child_ran > 5,
        "the child did not outlive the signal"
    );
    assert_eq!(
        g.wait_timeout(Duration::from_secs(1)).unwrap().code(),
        Some(5)
    );
    assert!(lock_is_free(dir.path()));
}

#[test]
fn killing_the_wrapper_kills_the_child_and_frees_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = taking(dir.path(), "2s", &["sleep", "30"]);
    c.stderr(Stdio::null());
    let mut g = Guard::spawn(c);
    let child = child_of(g.pid);
    g.signal(Signal::SIGKILL);
    g.wait_timeout(Duration::from_secs(2))
        .expect("wrapper died");
    // PR_SET_PDEATHSIG: the child gets SIGKILL when the wrapper dies.
    wait_for(Duration::from_secs(2), || (!running(child)).then_some(())).expect("child killed");
    assert!(lock_is_free(dir.path()));
}

#[test]
fn inherit_and_off_exec_in_place_without_lock() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id().to_string();
    for (enable, stamp, word) in [
        ("1", Some(me.as_str()), "inherit"),
        ("0", None, "off"),
        ("", None, "off"),
    ] {
        let mut c = wrapper(dir.path(), "1s", &["sh", "-c", "echo $$"]);
        c.env("CLOUD_WRITER_LEASE", enable)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(s) = stamp {
            c.env("CLOUD_WRITER_LEASE_HELD", s);
        }
        let g = Guard::spawn(c);
        let pid = g.pid;
        let (status, out, err) = g.output(Duration::from_secs(5));
        assert!(status.success(), "{err}");
        assert_eq!(out.trim(), pid.to_string(), "{word}: not exec'd in place");
        assert!(err.contains(&format!("writer lease {word}")), "{err}");
        assert!(
            !dir.path().join(".writer.lock").exists(),
            "{word} touched the lock"
        );
    }
}

#[test]
fn invalid_enable_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    for value in ["yes", "on\x1b[2J"] {
        let mut c = wrapper(dir.path(), "1s", &["touch", marker.to_str().unwrap()]);
        c.env("CLOUD_WRITER_LEASE", value).stderr(Stdio::piped());
        let (status, _, err) = Guard::spawn(c).output(Duration::from_secs(5));
        assert_eq!(status.code(), Some(125));
        let shown = value.replace('\x1b', "\\x1b");
        assert!(err.contains(&format!("\"{shown}\"")), "{err}");
        assert!(!err.contains('\x1b'), "raw escape in {err:?}");
        assert!(!marker.exists());
    }
}

#[test]
fn stray_stamp_on_root_takes_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    // A stamp naming a pid that is not our parent (and not running).
    let stray = (900_000..)
        .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        .unwrap();
    let mut c = taking(dir.path(), "2s", &["sleep", "30"]);
    c.env("CLOUD_WRITER_LEASE_HELD", stray.to_string())
        .stderr(Stdio::piped());
    let g = Guard::spawn(c);
    let snap = scan_until(g.pid, dir.path(), |s| {
        s.processes
            .iter()
            .any(|p| p.pid == g.pid && p.lock == leasectl::writer::scan::LockState::Holds)
    });
    let r = proc_of(&snap, g.pid);
    assert_eq!(r.duty, leasectl::writer::scan::DutyView::Take);
    assert!(
        r.duty_reason.contains(&format!("names pid {stray}")),
        "{}",
        r.duty_reason
    );
    let v = snap
        .verdicts
        .iter()
        .find(|v| v.kind == leasectl::writer::scan::VerdictKind::StrayStamp)
        .expect("stray stamp verdict");
    assert_eq!(v.pids, vec![g.pid]);
    assert!(v.message.contains("not running"), "{}", v.message);

    g.signal(Signal::SIGTERM);
    let (_, _, err) = g.output(Duration::from_secs(5));
    assert!(
        err.contains(&format!("CLOUD_WRITER_LEASE_HELD={stray} was ignored")),
        "{err}"
    );
    assert!(err.contains("not our parent"), "{err}");
}

/// Issue 44 item 5: every signal whose default action would end `writer
/// exec` while it holds the lock either reaches the command (its code is
/// leasectl's) or ends the hold (SIGXCPU, SIGXFSZ: the command gets SIGTERM,
/// leasectl exits 128 + that signal); either way the lock is released after
/// the command. On main, SIGUSR1 ended leasectl with 138 while its command
/// was still alive (killed only by its parent-death signal, a daemon it
/// started not at all).
#[test]
fn every_signal_that_would_end_it_is_forwarded_or_ends_it_cleanly() {
    use std::io::BufRead;
    let script = crate::common::hold::SIGNAL_SCRIPT;
    let mut cases: Vec<(i32, bool)> = leasectl::supervise::forwarded()
        .into_iter()
        .map(|s| (s, true))
        .collect();
    cases.extend(leasectl::supervise::ENDING.map(|s| (s, false)));
    let mut problems = Vec::new();
    for (sig, forwarded) in cases {
        let name = leasectl::supervise::signal_name(sig);
        let dir = tempfile::tempdir().unwrap();
        let handled = if forwarded {
            vec![sig.to_string(), libc::SIGTERM.to_string()]
        } else {
            vec![libc::SIGTERM.to_string()]
        };
        let mut cmd = vec!["python3", "-c", script];
        cmd.extend(handled.iter().map(String::as_str));
        let mut c = taking(dir.path(), "2s", &cmd);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut g = Guard::spawn(c);
        let mut out = std::io::BufReader::new(g.child.as_mut().unwrap().stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "{name}");
        // SAFETY: kill(2) of the wrapper alone, a child of this test.
        unsafe { libc::kill(g.pid as i32, sig) };
        let (status, _, err) = g.output(Duration::from_secs(10));
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        let (want_got, want_code) = if forwarded {
            (sig, 3)
        } else {
            (libc::SIGTERM, 128 + sig)
        };
        if rest.trim() != format!("got {want_got}") || status.code() != Some(want_code) {
            problems.push(format!(
                "{name}: said {rest:?}, exit {:?} (want got {want_got}, exit {want_code})\n{err}",
                status.code()
            ));
        }
        if !lock_is_free(dir.path()) {
            problems.push(format!("{name}: the lock is still held\n{err}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// A command killed by a real-time signal: `writer exec` exits 128 + it and
/// releases the lock (on main its status was lost: nix's waitpid reaped the
/// child, then failed on the signal number it cannot name).
#[test]
fn a_command_killed_by_a_real_time_signal_is_128_plus_it() {
    let dir = tempfile::tempdir().unwrap();
    let sig = libc::SIGRTMIN() + 2;
    let script = format!("kill -{sig} $$");
    let mut c = taking(dir.path(), "2s", &["sh", "-c", &script]);
    c.stderr(Stdio::piped());
    let (status, _, err) = Guard::spawn(c).output(Duration::from_secs(10));
    assert_eq!(status.code(), Some(128 + sig), "{err}");
    assert!(lock_is_free(dir.path()));
}
