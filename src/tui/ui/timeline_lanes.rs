//! The timeline pane: one lane per holder across the time axis, tenures as
//! bars, the time without a holder and overlaps in colours of their own,
//! takeovers as marks with the operator — this session's history, then the
//! timeline rebuilt from the versions (OPS mode). Every mark is also a
//! character, so the pane reads without colour.

use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use crate::text::format_secs;
use crate::timeline::{Derived, Ending};
use crate::tui::app::{terminal_safe, App, Rebuilt, TimelinePane};

const BAR: char = '█';
const NOBODY: char = '░';
const OVERLAP: char = '▓';
const TAKEOVER: char = '▲';

fn bar_style() -> Style {
    Style::default().fg(Color::Green)
}
fn nobody_style() -> Style {
    Style::default().fg(Color::DarkGray)
}
fn overlap_style() -> Style {
    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
}
fn takeover_style() -> Style {
    Style::default().fg(Color::Yellow)
}

/// The lane label of the time nobody held the lease.
const NOBODY_LANE: &str = "(no holder)";

/// Draws the pane of `pane` into `area` (the body, instead of the table).
pub(super) fn render_timeline(app: &App, pane: &TimelinePane, f: &mut Frame, area: Rect) {
    let session = app.session_timeline(pane);
    let rebuilt = match &pane.rebuilt {
        Rebuilt::Read(p) => Some(&p.derived),
        _ => None,
    };
    let (from, to) = extent(&session, rebuilt, app.now());
    let (start, end) = pane.window(from, to);
    let inner_w = area.width.saturating_sub(2);
    let label_w = label_width(&session, rebuilt, inner_w);
    let lane_w = usize::from(inner_w.saturating_sub(label_w + 1)).max(1);
    let axis = Axis {
        start,
        end,
        width: lane_w,
    };
    let span_s = (end - start).num_milliseconds() as f64 / 1000.0;
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut lines = vec![
        Line::from(vec![
            Span::raw(format!(
                "{} → {} UTC ({}, zoom ×{})  ",
                start.format("%Y-%m-%d %H:%M:%S"),
                hms(end),
                format_secs(span_s),
                1u32 << pane.zoom
            )),
            Span::styled("+/-", bold),
            Span::raw(" zoom  "),
            Span::styled("←/→", bold),
            Span::raw(" pan  "),
            Span::styled("Esc", bold),
            Span::raw(" close"),
        ]),
        axis_line(&axis, label_w),
    ];
    lines.push(Line::styled(
        "this session (holder changes as this console saw them)",
        bold,
    ));
    lanes(&session, &axis, label_w, &mut lines);
    match &pane.rebuilt {
        Rebuilt::NotRead(why) => lines.push(Line::styled(*why, nobody_style())),
        Rebuilt::Reading => lines.push(Line::styled(
            "rebuilt from the versions: reading…",
            nobody_style(),
        )),
        Rebuilt::Read(p) => {
            lines.push(Line::styled(
                format!(
                    "rebuilt from the versions (last 24 h: {} listed, {} read{}) and the audit log ({} entries about it)",
                    p.sources.versions_listed,
                    p.sources.versions_read,
                    match p.sources.versions_inferred {
                        0 => String::new(),
                        n => format!(", {n} inferred"),
                    },
                    p.sources.audit_entries
                ),
                bold,
            ));
            lanes(&p.derived, &axis, label_w, &mut lines);
        }
    }
    lines.push(legend());
    // Findings: overlaps first, then what could not be read, then notes.
    let found = [(rebuilt, "versions"), (Some(&session), "this session")];
    for (d, source) in found {
        for o in d.iter().flat_map(|d| &d.overlaps) {
            lines.push(Line::styled(
                format!(
                    "OVERLAP ({source}) {} → {}: {}",
                    hms(o.from),
                    hms(o.to),
                    o.why
                ),
                overlap_style(),
            ));
        }
    }
    if let Rebuilt::Read(p) = &pane.rebuilt {
        for s in &p.problems {
            lines.push(Line::styled(
                format!("UNKNOWN: {}", terminal_safe(s)),
                Style::default().fg(Color::Red),
            ));
        }
        for s in &p.notes {
            lines.push(Line::raw(format!("note: {}", terminal_safe(s))));
        }
    }
    let title = format!(
        " timeline of {} ",
        terminal_safe(&crate::text::sanitize(&pane.prefix))
    );
    // Lanes fit the width exactly; the findings wrap. What does not fit
    // under them is said on the border, not cut silently.
    let p = Paragraph::new(lines).wrap(Wrap { trim: false });
    let below = p
        .line_count(area.width.saturating_sub(2))
        .saturating_sub(usize::from(area.height.saturating_sub(2)));
    let mut block = Block::default().borders(Borders::ALL).title(title);
    if below > 0 {
        block = block.title_bottom(
            Line::styled(
                format!(" ↓ {below} more line(s): a taller terminal, or `leasectl timeline` "),
                Style::default()
                    .fg(Color::Yellow)
                    .add_modifier(Modifier::BOLD),
            )
            .right_aligned(),
        );
    }
    f.render_widget(p.block(block), area);
}

/// The time axis: `width` cells from `start` to `end`.
struct Axis {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    width: usize,
}

impl Axis {
    /// The cell of `t` (clamped to the axis).
    fn cell(&self, t: DateTime<Utc>) -> usize {
        let whole = (self.end - self.start).num_milliseconds().max(1) as f64;
        let x = (t - self.start).num_milliseconds() as f64 / whole * self.width as f64;
        (x.max(0.0) as usize).min(self.width - 1)
    }

    /// The cells of `[a, b]`, at least one, or `None` outside the window.
    fn cells(&self, a: DateTime<Utc>, b: DateTime<Utc>) -> Option<std::ops::RangeInclusive<usize>> {
        (b >= self.start && a <= self.end).then(|| self.cell(a)..=self.cell(b))
    }
}

/// `HH:MM:SS` of `t` (UTC): the header gives the window's date.
fn hms(t: DateTime<Utc>) -> String {
    t.format("%H:%M:%S").to_string()
}

/// The whole extent: from the earliest thing either timeline
/// shows to `now` (or the latest, if later).
fn extent(
    session: &Derived,
    rebuilt: Option<&Derived>,
    now: DateTime<Utc>,
) -> (DateTime<Utc>, DateTime<Utc>) {
    let mut from = now;
    let mut to = now;
    for d in [Some(session), rebuilt].into_iter().flatten() {
        for t in &d.tenures {
            from = from.min(t.first_seen);
            to = to.max(t.last_seen);
        }
        for g in &d.gaps {
            from = from.min(g.from);
            to = to.max(g.to);
        }
        for o in &d.overlaps {
            from = from.min(o.from);
            to = to.max(o.to);
        }
    }
    (from, to)
}

/// The lanes' labels' width: the longest holder, at most a third of the pane.
fn label_width(session: &Derived, rebuilt: Option<&Derived>, inner_w: u16) -> u16 {
    let longest = [Some(session), rebuilt]
        .into_iter()
        .flatten()
        .flat_map(|d| d.tenures.iter().map(|t| t.holder.chars().count()))
        .chain([NOBODY_LANE.chars().count()])
        .max()
        .unwrap_or(0);
    (longest as u16).min(inner_w / 3).max(4)
}

/// `s` in exactly `w` columns: cut with `…`, or padded.
fn fit(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        format!("{s:<w$}")
    } else {
        let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// The axis: the window's start, middle and end, where they fit.
fn axis_line(axis: &Axis, label_w: u16) -> Line<'static> {
    let mut cells = vec![' '; axis.width];
    let mut put = |at: usize, s: &str| {
        let s: Vec<char> = s.chars().collect();
        if at + s.len() <= cells.len() && cells[at..at + s.len()].iter().all(|c| *c == ' ') {
            cells[at..at + s.len()].copy_from_slice(&s);
        }
    };
    let start = format!("├{}", hms(axis.start));
    let end = format!("{}┤", hms(axis.end));
    put(0, &start);
    put(axis.width.saturating_sub(end.chars().count()), &end);
    let mid = axis.start + (axis.end - axis.start) / 2;
    let m = format!("┼{}", hms(mid));
    if axis.width >= 3 * m.chars().count() {
        put(axis.width / 2, &m);
    }
    Line::from(format!(
        "{} {}",
        " ".repeat(usize::from(label_w)),
        cells.into_iter().collect::<String>()
    ))
}

/// One lane per holder of `d` (first seen first), then one for the time
/// nobody held it: tenures as bars, overlaps over them, takeovers as marks
/// with the operator.
fn lanes(d: &Derived, axis: &Axis, label_w: u16, out: &mut Vec<Line<'static>>) {
    if d.tenures.is_empty() && d.gaps.is_empty() {
        out.push(Line::styled("  no holder seen", nobody_style()));
        return;
    }
    let mut holders: Vec<&str> = Vec::new();
    for t in &d.tenures {
        if !holders.contains(&t.holder.as_str()) {
            holders.push(&t.holder);
        }
    }
    for h in holders {
        let mut cells: Vec<(char, Style)> = vec![(' ', Style::default()); axis.width];
        let mut paint = |r: std::ops::RangeInclusive<usize>, c: char, s: Style| {
            for x in r {
                cells[x] = (c, s);
            }
        };
        for t in d.tenures.iter().filter(|t| t.holder == h) {
            if let Some(r) = axis.cells(t.first_seen, t.last_seen) {
                paint(r, BAR, bar_style());
            }
        }
        for o in d.overlaps.iter().filter(|o| o.earlier == h || o.later == h) {
            if let Some(r) = axis.cells(o.from, o.to) {
                paint(r, OVERLAP, overlap_style());
            }
        }
        // Takeovers that gave this holder the lease: a mark, the operator after it.
        for t in &d.tenures {
            if let Ending::Replaced {
                at,
                by,
                takeover: Some(tk),
                ..
            } = &t.ending
            {
                if by != h || *at < axis.start || *at > axis.end {
                    continue;
                }
                let x = axis.cell(*at);
                cells[x] = (TAKEOVER, takeover_style());
                for (i, c) in tk.operator.chars().enumerate() {
                    match cells.get_mut(x + 1 + i) {
                        Some(cell) if cell.0 != TAKEOVER => *cell = (c, takeover_style()),
                        _ => break,
                    }
                }
            }
        }
        out.push(lane_line(h, label_w, cells));
    }
    if !d.gaps.is_empty() {
        let mut cells: Vec<(char, Style)> = vec![(' ', Style::default()); axis.width];
        for g in &d.gaps {
            if let Some(r) = axis.cells(g.from, g.to) {
                for x in r {
                    cells[x] = (NOBODY, nobody_style());
                }
            }
        }
        out.push(lane_line(NOBODY_LANE, label_w, cells));
    }
}

/// A lane: its label, then its cells, runs of one style as one span.
fn lane_line(label: &str, label_w: u16, cells: Vec<(char, Style)>) -> Line<'static> {
    let mut spans = vec![Span::raw(format!("{} ", fit(label, usize::from(label_w))))];
    let mut run = String::new();
    let mut style = Style::default();
    for (c, s) in cells {
        if s != style && !run.is_empty() {
            spans.push(Span::styled(std::mem::take(&mut run), style));
        }
        style = s;
        run.push(c);
    }
    if !run.is_empty() {
        spans.push(Span::styled(run, style));
    }
    Line::from(spans)
}

/// What the marks mean.
fn legend() -> Line<'static> {
    Line::from(vec![
        Span::styled(BAR.to_string(), bar_style()),
        Span::raw(" holder  "),
        Span::styled(NOBODY.to_string(), nobody_style()),
        Span::raw(" no holder  "),
        Span::styled(OVERLAP.to_string(), overlap_style()),
        Span::raw(" overlap (two could write)  "),
        Span::styled(TAKEOVER.to_string(), takeover_style()),
        Span::raw(" takeover, by operator"),
    ])
}
