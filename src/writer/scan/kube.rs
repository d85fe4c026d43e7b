//! Which container and which Kubernetes pod a process belongs to, from what
//! the node itself shows (no API server is asked):
//!
//! - its container, from its cgroup path (`/proc/PID/cgroup`): the
//!   container runtimes' scope names under the systemd cgroup driver
//!   (`cri-containerd-ID.scope`, `crio-ID.scope`, `docker-ID.scope`,
//!   `libpod-ID.scope`, and the monitors `crio-conmon-ID.scope`,
//!   `libpod-conmon-ID.scope`), and a bare 64-hex directory under the
//!   cgroupfs driver (`…/pod<UID>/ID`, `/docker/ID`), on cgroup v1 and v2;
//! - its pod, from the `kubepods` part of that path: `pod<UID>` (cgroupfs,
//!   the UID with dashes) or `kubepods-<qos>-pod<UID>.slice` (systemd, the
//!   UID with underscores), and its QoS class (`besteffort`, `burstable`, or
//!   guaranteed when the pod sits right under `kubepods`);
//! - the pod's name, from a container process's `HOSTNAME` (the runtime
//!   sets it to the pod's host name: its name, unless `spec.hostname` is set,
//!   and the node's name with `hostNetwork`), and its namespace from the
//!   service-account mount (`/var/run/secrets/kubernetes.io/serviceaccount/namespace`)
//!   read through the process's root, where the pod mounts one.
//!
//! A path seen through a cgroup namespace of the viewer's own starts with
//! `/..` components; they are skipped, the names after them are the same.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::writer::sanitize;

/// A process's container and pod, as its cgroup names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerRef {
    /// `containerd`, `cri-o`, `docker`, `podman`, or `conmon` (the monitor
    /// CRI-O and Podman run beside a container); null when the name does not
    /// say (a cgroupfs directory named by the id alone).
    pub runtime: Option<String>,
    /// The container id (64 hex digits); null for a process of the pod that
    /// is in no container's cgroup.
    pub id: Option<String>,
    /// The Kubernetes pod's UID (with dashes), when the path is under `kubepods`.
    pub pod_uid: Option<String>,
    /// `guaranteed`, `burstable` or `besteffort`, with `pod_uid`.
    pub qos: Option<String>,
    /// The cgroup path this came from (escaped), cgroup v2's when it names
    /// the container, else the first v1 hierarchy's that does.
    pub cgroup: String,
}

impl ContainerRef {
    /// The first 12 digits of the id, as `crictl` and `docker ps` show it.
    pub fn short_id(&self) -> Option<&str> {
        self.id.as_deref().map(|i| i.get(..12).unwrap_or(i))
    }
}

/// The pod's identity, as the node shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubePod {
    /// The pod's UID (from its cgroup).
    pub uid: String,
    /// The pod's name, from the `HOSTNAME` of one of its processes (see
    /// [`KubePod::name_from`]); null when none carries it.
    pub name: Option<String>,
    /// Where `name` was read: `HOSTNAME of pid N`.
    pub name_from: Option<String>,
    /// The pod's namespace, from the service-account mount of one of its
    /// containers; null when none mounts one, or it could not be read.
    pub namespace: Option<String>,
    /// Why `namespace` is null.
    pub namespace_unknown: Option<String>,
    /// The QoS class from the cgroup path.
    pub qos: Option<String>,
    /// The pod's containers: id, runtime and pids, by id.
    pub containers: Vec<KubeContainer>,
}

impl KubePod {
    /// `namespace/name` when both are known, else `pod UID` (escaped as read).
    pub fn label(&self) -> String {
        match (&self.namespace, &self.name) {
            (Some(ns), Some(n)) => format!("{ns}/{n}"),
            (None, Some(n)) => format!("{n} (pod {})", self.uid),
            _ => format!("pod {}", self.uid),
        }
    }
}

/// One container of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeContainer {
    /// Its id (64 hex digits), or null for the pod's processes in no
    /// container's cgroup.
    pub id: Option<String>,
    /// Its runtime, as [`ContainerRef::runtime`].
    pub runtime: Option<String>,
    /// Its processes, sorted.
    pub pids: Vec<u32>,
}

/// What one cgroup path says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct PathFacts {
    runtime: Option<&'static str>,
    id: Option<String>,
    pod_uid: Option<String>,
    qos: Option<&'static str>,
    kubepods: bool,
}

impl PathFacts {
    /// How much it names: a pod and a container beat either alone.
    fn weight(&self) -> u8 {
        u8::from(self.pod_uid.is_some()) * 2 + u8::from(self.id.is_some())
    }

    /// Whether a `kubepods` component was already seen and nothing of a pod
    /// below it yet: the QoS slices under `kubepods.slice` continue it.
    fn in_kubepods(&self) -> bool {
        self.kubepods && self.pod_uid.is_none() && self.id.is_none()
    }
}

/// A process's container and pod from the text of its `/proc/PID/cgroup`;
/// `None` when no line names either. The cgroup v2 line (`0::`) is
/// preferred, then the v1 lines in order; the line naming the most wins.
pub fn container_of(cgroup_file: &str) -> Option<ContainerRef> {
    use procfs::FromBufRead;
    let parsed = procfs::ProcessCGroups::from_buf_read(cgroup_file.as_bytes()).ok()?;
    let mut best: Option<(PathFacts, &str)> = None;
    // v2 first: ties go to the line seen first.
    let mut lines: Vec<&procfs::ProcessCGroup> = parsed.0.iter().collect();
    lines.sort_by_key(|l| l.hierarchy != 0);
    for l in lines {
        let f = path_facts(&l.pathname);
        if f.weight() > best.as_ref().map_or(0, |(b, _)| b.weight()) {
            best = Some((f, l.pathname.as_str()));
        }
    }
    let (f, path) = best?;
    Some(ContainerRef {
        runtime: f.runtime.map(str::to_owned),
        id: f.id,
        pod_uid: f.pod_uid,
        qos: f.qos.map(str::to_owned),
        cgroup: sanitize(path),
    })
}

/// The runtimes' scope prefixes (systemd cgroup driver), longest first.
const SCOPES: [(&str, &str); 6] = [
    ("cri-containerd-", "containerd"),
    ("crio-conmon-", "conmon"),
    ("libpod-conmon-", "conmon"),
    ("crio-", "cri-o"),
    ("docker-", "docker"),
    ("libpod-", "podman"),
];

/// What one cgroup path names (see the module documentation).
fn path_facts(path: &str) -> PathFacts {
    let mut f = PathFacts::default();
    // Seen through a cgroup namespace: the path climbs out of the viewer's
    // own cgroup first, and the `kubepods` above may be out of sight.
    let relative = path.starts_with("/..");
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != "..")
        .collect();
    for (i, part) in parts.iter().enumerate() {
        let name = part.strip_suffix(".scope").unwrap_or(part);
        if part.contains("kubepods") && !f.in_kubepods() {
            // A pod's hierarchy entered again (kind: a node in a
            // container): what was found above it is the outer one's.
            f = PathFacts {
                kubepods: true,
                ..PathFacts::default()
            };
        }
        if f.kubepods || relative {
            if let Some(uid) = pod_uid_in(part) {
                f.pod_uid = Some(uid);
                f.qos = f.kubepods.then(|| qos_in(&parts[..=i]));
                continue;
            }
        }
        if let Some((prefix, runtime)) = SCOPES.iter().find(|(p, _)| name.starts_with(p)) {
            if part.ends_with(".scope") && is_id(&name[prefix.len()..]) {
                f.id = Some(name[prefix.len()..].to_owned());
                f.runtime = Some(runtime);
                continue;
            }
        }
        if is_id(part) {
            // cgroupfs: the id alone; under /docker it is Docker's.
            f.id = Some((*part).to_owned());
            f.runtime = (i > 0 && parts[i - 1] == "docker").then_some("docker");
        }
    }
    if f.pod_uid.is_none() && f.id.is_none() {
        return PathFacts::default();
    }
    f
}

/// A container id: 64 lowercase hex digits.
fn is_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// The pod UID a component names: `pod<UID>` (cgroupfs) or
/// `kubepods[-qos]-pod<UID_WITH_UNDERSCORES>.slice` (systemd), with dashes;
/// a static pod's UID is 32 hex digits without dashes.
fn pod_uid_in(part: &str) -> Option<String> {
    let name = part.strip_suffix(".slice").unwrap_or(part);
    let raw = match name.rfind("-pod") {
        Some(at) if name.contains("kubepods") => &name[at + 4..],
        _ => name.strip_prefix("pod")?,
    };
    let uid = raw.replace('_', "-");
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    let groups: Vec<&str> = uid.split('-').collect();
    let uuid = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12]) && groups.iter().all(|g| hex(g));
    let static_pod = uid.len() == 32 && hex(&uid);
    (uuid || static_pod).then(|| uid.to_ascii_lowercase())
}

/// The QoS class from the components down to the pod's.
fn qos_in(parts: &[&str]) -> &'static str {
    let text = parts.join("/");
    if text.contains("besteffort") {
        "besteffort"
    } else if text.contains("burstable") {
        "burstable"
    } else {
        "guaranteed"
    }
}

/// The containers of a pod's processes (`pids` with their container refs),
/// by id (the pod's processes in no container's cgroup last); a container's
/// runtime is its own, not its monitor's (`conmon`).
pub fn containers_of<'a>(
    members: impl Iterator<Item = (u32, Option<&'a ContainerRef>)>,
) -> Vec<KubeContainer> {
    let mut by: BTreeMap<(bool, Option<String>), KubeContainer> = BTreeMap::new();
    for (pid, c) in members {
        let id = c.and_then(|c| c.id.clone());
        let runtime = c.and_then(|c| c.runtime.clone());
        let e = by
            .entry((id.is_none(), id.clone()))
            .or_insert_with(|| KubeContainer {
                id,
                runtime: runtime.clone(),
                pids: Vec::new(),
            });
        // A container's monitor (conmon) shares its id: the runtime is
        // the container's.
        if e.runtime.as_deref() == Some("conmon") && runtime.is_some() {
            e.runtime = runtime;
        }
        e.pids.push(pid);
    }
    let mut out: Vec<KubeContainer> = by.into_values().collect();
    for c in &mut out {
        c.pids.sort_unstable();
    }
    out
}

/// A Kubernetes name as read from a pod (a `HOSTNAME`, a namespace file):
/// accepted when it is a DNS subdomain (lowercase letters, digits, `-` and
/// `.`, at most 253 bytes), else `None`.
pub fn kube_name(raw: &str) -> Option<String> {
    let s = raw.trim_end_matches('\n');
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    ok.then(|| s.to_owned())
}

#[cfg(test)]
mod tests {
    //! `/proc/PID/cgroup` as real runtimes write it (fixtures: these
    //! runtimes cannot run here).
    use super::*;

    const ID: &str = "4e6f0b1c9a0d3e2f5b8c7a6d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f";
    const UID: &str = "0f4d4c2e-8c8d-4f4b-9a53-6b1f3c2d7e9a";
    const UID_: &str = "0f4d4c2e_8c8d_4f4b_9a53_6b1f3c2d7e9a";

    fn c(file: &str) -> ContainerRef {
        container_of(file).unwrap_or_else(|| panic!("nothing found in {file:?}"))
    }

    fn facts(r: &ContainerRef) -> (Option<&str>, Option<&str>, Option<&str>, Option<&str>) {
        (
            r.runtime.as_deref(),
            r.id.as_deref(),
            r.pod_uid.as_deref(),
            r.qos.as_deref(),
        )
    }

    #[test]
    fn containerd_with_the_systemd_driver_on_cgroup_v2() {
        let r = c(&format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope\n"
        ));
        assert_eq!(
            facts(&r),
            (Some("containerd"), Some(ID), Some(UID), Some("burstable"))
        );
        assert_eq!(r.short_id(), Some(&ID[..12]));
        assert!(r.cgroup.starts_with("/kubepods.slice/"));
    }

    #[test]
    fn containerd_with_cgroupfs_on_cgroup_v1() {
        let p = format!("/kubepods/besteffort/pod{UID}/{ID}");
        let file =
            format!("12:pids:{p}\n11:memory:{p}\n4:cpu,cpuacct:{p}\n1:name=systemd:{p}\n0::/\n");
        // The id alone does not say which runtime: null, not a guess.
        assert_eq!(
            facts(&c(&file)),
            (None, Some(ID), Some(UID), Some("besteffort"))
        );
    }

    #[test]
    fn cri_o_and_its_monitor() {
        let r = c(&format!(
            "0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-{ID}.scope\n"
        ));
        assert_eq!(
            facts(&r),
            (Some("cri-o"), Some(ID), Some(UID), Some("guaranteed"))
        );
        let m = c(&format!(
            "0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-conmon-{ID}.scope\n"
        ));
        assert_eq!(facts(&m).0, Some("conmon"));
        assert_eq!(facts(&m).2, Some(UID));
        // CRI-O on cgroup v1 with the systemd driver.
        let v1 = c(&format!(
            "11:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-{ID}.scope\n10:cpuset:/\n"
        ));
        assert_eq!(
            facts(&v1),
            (Some("cri-o"), Some(ID), Some(UID), Some("burstable"))
        );
    }

    #[test]
    fn docker_under_kubernetes_and_alone() {
        let shim = c(&format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/docker-{ID}.scope\n"
        ));
        assert_eq!(
            facts(&shim),
            (Some("docker"), Some(ID), Some(UID), Some("besteffort"))
        );
        let alone = c(&format!("0::/system.slice/docker-{ID}.scope\n"));
        assert_eq!(facts(&alone), (Some("docker"), Some(ID), None, None));
        let v1 = c(&format!(
            "4:memory:/docker/{ID}\n1:name=systemd:/docker/{ID}\n"
        ));
        assert_eq!(facts(&v1), (Some("docker"), Some(ID), None, None));
    }

    #[test]
    fn podman_with_its_nested_container_group() {
        let r = c(&format!("0::/machine.slice/libpod-{ID}.scope/container\n"));
        assert_eq!(facts(&r), (Some("podman"), Some(ID), None, None));
    }

    #[test]
    fn systemd_services_and_sessions_are_no_container() {
        for f in [
            "0::/system.slice/ssh.service\n",
            "0::/user.slice/user-1000.slice/session-3.scope\n",
            "0::/init.scope\n",
            "0::/\n",
            "12:pids:/\n1:name=systemd:/init.scope\n0::/\n",
            "",
            "garbage",
        ] {
            assert_eq!(container_of(f), None, "{f:?}");
        }
    }

    #[test]
    fn a_pod_process_outside_every_container_cgroup() {
        // The pod's own cgroup (a process moved there by hand, or v1's
        // pod-level leftovers): the pod without a container.
        let r = c(&format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice\n"
        ));
        assert_eq!(facts(&r), (None, None, Some(UID), Some("besteffort")));
    }

    #[test]
    fn paths_seen_through_a_cgroup_namespace() {
        // The DaemonSet's private cgroup namespace: other pods' paths climb
        // out of its own first.
        let sys = c(&format!(
            "0::/../../../kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope\n"
        ));
        assert_eq!(
            facts(&sys),
            (Some("containerd"), Some(ID), Some(UID), Some("besteffort"))
        );
        // cgroupfs, a sibling pod of the same QoS class: no `kubepods` in
        // sight, so no QoS either.
        let fs = c(&format!("0::/../../pod{UID}/{ID}\n"));
        assert_eq!(facts(&fs), (None, Some(ID), Some(UID), None));
    }

    #[test]
    fn a_node_in_a_container_gives_the_inner_pod() {
        // kind: the node is a Docker container and the kubelet's cgroup
        // root is /kubelet.
        let outer = "a".repeat(64);
        let r = c(&format!(
            "0::/system.slice/docker-{outer}.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope\n"
        ));
        assert_eq!(
            facts(&r),
            (Some("containerd"), Some(ID), Some(UID), Some("besteffort"))
        );
    }

    #[test]
    fn static_pods_have_hash_uids() {
        let uid = "6a0c8b2e4b2f8c3a1d4e5f6a7b8c9d0e";
        let r = c(&format!(
            "0::/kubepods.slice/kubepods-pod{uid}.slice/cri-containerd-{ID}.scope\n"
        ));
        assert_eq!(facts(&r).2, Some(uid));
    }

    #[test]
    fn look_alikes_are_not_ids() {
        for f in [
            format!("0::/kubepods.slice/kubepods-podnot_a_uid.slice/cri-containerd-{ID}.scope\n"),
            format!("0::/system.slice/docker-{}.scope\n", &ID[..63]),
            format!("0::/system.slice/docker-{}.scope\n", ID.to_uppercase()),
        ] {
            let r = container_of(&f);
            assert!(r.as_ref().is_none_or(|r| r.pod_uid.is_none()), "{f}");
        }
        assert_eq!(
            container_of(&format!("0::/system.slice/docker-{}.scope\n", &ID[..63])),
            None
        );
    }

    #[test]
    fn containers_are_grouped_by_id() {
        let a = c(&format!("0::/kubepods/pod{UID}/{ID}\n"));
        let pod = c(&format!("0::/kubepods/pod{UID}\n"));
        let got = containers_of([(7, Some(&a)), (3, Some(&pod)), (5, Some(&a))].into_iter());
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].id.as_deref(), Some(ID));
        assert_eq!(got[0].pids, vec![5, 7]);
        assert_eq!(got[1].id, None);
        assert_eq!(got[1].pids, vec![3]);
    }

    #[test]
    fn names_are_dns_names_or_nothing() {
        assert_eq!(kube_name("web-0\n").as_deref(), Some("web-0"));
        assert_eq!(kube_name("kube-system").as_deref(), Some("kube-system"));
        assert_eq!(kube_name("Web"), None);
        assert_eq!(kube_name("a b"), None);
        assert_eq!(kube_name("\u{1b}[2J"), None);
        assert_eq!(kube_name(""), None);
        assert_eq!(kube_name(&"a".repeat(254)), None);
    }
}
