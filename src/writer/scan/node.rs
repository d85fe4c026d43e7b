//! The node view (`--node`): every pod of the node, grouped by the pod UID
//! its processes' cgroups name ([`super::kube`]), each judged alone as the
//! pod view judges one, and their tally.
//!
//! One pass over `/proc` serves every pod: every process's descriptors on
//! lock files, initial environment and cgroup are read once, side by side,
//! and its `stat` where it may matter (as an auto-detected pod reads it;
//! the others' when a pod of theirs is judged); every lock file any process has open is judged once
//! (`fdinfo`, `/proc/locks`, the kernel's probe). Each pod then gets the
//! lock files its processes have open or hold, and the verdicts of those
//! facts ([`super::judge()`]). Processes outside every pod are a group of
//! their own when one of them takes part in a writer lease (the
//! auto-detection rule of the pod view).
//!
//! The result is one `pod` section: the processes, lock files, verdicts and
//! notes of every pod that needs a look or could not be read whole (a
//! healthy pod's command lines are not even read), each lock file and
//! verdict naming its pod, and `node` with one entry per pod and the tally
//! by [`PodState`].

use std::collections::{BTreeMap, BTreeSet};

use super::kube::KubePod;
use super::lock::{lock_states, LockEvidence};
use super::model::{NodePod, NodeView, NsRelation, ObservedLock, PodState, ViewerInfo};
use super::ns::ViewerFacts;
use super::observe::{auto_seeds, identify, observed_processes, unreadable};
use super::proc::{ProcLocksSoon, ProcTable, Want};
use super::target::{lock_targets, FileKey, Place};
use super::{judge, DutyView, Observed, PodScope, PodSnapshot, ScanOptions, VerdictKind};
use crate::writer::{stamp_pid, WriterError, LOCK_NAME};

/// Whether a pod in `state` is shown in full (its processes, lock files,
/// verdicts and notes): when it needs a look or could not be read whole. A
/// healthy pod, or one without a lease, is its `node.pods` entry alone.
fn shown(state: PodState) -> bool {
    !matches!(state, PodState::Healthy | PodState::NoLease)
}

/// Label of the group of processes outside every pod.
pub(crate) const OUTSIDE_PODS: &str = "outside pods";

/// Scans the node: every pod, each judged alone (see the module
/// documentation).
///
/// # Errors
/// [`WriterError::Proc`] when the proc root cannot be listed.
pub(crate) fn scan_node(opts: &ScanOptions) -> Result<PodSnapshot, WriterError> {
    let root = &opts.proc_root;
    let proc_locks = ProcLocksSoon::start(root);
    let want = Want {
        cgroup: true,
        ..Want::JUDGED
    };
    // The `stat` of a process read when it is judged (a pod without a
    // lease is not; most processes outside pods are not).
    let table = ProcTable::read_with(root, want, true)?;
    let user_pids: Vec<u32> = table
        .procs
        .values()
        .filter(|p| !p.kthread)
        .map(|p| p.pid)
        .collect();
    let auto = ScanOptions {
        proc_root: root.clone(),
        ..ScanOptions::default()
    };
    let lock_keys = lock_targets(&table, &auto, &[Place::Viewer], &user_pids, &user_pids)?;
    // Without a lock file to look for, nothing in /proc/locks is asked.
    let proc_locks = if lock_keys.is_empty() {
        Vec::new()
    } else {
        proc_locks.get()
    };
    let evidence = LockEvidence::gather(&table, &lock_keys, &user_pids);
    let (locks, lock_index) = lock_states(&table, &lock_keys, &evidence, &proc_locks);
    let facts = Facts {
        table: &table,
        locks: &locks,
        lock_index: &lock_index,
        evidence: &evidence,
        seen: user_pids.len(),
    };

    let mut groups: BTreeMap<String, BTreeMap<u32, String>> = BTreeMap::new();
    for &pid in &user_pids {
        if let Some(uid) = table.container(pid).and_then(|c| c.pod_uid) {
            let why = format!("in the cgroup of pod {uid}");
            groups.entry(uid).or_default().insert(pid, why);
        }
    }
    let in_pods: BTreeSet<u32> = groups.values().flat_map(|g| g.keys().copied()).collect();
    let outside: Vec<u32> = user_pids
        .iter()
        .copied()
        .filter(|p| !in_pods.contains(p))
        .collect();
    let outside_group: BTreeMap<u32, String> = table
        .with_ancestors(&auto_seeds(&table, &lock_keys, &evidence, &locks, &outside))
        .into_iter()
        .filter(|(p, _)| !in_pods.contains(p))
        .collect();

    let mut judged: Vec<(NodePod, PodSnapshot)> = Vec::new();
    for (uid, members) in &groups {
        let kube = identify(&table, uid, members.keys().copied());
        judged.push(facts.judge_group(members, Some(kube)));
    }
    if !outside_group.is_empty() {
        judged.push(facts.judge_group(&outside_group, None));
    }
    let (outside_uninspected, _) = unreadable(&table, None, &outside);
    Ok(assemble(
        &table,
        judged,
        outside_uninspected,
        user_pids.len(),
    ))
}

/// What every pod's judgement shares: the table and the lock files.
struct Facts<'a> {
    table: &'a ProcTable,
    locks: &'a [ObservedLock],
    lock_index: &'a BTreeMap<FileKey, usize>,
    evidence: &'a LockEvidence,
    seen: usize,
}

impl Facts<'_> {
    /// One group judged alone: its processes, the lock files they have open
    /// or hold, what could not be read of them.
    fn judge_group(
        &self,
        members: &BTreeMap<u32, String>,
        kube: Option<KubePod>,
    ) -> (NodePod, PodSnapshot) {
        let pids: BTreeSet<u32> = members.keys().copied().collect();
        let (locks, index) = self.locks_of(&pids);
        let table = self.table;
        let label = kube
            .as_ref()
            .map_or_else(|| OUTSIDE_PODS.to_string(), KubePod::label);
        // A pod without a lease, read whole: its state needs no judgement,
        // and its processes are not shown (their command lines unread).
        if locks.is_empty() && pids.iter().all(|&p| self.no_lease(p)) {
            let pod = NodePod {
                label,
                kubernetes: kube,
                state: PodState::NoLease,
                verdicts: Vec::new(),
                holders: Vec::new(),
                container: None,
                pids: pids.into_iter().collect(),
            };
            return (pod, PodSnapshot::default());
        }
        // Its processes' `stat`, side by side when there are many.
        let user: Vec<u32> = pids.iter().copied().collect();
        table.prefetch(&user, Want::STAT);
        let processes = observed_processes(table, table.root(), members, &locks, &index, false);
        let (uninspected, fds_unreadable) = unreadable(table, Some(&pids), &user);
        // What the judgement asks of `alive`: whether a stamp's pid runs.
        let alive = processes
            .iter()
            .filter_map(|p| match &p.env {
                super::EnvRead::Read { stamp: Some(s), .. } => stamp_pid(s),
                _ => None,
            })
            .filter(|p| table.procs.contains_key(p))
            .collect();
        let obs = Observed {
            processes,
            locks,
            alive,
            uninspected,
            fds_unreadable,
            scope: Some(PodScope {
                mode: "node".into(),
                pod_root: None,
                processes_seen: self.seen,
                processes_selected: pids.len(),
                data_dirs: Vec::new(),
                description: format!(
                    "{label}: the {} process(es) of its cgroups, out of {} on this node; lock files: every {LOCK_NAME} one of them has open.",
                    pids.len(),
                    self.seen
                ),
            }),
            viewer: None,
            kubernetes: kube.clone(),
        };
        let mut snap = judge(&obs);
        for v in &mut snap.verdicts {
            v.pod = Some(label.clone());
        }
        for l in &mut snap.locks {
            l.pod = Some(label.clone());
        }
        let state = PodState::of(&snap);
        // Shown in full: a pod that needs a look or could not be read whole.
        if shown(state) {
            let pids: Vec<u32> = snap.processes.iter().map(|p| p.pid).collect();
            table.prefetch(&pids, Want::SHOWN);
            for p in &mut snap.processes {
                if table.procs.contains_key(&p.pid) {
                    p.command = table.command(p.pid);
                }
            }
        }
        let holders: Vec<u32> = snap
            .locks
            .iter()
            .flat_map(|l| l.holders.iter().copied())
            .filter(|p| pids.contains(p))
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect();
        let taker = snap
            .processes
            .iter()
            .find(|p| p.duty == DutyView::Take)
            .map(|p| p.pid);
        let container = holders
            .first()
            .copied()
            .or(taker)
            .and_then(|p| table.container(p))
            .and_then(|c| c.short_id().map(str::to_owned));
        let mut kinds: Vec<VerdictKind> = snap.verdicts.iter().map(|v| v.kind).collect();
        kinds.dedup();
        let pod = NodePod {
            label,
            kubernetes: kube,
            state,
            verdicts: kinds,
            holders,
            container,
            pids: pids.into_iter().collect(),
        };
        (pod, snap)
    }

    /// Whether process `pid` plainly takes no part in a lease: its
    /// environment and descriptors were read, it carries neither lease
    /// variable, and it has no lock file open.
    fn no_lease(&self, pid: u32) -> bool {
        let read = matches!(
            self.table.env(pid),
            super::EnvRead::Read {
                enable: None,
                stamp: None
            }
        );
        let fds = self.table.fds(pid);
        read && !self.table.env_denied(pid) && fds.unreadable.is_none() && fds.fds.is_empty()
    }

    /// The lock files of a group: those a member has open or holds (or is
    /// named by `/proc/locks` as the taker of), with their new indices; a
    /// deleted one keeps the index of the file its path names now when that
    /// one is the group's too.
    fn locks_of(&self, pids: &BTreeSet<u32>) -> (Vec<ObservedLock>, BTreeMap<FileKey, usize>) {
        let mut keep: Vec<(usize, FileKey)> = Vec::new();
        for (key, &i) in self.lock_index {
            let l = &self.locks[i];
            let opened = self
                .evidence
                .openers
                .get(key)
                .is_some_and(|o| !o.is_disjoint(pids));
            let held = l
                .holders
                .iter()
                .chain(&l.proc_locks_pids)
                .any(|p| pids.contains(p));
            if opened || held {
                keep.push((i, *key));
            }
        }
        keep.sort_unstable();
        let renumber: BTreeMap<usize, usize> =
            keep.iter().enumerate().map(|(n, (i, _))| (*i, n)).collect();
        let mut locks = Vec::with_capacity(keep.len());
        let mut index = BTreeMap::new();
        for (n, (i, key)) in keep.iter().enumerate() {
            let mut l = self.locks[*i].clone();
            l.current = l.current.and_then(|c| renumber.get(&c).copied());
            locks.push(l);
            index.insert(*key, n);
        }
        (locks, index)
    }
}

/// The `pod` section of the node view: the pods that need a look or could
/// not be read whole in full ([`shown`]), every pod in `node`.
fn assemble(
    table: &ProcTable,
    judged: Vec<(NodePod, PodSnapshot)>,
    outside_uninspected: BTreeSet<u32>,
    seen: usize,
) -> PodSnapshot {
    let mut out = PodSnapshot::default();
    let mut view = NodeView::default();
    let mut other_mount = 0usize;
    for (pod, snap) in judged {
        if pod.kubernetes.is_some() {
            view.summary.add(pod.state);
        }
        if pod
            .pids
            .first()
            .is_some_and(|p| table.mount_relation(*p).0 != NsRelation::Same)
        {
            other_mount += 1;
        }
        if shown(pod.state) {
            out.processes.extend(snap.processes);
            out.locks.extend(snap.locks);
            out.verdicts.extend(snap.verdicts);
            out.uninspected.extend(snap.uninspected);
            out.notes.extend(
                snap.notes
                    .into_iter()
                    .map(|n| format!("{}: {n}", pod.label)),
            );
        }
        view.pods.push(pod);
    }
    out.processes.sort_by_key(|p| p.pid);
    out.processes.dedup_by_key(|p| p.pid);
    out.locks
        .sort_by(|a, b| (&a.path, &a.pod).cmp(&(&b.path, &b.pod)));
    out.verdicts
        .sort_by(|a, b| (a.kind, &a.pod, &a.pids).cmp(&(b.kind, &b.pod, &b.pids)));
    out.uninspected.sort_unstable();
    out.uninspected.dedup();
    view.pods.sort_by(|a, b| a.label.cmp(&b.label));
    if !outside_uninspected.is_empty() {
        view.lines.push(format!(
            "{} process(es) outside every pod could not be inspected ({}): whether they take part in a writer lease is unknown; no pod's answer depends on it.",
            outside_uninspected.len(),
            ViewerFacts::current().remedy()
        ));
    }
    view.outside_uninspected = outside_uninspected.into_iter().collect();
    let facts = ViewerFacts::current();
    out.viewer = Some(ViewerInfo {
        euid: facts.euid,
        cap_sys_ptrace: facts.cap_sys_ptrace,
        mount_namespace: if other_mount > 0 {
            NsRelation::Different
        } else {
            NsRelation::Same
        },
        user_namespace: NsRelation::Unknown,
        lines: (other_mount > 0)
            .then(|| format!(
                "{other_mount} pod(s) see the file system through mount namespaces of their own: the paths shown are theirs, and a lock file is known by device and inode."
            ))
            .into_iter()
            .collect(),
    });
    out.scope.push(PodScope {
        mode: "node".into(),
        pod_root: None,
        processes_seen: seen,
        processes_selected: out.processes.len(),
        data_dirs: Vec::new(),
        description: format!(
            "node: every pod whose processes' cgroups name it ({}), each judged alone, and the processes outside pods that carry a lease variable or have a {LOCK_NAME} open; {} of {seen} processes shown (those of the pods that need a look or could not be read whole).",
            view.summary.line(),
            out.processes.len()
        ),
    });
    out.node = Some(view);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::scan::{
        LockFileState, LockInfo, LockState, NodeSummary, ProcessInfo, Verdict,
    };

    fn snap(kinds: &[VerdictKind], incomplete: bool, duty: DutyView, lock: bool) -> PodSnapshot {
        PodSnapshot {
            processes: vec![ProcessInfo {
                pid: 10,
                ppid: 1,
                command: "x".into(),
                duty,
                duty_reason: String::new(),
                lock: LockState::None,
                enable: None,
                stamp: None,
                waiting_s: None,
                lock_reason: None,
                included_because: String::new(),
                container: None,
            }],
            locks: lock
                .then(|| LockInfo {
                    path: "/data/.writer.lock".into(),
                    holders: vec![10],
                    locked: true,
                    proc_locks_pids: vec![10],
                    state: LockFileState::Held,
                    state_reason: String::new(),
                    deleted: false,
                    pod: None,
                })
                .into_iter()
                .collect(),
            verdicts: kinds
                .iter()
                .map(|k| Verdict {
                    kind: *k,
                    message: String::new(),
                    pids: vec![],
                    pod: None,
                })
                .collect(),
            uninspected: if incomplete { vec![10] } else { vec![] },
            ..PodSnapshot::default()
        }
    }

    #[test]
    fn a_pods_state_is_its_worst_verdict_then_what_was_read() {
        use VerdictKind as K;
        let cases = [
            (vec![K::SiblingsRacing, K::Waiting], PodState::Racing),
            (
                vec![K::ArmedHoldsNothing, K::StrayStamp],
                PodState::HoldingNothing,
            ),
            (vec![K::Waiting, K::HolderOutsidePod], PodState::Waiting),
            (vec![K::Waiting], PodState::Waiting),
            (vec![K::HolderOutsidePod], PodState::Attention),
            (vec![K::Waiting, K::StrayStamp], PodState::Attention),
            (vec![K::OrphanedLock], PodState::Attention),
        ];
        for (kinds, want) in cases {
            assert_eq!(
                PodState::of(&snap(&kinds, true, DutyView::Take, true)),
                want,
                "{kinds:?}"
            );
        }
        assert_eq!(
            PodState::of(&snap(&[], true, DutyView::Take, true)),
            PodState::Unknown
        );
        assert_eq!(
            PodState::of(&snap(&[], false, DutyView::Take, true)),
            PodState::Healthy
        );
        assert_eq!(
            PodState::of(&snap(&[], false, DutyView::Off, false)),
            PodState::NoLease
        );
        // Unknown is never "no lease".
        assert_eq!(
            PodState::of(&snap(&[], true, DutyView::Off, false)),
            PodState::Unknown
        );
    }

    #[test]
    fn the_summary_line_counts_every_state() {
        let mut s = NodeSummary::default();
        for st in [
            PodState::Healthy,
            PodState::Healthy,
            PodState::Racing,
            PodState::NoLease,
        ] {
            s.add(st);
        }
        assert_eq!(s.line(), "4 pods (2 healthy, 1 racing, 1 no lease)");
        assert_eq!(NodeSummary::default().line(), "0 pods (0 healthy)");
    }
}
