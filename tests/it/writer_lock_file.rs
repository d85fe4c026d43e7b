//! The lock file itself under attack (issue 37, items 2 and 6): removed while
//! held, and replaced by a symbolic link. Real `writer exec` processes, real
//! flock, the real `/proc`.

use std::process::Stdio;
use std::time::Duration;

use crate::writer_support::*;
use leasectl::writer::scan::{scan, ScanOptions};

fn taking(dir: &std::path::Path, wait: &str, cmd: &[&str]) -> std::process::Command {
    let mut c = wrapper(dir, wait, cmd);
    c.env("CLOUD_WRITER_LEASE", "1");
    c
}

/// `writer exec` A holds; `.writer.lock` is removed; `writer exec` B starts at
/// once. B must not take a lock on the new file beside A's lock on the removed
/// one: it refuses (exit 125), naming A, and its command never runs. The pod
/// view (`--data-dir` alone) names A as holder of the removed lock with the
/// `orphaned_lock` verdict. Ten rounds.
#[test]
fn a_lock_file_removed_while_held_is_not_a_free_lock() {
    for round in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let mut first = taking(dir.path(), "2s", &["sleep", "30"]);
        first.stderr(Stdio::null());
        let first = Guard::spawn(first);
        wait_for(Duration::from_secs(4), || {
            (!lock_is_free(dir.path())).then_some(())
        })
        .expect("first holds");
        std::fs::remove_file(dir.path().join(".writer.lock")).unwrap();

        let marker = dir.path().join("ran");
        let mut second = taking(dir.path(), "1s", &["touch", marker.to_str().unwrap()]);
        second.stderr(Stdio::piped());
        let (status, _, err) = Guard::spawn(second).output(Duration::from_secs(10));
        assert_eq!(status.code(), Some(125), "round {round}: {err}");
        assert!(!marker.exists(), "round {round}: a second writer started");
        assert!(
            err.contains(&format!("pid {}", first.pid)) && err.contains("removed"),
            "round {round}: the orphaned holder is not named: {err}"
        );

        let snap = scan(&ScanOptions {
            data_dirs: vec![dir.path().to_owned()],
            ..ScanOptions::default()
        })
        .unwrap();
        let orphaned: Vec<_> = snap
            .verdicts
            .iter()
            .filter(|v| v.kind.as_str() == "orphaned_lock")
            .collect();
        assert_eq!(orphaned.len(), 1, "round {round}: {:#?}", snap.verdicts);
        assert_eq!(orphaned[0].pids, vec![first.pid], "round {round}");
        let held = snap
            .locks
            .iter()
            .find(|l| l.path.ends_with("(deleted)"))
            .unwrap_or_else(|| panic!("round {round}: no removed lock shown: {:#?}", snap.locks));
        assert_eq!(held.holders, vec![first.pid], "round {round}");
        assert!(
            snap.exit_code() != leasectl::exit::Exit::Ok,
            "round {round}: exit 0"
        );
    }
}

/// `.writer.lock` is a symbolic link to a file that does not exist:
/// `writer exec` (as root here) refuses without creating the link's target
/// or running its command, and names the link. A link to an existing file is
/// refused the same way and the file is left as it was.
#[test]
fn a_symbolic_link_lock_file_is_refused_and_nothing_is_created_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("nologin");
    for existing in [false, true] {
        let link = dir.path().join(".writer.lock");
        let _ = std::fs::remove_file(&link);
        if existing {
            std::fs::write(&target, b"keep me").unwrap();
        }
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let marker = dir.path().join("ran");
        let mut c = taking(dir.path(), "0s", &["touch", marker.to_str().unwrap()]);
        c.stderr(Stdio::piped());
        let (status, _, err) = Guard::spawn(c).output(Duration::from_secs(10));
        assert_eq!(status.code(), Some(125), "{err}");
        assert!(err.contains("symbolic link"), "{err}");
        assert!(!marker.exists(), "the command ran");
        if existing {
            assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        } else {
            assert!(!target.exists(), "the link's target was created");
        }
        // The pod view shows it as what it is, never as a free lock file.
        let snap = scan(&ScanOptions {
            data_dirs: vec![dir.path().to_owned()],
            ..ScanOptions::default()
        })
        .unwrap();
        assert_eq!(snap.locks.len(), 1, "{:#?}", snap.locks);
        assert!(
            snap.locks[0].path.contains("symbolic link"),
            "{:#?}",
            snap.locks
        );
        assert_eq!(snap.locks[0].state.as_str(), "unknown", "{:#?}", snap.locks);
        assert!(
            !target.exists() || existing,
            "the scan created the link's target"
        );
    }
    // Neither a directory nor a FIFO is a lock file.
    let link = dir.path().join(".writer.lock");
    std::fs::remove_file(&link).unwrap();
    std::fs::create_dir(&link).unwrap();
    let mut c = taking(dir.path(), "0s", &["true"]);
    c.stderr(Stdio::piped());
    let (status, _, err) = Guard::spawn(c).output(Duration::from_secs(10));
    assert_eq!(status.code(), Some(125), "{err}");
    assert!(err.contains("a directory, not a regular file"), "{err}");
}
