//! The pod view: the writers' duties, lock states and verdicts.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::{ellipsize, fit_secs};
use crate::tui::app::{terminal_safe, wrap, App};
use crate::tui::layout;
use crate::writer::scan::{
    DutyView, LockFileState, LockState, PodSnapshot, ProcessInfo, VerdictKind,
};

/// The colour of a duty; the duty is always also written as text.
pub(crate) fn duty_style(d: DutyView) -> Style {
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
pub(crate) fn lock_style(l: LockState) -> Style {
    match l {
        LockState::Holds => Style::default()
            .fg(Color::Green)
            .add_modifier(Modifier::BOLD),
        LockState::HoldsDeleted => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        LockState::Open => Style::default().fg(Color::Yellow),
        LockState::None => Style::default(),
        LockState::Unknown => Style::default().fg(Color::Magenta),
    }
}

/// The colour of a verdict: red where two writers are possible or the
/// deployment is broken, yellow where the pod needs a look.
pub(crate) fn verdict_style(k: VerdictKind) -> Style {
    let c = match k {
        VerdictKind::SiblingsRacing
        | VerdictKind::PodRootsRacing
        | VerdictKind::HolderNotTake
        | VerdictKind::HolderOutsidePod
        | VerdictKind::InvalidEnable
        | VerdictKind::ArmedHoldsNothing
        | VerdictKind::OrphanedWriter
        | VerdictKind::OrphanedLock
        | VerdictKind::LockNotRegular => Color::Red,
        VerdictKind::StrayStamp | VerdictKind::Waiting => Color::Yellow,
    };
    Style::default().fg(c)
}

/// Width of the pod view's LOCK column, in cells.
const LOCK_WIDTH: u16 = 12;

/// The lock column: `holds`, `none`, or `open` with the longest it may have
/// waited (in a form that fits the column, [`fit_secs`]).
pub(crate) fn lock_text(p: &ProcessInfo) -> String {
    match p.lock {
        LockState::Holds => "holds".into(),
        LockState::HoldsDeleted => "holds deleted".into(),
        LockState::None => "none".into(),
        LockState::Unknown => "unknown".into(),
        LockState::Open => match p.waiting_s {
            Some(s) => format!("open ≤{}", fit_secs(s as f64, LOCK_WIDTH - 6, false)),
            None => "open".into(),
        },
    }
}

/// The selected process's container and pod, from its cgroup, after its
/// duty sentence: ` · container containerd 4e6f0b1c9a0d, pod 0f4d…` (empty
/// when its cgroup names neither).
pub(crate) fn container_text(p: &ProcessInfo) -> String {
    let Some(c) = &p.container else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(id) = c.short_id() {
        let runtime = c.runtime.as_deref().unwrap_or("container");
        parts.push(format!("container {} {id}", terminal_safe(runtime)));
    }
    if let Some(uid) = &c.pod_uid {
        parts.push(format!("pod {}", terminal_safe(uid)));
    }
    format!(" · {}", parts.join(", "))
}

/// The pod view: verdicts on top, the process tree, the selected process's
/// duty sentence. Only the visible rows are built.
pub(super) fn render_pod(app: &App, f: &mut Frame, area: Rect) {
    let notices = app.notice_lines(area.width.saturating_sub(2));
    let (verdicts, table, detail) = layout::pod(area, notices.len() as u16);

    let pod = app.snapshot().map(|s| &s.pod);
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
    let n = app.pod().rows().len();
    // The COMMAND column: the box less its borders, the fixed columns (1,
    // 8, 8, 8, 12) and the five spaces between the six columns.
    let command_width = usize::from(table.width).saturating_sub(2 + 37 + 5);
    let offset = app.pod().cursor().offset().min(n.saturating_sub(1));
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
                // A command longer than its column ends in `…`.
                Cell::from(ellipsize(
                    &format!("{indent}{}", terminal_safe(&p.command)),
                    command_width,
                )),
                Cell::from(Span::styled(p.duty.as_str(), duty_style(p.duty))),
                Cell::from(Span::styled(lock_text(p), lock_style(p.lock))),
            ]);
            if i == app.pod().cursor().selected() {
                row.style(Style::default().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        })
        .collect();
    let title = processes_title(app, pod, n);
    // The title is cut to the box, marked `…` (a lock path can be long).
    let title = ellipsize(&title, usize::from(table.width.saturating_sub(2)));
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

    render_duty_sentence(app, f, detail);
}

/// The process table's title: the selected row, the Kubernetes pod, and the
/// state of each lock file.
fn processes_title(app: &App, pod: Option<&PodSnapshot>, n: usize) -> String {
    let mut title = if n == 0 {
        " processes (none) ".to_owned()
    } else {
        format!(" processes {}/{} ", app.pod().cursor().selected() + 1, n)
    };
    // The Kubernetes pod they are in, from their cgroups.
    if let Some(k) = pod.and_then(|p| p.kubernetes.as_ref()) {
        title.push_str(&format!("· pod {} ", terminal_safe(&k.label())));
    }
    for l in pod.map(|p| p.locks.as_slice()).unwrap_or_default() {
        let held = if l.deleted && !l.holders.is_empty() {
            let pids: Vec<String> = l.holders.iter().map(u32::to_string).collect();
            format!("deleted, still held by {}", pids.join(", "))
        } else if l.holders.is_empty() {
            match l.state {
                LockFileState::HeldOutsideNamespace => "held outside this PID namespace".to_owned(),
                LockFileState::Unknown => "unknown".to_owned(),
                LockFileState::Free => "free".to_owned(),
                LockFileState::Held => "locked, holder not visible".to_owned(),
                LockFileState::Orphaned => "deleted, held by a process not visible".to_owned(),
                LockFileState::NotRegular => "not a regular file".to_owned(),
            }
        } else {
            let pids: Vec<String> = l.holders.iter().map(u32::to_string).collect();
            format!("held by {}", pids.join(", "))
        };
        title.push_str(&format!("· {}: {held} ", terminal_safe(&l.path)));
    }
    title
}

/// The selected process's duty sentence below the table, cut to its lines
/// with `…`.
fn render_duty_sentence(app: &App, f: &mut Frame, detail: Rect) {
    // The selected process's duty sentence (it names the stamp and why it
    // counted or not); the duty itself is in the selected row.
    let Some(p) = app.selected_process() else {
        return;
    };
    let line = Line::from(vec![
        Span::styled(
            format!("pid {}: ", p.pid),
            duty_style(p.duty).add_modifier(Modifier::BOLD),
        ),
        Span::raw(terminal_safe(&p.duty_reason).into_owned()),
        Span::styled(container_text(p), Style::default().fg(Color::DarkGray)),
    ]);
    let width = usize::from(detail.width).max(1);
    let rows = usize::from(detail.height).max(1);
    if Paragraph::new(line.clone())
        .wrap(Wrap { trim: false })
        .line_count(detail.width)
        <= rows
    {
        f.render_widget(Paragraph::new(line).wrap(Wrap { trim: false }), detail);
        return;
    }
    // Longer than its lines: the last one shown ends with `…`.
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    let mut lines = wrap(&text, width);
    lines.truncate(rows);
    if let Some(last) = lines.last_mut() {
        // Ends with `…` whether it fits (" …") or is cut.
        *last = ellipsize(&format!("{last} …"), width);
    }
    let lines: Vec<Line> = lines.into_iter().map(Line::from).collect();
    f.render_widget(Paragraph::new(lines), detail);
}
