//! Console state and the one place it changes: [`App::update`].
//!
//! Keys become [`Action`]s through [`key_action`] (which depends on the mode:
//! a dialog or the filter line takes text); writes the operator confirmed
//! become [`WriteRequest`] values in [`App::outbox`], which the event loop hands to
//! the write task. In watch mode no key produces a write action, and there is
//! no write task to receive one.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use super::action::Action;
use super::action::WriteRequest;
use super::layout;
use crate::audit::AuditEntry;
use crate::bucket::{Exclusion, LeaseState};
use crate::snapshot::{Delta, ExclusionReport, PrefixReport, RowUpdate, Snapshot};
use crate::text::sanitize;
use crate::writer::scan::{ProcessInfo, VerdictKind};

mod dialog;
mod judging;
mod keys;

pub use dialog::{Field, TakeoverDialog, ThenChoice};
pub use keys::{key_action, Binding, BINDINGS};

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

/// A row of the leases table: target index and prefix index in the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRow {
    /// Index into `snapshot.targets`.
    pub target: usize,
    /// Index into that target's `prefixes`.
    pub index: usize,
}

/// The column the leases table is sorted by (`s` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Target, then prefix (the default).
    Prefix,
    /// Holder instance id.
    Holder,
    /// Age, oldest first.
    Age,
    /// TTL.
    Ttl,
    /// Expires-in, soonest (or longest expired) first.
    Expires,
    /// State, most urgent first.
    State,
    /// Exclusion.
    Exclusion,
    /// Holder clock skew, largest first.
    Skew,
}

impl SortKey {
    /// Every column, in table order.
    pub const ALL: [SortKey; 8] = [
        SortKey::Prefix,
        SortKey::Holder,
        SortKey::Age,
        SortKey::Ttl,
        SortKey::Expires,
        SortKey::State,
        SortKey::Exclusion,
        SortKey::Skew,
    ];

    /// The next column.
    pub fn next(self) -> Self {
        let i = Self::ALL.iter().position(|k| *k == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }

    /// The column header it sorts.
    pub fn column(self) -> &'static str {
        match self {
            SortKey::Prefix => "PREFIX",
            SortKey::Holder => "HOLDER",
            SortKey::Age => "AGE",
            SortKey::Ttl => "TTL",
            SortKey::Expires => "EXPIRES",
            SortKey::State => "STATE",
            SortKey::Exclusion => "EXCLUSION",
            SortKey::Skew => "SKEW",
        }
    }
}

/// The console's modal state.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Browsing.
    Normal,
    /// Typing the filter (`/`).
    Filter,
    /// The help popup (`?`).
    Help,
    /// The takeover dialog (`t`).
    Takeover(Box<TakeoverDialog>),
    /// Probe target `target` (an index into the targets)? `p` asks first: the
    /// probe writes (and removes) a scratch key.
    ConfirmProbe {
        /// The target to probe.
        target: usize,
    },
    /// Leases are held: release them and quit?
    ConfirmQuit,
    /// Releasing held leases before quitting.
    Quitting,
}

/// The console's state.
pub struct App {
    /// TARGET URLs as given.
    pub targets: Vec<String>,
    /// Watch mode: no write request can be built.
    pub read_only: bool,
    /// The exclusion mode chosen at start (conditional or best-effort).
    pub exclusion: Exclusion,
    /// Refresh interval.
    pub refresh: std::time::Duration,
    /// Listings run every this many refreshes (GETs every refresh).
    pub relist_every: u32,
    /// TTL of leases this console writes, seconds (the watch needed for suspect records).
    pub ttl_s: u64,
    /// The latest snapshot, judged at `now`.
    pub snapshot: Option<Snapshot>,
    /// When the latest snapshot arrived (reader's clock).
    pub last_refresh: Option<DateTime<Utc>>,
    /// The reader's clock at the last tick.
    pub now: DateTime<Utc>,
    /// The screen shown.
    pub view: View,
    /// Modal state.
    pub mode: Mode,
    /// The detail pane is open.
    pub detail: bool,
    /// The filter (substring of prefix or holder; a leading `!` negates).
    pub filter: String,
    /// Sort column.
    pub sort: SortKey,
    /// The leases table's rows after filter and sort.
    pub lease_rows: Vec<LeaseRow>,
    /// Selected row index in the leases view (into `lease_rows`).
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
    /// Probe results by target index.
    pub probes: BTreeMap<usize, ExclusionReport>,
    /// Lease keys this console holds (taken with "hold").
    pub held: BTreeSet<String>,
    /// When the console first saw each key's current ETag (for suspect/malformed takeovers).
    pub first_seen: HashMap<String, (Option<String>, DateTime<Utc>)>,
    /// Recent audit entries (newest last).
    pub audit: Vec<AuditEntry>,
    /// The holder changes seen this session, per prefix (updated with each snapshot).
    pub history: crate::snapshot::history::History,
    /// Where the audit log is (OPS).
    pub audit_path: Option<String>,
    /// Request totals over the last minute, with when they were read.
    pub counters: VecDeque<(DateTime<Utc>, crate::store::RequestCounts)>,
    /// US dollars per 1,000 GET requests, for the cost estimate (`--get-price`).
    pub get_price: f64,
    /// A gather still running: (LEASEs read, prefixes known, listing complete).
    pub loading: Option<(usize, usize, bool)>,
    /// When the oldest reading of any row was taken (reader's clock): the
    /// status bar shows its age, what the request budget costs in freshness.
    pub oldest_reading: Option<DateTime<Utc>>,
    /// The last message for the operator (and whether it is an error),
    /// already safe for the terminal: every name in it escaped exactly once
    /// (with [`sanitize`]) where the message is made, so it is drawn as is.
    pub message: Option<(String, bool)>,
    /// Writes confirmed by the operator, for the event loop to send.
    pub outbox: Vec<WriteRequest>,
    /// Terminal size (columns, rows).
    pub size: (u16, u16),
    /// Set when the console should exit.
    pub quit: bool,
    /// What the next tick judges again (module `judging`).
    judging: judging::Judging,
}

/// AWS S3 Standard's price of 1,000 GET requests in us-east-1, US dollars
/// (the default of `--get-price`).
pub const DEFAULT_GET_PRICE: f64 = 0.0004;

/// A LIST request costs this many GETs on AWS S3 Standard ($0.005 vs $0.0004 per 1,000).
pub const LIST_PRICE_RATIO: f64 = 12.5;

/// Request rates over the last minute ([`App::rates`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// All requests per minute.
    pub requests_per_min: f64,
    /// LIST requests per minute (among all).
    pub lists_per_min: f64,
    /// Failed requests in the last minute.
    pub errors: u64,
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
            exclusion: Exclusion::Conditional,
            refresh,
            relist_every: 1,
            ttl_s: crate::bucket::record::DEFAULT_TTL_S,
            snapshot: None,
            last_refresh: None,
            now,
            view: View::Leases,
            mode: Mode::Normal,
            detail: false,
            filter: String::new(),
            sort: SortKey::Prefix,
            lease_rows: Vec::new(),
            selected: 0,
            offset: 0,
            pod_selected: 0,
            pod_offset: 0,
            pod_status: PodStatus::Scanning,
            pod_rows: Vec::new(),
            probes: BTreeMap::new(),
            held: BTreeSet::new(),
            first_seen: HashMap::new(),
            audit: Vec::new(),
            history: crate::snapshot::history::History::new(),
            audit_path: None,
            counters: VecDeque::new(),
            get_price: DEFAULT_GET_PRICE,
            loading: None,
            oldest_reading: None,
            message: None,
            outbox: Vec::new(),
            size: (80, 24),
            quit: false,
            judging: judging::Judging::default(),
        }
    }

    /// The same console without a pod scan (`--no-pod`): the pod view says so.
    pub fn without_pod(mut self) -> Self {
        self.pod_status = PodStatus::Off;
        self
    }

    /// The row (as shown) at `i`, with its report.
    pub fn lease_row(&self, i: usize) -> Option<(LeaseRow, &PrefixReport)> {
        let r = *self.lease_rows.get(i)?;
        let p = self
            .snapshot
            .as_ref()?
            .targets
            .get(r.target)?
            .prefixes
            .get(r.index)?;
        Some((r, p))
    }

    /// All rows as shown (after filter and sort).
    pub fn rows(&self) -> impl Iterator<Item = &PrefixReport> {
        (0..self.lease_rows.len()).filter_map(|i| self.lease_row(i).map(|(_, p)| p))
    }

    /// Number of rows shown.
    pub fn row_count(&self) -> usize {
        self.lease_rows.len()
    }

    /// Number of prefixes in the snapshot (before the filter).
    pub fn total_rows(&self) -> usize {
        self.snapshot
            .as_ref()
            .map(|s| s.targets.iter().map(|t| t.prefixes.len()).sum())
            .unwrap_or(0)
    }

    /// The lease rows on screen now, as (index of the TARGET, prefix): none
    /// while the pod view is shown. The console reads these at every refresh.
    pub fn rows_in_view(&self) -> std::collections::HashSet<(usize, String)> {
        if self.view != View::Leases {
            return Default::default();
        }
        self.rows_on_screen()
            .filter_map(|i| self.lease_row(i))
            .map(|(r, p)| (r.target, p.prefix.clone()))
            .collect()
    }

    /// Indices into the shown rows of the leases view's page and of the
    /// selected row (which may be off the page).
    fn rows_on_screen(&self) -> impl Iterator<Item = usize> {
        let page = self.lease_visible_rows().max(1);
        (self.offset..self.offset + page).chain(std::iter::once(self.selected))
    }

    /// The once-a-second tick: the clock moves to `now`, and the rows on
    /// screen, the selected one and those whose verdict is due are judged
    /// again; the others cannot change before the next whole judgement
    /// (module `judging`).
    fn tick(&mut self, now: DateTime<Utc>) {
        self.now = now;
        let mut rows = self.judging.take_due(now);
        rows.extend(
            self.rows_on_screen()
                .filter_map(|i| self.lease_rows.get(i))
                .map(|r| (r.target, r.index)),
        );
        if let Some(s) = &mut self.snapshot {
            self.judging.age_unknown |= s.rejudge_rows(now, &rows);
            self.judging.partial = true;
        }
    }

    /// Whether the age of any row is unknown because this host's clock is
    /// too far from a storage service's (the header's CLOCK OFF).
    pub fn ages_unknown(&self) -> bool {
        self.judging.age_unknown
    }

    /// The selected lease row.
    pub fn selected_lease(&self) -> Option<(LeaseRow, &PrefixReport)> {
        self.lease_row(self.selected)
    }

    /// The exclusion shown for a row of target `t`: best-effort mode, else the
    /// probe result, else what the snapshot says (unprobed).
    pub fn exclusion_of(&self, t: usize, p: &PrefixReport) -> ExclusionReport {
        if self.exclusion == Exclusion::BestEffort {
            ExclusionReport::BestEffort
        } else {
            self.probes.get(&t).copied().unwrap_or(p.exclusion)
        }
    }

    /// How long the console has seen `key`'s current ETag unchanged.
    pub fn watched_for(&self, key: &str) -> Duration {
        self.first_seen
            .get(key)
            .and_then(|(_, since)| (self.now - *since).to_std().ok())
            .unwrap_or(Duration::ZERO)
    }

    /// Requests per minute over the last minute, and errors in it.
    pub fn request_rate(&self) -> Option<(f64, u64)> {
        self.rates().map(|r| (r.requests_per_min, r.errors))
    }

    /// Request rates over the last minute (None before two readings a second apart).
    pub fn rates(&self) -> Option<Rates> {
        let (t0, c0) = *self.counters.front()?;
        let (t1, c1) = *self.counters.back()?;
        let secs = (t1 - t0).num_milliseconds() as f64 / 1000.0;
        if secs < 1.0 {
            return None;
        }
        let per_min = |a: u64, b: u64| b.saturating_sub(a) as f64 * 60.0 / secs;
        Some(Rates {
            requests_per_min: per_min(c0.requests, c1.requests),
            lists_per_min: per_min(c0.lists, c1.lists),
            errors: c1.errors.saturating_sub(c0.errors),
        })
    }

    /// What this console's reads would cost per hour on AWS S3 at the current
    /// rate, in US dollars: GETs (and HEADs) at [`App::get_price`] per 1,000,
    /// LISTs at [`LIST_PRICE_RATIO`] times that. `None` when no TARGET is on S3.
    pub fn cost_per_hour(&self) -> Option<f64> {
        if !self.targets.iter().any(|t| t.starts_with("s3://")) {
            return None;
        }
        let r = self.rates()?;
        let gets = (r.requests_per_min - r.lists_per_min).max(0.0);
        let per_min = (gets + r.lists_per_min * LIST_PRICE_RATIO) * self.get_price / 1000.0;
        Some(per_min * 60.0)
    }

    /// The last `n` audit entries about the lease of row `p` of target `t`
    /// (the same store and key, however the takeover's TARGET was spelled),
    /// newest first.
    pub fn audit_for(&self, t: usize, p: &PrefixReport, n: usize) -> Vec<&AuditEntry> {
        let Some(target) = self.snapshot.as_ref().and_then(|s| s.targets.get(t)) else {
            return Vec::new();
        };
        self.audit
            .iter()
            .rev()
            .filter(|e| {
                e.target
                    .is_lease(&target.url, target.bucket.as_deref(), &p.key)
            })
            .take(n)
            .collect()
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

    /// Height of the detail pane when open.
    pub fn detail_height(&self) -> u16 {
        if self.detail && self.view == View::Leases {
            (self.size.1 / 2).clamp(6, 16)
        } else {
            0
        }
    }

    /// Lease table rows that fit on screen.
    pub fn lease_visible_rows(&self) -> usize {
        let screen = layout::screen(self.area(), self.error_height());
        layout::table_rows(layout::leases(screen.body, self.detail_height()).0)
    }

    /// The whole screen as the console last measured it.
    fn area(&self) -> ratatui::layout::Rect {
        ratatui::layout::Rect::new(0, 0, self.size.0, self.size.1)
    }

    /// Process table rows that fit on screen in the pod view.
    pub fn pod_visible_rows(&self) -> usize {
        let screen = layout::screen(self.area(), self.error_height());
        layout::table_rows(layout::pod(screen.body, self.notice_height().saturating_sub(2)).1)
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
                out.push(format!("{}: {}", t.prefix_url(&e.prefix), e.error));
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
            // An incomplete pod is never "healthy": its notes come first.
            (PodStatus::Scanning, Some(s)) if s.pod.verdicts.is_empty() && !s.pod.incomplete() => {
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
                // Red only when the pod is in question (Snapshot::pod_in_question).
                for n in &s.pod.notes {
                    out.extend(notice(&terminal_safe(n), s.pod_in_question()));
                }
                for v in &s.pod.verdicts {
                    let pids: Vec<String> = v.pids.iter().map(u32::to_string).collect();
                    let pids = if pids.is_empty() {
                        String::new()
                    } else {
                        format!(" [pid {}]", pids.join(", "))
                    };
                    let text = format!("{}{pids}: {}", v.kind.as_str(), terminal_safe(&v.message));
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
        match &self.mode {
            Mode::Filter => return self.update_filter(action),
            Mode::Takeover(_) => return self.update_dialog(action),
            Mode::Help => {
                match action {
                    Action::Quit => self.request_quit(),
                    Action::Cancel | Action::ToggleHelp => self.mode = Mode::Normal,
                    other => self.update_background(other),
                }
                return self.clamp_all();
            }
            Mode::ConfirmQuit => {
                match action {
                    Action::Yes => {
                        self.outbox.push(WriteRequest::ReleaseHeld);
                        self.mode = Mode::Quitting;
                        self.message = Some(("releasing held leases…".into(), false));
                    }
                    Action::Cancel | Action::Quit => self.mode = Mode::Normal,
                    other => self.update_background(other),
                }
                return self.clamp_all();
            }
            Mode::ConfirmProbe { target } => {
                let target = *target;
                match action {
                    Action::Yes => {
                        self.mode = Mode::Normal;
                        self.send_probe(target);
                    }
                    Action::Cancel | Action::Quit => {
                        self.mode = Mode::Normal;
                        self.message = Some(("probe cancelled: nothing was written".into(), false));
                    }
                    other => self.update_background(other),
                }
                return self.clamp_all();
            }
            Mode::Quitting => {
                self.update_background(action);
                return self.clamp_all();
            }
            Mode::Normal => {}
        }
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
            return self.clamp_all();
        }
        match action {
            Action::SwitchView => {
                self.view = match self.view {
                    View::Leases => View::Pod,
                    View::Pod => View::Leases,
                }
            }
            Action::SortNext => {
                self.sort = self.sort.next();
                self.rebuild_rows(true);
            }
            Action::StartFilter => {
                self.view = View::Leases;
                self.mode = Mode::Filter;
            }
            Action::NextProblem => {
                self.view = View::Leases;
                let n = self.row_count();
                if let Some(i) = (1..=n).map(|d| (self.selected + d) % n.max(1)).find(|&i| {
                    self.lease_row(i)
                        .is_some_and(|(_, p)| p.state.needs_attention())
                }) {
                    self.selected = i;
                } else {
                    self.message = Some(("no stale, suspect or malformed lease".into(), false));
                }
            }
            Action::ToggleDetail => {
                if self.view == View::Leases {
                    self.detail = !self.detail;
                }
            }
            Action::ToggleHelp => self.mode = Mode::Help,
            Action::Cancel => {
                if self.detail {
                    self.detail = false;
                } else if !self.filter.is_empty() {
                    self.filter.clear();
                    self.rebuild_rows(true);
                }
            }
            Action::Probe => self.start_probe(),
            Action::StartTakeover => self.start_takeover(),
            Action::Quit => self.request_quit(),
            other => self.update_background(other),
        }
        self.clamp_all();
    }

    /// Actions that arrive whatever the mode: time, data, results, size.
    fn update_background(&mut self, action: Action) {
        match action {
            Action::Tick(now) => self.tick(now),
            Action::Snapshot(s) => {
                self.loading = None;
                self.apply_snapshot(*s);
            }
            Action::Rows(d) => {
                self.loading = None;
                self.apply_rows(&d);
            }
            Action::Unchanged(at) => {
                self.loading = None;
                self.last_refresh = Some(at);
                // `at` was read by the refresher after the last tick: the
                // console's clock moves on to it (as with a new snapshot), so
                // the refresh is never later than "now".
                if at > self.now {
                    self.now = at;
                    if let Some(s) = &mut self.snapshot {
                        s.rejudge(at);
                        self.judging = judging::Judging::of(s, at);
                    }
                }
            }
            Action::Progress {
                snapshot,
                read,
                known,
                listed,
            } => {
                // The partial rows replace the table; the pod stays as it was.
                let mut s = *snapshot;
                if let Some(old) = &self.snapshot {
                    s.pod = old.pod.clone();
                    s.pod_error = old.pod_error.clone();
                }
                let pod_status = self.pod_status.clone();
                self.apply_snapshot(s);
                self.pod_status = pod_status;
                self.loading = Some((read, known, listed));
            }
            Action::Counters(c) => {
                self.counters.push_back((self.now, c));
                while self
                    .counters
                    .front()
                    .is_some_and(|(t, _)| self.now - *t > chrono::Duration::seconds(60))
                {
                    self.counters.pop_front();
                }
            }
            Action::Audit(entries) => self.audit = entries,
            Action::OldestReading(at) => self.oldest_reading = at,
            Action::Pod(pod) => {
                // A new pod scan while the leases stood: only the pod changes.
                self.take_pod_rows(&pod);
                if let Some(s) = &mut self.snapshot {
                    s.pod = *pod;
                }
            }
            Action::PodScanFailed(e) if self.pod_status != PodStatus::Off => {
                self.pod_status = PodStatus::Failed(e);
            }
            Action::ProbeDone {
                target,
                result,
                message,
            } => {
                self.probes.insert(target, result);
                let bad = result != ExclusionReport::Conditional;
                self.message = Some((terminal_safe(&message).into_owned(), bad));
            }
            Action::TakeoverDone { key, result } => {
                match result {
                    Ok((msg, held)) => {
                        if let Some(k) = held {
                            self.held.insert(k);
                        }
                        // The report escapes the names it holds already.
                        self.message = Some((terminal_safe(&msg).into_owned(), false));
                    }
                    Err(e) => {
                        self.message = Some((
                            format!("takeover of {}: {}", sanitize(&key), terminal_safe(&e)),
                            true,
                        ))
                    }
                }
                if matches!(&self.mode, Mode::Takeover(d) if d.pending) {
                    self.mode = Mode::Normal;
                }
            }
            Action::HeldReleased(lines) => {
                self.held.clear();
                self.message = Some((terminal_safe(&lines.join("; ")).into_owned(), false));
                if matches!(self.mode, Mode::Quitting) {
                    self.quit = true;
                }
            }
            Action::Resize(w, h) => self.size = (w, h),
            _ => {}
        }
    }

    /// The pod's rows from a new scan, the selected process kept selected.
    fn take_pod_rows(&mut self, pod: &crate::writer::scan::PodSnapshot) {
        let keep = self.selected_process().map(|p| p.pid);
        self.pod_rows = tree_order(&pod.processes);
        if let Some(pid) = keep {
            if let Some(i) = self
                .pod_rows
                .iter()
                .position(|r| pod.processes[r.index].pid == pid)
            {
                self.pod_selected = i;
            }
        }
        if self.pod_status != PodStatus::Off {
            self.pod_status = PodStatus::Scanning;
        }
    }

    fn apply_snapshot(&mut self, mut s: Snapshot) {
        s.rejudge(self.now.max(s.generated_at));
        self.last_refresh = Some(s.generated_at);
        self.now = self.now.max(s.generated_at);
        self.take_pod_rows(&s.pod);
        // Track how long each key's ETag has been seen unchanged (in place:
        // at 10,000 rows, rebuilding the map copied every key at each snapshot).
        let mut rows = 0;
        for t in &s.targets {
            for p in &t.prefixes {
                rows += 1;
                see_etag(&mut self.first_seen, p, s.generated_at);
            }
        }
        if self.first_seen.len() > rows {
            let keys: std::collections::HashSet<&str> = s
                .targets
                .iter()
                .flat_map(|t| t.prefixes.iter().map(|p| p.key.as_str()))
                .collect();
            self.first_seen.retain(|k, _| keys.contains(k.as_str()));
        }
        self.history.observe(&s, &self.audit);
        // Keep the selected prefix selected.
        let keep_key = self.selected_lease().map(|(_, p)| p.key.clone());
        self.snapshot = Some(s);
        self.judging.partial = false;
        self.rebuild_rows(false);
        self.select_key(keep_key);
    }

    /// Selects the row of lease `key` again, if it is still shown.
    fn select_key(&mut self, key: Option<String>) {
        let Some(k) = key else { return };
        if let Some(i) =
            (0..self.lease_rows.len()).find(|&i| self.lease_row(i).is_some_and(|(_, p)| p.key == k))
        {
            self.selected = i;
        }
    }

    /// The rows a refresh changed, patched into the snapshot: the ETag-seen
    /// map and the holder history take only those rows (a refresh of 10,000
    /// rows that read a hundred costs a hundred).
    fn apply_rows(&mut self, d: &Delta) {
        let keep_key = self.selected_lease().map(|(_, p)| p.key.clone());
        let Some(s) = &mut self.snapshot else {
            return;
        };
        self.now = self.now.max(d.generated_at);
        self.last_refresh = Some(d.generated_at);
        s.apply_delta(d, self.now);
        self.judging.partial = false;
        for t in &d.targets {
            for (prefix, update) in &t.rows {
                match update {
                    RowUpdate::Report(p) => see_etag(&mut self.first_seen, p, d.generated_at),
                    RowUpdate::Error(_) => {
                        self.first_seen.remove(&crate::bucket::lease_key(prefix));
                    }
                }
            }
        }
        self.history.observe_rows(s, d, &self.audit);
        self.rebuild_rows(false);
        self.select_key(keep_key);
    }

    /// Recomputes the shown rows from the snapshot, the filter and the sort.
    fn rebuild_rows(&mut self, reset_selection: bool) {
        // Sorting by age or expiry compares every row: all are judged at
        // one instant first (a tick judges only some). Then the next ticks
        // are planned from this whole judgement.
        if let Some(s) = &mut self.snapshot {
            if self.judging.partial {
                s.rejudge(self.now.max(s.generated_at));
            }
            self.judging = judging::Judging::of(s, s.generated_at);
        }
        let Some(s) = &self.snapshot else {
            self.lease_rows.clear();
            return;
        };
        let (negate, needle) = match self.filter.strip_prefix('!') {
            Some(rest) => (true, rest.to_lowercase()),
            None => (false, self.filter.to_lowercase()),
        };
        let mut rows: Vec<LeaseRow> = Vec::new();
        for (ti, t) in s.targets.iter().enumerate() {
            for (pi, p) in t.prefixes.iter().enumerate() {
                if !needle.is_empty() {
                    let hit = p.prefix.to_lowercase().contains(&needle)
                        || p.record
                            .as_ref()
                            .is_some_and(|r| r.instance_id.to_lowercase().contains(&needle));
                    if hit == negate {
                        continue;
                    }
                }
                rows.push(LeaseRow {
                    target: ti,
                    index: pi,
                });
            }
        }
        let get = |r: &LeaseRow| &s.targets[r.target].prefixes[r.index];
        let f = |x: Option<f64>| x.unwrap_or(f64::NEG_INFINITY);
        match self.sort {
            SortKey::Prefix => {}
            SortKey::Holder => rows.sort_by(|a, b| {
                let h = |r| get(r).record.as_ref().map(|x| x.instance_id.clone());
                h(a).cmp(&h(b))
            }),
            SortKey::Age => rows.sort_by(|a, b| f(get(b).age_s).total_cmp(&f(get(a).age_s))),
            SortKey::Ttl => {
                rows.sort_by_key(|r| std::cmp::Reverse(get(r).record.as_ref().map(|x| x.ttl_s)))
            }
            SortKey::Expires => rows.sort_by(|a, b| {
                let e = |r| get(r).expires_in_s.unwrap_or(f64::INFINITY);
                e(a).total_cmp(&e(b))
            }),
            SortKey::State => rows.sort_by_key(|r| state_rank(get(r).state)),
            SortKey::Exclusion => {
                rows.sort_by_key(|r| format!("{:?}", self.exclusion_of(r.target, get(r))))
            }
            SortKey::Skew => rows.sort_by(|a, b| {
                let k = |r| get(r).holder_skew_s.map(f64::abs);
                f(k(b)).total_cmp(&f(k(a)))
            }),
        }
        self.lease_rows = rows;
        if reset_selection {
            self.selected = 0;
            self.offset = 0;
        }
    }

    fn update_filter(&mut self, action: Action) {
        match action {
            Action::Input(c) => {
                self.filter.push(c);
                self.rebuild_rows(true);
            }
            Action::Backspace => {
                self.filter.pop();
                self.rebuild_rows(true);
            }
            Action::Submit => self.mode = Mode::Normal,
            Action::Cancel => {
                self.filter.clear();
                self.mode = Mode::Normal;
                self.rebuild_rows(true);
            }
            Action::Quit => self.request_quit(),
            other => self.update_background(other),
        }
        self.clamp_all();
    }

    fn request_quit(&mut self) {
        if self.held.is_empty() {
            self.quit = true;
        } else {
            self.mode = Mode::ConfirmQuit;
        }
    }

    fn clamp_all(&mut self) {
        let (n, page) = (self.row_count(), self.lease_visible_rows().max(1));
        clamp(&mut self.selected, &mut self.offset, n, page);
        let (n, page) = (self.pod_rows.len(), self.pod_visible_rows().max(1));
        clamp(&mut self.pod_selected, &mut self.pod_offset, n, page);
    }
}

/// Records in `first_seen` that row `p`'s ETag was seen at `at`, unless it
/// was already seen (in place: at 10,000 rows, rebuilding the map copied
/// every key at each snapshot).
fn see_etag(
    first_seen: &mut HashMap<String, (Option<String>, DateTime<Utc>)>,
    p: &PrefixReport,
    at: DateTime<Utc>,
) {
    match first_seen.get_mut(&p.key) {
        Some((e, _)) if *e == p.etag => {}
        Some(seen) => *seen = (p.etag.clone(), at),
        None => {
            first_seen.insert(p.key.clone(), (p.etag.clone(), at));
        }
    }
}

fn state_rank(s: LeaseState) -> u8 {
    match s {
        LeaseState::Malformed => 0,
        LeaseState::Suspect => 1,
        LeaseState::Stale => 2,
        LeaseState::Fresh => 3,
        LeaseState::Absent | LeaseState::Released => 4,
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
