//! The console's keys: the one [`BINDINGS`] table (read by key dispatch, the
//! status bar's hints and the help screen) and [`key_action`], which maps a
//! key press to an [`Action`] given the mode.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{Action, App, Mode};

/// One key binding: the keys, what they are shown as, what they do. Key
/// dispatch (normal mode), the status bar and the help screen all read this
/// one table, so none can drift from the others.
pub struct Binding {
    /// Keys as shown to the operator.
    pub keys: &'static str,
    /// What they do.
    pub does: &'static str,
    /// Whether the binding writes to a store (absent in watch mode).
    pub writes: bool,
    /// Place in the status bar's hints (1 first); 0: only in help.
    pub hint: u8,
    /// The keys that trigger it (besides Ctrl-C, which always quits).
    pub codes: &'static [KeyCode],
    /// The action they trigger.
    pub action: Action,
}

const fn b(
    keys: &'static str,
    does: &'static str,
    writes: bool,
    hint: u8,
    codes: &'static [KeyCode],
    action: Action,
) -> Binding {
    Binding {
        keys,
        does,
        writes,
        hint,
        codes,
        action,
    }
}

use KeyCode::{Char, Down as KDown, End as KEnd, Home as KHome, Up as KUp};

/// The console's key bindings (normal mode).
pub const BINDINGS: &[Binding] = &[
    b("↑/↓ j/k", "move", false, 0, &[KUp, Char('k')], Action::Up),
    b("", "", false, 0, &[KDown, Char('j')], Action::Down),
    b(
        "PgUp/PgDn",
        "page (with the details open: scroll them)",
        false,
        0,
        &[KeyCode::PageUp],
        Action::PageUp,
    ),
    b("", "", false, 0, &[KeyCode::PageDown], Action::PageDown),
    b(
        "Home/End g/G",
        "first/last",
        false,
        0,
        &[KHome, Char('g')],
        Action::Home,
    ),
    b("", "", false, 0, &[KEnd, Char('G')], Action::End),
    b(
        "Tab",
        "leases/pod",
        false,
        5,
        &[KeyCode::Tab, KeyCode::BackTab],
        Action::SwitchView,
    ),
    b(
        "Enter",
        "details",
        false,
        4,
        &[KeyCode::Enter],
        Action::ToggleDetail,
    ),
    b(
        "/",
        "filter (!x excludes)",
        false,
        6,
        &[Char('/')],
        Action::StartFilter,
    ),
    b(
        "s",
        "sort by next column",
        false,
        8,
        &[Char('s')],
        Action::SortNext,
    ),
    b(
        "S",
        "reverse the sort",
        false,
        0,
        &[Char('S')],
        Action::SortReverse,
    ),
    b(
        "n",
        "next problem",
        false,
        7,
        &[Char('n')],
        Action::NextProblem,
    ),
    b(
        "p",
        "probe preconditions",
        true,
        9,
        &[Char('p')],
        Action::Probe,
    ),
    b(
        "t",
        "take over",
        true,
        3,
        &[Char('t')],
        Action::StartTakeover,
    ),
    b(
        "h",
        "timeline of the prefix",
        false,
        0,
        &[Char('h')],
        Action::OpenTimeline,
    ),
    b("?", "help", false, 2, &[Char('?')], Action::ToggleHelp),
    b(
        "m",
        "messages: this session's results, in full",
        false,
        0,
        &[Char('m')],
        Action::OpenMessages,
    ),
    b(
        "Esc",
        "close (a result, details, the filter)",
        false,
        0,
        &[KeyCode::Esc],
        Action::Cancel,
    ),
    b("q Ctrl-C", "quit", false, 1, &[Char('q')], Action::Quit),
];

/// Maps a key press to an action, given the current mode.
pub fn key_action(app: &App, k: KeyEvent) -> Option<Action> {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && k.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    match &app.mode {
        Mode::Filter | Mode::Takeover(_) => {
            return Some(match k.code {
                KeyCode::Esc => Action::Cancel,
                KeyCode::Enter => Action::Submit,
                KeyCode::Backspace => Action::Backspace,
                KeyCode::Tab | KeyCode::Down => Action::NextField,
                KeyCode::BackTab | KeyCode::Up => Action::PrevField,
                KeyCode::Left => Action::Left,
                KeyCode::Right => Action::Right,
                KeyCode::Char(c) if !ctrl => Action::Input(c),
                _ => return None,
            })
        }
        Mode::Help => {
            return match k.code {
                KeyCode::Char('q') => Some(Action::Quit),
                _ => Some(Action::Cancel),
            }
        }
        Mode::ConfirmQuit => {
            return Some(match k.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => Action::Yes,
                _ => Action::Cancel,
            })
        }
        Mode::ConfirmProbe { .. } => {
            return Some(match k.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => Action::Yes,
                _ => Action::Cancel,
            })
        }
        Mode::Timeline(_) => {
            return match k.code {
                KeyCode::Char('+') | KeyCode::Char('=') => Some(Action::ZoomIn),
                KeyCode::Char('-') | KeyCode::Char('_') => Some(Action::ZoomOut),
                KeyCode::Left => Some(Action::Left),
                KeyCode::Right => Some(Action::Right),
                KeyCode::Esc | KeyCode::Char('h') => Some(Action::Cancel),
                KeyCode::Char('q') => Some(Action::Quit),
                _ => None,
            }
        }
        Mode::Messages { .. } => {
            return match k.code {
                KUp | Char('k') => Some(Action::Up),
                KDown | Char('j') => Some(Action::Down),
                KeyCode::PageUp => Some(Action::PageUp),
                KeyCode::PageDown => Some(Action::PageDown),
                KHome | Char('g') => Some(Action::Home),
                KEnd | Char('G') => Some(Action::End),
                KeyCode::Esc | Char('m') => Some(Action::Cancel),
                Char('q') => Some(Action::Quit),
                _ => None,
            }
        }
        Mode::Quitting => return None,
        Mode::Normal => {}
    }
    // Esc only closes what is open (a result, the detail pane, a filter):
    // it never quits (`q` does).
    BINDINGS
        .iter()
        .find(|b| b.codes.contains(&k.code) && !(b.writes && app.settings.read_only))
        .map(|b| b.action.clone())
        // Any other key clears a result shown in the status bar.
        .or_else(|| app.message().is_some().then_some(Action::Dismiss))
}
