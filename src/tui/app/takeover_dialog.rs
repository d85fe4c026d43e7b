//! The takeover dialog (`t`) and its state changes (called from
//! [`App::update`] only): what it shows, its fields, and the confirmation rule
//! (`takeover_problem`: the successor's id, the typed prefix of a forced
//! takeover, then the takeover's preflight shared with `leasectl takeover`).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{terminal_safe, Action, App, LeaseRow, Mode, View};
use crate::bucket::{LeaseState, Observed};
use crate::takeover::{preflight, something_to_take_over, typed_confirms, Then};
use crate::text::{lookalike_note, sanitize, sanitize_message};
use crate::tui::action::WriteRequest;

/// Which field of the takeover dialog has the focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The reason text (where the focus starts: what is typed first lands
    /// there).
    Reason,
    /// release / hold / hand-over.
    Then,
    /// The successor's instance id (hand-over only).
    Successor,
    /// The prefix typed to confirm a forced takeover (fresh lease only).
    TypedPrefix,
    /// The Cancel button.
    Cancel,
    /// The Take over button.
    Confirm,
}

/// What happens after the takeover, as chosen in the dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThenChoice {
    /// Delete the new lease at once.
    Release,
    /// The console keeps renewing it until quit.
    Hold,
    /// Name a successor's instance id.
    Handover,
}

impl ThenChoice {
    /// Shown in the dialog.
    pub fn as_str(self) -> &'static str {
        match self {
            ThenChoice::Release => "release",
            ThenChoice::Hold => "hold",
            ThenChoice::Handover => "hand over",
        }
    }

    /// The next choice in the order shown (release, hold, hand over), round;
    /// the previous one when not `forward`.
    fn next(self, forward: bool) -> Self {
        let order = [ThenChoice::Release, ThenChoice::Hold, ThenChoice::Handover];
        let i = order.iter().position(|c| *c == self).unwrap_or(0);
        order[if forward { (i + 1) % 3 } else { (i + 2) % 3 }]
    }
}

/// The takeover dialog: exactly what will be replaced, and the operator's answers.
#[derive(Debug, Clone)]
pub struct TakeoverDialog {
    /// The row being taken over.
    pub row: LeaseRow,
    /// Its prefix.
    pub prefix: String,
    /// Its key.
    pub key: String,
    /// What the operator saw when opening the dialog (the takeover's precondition).
    pub seen: Observed,
    /// The judgement then.
    pub state: LeaseState,
    /// Holder (escaped), or `-`.
    pub holder: String,
    /// Age when opened, seconds.
    pub age_s: Option<f64>,
    /// ETag seen.
    pub etag: Option<String>,
    /// How long the console had seen that ETag unchanged.
    pub watched_for: Duration,
    /// Reason typed.
    pub reason: String,
    /// After-takeover choice.
    pub then: ThenChoice,
    /// Successor id typed (hand-over).
    pub successor: String,
    /// Prefix typed (forced takeover of a fresh lease).
    pub(crate) typed_prefix: String,
    /// Focus.
    pub focus: Field,
    /// Why Confirm was refused, shown in the dialog.
    pub problem: Option<String>,
    /// Sent; waiting for the result.
    pub pending: bool,
    /// What the takeover sent says it is waiting for, once it says so.
    pub waiting: Option<String>,
}

impl TakeoverDialog {
    /// Whether this takeover overrides a fresh lease (and so needs the typed prefix).
    pub fn forced(&self) -> bool {
        self.state == LeaseState::Fresh
    }

    /// The fields the focus visits, in order.
    pub fn fields(&self) -> Vec<Field> {
        let mut v = vec![Field::Reason, Field::Then];
        if self.then == ThenChoice::Handover {
            v.push(Field::Successor);
        }
        if self.forced() {
            v.push(Field::TypedPrefix);
        }
        v.extend([Field::Cancel, Field::Confirm]);
        v
    }

    /// A key that changes only the dialog's answers or its focus: Tab and
    /// the arrows move between fields and buttons or change the choice,
    /// typing goes to the focused field, Enter in a field moves on. False
    /// for any other key (Enter on a button, Esc, `q`, background actions).
    fn edit(&mut self, action: &Action) -> bool {
        match action {
            Action::NextField => self.move_focus(true),
            Action::PrevField => self.move_focus(false),
            Action::Left | Action::Right if self.focus == Field::Then => {
                self.then = self.then.next(matches!(action, Action::Right));
            }
            Action::Left | Action::Right => {
                // Between the buttons.
                if matches!(self.focus, Field::Cancel | Field::Confirm) {
                    self.focus = if self.focus == Field::Cancel {
                        Field::Confirm
                    } else {
                        Field::Cancel
                    };
                }
            }
            Action::Input(c) => match self.focus {
                Field::Reason if self.reason.chars().count() < 500 => self.reason.push(*c),
                Field::Successor if self.successor.chars().count() < 256 => self.successor.push(*c),
                Field::TypedPrefix if self.typed_prefix.chars().count() < 1024 => {
                    self.typed_prefix.push(*c)
                }
                Field::Then if *c == ' ' => self.then = self.then.next(true),
                _ => {}
            },
            Action::Backspace => match self.focus {
                Field::Reason => {
                    self.reason.pop();
                }
                Field::Successor => {
                    self.successor.pop();
                }
                Field::TypedPrefix => {
                    self.typed_prefix.pop();
                }
                _ => {}
            },
            // Enter in a field moves on.
            Action::Submit if !matches!(self.focus, Field::Cancel | Field::Confirm) => {
                self.move_focus(true)
            }
            _ => return false,
        }
        true
    }

    /// The focus to the next (or previous) field, round.
    fn move_focus(&mut self, forward: bool) {
        let f = self.fields();
        let n = f.len();
        let p = f.iter().position(|x| *x == self.focus).unwrap_or(0);
        self.focus = f[if forward {
            (p + 1) % n
        } else {
            (p + n - 1) % n
        }];
    }
}

impl App {
    /// `t`: opens the dialog on the selected row (never in watch mode).
    pub(super) fn start_takeover(&mut self) {
        if self.settings.read_only || self.view != View::Leases {
            return;
        }
        let Some((row, p)) = self.selected_lease() else {
            return;
        };
        // Nothing to take over (no LEASE, a released record): said at once,
        // before a reason is asked for — no answer in the dialog changes it.
        let seen = p.observed();
        if let Err(e) = something_to_take_over(&p.prefix, &seen, self.now()) {
            let why = sanitize_message(&e.to_string());
            self.say(format!("no takeover: {why}"), true);
            return;
        }
        let watched = self.watched_for(p);
        let dialog = TakeoverDialog {
            row,
            prefix: p.prefix.clone(),
            key: p.key.clone(),
            seen,
            state: p.state,
            holder: p
                .record
                .as_ref()
                .map(|r| sanitize(&r.instance_id))
                .unwrap_or_else(|| "-".into()),
            age_s: p.age_s,
            etag: p.etag.clone(),
            watched_for: watched,
            reason: String::new(),
            then: ThenChoice::Release,
            successor: String::new(),
            typed_prefix: String::new(),
            focus: Field::Reason,
            problem: None,
            pending: false,
            waiting: None,
        };
        self.mode = Mode::Takeover(Box::new(dialog));
    }

    /// Keys while the dialog is open: its own fields take what they can
    /// ([`TakeoverDialog::edit`]); Esc, Cancel and `q` close it, Take over
    /// confirms; while the takeover runs only background actions apply.
    pub(super) fn update_dialog(&mut self, action: Action) {
        let (ttl_s, now) = (self.settings.ttl_s, self.session.now());
        let Mode::Takeover(d) = &mut self.mode else {
            return;
        };
        if d.pending {
            // Waiting for the result: only background actions apply.
            return self.update_background(action);
        }
        if d.edit(&action) {
            // A refusal stays on screen only while it is still true: once the
            // operator has typed the missing reason (or chosen otherwise) it
            // is replaced by what is still wrong, if anything.
            let answered = matches!(
                action,
                Action::Input(_) | Action::Backspace | Action::Left | Action::Right
            );
            if answered && d.problem.is_some() {
                d.problem = takeover_problem(d, ttl_s, now);
            }
            return;
        }
        match action {
            Action::Submit if d.focus == Field::Confirm => self.confirm_takeover(),
            Action::Submit | Action::Cancel | Action::Quit => self.mode = Mode::Normal,
            other => self.update_background(other),
        }
    }

    /// The Take over button: the request is queued only if the operator
    /// could see the whole dialog and the takeover would not be refused.
    fn confirm_takeover(&mut self) {
        let (ttl_s, now, size) = (self.settings.ttl_s, self.session.now(), self.size);
        let target = self
            .settings
            .targets
            .get(match &self.mode {
                Mode::Takeover(d) => d.row.target,
                _ => 0,
            })
            .map_or_else(String::new, ToString::to_string);
        let Mode::Takeover(d) = &mut self.mode else {
            return;
        };
        // What the operator could not see is not confirmed.
        if let Some(p) = too_small(size, d, &target) {
            d.problem = Some(p.clone());
            self.say(p, true);
            return;
        }
        if let Some(p) = takeover_problem(d, ttl_s, now) {
            d.problem = Some(p);
            return;
        }
        let then = match d.then {
            ThenChoice::Release => Then::Release,
            ThenChoice::Hold => Then::Hold,
            ThenChoice::Handover => Then::Handover(d.successor.trim().to_owned()),
        };
        self.outbox.push(WriteRequest::Takeover {
            target: d.row.target,
            prefix: d.prefix.clone(),
            seen: d.seen.clone(),
            watched_for: d.watched_for,
            reason: d.reason.trim().to_owned(),
            then,
            force: d.forced(),
            lease: self.settings.lease(),
        });
        d.pending = true;
        d.waiting = None;
        d.problem = None;
        let pending = format!("taking over {}…", sanitize(&d.key));
        self.say_pending(pending);
    }

    /// The takeover of `key` that the open dialog sent says what it waits
    /// for: the dialog shows it in place of its generic working line.
    pub(super) fn takeover_waiting(&mut self, key: &str, text: String) {
        if let Mode::Takeover(d) = &mut self.mode {
            if d.pending && d.key == key {
                d.waiting = Some(text);
            }
        }
    }

    /// The takeover of `key` finished: its report (the console may now hold
    /// the lease) or its error; the dialog waiting for it closes.
    pub(super) fn takeover_done(
        &mut self,
        key: String,
        result: Result<(String, Option<String>), String>,
    ) {
        match result {
            Ok((msg, held)) => {
                if let Some(k) = held {
                    self.session.hold(k);
                }
                // The report escapes the names it holds already.
                self.say(terminal_safe(&msg).into_owned(), false);
            }
            Err(e) => self.say(
                format!("takeover of {}: {}", sanitize(&key), terminal_safe(&e)),
                true,
            ),
        }
        if matches!(&self.mode, Mode::Takeover(d) if d.pending) {
            self.mode = Mode::Normal;
        }
    }
}

/// The widest the takeover dialog is drawn (`ui::overlays::render_dialog`).
const DIALOG_WIDTH: u16 = 76;

/// Why the terminal (`size`, columns × rows) is too small to show the whole
/// takeover dialog `d` (the facts about what it replaces: target, key, state,
/// holder, age, ETag; the fields; the buttons), if it is: a takeover is
/// confirmed only when the operator could see all of it. The dialog is as
/// tall as its lines and as wide as its longest line (at most 76 columns).
fn too_small(size: (u16, u16), d: &TakeoverDialog, target: &str) -> Option<String> {
    let chars = |s: &str| sanitize(s).chars().count();
    let facts = [
        9 + chars(target),
        9 + chars(&d.key),
        9 + d.state.as_str().len() + if d.forced() { 35 } else { 0 },
        9 + d.holder.chars().count(),
        9 + d.etag.as_deref().map_or(40, str::len),
        // "then     (•) release  ( ) hold  ( ) hand over"
        46,
    ];
    let longest = facts.into_iter().max().unwrap_or(0) as u16 + 2;
    let need_w = longest.min(DIALOG_WIDTH);
    // Facts (7, and a look-alike warning), a blank, reason, then, the
    // successor and typed-prefix fields when shown, a blank, the buttons, the
    // key hint, and the two borders.
    let need_h = 7
        + u16::from(lookalike_note(&d.prefix).is_some())
        + 3
        + u16::from(d.then == ThenChoice::Handover)
        + u16::from(d.forced())
        + 2
        + 1
        + 2;
    (size.0 < need_w || size.1 < need_h).then(|| {
        format!(
            "the terminal ({}×{}) is too small to show the whole takeover dialog: it needs at least {need_w}×{need_h}; enlarge it to confirm",
            size.0, size.1
        )
    })
}

/// Why the dialog's takeover would be refused now, if it would: the
/// console's own checks (the successor's id, the typed confirmation), then the
/// takeover's guards, shared with `leasectl takeover` (a reason, one TTL of
/// watching…), judged at `now` with leases of `ttl_s` seconds.
fn takeover_problem(d: &TakeoverDialog, ttl_s: u64, now: DateTime<Utc>) -> Option<String> {
    if d.then == ThenChoice::Handover && d.successor.trim().is_empty() {
        Some("hand-over needs the successor's instance id".to_owned())
    } else if d.forced() && !typed_confirms(&d.typed_prefix, &[&d.prefix]) {
        // The rule shared with `leasectl takeover`: the prefix as shown
        // (escaped) is accepted too, so a name holding a control or invisible
        // character can always be typed.
        Some(format!(
            "the lease is fresh (a live holder): type the prefix {} to force",
            sanitize(&d.prefix)
        ))
    } else {
        preflight(
            &d.prefix,
            &d.seen,
            d.watched_for,
            &d.reason,
            ttl_s,
            d.forced(),
            now,
        )
        .err()
        .map(|e| e.to_string())
    }
}
