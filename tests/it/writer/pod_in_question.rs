//! Issue 22 §1 and §2, with real viewers: root without the capabilities to
//! read every process (as pid 1 is for root on many hosts) and uid 65534
//! with an unreadable `HOME` (`setpriv`), a real local store, real pods of
//! `writer exec`, a real unreadable config file.
//!
//! - The pod decides the exit code only when it is in question: a healthy
//!   `file://` store is exit 0 for `check` and `--json` although processes
//!   could not be inspected, and the notes still say so.
//! - A racing pod given by `--pod-root` and viewed as uid 65534 is never 0.
//! - An unreadable default config file is a warning, not an error, unless a
//!   context was asked for (`-c`, `LEASECTL_CONFIG`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde_json::Value;

use crate::common::cli::text;
use crate::common::{cannot_drop_privileges, run_with_timeout};
use crate::writer_support::{
    cannot_unshare, command, enterable_tempdir, leasectl_bin, racing_siblings, scan_until,
    viewer_for_nobody, Guard,
};

/// A world-readable temporary directory holding a copy of the binary that
/// uid 65534 may run (the build directory may be under a private home).
fn open_dir_with_viewer() -> (tempfile::TempDir, PathBuf) {
    let t = enterable_tempdir();
    let to = viewer_for_nobody(t.path());
    (t, to)
}

/// A local store everyone may read, with one fresh lease.
fn healthy_store(under: &Path) -> String {
    let root = under.join("store");
    let d = root.join("db1");
    std::fs::create_dir_all(&d).unwrap();
    let t = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
    let body = serde_json::json!({"instance_id": "holder-1", "acquired_at": t, "renewed_at": t, "ttl_s": 3600});
    std::fs::write(d.join("LEASE"), body.to_string()).unwrap();
    for p in [&root, &d] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(d.join("LEASE"), std::fs::Permissions::from_mode(0o644)).unwrap();
    format!("file://{}/", root.display())
}

/// A home directory nobody but root may enter (as `HOME` is for a command
/// run with `sudo -u app` without `-H`), holding a valid config file with a
/// context `prod`.
fn unreadable_home() -> (tempfile::TempDir, PathBuf) {
    let h = tempfile::tempdir().unwrap();
    let cfg = h.path().join(".config/leasectl");
    std::fs::create_dir_all(&cfg).unwrap();
    let file = cfg.join("config.toml");
    std::fs::write(
        &file,
        "default_context = \"prod\"\n[contexts.prod]\ndepth = 1\n",
    )
    .unwrap();
    std::fs::set_permissions(h.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    (h, file)
}

/// Who views.
#[derive(Debug, Clone, Copy)]
enum Viewer {
    /// uid 0 without any capability: it cannot read processes that have
    /// capabilities it lacks (as pid 1 is for root on many real hosts).
    RootWithoutCaps,
    /// uid/gid 65534.
    Nobody,
}

/// The `setpriv` arguments that make `viewer`.
fn setpriv_args(viewer: Viewer) -> Vec<&'static str> {
    match viewer {
        Viewer::RootWithoutCaps => vec!["--inh-caps=-all", "--bounding-set=-all"],
        Viewer::Nobody => vec!["--reuid=65534", "--regid=65534", "--clear-groups"],
    }
}

/// Runs `bin args` as `viewer` in a new PID namespace whose other processes
/// (its init shell and a `sleep`) are root's, with full capabilities: the
/// viewer cannot inspect them, and no test running beside this one can add
/// a pod to what it sees. `HOME` is `home`.
fn run_in_namespace(viewer: Viewer, bin: &Path, home: &Path, args: &[&str]) -> Output {
    let mut script = String::from("sleep 60 & setpriv");
    for a in setpriv_args(viewer) {
        script.push(' ');
        script.push_str(a);
    }
    script.push_str(" -- \"$@\"; rc=$?; kill $!; exit $rc");
    let mut c = command("unshare");
    c.args(["--pid", "--fork", "--mount-proc", "sh", "-c", &script, "sh"])
        .arg(bin)
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("LEASECTL_CONFIG")
        .env("LEASECTL_LOG", "warn");
    run_with_timeout(c, Duration::from_secs(60))
}

/// §1: on a healthy local store, processes nobody asked about that could not
/// be inspected do not make `check` UNKNOWN or `--json` 1; the notes name
/// them, and say that no pod was found among the rest. As root without
/// capabilities and as uid 65534 with an unreadable HOME.
#[test]
fn healthy_store_is_ok_when_no_pod_is_in_question() {
    skip_unless_able!(cannot_drop_privileges().or_else(cannot_unshare));
    let (tmp, viewer) = open_dir_with_viewer();
    let url = healthy_store(tmp.path());
    let (home, _) = unreadable_home();
    for who in [Viewer::RootWithoutCaps, Viewer::Nobody] {
        let out = run_in_namespace(who, &viewer, home.path(), &["--json", &url]);
        let ctx = format!(
            "{who:?} --json: status {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{ctx}");
        let doc: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {ctx}"));
        assert_eq!(doc["targets"][0]["prefixes"][0]["state"], "fresh", "{ctx}");
        let pod = &doc["pod"];
        assert!(
            pod["uninspected"].as_array().is_some_and(|u| u.len() >= 2),
            "the namespace's init and sleep are uninspected: {ctx}"
        );
        let notes: Vec<&str> = pod["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            notes
                .iter()
                .any(|n| n.contains(if matches!(who, Viewer::RootWithoutCaps) {
                    // Root is not told to run as root (issue 35 trip 7),
                    // but what it lacks and what gives it (issue 46).
                    "could not be inspected (this viewer is root without CAP_SYS_PTRACE"
                } else {
                    "could not be inspected (run as their owner or root)"
                }) && n.contains("no pod was found among the")),
            "{ctx}"
        );
        assert!(pod["processes"].as_array().unwrap().is_empty(), "{ctx}");

        let out = run_in_namespace(who, &viewer, home.path(), &["check", &url]);
        let stdout = text(&out.stdout);
        let ctx = format!(
            "{who:?} check: status {:?}\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            text(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{ctx}");
        assert!(stdout.starts_with("LEASES OK - 1 lease (1 fresh"), "{ctx}");
        assert!(stdout.contains("errors=0;;;0"), "{ctx}");
        assert!(
            stdout.lines().any(|l| l.starts_with("NOTE pod: ")
                && l.contains("could not be inspected")
                && l.contains("no pod was found")),
            "{ctx}"
        );
        // No pod option and a TARGET: the unreadable config file is not read.
        assert!(!text(&out.stderr).contains("config file"), "{ctx}");

        // The table for a pipe exits like --json.
        let out = run_in_namespace(who, &viewer, home.path(), &["-o", "table", &url]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{who:?} -o table: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }

    // Root as it is, on this host: if auto-detection finds no pod here (tests
    // running beside this one may start pods), processes it could not
    // inspect (pid 1 in many containers) change nothing.
    let mut c = command(&leasectl_bin());
    c.args(["--json", &url]).env("LEASECTL_LOG", "warn");
    let out = run_with_timeout(c, Duration::from_secs(60));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pod = &doc["pod"];
    if pod["processes"].as_array().unwrap().is_empty()
        && pod["locks"].as_array().unwrap().is_empty()
    {
        assert_eq!(out.status.code(), Some(0), "host root: {doc:#}");
    } else {
        eprintln!("host root view skipped: a pod runs on this host now");
    }
}

/// §1, the other side: a pod in question that cannot be inspected is never
/// 0. Two sibling `writer exec` processes race for one lock (a verdict as
/// root); viewed as uid 65534 with `--pod-root` and a healthy TARGET, and
/// no `--data-dir`, `--json` and `check` are not 0. Auto-detection as root
/// finds the pod by itself: it is in question, and not 0 either.
#[test]
fn racing_pod_by_pod_root_is_never_ok_for_an_unprivileged_viewer() {
    skip_unless_able!(cannot_drop_privileges());
    let (tmp, viewer) = open_dir_with_viewer();
    let url = healthy_store(tmp.path());
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = racing_siblings(&data);
    scan_until(root.pid, &data, |s| {
        s.verdicts
            .iter()
            .any(|v| v.kind == leasectl::writer::scan::VerdictKind::SiblingsRacing)
    });
    let (home, _) = unreadable_home();
    let pid = root.pid.to_string();
    let nobody = |args: &[&str]| {
        let mut c = command("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&viewer)
            .args(args)
            .env("HOME", home.path())
            .env("LEASECTL_LOG", "warn");
        run_with_timeout(c, Duration::from_secs(60))
    };
    let out = nobody(&["--json", "--pod-root", &pid, &url]);
    let ctx = format!(
        "--json: {:?}\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "incomplete pod in question: {ctx}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["targets"][0]["prefixes"][0]["state"], "fresh", "{ctx}");
    assert!(
        !doc["pod"]["uninspected"].as_array().unwrap().is_empty(),
        "{ctx}"
    );

    let out = nobody(&["-o", "table", "--pod-root", &pid, &url]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "-o table: {err}");
    assert!(
        err.contains("leasectl: pod: ") && err.contains("could not be inspected"),
        "{err}"
    );

    let out = nobody(&["check", "--pod-root", &pid, &url]);
    let stdout = text(&out.stdout);
    let ctx = format!("check: {:?}\n{stdout}\n{}", out.status, text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{ctx}");
    assert!(stdout.starts_with("LEASES UNKNOWN - "), "{ctx}");
    assert!(stdout.contains("UNKNOWN pod: "), "{ctx}");

    // As root, auto-detection finds the racing pod among the processes it
    // can read: in question, so its verdict (or what it could not read)
    // decides.
    let mut c = command(&leasectl_bin());
    c.args(["--json", &url]).env("LEASECTL_LOG", "warn");
    let out = run_with_timeout(c, Duration::from_secs(60));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ctx = format!("root auto: {:?}\n{doc:#}", out.status);
    assert_ne!(out.status.code(), Some(0), "{ctx}");
    assert!(
        doc["pod"]["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["kind"] == "siblings_racing"),
        "{ctx}"
    );
}

/// §2: an unreadable default config file (a HOME this user may not enter)
/// is one warning line on stderr, and the pod-only command goes on; asking
/// for a context (`-c`, or `LEASECTL_CONFIG`) makes it exit 2.
#[test]
fn unreadable_default_config_warns_and_goes_on() {
    skip_unless_able!(cannot_drop_privileges());
    let (_tmp, viewer) = open_dir_with_viewer();
    let (home, file) = unreadable_home();
    // A pod of uid 65534's own, so the scan is complete and healthy.
    let mut p = command("setpriv");
    p.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        "sleep",
        "60",
    ]);
    let pod = Guard::spawn(p);
    let pid = pod.pid.to_string();
    let run = |extra: &[&str], config_env: Option<&Path>| {
        let mut c = command("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&viewer)
            .args(extra)
            .args(["--json", "--pod-root", &pid])
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env("LEASECTL_LOG", "warn");
        match config_env {
            Some(f) => c.env("LEASECTL_CONFIG", f),
            None => c.env_remove("LEASECTL_CONFIG"),
        };
        run_with_timeout(c, Duration::from_secs(60))
    };
    let out = run(&[], None);
    let stderr = text(&out.stderr);
    let ctx = format!("{:?}\n{}\n{stderr}", out.status, text(&out.stdout));
    assert_eq!(out.status.code(), Some(0), "{ctx}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["pod"]["scope"][0]["pod_root"],
        Value::from(pod.pid),
        "{ctx}"
    );
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("config file"))
        .collect();
    assert_eq!(warnings.len(), 1, "{ctx}");
    assert!(
        warnings[0].starts_with("leasectl: warning: cannot read the config file ")
            && warnings[0].contains(&file.display().to_string())
            && warnings[0].contains("Permission denied")
            && warnings[0].contains("going on without contexts"),
        "{ctx}"
    );

    // A context asked for: an error, exit 2.
    let out = run(&["-c", "prod"], None);
    let ctx = format!("-c: {:?}\n{}", out.status, text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{ctx}");
    assert!(
        text(&out.stderr).contains("cannot read the config file"),
        "{ctx}"
    );
    let out = run(&[], Some(&file));
    let ctx = format!("LEASECTL_CONFIG: {:?}\n{}", out.status, text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{ctx}");
    assert!(
        text(&out.stderr).contains("cannot read the config file"),
        "{ctx}"
    );
    // The file itself is valid: root, who may read it, applies it.
    let mut c = command(&leasectl_bin());
    c.args(["-c", "prod", "--json", "--pod-root", &pid])
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("LEASECTL_CONFIG");
    let out = run_with_timeout(c, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// §1 in the console (TestBackend): the note about processes nobody asked
/// about is shown in the pod view, not in red; the same note for a pod
/// given by `--pod-root` is red (incomplete and in question).
#[tokio::test]
async fn console_shows_the_note_in_red_only_when_the_pod_is_in_question() {
    use leasectl::snapshot::{GatherOptions, OpenTarget};
    use leasectl::tui::app::{Action, App};
    use leasectl::writer::scan::{judge, Observed, PodScope};
    use ratatui::style::Color;

    let dir = tempfile::tempdir().unwrap();
    let url = healthy_store(dir.path());
    let store_dir = dir.path().join("store");
    let clock = leasectl::clock::SystemClock::shared();
    let open = vec![OpenTarget {
        target: url.parse().unwrap(),
        endpoint: "local".into(),
        store: std::sync::Arc::new(leasectl::store::local::LocalStore::open(&store_dir).unwrap()),
    }];
    for (mode, pod_root, red) in [("auto", None, false), ("pod_root", Some(1), true)] {
        let obs = Observed {
            uninspected: [1, 2].into_iter().collect(),
            fds_unreadable: [1, 2].into_iter().collect(),
            scope: Some(PodScope {
                mode: mode.into(),
                pod_root,
                processes_seen: 5,
                processes_selected: 0,
                data_dirs: Vec::new(),
                description: "test".into(),
            }),
            ..Observed::default()
        };
        let mut snap = leasectl::snapshot::gather(&open, &GatherOptions::default(), &clock).await;
        snap.pod = judge(&obs);
        assert_eq!(snap.pod_in_question(), red, "{mode}");
        assert_eq!(snap.exit_code().code(), if red { 1 } else { 0 }, "{mode}");
        let mut app = App::new(
            vec![url.parse().unwrap()],
            false,
            Duration::from_secs(5),
            Utc::now(),
        );
        app.update(Action::Resize(120, 30));
        app.update(Action::Snapshot(Box::new(snap)));
        app.update(Action::SwitchView);
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 30)).unwrap();
        t.draw(|f| leasectl::tui::ui::render(&app, f)).unwrap();
        let buf = t.backend().buffer().clone();
        let mut found = false;
        for y in 0..buf.area.height {
            let row: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
            if let Some(x) = row.find("2 processes could not be inspected") {
                found = true;
                let col = row[..x].chars().count() as u16;
                let fg = buf[(col, y)].fg;
                assert_eq!(fg == Color::Red, red, "{mode}: colour {fg:?} of:\n{row}");
                if !red {
                    assert!(row.contains("no pod was found among the 3"), "{row}");
                }
            }
        }
        assert!(found, "{mode}: the note is not on screen");
    }
}
