//! The console's prompts and their state changes (called from
//! [`App::update`] only): help (`?`), the probe's question (`p`: the probe
//! writes a scratch key, so it asks first), and quitting while leases are
//! held (release them first). The takeover dialog has a file of its own
//! (`takeover_dialog`).

use super::{terminal_safe, Action, App, Mode, View};
use crate::snapshot::ExclusionReport;
use crate::text::sanitize;
use crate::tui::action::WriteRequest;

impl App {
    /// Keys while help, a question or the release before quitting is on screen.
    pub(super) fn update_prompt(&mut self, action: Action) {
        match (&self.mode, action) {
            (Mode::Help, Action::Quit) => self.request_quit(),
            (Mode::Help, Action::Cancel | Action::ToggleHelp) => self.mode = Mode::Normal,
            (Mode::ConfirmQuit, Action::Yes) => {
                self.outbox.push(WriteRequest::ReleaseHeld);
                self.mode = Mode::Quitting;
                self.say_pending("releasing held leases…".into());
            }
            (Mode::ConfirmQuit, Action::Cancel | Action::Quit) => self.mode = Mode::Normal,
            (&Mode::ConfirmProbe { target }, Action::Yes) => {
                self.mode = Mode::Normal;
                self.send_probe(target);
            }
            (Mode::ConfirmProbe { .. }, Action::Cancel | Action::Quit) => {
                self.mode = Mode::Normal;
                self.say("probe cancelled: nothing was written".into(), false);
            }
            (_, other) => self.update_background(other),
        }
    }

    /// `q`: quits at once, or asks first when leases are held.
    pub(super) fn request_quit(&mut self) {
        if self.session.held().is_empty() {
            self.quit = true;
        } else {
            self.mode = Mode::ConfirmQuit;
        }
    }

    /// `p`: asks before probing (the probe writes a scratch key); the
    /// request is queued only once the operator says yes.
    pub(super) fn start_probe(&mut self) {
        if self.settings.read_only {
            return;
        }
        let target = match (self.view, self.selected_lease()) {
            (View::Leases, Some((r, _))) => r.target,
            _ if !self.settings.targets.is_empty() => 0,
            _ => return,
        };
        self.mode = Mode::ConfirmProbe { target };
    }

    fn send_probe(&mut self, target: usize) {
        if self.settings.read_only {
            return;
        }
        self.outbox.push(WriteRequest::Probe { target });
        let url = self.settings.target_url(target);
        self.say_pending(format!(
            "probing {} (writes and removes a scratch key)…",
            sanitize(&url)
        ));
    }

    /// A probe of target `target` finished.
    pub(super) fn probe_done(&mut self, target: usize, result: ExclusionReport, message: &str) {
        self.session.probed(target, result);
        let bad = result != ExclusionReport::Conditional;
        self.say(terminal_safe(message).into_owned(), bad);
    }

    /// The held leases were released (one line each); a console waiting
    /// for that to quit now quits.
    pub(super) fn held_released(&mut self, lines: &[String]) {
        self.session.released();
        self.say(terminal_safe(&lines.join("; ")).into_owned(), false);
        if matches!(self.mode, Mode::Quitting) {
            self.quit = true;
        }
    }
}
