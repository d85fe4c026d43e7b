//! The judging half of a pod scan: a pure function of an [`Observed`] value
//! (no I/O, no clock), so the verdict rules can be table-tested. Each
//! process's duty comes from its initial environment and its parent; each
//! verdict kind has its own function here, and [`judge()`] composes them.

use std::collections::{BTreeMap, BTreeSet};

use super::notes::notes;
use super::{
    DutyView, EnvRead, LockFileState, LockInfo, LockState, Observed, ObservedLock, ObservedProcess,
    PodSnapshot, ProcessInfo, Verdict, VerdictKind,
};
use crate::text::sanitize_cut;
use crate::writer::{assess, sanitize, stamp_pid, stamp_verdict, Enable, StampVerdict};
use crate::writer::{ENABLE, HELD, LOCK_NAME};

/// A process of the pod with its computed duty.
struct Judged<'a> {
    p: &'a ObservedProcess,
    duty: DutyView,
    enable_on: bool,
}

/// Builds the snapshot from gathered facts: computes each process's duty and
/// raises the pod verdicts (ARCHITECTURE.md). Pure: no I/O, no clock.
pub fn judge(obs: &Observed) -> PodSnapshot {
    let mut procs: Vec<&ObservedProcess> = obs.processes.iter().collect();
    procs.sort_by_key(|p| p.pid);

    let mut processes = Vec::new();
    let mut judged = Vec::new();
    for p in &procs {
        let (info, enable_on) = process_info(obs, p);
        judged.push(Judged {
            p,
            duty: info.duty,
            enable_on,
        });
        processes.push(info);
    }

    let mut verdicts = Vec::new();
    verdicts.extend(invalid_enable(&judged));
    verdicts.extend(armed_holds_nothing(obs, &judged));
    verdicts.extend(siblings_racing(obs, &judged));
    verdicts.extend(holder_not_take(obs, &judged, &processes));
    verdicts.extend(waiting(obs, &judged));
    verdicts.extend(holder_outside_pod(obs, &procs));
    verdicts.extend(stray_stamp(obs, &judged));
    verdicts.extend(orphaned_writer(obs, &procs, &judged));
    verdicts.extend(orphaned_lock(obs));
    verdicts.extend(lock_not_regular(obs));
    verdicts.sort_by(|a, b| (a.kind, &a.pids, &a.message).cmp(&(b.kind, &b.pids, &b.message)));

    let mut locks: Vec<LockInfo> = obs
        .locks
        .iter()
        .map(|l| LockInfo {
            path: l.path.clone(),
            holders: l.holders.clone(),
            locked: l.locked,
            proc_locks_pids: l.proc_locks_pids.clone(),
            state: l.state,
            state_reason: l.state_reason.clone(),
            deleted: l.deleted,
            pod: None,
        })
        .collect();
    locks.sort_by(|a, b| a.path.cmp(&b.path));
    PodSnapshot {
        processes,
        locks,
        verdicts,
        scope: obs.scope.iter().cloned().collect(),
        uninspected: obs.uninspected.iter().copied().collect(),
        notes: notes(obs, procs.is_empty()),
        viewer: obs.viewer.clone(),
        kubernetes: obs.kubernetes.clone(),
        node: None,
    }
}

/// One process as the snapshot shows it (its duty, why, its lock state), and
/// whether the lease is on for it.
fn process_info(obs: &Observed, p: &ObservedProcess) -> (ProcessInfo, bool) {
    let facts = duty_of(p);
    let lock_reason = p.fds_unreadable.as_ref().map(|why| {
        let named = obs
            .locks
            .iter()
            .filter(|l| l.proc_locks_pids.contains(&p.pid))
            .map(|l| l.path.as_str())
            .collect::<Vec<_>>();
        let named = if named.is_empty() {
            String::new()
        } else {
            format!(
                "; /proc/locks names it as the process that took the lock on {}",
                named.join(", ")
            )
        };
        format!(
            "lock unknown: its descriptors could not be read ({}){named}.",
            sanitize(why)
        )
    });
    let lock = if lock_reason.is_some() {
        LockState::Unknown
    } else if p.holds.iter().any(|&i| obs.locks[i].deleted) {
        LockState::HoldsDeleted
    } else if !p.holds.is_empty() {
        LockState::Holds
    } else if !p.opens.is_empty() {
        LockState::Open
    } else {
        LockState::None
    };
    let info = ProcessInfo {
        pid: p.pid,
        ppid: p.ppid,
        command: p.command.clone(),
        duty: facts.duty,
        duty_reason: facts.reason,
        lock,
        enable: facts.enable,
        stamp: facts.stamp,
        waiting_s: if lock == LockState::Open {
            p.age_s
        } else {
            None
        },
        lock_reason,
        included_because: p.included_because.clone(),
        container: p.container.clone(),
    };
    (info, facts.enable_on)
}

/// What a process's initial environment says about it.
struct DutyFacts {
    /// Its duty, or why none could be computed.
    duty: DutyView,
    /// One sentence explaining `duty`.
    reason: String,
    /// `CLOUD_WRITER_LEASE`, escaped and cut to 256 characters.
    enable: Option<String>,
    /// `CLOUD_WRITER_LEASE_HELD`, escaped and cut to 256 characters.
    stamp: Option<String>,
    /// Whether the lease is on for it.
    enable_on: bool,
}

/// A process's duty and why, its two lease variables, and whether the
/// lease is on for it.
fn duty_of(p: &ObservedProcess) -> DutyFacts {
    match &p.env {
        EnvRead::Unreadable(why) => DutyFacts {
            duty: DutyView::Unknown,
            reason: format!(
                "duty unknown: its environment (/proc/{}/environ) could not be read ({}), so whether it must take the lock cannot be computed.",
                p.pid,
                sanitize(why)
            ),
            enable: None,
            stamp: None,
            enable_on: false,
        },
        EnvRead::Read { enable, stamp } => {
            let getenv = |k: &str| match k {
                ENABLE => enable.clone(),
                HELD => stamp.clone(),
                _ => None,
            };
            let on = Enable::parse(enable.as_deref()) == Enable::On;
            let (d, r) = match assess(getenv, p.ppid) {
                Ok((d, r)) => (DutyView::from(d), r),
                Err(e) => (DutyView::Invalid, e.to_string()),
            };
            DutyFacts {
                duty: d,
                reason: r,
                enable: enable.as_deref().map(|v| sanitize_cut(v, 256)),
                stamp: stamp.as_deref().map(|v| sanitize_cut(v, 256)),
                enable_on: on,
            }
        }
    }
}

/// Invalid enable values, one verdict per distinct value.
fn invalid_enable(judged: &[Judged]) -> Vec<Verdict> {
    let mut invalid: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for j in judged {
        if j.duty == DutyView::Invalid {
            if let EnvRead::Read {
                enable: Some(v), ..
            } = &j.p.env
            {
                invalid.entry(v.clone()).or_default().push(j.p.pid);
            }
        }
    }
    invalid
        .into_iter()
        .map(|(value, pids)| Verdict {
            kind: VerdictKind::InvalidEnable,
            message: format!(
                "{ENABLE} has the invalid value \"{}\" in {} process(es); writer exec refuses to start with it",
                sanitize_cut(&value, 64),
                pids.len()
            ),
            pids,
            pod: None,
        })
        .collect()
}

/// Armed, holds nothing: the lease is on in the pod but no lock file is
/// held. Only on known facts: every lock file known free, and (when there is
/// no lock file at all) every process's descriptors read.
fn armed_holds_nothing(obs: &Observed, judged: &[Judged]) -> Vec<Verdict> {
    let armed: BTreeSet<u32> = judged
        .iter()
        .filter(|j| j.enable_on)
        .map(|j| j.p.pid)
        .collect();
    let all_free = obs.locks.iter().all(|l| l.state == LockFileState::Free);
    let lockless_known = !obs.locks.is_empty() || obs.fds_unreadable.is_empty();
    if armed.is_empty() || !all_free || !lockless_known {
        return Vec::new();
    }
    // Name the topmost armed processes: those whose parent is not armed.
    let tops: Vec<u32> = judged
        .iter()
        .filter(|j| j.enable_on && !armed.contains(&j.p.ppid))
        .map(|j| j.p.pid)
        .collect();
    let what = if obs.locks.is_empty() {
        format!("no process has a {LOCK_NAME} open")
    } else {
        let paths: Vec<&str> = obs.locks.iter().map(|l| l.path.as_str()).collect();
        format!("nobody holds {}", paths.join(", "))
    };
    vec![Verdict {
        kind: VerdictKind::ArmedHoldsNothing,
        message: format!(
            "armed, holds nothing: {ENABLE} is on in this pod but {what}; a second pod could open the same files"
        ),
        pids: tops,
        pod: None,
    }]
}

/// The lock files a path names (every one but the deleted ones, which the
/// orphaned-lock verdict covers), with their indices.
fn live_locks(obs: &Observed) -> impl Iterator<Item = (usize, &ObservedLock)> {
    obs.locks.iter().enumerate().filter(|(_, l)| !l.deleted)
}

/// The participants of lock file `i`: the pod's processes that have it open.
fn participants<'a, 'b>(judged: &'b [Judged<'a>], i: usize) -> Vec<&'b Judged<'a>> {
    judged.iter().filter(|j| j.p.opens.contains(&i)).collect()
}

/// More than one participant of a lock file has duty Take. Holders share
/// one open file description (the lock is exclusive), so they count as one
/// contender; each Take waiter is one more. The contenders are grouped by
/// the process tree they start ([`pod_of`]): contenders of one tree are
/// siblings racing (its root should take the lock for them); contenders of
/// different trees are pod roots racing (two pods, or two `writer exec`, on
/// one data directory), whose advice is another.
fn siblings_racing(obs: &Observed, judged: &[Judged]) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for (i, lock) in live_locks(obs) {
        let participants = participants(judged, i);
        let take_holders: Vec<u32> = participants
            .iter()
            .filter(|j| lock.holders.contains(&j.p.pid) && j.duty == DutyView::Take)
            .map(|j| j.p.pid)
            .collect();
        let take_waiters: Vec<u32> = participants
            .iter()
            .filter(|j| j.duty == DutyView::Take && !lock.holders.contains(&j.p.pid))
            .map(|j| j.p.pid)
            .collect();
        let contenders = take_waiters.len() + usize::from(!take_holders.is_empty());
        if contenders <= 1 {
            continue;
        }
        let winner = if take_holders.is_empty() {
            "none of them holds it yet".to_string()
        } else {
            format!(
                "pid {} holds it and the others wait",
                join_pids(&take_holders)
            )
        };
        // The holders (one contender) and each waiter, by the tree they start.
        let mut pods: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        if let Some(&h) = take_holders.first() {
            pods.entry(pod_of(obs, h))
                .or_default()
                .extend(&take_holders);
        }
        for &w in &take_waiters {
            pods.entry(pod_of(obs, w)).or_default().push(w);
        }
        if pods.len() > 1 {
            verdicts.push(pod_roots_racing(lock, &pods, &winner));
        }
        for pids in pods.values() {
            let mut pids = pids.clone();
            pids.sort_unstable();
            let racing = pids.iter().filter(|p| !take_holders.contains(p)).count()
                + usize::from(pids.iter().any(|p| take_holders.contains(p)));
            if racing <= 1 {
                continue;
            }
            verdicts.push(Verdict {
                kind: VerdictKind::SiblingsRacing,
                message: format!(
                    "more than one Take: {} processes in this pod ({}) each decided to take {}; {winner}. Only the pod root should take the lock",
                    pids.len(),
                    join_pids(&pids),
                    lock.path
                ),
                pids,
                pod: None,
            });
        }
    }
    verdicts
}

/// Two or more process trees take one lock file: each contender of `pods`
/// (by the tree it starts) is the root of a pod of its own.
fn pod_roots_racing(lock: &ObservedLock, pods: &BTreeMap<u32, Vec<u32>>, winner: &str) -> Verdict {
    let mut pids: Vec<u32> = pods.values().flatten().copied().collect();
    pids.sort_unstable();
    let roots: Vec<u32> = pods
        .values()
        .filter_map(|p| p.iter().min().copied())
        .collect();
    Verdict {
        kind: VerdictKind::PodRootsRacing,
        message: format!(
            "{} pod roots take {}: pids {} each start a process tree of their own, as two pods (or two `writer exec`) on one volume do; {winner} (a `writer exec` refuses to start after its --wait). Only one pod may use a data directory: stop the one that should not run, and give each pod a volume of its own (one replica, a ReadWriteOnce volume)",
            pods.len(),
            lock.path,
            join_pids(&roots)
        ),
        pids,
        pod: None,
    }
}

/// The process tree contender `pid` belongs to, named by a pid: from `pid`,
/// up through every ancestor that carries a lease variable (its children
/// inherited the lease from it), to the top of its lease; then that top's
/// parent: the process that started the racing children (a shell that forks
/// them, a container's init). A top without a parent in this PID namespace
/// (ppid 0) starts a tree of its own.
fn pod_of(obs: &Observed, pid: u32) -> u32 {
    let by_pid: BTreeMap<u32, &ObservedProcess> =
        obs.processes.iter().map(|p| (p.pid, p)).collect();
    let carries_lease = |p: &ObservedProcess| matches!(&p.env, EnvRead::Read { enable, stamp } if enable.is_some() || stamp.is_some());
    let mut top = pid;
    let mut seen = BTreeSet::new();
    while seen.insert(top) {
        match by_pid.get(&top).and_then(|p| by_pid.get(&p.ppid)) {
            Some(parent) if carries_lease(parent) => top = parent.pid,
            _ => break,
        }
    }
    match by_pid.get(&top).map(|p| p.ppid) {
        Some(pp) if pp != 0 && pp != top => pp,
        _ => top,
    }
}

/// A participant holds a lock file although its duty is not Take (nor
/// unknown). The message carries its duty's reason from `processes`.
fn holder_not_take(obs: &Observed, judged: &[Judged], processes: &[ProcessInfo]) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for (i, lock) in live_locks(obs) {
        for j in participants(judged, i)
            .iter()
            .filter(|j| lock.holders.contains(&j.p.pid))
        {
            if matches!(j.duty, DutyView::Take | DutyView::Unknown) {
                continue;
            }
            verdicts.push(Verdict {
                kind: VerdictKind::HolderNotTake,
                message: format!(
                    "pid {} holds {} but its duty is {}: {}",
                    j.p.pid,
                    lock.path,
                    j.duty.as_str(),
                    processes
                        .iter()
                        .find(|p| p.pid == j.p.pid)
                        .map(|p| p.duty_reason.as_str())
                        .unwrap_or("")
                ),
                pids: vec![j.p.pid],
                pod: None,
            });
        }
    }
    verdicts
}

/// Waiting: a participant has a lock file open without holding it.
fn waiting(obs: &Observed, judged: &[Judged]) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for (i, lock) in live_locks(obs) {
        for j in participants(judged, i)
            .iter()
            .filter(|j| !lock.holders.contains(&j.p.pid))
        {
            let how_long = match j.p.age_s {
                Some(s) => format!("for up to {s} s (process age)"),
                None => "for an unknown time".to_string(),
            };
            verdicts.push(Verdict {
                kind: VerdictKind::Waiting,
                message: format!(
                    "pid {} has {} open without holding it, waiting {how_long}; held by {}",
                    j.p.pid,
                    lock.path,
                    held_by(lock)
                ),
                pids: vec![j.p.pid],
                pod: None,
            });
        }
    }
    verdicts
}

/// Who holds `lock`, as the waiting verdict names it.
fn held_by(lock: &ObservedLock) -> String {
    if !lock.holders.is_empty() {
        return format!("pid {}", join_pids(&lock.holders));
    }
    match lock.state {
        LockFileState::HeldOutsideNamespace => "a process outside this PID namespace".to_string(),
        LockFileState::Held => "a process this scan cannot see".to_string(),
        LockFileState::Free => "nobody right now".to_string(),
        LockFileState::Unknown => "an unknown process, if any".to_string(),
        LockFileState::Orphaned => {
            "a process this scan cannot see, on the deleted file".to_string()
        }
        LockFileState::NotRegular => "nobody: it is not a regular file".to_string(),
    }
}

/// Holder outside the pod: a lock file is held by a process outside the pod,
/// outside this PID namespace, or one this scan cannot see.
fn holder_outside_pod(obs: &Observed, procs: &[&ObservedProcess]) -> Vec<Verdict> {
    let pod: BTreeSet<u32> = procs.iter().map(|p| p.pid).collect();
    let mut verdicts = Vec::new();
    for (_, lock) in live_locks(obs) {
        let outside: Vec<u32> = lock
            .holders
            .iter()
            .copied()
            .filter(|pid| !pod.contains(pid))
            .collect();
        if !outside.is_empty() {
            verdicts.push(Verdict {
                kind: VerdictKind::HolderOutsidePod,
                message: format!(
                    "{} is held by pid {}, outside this pod",
                    lock.path,
                    join_pids(&outside)
                ),
                pids: outside,
                pod: None,
            });
        } else if lock.state == LockFileState::HeldOutsideNamespace {
            let more = if obs.uninspected.is_empty() {
                String::new()
            } else {
                format!(
                    " (or by one of the {} processes this scan could not inspect)",
                    obs.uninspected.len()
                )
            };
            verdicts.push(Verdict {
                kind: VerdictKind::HolderOutsidePod,
                message: format!(
                    "{} is held by a process outside this PID namespace{more}: /proc/locks and fdinfo show no holder here, yet the kernel refuses a shared lock on it",
                    lock.path
                ),
                pids: Vec::new(),
                pod: None,
            });
        } else if lock.locked && lock.holders.is_empty() {
            let named = if lock.proc_locks_pids.is_empty() {
                String::new()
            } else {
                format!(
                    " (/proc/locks names pid {}, which is gone or hidden)",
                    join_pids(&lock.proc_locks_pids)
                )
            };
            verdicts.push(Verdict {
                kind: VerdictKind::HolderOutsidePod,
                message: format!(
                    "{} is locked by a process this scan cannot see{named}",
                    lock.path
                ),
                pids: Vec::new(),
                pod: None,
            });
        }
    }
    verdicts
}

/// Stray stamps on participants (only where the lease is on: with it off
/// the stamp decides nothing).
fn stray_stamp(obs: &Observed, judged: &[Judged]) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for j in judged
        .iter()
        .filter(|j| !j.p.opens.is_empty() && j.enable_on)
    {
        let EnvRead::Read {
            stamp: Some(stamp), ..
        } = &j.p.env
        else {
            continue;
        };
        if let StampVerdict::Ignored(why) = stamp_verdict(Some(stamp), j.p.ppid) {
            let dead = match stamp_pid(stamp) {
                Some(pid) if pid != 0 && !obs.alive.contains(&pid) => {
                    format!("; pid {pid} is not running")
                }
                _ => String::new(),
            };
            verdicts.push(Verdict {
                kind: VerdictKind::StrayStamp,
                message: format!(
                    "pid {} (parent {}): {why}{dead}; it therefore takes the lock itself",
                    j.p.pid, j.p.ppid
                ),
                pids: vec![j.p.pid],
                pod: None,
            });
        }
    }
    verdicts
}

/// Orphaned writers: the lease is on, the stamp names a pid that is gone,
/// and neither the process nor any ancestor holds a lock file. Participants
/// are covered by the stray-stamp verdict.
fn orphaned_writer(obs: &Observed, procs: &[&ObservedProcess], judged: &[Judged]) -> Vec<Verdict> {
    let parent_of: BTreeMap<u32, u32> = procs.iter().map(|p| (p.pid, p.ppid)).collect();
    let all_holders: BTreeSet<u32> = obs
        .locks
        .iter()
        .flat_map(|l| l.holders.iter().copied())
        .collect();
    let mut verdicts = Vec::new();
    for j in judged
        .iter()
        .filter(|j| j.enable_on && j.p.opens.is_empty() && j.p.fds_unreadable.is_none())
    {
        let EnvRead::Read {
            stamp: Some(stamp), ..
        } = &j.p.env
        else {
            continue;
        };
        let Some(holder) = stamp_pid(stamp).filter(|pid| *pid != 0) else {
            continue;
        };
        if obs.alive.contains(&holder) || under_holder(j.p.pid, &parent_of, &all_holders) {
            continue;
        }
        verdicts.push(Verdict {
            kind: VerdictKind::OrphanedWriter,
            message: format!(
                "orphaned writer: pid {} (parent {}) was started under the lock holder {HELD}={holder}, but pid {holder} is gone and no ancestor of pid {} holds a lock; it may still be writing without the lease (e.g. a daemonized child that outlived writer exec)",
                j.p.pid, j.p.ppid, j.p.pid
            ),
            pids: vec![j.p.pid],
            pod: None,
        });
    }
    verdicts
}

/// Orphaned locks: a deleted lock file (removed or replaced while held) that
/// a process still holds flocked. Whoever opens the path now gets a lock on
/// another file, which does not exclude that holder: two writers.
fn orphaned_lock(obs: &Observed) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for lock in obs
        .locks
        .iter()
        .filter(|l| l.deleted && l.state == LockFileState::Orphaned)
    {
        let who = if lock.holders.is_empty() {
            "a process this scan cannot see".to_string()
        } else {
            format!("pid {}", join_pids(&lock.holders))
        };
        let now = match lock.current.map(|i| &obs.locks[i]) {
            Some(c) if !c.holders.is_empty() => format!(
                "; {} now names another file, held by pid {}: two writers",
                c.path,
                join_pids(&c.holders)
            ),
            Some(c) if c.locked => format!(
                "; {} now names another file, locked by a process not visible here: two writers",
                c.path
            ),
            Some(c) => format!(
                "; {} now names another file or none, which the next taker locks without excluding {who}",
                c.path
            ),
            None => String::new(),
        };
        verdicts.push(Verdict {
            kind: VerdictKind::OrphanedLock,
            message: format!(
                "orphaned lock: {who} holds a flock on {}, a {LOCK_NAME} deleted (removed or replaced) while held{now}. Stop {who} or make sure it no longer writes, then start the pod root again; never delete a held lock file",
                lock.path
            ),
            pids: lock.holders.clone(),
            pod: None,
        });
    }
    verdicts
}

/// Lock files that are not regular files (a symbolic link, a FIFO, …):
/// `writer exec` refuses to take them, and the view never follows them.
fn lock_not_regular(obs: &Observed) -> Vec<Verdict> {
    obs.locks
        .iter()
        .filter(|l| l.state == LockFileState::NotRegular)
        .map(|l| Verdict {
            kind: VerdictKind::LockNotRegular,
            message: format!(
                "{}: {}. Remove it; writer exec then creates a regular lock file",
                l.path, l.state_reason
            ),
            pids: Vec::new(),
            pod: None,
        })
        .collect()
}

/// Whether `pid` or one of its known ancestors holds a lock file. The walk
/// is bounded: a ppid loop cannot hang us.
fn under_holder(pid: u32, parent_of: &BTreeMap<u32, u32>, holders: &BTreeSet<u32>) -> bool {
    let mut pid = pid;
    for _ in 0..=parent_of.len() {
        if holders.contains(&pid) {
            return true;
        }
        match parent_of.get(&pid) {
            Some(&pp) if pp != 0 && pp != pid => pid = pp,
            _ => return false,
        }
    }
    false
}

/// The pids, joined by ", ".
fn join_pids(pids: &[u32]) -> String {
    let v: Vec<String> = pids.iter().map(u32::to_string).collect();
    v.join(", ")
}
