//! `writer exec` with daemonized descendants (issue 13, fault 3): as a child
//! subreaper it adopts what the command orphans, forwards signals to the whole
//! tree, and releases the lock only after the last descendant is gone. Real
//! processes, real flock. `LEASECTL_TEST_BIN` runs another build of leasectl
//! (to check that these tests fail without the fix).

use std::time::Duration;

use crate::writer_support::*;

/// Fault 3 of issue 13: the command daemonizes a writer and exits. `writer
/// exec` must hold the lock until the daemon is gone too, then exit with the
/// command's status.
#[test]
fn writer_exec_holds_until_the_daemonized_descendant_exits() {
    let dir = tempfile::tempdir().unwrap();
    let stopfile = dir.path().join("stop");
    let (cmd, pidfile, log) = daemonizing_wrapper_logged(dir.path(), &stopfile, "exit 0");
    let mut w = Guard::spawn(cmd);
    let daemon = wait_for(Duration::from_secs(5), || read_pid(&pidfile)).expect("daemon pid");
    let _k = KillOnDrop(daemon);
    // The command (sh) has exited; the daemon runs on.
    std::thread::sleep(Duration::from_millis(500));
    assert!(running(daemon));
    assert!(
        w.wait_timeout(Duration::from_millis(10)).is_none(),
        "writer exec returned while its daemonized descendant still runs"
    );
    assert!(
        !lock_is_free(dir.path()),
        "the lock was released while the daemon runs"
    );
    // The daemon was adopted by writer exec (child subreaper), not by init.
    let ppid = std::fs::read_to_string(format!("/proc/{daemon}/stat"))
        .unwrap()
        .rsplit(") ")
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse::<u32>()
        .unwrap();
    assert_eq!(ppid, w.pid, "the daemon was not adopted by writer exec");

    std::fs::write(&stopfile, b"").unwrap();
    let (status, _, _) = w.output(Duration::from_secs(10));
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "the command's status; stderr:\n{err}"
    );
    assert!(lock_is_free(dir.path()));
    assert!(
        err.contains("process(es) running (e.g. daemonized)"),
        "{err}"
    );
}

/// SIGTERM to `writer exec` reaches the daemonized descendant too (it is in
/// another session, so no terminal signal would), and the lock is released
/// only after it has exited.
#[test]
fn writer_exec_forwards_signals_to_the_whole_tree() {
    let dir = tempfile::tempdir().unwrap();
    let stopfile = dir.path().join("never");
    let (cmd, pidfile, log) = daemonizing_wrapper_logged(dir.path(), &stopfile, "sleep 30");
    let w = Guard::spawn(cmd);
    let daemon = wait_for(Duration::from_secs(5), || read_pid(&pidfile)).expect("daemon pid");
    let _k = KillOnDrop(daemon);
    std::thread::sleep(Duration::from_millis(200));
    w.signal(nix::sys::signal::Signal::SIGTERM);
    let (_status, _, _) = w.output(Duration::from_secs(10));
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(
        !running(daemon),
        "the daemon did not get SIGTERM; stderr:\n{err}"
    );
    assert!(lock_is_free(dir.path()));
}
