//! The detail pane: the selected lease's record, raw body, sentence and holder history.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use super::{exclusion_name, state_style};
use crate::clock::shown;
use crate::snapshot::PrefixReport;
use crate::text::lookalike_note;
use crate::text::{format_secs, sanitize};
use crate::tui::app::{terminal_safe, App, LeaseRow};
use crate::tui::layout;

/// The detail pane: everything known about the selected prefix. Its text
/// scrolls (PgUp/PgDn); what lies above or below the lines shown is said on
/// the pane's border (`↑ N more`, `↓ N more · PgDn`), never cut silently.
pub(super) fn render_detail(app: &App, f: &mut Frame, area: Rect) {
    let Some((details, side, lines, timeline)) = detail_parts(app, area) else {
        f.render_widget(
            Block::default().borders(Borders::ALL).title(" details "),
            area,
        );
        return;
    };
    let scroll = app.leases().detail_scroll();
    f.render_widget(
        scrolled(lines, " details (Enter closes) ", details, scroll),
        details,
    );
    if let (Some(h), Some(timeline)) = (side, timeline) {
        f.render_widget(
            scrolled(timeline, " holder history (this session, UTC) ", h, scroll),
            h,
        );
    }
}

/// The detail pane's areas and texts: the details (with the holder history
/// under them on a narrow screen), and the holder history beside them on a
/// wide one. `None` when no row is selected.
#[allow(clippy::type_complexity)]
fn detail_parts(
    app: &App,
    area: Rect,
) -> Option<(
    Rect,
    Option<Rect>,
    Vec<Line<'static>>,
    Option<Vec<Line<'static>>>,
)> {
    let (r, p) = app.selected_lease()?;
    let mut lines = detail_lines(app, r, p);
    let url = app.snapshot().and_then(|s| s.targets.get(r.target));
    let timeline = history_lines(app, url.map(|t| t.url.as_str()), p);
    let (details, side) = layout::detail(area);
    if side.is_none() {
        lines.extend(timeline);
        return Some((details, None, lines, None));
    }
    Some((details, side, lines, Some(timeline)))
}

/// How many lines the detail pane's text takes wrapped, and how many it
/// shows (the longer of its two parts on a wide screen): the event loop
/// tells the console after each frame, so PgDn stops at the last page.
pub fn detail_extent(app: &App, screen: Rect) -> Option<(u16, u16)> {
    if !app.leases().detail() {
        return None;
    }
    let s = layout::screen(screen, app.error_height());
    let (_, pane) = layout::leases(s.body, app.detail_height());
    let (details, side, lines, timeline) = detail_parts(app, pane)?;
    let count = |lines: Vec<Line<'static>>, a: Rect| {
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .line_count(a.width.saturating_sub(2)) as u16
    };
    let mut total = count(lines, details);
    if let (Some(h), Some(t)) = (side, timeline) {
        total = total.max(count(t, h));
    }
    Some((total, details.height.saturating_sub(2)))
}

/// `lines` in a bordered box titled `title`, wrapped, from line `scroll`
/// (kept inside the text); the border says how many lines lie above and
/// below what is shown.
fn scrolled(lines: Vec<Line<'static>>, title: &str, area: Rect, scroll: u16) -> Paragraph<'static> {
    let inner = area.height.saturating_sub(2);
    let p = Paragraph::new(lines).wrap(Wrap { trim: false });
    let total = p.line_count(area.width.saturating_sub(2)) as u16;
    let scroll = scroll.min(total.saturating_sub(inner));
    let below = total.saturating_sub(scroll + inner);
    let mark = Style::default()
        .fg(Color::Yellow)
        .add_modifier(Modifier::BOLD);
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(title.to_owned());
    if scroll > 0 {
        block =
            block.title(Line::styled(format!(" ↑ {scroll} more · PgUp "), mark).right_aligned());
    }
    if below > 0 {
        block = block
            .title_bottom(Line::styled(format!(" ↓ {below} more · PgDn "), mark).right_aligned());
    }
    p.scroll((scroll, 0)).block(block)
}

/// The detail pane's own lines: the key, the judgement and its sentence, the
/// audit entries, the record, the clocks, the exclusion and the raw body.
fn detail_lines(app: &App, r: LeaseRow, p: &PrefixReport) -> Vec<Line<'static>> {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let kv =
        |k: &str, v: String| Line::from(vec![Span::styled(format!("{k:<14}"), bold), Span::raw(v)]);
    let mut lines = vec![
        kv("target", sanitize(&app.settings.target_url(r.target))),
        kv("key", sanitize(&p.key)),
    ];
    if let Some(note) = lookalike_note(&p.prefix) {
        lines.push(Line::from(vec![
            Span::styled(format!("{:<14}", "LOOK-ALIKE"), bold.fg(Color::Yellow)),
            Span::raw(note),
        ]));
    }
    lines.push(Line::from(vec![
        Span::styled(format!("{:<14}", "judgement"), bold),
        Span::styled(p.state.as_str(), state_style(p.state)),
        Span::raw(format!(": {}", p.explanation(app.now()))),
    ]));
    // A malformed body right under its judgement, wrapped whole up to 400
    // characters (a torn write is at its end), so the pane's edge never cuts it.
    if let Some(raw) = &p.raw {
        // `raw` is already escaped (as in --json): shown as is, not escaped twice.
        let cut: String = raw.chars().take(400).collect();
        let more = if raw.chars().count() > 400 { "…" } else { "" };
        lines.push(kv("raw body", format!("{}{more}", terminal_safe(&cut))));
    }
    // The audit entries right under the judgement: a takeover's outcome
    // stays readable here after its message left the status bar.
    let entries = app.audit_for(r.target, p, 3);
    if entries.is_empty() {
        lines.push(kv("audit", "no takeover recorded here".into()));
    }
    for e in entries {
        lines.push(kv(
            "audit",
            format!(
                "{} {} {} — {}{}",
                // One form of time in the pane: RFC 3339, as the record's.
                shown(e.time),
                e.phase,
                sanitize(&e.operator),
                sanitize(&e.reason),
                e.outcome
                    .as_deref()
                    .map(|o| format!(" → {}", sanitize(o)))
                    .unwrap_or_default()
            ),
        ));
    }
    if let Some(rec) = &p.record {
        lines.push(kv("instance_id", sanitize(&rec.instance_id)));
        lines.push(kv("acquired_at", shown(rec.acquired_at)));
        lines.push(kv("renewed_at", shown(rec.renewed_at)));
        lines.push(kv("ttl_s", rec.ttl_s.to_string()));
        if let Some(at) = rec.released_at {
            lines.push(kv("released_at", shown(at)));
        }
        // The fencing token; `-` for a record without one (unknown).
        lines.push(kv(
            "generation",
            rec.generation
                .map_or_else(|| "-".to_owned(), |g| g.to_string()),
        ));
    }
    lines.push(kv("ETag", p.etag.clone().unwrap_or_else(|| "-".into())));
    lines.push(kv(
        "Last-Modified",
        p.last_modified
            .map(|t| format!("{} (server clock)", shown(t)))
            .unwrap_or_else(|| "-".into()),
    ));
    if p.age_unknown {
        lines.push(Line::from(vec![
            Span::styled(format!("{:<14}", "AGE UNKNOWN"), bold.fg(Color::Red)),
            Span::raw(sanitize(p.problem.as_deref().unwrap_or_default())),
        ]));
    }
    if let Some(t) = app.snapshot().and_then(|s| s.targets.get(r.target)) {
        if let Some(o) = t.server_offset_s {
            lines.push(kv(
                "reader clock",
                format!(
                    "service clock {o:+.1} s ±{:.1} s from this host's (from the service's Date headers)",
                    t.server_offset_error_s.unwrap_or(0.0)
                ),
            ));
        }
    }
    if let Some(s) = p.holder_skew_s {
        lines.push(kv(
            "holder skew",
            format!(
                "{s:+.1} s (renewed_at − Last-Modified, ±1 s): the holder's clock vs the server's"
            ),
        ));
    }
    lines.push(kv(
        "exclusion",
        exclusion_name(app.exclusion_of(r.target, p)).into(),
    ));
    // How long this ETag has been seen; nothing when there is none.
    if p.etag.is_some() {
        let watched = app.watched_for(p);
        lines.push(kv("ETag seen for", format_secs(watched.as_secs_f64())));
    }
    lines
}

/// The selected prefix's holder changes seen this session, newest first:
/// `HH:MM:SSZ how: previous → holder, generation 7 → 8` (the generations
/// when either record has one), a takeover with its audit entry.
fn history_lines(app: &App, url: Option<&str>, p: &PrefixReport) -> Vec<Line<'static>> {
    use crate::snapshot::history::ChangeKind;
    let changes = url
        .and_then(|u| app.session().history().get(u, &p.prefix))
        .map(|h| h.changes.iter().rev().collect::<Vec<_>>())
        .unwrap_or_default();
    if changes.is_empty() {
        return vec![Line::from("no holder seen yet")];
    }
    let none = || "(none)".to_owned();
    changes
        .into_iter()
        .map(|c| {
            let style = match c.kind {
                ChangeKind::Unexpected => {
                    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
                }
                ChangeKind::Takeover | ChangeKind::Handover => Style::default().fg(Color::Cyan),
                ChangeKind::Expiry | ChangeKind::Release => Style::default().fg(Color::Yellow),
                ChangeKind::FirstSeen | ChangeKind::Acquired => Style::default(),
            };
            // Holders in the history are escaped already.
            let who = match c.kind {
                ChangeKind::FirstSeen => c.holder.clone().unwrap_or_else(none),
                _ => format!(
                    "{} → {}",
                    c.previous.clone().unwrap_or_else(none),
                    c.holder.clone().unwrap_or_else(none)
                ),
            };
            let mut spans = vec![
                Span::raw(format!("{} ", c.at.format("%H:%M:%SZ"))),
                Span::styled(c.kind.as_str(), style),
                Span::raw(format!(": {who}")),
            ];
            if let Some(g) = c.generation_text() {
                spans.push(Span::raw(format!(", {g}")));
            }
            if let Some(a) = &c.audit {
                spans.push(Span::raw(format!(" (audit: {a})")));
            }
            Line::from(spans)
        })
        .collect()
}
