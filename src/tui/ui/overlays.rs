//! The overlays: help (from the key table), the quit and probe questions, the takeover dialog.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use super::state_style;
use crate::snapshot::OffScreen;
use crate::text::lookalike_note;
use crate::text::{format_secs, sanitize};
use crate::tui::app::{terminal_safe, App, Field, ThenChoice, BINDINGS};
use crate::tui::app::{wrap, TakeoverDialog};

/// A centred rectangle of at most `w`×`h` inside `area`.
fn centred(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// Help, generated from the live bindings: write actions are absent in watch mode.
pub(super) fn render_help(app: &App, f: &mut Frame, area: Rect) {
    let shown: Vec<_> = BINDINGS
        .iter()
        .filter(|b| !b.keys.is_empty())
        .filter(|b| !(app.settings.read_only && b.writes))
        .collect();
    let mut lines: Vec<Line> = shown
        .iter()
        .map(|b| {
            Line::from(vec![
                Span::styled(
                    format!("{:<14}", b.keys),
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::raw(b.does),
            ])
        })
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::from(if app.settings.read_only {
        "WATCH mode: the stores are read-only; no key writes.".to_owned()
    } else {
        "OPS mode: p and t write (a scratch key; the LEASE), always after a confirmation."
            .to_owned()
    }));
    if let Some(line) = off_screen_line(app) {
        lines.push(Line::from(line));
    }
    lines.push(Line::from("any key closes"));
    let r = fitted(area, &lines);
    f.render_widget(ratatui::widgets::Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(" help ")),
        r,
    );
}

/// How often the request budget lets a row off screen be read (issue 35,
/// trip 16): at least every 5 minutes only while the budget covers the rows
/// off screen in that time; else about every N / budget left (the rows on
/// screen and the listings paid first). `None` when every row is on screen.
fn off_screen_line(app: &App) -> Option<String> {
    let total = app.total_rows();
    let on_screen = app.rows_in_view().len();
    let rows = total.checked_sub(on_screen).filter(|n| *n > 0)?;
    let targets = app.settings.targets.len().max(1);
    let s = &app.settings;
    let o = OffScreen::new(
        rows,
        on_screen,
        total.div_ceil(1000).max(targets),
        s.max_requests,
        s.refresh,
        s.refresh * s.relist_every.max(1),
    );
    let budget = format!(
        "{rows} rows / {:.0} of the {} req/min budget left",
        o.left_per_min, o.budget_per_min
    );
    Some(match (o.cycle(), o.bound()) {
        (Some(c), Some(b)) if c < b => format!(
            "off-screen rows: read at least every {} ({budget})",
            format_secs(b.as_secs_f64())
        ),
        (_, Some(b)) => format!(
            "off-screen rows: read only about every {} ({budget})",
            format_secs(b.as_secs_f64())
        ),
        _ => format!(
            "off-screen rows: not read while the rows on screen use the {} req/min budget",
            o.budget_per_min
        ),
    })
}

/// A centred box just large enough for `lines` (with borders), wrapped to
/// the screen's width when they are longer; never larger than `area`.
fn fitted(area: Rect, lines: &[Line]) -> Rect {
    let longest = lines.iter().map(|l| l.width()).max().unwrap_or(0) as u16;
    let w = (longest + 2).min(area.width);
    let inner = usize::from(w.saturating_sub(2)).max(1);
    let h: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner)).sum();
    centred(area, w, (h as u16).saturating_add(2))
}

/// The log of this session's results (`m`), newest first, each in full
/// (word-wrapped): what the status bar showed for a few seconds, or cut. The
/// borders say how many results lie above and below those shown.
pub(super) fn render_messages(app: &App, first: usize, f: &mut Frame, area: Rect) {
    let w = area.width.saturating_sub(4).min(120);
    let h = area.height.saturating_sub(2);
    let r = centred(area, w, h);
    let inner_w = usize::from(r.width.saturating_sub(2)).max(8);
    let inner_h = usize::from(r.height.saturating_sub(2));
    let all: Vec<_> = app.messages().collect();
    let mut lines: Vec<Line> = Vec::new();
    let mut shown = 0;
    for (at, text, error) in all.iter().skip(first) {
        let style = if *error {
            Style::default().fg(Color::Red)
        } else {
            Style::default()
        };
        let wrapped = wrap(&format!("{} {text}", at.format("%H:%M:%SZ")), inner_w);
        if !lines.is_empty() && lines.len() + wrapped.len() > inner_h {
            break;
        }
        lines.extend(wrapped.into_iter().map(|l| Line::styled(l, style)));
        shown += 1;
    }
    // One result longer than the box: its end is marked, not cut silently.
    if lines.len() > inner_h {
        lines.truncate(inner_h.saturating_sub(1));
        lines.push(Line::styled("  …", Style::default().fg(Color::Yellow)));
    }
    if all.is_empty() {
        lines.push(Line::from("no results yet this session"));
    }
    let mark = Style::default()
        .fg(Color::Yellow)
        .add_modifier(Modifier::BOLD);
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(" messages, newest first (Esc closes) ");
    if first > 0 {
        block =
            block.title(Line::styled(format!(" ↑ {first} newer · ↑/PgUp "), mark).right_aligned());
    }
    let below = all.len().saturating_sub(first + shown);
    if below > 0 {
        block = block.title_bottom(
            Line::styled(format!(" ↓ {below} older · ↓/PgDn "), mark).right_aligned(),
        );
    }
    f.render_widget(ratatui::widgets::Clear, r);
    f.render_widget(Paragraph::new(lines).block(block), r);
}

pub(super) fn render_confirm_quit(app: &App, f: &mut Frame, area: Rect) {
    let mut lines = vec![Line::from(format!(
        "This console holds {} lease(s):",
        app.session().held().len()
    ))];
    let inner = usize::from(area.width.min(64).saturating_sub(2)).max(1);
    for k in app.session().held() {
        lines.push(Line::from(super::ellipsize(
            &format!("  {}", sanitize(k)),
            inner,
        )));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(
        "Release them and quit? y = yes, any other key = stay",
    ));
    let r = centred(area, 64, lines.len() as u16 + 2);
    f.render_widget(ratatui::widgets::Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" quit ")),
        r,
    );
}

/// `p`'s confirmation: which target, and exactly what the probe writes and
/// removes there, before anything is sent.
pub(super) fn render_confirm_probe(app: &App, target: usize, f: &mut Frame, area: Rect) {
    let url = sanitize(&app.settings.target_url(target));
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let lines = vec![
        Line::styled("Probe this target's service?", bold),
        Line::from(format!("target   {url}")),
        Line::from(""),
        Line::from("It writes a scratch key, then removes it:"),
        Line::from(format!("  {url}.leasectl-probe/{{random id}}")),
        Line::from("  (and ….absent, ….concurrent, ….race): conditional PUTs"),
        Line::from("  and DELETEs with If-None-Match and If-Match, 8 steps,"),
        Line::from("  then rounds of 16 concurrent requests each (the race)."),
        Line::from("It also removes scratch keys there older than 10 minutes"),
        Line::from("(left by interrupted probes). No LEASE is read or written."),
        Line::from(""),
        Line::from(vec![
            Span::styled("y", bold),
            Span::raw("/"),
            Span::styled("Enter", bold),
            Span::raw(" probe · any other key cancels"),
        ]),
    ];
    let r = fitted(area, &lines);
    f.render_widget(ratatui::widgets::Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(" probe ")),
        r,
    );
}

/// A text field's content on one line: the last `width` characters (the end is
/// where typing happens), with `…` when cut, so the dialog never grows.
fn field_text(s: &str, width: usize) -> String {
    let s = sanitize(s);
    let n = s.chars().count();
    if n <= width {
        format!("[{s}▏]")
    } else {
        let tail: String = s.chars().skip(n - width + 1).collect();
        format!("[…{tail}▏]")
    }
}

/// The takeover dialog: exactly what will be replaced; focus starts in the reason field.
pub(super) fn render_dialog(app: &App, d: &TakeoverDialog, f: &mut Frame, area: Rect) {
    let room = usize::from(area.width.min(76)).saturating_sub(30).max(8);
    let focus = |x: Field| {
        if d.focus == x {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        }
    };
    let mut lines = dialog_facts(app, d);
    lines.extend([
        Line::from(""),
        Line::from(vec![
            Span::raw("reason   "),
            Span::styled(field_text(&d.reason, room), focus(Field::Reason)),
        ]),
        Line::from(vec![
            Span::raw("then     "),
            Span::styled(
                [ThenChoice::Release, ThenChoice::Hold, ThenChoice::Handover]
                    .iter()
                    .map(|c| {
                        if *c == d.then {
                            format!("(•) {}", c.as_str())
                        } else {
                            format!("( ) {}", c.as_str())
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("  "),
                focus(Field::Then),
            ),
        ]),
    ]);
    // Which line holds each field: the dialog scrolls to keep the focused one
    // in view when the terminal is too short for all of it.
    let mut field_line = vec![
        (Field::Reason, lines.len() - 2),
        (Field::Then, lines.len() - 1),
    ];
    if d.then == ThenChoice::Handover {
        field_line.push((Field::Successor, lines.len()));
        lines.push(Line::from(vec![
            Span::raw("successor "),
            Span::styled(field_text(&d.successor, room), focus(Field::Successor)),
        ]));
    }
    if d.forced() {
        field_line.push((Field::TypedPrefix, lines.len()));
        lines.push(Line::from(vec![
            Span::raw("type the prefix to force: "),
            Span::styled(field_text(&d.typed_prefix, room), focus(Field::TypedPrefix)),
        ]));
    }
    lines.push(Line::from(""));
    field_line.push((Field::Cancel, lines.len()));
    field_line.push((Field::Confirm, lines.len()));
    lines.push(Line::from(vec![
        Span::styled("  Cancel  ", focus(Field::Cancel)),
        Span::raw("   "),
        Span::styled("  Take over  ", focus(Field::Confirm).fg(Color::Red)),
    ]));
    // The box's inside: what does not fit is wrapped (a refusal, in full)
    // or cut with `…` (a fact, a hint), never cut silently.
    let inner = usize::from(area.width.min(76).saturating_sub(2)).max(1);
    if let Some(p) = &d.problem {
        let red = Style::default().fg(Color::Red);
        for l in wrap(&terminal_safe(p), inner) {
            lines.push(Line::styled(l, red));
        }
    }
    if d.pending {
        match &d.waiting {
            // The takeover's own sentence: what it waits for, until when.
            Some(w) => {
                for l in wrap(&terminal_safe(w), inner) {
                    lines.push(Line::styled(l, Style::default().fg(Color::Yellow)));
                }
            }
            None => lines.push(Line::from(
                "working… (probe, audit intent, conditional PUT)",
            )),
        }
    }
    lines.push(Line::styled(
        "Tab/↑/↓ field · ←/→ choose · Enter select · Esc cancel",
        Style::default().fg(Color::DarkGray),
    ));
    let lines: Vec<Line> = lines
        .into_iter()
        .map(|l| super::ellipsize_line(l, inner))
        .collect();
    let r = centred(area, 76, lines.len() as u16 + 2);
    let inner = usize::from(r.height.saturating_sub(2)).max(1);
    let focused = field_line
        .iter()
        .find(|(f, _)| *f == d.focus)
        .map(|(_, l)| *l)
        .unwrap_or(0);
    // Keep the focused field and the line after it (a problem, the buttons) visible.
    let scroll = (focused + 2)
        .saturating_sub(inner)
        .min(lines.len().saturating_sub(inner));
    f.render_widget(ratatui::widgets::Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .scroll((scroll as u16, 0))
            .block(Block::default().borders(Borders::ALL).title(" take over ")),
        r,
    );
}

/// The takeover dialog's facts about what it replaces: target, key, state,
/// holder, age, ETag (and a look-alike warning).
fn dialog_facts(app: &App, d: &TakeoverDialog) -> Vec<Line<'static>> {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut lines = vec![
        Line::from(vec![Span::styled("Replace this lease?", bold)]),
        Line::from(format!(
            "target   {}",
            sanitize(&app.settings.target_url(d.row.target))
        )),
        Line::from(format!("key      {}", sanitize(&d.key))),
        Line::from(vec![
            Span::raw("state    "),
            Span::styled(d.state.as_str(), state_style(d.state)),
            Span::raw(if d.forced() {
                "  (a live holder: FORCED takeover)"
            } else {
                ""
            }),
        ]),
        Line::from(format!("holder   {}", d.holder)),
        Line::from(format!(
            "age      {}",
            d.age_s.map(format_secs).unwrap_or_else(|| "-".into())
        )),
        Line::from(format!(
            "ETag     {}",
            d.etag
                .as_deref()
                .unwrap_or("(none: no LEASE; a new one is created)")
        )),
    ];
    if let Some(n) = lookalike_note(&d.prefix) {
        // The dialog does not wrap: the note's first clause, then the code points.
        let short = n.split(':').next().unwrap_or(&n).to_owned();
        let codes = n
            .split(['(', ')'])
            .nth(1)
            .filter(|c| c.starts_with("U+"))
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        lines.insert(
            3,
            Line::styled(
                format!("warning  look-alike{codes}: {short}"),
                Style::default().fg(Color::Yellow),
            ),
        );
    }
    lines
}
