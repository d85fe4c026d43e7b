//! Console state and the one place it changes: [`App::update`].

use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::snapshot::{PrefixReport, Snapshot};

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
    /// Selected row index.
    pub selected: usize,
    /// First row shown.
    pub offset: usize,
    /// Terminal size (columns, rows).
    pub size: (u16, u16),
    /// Set when the operator asked to leave.
    pub quit: bool,
}

impl App {
    /// A console on `targets`, with no snapshot yet.
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
            selected: 0,
            offset: 0,
            size: (80, 24),
            quit: false,
        }
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

    /// Table rows that fit on screen (the layout in `ui` uses the same numbers).
    pub fn visible_rows(&self) -> usize {
        let errors = self.error_lines().len() as u16;
        usize::from(
            self.size
                .1
                .saturating_sub(ui_chrome_height() + errors.min(3))
                .max(1),
        )
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

    /// Applies one action. The only place state changes.
    pub fn update(&mut self, action: Action) {
        let n = self.row_count();
        let page = self.visible_rows().max(1);
        match action {
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
                self.snapshot = Some(s);
            }
            Action::Up => self.selected = self.selected.saturating_sub(1),
            Action::Down => self.selected = (self.selected + 1).min(n.saturating_sub(1)),
            Action::PageUp => self.selected = self.selected.saturating_sub(page),
            Action::PageDown => self.selected = (self.selected + page).min(n.saturating_sub(1)),
            Action::Home => self.selected = 0,
            Action::End => self.selected = n.saturating_sub(1),
            Action::Resize(w, h) => self.size = (w, h),
            Action::Quit => self.quit = true,
        }
        let n = self.row_count();
        self.selected = self.selected.min(n.saturating_sub(1));
        let page = self.visible_rows().max(1);
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + page {
            self.offset = self.selected + 1 - page;
        }
        self.offset = self.offset.min(n.saturating_sub(page));
    }
}

/// Lines the console uses around the table: header (2), table header (1),
/// status bar (1), borders (2).
pub const fn ui_chrome_height() -> u16 {
    6
}
