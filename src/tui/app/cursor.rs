//! One cursor for both views' tables (the leases table and the pod's
//! process table): the selected row and the first row shown, moved by the
//! movement keys and kept on the page.

use super::Action;

/// A table's cursor: the selected row and the first row shown, both indices
/// into the table's rows as shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    selected: usize,
    offset: usize,
}

impl Cursor {
    /// The selected row.
    pub fn selected(self) -> usize {
        self.selected
    }

    /// The first row shown.
    pub fn offset(self) -> usize {
        self.offset
    }

    /// Applies a movement key (up, down, page up and down, home, end) in a
    /// table of `n` rows showing `page` of them; false for any other action.
    pub(super) fn step(&mut self, action: &Action, n: usize, page: usize) -> bool {
        let sel = self.selected;
        let last = n.saturating_sub(1);
        let page = page.max(1);
        let to = match action {
            Action::Up => sel.saturating_sub(1),
            Action::Down => (sel + 1).min(last),
            Action::PageUp => sel.saturating_sub(page),
            Action::PageDown => (sel + page).min(last),
            Action::Home => 0,
            Action::End => last,
            _ => return false,
        };
        self.selected = to;
        true
    }

    /// Selects row `i` (kept on the page by the next [`Cursor::clamp`]).
    pub(super) fn select(&mut self, i: usize) {
        self.selected = i;
    }

    /// Back to the first row.
    pub(super) fn reset(&mut self) {
        *self = Self::default();
    }

    /// The rows of the page shown (`page` rows from the offset) and the
    /// selected row (which may be off the page).
    pub(super) fn on_screen(self, page: usize) -> impl Iterator<Item = usize> {
        (self.offset..self.offset + page).chain(std::iter::once(self.selected))
    }

    /// Keeps the selection inside `n` rows and the offset such that the
    /// selection is among the `page` rows shown.
    pub(super) fn clamp(&mut self, n: usize, page: usize) {
        self.selected = self.selected.min(n.saturating_sub(1));
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + page {
            self.offset = self.selected + 1 - page;
        }
        self.offset = self.offset.min(n.saturating_sub(page));
    }
}
