//! Privacy: no environment value other than the two lease variables ever
//! leaves the scanner or the wrapper (JSON, logs).

use std::process::Stdio;
use std::time::Duration;

use crate::writer_support::*;

const SECRET: &str = "hunter2secret";

#[test]
fn secret_env_never_appears_in_scan_json_or_logs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut root = wrapper(dir.path(), "2s", &["sh", "-c", "sleep 30 & wait"]);
    root.env("CLOUD_WRITER_LEASE", "1")
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("LEASECTL_LOG", "trace")
        .stderr(Stdio::piped());
    let root = Guard::spawn(root);
    scan_until(root.pid, dir.path(), |s| s.processes.len() == 3);

    let pod_root = root.pid.to_string();
    let runs: [&[&str]; 3] = [
        &[
            "pod-scan",
            "--json",
            "--pod-root",
            &pod_root,
            "--data-dir",
            d,
        ],
        &["pod-scan", "--json", "--data-dir", d],
        &["pod-scan", "--json"],
    ];
    for args in runs {
        let mut c = command(bin_path());
        c.args(args)
            .env("LEASECTL_LOG", "trace")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let (status, out, err) = Guard::spawn(c).output(Duration::from_secs(10));
        assert!(status.code().is_some(), "{err}");
        // The scan did see the pod...
        assert!(
            out.contains(&format!("\"pid\": {}", root.pid)),
            "{args:?}: {out}"
        );
        assert!(out.contains("CLOUD_WRITER_LEASE") || out.contains("\"enable\": \"1\""));
        // ...and nothing of its other variables.
        for leak in [SECRET, "AWS_SECRET_ACCESS_KEY"] {
            assert!(!out.contains(leak), "{args:?} printed {leak}");
            assert!(!err.contains(leak), "{args:?} logged {leak}");
        }
    }

    root.signal(nix::sys::signal::Signal::SIGTERM);
    let (_, _, err) = root.output(Duration::from_secs(5));
    assert!(err.contains("writer lease take"), "{err}");
    assert!(!err.contains(SECRET), "the wrapper logged the secret");
}
