//! Issue 37, item 9: the small ones. Each with the real binary.

use crate::common::bin_path;
use std::process::{Command, Stdio};

fn leasectl_to_dev_full(args: &[&str]) -> (Option<i32>, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = Command::new(bin_path())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// (b) Output that cannot be written is never exit 0: `audit` and `probe`,
/// text and JSON, into `/dev/full` exit 1 and say why.
#[test]
fn output_that_cannot_be_written_is_an_error_for_audit_and_probe() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    std::fs::write(&log, b"").unwrap();
    let log_s = log.to_str().unwrap();
    let url = format!("file://{}/", dir.path().display());
    for args in [
        vec!["audit", "--audit-log", log_s],
        vec!["audit", "--json", "--audit-log", log_s],
        vec!["probe", &url],
        vec!["probe", "--json", &url],
    ] {
        let (code, err) = leasectl_to_dev_full(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains("could not write"), "{args:?}: {err}");
    }
}

/// (f) A config file or audit log that every user may write is warned about
/// once, with the fix, as ssh and kubectl do; a private one is not.
#[test]
fn a_world_writable_config_or_audit_log_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let url = format!("file://{}/", store.display());
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[contexts.x]\n").unwrap();
    let log = dir.path().join("audit.jsonl");
    std::fs::write(&log, b"").unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(bin_path())
            .args(args)
            .env("LEASECTL_CONFIG", &config)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let takeover = [
        "takeover",
        &format!("{url}db/"),
        "--reason",
        "test",
        "--yes",
        "--audit-log",
        log.to_str().unwrap(),
    ];
    for p in [&config, &log] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    assert!(!run(&["-c", "x", "--json", "--no-pod", &url]).contains("writable by every user"));
    assert!(!run(&takeover).contains("writable by every user"));
    for p in [&config, &log] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let err = run(&["-c", "x", "--json", "--no-pod", &url]);
    assert_eq!(err.matches("writable by every user").count(), 1, "{err}");
    assert!(
        err.contains(&format!("chmod go-w {}", config.display())),
        "{err}"
    );
    let err = run(&takeover);
    assert!(
        err.contains(&format!("{} is writable by every user", log.display()))
            && err.contains("forge or erase"),
        "{err}"
    );
}

/// (a) A full file system (ENOSPC) during renewals leaves no hidden
/// `.LEASE.leasectl-tmp-*` files behind: a tmpfs of 64 KiB, filled, then five
/// writes of the LEASE.
#[tokio::test]
async fn a_full_file_system_leaves_no_temporary_files() {
    use leasectl::store::local::LocalStore;
    use leasectl::store::{ObjectStore, PutCondition};
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mnt)
        .status()
        .expect("mount(8)");
    assert!(
        mounted.success(),
        "cannot mount a tmpfs (this test runs as root)"
    );
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(mnt.clone());
    std::fs::create_dir(mnt.join("db")).unwrap();
    let store = LocalStore::open(&mnt).unwrap();
    store
        .put("db/LEASE", b"{}".to_vec(), PutCondition::None)
        .await
        .unwrap();
    // Fill it up.
    let _ = std::fs::write(mnt.join("filler"), vec![0u8; 128 * 1024]);
    let body = vec![b'x'; 8 * 1024];
    for _ in 0..5 {
        let r = store
            .put("db/LEASE", body.clone(), PutCondition::None)
            .await;
        assert!(r.is_err(), "a write to a full file system succeeded");
    }
    let left: Vec<String> = std::fs::read_dir(mnt.join("db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("leasectl-tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

/// Issue 35 trip 7: `--json` that exits 1 because only the pod could not be
/// read whole says why on stderr, in one line (it said nothing).
///
/// The pod is made unreadable for real: leasectl runs as an unprivileged user
/// (when the test runs as root) and so cannot inspect the processes of other
/// users, whose duty and lock are then unknown. (A symbolic link as the lock
/// file used to be the way; it is now a state of its own with a verdict.)
#[test]
fn json_that_exits_1_for_the_pod_alone_says_why() {
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = nix::unistd::geteuid().is_root();
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]);
        c.arg(bin_path());
        c
    } else {
        Command::new(bin_path())
    };
    let out = cmd
        .args(["--json", "--data-dir"])
        .arg(dir.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON document");
    let uninspected = doc["pod"]["uninspected"].as_array().map_or(0, Vec::len);
    assert!(uninspected > 0, "no process was out of reach: {doc}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("could not be read whole"))
        .collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains("could not be inspected"), "{err}");
}

/// Issue 35 trip 11: `bucket hold` with a short TTL does not warn about a
/// `--grace` nobody gave (the default is cut to a sixth of the TTL silently);
/// one the operator gave is still warned about when cut.
#[test]
fn bucket_hold_warns_only_about_a_grace_that_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::common::file_url(dir.path());
    let hold = |extra: &[&str]| {
        let out = Command::new(bin_path())
            .args(["bucket", "hold", &url, "--ttl", "9s"])
            .args(extra)
            .args(["--", "true"])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = hold(&[]);
    assert!(!err.contains("--grace"), "{err}");
    let err = hold(&["--grace", "5s"]);
    assert!(
        err.contains("--grace 5.0s is longer than a sixth of the TTL"),
        "{err}"
    );
}
