//! An audit log of short junk lines (issue 37, item 7): memory stays flat in
//! the log's size and the warnings are bounded (the first few and a total),
//! for `leasectl audit`, `--json --audit-log` and a followed log.

use std::process::{Command, Stdio};

use crate::common::bin_path;
use leasectl::audit::{AuditTail, Unreadable};

/// 16 MiB of `x\n`: 8,388,608 lines that are not entries.
fn junk_log(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("audit.jsonl");
    std::fs::write(&path, b"x\n".repeat(8 * 1024 * 1024)).unwrap();
    path
}

/// Runs leasectl with `args`; returns its exit code (None: killed by a
/// signal), stderr and peak resident memory in KiB, as GNU time measures
/// it. Not this process's own `wait4`: a child spawned from this test
/// process (posix_spawn shares its memory until exec) inherits the test
/// process's high-water mark in `ru_maxrss` — 127 MiB once other tests had
/// grown it. `time` is small when it forks leasectl, so leasectl's figure
/// is its own.
fn run_measured(args: &[&str]) -> (Option<i32>, String, i64) {
    let dir = tempfile::tempdir().unwrap();
    let measured = dir.path().join("maxrss");
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&measured)
        .arg(bin_path())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("GNU time at /usr/bin/time (scripts/setup-test-env.sh installs it)");
    let report = std::fs::read_to_string(&measured).unwrap();
    let killed = report.contains("terminated by signal");
    let kib = report
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no maximum RSS from time: {report}"));
    let code = if killed { None } else { out.status.code() };
    (code, String::from_utf8_lossy(&out.stderr).into_owned(), kib)
}

#[test]
fn a_log_of_junk_lines_costs_a_count_not_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let log = junk_log(dir.path());
    let log_s = log.to_str().unwrap();
    for args in [
        vec!["audit", "--audit-log", log_s],
        vec!["audit", "--json", "--audit-log", log_s],
        vec!["--json", "--no-pod", "--audit-log", log_s],
    ] {
        let mut args = args.clone();
        let store = dir.path().join("store");
        std::fs::create_dir_all(&store).unwrap();
        let target = format!("file://{}/", store.display());
        if args[0] == "--json" {
            args.push(&target);
        }
        let (code, err, maxrss_kib) = run_measured(&args);
        let lines = err.lines().count();
        assert!(
            lines <= 10,
            "{args:?}: {lines} lines on stderr; the first: {}",
            err.lines().take(3).collect::<Vec<_>>().join(" / ")
        );
        assert!(
            err.contains("8388603 more unreadable lines (8388608 in all)"),
            "{args:?}: the total is not said: {err}"
        );
        assert!(
            maxrss_kib < 96 * 1024,
            "{args:?}: peak resident memory {maxrss_kib} KiB for a 16 MiB log"
        );
        assert_ne!(code, None, "{args:?}: killed");
    }
}

#[test]
fn a_followed_log_of_junk_keeps_a_few_lines_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let log = junk_log(dir.path());
    let mut tail = AuditTail::new(&log, 10);
    let bad: Unreadable = tail.poll().unwrap();
    // The first read starts 4 MiB from the end: 2,097,152 lines, one of them
    // cut at the start and skipped.
    assert_eq!(bad.count, 2 * 1024 * 1024 - 1);
    assert_eq!(bad.first.len(), Unreadable::SHOWN);
    assert_eq!(bad.sentences().len(), Unreadable::SHOWN + 1);
    assert!(tail.entries().is_empty());
}
