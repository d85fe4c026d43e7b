//! The gathering half of a pod scan: reads the `/proc` tree, selects the pod
//! and the lock files, and returns the raw facts ([`Observed`]) that
//! [`super::judge()`] turns into verdicts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use procfs::FromRead;

use super::io_why;
use super::kube::{containers_of, kube_name, ContainerRef, KubePod};
use super::lock::{lock_states, LockEvidence};
use super::model::NsRelation;
use super::model::{EnvRead, ObservedLock, ViewerInfo};
use super::ns::ViewerFacts;
use super::proc::{ProcLocksSoon, ProcTable, Want};
use super::target::{lock_targets, FileKey, LockTarget, Place};
use super::{PodScope, ScanOptions};
use crate::writer::{sanitize, WriterError};
use crate::writer::{ENABLE, HELD, LOCK_NAME};

/// A process as gathered, before judgement.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedProcess {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Escaped command line.
    pub command: String,
    /// The two lease variables of its initial environment.
    pub env: EnvRead,
    /// Indices into [`Observed::locks`] of lock files it has open.
    pub opens: Vec<usize>,
    /// Indices into [`Observed::locks`] of lock files it holds.
    pub holds: Vec<usize>,
    /// Seconds since the process started, if known.
    pub age_s: Option<u64>,
    /// Why its descriptors could not be read (then `opens`/`holds` say
    /// nothing); `None` when they were read.
    pub fds_unreadable: Option<String>,
    /// Why it is part of the pod.
    pub included_because: String,
    /// Its container and pod, from its cgroup.
    pub container: Option<ContainerRef>,
}

/// Everything [`super::judge()`] needs: the pod's processes, the lock files, and the
/// set of pids alive anywhere in the scanned `/proc` (to tell a stamp naming a
/// dead pid).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observed {
    /// The pod's processes (any order; the snapshot is sorted by pid).
    pub processes: Vec<ObservedProcess>,
    /// The lock files.
    pub locks: Vec<ObservedLock>,
    /// All live pids seen.
    pub alive: BTreeSet<u32>,
    /// Processes in scope whose environment or descriptors could not be read.
    pub uninspected: BTreeSet<u32>,
    /// Those of them whose descriptors could not be read (they may have a
    /// lock file open).
    pub fds_unreadable: BTreeSet<u32>,
    /// What was considered (copied into the snapshot).
    pub scope: Option<PodScope>,
    /// Where the viewer stood (copied into the snapshot).
    pub viewer: Option<ViewerInfo>,
    /// The Kubernetes pod of the processes, when they are all in one (copied
    /// into the snapshot).
    pub kubernetes: Option<KubePod>,
}

/// The gathering half of [`super::scan()`]: reads `/proc`, selects the pod
/// and the lock files, and returns the raw facts.
///
/// # Errors
/// As [`super::scan()`].
pub fn observe(opts: &ScanOptions) -> Result<Observed, WriterError> {
    let root = &opts.proc_root;
    let proc_locks = ProcLocksSoon::start(root);
    // Auto-detection reads every user process's descriptors and environment:
    // read them up front, side by side, and the `stat` only of those that
    // may be in the pod (the others' when asked). A pod root's tree is
    // known from every process's `stat`; that of pid 1, the PID
    // namespace's init, is almost every user process (an orphan is given
    // to it or to a subreaper below it; only what the kernel starts itself,
    // as its usermode helpers, is not), all shown: their files are read
    // with their `stat`, in the same pass.
    let auto = opts.pod_root.is_none();
    let want = match opts.pod_root {
        None => Want::JUDGED,
        Some(1) => Want::JUDGED.and(Want::SHOWN),
        Some(_) => Want::NOTHING,
    };
    let table = ProcTable::read_with(root, want, auto)?;
    let user_pids: Vec<u32> = table
        .procs
        .values()
        .filter(|p| !p.kthread)
        .map(|p| p.pid)
        .collect();
    let tree = pod_tree(&table, opts)?;
    // A pod root: the tree's descriptors and environments are read in any
    // case (see `unreadable`), and its processes are the ones shown (their
    // command lines and cgroups): all in one pass, side by side.
    if let Some(t) = &tree {
        let members: Vec<u32> = t.iter().copied().collect();
        table.prefetch(&members, Want::JUDGED.and(Want::SHOWN));
    }

    // Lock files to inspect: auto-detected from open descriptors (the pod's
    // own with --pod-root, everybody's otherwise), or the given data dirs'.
    let owners: Vec<u32> = match &tree {
        Some(t) => t.iter().copied().collect(),
        None => user_pids.clone(),
    };
    // The pod's paths: in the pod root's view of the file system.
    let places = Place::of(&table, opts, &user_pids);
    let lock_keys = lock_targets(&table, opts, &places, &owners, &user_pids)?;
    // Without a lock file to look for, nothing in /proc/locks is asked.
    let proc_locks = if lock_keys.is_empty() {
        Vec::new()
    } else {
        proc_locks.get()
    };
    // With a lock file to look for, every user process's descriptors are read.
    if tree.is_some() && !lock_keys.is_empty() {
        table.prefetch(&user_pids, Want::FDS);
    }
    let evidence = LockEvidence::gather(&table, &lock_keys, &user_pids);
    let (locks, lock_index) = lock_states(&table, &lock_keys, &evidence, &proc_locks);

    let included = match (opts.pod_root, &tree) {
        (Some(r), Some(t)) => tree_members(&table, r, t),
        _ => table.with_ancestors(&auto_seeds(
            &table, &lock_keys, &evidence, &locks, &user_pids,
        )),
    };
    let (uninspected, fds_unreadable) = unreadable(&table, tree.as_ref(), &user_pids);
    // The processes shown: their command lines and cgroups, side by side.
    let shown: Vec<u32> = included.keys().copied().collect();
    table.prefetch(&shown, Want::SHOWN);
    let processes = observed_processes(&table, root, &included, &locks, &lock_index, true);
    let scope = pod_scope(opts, user_pids.len(), processes.len());
    let viewer = viewer_info(&table, opts.pod_root, &processes);
    let kubernetes = one_pod(&table, &processes);
    Ok(Observed {
        processes,
        locks,
        alive: table.procs.keys().copied().collect(),
        uninspected,
        fds_unreadable,
        scope: Some(scope),
        viewer: Some(viewer),
        kubernetes,
    })
}

/// Where the viewer stands to the pod: to pod root `root`'s namespaces, or
/// (auto-detected) to those of each of the pod's processes.
fn viewer_info(table: &ProcTable, root: Option<u32>, processes: &[ObservedProcess]) -> ViewerInfo {
    let facts = ViewerFacts::current();
    let (mount, user, lines) = match root {
        Some(r) => {
            let (m, why) = table.mount_relation(r);
            let u = table.user_relation(r);
            let lines = super::ns::pod_root_lines(r, (m, why.as_deref()), u);
            (m, u.0, lines)
        }
        None => {
            let mut by: BTreeMap<(bool, NsRelation), Vec<u32>> = BTreeMap::new();
            for p in processes {
                by.entry((true, table.mount_relation(p.pid).0))
                    .or_default()
                    .push(p.pid);
                by.entry((false, table.user_relation(p.pid).0))
                    .or_default()
                    .push(p.pid);
            }
            let worst = |mount: bool| {
                [NsRelation::Different, NsRelation::Unknown]
                    .into_iter()
                    .find(|r| by.contains_key(&(mount, *r)))
                    .unwrap_or(NsRelation::Same)
            };
            let mut lines = Vec::new();
            for ((mount, rel), pids) in &by {
                let what = if *mount { "mount" } else { "user" };
                let n = pids.len();
                let who = join(pids);
                match rel {
                    NsRelation::Different => lines.push(format!(
                        "{n} of the pod's processes (pid {who}) are in another {what} namespace than the viewer{}.",
                        if *mount {
                            ": the paths shown for them are theirs, and a lock file is known by device and inode"
                        } else {
                            ": root in one is not root in the other"
                        }
                    )),
                    NsRelation::Unknown => lines.push(format!(
                        "Whether {n} of the pod's processes (pid {who}) share the viewer's {what} namespace is unknown."
                    )),
                    NsRelation::Same => {}
                }
            }
            (worst(true), worst(false), lines)
        }
    };
    ViewerInfo {
        euid: facts.euid,
        cap_sys_ptrace: facts.cap_sys_ptrace,
        mount_namespace: mount,
        user_namespace: user,
        lines,
    }
}

/// The Kubernetes pod of `processes` when every one whose cgroup names a pod
/// names the same one.
fn one_pod(table: &ProcTable, processes: &[ObservedProcess]) -> Option<KubePod> {
    let uids: BTreeSet<&str> = processes
        .iter()
        .filter_map(|p| p.container.as_ref()?.pod_uid.as_deref())
        .collect();
    let [uid] = uids.into_iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    let members = processes
        .iter()
        .filter(|p| p.container.as_ref().and_then(|c| c.pod_uid.as_deref()) == Some(uid))
        .map(|p| p.pid);
    Some(identify(table, uid, members))
}

/// The pids, joined by ", ".
fn join(pids: &[u32]) -> String {
    let v: Vec<String> = pids.iter().map(u32::to_string).collect();
    v.join(", ")
}

/// The pod by tree, when a root was given: stat alone decides it.
///
/// # Errors
/// [`WriterError::Proc`] when `opts.pod_root` names no process.
fn pod_tree(table: &ProcTable, opts: &ScanOptions) -> Result<Option<BTreeSet<u32>>, WriterError> {
    let Some(r) = opts.pod_root else {
        return Ok(None);
    };
    if !table.procs.contains_key(&r) {
        return Err(WriterError::Proc {
            path: opts.proc_root.join(r.to_string()),
            message: format!("pod root pid {r} does not exist"),
        });
    }
    Ok(Some(table.descendants(r)))
}

/// The pod given by `--pod-root r`: the tree `t`, with the reason each
/// process is in it.
fn tree_members(table: &ProcTable, r: u32, t: &BTreeSet<u32>) -> BTreeMap<u32, String> {
    let mut included = BTreeMap::new();
    for &pid in t {
        let why = if pid == r {
            "the pod root given with --pod-root".to_string()
        } else {
            let ppid = table.procs.get(&pid).and_then(|p| p.ppid()).unwrap_or(0);
            format!("a descendant of pod root {r} (its parent is {ppid})")
        };
        included.insert(pid, why);
    }
    included
}

/// The seeds of an auto-detected pod among `candidates`, with the reason
/// each is in it: the processes that have a lock file open, are named as a
/// lock's taker, or carry a lease variable (the pod is they and their
/// ancestors: [`ProcTable::with_ancestors`]).
pub(super) fn auto_seeds(
    table: &ProcTable,
    lock_keys: &BTreeMap<FileKey, LockTarget>,
    evidence: &LockEvidence,
    locks: &[ObservedLock],
    candidates: &[u32],
) -> BTreeMap<u32, String> {
    let allowed: BTreeSet<u32> = candidates.iter().copied().collect();
    let mut seeds: BTreeMap<u32, String> = BTreeMap::new();
    for (key, pids) in &evidence.openers {
        let path = &lock_keys[key].path;
        for pid in pids.iter().filter(|p| allowed.contains(p)) {
            seeds
                .entry(*pid)
                .or_insert_with(|| format!("it has {path} open"));
        }
    }
    for l in locks {
        for pid in l.holders.iter().chain(&l.proc_locks_pids) {
            if table.procs.contains_key(pid) && allowed.contains(pid) {
                seeds.entry(*pid).or_insert_with(|| {
                    format!(
                        "/proc/locks names it as the taker of the lock on {}",
                        l.path
                    )
                });
            }
        }
    }
    for &pid in candidates {
        if seeds.contains_key(&pid) {
            continue;
        }
        if let EnvRead::Read { enable, stamp } = table.env(pid) {
            if enable.is_some() || stamp.is_some() {
                seeds.insert(
                    pid,
                    format!("its initial environment sets {ENABLE} or {HELD}"),
                );
            }
        }
    }
    seeds
}

/// Everything in scope that could not be read: the uninspected pids, and
/// those of them whose descriptors could not be read. With --pod-root the
/// scope is the tree; auto-detection considered every process.
pub(super) fn unreadable(
    table: &ProcTable,
    tree: Option<&BTreeSet<u32>>,
    user_pids: &[u32],
) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let in_scope: Vec<u32> = match tree {
        Some(t) => {
            let users: BTreeSet<u32> = user_pids.iter().copied().collect();
            t.intersection(&users).copied().collect()
        }
        None => user_pids.to_vec(),
    };
    let mut uninspected = BTreeSet::new();
    let mut fds_unreadable = BTreeSet::new();
    for pid in in_scope {
        let no_fds = table.fds(pid).unreadable.is_some();
        if no_fds {
            fds_unreadable.insert(pid);
        }
        if no_fds || table.env_denied(pid) {
            uninspected.insert(pid);
        }
    }
    (uninspected, fds_unreadable)
}

/// The pod's processes as gathered: each with its lock files open and held
/// (indices into `locks`), its age and its environment.
pub(super) fn observed_processes(
    table: &ProcTable,
    root: &Path,
    included: &BTreeMap<u32, String>,
    locks: &[ObservedLock],
    lock_index: &BTreeMap<FileKey, usize>,
    commands: bool,
) -> Vec<ObservedProcess> {
    let uptime = procfs::Uptime::from_file(root.join("uptime"))
        .ok()
        .map(|u| u.uptime);
    let tps = procfs::ticks_per_second() as f64;

    let mut processes = Vec::new();
    for (pid, why) in included {
        // Gone, or (its `stat` read on demand) exited since it was seen.
        let Some(stat) = table.procs.get(pid).and_then(|p| p.stat()) else {
            continue;
        };
        let fds = table.fds(*pid);
        let mut opens = BTreeSet::new();
        let mut holds = BTreeSet::new();
        for fd in &fds.fds {
            if let Some(&i) = lock_index.get(&(fd.dev, fd.ino)) {
                opens.insert(i);
                if locks[i].holders.contains(pid) {
                    holds.insert(i);
                }
            }
        }
        let age_s = uptime.map(|u| (u - stat.starttime as f64 / tps).max(0.0) as u64);
        processes.push(ObservedProcess {
            pid: *pid,
            ppid: stat.ppid,
            // Read only where shown (a command line is copied from the
            // process's memory); judging never looks at it.
            command: if commands {
                table.command(*pid)
            } else {
                String::new()
            },
            env: table.env(*pid),
            opens: opens.into_iter().collect(),
            holds: holds.into_iter().collect(),
            age_s,
            fds_unreadable: fds.unreadable.clone(),
            included_because: why.clone(),
            container: table.container(*pid),
        });
    }
    processes
}

/// What the scan considered: `seen` processes listed, `selected` in the pod.
fn pod_scope(opts: &ScanOptions, seen: usize, selected: usize) -> PodScope {
    let data_dirs: Vec<String> = opts
        .data_dirs
        .iter()
        .map(|d| sanitize(&d.to_string_lossy()))
        .collect();
    let locks_rule = if data_dirs.is_empty() {
        format!("lock files: every {LOCK_NAME} that a considered process has open")
    } else {
        format!("lock files: {LOCK_NAME} in {}", data_dirs.join(", "))
    };
    match opts.pod_root {
        Some(r) => PodScope {
            mode: "pod_root".into(),
            pod_root: Some(r),
            processes_seen: seen,
            processes_selected: selected,
            data_dirs,
            description: format!(
                "pod: pid {r} and its {} descendant(s), out of {seen} processes in this PID namespace; {locks_rule}.",
                selected.saturating_sub(1)
            ),
        },
        None => PodScope {
            mode: "auto".into(),
            pod_root: None,
            processes_seen: seen,
            processes_selected: selected,
            data_dirs,
            description: format!(
                "pod auto-detected among {seen} processes in this PID namespace: those with {ENABLE} or {HELD} in their initial environment, a lock file open, or named by /proc/locks, plus their ancestors ({} selected); {locks_rule}.",
                selected
            ),
        },
    }
}

/// The identity of pod `uid` from its processes `members`: its containers,
/// its name (a process's `HOSTNAME`), its namespace (a container's
/// service-account mount, read through that container's root).
pub(super) fn identify(
    table: &ProcTable,
    uid: &str,
    members: impl Iterator<Item = u32>,
) -> KubePod {
    let members: Vec<u32> = members.collect();
    let refs: Vec<(u32, Option<super::kube::ContainerRef>)> =
        members.iter().map(|&p| (p, table.container(p))).collect();
    let containers = containers_of(refs.iter().map(|(p, c)| (*p, c.as_ref())));
    let qos = refs.iter().find_map(|(_, c)| c.as_ref()?.qos.clone());
    let name = members
        .iter()
        .find_map(|&p| Some((p, kube_name(&table.hostname(p)?)?)));
    let (namespace, namespace_unknown) = namespace_of(table, &containers);
    KubePod {
        uid: uid.to_string(),
        name: name.as_ref().map(|(_, n)| n.clone()),
        name_from: name.map(|(p, _)| format!("HOSTNAME of pid {p}")),
        namespace,
        namespace_unknown,
        qos,
        containers,
    }
}

/// Where Kubernetes mounts a pod's service-account namespace.
const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The pod's namespace from the first container whose root has the
/// service-account mount, or why it is unknown.
fn namespace_of(
    table: &ProcTable,
    containers: &[super::kube::KubeContainer],
) -> (Option<String>, Option<String>) {
    use std::io::Read;
    let mut why = "no container of the pod mounts a service-account token".to_string();
    for c in containers.iter().filter(|c| c.id.is_some()) {
        let Some(&pid) = c.pids.first() else {
            continue;
        };
        let opened = super::ns::open_root(table.root(), pid).and_then(|r| {
            super::ns::open_in_root(&r, Path::new(NAMESPACE_FILE), nix::fcntl::OFlag::O_RDONLY)
        });
        match opened {
            Ok(fd) => {
                let mut buf = Vec::with_capacity(256);
                let read = std::fs::File::from(fd).take(256).read_to_end(&mut buf);
                if let Some(ns) = read
                    .ok()
                    .and_then(|_| kube_name(&String::from_utf8_lossy(&buf)))
                {
                    return (Some(ns), None);
                }
                why = format!("pid {pid}'s {NAMESPACE_FILE} does not hold a namespace name");
            }
            Err(e) if super::ns::denied(&e) => {
                why = format!(
                    "pid {pid}'s root could not be opened to read {NAMESPACE_FILE} ({}): {}",
                    io_why(&e),
                    ViewerFacts::current().remedy()
                );
            }
            Err(_) => {}
        }
    }
    (None, Some(why))
}
