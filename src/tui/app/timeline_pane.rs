//! The timeline pane (`h`): who held the selected prefix when, as lanes
//! across a time axis — this session's own holder history and, in OPS mode,
//! the timeline rebuilt from the LEASE object's versions and the audit log,
//! read in the background by the write task (never by the UI loop: it asks
//! with a [`WriteRequest::ReadTimeline`] and the result arrives as an
//! [`Action::TimelineRead`]). Zoom with `+`/`-`, pan with `←`/`→`, Esc
//! closes. Called from [`App::update`] only.

use chrono::{DateTime, Utc};

use super::{Action, App, Mode, View};
use crate::timeline::from_session::of_history;
use crate::timeline::render::PrefixTimeline;
use crate::timeline::Derived;
use crate::tui::action::WriteRequest;

/// The deepest zoom: the window is the whole extent / 2^`MAX_ZOOM`.
pub(crate) const MAX_ZOOM: u8 = 12;

/// The shortest window drawn, seconds (a history of one instant still has an axis).
pub(crate) const MIN_SPAN_S: i64 = 60;

/// The timeline rebuilt from the versions, as far as it got.
#[derive(Debug, Clone)]
pub enum Rebuilt {
    /// Not read, and why (watch mode has no task to read it).
    NotRead(&'static str),
    /// Asked of the write task; not back yet.
    Reading,
    /// Read.
    Read(Box<PrefixTimeline>),
}

/// The pane's state: which prefix, the zoom and pan, the rebuilt timeline.
#[derive(Debug, Clone)]
pub struct TimelinePane {
    /// The row's target (index into the targets).
    pub target: usize,
    /// Its TARGET URL, as in the snapshot (for the session's history).
    pub(crate) target_url: String,
    /// The prefix, as in the snapshot.
    pub prefix: String,
    /// The window is the whole extent / 2^`zoom` (0: everything).
    pub zoom: u8,
    /// Quarter-windows back from the extent's end (0: ends now), at most
    /// 4·(2^`zoom` − 1) (then it starts at the extent's start).
    pub pan: u32,
    /// The rebuilt timeline.
    pub rebuilt: Rebuilt,
}

impl TimelinePane {
    /// The most `pan` can be at `zoom`: the window at the extent's start.
    pub(crate) fn max_pan(zoom: u8) -> u32 {
        4 * ((1u32 << zoom) - 1)
    }

    /// The window shown of the extent `[from, to]` (UTC): its `1/2^zoom`,
    /// `pan` quarter-windows back from `to`; at least [`MIN_SPAN_S`] long.
    pub fn window(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        let from = from.min(to - chrono::Duration::seconds(MIN_SPAN_S));
        let whole = (to - from).num_milliseconds().max(1) as f64;
        let span = whole / f64::from(1u32 << self.zoom);
        let back = span / 4.0 * f64::from(self.pan.min(Self::max_pan(self.zoom)));
        let end = to - chrono::Duration::milliseconds(back as i64);
        let start = end - chrono::Duration::milliseconds(span as i64);
        (start.max(from), end)
    }

    /// `+`: half the window, about its middle.
    fn zoom_in(&mut self) {
        if self.zoom < MAX_ZOOM {
            self.zoom += 1;
            self.pan = (self.pan * 2 + 2).min(Self::max_pan(self.zoom));
        }
    }

    /// `-`: twice the window, about its middle (as far as the extent goes).
    fn zoom_out(&mut self) {
        if self.zoom > 0 {
            self.zoom -= 1;
            self.pan = (self.pan.saturating_sub(2) / 2).min(Self::max_pan(self.zoom));
        }
    }
}

impl App {
    /// The timeline pane, when it is open.
    pub fn timeline_pane(&self) -> Option<&TimelinePane> {
        match &self.mode {
            Mode::Timeline(p) => Some(p),
            _ => None,
        }
    }

    /// What the pane shows of this session: the history of its prefix as
    /// tenures, gaps and overlaps ([`crate::timeline::from_session::of_history`]),
    /// up to the reader's clock now.
    pub(crate) fn session_timeline(&self, pane: &TimelinePane) -> Derived {
        let changes = self
            .session
            .history()
            .get(&pane.target_url, &pane.prefix)
            .map(|h| h.changes.iter().collect::<Vec<_>>())
            .unwrap_or_default();
        of_history(changes, self.session.audit(), self.now())
    }

    /// `h`: opens the pane on the selected row and (OPS mode) asks the write
    /// task for the timeline rebuilt from the versions.
    pub(super) fn open_timeline(&mut self) {
        if self.view != View::Leases {
            return;
        }
        let Some((row, p)) = self.selected_lease() else {
            return;
        };
        let prefix = p.prefix.clone();
        let Some(url) = self
            .snapshot()
            .and_then(|s| s.targets.get(row.target))
            .map(|t| t.url.clone())
        else {
            return;
        };
        let rebuilt = if self.settings.read_only {
            Rebuilt::NotRead("watch mode reads no versions: this session's history only")
        } else {
            self.outbox.push(WriteRequest::ReadTimeline {
                target: row.target,
                prefix: prefix.clone(),
            });
            Rebuilt::Reading
        };
        self.mode = Mode::Timeline(Box::new(TimelinePane {
            target: row.target,
            target_url: url,
            prefix,
            zoom: 0,
            pan: 0,
            rebuilt,
        }));
    }

    /// Keys while the pane is open: zoom, pan, close; the rest as in the background.
    pub(super) fn update_timeline(&mut self, action: Action) {
        let Mode::Timeline(pane) = &mut self.mode else {
            return;
        };
        match action {
            Action::ZoomIn => pane.zoom_in(),
            Action::ZoomOut => pane.zoom_out(),
            Action::Left => pane.pan = (pane.pan + 1).min(TimelinePane::max_pan(pane.zoom)),
            Action::Right => pane.pan = pane.pan.saturating_sub(1),
            Action::Cancel | Action::OpenTimeline => self.mode = Mode::Normal,
            Action::Quit => self.request_quit(),
            other => self.update_background(other),
        }
    }

    /// The write task read the timeline of `prefix` in target `target`: the
    /// pane takes it if it still shows that prefix.
    pub(super) fn timeline_read(&mut self, target: usize, prefix: &str, t: Box<PrefixTimeline>) {
        if let Mode::Timeline(pane) = &mut self.mode {
            if pane.target == target && pane.prefix == prefix {
                pane.rebuilt = Rebuilt::Read(t);
            }
        }
    }
}
