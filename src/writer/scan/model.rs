//! The `pod` section of the `--json` snapshot, as the scan's types: the
//! processes, the lock files, the verdicts and the scope.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::kube::{ContainerRef, KubePod};
use crate::exit::Exit;
use crate::writer::Duty;

/// The `pod` section of the `--json` snapshot. All lists are sorted
/// (processes by pid, locks by path, verdicts by kind then pids).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PodSnapshot {
    /// The processes of the pod.
    pub processes: Vec<ProcessInfo>,
    /// The lock files inspected.
    pub locks: Vec<LockInfo>,
    /// What needs attention. Empty means healthy only when the snapshot is
    /// also complete (see [`PodSnapshot::incomplete`]).
    pub verdicts: Vec<Verdict>,
    /// What the scan considered: the selection rule, the processes read and
    /// the lock files asked for. One entry per scan (several when merged).
    #[serde(default)]
    pub scope: Vec<PodScope>,
    /// Processes that could not be inspected (environment or descriptors
    /// unreadable, usually another user's processes), sorted. Their duty or
    /// lock is `unknown`.
    #[serde(default)]
    pub uninspected: Vec<u32>,
    /// Sentences about what this scan could not know (uninspected processes,
    /// lock files whose state is unknown). Non-empty exactly when
    /// [`PodSnapshot::incomplete`] is true.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Where the viewer stood: its rights, and its mount and user namespaces
    /// against the pod's, with one line for each that differs or cannot be
    /// told. Null for a snapshot no scan made.
    #[serde(default)]
    pub viewer: Option<ViewerInfo>,
    /// The Kubernetes pod the pod's processes are in (from their cgroups),
    /// when they are all in one; null otherwise.
    #[serde(default)]
    pub kubernetes: Option<KubePod>,
    /// The node view (`--node`): every pod of the node, each judged alone,
    /// and their tally. Null for a pod view.
    #[serde(default)]
    pub node: Option<NodeView>,
}

/// Where the viewer stood (issue 46): what it may read, and how its
/// namespaces relate to the pod's.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ViewerInfo {
    /// The viewer's effective uid.
    pub(crate) euid: u32,
    /// Whether `CAP_SYS_PTRACE` is effective for the viewer.
    pub(crate) cap_sys_ptrace: bool,
    /// The viewer's mount namespace against the pod's (the pod root's; for
    /// an auto-detected pod, `different` when one of its processes is in
    /// another, `unknown` when one could not be told).
    pub(crate) mount_namespace: NsRelation,
    /// Likewise the user namespace.
    pub(crate) user_namespace: NsRelation,
    /// One sentence for each namespace that differs or cannot be told; empty
    /// when the viewer shares the pod's.
    pub lines: Vec<String>,
}

impl PodSnapshot {
    /// Whether some fact could not be gathered: a process could not be
    /// inspected or a lock file's state is unknown. An incomplete pod is never
    /// reported healthy.
    pub fn incomplete(&self) -> bool {
        !self.uninspected.is_empty()
            || !self.notes.is_empty()
            || self.locks.iter().any(|l| l.state == LockFileState::Unknown)
    }

    /// Whether the pod was asked for by its options: a scan of a `--pod-root`
    /// tree, or of given `--data-dir`s.
    pub(crate) fn requested(&self) -> bool {
        self.scope
            .iter()
            .any(|s| s.mode != "auto" || s.pod_root.is_some() || !s.data_dirs.is_empty())
    }

    /// Whether the scan found a pod among the processes it could read: a
    /// process in it (one that carries a lease variable, has a lock file open
    /// or is named by `/proc/locks`, or their ancestors), a lock file, or a
    /// verdict.
    pub fn found(&self) -> bool {
        !self.processes.is_empty() || !self.locks.is_empty() || !self.verdicts.is_empty()
    }

    /// The exit code of a pod-only report: 1 when incomplete (could not
    /// gather), else 3 when a verdict needs attention, else 0
    /// ([`Exit::Failed`], [`Exit::Attention`], [`Exit::Ok`]).
    pub fn exit_code(&self) -> Exit {
        if self.incomplete() {
            Exit::Failed
        } else if !self.verdicts.is_empty() {
            Exit::Attention
        } else {
            Exit::Ok
        }
    }
}

/// What one scan looked at and why (issue 13: the output states its scope).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PodScope {
    /// `pod_root` (a process and its descendants) or `auto` (processes with a
    /// lease variable or a lock file open, plus their ancestors).
    pub mode: String,
    /// The `--pod-root` pid, when given.
    pub pod_root: Option<u32>,
    /// How many processes the proc root listed (kernel threads excluded).
    pub processes_seen: usize,
    /// How many of them were selected as the pod.
    pub processes_selected: usize,
    /// The data directories asked for (escaped); empty when lock files were
    /// auto-detected from open descriptors.
    pub data_dirs: Vec<String>,
    /// One sentence: the rule that selected the processes and lock files.
    pub description: String,
}

/// One process of the pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Process id, as seen in the scanned `/proc`.
    pub pid: u32,
    /// Parent process id (0 for a namespace's init).
    pub ppid: u32,
    /// Command line, arguments joined by spaces, escaped for terminal display;
    /// `[comm]` when the command line is empty (kernel thread, zombie).
    pub command: String,
    /// The duty this process computed at start, from its initial environment.
    pub duty: DutyView,
    /// One sentence explaining `duty`.
    pub duty_reason: String,
    /// The strongest relation to any inspected lock file.
    pub lock: LockState,
    /// Initial value of `CLOUD_WRITER_LEASE` (escaped), if set and readable.
    pub enable: Option<String>,
    /// Initial value of `CLOUD_WRITER_LEASE_HELD` (escaped), if set and readable.
    pub stamp: Option<String>,
    /// Only when `lock` is `open`: seconds since the process started, an upper
    /// bound on how long it has waited for the lock.
    pub waiting_s: Option<u64>,
    /// Why `lock` is `unknown` (its descriptors could not be read); null otherwise.
    #[serde(default)]
    pub lock_reason: Option<String>,
    /// Why this process is part of the pod (e.g. "descendant of pod root 4711").
    #[serde(default)]
    pub included_because: String,
    /// Its container and Kubernetes pod, from its cgroup; null when its
    /// cgroup names neither.
    #[serde(default)]
    pub container: Option<ContainerRef>,
}

/// A process's duty as the scanner sees it: a [`Duty`], or why none could be
/// computed. Serialized as `take|inherit|off|invalid|unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DutyView {
    /// Must hold the lock (pod root).
    Take,
    /// Its parent holds the lock.
    Inherit,
    /// The lease is off for it.
    Off,
    /// `CLOUD_WRITER_LEASE` has an invalid value.
    Invalid,
    /// The environment could not be read.
    Unknown,
}

impl DutyView {
    /// The snake_case name, as in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            DutyView::Take => "take",
            DutyView::Inherit => "inherit",
            DutyView::Off => "off",
            DutyView::Invalid => "invalid",
            DutyView::Unknown => "unknown",
        }
    }
}

impl From<Duty> for DutyView {
    fn from(d: Duty) -> Self {
        match d {
            Duty::Take => DutyView::Take,
            Duty::Inherit => DutyView::Inherit,
            Duty::Off => DutyView::Off,
        }
    }
}

/// A process's relation to the lock file(s). Serialized as
/// `holds|holds_deleted|open|none|unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockState {
    /// Holds the flock (alone or sharing the open file description).
    Holds,
    /// Holds a flock on a lock file that was deleted (removed or replaced)
    /// while held: an orphaned lock, which excludes nobody who opens the
    /// path now (verdict `orphaned_lock`).
    HoldsDeleted,
    /// Has the lock file open without holding it: waiting.
    Open,
    /// Does not have the lock file open.
    None,
    /// Its descriptors could not be read (see `lock_reason`).
    Unknown,
}

impl LockState {
    /// The snake_case name, as in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockState::Holds => "holds",
            LockState::HoldsDeleted => "holds_deleted",
            LockState::Open => "open",
            LockState::None => "none",
            LockState::Unknown => "unknown",
        }
    }
}

/// Whether a lock file is locked, as far as this viewer can tell. Serialized
/// snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockFileState {
    /// Locked by a process this scan can see (fdinfo or `/proc/locks`).
    Held,
    /// Locked, but by no process visible here: `/proc/locks` shows nothing and
    /// no `fdinfo` has the lock, yet the kernel refused a shared probe. The
    /// holder is in another PID namespace (or its taker has exited and a
    /// descendant outside this view shares the descriptor).
    HeldOutsideNamespace,
    /// Nobody holds it (or the file does not exist yet).
    Free,
    /// A deleted lock file (removed or replaced while held) that a process
    /// still holds flocked: the path names another file, or none, so a new
    /// taker is not excluded by this holder (verdict `orphaned_lock`).
    Orphaned,
    /// The path names something other than a regular file (a symbolic link,
    /// a FIFO, a directory, a device): never opened nor followed, and
    /// refused by `writer exec` (verdict `lock_not_regular`).
    NotRegular,
    /// Could not be told (see `state_reason`).
    #[default]
    Unknown,
}

impl LockFileState {
    /// The snake_case name, as in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockFileState::Held => "held",
            LockFileState::HeldOutsideNamespace => "held_outside_namespace",
            LockFileState::Free => "free",
            LockFileState::Orphaned => "orphaned",
            LockFileState::NotRegular => "not_regular",
            LockFileState::Unknown => "unknown",
        }
    }
}

/// One lock file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockInfo {
    /// The lock file path (escaped), as given or as the holder's `/proc/PID/fd` shows it.
    pub path: String,
    /// Pids holding the lock, found through `fdinfo` (sorted). May include
    /// processes outside the pod.
    pub holders: Vec<u32>,
    /// Whether the kernel reports the file as flocked (`/proc/locks` or a holder's `fdinfo`).
    pub locked: bool,
    /// The pids `/proc/locks` names for this file: the process that took the
    /// lock, which may have exited since, or 0 when it is in another pid namespace.
    pub proc_locks_pids: Vec<u32>,
    /// Held, held outside this PID namespace, free, orphaned, not a regular
    /// file, or unknown.
    #[serde(default)]
    pub state: LockFileState,
    /// One sentence: how `state` was found out.
    #[serde(default)]
    pub state_reason: String,
    /// Whether this is a deleted lock file (removed or replaced while
    /// held): `path` ends in ` (deleted)` and names where it was.
    #[serde(default)]
    pub deleted: bool,
    /// The node view: the pod whose view this is (`namespace/name`, or `pod
    /// UID`); null in a pod view.
    #[serde(default)]
    pub pod: Option<String>,
}

/// Something about the pod that needs attention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Which rule fired.
    pub kind: VerdictKind,
    /// One sentence for the operator (escaped).
    pub message: String,
    /// The processes concerned, sorted.
    pub pids: Vec<u32>,
    /// The node view: the pod it is about (`namespace/name`, or `pod UID`);
    /// null in a pod view.
    #[serde(default)]
    pub pod: Option<String>,
}

/// The pod verdicts (ARCHITECTURE.md; docs/writer-leases.md). Serialized snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// `CLOUD_WRITER_LEASE` has an invalid value somewhere in the pod.
    InvalidEnable,
    /// The lease is on in the pod but no process holds the lock.
    ArmedHoldsNothing,
    /// More than one participant has duty Take (siblings racing for the lock).
    SiblingsRacing,
    /// Participants of different process trees take one lock file: two pod
    /// roots (two pods, or two `writer exec`) on one data directory.
    PodRootsRacing,
    /// The lock is held by a process whose duty is not Take.
    HolderNotTake,
    /// A participant's stamp names a pid other than its parent (or a dead pid, or garbage).
    StrayStamp,
    /// A participant has the lock file open without holding it.
    Waiting,
    /// The lock is held by a process outside the pod (or one this scan cannot see).
    HolderOutsidePod,
    /// A process with the lease on whose stamp names a holder that is gone,
    /// running outside every holder's tree (e.g. a daemonized child that
    /// outlived `writer exec`): it may write without the lease.
    OrphanedWriter,
    /// A process holds a flock on a deleted lock file (removed or replaced
    /// while held): a new taker of the path is not excluded by it, so two
    /// writers are possible (or running).
    OrphanedLock,
    /// The lock file path names something other than a regular file (e.g. a
    /// symbolic link): `writer exec` refuses to take it.
    LockNotRegular,
}

impl VerdictKind {
    /// The snake_case name, as in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::InvalidEnable => "invalid_enable",
            VerdictKind::ArmedHoldsNothing => "armed_holds_nothing",
            VerdictKind::SiblingsRacing => "siblings_racing",
            VerdictKind::PodRootsRacing => "pod_roots_racing",
            VerdictKind::HolderNotTake => "holder_not_take",
            VerdictKind::StrayStamp => "stray_stamp",
            VerdictKind::Waiting => "waiting",
            VerdictKind::HolderOutsidePod => "holder_outside_pod",
            VerdictKind::OrphanedWriter => "orphaned_writer",
            VerdictKind::OrphanedLock => "orphaned_lock",
            VerdictKind::LockNotRegular => "lock_not_regular",
        }
    }
}

/// The environment facts the scanner extracted from `/proc/PID/environ`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvRead {
    /// Read: the raw values of the two lease variables (no other variable).
    Read {
        /// `CLOUD_WRITER_LEASE`, if set.
        enable: Option<String>,
        /// `CLOUD_WRITER_LEASE_HELD`, if set.
        stamp: Option<String>,
    },
    /// Could not be read; the reason (e.g. permission denied).
    Unreadable(String),
}

/// A lock file as gathered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedLock {
    /// Escaped path.
    pub path: String,
    /// Every process (in the pod or not) holding it, sorted.
    pub holders: Vec<u32>,
    /// Whether the kernel reports it locked.
    pub locked: bool,
    /// Pids named by `/proc/locks`.
    pub proc_locks_pids: Vec<u32>,
    /// Held, held outside this PID namespace, free, orphaned, not a regular
    /// file, or unknown.
    pub state: LockFileState,
    /// How `state` was found out.
    pub state_reason: String,
    /// A deleted lock file (removed or replaced while held).
    pub deleted: bool,
    /// For a deleted one: the index in [`super::Observed::locks`] of the lock file
    /// its path names now, when that one is inspected too.
    pub current: Option<usize>,
}

/// How one of the viewer's namespaces relates to a pod process's.
/// Serialized `same|different|unknown`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NsRelation {
    /// The viewer's own.
    Same,
    /// Another one.
    Different,
    /// Could not be told (the reason is in the viewer's lines).
    #[default]
    Unknown,
}

/// A pod's state in the node view, from its verdicts and completeness (the
/// first that applies). Serialized snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PodState {
    /// `siblings_racing`: more than one process of the pod takes the lock.
    Racing,
    /// `armed_holds_nothing`: the lease is on and nothing holds the lock.
    HoldingNothing,
    /// Another verdict (a holder whose duty is not take, a stray stamp, an
    /// orphaned writer or lock, an invalid value, a lock file that is not a
    /// regular file, a holder outside the pod that nobody in it waits for).
    Attention,
    /// `waiting`: a process of the pod waits for the lock (a holder
    /// elsewhere named or not), and nothing worse.
    Waiting,
    /// No verdict, but something could not be read: never healthy.
    Unknown,
    /// No verdict, read whole, and a lease taken as it should be.
    Healthy,
    /// No process of the pod has the lease on or a lock file open.
    NoLease,
}

impl PodState {
    /// Every state, in the order of the tally.
    pub const ALL: [PodState; 7] = [
        PodState::Racing,
        PodState::HoldingNothing,
        PodState::Attention,
        PodState::Waiting,
        PodState::Unknown,
        PodState::Healthy,
        PodState::NoLease,
    ];

    /// The snake_case name, as in `--json` and the `state` label.
    pub fn as_str(self) -> &'static str {
        match self {
            PodState::Racing => "racing",
            PodState::HoldingNothing => "holding_nothing",
            PodState::Attention => "attention",
            PodState::Waiting => "waiting",
            PodState::Unknown => "unknown",
            PodState::Healthy => "healthy",
            PodState::NoLease => "no_lease",
        }
    }

    /// The state of a pod judged as `s`.
    pub fn of(s: &PodSnapshot) -> PodState {
        use VerdictKind as K;
        let kinds: BTreeSet<VerdictKind> = s.verdicts.iter().map(|v| v.kind).collect();
        if kinds.contains(&K::SiblingsRacing) {
            PodState::Racing
        } else if kinds.contains(&K::ArmedHoldsNothing) {
            PodState::HoldingNothing
        } else if kinds
            .iter()
            .any(|k| !matches!(k, K::Waiting | K::HolderOutsidePod))
            || (kinds.contains(&K::HolderOutsidePod) && !kinds.contains(&K::Waiting))
        {
            PodState::Attention
        } else if kinds.contains(&K::Waiting) {
            PodState::Waiting
        } else if s.incomplete() {
            PodState::Unknown
        } else if s.locks.is_empty() && s.processes.iter().all(|p| matches!(p.duty, DutyView::Off))
        {
            PodState::NoLease
        } else {
            PodState::Healthy
        }
    }
}

/// The node view's part of the `pod` section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NodeView {
    /// How many pods are in each state.
    pub summary: NodeSummary,
    /// Every pod of the node (and the group outside pods, when it takes part
    /// in a lease), by label.
    pub pods: Vec<NodePod>,
    /// Processes outside every pod that could not be inspected: whether they
    /// take part in a lease is unknown (they are no pod's).
    pub outside_uninspected: Vec<u32>,
    /// Sentences about the node as a whole (processes outside pods that
    /// could not be inspected).
    pub lines: Vec<String>,
}

/// How many pods are in each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeSummary {
    /// Every pod (the group outside pods not counted).
    pub pods: usize,
    /// [`PodState::Healthy`].
    pub healthy: usize,
    /// [`PodState::Racing`].
    pub racing: usize,
    /// [`PodState::HoldingNothing`].
    pub(crate) holding_nothing: usize,
    /// [`PodState::Waiting`].
    pub waiting: usize,
    /// [`PodState::Attention`].
    pub(crate) attention: usize,
    /// [`PodState::Unknown`].
    pub unknown: usize,
    /// [`PodState::NoLease`].
    pub(crate) no_lease: usize,
}

impl NodeSummary {
    /// The count of `state`.
    pub fn count(&self, state: PodState) -> usize {
        match state {
            PodState::Racing => self.racing,
            PodState::HoldingNothing => self.holding_nothing,
            PodState::Attention => self.attention,
            PodState::Waiting => self.waiting,
            PodState::Unknown => self.unknown,
            PodState::Healthy => self.healthy,
            PodState::NoLease => self.no_lease,
        }
    }

    pub(super) fn add(&mut self, state: PodState) {
        let n = match state {
            PodState::Racing => &mut self.racing,
            PodState::HoldingNothing => &mut self.holding_nothing,
            PodState::Attention => &mut self.attention,
            PodState::Waiting => &mut self.waiting,
            PodState::Unknown => &mut self.unknown,
            PodState::Healthy => &mut self.healthy,
            PodState::NoLease => &mut self.no_lease,
        };
        *n += 1;
        self.pods += 1;
    }

    /// One line: `50 pods (45 healthy, 1 racing, …)` (states at 0 left
    /// out, but healthy).
    pub fn line(&self) -> String {
        let mut parts = vec![format!("{} healthy", self.healthy)];
        for s in PodState::ALL {
            let n = self.count(s);
            if n > 0 && s != PodState::Healthy {
                parts.push(format!("{n} {}", s.as_str().replace('_', " ")));
            }
        }
        format!("{} pods ({})", self.pods, parts.join(", "))
    }
}

/// One pod of the node view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePod {
    /// `namespace/name`, `name (pod UID)`, `pod UID`, or `outside pods`.
    pub label: String,
    /// The pod's identity; null for the group outside pods.
    pub kubernetes: Option<KubePod>,
    /// Its state.
    pub state: PodState,
    /// The kinds of its verdicts, sorted, each once.
    pub verdicts: Vec<VerdictKind>,
    /// The pids of the pod that hold a lock file.
    pub holders: Vec<u32>,
    /// The container (its id's first 12 digits) of the first holder, else of
    /// the first process that must take the lock; null when none.
    pub container: Option<String>,
    /// Every process of the pod, sorted.
    pub pids: Vec<u32>,
}
