//! The status bar's result and the log of results (`m`): a result is shown
//! until the next key or for [`MESSAGE_SHOWN`], work under way until its
//! result replaces it, and every result is kept (at most [`MESSAGES_KEPT`])
//! for `m` to show in full.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Action, App, Mode};

/// How long a result stays in the status bar when no key is pressed: then
/// the key hints come back (the takeover's outcome stays in the detail
/// pane's audit entries).
pub(crate) const MESSAGE_SHOWN: Duration = Duration::from_secs(6);

/// How many results the log of results keeps (`m`), the oldest dropped first.
pub(crate) const MESSAGES_KEPT: usize = 200;

/// A message for the operator in the status bar.
#[derive(Debug, Clone)]
pub(super) struct Message {
    /// The text, already safe for the terminal: every name in it escaped
    /// exactly once (with [`sanitize`](crate::text::sanitize)) where the message is made, so it is
    /// drawn as is.
    pub(super) text: String,
    /// An error (drawn red).
    pub(super) error: bool,
    /// When it was shown (the reader's clock at the last tick).
    pub(super) at: DateTime<Utc>,
    /// Work under way ("taking over …"): shown until its result replaces it,
    /// not cleared by a key or by time.
    pub(super) pending: bool,
}

impl App {
    /// Shows a result (`error`: in red) until the next key or for
    /// [`MESSAGE_SHOWN`], and keeps it in the log of results (`m`).
    pub(super) fn say(&mut self, text: String, error: bool) {
        let m = Message {
            text,
            error,
            at: self.session.now(),
            pending: false,
        };
        if self.messages.len() == MESSAGES_KEPT {
            self.messages.pop_front();
        }
        self.messages.push_back(m.clone());
        self.message = Some(m);
    }

    /// This session's results, newest first: when each was shown (the
    /// reader's clock), its text (safe for the terminal) and whether it is
    /// an error.
    pub(crate) fn messages(&self) -> impl Iterator<Item = (DateTime<Utc>, &str, bool)> {
        self.messages
            .iter()
            .rev()
            .map(|m| (m.at, m.text.as_str(), m.error))
    }

    /// Keys while the log of results is open: ↑/↓ (and j/k, PgUp/PgDn,
    /// Home/End) move through it, Esc or `m` closes it, `q` quits.
    pub(super) fn update_messages(&mut self, action: Action) {
        let Mode::Messages { first } = &mut self.mode else {
            return;
        };
        let last = self.messages.len().saturating_sub(1);
        match action {
            Action::Up => *first = first.saturating_sub(1),
            Action::Down => *first = (*first + 1).min(last),
            Action::PageUp => *first = first.saturating_sub(5),
            Action::PageDown => *first = (*first + 5).min(last),
            Action::Home => *first = 0,
            Action::End => *first = last,
            Action::Cancel | Action::OpenMessages => self.mode = Mode::Normal,
            Action::Quit => self.request_quit(),
            other => self.update_background(other),
        }
    }

    /// Shows work under way until its result replaces it.
    pub(super) fn say_pending(&mut self, text: String) {
        self.message = Some(Message {
            text,
            error: false,
            at: self.session.now(),
            pending: true,
        });
    }

    /// Clears a result (not work under way): a key was pressed, or it has
    /// been shown for [`MESSAGE_SHOWN`] at `now` (`None`: at once).
    pub(super) fn clear_result(&mut self, now: Option<DateTime<Utc>>) {
        let done = self.message.as_ref().is_some_and(|m| {
            !m.pending
                && now.is_none_or(|now| (now - m.at).to_std().unwrap_or_default() >= MESSAGE_SHOWN)
        });
        if done {
            self.message = None;
        }
    }
}
