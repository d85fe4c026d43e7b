//! The pod view from every mount namespace (issue 46). Containers are
//! real kernel namespaces ([`crate::writer_support::pods`]); every viewer
//! (the host, a `kubectl debug` container, the pod itself, a debug container
//! without CAP_SYS_PTRACE, a rootless viewer) looks at every kind of holder
//! (one sharing the host's mounts, one with a mount namespace of its own,
//! one with a user namespace of its own, a waiter on a volume another pod
//! holds, two pod roots on one volume at different paths) and must say what
//! a careful operator would: held by its holder, held outside its PID
//! namespace, or unknown with what is missing — never `free`, never "holds
//! nothing".
//!
//! Every data directory path the pods use also exists on the host and in
//! each debug container, with a free `.writer.lock` in it: a path looked up
//! in the viewer's own mount namespace finds that file, not the pod's.

use std::path::PathBuf;

use serde_json::Value;

use crate::writer_support::pods::*;
use crate::writer_support::*;

/// What the pod view must say about the viewed pod's lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Held by this pid (as the viewer sees it).
    Held(u32),
    /// Held by a process outside the viewer's PID namespace.
    HeldOutside,
    /// Unknown, the notes saying what is missing (this text).
    Unknown(&'static str),
}

/// One holder arrangement: the pods, which one is viewed, and the data
/// directory it uses.
struct Case {
    name: &'static str,
    scratch: Scratch,
    pods: Vec<NsPod>,
    /// (index of the viewed pod, index of the holding pod).
    views: Vec<(usize, usize)>,
}

fn writer(s: &Scratch, data: &std::path::Path) -> String {
    format!(
        "CLOUD_WRITER_LEASE=1 exec {} writer exec --data-dir {} --wait 300s -- sleep 300",
        s.bin(),
        sq(&data.display().to_string())
    )
}

/// A data directory on the host with a free lock file in it (the decoy).
fn decoyed(s: &Scratch, name: &str) -> PathBuf {
    let d = s.mkdir(name);
    std::fs::write(d.join(".writer.lock"), b"").unwrap();
    d
}

/// A pod of its own mounts at `data` whose root runs [`writer`] there.
fn writing(s: &Scratch, data: &std::path::Path) -> PodSpec {
    PodSpec {
        data: data.to_owned(),
        script: writer(s, data),
        ..PodSpec::default()
    }
}

/// `leasectl --json --pod-root ROOT --data-dir DATA` from the host: its exit
/// code and document.
fn host_view(s: &Scratch, pod: &NsPod, data: &std::path::Path) -> (i32, Value) {
    let data = data.display().to_string();
    run_json(Viewer::Host.command(s, pod, &["--pod-root", "{root}", "--data-dir", &data]))
}

fn holder(spec: PodSpec) -> NsPod {
    NsPod::start(spec, holds_flock)
}

fn waiter(spec: PodSpec) -> NsPod {
    NsPod::start(spec, has_lock_open)
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    {
        let s = Scratch::new();
        let d = s.mkdir("data");
        let a = holder(PodSpec {
            shared_mounts: true,
            ..writing(&s, &d)
        });
        out.push(Case {
            name: "same mounts",
            scratch: s,
            pods: vec![a],
            views: vec![(0, 0)],
        });
    }
    for (name, user_ns) in [("own mounts", false), ("own user namespace", true)] {
        let s = Scratch::new();
        let d = decoyed(&s, "data");
        let a = holder(PodSpec {
            pid_ns: true,
            user_ns,
            ..writing(&s, &d)
        });
        out.push(Case {
            name,
            scratch: s,
            pods: vec![a],
            views: vec![(0, 0)],
        });
    }
    {
        let s = Scratch::new();
        let v = s.mkdir("volume");
        let d = decoyed(&s, "data");
        let spec = PodSpec {
            volume: Some(v),
            pid_ns: true,
            ..writing(&s, &d)
        };
        let a = holder(spec.clone());
        let b = waiter(spec);
        out.push(Case {
            name: "a waiter",
            scratch: s,
            pods: vec![a, b],
            views: vec![(1, 0)],
        });
    }
    {
        let s = Scratch::new();
        let v = s.mkdir("volume");
        let (d1, d2) = (decoyed(&s, "data-a"), decoyed(&s, "data-b"));
        let a = holder(PodSpec {
            volume: Some(v.clone()),
            pid_ns: true,
            ..writing(&s, &d1)
        });
        let b = waiter(PodSpec {
            volume: Some(v),
            pid_ns: true,
            ..writing(&s, &d2)
        });
        out.push(Case {
            name: "two pod roots on one volume",
            scratch: s,
            pods: vec![a, b],
            views: vec![(0, 0), (1, 0)],
        });
    }
    out
}

/// What `viewer` must conclude about pod `viewed` whose lock `holding` holds.
fn want(viewer: Viewer, c: &Case, viewed: usize, holding: usize) -> Want {
    let (v, h) = (&c.pods[viewed], &c.pods[holding]);
    let shares_host_mounts = v.spec.shared_mounts;
    match viewer {
        Viewer::Host => Want::Held(h.root),
        Viewer::Debug | Viewer::Pod if viewed == holding => Want::Held(h.inner_root),
        // The waiter's own PID namespace does not show the holder.
        Viewer::Debug | Viewer::Pod => Want::HeldOutside,
        Viewer::DebugNoPtrace => Want::Unknown("without CAP_SYS_PTRACE"),
        // Sharing the host's mounts, the path is the viewer's too, and
        // /proc/locks names the live holder.
        Viewer::Rootless if shares_host_mounts => Want::Held(h.root),
        Viewer::Rootless => Want::Unknown("user namespace of its own"),
    }
}

/// The assertions every view shares, and the one `want` asks for.
fn judge_view(ctx: &str, code: i32, doc: &Value, want: Want, waiting: bool, data_dir: bool) {
    let pod = &doc["pod"];
    let kinds = verdict_kinds(doc);
    assert!(
        !kinds.iter().any(|k| k == "armed_holds_nothing"),
        "{ctx}: holds nothing, yet a holder exists: {doc:#}"
    );
    let locks = pod["locks"].as_array().unwrap();
    for l in locks {
        assert_ne!(l["state"], "free", "{ctx}: free, yet held: {doc:#}");
    }
    match want {
        Want::Held(_) | Want::HeldOutside => {
            assert_eq!(locks.len(), 1, "{ctx}: {doc:#}");
            let l = &locks[0];
            if let Want::Held(pid) = want {
                assert_eq!(l["state"], "held", "{ctx}: {doc:#}");
                assert_eq!(l["holders"], serde_json::json!([pid]), "{ctx}: {doc:#}");
            } else {
                assert_eq!(l["state"], "held_outside_namespace", "{ctx}: {doc:#}");
            }
            if waiting {
                assert!(kinds.iter().any(|k| k == "waiting"), "{ctx}: {doc:#}");
                assert!(
                    kinds.iter().any(|k| k == "holder_outside_pod"),
                    "{ctx}: {doc:#}"
                );
                assert!(code == 3 || code == 1, "{ctx}: exit {code}");
            }
        }
        Want::Unknown(missing) => {
            assert_eq!(code, 1, "{ctx}: unknown is exit 1: {doc:#}");
            if data_dir {
                assert_eq!(locks.len(), 1, "{ctx}: {doc:#}");
                assert_eq!(locks[0]["state"], "unknown", "{ctx}: {doc:#}");
            }
            let said = serde_json::to_string(&pod["notes"]).unwrap();
            assert!(
                said.contains(missing),
                "{ctx}: notes do not say {missing:?}: {said}"
            );
        }
    }
}

/// The matrix: every viewer × every holder, with `--data-dir` and by
/// descriptors alone.
#[test]
fn every_viewer_sees_every_holder_as_a_careful_operator_would() {
    skip_unless_able!(cannot_make_namespaces());
    for c in cases() {
        for &(viewed, holding) in &c.views {
            let pod = &c.pods[viewed];
            let d = pod.spec.data.display().to_string();
            let waiting = viewed != holding;
            for viewer in Viewer::ALL {
                for data_dir in [true, false] {
                    let mut args = vec!["--pod-root", "{root}"];
                    if data_dir {
                        args.extend(["--data-dir", &d]);
                    }
                    let (code, doc) = run_json(viewer.command(&c.scratch, pod, &args));
                    let w = want(viewer, &c, viewed, holding);
                    let ctx = format!(
                        "{}, pod {viewed} (held by pod {holding}), viewer {viewer:?}, {}",
                        c.name,
                        if data_dir {
                            "--data-dir"
                        } else {
                            "descriptors"
                        }
                    );
                    // Without the rights, descriptors show nothing: what
                    // cannot be read is unknown, and nothing is built on it.
                    // The cell, for the record (`--nocapture`).
                    let states: Vec<&str> = doc["pod"]["locks"]
                        .as_array()
                        .map(|l| l.iter().filter_map(|l| l["state"].as_str()).collect())
                        .unwrap_or_default();
                    eprintln!(
                        "{ctx}: exit {code}, locks {states:?}, verdicts {:?}",
                        verdict_kinds(&doc)
                    );
                    let rightless = matches!(viewer, Viewer::DebugNoPtrace | Viewer::Rootless);
                    if !data_dir && rightless {
                        assert_eq!(code, 1, "{ctx}: {doc:#}");
                        assert!(
                            !verdict_kinds(&doc)
                                .iter()
                                .any(|k| k == "armed_holds_nothing"),
                            "{ctx}: {doc:#}"
                        );
                        continue;
                    }
                    judge_view(&ctx, code, &doc, w, waiting, data_dir);
                }
            }
        }
    }
}

/// The case of the issue, as it was reported: a pod in its own mount
/// namespace with a tmpfs at its data directory holds the lock; the host's
/// same path holds a free lock file. `--pod-root PID --data-dir DIR` from the
/// host reads `held` by the holder, says in one line that the viewer's
/// mount namespace is not the pod's, and names the pod root's container
/// as none (no runtime cgroup).
#[test]
fn the_reported_case_reads_held_by_its_holder() {
    skip_unless_able!(cannot_make_namespaces());
    let s = Scratch::new();
    let d = decoyed(&s, "data");
    let pod = holder(writing(&s, &d));
    let (code, doc) = host_view(&s, &pod, &d);
    let ctx = format!("{doc:#}");
    let l = &doc["pod"]["locks"][0];
    assert_eq!(l["state"], "held", "{ctx}");
    assert_eq!(l["holders"], serde_json::json!([pod.root]), "{ctx}");
    assert_eq!(code, 0, "{ctx}");
    let viewer = &doc["pod"]["viewer"];
    assert_eq!(viewer["mount_namespace"], "different", "{ctx}");
    let lines = viewer["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "{ctx}");
    assert!(
        text_of(&lines[0]).contains(&format!("not pod root {}'s", pod.root)),
        "{ctx}"
    );
    // The host's own file at that path is free, and was not asked about.
    assert!(lock_is_free(&d));

    // Auto-detection with the same --data-dir: the path is looked up where
    // each process with a lease variable sees it too.
    let mut auto = command(&s.bin());
    auto.args(["--json", "--data-dir"])
        .arg(&d)
        .env("LEASECTL_LOG", "warn");
    let (_, doc) = run_json(auto);
    let ctx = format!("{doc:#}");
    assert!(
        !verdict_kinds(&doc)
            .iter()
            .any(|k| k == "armed_holds_nothing"),
        "{ctx}"
    );
    let held: Vec<&Value> = doc["pod"]["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["state"] == "held")
        .collect();
    assert_eq!(held.len(), 1, "{ctx}");
    assert_eq!(held[0]["holders"], serde_json::json!([pod.root]), "{ctx}");
    assert!(
        text_of(&held[0]["path"]).ends_with(&format!("(in pid {}'s mount namespace)", pod.root)),
        "{ctx}"
    );
}

/// A data directory that is a symbolic link inside the pod to an absolute
/// path: resolved inside the pod's root (`RESOLVE_IN_ROOT`), not in the
/// viewer's, where the same absolute path holds a free decoy.
#[test]
fn an_absolute_link_inside_the_pod_stays_inside() {
    skip_unless_able!(cannot_make_namespaces());
    let s = Scratch::new();
    // Inside the pod: data is a tmpfs holding `real/` and `link -> <data>/real`.
    // On the host: <data>/real holds a free decoy lock file.
    let d = s.mkdir("data");
    let real = d.join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::write(real.join(".writer.lock"), b"").unwrap();
    let link = d.join("link");
    let script = format!(
        "mkdir {r} && ln -s {r} {l} && CLOUD_WRITER_LEASE=1 exec {} writer exec --data-dir {l} --wait 30s -- sleep 300",
        s.bin(),
        r = sq(&real.display().to_string()),
        l = sq(&link.display().to_string()),
    );
    let pod = holder(PodSpec {
        data: d.clone(),
        pid_ns: true,
        script,
        ..PodSpec::default()
    });
    // The host has no link: give the pod's path.
    let (code, doc) = host_view(&s, &pod, &link);
    let ctx = format!("{doc:#}");
    assert_eq!(doc["pod"]["locks"][0]["state"], "held", "{ctx}");
    assert_eq!(code, 0, "{ctx}");
    // A path the pod does not have is an error naming where it was looked for.
    let mut typo = command(&s.bin());
    typo.args(["--json", "--pod-root", &pod.root.to_string(), "--data-dir"])
        .arg(s.dir.path().join("nowhere"))
        .env("LEASECTL_LOG", "warn");
    let (status, _out, err) = Guard::spawn({
        typo.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        typo
    })
    .output(std::time::Duration::from_secs(20));
    assert_ne!(status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("pod root {}'s mount namespace", pod.root)),
        "{err}"
    );
}

/// Which pod, which container (issue 46, item 2): a pod in a real cgroup
/// named as containerd names it under the systemd driver, with its
/// `HOSTNAME` and a service-account namespace mount, seen with `--pod-root`
/// from the host: its processes carry the container and the pod, and the
/// pod is named.
#[test]
fn the_pod_view_names_the_pod_and_the_container() {
    skip_unless_able!(cannot_make_namespaces().or_else(|| TestCgroup::possible(false)));
    let s = Scratch::new();
    let d = s.mkdir("data");
    let uid = format!("{:08x}-1111-4222-8333-444455556666", std::process::id());
    let id = format!("{:08x}{}", std::process::id(), "ab".repeat(28));
    let top = TestCgroup::make(&format!("leasectl-pod-{}", std::process::id()), false).unwrap();
    let cg = top.0.join(format!(
        "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{id}.scope",
        uid.replace('-', "_")
    ));
    std::fs::create_dir_all(&cg).unwrap();
    let pod = holder(PodSpec {
        pid_ns: true,
        cgroup: Some(cg),
        hostname: Some("ledger-0".into()),
        namespace: Some("payments".into()),
        ..writing(&s, &d)
    });
    let (code, doc) = host_view(&s, &pod, &d);
    let ctx = format!("{doc:#}");
    assert_eq!(code, 0, "{ctx}");
    let k = &doc["pod"]["kubernetes"];
    assert_eq!(k["uid"], uid, "{ctx}");
    assert_eq!(k["name"], "ledger-0", "{ctx}");
    assert_eq!(k["namespace"], "payments", "{ctx}");
    assert_eq!(k["qos"], "burstable", "{ctx}");
    assert_eq!(k["containers"][0]["id"], id, "{ctx}");
    assert_eq!(k["containers"][0]["runtime"], "containerd", "{ctx}");
    let root = pod_process(&doc, pod.root);
    assert_eq!(root["container"]["id"], id, "{ctx}");
    assert_eq!(root["container"]["pod_uid"], uid, "{ctx}");
    assert!(
        text_of(&root["container"]["cgroup"]).ends_with(&format!("cri-containerd-{id}.scope")),
        "{ctx}"
    );
    drop(pod);
}
