//! Drawing. Pure: every function takes `&App` and a frame; nothing here changes state.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::app::{App, BINDINGS};
use crate::bucket::{format_secs, LeaseState};
use crate::text::sanitize;

/// Smallest terminal the console draws into; below it says so.
pub const MIN_SIZE: (u16, u16) = (40, 8);

/// The colour of a state; the state is always also written as text.
pub fn state_style(s: LeaseState) -> Style {
    let c = match s {
        LeaseState::Fresh => Color::Green,
        LeaseState::Stale => Color::Yellow,
        LeaseState::Suspect => Color::Magenta,
        LeaseState::Malformed => Color::Red,
        LeaseState::Absent => Color::DarkGray,
    };
    Style::default().fg(c)
}

/// Draws the whole console.
pub fn render(app: &App, f: &mut Frame) {
    let area = f.area();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        f.render_widget(
            Paragraph::new(format!(
                "terminal too small ({}x{}); need {}x{}",
                area.width, area.height, MIN_SIZE.0, MIN_SIZE.1
            )),
            area,
        );
        return;
    }
    let errors = app.error_lines();
    let err_h = errors.len().min(3) as u16;
    let [header, table, errs, status] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(3),
        Constraint::Length(err_h),
        Constraint::Length(1),
    ])
    .areas(area);
    render_header(app, f, header);
    render_table(app, f, table);
    let err_lines: Vec<Line> = errors
        .iter()
        .take(3)
        .map(|e| {
            Line::styled(
                format!("error: {}", sanitize(e)),
                Style::default().fg(Color::Red),
            )
        })
        .collect();
    f.render_widget(Paragraph::new(err_lines), errs);
    render_status(app, f, status);
}

fn render_header(app: &App, f: &mut Frame, area: Rect) {
    let mode = if app.read_only {
        Span::styled(
            " WATCH (read-only) ",
            Style::default().bg(Color::Blue).fg(Color::White),
        )
    } else {
        Span::styled(" OPS ", Style::default().bg(Color::Red).fg(Color::White))
    };
    let last = match app.last_refresh {
        Some(t) => format!(
            "last refresh {} ({} ago)",
            t.format("%H:%M:%SZ"),
            format_secs((app.now - t).num_milliseconds() as f64 / 1000.0)
        ),
        None => "gathering…".to_owned(),
    };
    let line1 = Line::from(vec![
        Span::styled("leasectl ", Style::default().add_modifier(Modifier::BOLD)),
        mode,
        Span::raw(format!(
            "  refresh {}  {}  clock {}",
            humantime::format_duration(app.refresh),
            last,
            app.now.format("%Y-%m-%d %H:%M:%SZ")
        )),
    ]);
    let line2 = Line::from(format!(
        "targets: {}",
        if app.targets.is_empty() {
            "(none)".to_owned()
        } else {
            sanitize(&app.targets.join("  "))
        }
    ));
    f.render_widget(Paragraph::new(vec![line1, line2]), area);
}

fn render_table(app: &App, f: &mut Frame, area: Rect) {
    let page = usize::from(area.height.saturating_sub(3)).max(1);
    let offset = app.offset.min(app.row_count().saturating_sub(1));
    let rows: Vec<Row> = app
        .rows()
        .enumerate()
        .skip(offset)
        .take(page)
        .map(|(i, p)| {
            let holder = p
                .record
                .as_ref()
                .map(|r| sanitize(&r.instance_id))
                .unwrap_or_else(|| "-".into());
            let ttl = p
                .record
                .as_ref()
                .map(|r| format!("{}s", r.ttl_s))
                .unwrap_or_else(|| "-".into());
            let row = Row::new(vec![
                Cell::from(sanitize(&p.prefix)),
                Cell::from(holder),
                Cell::from(p.age_s.map(format_secs).unwrap_or_else(|| "-".into())),
                Cell::from(ttl),
                Cell::from(
                    p.expires_in_s
                        .map(format_secs)
                        .unwrap_or_else(|| "-".into()),
                ),
                Cell::from(Span::styled(p.state.as_str(), state_style(p.state))),
            ]);
            if i == app.selected {
                row.style(Style::default().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        })
        .collect();
    let n = app.row_count();
    let title = if n == 0 {
        " leases (none found) ".to_owned()
    } else {
        format!(" leases {}/{} ", app.selected + 1, n)
    };
    let table = Table::new(
        rows,
        [
            Constraint::Fill(3),
            Constraint::Fill(2),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Length(9),
        ],
    )
    .header(
        Row::new(["PREFIX", "HOLDER", "AGE", "TTL", "EXPIRES", "STATE"])
            .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(Block::default().borders(Borders::ALL).title(title));
    f.render_widget(table, area);
}

fn render_status(app: &App, f: &mut Frame, area: Rect) {
    let mut spans = Vec::new();
    for b in BINDINGS.iter().filter(|b| !(app.read_only && b.writes)) {
        spans.push(Span::styled(
            b.keys,
            Style::default().add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::raw(format!(" {}  ", b.does)));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}
