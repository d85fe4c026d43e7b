//! The console's screen layout: the one source of every height. Drawing
//! (`ui`) places widgets in these areas; the state (`app`) asks them how many
//! table rows fit, for scrolling. Neither repeats a height by hand.

use ratatui::layout::{Constraint, Layout, Rect};

/// The header: mode, clocks, targets (2 lines).
pub const HEADER: u16 = 2;
/// The status bar: message and key hints (2 lines).
pub const STATUS: u16 = 2;
/// A table's borders and its header row.
pub const TABLE_CHROME: u16 = 3;
/// The pod view's line about the selected process (with its border).
pub const POD_DUTY: u16 = 2;
/// Error lines shown under the body, at most.
pub const MAX_ERROR_LINES: u16 = 3;

/// The whole screen: header, body (the current view), errors, status bar.
#[derive(Debug, Clone, Copy)]
pub struct Screen {
    /// Mode, clocks, targets.
    pub header: Rect,
    /// The current view.
    pub body: Rect,
    /// Error lines (`errors` high, at most [`MAX_ERROR_LINES`]).
    pub errors: Rect,
    /// Message and key hints.
    pub status: Rect,
}

/// Splits `area` with `errors` error lines to show.
pub fn screen(area: Rect, errors: u16) -> Screen {
    let [header, body, errors, status] = Layout::vertical([
        Constraint::Length(HEADER),
        Constraint::Min(3),
        Constraint::Length(errors.min(MAX_ERROR_LINES)),
        Constraint::Length(STATUS),
    ])
    .areas(area);
    Screen {
        header,
        body,
        errors,
        status,
    }
}

/// The leases view: the table, and under it the detail pane (`detail` high, 0 when closed).
pub fn leases(body: Rect, detail: u16) -> (Rect, Rect) {
    let [table, pane] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(detail)]).areas(body);
    (table, pane)
}

/// The detail pane: the details and, on a screen at least 100 columns wide,
/// the holder history beside them (under them otherwise: `None`).
pub fn detail(pane: Rect) -> (Rect, Option<Rect>) {
    if pane.width >= 100 {
        let [d, h] = Layout::horizontal([Constraint::Percentage(58), Constraint::Percentage(42)])
            .areas(pane);
        (d, Some(h))
    } else {
        (pane, None)
    }
}

/// The pod view: verdict box (`notices` lines inside borders), process table, duty line.
pub fn pod(body: Rect, notices: u16) -> (Rect, Rect, Rect) {
    let [verdicts, table, duty] = Layout::vertical([
        Constraint::Length(notices + 2),
        Constraint::Min(3),
        Constraint::Length(POD_DUTY),
    ])
    .areas(body);
    (verdicts, table, duty)
}

/// Data rows that fit in a bordered table with a header row (at least 1).
pub fn table_rows(table: Rect) -> usize {
    usize::from(table.height.saturating_sub(TABLE_CHROME).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_from_the_areas() {
        let area = Rect::new(0, 0, 120, 40);
        let s = screen(area, 1);
        assert_eq!(s.body.height, 40 - HEADER - 1 - STATUS);
        let (table, pane) = leases(s.body, 10);
        assert_eq!(pane.height, 10);
        assert_eq!(
            table_rows(table),
            usize::from(s.body.height - 10 - TABLE_CHROME)
        );
        let (v, t, d) = pod(s.body, 2);
        assert_eq!((v.height, d.height), (4, POD_DUTY));
        assert_eq!(
            table_rows(t),
            usize::from(s.body.height - 4 - POD_DUTY - TABLE_CHROME)
        );
    }
}
