//! Drawing. Pure: every function takes `&App` and a frame; nothing here changes state.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::app::{terminal_safe, App, View, BINDINGS};
use crate::bucket::{format_secs, LeaseState};
use crate::text::sanitize;
use crate::writer::scan::{DutyView, LockState, ProcessInfo, VerdictKind};

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

/// The colour of a duty; the duty is always also written as text.
pub fn duty_style(d: DutyView) -> Style {
    let c = match d {
        DutyView::Take => Color::Cyan,
        DutyView::Inherit => Color::Green,
        DutyView::Off => Color::DarkGray,
        DutyView::Invalid => Color::Red,
        DutyView::Unknown => Color::Magenta,
    };
    Style::default().fg(c)
}

/// The colour of a lock state; always also written as text.
pub fn lock_style(l: LockState) -> Style {
    match l {
        LockState::Holds => Style::default()
            .fg(Color::Green)
            .add_modifier(Modifier::BOLD),
        LockState::Open => Style::default().fg(Color::Yellow),
        LockState::None => Style::default(),
    }
}

/// The colour of a verdict: red where two writers are possible or the
/// deployment is broken, yellow where the pod needs a look.
pub fn verdict_style(k: VerdictKind) -> Style {
    let c = match k {
        VerdictKind::SiblingsRacing
        | VerdictKind::HolderNotTake
        | VerdictKind::HolderOutsidePod
        | VerdictKind::InvalidEnable
        | VerdictKind::ArmedHoldsNothing => Color::Red,
        VerdictKind::StrayStamp | VerdictKind::Waiting => Color::Yellow,
    };
    Style::default().fg(c)
}

/// The duty as written in the table and in `--json`.
pub fn duty_name(d: DutyView) -> &'static str {
    match d {
        DutyView::Take => "take",
        DutyView::Inherit => "inherit",
        DutyView::Off => "off",
        DutyView::Invalid => "invalid",
        DutyView::Unknown => "unknown",
    }
}

/// The lock column: `holds`, `none`, or `open` with the longest it may have waited.
pub fn lock_text(p: &ProcessInfo) -> String {
    match p.lock {
        LockState::Holds => "holds".into(),
        LockState::None => "none".into(),
        LockState::Open => match p.waiting_s {
            Some(s) => format!("open ≤{}", format_secs(s as f64)),
            None => "open".into(),
        },
    }
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
    let [header, body, errs, status] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(3),
        Constraint::Length(err_h),
        Constraint::Length(1),
    ])
    .areas(area);
    render_header(app, f, header);
    match app.view {
        View::Leases => render_table(app, f, body),
        View::Pod => render_pod(app, f, body),
    }
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
    let line2 = Line::from(vec![
        Span::raw("view "),
        Span::styled(
            format!(" {} ", app.view.as_str()),
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        ),
        Span::raw(format!(
            "  targets: {}",
            if app.targets.is_empty() {
                "(none)".to_owned()
            } else {
                sanitize(&app.targets.join("  "))
            }
        )),
    ]);
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

/// The pod view: verdicts on top, the process tree, the selected process's
/// duty sentence. Only the visible rows are built.
fn render_pod(app: &App, f: &mut Frame, area: Rect) {
    let notices = app.notice_lines(area.width.saturating_sub(2));
    let [verdicts, table, detail] = Layout::vertical([
        Constraint::Length(notices.len() as u16 + 2),
        Constraint::Min(3),
        Constraint::Length(2),
    ])
    .areas(area);

    let pod = app.snapshot.as_ref().map(|s| &s.pod);
    let n_verdicts = pod.map(|p| p.verdicts.len()).unwrap_or(0);
    let lines: Vec<Line> = notices
        .iter()
        .map(|l| {
            let style = match (l.kind, l.error) {
                (Some(k), _) => verdict_style(k),
                (None, true) => Style::default().fg(Color::Red),
                (None, false) => Style::default(),
            };
            Line::styled(l.text.clone(), style)
        })
        .collect();
    let title = format!(" pod verdicts ({n_verdicts}) ");
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        verdicts,
    );

    let page = usize::from(table.height.saturating_sub(3)).max(1);
    let n = app.pod_rows.len();
    let offset = app.pod_offset.min(n.saturating_sub(1));
    let rows: Vec<Row> = (offset..n.min(offset + page))
        .filter_map(|i| app.pod_row(i).map(|(p, depth)| (i, p, depth)))
        .map(|(i, p, depth)| {
            let flagged = pod.is_some_and(|s| s.verdicts.iter().any(|v| v.pids.contains(&p.pid)));
            let indent = if depth == 0 {
                String::new()
            } else if depth <= 16 {
                format!("{}└ ", "  ".repeat(depth - 1))
            } else {
                format!("{}└[{depth}] ", "  ".repeat(15))
            };
            let row = Row::new(vec![
                Cell::from(Span::styled(
                    if flagged { "!" } else { " " },
                    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
                )),
                Cell::from(p.pid.to_string()),
                Cell::from(p.ppid.to_string()),
                Cell::from(format!("{indent}{}", terminal_safe(&p.command))),
                Cell::from(Span::styled(duty_name(p.duty), duty_style(p.duty))),
                Cell::from(Span::styled(lock_text(p), lock_style(p.lock))),
            ]);
            if i == app.pod_selected {
                row.style(Style::default().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        })
        .collect();
    let mut title = if n == 0 {
        " processes (none) ".to_owned()
    } else {
        format!(" processes {}/{} ", app.pod_selected + 1, n)
    };
    for l in pod.map(|p| p.locks.as_slice()).unwrap_or_default() {
        let held = if l.holders.is_empty() {
            if l.locked {
                "locked, holder not visible".to_owned()
            } else {
                "free".to_owned()
            }
        } else {
            let pids: Vec<String> = l.holders.iter().map(u32::to_string).collect();
            format!("held by {}", pids.join(", "))
        };
        title.push_str(&format!("· {}: {held} ", terminal_safe(&l.path)));
    }
    let t = Table::new(
        rows,
        [
            Constraint::Length(1),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Fill(1),
            Constraint::Length(8),
            Constraint::Length(12),
        ],
    )
    .header(
        Row::new(["", "PID", "PPID", "COMMAND", "DUTY", "LOCK"])
            .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(Block::default().borders(Borders::ALL).title(title));
    f.render_widget(t, table);

    // The selected process's duty sentence (it names the stamp and why it
    // counted or not); the duty itself is in the selected row.
    let text = match app.selected_process() {
        Some(p) => Line::from(vec![
            Span::styled(
                format!("pid {}: ", p.pid),
                duty_style(p.duty).add_modifier(Modifier::BOLD),
            ),
            Span::raw(terminal_safe(&p.duty_reason).into_owned()),
        ]),
        None => Line::from(""),
    };
    f.render_widget(Paragraph::new(text).wrap(Wrap { trim: false }), detail);
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
