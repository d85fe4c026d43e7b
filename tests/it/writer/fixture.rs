//! The pod scan on a recorded `/proc` (issue 50): 1,000 real processes of
//! `scripts/pod_fixture.py`'s harness — namespaced pods in containerd-named
//! cgroups with `writer exec` holding and polling, a lock held by flock(1)
//! with blocked waiters, odd lease variables, sleepers — copied into
//! `tests/fixtures/pod_scan/proc-1000.json`, made into a proc root here, and
//! scanned in every mode by `leasectl pod-scan --proc-root`, with processes
//! that exited while being read (`vanished`). Each document
//! must be the one the build that recorded the fixture gave
//! (`expected.json`: its exit code, the SHA-256 of its normalised form, its
//! verdicts and lock files), so that a faster scan is the same scan. The
//! fixture is made as `scripts/pod_fixture.py materialise` makes it (see
//! that script for what is kept); `bless` writes `expected.json` again when
//! the scan's output is meant to change.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use leasectl::writer::scan::ns::ViewerFacts;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::writer_support::leasectl_bin;

const FIXTURE: &str = "tests/fixtures/pod_scan";

/// Where Kubernetes mounts a pod's service-account namespace: the scan
/// reads it through a container's root, which in the fixture is the host's.
const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// What stands for the variables of an environment the recorder did not
/// keep (as `scripts/pod_fixture.py` writes it).
const OTHER: &str = "FIXTURE_OTHER=variables not recorded";

/// A recorded text as the bytes it was (the recorder decoded them as Latin-1).
fn bytes(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| u8::try_from(c as u32).expect("a Latin-1 character"))
        .collect()
}

/// `text` with each `@NAMEk@` replaced by `with[k]`.
fn fill(text: &str, name: &str, with: &[String]) -> String {
    let mark = format!("@{name}");
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(&mark) {
        out.push_str(&rest[..i]);
        let after = &rest[i + mark.len()..];
        let end = after.find('@').expect("a closed mark");
        let k: usize = after[..end].parse().expect("a mark's number");
        out.push_str(&with[k]);
        rest = &after[end + 1..];
    }
    out + rest
}

/// The fixture made under `dir`: `dir/proc`, the lock files under
/// `dir/files`; the ones to keep flocked while the scans run.
fn materialise(doc: &Value, dir: &Path) -> Vec<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::symlink;
    let (proc, files) = (dir.join("proc"), dir.join("files"));
    let (mut ids, mut paths, mut held) = (Vec::new(), Vec::new(), Vec::new());
    for (k, f) in doc["lock_files"].as_array().unwrap().iter().enumerate() {
        let d = files.join(k.to_string());
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join(".writer.lock");
        std::fs::write(&path, b"").unwrap();
        let st = nix::sys::stat::stat(&path).unwrap();
        let (maj, min) = (
            nix::sys::stat::major(st.st_dev),
            nix::sys::stat::minor(st.st_dev),
        );
        ids.push(format!("{maj:02x}:{min:02x}:{}", st.st_ino));
        paths.push(path.display().to_string());
        if f["locked"].as_bool().unwrap() {
            let file = std::fs::File::open(&path).unwrap();
            let lock = nix::fcntl::FlockArg::LockExclusive;
            held.push(
                nix::fcntl::Flock::lock(file, lock)
                    .map_err(|(_, e)| e)
                    .unwrap(),
            );
        }
    }
    let fill = |t: &str| fill(&fill(t, "ID", &ids), "LOCK", &paths);
    let texts = doc["texts"].as_array().unwrap();
    let text = |v: &Value| -> String {
        match v {
            Value::Number(n) => texts[n.as_u64().unwrap() as usize]
                .as_str()
                .unwrap()
                .to_owned(),
            v => v.as_str().unwrap().to_owned(),
        }
    };
    let link = |target: &str, at: PathBuf| {
        symlink(std::ffi::OsStr::from_bytes(&bytes(target)), at).unwrap();
    };
    std::fs::create_dir_all(&proc).unwrap();
    for name in ["locks", "uptime"] {
        std::fs::write(proc.join(name), bytes(&fill(doc[name].as_str().unwrap()))).unwrap();
    }
    let me = doc["self"].as_str().unwrap();
    link(me, proc.join("self"));
    // Processes that exited while the scan read them: a directory with some
    // of their files, or none.
    for (pid, files) in doc["vanished"].as_object().into_iter().flatten() {
        std::fs::create_dir_all(proc.join(pid)).unwrap();
        for (name, t) in files.as_object().unwrap() {
            std::fs::write(proc.join(pid).join(name), bytes(t.as_str().unwrap())).unwrap();
        }
    }
    for (pid, p) in doc["processes"].as_object().unwrap() {
        let d = proc.join(pid);
        std::fs::create_dir_all(d.join("fdinfo")).unwrap();
        let write = |name: &str, t: &str| std::fs::write(d.join(name), bytes(t)).unwrap();
        for name in ["stat", "cmdline", "cgroup", "uid_map", "mountinfo"] {
            if let Some(v) = p.get(name) {
                write(name, &text(v));
            }
        }
        if pid == me {
            write("mountinfo", doc["self_mountinfo"].as_str().unwrap());
        }
        match p.get("environ") {
            // A directory cannot be read as a file: it stands for a refusal.
            Some(Value::Null) => std::fs::create_dir(d.join("environ")).unwrap(),
            Some(Value::Array(env)) => {
                let mut all: String = env
                    .iter()
                    .map(|e| e.as_str().unwrap().to_owned() + "\0")
                    .collect();
                // The variables the recorder did not keep, if there were any.
                if p.get("environ_other").and_then(Value::as_bool) != Some(false) {
                    all.push_str(OTHER);
                    all.push('\0');
                }
                write("environ", &all);
            }
            _ => {}
        }
        if let Some(ns) = p.get("ns").and_then(Value::as_object) {
            std::fs::create_dir(d.join("ns")).unwrap();
            for (n, t) in ns.iter().filter(|(_, t)| !t.is_null()) {
                link(&text(t), d.join("ns").join(n));
            }
        }
        if let Some(r) = p.get("root").filter(|r| !r.is_null()) {
            link(&text(r), d.join("root"));
        }
        match p.get("fd") {
            // A file cannot be listed as a directory: it stands for a refusal.
            Some(Value::Null) => write("fd", ""),
            Some(Value::Object(fds)) => {
                std::fs::create_dir(d.join("fd")).unwrap();
                for (fd, t) in fds {
                    link(&fill(t.as_str().unwrap()), d.join("fd").join(fd));
                }
            }
            _ => {}
        }
        for (fd, t) in p
            .get("fdinfo")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            write(&format!("fdinfo/{fd}"), &fill(t.as_str().unwrap()));
        }
    }
    held
}

/// `v` with `f` applied to every string in it.
fn strings(v: Value, f: &impl Fn(&str) -> String) -> Value {
    match v {
        Value::String(s) => Value::String(f(&s)),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| strings(x, f)).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, x)| (k, strings(x, f))).collect()),
        v => v,
    }
}

/// What `scripts/pod_fixture.py` compares of a document: the fixture's
/// directory as `{fixture}`, the running scan's remedy as `{remedy}`, the
/// viewer's uid and `CAP_SYS_PTRACE` left out (those three are the running
/// scan's own, not the fixture's).
fn normalise(doc: Value, fixture: &str, remedy: &str) -> Value {
    let mut doc = strings(doc, &|s| {
        s.replace(fixture, "{fixture}").replace(remedy, "{remedy}")
    });
    if let Some(v) = doc.get_mut("viewer").and_then(Value::as_object_mut) {
        v.remove("euid");
        v.remove("cap_sys_ptrace");
    }
    doc
}

/// The script's summary of a document: verdicts and lock files in words.
fn summary(doc: &Value) -> (Vec<String>, Vec<String>, usize) {
    let words = |head: Vec<&str>, pids: &Value| {
        let mut w: Vec<String> = head.into_iter().map(str::to_owned).collect();
        w.extend(pids.as_array().unwrap().iter().map(|p| p.to_string()));
        w.join(" ")
    };
    let list = |k: &str| doc[k].as_array().cloned().unwrap_or_default();
    let verdicts = list("verdicts")
        .iter()
        .map(|v| words(vec![v["kind"].as_str().unwrap()], &v["pids"]))
        .collect();
    let locks = list("locks")
        .iter()
        .map(|l| {
            let head = vec![l["path"].as_str().unwrap(), l["state"].as_str().unwrap()];
            words(head, &l["holders"])
        })
        .collect();
    (verdicts, locks, list("processes").len())
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// Every mode of the recorded scan, the same document as the recording
/// build's: auto-detection, the node view, `--pod-root 1` (every process
/// shown), a pod's root, and `--data-dir` of the host's flock(1) lock.
#[test]
fn the_scan_of_a_recorded_proc_is_the_recording_builds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(root.join("proc-1000.json")).unwrap()).unwrap();
    let expected: BTreeMap<String, Value> =
        serde_json::from_slice(&std::fs::read(root.join("expected.json")).unwrap()).unwrap();
    // On a tmpfs where there is one: some 12,000 files and links are made.
    let dir = tempfile::Builder::new()
        .prefix("pod-fixture-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let _held = materialise(&doc, dir.path());
    let fixture = dir.path().display().to_string();
    let remedy = ViewerFacts::current().remedy();
    let k8s_host = Path::new(NAMESPACE_FILE).exists();
    for (mode, want) in &expected {
        // A pod's namespace is read through its container's root, which the
        // fixture leaves at the host's own.
        if k8s_host && matches!(mode.as_str(), "node" | "pod_root_pod") {
            eprintln!("{mode}: skipped, this host has {NAMESPACE_FILE}");
            continue;
        }
        let args: Vec<String> = strs(&want["args"])
            .iter()
            .map(|a| a.replace("{fixture}", &fixture))
            .collect();
        let out = Command::new(leasectl_bin())
            .args(["pod-scan", "--json", "--proc-root"])
            .arg(dir.path().join("proc"))
            .args(&args)
            .env("LEASECTL_LOG", "warn")
            .output()
            .unwrap();
        let got: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{mode}: no document ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let got = normalise(got, &fixture, &remedy);
        let (verdicts, locks, processes) = summary(&got);
        assert_eq!(verdicts, strs(&want["verdicts"]), "{mode}: verdicts");
        assert_eq!(locks, strs(&want["locks"]), "{mode}: lock files");
        assert_eq!(
            processes as u64,
            want["processes"].as_u64().unwrap(),
            "{mode}"
        );
        assert_eq!(
            out.status.code(),
            want["exit"].as_i64().map(|c| c as i32),
            "{mode}"
        );
        let canonical = serde_json::to_string(&got).unwrap();
        let sha = hex::encode(Sha256::digest(canonical.as_bytes()));
        if sha != want["sha256"].as_str().unwrap() {
            let kept = std::env::temp_dir().join(format!("pod-fixture-{mode}.json"));
            std::fs::write(&kept, serde_json::to_string_pretty(&got).unwrap()).unwrap();
            panic!(
                "{mode}: the document is not the recording build's (its normalised form is in {}; \
                 scripts/pod_fixture.py compare shows the difference with that build, and bless \
                 records a meant change)",
                kept.display()
            );
        }
    }
}
