//! Console state and the one place it changes: [`App::update`].

use chrono::{DateTime, Utc};
use std::borrow::Cow;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::snapshot::{PrefixReport, Snapshot};
use crate::text::sanitize;
use crate::writer::scan::{ProcessInfo, VerdictKind};

/// Which screen the console shows; Tab switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The bucket leases table.
    Leases,
    /// The pod: verdicts and the process tree.
    Pod,
}

impl View {
    /// The name shown in the header.
    pub fn as_str(self) -> &'static str {
        match self {
            View::Leases => "leases",
            View::Pod => "pod",
        }
    }
}

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

/// One line of the pod view's verdict box, already wrapped to the box width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeLine {
    /// The verdict this line belongs to (for its colour); `None` for a notice
    /// such as "no verdicts" or a scan error.
    pub kind: Option<VerdictKind>,
    /// Whether this is an error notice (scan failed).
    pub error: bool,
    /// The text, already passed through [`terminal_safe`].
    pub text: String,
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

/// Everything that can happen to the console.
#[derive(Debug, Clone)]
pub enum Action {
    /// The clock moved (once a second): ages tick.
    Tick(DateTime<Utc>),
    /// A new snapshot from the background gatherer.
    Snapshot(Box<Snapshot>),
    /// Move the selection up one row.
    Up,
    /// Move the selection down one row.
    Down,
    /// One screen up.
    PageUp,
    /// One screen down.
    PageDown,
    /// First row.
    Home,
    /// Last row.
    End,
    /// Switch between the leases view and the pod view.
    SwitchView,
    /// The pod scan of the latest refresh failed (sent right after its snapshot).
    PodScanFailed(String),
    /// The terminal is now this size (columns, rows).
    Resize(u16, u16),
    /// Leave the console.
    Quit,
}

/// One key binding: what to press, what it does. The status bar's hints are
/// generated from this table, so they cannot drift from the keys.
pub struct Binding {
    /// Keys as shown to the operator.
    pub keys: &'static str,
    /// What they do.
    pub does: &'static str,
    /// Whether the binding writes to a store (absent in watch mode).
    pub writes: bool,
}

/// The console's key bindings.
pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: "↑/↓",
        does: "move",
        writes: false,
    },
    Binding {
        keys: "PgUp/PgDn",
        does: "page",
        writes: false,
    },
    Binding {
        keys: "Home/End",
        does: "first/last",
        writes: false,
    },
    Binding {
        keys: "Tab",
        does: "leases/pod",
        writes: false,
    },
    Binding {
        keys: "q/Esc",
        does: "quit",
        writes: false,
    },
];

/// Maps a key press to an action, given the current state.
pub fn key_action(_app: &App, k: KeyEvent) -> Option<Action> {
    if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    Some(match k.code {
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Action::Home,
        KeyCode::End | KeyCode::Char('G') => Action::End,
        KeyCode::Tab | KeyCode::BackTab => Action::SwitchView,
        KeyCode::Char('q') | KeyCode::Esc => Action::Quit,
        _ => return None,
    })
}

/// The console's state.
pub struct App {
    /// TARGET URLs as given.
    pub targets: Vec<String>,
    /// Watch mode: no write request can be built.
    pub read_only: bool,
    /// Refresh interval.
    pub refresh: std::time::Duration,
    /// The latest snapshot, judged at `now`.
    pub snapshot: Option<Snapshot>,
    /// When the latest snapshot arrived (reader's clock).
    pub last_refresh: Option<DateTime<Utc>>,
    /// The reader's clock at the last tick.
    pub now: DateTime<Utc>,
    /// The screen shown.
    pub view: View,
    /// Selected row index in the leases view.
    pub selected: usize,
    /// First row shown in the leases view.
    pub offset: usize,
    /// Selected row index in the pod view (index into [`App::pod_rows`]).
    pub pod_selected: usize,
    /// First process row shown in the pod view.
    pub pod_offset: usize,
    /// Whether and how the pod is scanned.
    pub pod_status: PodStatus,
    /// The pod's processes in tree order, derived from the snapshot when it arrives.
    pub pod_rows: Vec<TreeRow>,
    /// Terminal size (columns, rows).
    pub size: (u16, u16),
    /// Set when the operator asked to leave.
    pub quit: bool,
}

impl App {
    /// A console on `targets`, with no snapshot yet, scanning the pod.
    pub fn new(
        targets: Vec<String>,
        read_only: bool,
        refresh: std::time::Duration,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            targets,
            read_only,
            refresh,
            snapshot: None,
            last_refresh: None,
            now,
            view: View::Leases,
            selected: 0,
            offset: 0,
            pod_selected: 0,
            pod_offset: 0,
            pod_status: PodStatus::Scanning,
            pod_rows: Vec::new(),
            size: (80, 24),
            quit: false,
        }
    }

    /// The same console without a pod scan (`--no-pod`): the pod view says so.
    pub fn without_pod(mut self) -> Self {
        self.pod_status = PodStatus::Off;
        self
    }

    /// All rows, in display order (targets in order, prefixes sorted).
    pub fn rows(&self) -> impl Iterator<Item = &PrefixReport> {
        self.snapshot
            .iter()
            .flat_map(|s| s.targets.iter().flat_map(|t| t.prefixes.iter()))
    }

    /// Number of rows.
    pub fn row_count(&self) -> usize {
        self.snapshot
            .as_ref()
            .map(|s| s.targets.iter().map(|t| t.prefixes.len()).sum())
            .unwrap_or(0)
    }

    /// The process of a pod-view row, with its tree depth.
    pub fn pod_row(&self, row: usize) -> Option<(&ProcessInfo, usize)> {
        let r = self.pod_rows.get(row)?;
        let p = self.snapshot.as_ref()?.pod.processes.get(r.index)?;
        Some((p, r.depth))
    }

    /// The selected process of the pod view.
    pub fn selected_process(&self) -> Option<&ProcessInfo> {
        self.pod_row(self.pod_selected).map(|(p, _)| p)
    }

    /// Rows of the current view's table that fit on screen (the layout in
    /// `ui` uses the same numbers).
    pub fn visible_rows(&self) -> usize {
        match self.view {
            View::Leases => self.lease_visible_rows(),
            View::Pod => self.pod_visible_rows(),
        }
    }

    /// Lease table rows that fit on screen.
    pub fn lease_visible_rows(&self) -> usize {
        usize::from(
            self.size
                .1
                .saturating_sub(ui_chrome_height() + self.error_height())
                .max(1),
        )
    }

    /// Process table rows that fit on screen in the pod view.
    pub fn pod_visible_rows(&self) -> usize {
        let chrome = POD_CHROME_HEIGHT + self.error_height() + self.notice_height();
        usize::from(self.size.1.saturating_sub(chrome).max(1))
    }

    /// Lines of error text under the table (at most 3).
    pub fn error_height(&self) -> u16 {
        self.error_lines().len().min(3) as u16
    }

    /// Height of the pod view's verdict box, borders included.
    pub fn notice_height(&self) -> u16 {
        self.notice_lines(self.size.0.saturating_sub(2)).len() as u16 + 2
    }

    /// Error lines to show (targets or prefixes that could not be read).
    pub fn error_lines(&self) -> Vec<String> {
        let Some(s) = &self.snapshot else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for t in &s.targets {
            if let Some(e) = &t.error {
                out.push(format!("{}: {}", t.url, e));
            }
            for e in &t.errors {
                out.push(format!("{}{}: {}", t.url, e.prefix, e.error));
            }
        }
        out
    }

    /// The pod view's verdict box content, word-wrapped to `width` columns:
    /// each verdict as `kind [pids] message`, or one notice (scan off, scan
    /// failed, gathering, healthy). At most [`App::max_notice_lines`] lines;
    /// the last line then says how many were left out.
    pub fn notice_lines(&self, width: u16) -> Vec<NoticeLine> {
        let width = usize::from(width.max(10));
        let notice = |text: &str, error: bool| -> Vec<NoticeLine> {
            wrap(text, width)
                .into_iter()
                .map(|text| NoticeLine {
                    kind: None,
                    error,
                    text,
                })
                .collect()
        };
        let mut lines = match (&self.pod_status, &self.snapshot) {
            (PodStatus::Off, _) => notice("pod scan off (--no-pod)", false),
            (PodStatus::Failed(e), _) => {
                notice(&format!("pod scan failed: {}", terminal_safe(e)), true)
            }
            (PodStatus::Scanning, None) => notice("gathering…", false),
            (PodStatus::Scanning, Some(s)) if s.pod.verdicts.is_empty() => {
                if s.pod.processes.is_empty() {
                    notice(
                        "no pod found: no process carries CLOUD_WRITER_LEASE or has a .writer.lock open",
                        false,
                    )
                } else {
                    notice("no verdicts: the pod looks healthy", false)
                }
            }
            (PodStatus::Scanning, Some(s)) => {
                let mut out = Vec::new();
                for v in &s.pod.verdicts {
                    let pids: Vec<String> = v.pids.iter().map(u32::to_string).collect();
                    let pids = if pids.is_empty() {
                        String::new()
                    } else {
                        format!(" [pid {}]", pids.join(", "))
                    };
                    let text = format!(
                        "{}{pids}: {}",
                        verdict_name(v.kind),
                        terminal_safe(&v.message)
                    );
                    out.extend(wrap(&text, width).into_iter().map(|text| NoticeLine {
                        kind: Some(v.kind),
                        error: false,
                        text,
                    }));
                }
                out
            }
        };
        let max = self.max_notice_lines();
        if lines.len() > max {
            let left = lines.len() - (max - 1);
            lines.truncate(max - 1);
            lines.push(NoticeLine {
                kind: None,
                error: false,
                text: format!("… {left} more line(s): leasectl --json shows every verdict"),
            });
        }
        lines
    }

    /// The most lines the verdict box may use: a third of the terminal, at least 2.
    pub fn max_notice_lines(&self) -> usize {
        usize::from(self.size.1 / 3).max(2)
    }

    /// Applies one action. The only place state changes.
    pub fn update(&mut self, action: Action) {
        let (n, page) = match self.view {
            View::Leases => (self.row_count(), self.lease_visible_rows()),
            View::Pod => (self.pod_rows.len(), self.pod_visible_rows()),
        };
        let sel = match self.view {
            View::Leases => self.selected,
            View::Pod => self.pod_selected,
        };
        let last = n.saturating_sub(1);
        let page = page.max(1);
        let moved = match action {
            Action::Up => Some(sel.saturating_sub(1)),
            Action::Down => Some((sel + 1).min(last)),
            Action::PageUp => Some(sel.saturating_sub(page)),
            Action::PageDown => Some((sel + page).min(last)),
            Action::Home => Some(0),
            Action::End => Some(last),
            _ => None,
        };
        if let Some(to) = moved {
            match self.view {
                View::Leases => self.selected = to,
                View::Pod => self.pod_selected = to,
            }
        }
        match action {
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Home
            | Action::End => {}
            Action::Tick(now) => {
                self.now = now;
                if let Some(s) = &mut self.snapshot {
                    s.rejudge(now);
                }
            }
            Action::Snapshot(s) => {
                let mut s = *s;
                s.rejudge(self.now.max(s.generated_at));
                self.last_refresh = Some(s.generated_at);
                self.now = self.now.max(s.generated_at);
                // Keep the selected process selected across refreshes.
                let keep = self.selected_process().map(|p| p.pid);
                self.pod_rows = tree_order(&s.pod.processes);
                if let Some(pid) = keep {
                    if let Some(i) = self
                        .pod_rows
                        .iter()
                        .position(|r| s.pod.processes[r.index].pid == pid)
                    {
                        self.pod_selected = i;
                    }
                }
                if self.pod_status != PodStatus::Off {
                    self.pod_status = PodStatus::Scanning;
                }
                self.snapshot = Some(s);
            }
            Action::PodScanFailed(e) => {
                if self.pod_status != PodStatus::Off {
                    self.pod_status = PodStatus::Failed(e);
                }
            }
            Action::SwitchView => {
                self.view = match self.view {
                    View::Leases => View::Pod,
                    View::Pod => View::Leases,
                }
            }
            Action::Resize(w, h) => self.size = (w, h),
            Action::Quit => self.quit = true,
        }
        // Both views stay consistent: rows may have appeared or vanished, and
        // the terminal may have changed size.
        let (n, page) = (self.row_count(), self.lease_visible_rows().max(1));
        clamp(&mut self.selected, &mut self.offset, n, page);
        let (n, page) = (self.pod_rows.len(), self.pod_visible_rows().max(1));
        clamp(&mut self.pod_selected, &mut self.pod_offset, n, page);
    }
}

/// Text from a snapshot made safe for the terminal. Pod text arrives already
/// escaped by the scanner (control characters as `\x1b`, backslashes doubled);
/// escaping it again would double every backslash (`grep '\d'` would read
/// `grep '\\\\d'`). So [`sanitize`] is applied only when the text still holds
/// something it would escape besides a backslash: raw control or bidi
/// characters never reach the terminal, and escaped text is shown as the JSON
/// shows it.
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    let probe: String = s.chars().filter(|&c| c != '\\').collect();
    if sanitize(&probe) == probe {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(sanitize(s))
    }
}

/// Keeps `selected` inside `n` rows and `offset` such that the selection is
/// among the `page` rows shown.
fn clamp(selected: &mut usize, offset: &mut usize, n: usize, page: usize) {
    *selected = (*selected).min(n.saturating_sub(1));
    if *selected < *offset {
        *offset = *selected;
    } else if *selected >= *offset + page {
        *offset = *selected + 1 - page;
    }
    *offset = (*offset).min(n.saturating_sub(page));
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

/// The snake_case name of a verdict kind, as in `--json`.
pub fn verdict_name(k: VerdictKind) -> &'static str {
    match k {
        VerdictKind::InvalidEnable => "invalid_enable",
        VerdictKind::ArmedHoldsNothing => "armed_holds_nothing",
        VerdictKind::SiblingsRacing => "siblings_racing",
        VerdictKind::HolderNotTake => "holder_not_take",
        VerdictKind::StrayStamp => "stray_stamp",
        VerdictKind::Waiting => "waiting",
        VerdictKind::HolderOutsidePod => "holder_outside_pod",
    }
}

/// Word-wraps `text` to `width` columns (counted in chars); continuation lines
/// are indented by two spaces; a word longer than a line is cut.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(4);
    let mut lines = Vec::new();
    let mut cur = String::new();
    let mut cur_len = 0usize;
    // Whether `cur` holds no word yet (only the continuation indent).
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut word: Vec<char> = word.chars().collect();
        while !word.is_empty() {
            let sep = usize::from(!empty);
            if cur_len + sep + word.len() <= width {
                if !empty {
                    cur.push(' ');
                }
                cur_len += sep + word.len();
                cur.extend(word.drain(..));
                empty = false;
                continue;
            }
            if empty {
                let room = width - cur_len;
                cur.extend(word.drain(..room));
            }
            lines.push(std::mem::replace(&mut cur, "  ".to_owned()));
            cur_len = 2;
            empty = true;
        }
    }
    if !empty {
        lines.push(cur);
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

/// Lines the console uses around the leases table: header (2), table header (1),
/// status bar (1), borders (2).
pub const fn ui_chrome_height() -> u16 {
    6
}

/// Lines the pod view uses besides the verdict box and error lines: header
/// (2), process table borders and header (3), the selected process's duty
/// sentence (2), status bar (1).
pub const POD_CHROME_HEIGHT: u16 = 8;
