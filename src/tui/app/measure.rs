//! What fits on the screen as the console last measured it: rows of each
//! view's table, the detail pane, the error lines and the verdict box (the
//! layout in `ui` uses the same numbers, from `tui::layout`), and keeping
//! both cursors on their pages.

use super::{App, View};
use crate::tui::layout;

impl App {
    /// Rows of the current view's table that fit on screen (the layout in
    /// `ui` uses the same numbers).
    pub fn visible_rows(&self) -> usize {
        match self.view {
            View::Leases => self.lease_visible_rows(),
            View::Pod => self.pod_visible_rows(),
        }
    }

    /// Height of the detail pane when open.
    pub(crate) fn detail_height(&self) -> u16 {
        if self.leases.detail() && self.view == View::Leases {
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
    pub(crate) fn pod_visible_rows(&self) -> usize {
        let screen = layout::screen(self.area(), self.error_height());
        layout::table_rows(layout::pod(screen.body, self.notice_height().saturating_sub(2)).1)
    }

    /// Lines of error text under the table (at most 3).
    pub(crate) fn error_height(&self) -> u16 {
        self.error_lines().len().min(3) as u16
    }

    /// Height of the pod view's verdict box, borders included.
    pub(crate) fn notice_height(&self) -> u16 {
        self.notice_lines(self.size.0.saturating_sub(2)).len() as u16 + 2
    }

    /// Error lines to show (targets or prefixes that could not be read).
    pub(crate) fn error_lines(&self) -> Vec<String> {
        self.session.error_lines()
    }

    /// Keeps both cursors inside their rows and on their pages.
    pub(super) fn clamp_all(&mut self) {
        let page = self.lease_visible_rows().max(1);
        self.leases.clamp(page);
        let page = self.pod_visible_rows().max(1);
        self.pod.clamp(page);
    }
}
