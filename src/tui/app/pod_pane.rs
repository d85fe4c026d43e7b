//! The pod pane: whether and how the pod is scanned, the pod's processes in
//! tree order, and the process table's cursor.

use super::cursor::Cursor;
use super::{Action, App};
use crate::writer::scan::{PodSnapshot, ProcessInfo};

/// Where the pod section comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodStatus {
    /// `--no-pod`: processes are not scanned.
    Off,
    /// Scanned with every refresh; nothing has arrived yet or the last scan worked.
    Scanning,
    /// The last scan failed; the reason (the snapshot's pod section is empty).
    Failed(String),
}

/// Process rows in tree order: index into `pod.processes` and depth below its
/// pod root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeRow {
    /// Index into the snapshot's `pod.processes`.
    pub index: usize,
    /// Depth in the tree (0 for a process whose parent is not in the pod).
    pub depth: usize,
}

/// The pod pane's state.
#[derive(Debug)]
pub struct PodPane {
    /// The pod's processes in tree order, derived from the snapshot when it arrives.
    rows: Vec<TreeRow>,
    /// Selection and first row shown (indices into `rows`).
    cursor: Cursor,
    /// Whether and how the pod is scanned.
    status: PodStatus,
}

impl Default for PodPane {
    fn default() -> Self {
        Self {
            rows: Vec::new(),
            cursor: Cursor::default(),
            status: PodStatus::Scanning,
        }
    }
}

impl PodPane {
    /// The process rows in tree order.
    pub fn rows(&self) -> &[TreeRow] {
        &self.rows
    }

    /// The selection and the first row shown.
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// Whether and how the pod is scanned.
    pub fn status(&self) -> &PodStatus {
        &self.status
    }

    /// Process row `row` of `pod`, with its tree depth.
    fn row<'p>(
        &self,
        pod: Option<&'p PodSnapshot>,
        row: usize,
    ) -> Option<(&'p ProcessInfo, usize)> {
        let r = self.rows.get(row)?;
        let p = pod?.processes.get(r.index)?;
        Some((p, r.depth))
    }

    /// `--no-pod`: no scan, and the pane says so.
    pub(super) fn off(&mut self) {
        self.status = PodStatus::Off;
    }

    /// Puts back a status saved before [`PodPane::take_rows`] (rows read
    /// so far carry no pod scan).
    pub(super) fn restore_status(&mut self, status: PodStatus) {
        self.status = status;
    }

    /// The rows of a new scan `new` replacing `old`, the selected process
    /// kept selected; a scan arrived, so the pod is scanning (unless off).
    pub(super) fn take_rows(&mut self, old: Option<&PodSnapshot>, new: &PodSnapshot) {
        let keep = self.row(old, self.cursor.selected()).map(|(p, _)| p.pid);
        self.rows = tree_order(&new.processes);
        if let Some(pid) = keep {
            if let Some(i) = self
                .rows
                .iter()
                .position(|r| new.processes[r.index].pid == pid)
            {
                self.cursor.select(i);
            }
        }
        if self.status != PodStatus::Off {
            self.status = PodStatus::Scanning;
        }
    }

    /// The last scan failed with `e` (ignored with `--no-pod`).
    pub(super) fn scan_failed(&mut self, e: String) {
        if self.status != PodStatus::Off {
            self.status = PodStatus::Failed(e);
        }
    }

    /// Keeps the cursor on the page (`page` rows shown).
    pub(super) fn clamp(&mut self, page: usize) {
        self.cursor.clamp(self.rows.len(), page);
    }

    /// Applies a movement key with `page` rows shown; false for any other action.
    pub(super) fn step(&mut self, action: &Action, page: usize) -> bool {
        self.cursor.step(action, self.rows.len(), page)
    }
}

impl App {
    /// The process of a pod-view row, with its tree depth.
    pub fn pod_row(&self, row: usize) -> Option<(&ProcessInfo, usize)> {
        self.pod.row(self.session.snapshot().map(|s| &s.pod), row)
    }

    /// The selected process of the pod view.
    pub fn selected_process(&self) -> Option<&ProcessInfo> {
        self.pod_row(self.pod.cursor.selected()).map(|(p, _)| p)
    }
}

/// The processes in tree order: each process followed by its children (by
/// ppid), siblings by pid; processes whose parent is not in the list are roots.
/// Iterative, so a 10,000-deep chain is fine.
pub fn tree_order(processes: &[ProcessInfo]) -> Vec<TreeRow> {
    use std::collections::{BTreeMap, HashSet};
    let pids: HashSet<u32> = processes.iter().map(|p| p.pid).collect();
    let mut children: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut roots = Vec::new();
    for (i, p) in processes.iter().enumerate() {
        if p.ppid != p.pid && pids.contains(&p.ppid) {
            children.entry(p.ppid).or_default().push(i);
        } else {
            roots.push(i);
        }
    }
    for c in children.values_mut() {
        c.sort_by_key(|&i| processes[i].pid);
    }
    roots.sort_by_key(|&i| processes[i].pid);
    let mut out = Vec::with_capacity(processes.len());
    let mut seen = vec![false; processes.len()];
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        out.push(TreeRow { index: i, depth });
        if let Some(c) = children.get(&processes[i].pid) {
            stack.extend(c.iter().rev().map(|&c| (c, depth + 1)));
        }
    }
    // A ppid cycle (only in a hand-made snapshot) leaves processes unreached:
    // show them at the end rather than hide them.
    for (i, s) in seen.iter().enumerate() {
        if !s {
            out.push(TreeRow { index: i, depth: 0 });
        }
    }
    out
}
