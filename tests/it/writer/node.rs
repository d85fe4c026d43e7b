//! The node view (issue 46) on a node of 50 namespaced pods: a PID
//! namespace stands in for the node, each pod has mount and PID namespaces
//! of its own and real cgroups named as containerd, CRI-O and Docker name
//! them under the systemd driver on cgroup v2, and as the cgroupfs driver
//! names them on cgroup v1. Grouping, identity, verdicts, `--json`,
//! `check` and `serve`'s series; and the same node seen without
//! CAP_SYS_PTRACE, through a cgroup namespace of the viewer's own, and from
//! `/proc` fixtures of runtimes that cannot run here.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::writer_support::pods::*;
use crate::writer_support::*;

/// How many pods the node runs.
const PODS: usize = 50;

/// What a pod of the node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// `writer exec` holding its own tmpfs's lock.
    Healthy,
    /// Two `writer exec` siblings, both with duty take.
    Racing,
    /// The lease on, nobody takes the lock.
    HoldsNothing,
    /// Holds the shared volume's lock.
    SharedHolder,
    /// Waits for the shared volume's lock.
    SharedWaiter,
    /// No lease at all.
    NoLease,
}

impl Role {
    fn of(i: usize) -> Role {
        match i {
            44 | 45 => Role::Racing,
            46 => Role::HoldsNothing,
            47 => Role::SharedHolder,
            48 => Role::SharedWaiter,
            49 => Role::NoLease,
            _ => Role::Healthy,
        }
    }

    fn state(self) -> &'static str {
        match self {
            Role::Healthy | Role::SharedHolder => "healthy",
            Role::Racing => "racing",
            Role::HoldsNothing => "holding_nothing",
            Role::SharedWaiter => "waiting",
            Role::NoLease => "no_lease",
        }
    }
}

/// One pod's made-up identity and cgroup.
struct Made {
    uid: String,
    id: String,
    name: String,
    namespace: String,
    /// The runtime its cgroup name says (`None`: the cgroupfs driver's bare id).
    runtime: Option<&'static str>,
    role: Role,
}

/// A 64-hex container id and a pod UID, distinct per pod and per run.
fn ids(i: usize) -> (String, String) {
    let run = std::process::id();
    let uid = format!("{run:08x}-{i:04x}-4000-8000-{:012x}", i * 7919);
    let id = format!("{run:08x}{i:08x}{}", "c0ffee".repeat(8));
    (uid, id)
}

/// The cgroup, relative to a test's top cgroup, that runtime `i % 4` gives
/// a container of pod `uid`: (path, v1 hierarchy, runtime).
fn cgroup_of(i: usize, uid: &str, id: &str) -> (String, bool, Option<&'static str>) {
    let uid_ = uid.replace('-', "_");
    match i % 4 {
        0 => (
            format!("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid_}.slice/cri-containerd-{id}.scope"),
            false,
            Some("containerd"),
        ),
        1 => (
            format!("kubepods.slice/kubepods-pod{uid_}.slice/crio-{id}.scope"),
            false,
            Some("cri-o"),
        ),
        2 => (format!("kubepods/burstable/pod{uid}/{id}"), true, None),
        _ => (
            format!("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/docker-{id}.scope"),
            false,
            Some("docker"),
        ),
    }
}

/// The node with its 50 pods and their cgroups (removed after them).
struct Node {
    pods: Vec<NsPod>,
    made: Vec<Made>,
    node: FakeNode,
    scratch: Scratch,
    _cgroups: (Option<TestCgroup>, TestCgroup),
}

fn start_node() -> Node {
    let s = Scratch::new();
    let node = FakeNode::start();
    let top = format!("leasectl-node-{}-{}", std::process::id(), node.init);
    let v2 = TestCgroup::make(&top, false).expect("a v2 cgroup");
    // The cgroupfs driver's names on cgroup v1 where this host has a v1
    // hierarchy (a hybrid host), else on v2.
    let v1 = TestCgroup::make(&top, true);
    let shared = s.mkdir("shared-volume");
    let bin = s.bin();
    let mut pods = Vec::new();
    let mut made = Vec::new();
    for i in 0..PODS {
        let (uid, id) = ids(i);
        let (rel, is_v1, runtime) = cgroup_of(i, &uid, &id);
        let cg = match (&v1, is_v1) {
            (Some(v1), true) => v1,
            _ => &v2,
        }
        .0
        .join(rel);
        std::fs::create_dir_all(&cg).unwrap();
        let role = Role::of(i);
        let d = s.mkdir(&format!("data-{i}"));
        let ds = sq(&d.display().to_string());
        let wx = format!("{bin} writer exec --data-dir {ds} --wait 300s -- sleep 300");
        let script = match role {
            Role::Healthy | Role::SharedHolder | Role::SharedWaiter => {
                format!("CLOUD_WRITER_LEASE=1 exec {wx}")
            }
            Role::Racing => format!("export CLOUD_WRITER_LEASE=1; {wx} & {wx} & wait"),
            Role::HoldsNothing => "CLOUD_WRITER_LEASE=1 exec sleep 300".to_string(),
            Role::NoLease => "exec sleep 300".to_string(),
        };
        let volume =
            matches!(role, Role::SharedHolder | Role::SharedWaiter).then(|| shared.clone());
        let name = format!("web-{i}");
        let namespace = format!("team-{}", i % 3);
        let spec = PodSpec {
            data: d,
            volume,
            pid_ns: true,
            cgroup: Some(cg),
            hostname: Some(name.clone()),
            namespace: Some(namespace.clone()),
            node: Some(node.init),
            script,
            ..PodSpec::default()
        };
        let pod = match role {
            Role::Healthy | Role::SharedHolder => NsPod::start(spec, holds_flock),
            // The waiter, or the racer that loses: the lock file open.
            Role::SharedWaiter => NsPod::start(spec, has_lock_open),
            Role::Racing => NsPod::start(spec, |r| {
                let kids = children(r);
                kids.len() == 2 && kids.iter().all(|k| has_lock_open(*k))
            }),
            Role::HoldsNothing | Role::NoLease => NsPod::start(spec, |r| {
                std::fs::read_to_string(format!("/proc/{r}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            }),
        };
        pods.push(pod);
        made.push(Made {
            uid,
            id,
            name,
            namespace,
            runtime,
            role,
        });
    }
    Node {
        pods,
        made,
        node,
        scratch: s,
        _cgroups: (v1, v2),
    }
}

fn cannot_make_a_node() -> Option<String> {
    cannot_make_namespaces().or_else(|| TestCgroup::possible(false))
}

/// Runs `cmd`, returns exit code, stdout, stderr (through files: a node's
/// JSON is larger than a pipe holds).
fn output(mut cmd: std::process::Command) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (o, e) = (dir.path().join("out"), dir.path().join("err"));
    cmd.stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap());
    let (status, _, _) = Guard::spawn(cmd).output(Duration::from_secs(60));
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (status.code().unwrap_or(-1), read(&o), read(&e))
}

/// The node view's pods by UID.
fn pods_by_uid(doc: &Value) -> BTreeMap<String, &Value> {
    doc["pod"]["node"]["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["kubernetes"]["uid"].as_str()?.to_owned(), p)))
        .collect()
}

/// Everything about the node in one test (the node costs its 50 pods to
/// start): `--json`, the cgroup namespace, `check`, `serve`, and without
/// CAP_SYS_PTRACE.
#[test]
fn the_node_view_of_fifty_namespaced_pods() {
    skip_unless_able!(cannot_make_a_node());
    let n = start_node();
    json_groups_and_judges_every_pod(&n);
    a_cgroup_namespace_changes_nothing(&n);
    check_names_the_pods(&n);
    serve_has_one_row_per_pod(&n);
    without_ptrace_every_pod_is_unknown(&n);
}

fn json_groups_and_judges_every_pod(n: &Node) {
    let (code, out, err) = output(n.node.leasectl(&n.scratch, &["--json", "--node"]));
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let ctx = format!("{doc:#}");
    let node = &doc["pod"]["node"];
    let summary = &node["summary"];
    assert_eq!(summary["pods"], PODS, "{ctx}");
    assert_eq!(summary["healthy"], 45, "{ctx}");
    assert_eq!(summary["racing"], 2, "{ctx}");
    assert_eq!(summary["holding_nothing"], 1, "{ctx}");
    assert_eq!(summary["waiting"], 1, "{ctx}");
    assert_eq!(summary["no_lease"], 1, "{ctx}");
    assert_eq!(summary["unknown"], 0, "{ctx}");
    assert_eq!(summary["attention"], 0, "{ctx}");
    // Verdicts fired: exit 3.
    assert_eq!(code, 3, "{ctx}\n{err}");
    let by_uid = pods_by_uid(&doc);
    assert_eq!(by_uid.len(), PODS, "{ctx}");
    for (i, (m, pod)) in n.made.iter().zip(&n.pods).enumerate() {
        let p = by_uid[&m.uid];
        let k = &p["kubernetes"];
        let ctx = format!("pod {i} ({:?}): {p:#}", m.role);
        assert_eq!(p["state"], m.role.state(), "{ctx}");
        assert_eq!(k["name"], m.name, "{ctx}");
        assert_eq!(k["namespace"], m.namespace, "{ctx}");
        assert_eq!(p["label"], format!("{}/{}", m.namespace, m.name), "{ctx}");
        let containers = k["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1, "{ctx}");
        assert_eq!(containers[0]["id"], m.id, "{ctx}");
        assert_eq!(containers[0]["runtime"].as_str(), m.runtime, "{ctx}");
        // Every process of the pod, and only its own.
        let in_node: Vec<u64> = p["pids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert!(!in_node.is_empty(), "{ctx}");
        if matches!(m.role, Role::Healthy | Role::SharedHolder) {
            assert_eq!(p["holders"].as_array().unwrap().len(), 1, "{ctx}");
            assert_eq!(p["container"], m.id[..12], "{ctx}");
        }
        let _ = pod;
    }
    // Every pid in exactly one pod.
    let mut all: Vec<u64> = by_uid
        .values()
        .flat_map(|p| {
            p["pids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
        })
        .collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "a pid in two pods: {ctx}");
    // The verdicts name their pods; no pod without a lease is shown in full.
    let verdicts = doc["pod"]["verdicts"].as_array().unwrap();
    for (kind, want) in [
        ("siblings_racing", 2),
        ("armed_holds_nothing", 1),
        ("waiting", 3),
    ] {
        let got = verdicts.iter().filter(|v| v["kind"] == kind).count();
        assert_eq!(got, want, "{kind}: {ctx}");
    }
    for v in verdicts {
        let pod = v["pod"]
            .as_str()
            .unwrap_or_else(|| panic!("verdict without pod: {ctx}"));
        assert!(pod.starts_with("team-"), "{ctx}");
    }
    // Shown in full: the pods that need a look (their command lines read);
    // a healthy pod or one without a lease is its entry alone.
    let shown = |m: &Made| -> Vec<&Value> {
        doc["pod"]["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["container"]["pod_uid"] == m.uid.as_str())
            .collect()
    };
    for m in &n.made {
        let procs = shown(m);
        match m.role {
            Role::Healthy | Role::SharedHolder | Role::NoLease => {
                assert!(procs.is_empty(), "{:?} shown: {ctx}", m.role)
            }
            _ => {
                assert!(!procs.is_empty(), "{:?} not shown: {ctx}", m.role);
                assert!(
                    procs
                        .iter()
                        .any(|p| p["command"].as_str().unwrap().contains("sleep")),
                    "{ctx}"
                );
            }
        }
    }
    // The waiter is told who holds the volume's lock: the holder pod's root
    // as the node sees it.
    let waiter_uid = &n.made[48].uid;
    let waiting = verdicts
        .iter()
        .find(|v| v["kind"] == "waiting" && v["pod"].as_str().unwrap().ends_with("web-48"))
        .unwrap_or_else(|| panic!("{ctx}"));
    let holder_pids = by_uid[&n.made[47].uid]["holders"].clone();
    let holder = holder_pids[0].as_u64().unwrap();
    assert!(
        text_of(&waiting["message"]).contains(&format!("held by pid {holder}")),
        "{ctx}"
    );
    assert_eq!(
        by_uid[waiter_uid]["verdicts"],
        serde_json::json!(["waiting", "holder_outside_pod"]),
        "{ctx}"
    );
}

/// The DaemonSet's view: its own cgroup namespace, so every other pod's
/// cgroup path climbs out of it first (`/../..`). Same pods, same states.
fn a_cgroup_namespace_changes_nothing(n: &Node) {
    let top = format!("leasectl-viewer-{}-{}", std::process::id(), n.node.init);
    let Some(own) = TestCgroup::make(&top, false) else {
        panic!("cannot make the viewer's cgroup")
    };
    let script = format!(
        "echo 0 > {}/cgroup.procs && exec unshare --cgroup -- nsenter --target {} --pid --mount -- {} --json --node",
        sq(&own.0.display().to_string()),
        n.node.init,
        n.scratch.bin()
    );
    let mut c = command("sh");
    c.args(["-c", &script]).env("LEASECTL_LOG", "warn");
    let (_, out, err) = output(c);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let by_uid = pods_by_uid(&doc);
    assert_eq!(by_uid.len(), PODS, "{doc:#}");
    for m in &n.made {
        assert_eq!(by_uid[&m.uid]["state"], m.role.state(), "{doc:#}");
    }
    // The paths as the namespace shows them.
    let relative = doc["pod"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["container"]["cgroup"].as_str())
        .filter(|c| c.starts_with("/.."))
        .count();
    assert!(
        relative > 0,
        "no path seen through the cgroup namespace: {doc:#}"
    );
}

fn check_names_the_pods(n: &Node) {
    let (code, out, err) = output(n.node.leasectl(&n.scratch, &["check", "--node"]));
    assert_eq!(code, 2, "CRITICAL: {out}\n{err}");
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("LEASES CRITICAL - "), "{out}");
    assert!(
        first.contains(
            "node: 50 pods (45 healthy, 2 racing, 1 holding nothing, 1 waiting, 1 no lease)"
        ),
        "{out}"
    );
    assert!(first.contains("pods=50;;;0 pods_racing=2;;;0"), "{out}");
    for i in [44, 45] {
        let m = &n.made[i];
        let want = format!(
            "CRITICAL pod verdict siblings_racing in {}/{}:",
            m.namespace, m.name
        );
        assert!(out.contains(&want), "{want}: {out}");
    }
    let m = &n.made[46];
    assert!(
        out.contains(&format!(
            "CRITICAL pod verdict armed_holds_nothing in {}/{}:",
            m.namespace, m.name
        )),
        "{out}"
    );
}

/// One `GET` on a new connection: the body.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

fn serve_has_one_row_per_pod(n: &Node) {
    let stderr = n.scratch.dir.path().join("serve.stderr");
    let mut c = n.node.leasectl(
        &n.scratch,
        &[
            "serve",
            "--node",
            "--listen",
            "127.0.0.1:0",
            "--refresh",
            "1s",
        ],
    );
    c.stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap());
    let _serve = Guard::spawn(c);
    let port = crate::common::lines::serve_port(&stderr);
    let body = wait_for(Duration::from_secs(30), || {
        get(port, "/metrics").filter(|b| b.contains("leasectl_node_pod_state{"))
    })
    .unwrap_or_else(|| {
        panic!(
            "no node series: {}",
            std::fs::read_to_string(&stderr).unwrap_or_default()
        )
    });
    let rows: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("leasectl_node_pod_state{"))
        .collect();
    assert_eq!(rows.len(), PODS, "one row per pod: {body}");
    for m in &n.made {
        let row = rows
            .iter()
            .find(|r| r.contains(&format!("uid=\"{}\"", m.uid)))
            .unwrap_or_else(|| panic!("no row for {}: {body}", m.uid));
        assert!(
            row.contains(&format!("namespace=\"{}\"", m.namespace)),
            "{row}"
        );
        assert!(row.contains(&format!("pod=\"{}\"", m.name)), "{row}");
        assert!(
            row.contains(&format!("state=\"{}\"", m.role.state())),
            "{row}"
        );
        assert!(row.ends_with(" 1"), "{row}");
    }
    for (state, count) in [
        ("healthy", 45),
        ("racing", 2),
        ("waiting", 1),
        ("unknown", 0),
    ] {
        let want = format!("leasectl_node_pods{{state=\"{state}\"}} {count}");
        assert!(body.lines().any(|l| l == want), "{want}: {body}");
    }
    let racing_rows = body
        .lines()
        .filter(|l| {
            l.starts_with("leasectl_node_pod_verdicts{") && l.contains("kind=\"siblings_racing\"")
        })
        .count();
    assert_eq!(racing_rows, 2, "{body}");
    // No series per process.
    assert!(!body.contains("pid=\""), "{body}");
}

/// A debug container's default rights on the node: nothing of any pod's
/// descriptors can be read, so no pod is healthy, holds nothing or races —
/// each is unknown, and the notes say what is missing.
fn without_ptrace_every_pod_is_unknown(n: &Node) {
    let script = format!(
        "exec nsenter --target {} --pid --mount -- setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace -- {} --json --node",
        n.node.init,
        n.scratch.bin()
    );
    let mut c = command("sh");
    c.args(["-c", &script]).env("LEASECTL_LOG", "warn");
    let (code, out, err) = output(c);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let ctx = format!("{doc:#}");
    assert_eq!(code, 1, "{ctx}");
    let summary = &doc["pod"]["node"]["summary"];
    assert_eq!(summary["pods"], PODS, "{ctx}");
    // Racing, waiting and holding nothing need descriptors: none is claimed.
    for st in [
        "healthy",
        "racing",
        "holding_nothing",
        "waiting",
        "no_lease",
    ] {
        assert_eq!(summary[st], 0, "{st}: {ctx}");
    }
    assert_eq!(summary["unknown"], PODS, "{ctx}");
    let notes = serde_json::to_string(&doc["pod"]["notes"]).unwrap();
    assert!(notes.contains("without CAP_SYS_PTRACE"), "{notes}");
}

/// `/proc` fixtures of runtimes that cannot run here: CRI-O with conmon on
/// cgroup v1 (systemd driver), Docker under the cgroupfs driver, a static
/// pod, and a host process outside every pod with the lease on: grouped by
/// pod, the monitor with its container's pod, the outside process a group
/// of its own.
#[test]
fn fixtures_of_other_runtimes_are_grouped_by_pod() {
    let root = tempfile::tempdir().unwrap();
    let uid_a = "0f4d4c2e-8c8d-4f4b-9a53-6b1f3c2d7e9a";
    let uid_b = "6a0c8b2e4b2f8c3a1d4e5f6a7b8c9d0e";
    let id = |c: char| c.to_string().repeat(64);
    let procs: Vec<(u32, u32, String, &[u8])> = vec![
        (
            10,
            1,
            format!(
                "11:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/crio-conmon-{}.scope\n1:name=systemd:/\n",
                uid_a.replace('-', "_"),
                id('a')
            ),
            b"PATH=/bin\0",
        ),
        (
            11,
            10,
            format!(
                "11:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/crio-{}.scope\n",
                uid_a.replace('-', "_"),
                id('a')
            ),
            b"HOSTNAME=db-0\0CLOUD_WRITER_LEASE=1\0SECRET=x\0",
        ),
        (
            20,
            1,
            format!("4:cpu,cpuacct:/kubepods/pod{uid_b}/{}\n", id('b')),
            b"HOSTNAME=etcd-node1\0",
        ),
        (30, 1, "0::/system.slice/backup.service\n".to_string(), b"CLOUD_WRITER_LEASE=1\0"),
        (40, 1, "0::/user.slice/user-1000.slice/session-2.scope\n".to_string(), b"PATH=/bin\0"),
    ];
    for (pid, ppid, cgroup, env) in &procs {
        fake_process(root.path(), *pid, *ppid, cgroup, env);
    }
    std::fs::write(root.path().join("locks"), "").unwrap();
    std::fs::write(root.path().join("uptime"), "100.0 50.0\n").unwrap();
    let mut c = command(bin_path());
    c.args(["pod-scan", "--node", "--proc-root"])
        .arg(root.path());
    let (_, out, err) = output(c);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let ctx = format!("{doc:#}");
    let node = &doc["node"];
    let pods: BTreeMap<String, &Value> = node["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["label"].as_str().unwrap().to_owned(), p))
        .collect();
    // No service-account mount in a fixture: the name with the UID.
    let a = pods[&format!("db-0 (pod {uid_a})")];
    assert_eq!(a["pids"], serde_json::json!([10, 11]), "{ctx}");
    let containers = a["kubernetes"]["containers"].as_array().unwrap();
    assert_eq!(
        containers.len(),
        1,
        "one id, the container and its monitor: {ctx}"
    );
    assert_eq!(a["kubernetes"]["qos"], "burstable", "{ctx}");
    assert_eq!(a["kubernetes"]["name_from"], "HOSTNAME of pid 11", "{ctx}");
    assert!(a["kubernetes"]["namespace"].is_null(), "{ctx}");
    // Armed, and nothing holds a lock: the fixture's pod holds nothing.
    assert_eq!(a["state"], "holding_nothing", "{ctx}");
    let b = pods[&format!("etcd-node1 (pod {uid_b})")];
    assert_eq!(
        b["kubernetes"]["containers"][0]["runtime"],
        Value::Null,
        "{ctx}"
    );
    assert_eq!(b["kubernetes"]["qos"], "guaranteed", "{ctx}");
    assert_eq!(b["state"], "no_lease", "{ctx}");
    let outside = pods["outside pods"];
    assert_eq!(outside["pids"], serde_json::json!([30]), "{ctx}");
    assert!(outside["kubernetes"].is_null(), "{ctx}");
    assert_eq!(
        node["summary"]["pods"], 2,
        "the outside group is no pod: {ctx}"
    );
    assert!(!out.contains("SECRET"), "{out}");
}

/// A process directory of a fake `/proc`.
fn fake_process(root: &Path, pid: u32, ppid: u32, cgroup: &str, env: &[u8]) {
    let d: PathBuf = root.join(pid.to_string());
    std::fs::create_dir_all(d.join("fd")).unwrap();
    std::fs::create_dir_all(d.join("fdinfo")).unwrap();
    std::fs::write(
        d.join("stat"),
        format!(
            "{pid} (fake) S {ppid} {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"
        ),
    )
    .unwrap();
    std::fs::write(d.join("cmdline"), b"fake\0").unwrap();
    std::fs::write(d.join("environ"), env).unwrap();
    std::fs::write(d.join("cgroup"), cgroup).unwrap();
}
