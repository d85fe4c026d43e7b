//! What flows between the console's parts: [`Action`]s into the state
//! (keys, refreshes, the write task's results) and [`WriteRequest`]s out of
//! it to the write task (`ops`). Both sides import this module and not each
//! other.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::audit::AuditEntry;
use crate::bucket::LeaseConfig;
use crate::bucket::Observed;
use crate::snapshot::Delta;
use crate::snapshot::{ExclusionReport, Snapshot};
use crate::store::RequestCounts;
use crate::takeover::Then;
use crate::timeline::render::PrefixTimeline;
use crate::writer::scan::PodSnapshot;

/// Everything that can happen to the console.
#[derive(Debug, Clone)]
pub enum Action {
    /// The clock moved (once a second): ages tick.
    Tick(DateTime<Utc>),
    /// A new snapshot from the background gatherer.
    Snapshot(Box<Snapshot>),
    /// A refresh found that only these rows changed: the current snapshot
    /// takes them ([`crate::snapshot::Snapshot::apply_delta`]).
    Rows(Box<Delta>),
    /// A refresh ended at this time (reader's clock) and nothing had changed:
    /// the current snapshot stands.
    Unchanged(DateTime<Utc>),
    /// Request totals of the stores so far.
    Counters(RequestCounts),
    /// When the oldest reading of any row was taken (reader's clock; `None`:
    /// nothing read yet).
    OldestReading(Option<DateTime<Utc>>),
    /// A pod scan that found something new while no bucket lease changed.
    Pod(Box<PodSnapshot>),
    /// Rows read so far by a gather still running (progressive discovery).
    Progress {
        /// The rows read so far (the pod section is not part of it).
        snapshot: Box<Snapshot>,
        /// LEASEs read so far.
        read: usize,
        /// Prefixes known so far.
        known: usize,
        /// True once every listing is complete.
        listed: bool,
    },
    /// Recent audit entries (newest last).
    Audit(Vec<AuditEntry>),
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
    /// Sort by the next column.
    SortNext,
    /// Reverse the sort's order.
    SortReverse,
    /// Start typing a filter.
    StartFilter,
    /// Jump to the next stale / suspect / malformed row.
    NextProblem,
    /// Show or hide the detail pane.
    ToggleDetail,
    /// Show or hide help.
    ToggleHelp,
    /// Probe the selected row's target (OPS).
    Probe,
    /// Open the takeover dialog on the selected row (OPS).
    StartTakeover,
    /// A character typed into the focused text field (filter or dialog).
    Input(char),
    /// Delete the last character of the focused text field.
    Backspace,
    /// Next field (dialog).
    NextField,
    /// Previous field (dialog).
    PrevField,
    /// Change the choice (dialog: release / hold / hand over).
    Left,
    /// Change the choice the other way.
    Right,
    /// Enter: apply the focused button, keep the filter.
    Submit,
    /// Esc: close the dialog / help / filter.
    Cancel,
    /// Answer yes to the quit prompt.
    Yes,
    /// The pod scan of the latest refresh failed (sent right after its snapshot).
    PodScanFailed(String),
    /// A probe finished.
    ProbeDone {
        /// Target index.
        target: usize,
        /// Its exclusion.
        result: ExclusionReport,
        /// What to tell the operator.
        message: String,
    },
    /// A takeover still running says what it is waiting for (one sentence:
    /// the replaced holder's fence, until when), shown in its dialog.
    TakeoverWaiting {
        /// The lease key.
        key: String,
        /// What it waits for.
        text: String,
    },
    /// A takeover finished.
    TakeoverDone {
        /// The lease key.
        key: String,
        /// The message, and the key now held by the console if any; or the error.
        result: Result<(String, Option<String>), String>,
    },
    /// The held leases were released (one line each).
    HeldReleased(Vec<String>),
    /// Open the timeline pane of the selected row.
    OpenTimeline,
    /// Timeline pane: half the window.
    ZoomIn,
    /// Timeline pane: twice the window.
    ZoomOut,
    /// The write task read the timeline of `prefix` in target `target`
    /// from the LEASE object's versions and the audit log.
    TimelineRead {
        /// Target index.
        target: usize,
        /// The prefix.
        prefix: String,
        /// What it read (what it could not read is in its `problems`).
        timeline: Box<PrefixTimeline>,
    },
    /// The terminal is now this size (columns, rows).
    Resize(u16, u16),
    /// Leave the console (asks first if leases are held).
    Quit,
    /// A key with no other use: it only clears the last result.
    Dismiss,
    /// Open the log of this session's results (`m`), each in full.
    OpenMessages,
    /// How many lines the detail pane's text takes, wrapped, and how many it
    /// shows (the event loop measures it after drawing): how far it scrolls.
    DetailExtent {
        /// Lines of text, wrapped to the pane's width.
        lines: u16,
        /// Lines the pane shows.
        shown: u16,
    },
}

impl Action {
    /// Whether the action is a key the operator pressed (which clears the
    /// last result from the status bar), not time, data or a result.
    pub(crate) fn is_key(&self) -> bool {
        matches!(
            self,
            Action::Up
                | Action::Down
                | Action::PageUp
                | Action::PageDown
                | Action::Home
                | Action::End
                | Action::SwitchView
                | Action::SortNext
                | Action::SortReverse
                | Action::StartFilter
                | Action::NextProblem
                | Action::ToggleDetail
                | Action::ToggleHelp
                | Action::Probe
                | Action::StartTakeover
                | Action::Input(_)
                | Action::Backspace
                | Action::NextField
                | Action::PrevField
                | Action::Left
                | Action::Right
                | Action::Submit
                | Action::Cancel
                | Action::Yes
                | Action::Quit
                | Action::Dismiss
                | Action::OpenMessages
        )
    }
}

/// A write the operator asked for (and confirmed).
// One per confirmed operator action: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum WriteRequest {
    /// Probe the preconditions of target `target` (index into the targets).
    Probe {
        /// Target index.
        target: usize,
    },
    /// The guarded, audited takeover of `prefix` in target `target`.
    Takeover {
        /// Target index.
        target: usize,
        /// The prefix.
        prefix: String,
        /// What the operator saw (its ETag is the precondition).
        seen: Observed,
        /// How long the console has seen that ETag unchanged.
        watched_for: Duration,
        /// The operator's reason.
        reason: String,
        /// What to do after.
        then: Then,
        /// Overriding a fresh lease (the operator typed the prefix).
        force: bool,
        /// The lease written: the console's TTL, exclusion mode and record
        /// format (`Settings::lease`).
        lease: LeaseConfig,
    },
    /// Release every held lease (before quitting).
    ReleaseHeld,
    /// Read the timeline of `prefix` in target `target` from its LEASE
    /// object's versions and the audit log (a read, by the write task, which
    /// owns the stores: never the UI loop), answered with
    /// [`Action::TimelineRead`].
    ReadTimeline {
        /// Target index.
        target: usize,
        /// The prefix.
        prefix: String,
    },
}
