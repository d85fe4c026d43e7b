//! The leases table: its rows after the filter and the sort, its cursor, the
//! sort column and its order, the filter, the detail pane; its keys (the
//! filter line, `s`, `S`, `n`, Enter, Esc) and what the rest of the console asks of it.

use std::collections::HashSet;

use super::cursor::Cursor;
use super::sort::SortKey;
use super::{Action, App, LeaseRow, Mode, View};
use crate::snapshot::{ExclusionReport, PrefixReport, Snapshot};

/// The leases table's state.
#[derive(Debug)]
pub struct LeaseTable {
    /// The rows shown, after filter and sort.
    rows: Vec<LeaseRow>,
    /// Selection and first row shown (indices into `rows`).
    cursor: Cursor,
    /// Sort column.
    sort: SortKey,
    /// The sort's order reversed (`S`).
    reversed: bool,
    /// The filter (substring of prefix or holder; a leading `!` negates).
    filter: String,
    /// The detail pane is open.
    detail: bool,
    /// The first line of the detail pane's text shown (PgUp/PgDn scroll it).
    detail_scroll: u16,
    /// The detail pane's text and what it shows, as last measured
    /// ([`Action::DetailExtent`]; `None` before the first frame).
    detail_extent: Option<(u16, u16)>,
}

impl Default for LeaseTable {
    fn default() -> Self {
        Self {
            rows: Vec::new(),
            cursor: Cursor::default(),
            sort: SortKey::Prefix,
            reversed: false,
            filter: String::new(),
            detail: false,
            detail_scroll: 0,
            detail_extent: None,
        }
    }
}

impl LeaseTable {
    /// The rows shown (after filter and sort).
    pub fn rows(&self) -> &[LeaseRow] {
        &self.rows
    }

    /// The selection and the first row shown.
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// The sort column.
    pub fn sort(&self) -> SortKey {
        self.sort
    }

    /// Whether the sort's order is reversed (`S`).
    pub fn reversed(&self) -> bool {
        self.reversed
    }

    /// The filter as typed (a leading `!` negates).
    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// Whether the detail pane is open.
    pub fn detail(&self) -> bool {
        self.detail
    }

    /// The first line of the detail pane's text shown.
    pub fn detail_scroll(&self) -> u16 {
        self.detail_scroll
    }

    /// Scrolls the detail pane a page (`PgUp`/`PgDn` while it is open): one
    /// line short of what it shows, so the last line seen stays in view;
    /// never past its last page once measured.
    pub(super) fn scroll_detail(&mut self, down: bool) {
        let (lines, shown) = self.detail_extent.unwrap_or((u16::MAX, 2));
        let page = shown.saturating_sub(1).max(1);
        let last = lines.saturating_sub(shown);
        self.detail_scroll = if down {
            self.detail_scroll.saturating_add(page).min(last)
        } else {
            self.detail_scroll.saturating_sub(page)
        };
    }

    /// Back to the top of the detail pane's text (another row is selected).
    pub(super) fn reset_detail_scroll(&mut self) {
        self.detail_scroll = 0;
    }

    /// The detail pane as measured after a frame: its scroll kept inside it.
    pub(super) fn set_detail_extent(&mut self, lines: u16, shown: u16) {
        self.detail_extent = Some((lines, shown));
        self.detail_scroll = self.detail_scroll.min(lines.saturating_sub(shown));
    }

    /// Row `i` as shown, with its report in `s`.
    fn row<'s>(&self, s: Option<&'s Snapshot>, i: usize) -> Option<(LeaseRow, &'s PrefixReport)> {
        let r = *self.rows.get(i)?;
        let p = s?.targets.get(r.target)?.prefixes.get(r.index)?;
        Some((r, p))
    }

    /// Recomputes the rows shown from `s`, the filter and the sort
    /// (`exclusion`: the exclusion shown for a row of a target); with
    /// `reset`, the cursor goes back to the first row.
    fn rebuild(
        &mut self,
        s: Option<&Snapshot>,
        exclusion: impl Fn(usize, &PrefixReport) -> ExclusionReport,
        reset: bool,
    ) {
        let Some(s) = s else {
            self.rows.clear();
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
        self.sort.sort(&mut rows, s, exclusion);
        if self.reversed {
            rows.reverse();
        }
        self.rows = rows;
        if reset {
            self.cursor.reset();
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
    /// The row (as shown) at `i`, with its report.
    pub fn lease_row(&self, i: usize) -> Option<(LeaseRow, &PrefixReport)> {
        self.leases.row(self.session.snapshot(), i)
    }

    /// All rows as shown (after filter and sort).
    pub fn rows(&self) -> impl Iterator<Item = &PrefixReport> {
        (0..self.leases.rows.len()).filter_map(|i| self.lease_row(i).map(|(_, p)| p))
    }

    /// Number of rows shown.
    pub fn row_count(&self) -> usize {
        self.leases.rows.len()
    }

    /// Number of prefixes in the snapshot (before the filter).
    pub fn total_rows(&self) -> usize {
        self.session
            .snapshot()
            .map(|s| s.targets.iter().map(|t| t.prefixes.len()).sum())
            .unwrap_or(0)
    }

    /// The selected lease row.
    pub fn selected_lease(&self) -> Option<(LeaseRow, &PrefixReport)> {
        self.lease_row(self.leases.cursor.selected())
    }

    /// The lease rows on screen now, as (index of the TARGET, prefix): none
    /// while the pod view is shown. The console reads these at every refresh.
    pub fn rows_in_view(&self) -> HashSet<(usize, String)> {
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
    pub(super) fn rows_on_screen(&self) -> impl Iterator<Item = usize> {
        let page = self.lease_visible_rows().max(1);
        self.leases.cursor.on_screen(page)
    }

    /// The key of the selected lease, to select it again after the rows change.
    pub(super) fn selected_key(&self) -> Option<String> {
        self.selected_lease().map(|(_, p)| p.key.clone())
    }

    /// Selects the row of lease `key` again, if it is still shown.
    pub(super) fn select_key(&mut self, key: Option<String>) {
        let Some(k) = key else { return };
        if let Some(i) = (0..self.leases.rows.len())
            .find(|&i| self.lease_row(i).is_some_and(|(_, p)| p.key == k))
        {
            self.leases.cursor.select(i);
        }
    }

    /// Recomputes the shown rows from the snapshot, the filter and the sort.
    /// Sorting by age or expiry compares every row: all are judged at one
    /// instant first (a tick judges only some), and the next ticks are
    /// planned from this whole judgement.
    pub(super) fn rebuild_rows(&mut self, reset_selection: bool) {
        self.session.judge_whole();
        let (mode, session) = (self.settings.exclusion, &self.session);
        self.leases.rebuild(
            session.snapshot(),
            |t, p| session.exclusion_of(mode, t, p),
            reset_selection,
        );
    }

    /// Keys while the filter line is open (`/`).
    pub(super) fn update_filter(&mut self, action: Action) {
        match action {
            Action::Input(c) => {
                self.leases.filter.push(c);
                self.rebuild_rows(true);
            }
            Action::Backspace => {
                self.leases.filter.pop();
                self.rebuild_rows(true);
            }
            Action::Submit => self.mode = Mode::Normal,
            Action::Cancel => {
                self.leases.filter.clear();
                self.mode = Mode::Normal;
                self.rebuild_rows(true);
            }
            Action::Quit => self.request_quit(),
            other => self.update_background(other),
        }
    }

    /// The leases table's keys in normal mode: `s`, `S`, `n`, Enter, Esc (which
    /// closes the detail pane, then clears the filter).
    pub(super) fn update_table(&mut self, action: Action) {
        match action {
            Action::SortNext => {
                self.leases.sort = self.leases.sort.next();
                self.leases.reversed = false;
                self.rebuild_rows(true);
            }
            Action::SortReverse => {
                self.leases.reversed = !self.leases.reversed;
                self.rebuild_rows(true);
            }
            Action::NextProblem => {
                self.view = View::Leases;
                let n = self.row_count();
                let from = self.leases.cursor.selected();
                if let Some(i) = (1..=n).map(|d| (from + d) % n.max(1)).find(|&i| {
                    self.lease_row(i)
                        .is_some_and(|(_, p)| p.state.needs_attention())
                }) {
                    self.leases.cursor.select(i);
                } else {
                    self.say("no stale, suspect or malformed lease".into(), false);
                }
            }
            Action::ToggleDetail => {
                if self.view == View::Leases {
                    self.leases.detail = !self.leases.detail;
                    self.leases.detail_scroll = 0;
                }
            }
            Action::Cancel => {
                if self.leases.detail {
                    self.leases.detail = false;
                    self.leases.detail_scroll = 0;
                } else if !self.leases.filter.is_empty() {
                    self.leases.filter.clear();
                    self.rebuild_rows(true);
                }
            }
            other => self.update_background(other),
        }
    }
}
