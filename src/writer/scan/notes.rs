//! The notes of a pod snapshot: sentences about what the scan could not know
//! (processes it could not inspect, lock files whose state is unknown). A
//! snapshot with notes is incomplete and never reported healthy.

use super::{LockFileState, Observed};
use crate::writer::{ENABLE, HELD, LOCK_NAME};

/// The notes for `obs`; `pod_empty` tells that the pod has no process.
/// Empty exactly when every process in scope was inspected and every lock
/// file's state is known.
pub(super) fn notes(obs: &Observed, pod_empty: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if !obs.uninspected.is_empty() {
        notes.push(uninspected_note(obs, pod_empty));
    }
    for l in obs
        .locks
        .iter()
        .filter(|l| l.state == LockFileState::Unknown)
    {
        notes.push(format!("{}: {}.", l.path, l.state_reason));
    }
    notes
}

/// The sentence about the processes that could not be inspected.
fn uninspected_note(obs: &Observed, pod_empty: bool) -> String {
    let n = obs.uninspected.len();
    let auto = obs.scope.as_ref().is_none_or(|s| s.mode == "auto");
    // Auto-detection that found nothing among the readable processes says
    // so: whether the hidden ones form a pod is unknown, and the caller
    // decides whether that matters (Snapshot::pod_in_question).
    let none_found = auto && obs.locks.is_empty() && pod_empty;
    let rest = obs
        .scope
        .as_ref()
        .map_or(0, |s| s.processes_seen.saturating_sub(n));
    if none_found {
        format!(
            "{n} process{} could not be inspected ({}), and no pod was found among the {rest} that could: none of them carries {ENABLE} or {HELD} or has a {LOCK_NAME} open. Whether the hidden ones form a pod is unknown; give --pod-root or --data-dir to have it judged.",
            if n == 1 { "" } else { "es" },
            how_to_see(),
        )
    } else {
        format!(
            "{n} process{} could not be inspected ({}): {} duty or lock is unknown and no verdict is built on {}.",
            if n == 1 { "" } else { "es" },
            how_to_see(),
            if n == 1 { "its" } else { "their" },
            if n == 1 { "it" } else { "them" },
        )
    }
}

/// What to do about processes that could not be inspected: run as their
/// owner or root — said only to a process that is not root. Root is told
/// what it lacks (`CAP_SYS_PTRACE`, a user namespace of its own) and what
/// gives it, or why even it cannot read them (issue 35 trip 7, issue 46).
pub(crate) fn how_to_see() -> String {
    super::ns::ViewerFacts::current().remedy()
}
