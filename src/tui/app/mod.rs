//! Console state and the one place it changes: [`App::update`].
//!
//! [`App`] is made of parts that own their state and their keys: the
//! [`Settings`] its front end chose, the lease table ([`LeaseTable`]: rows,
//! cursor, sort, filter, detail pane), the pod pane ([`PodPane`]: process rows,
//! cursor, scan status), the session's data ([`Session`]: snapshot, clock,
//! history, audit tail, probes, held leases), the request rates
//! ([`Requests`]), and the modal state ([`Mode`]: the filter line, help, the
//! prompts, the takeover dialog, the timeline pane). `update` dispatches each action by mode
//! to the part it concerns; drawing (`ui`) only reads, through accessors.
//!
//! Keys become [`Action`]s through [`key_action`] (which depends on the mode:
//! a dialog or the filter line takes text); writes the operator confirmed
//! become [`WriteRequest`] values in the outbox, which the event loop takes
//! with [`App::take_writes`] and hands to the write task. In watch mode no key
//! produces a write action, and there is no write task to receive one.

use std::borrow::Cow;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use super::action::Action;
use super::action::WriteRequest;
use crate::audit::AuditEntry;
use crate::snapshot::{ExclusionReport, PrefixReport, Snapshot};
use crate::target::Target;
use crate::text::sanitize;

mod background;
mod cursor;
mod judging;
mod keys;
mod leases;
mod measure;
mod messages;
mod notice;
mod pod_pane;
mod prompts;
mod requests;
mod session;
mod settings;
mod sort;
mod takeover_dialog;
mod timeline_pane;

pub use crate::text::wrap;
pub use keys::{key_action, BINDINGS};
pub(crate) use leases::LeaseTable;
use messages::Message;
pub(crate) use pod_pane::PodPane;
pub(crate) use requests::{Rates, Requests, DEFAULT_GET_PRICE};
pub use session::Session;
pub(crate) use settings::Settings;
pub use sort::SortKey;
pub use takeover_dialog::Field;
pub(crate) use takeover_dialog::{TakeoverDialog, ThenChoice};
pub use timeline_pane::Rebuilt;
pub(crate) use timeline_pane::TimelinePane;

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

/// A row of the leases table: target index and prefix index in the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRow {
    /// Index into `snapshot.targets`.
    pub target: usize,
    /// Index into that target's `prefixes`.
    pub index: usize,
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
    /// The log of this session's results (`m`), newest first, each in full.
    Messages {
        /// The newest-first index of the first result shown.
        first: usize,
    },
    /// The takeover dialog (`t`).
    Takeover(Box<TakeoverDialog>),
    /// Probe target `target` (an index into the targets)? `p` asks first: the
    /// probe writes (and removes) a scratch key.
    ConfirmProbe {
        /// The target to probe.
        target: usize,
    },
    /// The timeline pane of a prefix (`h`).
    Timeline(Box<TimelinePane>),
    /// Leases are held: release them and quit?
    ConfirmQuit,
    /// Releasing held leases before quitting.
    Quitting,
}

/// The console's state.
pub struct App {
    /// What the front end chose (targets, watch mode, refresh…); set before
    /// the console runs, never changed by [`App::update`].
    pub settings: Settings,
    /// The leases table.
    leases: LeaseTable,
    /// The pod pane.
    pod: PodPane,
    /// What has been read and judged.
    session: Session,
    /// Request totals over the last minute.
    requests: Requests,
    /// The screen shown.
    view: View,
    /// Modal state.
    mode: Mode,
    /// The message for the operator in the status bar, if one is shown.
    message: Option<Message>,
    /// Every result shown this session, oldest first (at most
    /// [`MESSAGES_KEPT`]): `m` shows them in full.
    messages: std::collections::VecDeque<Message>,
    /// Writes confirmed by the operator, for the event loop to send.
    outbox: Vec<WriteRequest>,
    /// Terminal size (columns, rows).
    size: (u16, u16),
    /// Set when the console should exit.
    quit: bool,
}

impl App {
    /// A console on `targets` with the default settings, no snapshot yet,
    /// scanning the pod.
    pub fn new(
        targets: Vec<Target>,
        read_only: bool,
        refresh: Duration,
        now: DateTime<Utc>,
    ) -> Self {
        Self::with_settings(Settings::new(targets, read_only, refresh), now)
    }

    /// A console with `settings`, no snapshot yet, scanning the pod (the
    /// console's builder, `tui::Parts`, makes it so).
    pub(crate) fn with_settings(settings: Settings, now: DateTime<Utc>) -> Self {
        Self {
            settings,
            leases: LeaseTable::default(),
            pod: PodPane::default(),
            session: Session::new(now),
            requests: Requests::default(),
            view: View::Leases,
            mode: Mode::Normal,
            message: None,
            messages: std::collections::VecDeque::new(),
            outbox: Vec::new(),
            size: (80, 24),
            quit: false,
        }
    }

    /// The same console without a pod scan (`--no-pod`): the pod view says so.
    pub fn without_pod(mut self) -> Self {
        self.pod.off();
        self
    }

    /// The leases table.
    pub fn leases(&self) -> &LeaseTable {
        &self.leases
    }

    /// The pod pane.
    pub fn pod(&self) -> &PodPane {
        &self.pod
    }

    /// What has been read and judged this session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.session.snapshot()
    }

    /// The reader's clock at the last tick.
    pub fn now(&self) -> DateTime<Utc> {
        self.session.now()
    }

    /// The screen shown.
    pub fn view(&self) -> View {
        self.view
    }

    /// The modal state.
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The message for the operator (and whether it is an error), already
    /// safe for the terminal. A result is shown until the next key or for
    /// [`MESSAGE_SHOWN`]; work under way until its result.
    pub fn message(&self) -> Option<(&str, bool)> {
        self.message.as_ref().map(|m| (m.text.as_str(), m.error))
    }

    /// Writes confirmed by the operator and not taken yet.
    pub fn outbox(&self) -> &[WriteRequest] {
        &self.outbox
    }

    /// Takes the writes confirmed by the operator, for the write task.
    pub fn take_writes(&mut self) -> Vec<WriteRequest> {
        std::mem::take(&mut self.outbox)
    }

    /// Whether the console should exit.
    pub fn should_quit(&self) -> bool {
        self.quit
    }

    /// Whether the age of any row is unknown because this host's clock is
    /// too far from a storage service's (the header's CLOCK OFF).
    pub(crate) fn ages_unknown(&self) -> bool {
        self.session.ages_unknown()
    }

    /// The exclusion shown for a row of target `t`: best-effort mode, else the
    /// probe result, else what the snapshot says (unprobed).
    pub(crate) fn exclusion_of(&self, t: usize, p: &PrefixReport) -> ExclusionReport {
        self.session.exclusion_of(self.settings.exclusion, t, p)
    }

    /// How long the console has seen row `p`'s current ETag unchanged.
    pub fn watched_for(&self, p: &PrefixReport) -> Duration {
        self.session.watched_for(p)
    }

    /// The last `n` audit entries about the lease of row `p` of target `t`,
    /// newest first ([`Session::audit_for`]).
    pub fn audit_for(&self, t: usize, p: &PrefixReport, n: usize) -> Vec<&AuditEntry> {
        self.session.audit_for(t, p, n)
    }

    /// Request rates over the last minute (None before two readings a second apart).
    pub(crate) fn rates(&self) -> Option<Rates> {
        self.requests.rates()
    }

    /// What this console's reads would cost per hour on AWS S3 at the current
    /// rate, in US dollars: GETs (and HEADs) at the settings' `get_price` per
    /// 1,000, LISTs at [`LIST_PRICE_RATIO`] times that. `None` when no TARGET
    /// is on S3.
    pub fn cost_per_hour(&self) -> Option<f64> {
        self.requests
            .cost_per_hour(&self.settings.targets, self.settings.get_price)
    }

    /// Applies one action. The only place state changes.
    pub fn update(&mut self, action: Action) {
        // A key clears the last result (the key hints come back).
        if action.is_key() {
            self.clear_result(None);
        }
        match &self.mode {
            Mode::Filter => self.update_filter(action),
            Mode::Takeover(_) => self.update_dialog(action),
            Mode::Timeline(_) => self.update_timeline(action),
            Mode::Help | Mode::ConfirmQuit | Mode::ConfirmProbe { .. } | Mode::Quitting => {
                self.update_prompt(action)
            }
            Mode::Messages { .. } => self.update_messages(action),
            Mode::Normal => self.update_normal(action),
        }
        self.clamp_all();
    }

    /// Keys while browsing: movement goes to the view's cursor, the table's
    /// keys to the table, the rest opens a prompt or a dialog.
    fn update_normal(&mut self, action: Action) {
        // PgUp/PgDn scroll the detail pane while it is open (the rows keep
        // ↑/↓, Home and End).
        if self.view == View::Leases
            && self.leases.detail()
            && matches!(action, Action::PageUp | Action::PageDown)
        {
            self.leases
                .scroll_detail(matches!(action, Action::PageDown));
            return;
        }
        let before = self.leases.cursor().selected();
        let moved = match self.view {
            View::Leases => self.leases.step(&action, self.lease_visible_rows()),
            View::Pod => self.pod.step(&action, self.pod_visible_rows()),
        };
        if moved {
            // Another row's details start at their top.
            if self.leases.cursor().selected() != before {
                self.leases.reset_detail_scroll();
            }
            return;
        }
        match action {
            Action::SwitchView => {
                self.view = match self.view {
                    View::Leases => View::Pod,
                    View::Pod => View::Leases,
                }
            }
            Action::StartFilter => {
                self.view = View::Leases;
                self.mode = Mode::Filter;
            }
            Action::SortNext
            | Action::SortReverse
            | Action::NextProblem
            | Action::ToggleDetail
            | Action::Cancel => self.update_table(action),
            Action::ToggleHelp => self.mode = Mode::Help,
            Action::OpenMessages => self.mode = Mode::Messages { first: 0 },
            Action::Probe => self.start_probe(),
            Action::StartTakeover => self.start_takeover(),
            Action::OpenTimeline => self.open_timeline(),
            Action::Quit => self.request_quit(),
            other => self.update_background(other),
        }
    }
}

/// Text from a snapshot made safe for the terminal. Pod text arrives already
/// escaped by the scanner (control characters as `\x1b`, backslashes doubled);
/// escaping it again would double every backslash (`grep '\d'` would read
/// `grep '\\\\d'`). So [`sanitize`] is applied only when the text still holds
/// something it would escape besides a backslash: raw control or bidi
/// characters never reach the terminal, and escaped text is shown as the JSON
/// shows it.
pub(crate) fn terminal_safe(s: &str) -> Cow<'_, str> {
    let probe: String = s.chars().filter(|&c| c != '\\').collect();
    if sanitize(&probe) == probe {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(sanitize(s))
    }
}
