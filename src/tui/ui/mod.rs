//! Drawing. Pure: every function takes `&App` and a frame; nothing here changes state.

use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::app::{App, Mode, View};
use super::layout;
use crate::bucket::LeaseState;
use crate::text::format_secs;
use crate::text::sanitize_message;

mod detail;
mod header;
mod lease_table;
mod overlays;
mod pod_view;
mod status;
mod timeline_lanes;

pub use detail::detail_extent;
use detail::render_detail;
use header::render_header;
use lease_table::render_table;
pub use lease_table::{
    exclusion_name, lease_columns, prefix_label, skew_text, target_short_name, ttl_gauge,
};
use overlays::{
    render_confirm_probe, render_confirm_quit, render_dialog, render_help, render_messages,
};
use pod_view::render_pod;
pub use pod_view::{duty_style, lock_style, lock_text, verdict_style};
use status::render_status;
use timeline_lanes::render_timeline;

/// Smallest terminal the console draws into; below it says so.
pub const MIN_SIZE: (u16, u16) = (40, 8);

/// The colour of a state; the state is always also written as text.
pub fn state_style(s: LeaseState) -> Style {
    let c = match s {
        LeaseState::Fresh => Color::Green,
        LeaseState::Stale => Color::Yellow,
        LeaseState::Suspect => Color::Magenta,
        LeaseState::Malformed => Color::Red,
        LeaseState::Absent | LeaseState::Released => Color::DarkGray,
    };
    Style::default().fg(c)
}

/// A number of seconds in at most `width` columns, never cut inside a
/// number: [`format_secs`]'s form (`4m05s`, `3d04h`) when it fits, else its
/// larger unit alone (`26328d`), else whole years (`72y`), else a power of
/// ten of years (`1e9y`); `…` when not even that fits. `plus` puts a `+`
/// before a value ≥ 0 (a clock skew); negative values keep their `-`.
pub fn fit_secs(s: f64, width: u16, plus: bool) -> String {
    let width = usize::from(width);
    let fits = |t: &str| t.chars().count() <= width;
    let sign = if s < 0.0 {
        "-"
    } else if plus {
        "+"
    } else {
        ""
    };
    let full = if s >= 0.0 && plus {
        format!("+{}", format_secs(s))
    } else {
        format_secs(s)
    };
    if fits(&full) || !s.is_finite() {
        return full;
    }
    let a = s.abs();
    // Truncated, as format_secs truncates its larger unit.
    let coarse = match a {
        a if a < 60.0 => format!("{sign}{}s", a as u64),
        a if a < 3600.0 => format!("{sign}{}m", a as u64 / 60),
        a if a < 86400.0 => format!("{sign}{}h", a as u64 / 3600),
        a => format!("{sign}{}d", (a / 86400.0) as u64),
    };
    if fits(&coarse) {
        return coarse;
    }
    let years = a / (365.25 * 86400.0);
    let y = format!("{sign}{}y", years as u64);
    if years < 1e15 && fits(&y) {
        return y;
    }
    let e = format!("{sign}{years:.0e}y");
    if fits(&e) {
        return e;
    }
    "…".to_owned()
}

/// `s` cut to `width` columns (as ratatui measures them), the cut marked
/// with `…`: never cut without a mark.
pub(super) fn ellipsize(s: &str, width: usize) -> String {
    if Span::raw(s).width() <= width {
        return s.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    for c in s.chars() {
        let mut next = out.clone();
        next.push(c);
        if Span::raw(next.as_str()).width() + 1 > width {
            break;
        }
        out = next;
    }
    out.push('…');
    out
}

/// `line` cut to `width` columns, the cut marked with `…` (its spans keep
/// their styles): never cut without a mark.
pub(super) fn ellipsize_line(line: Line<'static>, width: usize) -> Line<'static> {
    if line.width() <= width {
        return line;
    }
    let mut out: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for span in line.spans {
        let w = span.width();
        if used + w < width {
            used += w;
            out.push(span);
            continue;
        }
        let room = width.saturating_sub(used);
        let cut = ellipsize(&span.content, room);
        out.push(Span::styled(cut, span.style));
        break;
    }
    if !out.last().is_some_and(|s| s.content.ends_with('…')) {
        out.push(Span::raw("…"));
    }
    Line::from(out).style(line.style)
}

/// One line made of parts that give way by priority, so that nothing is cut
/// in the middle: `parts[i]` lists part `i`'s forms, widest first (an empty
/// form leaves the part out); `steps` names parts, least important first, and
/// each step moves that part to its next form. Steps are taken while the line
/// is wider than `width` columns; the parts are shown in their order.
fn fit_line<'a>(parts: &[Vec<Vec<Span<'a>>>], steps: &[usize], width: usize) -> Line<'a> {
    let mut level = vec![0usize; parts.len()];
    let build = |level: &[usize]| -> Line<'a> {
        let spans: Vec<Span<'a>> = parts
            .iter()
            .zip(level)
            .filter_map(|(forms, &l)| forms.get(l))
            .flat_map(|f| f.iter().cloned())
            .collect();
        Line::from(spans)
    };
    let mut line = build(&level);
    for &i in steps {
        if line.width() <= width {
            break;
        }
        if let Some(l) = level.get_mut(i) {
            if *l + 1 < parts[i].len() {
                *l += 1;
                line = build(&level);
            }
        }
    }
    line
}

/// Draws the whole console.
pub fn render(app: &App, f: &mut Frame) {
    let area = f.area();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        f.render_widget(
            Paragraph::new(format!(
                "too small: {}x{}, need {}x{} (q quits)",
                area.width, area.height, MIN_SIZE.0, MIN_SIZE.1
            ))
            .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let errors = app.error_lines();
    let layout::Screen {
        header,
        body,
        errors: errs,
        status,
    } = layout::screen(area, errors.len() as u16);
    render_header(app, f, header);
    match app.view() {
        _ if app.timeline_pane().is_some() => {
            if let Some(pane) = app.timeline_pane() {
                render_timeline(app, pane, f, body);
            }
        }
        View::Leases => {
            let (table, detail) = layout::leases(body, app.detail_height());
            render_table(app, f, table);
            if app.leases().detail() {
                render_detail(app, f, detail);
            }
        }
        View::Pod => render_pod(app, f, body),
    }
    let err_lines: Vec<Line> = errors
        .iter()
        .take(3)
        .map(|e| {
            Line::styled(
                ellipsize(
                    &format!("error: {}", sanitize_message(e)),
                    usize::from(area.width),
                ),
                Style::default().fg(Color::Red),
            )
        })
        .collect();
    f.render_widget(Paragraph::new(err_lines), errs);
    render_status(app, f, status);
    match app.mode() {
        Mode::Help => render_help(app, f, area),
        Mode::Messages { first } => render_messages(app, *first, f, area),
        Mode::Takeover(d) => render_dialog(app, d, f, area),
        Mode::ConfirmQuit => render_confirm_quit(app, f, area),
        Mode::ConfirmProbe { target } => render_confirm_probe(app, *target, f, area),
        _ => {}
    }
}
