//! Issue 37, item 9: the small ones. Each with the real binary.

use std::process::{Command, Stdio};

fn leasectl_to_dev_full(args: &[&str]) -> (Option<i32>, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = Command::new(env!("CARGO_BIN_EXE_leasectl"))
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
