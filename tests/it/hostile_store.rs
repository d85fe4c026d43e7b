//! Hostile `file://` stores: whatever sits at a LEASE path (a symlink to a
//! device, a FIFO, a socket, a directory, a link out of the store, an
//! over-size file rewritten in place), leasectl reads it bounded, never
//! follows it, never hangs, and reports that prefix alone as malformed.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;
use leasectl::store::local::LocalStore;
use leasectl::store::{ObjectRead, ObjectStore, PutCondition, StoreError, MAX_BODY_BYTES};
use serde_json::Value;

/// Every run here is bounded: a hang is a failure, not a stuck test.
const LIMIT: Duration = Duration::from_secs(30);

fn record(id: &str, ttl_s: u64) -> String {
    let t = chrono::Utc::now().to_rfc3339();
    format!(r#"{{"instance_id":"{id}","acquired_at":"{t}","renewed_at":"{t}","ttl_s":{ttl_s}}}"#)
}

fn run(args: &[&str]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_leasectl"));
    c.args(args);
    run_with_timeout(c, LIMIT)
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `--json` of a store whose `bad/` prefix holds whatever `make` puts at
/// `bad/LEASE`, next to a healthy `good/` prefix. Returns the two rows.
fn snapshot_with(make: impl FnOnce(&Path)) -> (Value, Value, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("bad")).unwrap();
    std::fs::create_dir_all(dir.path().join("good")).unwrap();
    std::fs::write(dir.path().join("good/LEASE"), record("healthy", 30)).unwrap();
    make(&dir.path().join("bad/LEASE"));
    let started = Instant::now();
    let o = run(&["--json", "--no-pod", &file_url(dir.path())]);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&o)));
    let rows = v["targets"][0]["prefixes"].as_array().unwrap().clone();
    let row = |p: &str| {
        rows.iter()
            .find(|r| r["prefix"] == p)
            .unwrap_or_else(|| panic!("no row {p}: {v:#}"))
            .clone()
    };
    (row("bad/"), row("good/"), o)
}

fn assert_malformed_not_regular(bad: &Value, good: &Value, kind: &str) {
    assert_eq!(bad["state"], "malformed", "{bad:#}");
    let problem = bad["problem"].as_str().unwrap();
    assert!(
        problem.contains(&format!("not a regular file: {kind}")),
        "{problem}"
    );
    assert_eq!(bad["raw"], "", "nothing is read: {bad:#}");
    assert!(bad["etag"].is_string(), "an ETag a takeover can name");
    assert_eq!(good["state"], "fresh", "the other prefix is unaffected");
}

#[test]
fn symlink_to_dev_zero_is_malformed_and_not_read() {
    let (bad, good, _) = snapshot_with(|p| symlink("/dev/zero", p).unwrap());
    assert_malformed_not_regular(&bad, &good, "symlink");
}

#[test]
fn fifo_is_malformed_and_the_snapshot_exits() {
    let (bad, good, o) = snapshot_with(|p| {
        nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap()
    });
    assert_malformed_not_regular(&bad, &good, "FIFO");
    assert!(o.status.code().is_some(), "exited by itself");
}

#[test]
fn socket_is_malformed() {
    let keep = std::cell::RefCell::new(None);
    let (bad, good, _) = snapshot_with(|p| {
        *keep.borrow_mut() = Some(std::os::unix::net::UnixListener::bind(p).unwrap());
    });
    assert_malformed_not_regular(&bad, &good, "socket");
}

#[test]
fn directory_named_lease_is_malformed() {
    let (bad, good, _) = snapshot_with(|p| std::fs::create_dir(p).unwrap());
    assert_malformed_not_regular(&bad, &good, "directory");
}

#[test]
fn character_device_node_is_malformed_and_never_opened() {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    let dir = tempfile::tempdir().unwrap();
    // Creating a device node needs CAP_MKNOD; without it this case cannot be
    // built here, and the symlink-to-/dev/zero test covers the read path.
    let probe = dir.path().join("probe");
    if mknod(
        &probe,
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o644),
        makedev(1, 5),
    )
    .is_err()
    {
        eprintln!("skipped: cannot create a device node here (no CAP_MKNOD)");
        return;
    }
    let (bad, good, _) = snapshot_with(|p| {
        mknod(
            p,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o644),
            makedev(1, 5),
        )
        .unwrap()
    });
    assert_malformed_not_regular(&bad, &good, "character device");
}

#[test]
fn symlink_out_of_the_store_is_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    // A valid record, so following the link would show it as a lease.
    std::fs::write(&secret, record("TOP-SECRET-CONTENT", 30)).unwrap();
    let (bad, good, o) = snapshot_with(|p| symlink(&secret, p).unwrap());
    assert_malformed_not_regular(&bad, &good, "symlink");
    assert!(!text(&o).contains("TOP-SECRET-CONTENT"), "{}", text(&o));
}

#[test]
fn unreadable_file_is_an_error_for_that_prefix_only() {
    use std::os::unix::fs::PermissionsExt;
    if nix::unistd::geteuid().is_root() {
        // Root reads a mode-000 file anyway (CAP_DAC_OVERRIDE): there is no
        // unreadable regular file to build here. Run as a user to cover it.
        eprintln!("skipped: running as root, a mode-000 file is readable");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("bad")).unwrap();
    std::fs::create_dir_all(dir.path().join("good")).unwrap();
    std::fs::write(dir.path().join("good/LEASE"), record("healthy", 30)).unwrap();
    let bad = dir.path().join("bad/LEASE");
    std::fs::write(&bad, record("hidden", 30)).unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o000)).unwrap();
    let o = run(&["--json", "--no-pod", &file_url(dir.path())]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &v["targets"][0];
    assert!(
        t["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["prefix"] == "bad/"),
        "{v:#}"
    );
    assert!(text(&o).contains("ermission denied"), "{}", text(&o));
}

/// A record padded with spaces to exactly `len` bytes.
fn padded(len: usize) -> Vec<u8> {
    let mut b = record("pad", 30).into_bytes();
    assert!(b.len() < len);
    b.resize(len, b' ');
    b
}

#[tokio::test]
async fn bodies_at_the_cap_are_read_whole_and_one_byte_more_is_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    for (len, ok) in [
        (MAX_BODY_BYTES - 1, true),
        (MAX_BODY_BYTES, true),
        (MAX_BODY_BYTES + 1, false),
        (10 * MAX_BODY_BYTES, false),
    ] {
        std::fs::write(dir.path().join("LEASE"), padded(len)).unwrap();
        let out = store.get("LEASE", None).await.unwrap();
        assert!(out.body.len() <= MAX_BODY_BYTES + 1, "{len}: read bounded");
        assert_eq!(out.meta.size, len as u64);
        let obs = leasectl::bucket::Observed::from_get(&out);
        assert_eq!(obs.record().is_some(), ok, "{len} bytes");
    }
}

#[tokio::test]
async fn over_cap_rewrite_in_place_with_mtime_restored_changes_the_etag() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let path = dir.path().join("LEASE");
    let mut body = vec![b'a'; MAX_BODY_BYTES * 2];
    std::fs::write(&path, &body).unwrap();
    // Timestamps come from a coarse clock: let it tick before the rewrite.
    std::thread::sleep(Duration::from_millis(50));
    let before = store.get("LEASE", None).await.unwrap().meta.etag.unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    // Rewrite in place: same inode, same size, other bytes; mtime set back.
    body[0] = b'b';
    {
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(&body).unwrap();
        f.set_modified(mtime).unwrap();
        f.sync_all().unwrap();
    }
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    let after = store.get("LEASE", None).await.unwrap().meta.etag.unwrap();
    assert_ne!(before, after, "an in-place rewrite must change the ETag");
    // So a write conditional on the ETag seen before is refused.
    let r = store
        .put(
            "LEASE",
            record("late", 30).into_bytes(),
            PutCondition::IfMatch(before),
        )
        .await;
    assert!(matches!(r, Err(StoreError::PreconditionFailed)), "{r:?}");
    assert_eq!(std::fs::read(&path).unwrap(), body, "nothing written");
}

#[tokio::test]
async fn a_lock_file_that_is_a_fifo_or_symlink_refuses_the_write_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let target = dir.path().join("victim");
    std::fs::write(&target, b"keep").unwrap();
    for make in ["fifo", "symlink"] {
        let body = record("old", 30);
        std::fs::write(dir.path().join("LEASE"), &body).unwrap();
        let etag = store.get("LEASE", None).await.unwrap().meta.etag.unwrap();
        let lock = dir.path().join(".LEASE.leasectl-lock");
        let _ = std::fs::remove_file(&lock);
        match make {
            "fifo" => {
                nix::unistd::mkfifo(&lock, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap()
            }
            _ => symlink(&target, &lock).unwrap(),
        }
        let started = Instant::now();
        let r = tokio::time::timeout(
            LIMIT,
            store.put(
                "LEASE",
                record("new", 30).into_bytes(),
                PutCondition::IfMatch(etag),
            ),
        )
        .await
        .expect("the write must not hang");
        let e = r.unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{make}: {e}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("LEASE")).unwrap(),
            body
        );
        let e = store.delete("LEASE", None).await.unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{make}: {e}");
        assert!(dir.path().join("LEASE").exists());
    }
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
}

#[tokio::test]
async fn a_lock_held_too_long_by_another_open_file_times_out() {
    use nix::fcntl::{Flock, FlockArg};
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    std::fs::write(dir.path().join("LEASE"), record("old", 30)).unwrap();
    // flock belongs to the open file: this open conflicts with the store's own.
    let f = std::fs::File::create(dir.path().join(".LEASE.leasectl-lock")).unwrap();
    let _held = Flock::lock(f, FlockArg::LockExclusive).unwrap();
    let started = Instant::now();
    let r = tokio::time::timeout(LIMIT, store.delete("LEASE", None))
        .await
        .expect("bounded wait");
    let e = r.unwrap_err().to_string();
    assert!(e.contains("held the lock file"), "{e}");
    assert!(started.elapsed() >= Duration::from_secs(9));
    assert!(dir.path().join("LEASE").exists());
}

#[test]
fn audit_log_that_is_a_fifo_or_device_link_is_refused_in_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("audit.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let link = dir.path().join("audit.link");
    symlink("/dev/zero", &link).unwrap();
    for (path, kind) in [(&fifo, "FIFO"), (&link, "symlink")] {
        let o = run(&[
            "audit",
            "--json",
            "--audit-log",
            &path.display().to_string(),
        ]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(
            text(&o).contains(&format!("not a regular file: {kind}")),
            "{}",
            text(&o)
        );
    }
    // A takeover whose audit log cannot be a file sends nothing.
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let t = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    let body =
        format!(r#"{{"instance_id":"dead","acquired_at":"{t}","renewed_at":"{t}","ttl_s":30}}"#);
    std::fs::write(dir.path().join("db/LEASE"), &body).unwrap();
    for path in [&fifo, &link] {
        let o = run(&[
            "takeover",
            &file_url(&dir.path().join("db")),
            "--reason",
            "x",
            "--yes",
            "--audit-log",
            &path.display().to_string(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("nothing was sent"), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("db/LEASE")).unwrap(),
            body
        );
    }
}

#[test]
fn console_on_fifo_leases_keeps_refreshing_and_quits() {
    use crate::common::tmux::Tmux;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    for p in [dir.path().join("LEASE"), dir.path().join("db/LEASE")] {
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    }
    let tmux = Tmux::start(120, 20);
    tmux.type_line(&format!(
        "{} --read-only --no-pod --refresh 1s {} ; echo EXIT=$?",
        env!("CARGO_BIN_EXE_leasectl"),
        file_url(dir.path())
    ));
    tmux.wait_for(Duration::from_secs(20), "the FIFO rows", |s| {
        s.contains("malformed") && s.contains("db/")
    });
    // Several refreshes: none may get stuck on the FIFOs.
    std::thread::sleep(Duration::from_secs(3));
    tmux.send(&["q"]);
    tmux.wait_for(Duration::from_secs(10), "the console to exit", |s| {
        s.contains("EXIT=0")
    });
}
