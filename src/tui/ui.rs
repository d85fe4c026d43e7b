//! Drawing. Pure: every function takes `&App` and a frame; nothing here changes state.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::app::{terminal_safe, App, Field, Mode, SortKey, ThenChoice, View, BINDINGS};
use super::layout;
use crate::bucket::{format_secs, LeaseState};
use crate::snapshot::ExclusionReport;
use crate::text::sanitize;
use crate::writer::scan::{DutyView, LockFileState, LockState, ProcessInfo, VerdictKind};

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
        LockState::Unknown => Style::default().fg(Color::Magenta),
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
        | VerdictKind::ArmedHoldsNothing
        | VerdictKind::OrphanedWriter => Color::Red,
        VerdictKind::StrayStamp | VerdictKind::Waiting => Color::Yellow,
    };
    Style::default().fg(c)
}

/// Width of the pod view's LOCK column, in cells.
const LOCK_WIDTH: u16 = 12;

/// The lock column: `holds`, `none`, or `open` with the longest it may have
/// waited (in a form that fits the column, [`fit_secs`]).
pub fn lock_text(p: &ProcessInfo) -> String {
    match p.lock {
        LockState::Holds => "holds".into(),
        LockState::None => "none".into(),
        LockState::Unknown => "unknown".into(),
        LockState::Open => match p.waiting_s {
            Some(s) => format!("open ≤{}", fit_secs(s as f64, LOCK_WIDTH - 6, false)),
            None => "open".into(),
        },
    }
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
    match app.view {
        View::Leases => {
            let (table, detail) = layout::leases(body, app.detail_height());
            render_table(app, f, table);
            if app.detail {
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
                format!("error: {}", sanitize(e)),
                Style::default().fg(Color::Red),
            )
        })
        .collect();
    f.render_widget(Paragraph::new(err_lines), errs);
    render_status(app, f, status);
    match &app.mode {
        Mode::Help => render_help(app, f, area),
        Mode::Takeover(d) => render_dialog(app, d, f, area),
        Mode::ConfirmQuit => render_confirm_quit(app, f, area),
        Mode::ConfirmProbe { target } => render_confirm_probe(app, *target, f, area),
        _ => {}
    }
}

fn render_header(app: &App, f: &mut Frame, area: Rect) {
    let mode = if app.read_only {
        Span::styled(
            " WATCH (read-only) ",
            Style::default().bg(Color::Blue).fg(Color::White),
        )
    } else {
        let ex = match app.exclusion {
            crate::bucket::Exclusion::Conditional => "conditional",
            crate::bucket::Exclusion::BestEffort => "BEST-EFFORT",
        };
        Span::styled(
            format!(" OPS · {ex} "),
            Style::default().bg(Color::Red).fg(Color::White),
        )
    };
    // The refresh and "now" are two readings of the clock (by the refresher
    // and at the last tick), and the wall clock can step back: "ago" is never
    // negative.
    let last = app.last_refresh.map(|t| {
        let ago = format_secs((app.now - t).num_milliseconds().max(0) as f64 / 1000.0);
        (t.format("%H:%M:%SZ").to_string(), ago)
    });
    let last_forms = match &last {
        Some((t, ago)) => vec![
            vec![Span::raw(format!("  last refresh {t} ({ago} ago)"))],
            vec![Span::raw(format!("  refreshed {ago} ago"))],
            vec![],
        ],
        None => vec![vec![Span::raw("  gathering…")]],
    };
    let mut parts = vec![
        vec![vec![
            Span::styled("leasectl ", Style::default().add_modifier(Modifier::BOLD)),
            mode,
        ]],
        vec![
            vec![Span::raw(format!(
                "  refresh {}",
                humantime::format_duration(app.refresh)
            ))],
            vec![],
        ],
        last_forms,
        vec![
            vec![Span::raw(format!(
                "  clock {}",
                app.now.format("%Y-%m-%d %H:%M:%SZ")
            ))],
            vec![Span::raw(format!(
                "  clock {}",
                app.now.format("%H:%M:%SZ")
            ))],
            vec![],
        ],
    ];
    // This reader's clock against the service's: every age depends on it.
    if let Some(snap) = &app.snapshot {
        if let Some(o) = snap.reader_clock.server_offset_s {
            let untrusted = snap
                .targets
                .iter()
                .flat_map(|t| &t.prefixes)
                .any(|p| p.age_unknown);
            let text = format!(
                "  service clock {o:+.1}s ±{:.1}s",
                snap.reader_clock.server_offset_error_s.unwrap_or(0.0)
            );
            parts.push(if untrusted {
                // The warning gives way last, and only to a shorter form.
                let red = Style::default().bg(Color::Red).fg(Color::White);
                vec![
                    vec![Span::styled(
                        format!("{text} — CLOCK OFF: ages unknown, fix NTP "),
                        red,
                    )],
                    vec![Span::styled(" CLOCK OFF: fix NTP ", red)],
                ]
            } else {
                vec![
                    vec![Span::raw(text)],
                    vec![Span::raw(format!("  service {o:+.1}s"))],
                    vec![],
                ]
            });
        } else if snap.targets.iter().any(|t| t.server_clock_note.is_some()) {
            // A service whose answers give no usable Date: ages are judged
            // by this host's clock alone.
            // Like the clock warning, it gives way only to a shorter form.
            let yellow = Style::default().fg(Color::Yellow);
            parts.push(vec![
                vec![Span::styled(
                    "  service clock unknown (no usable Date header) ",
                    yellow,
                )],
                vec![Span::styled("  service clock unknown ", yellow)],
            ]);
        }
    }
    // Least important first: the date, the refresh interval, the clock, the
    // service clock's error, the last refresh's time, then the rest.
    let line1 = fit_line(&parts, &[3, 1, 3, 4, 2, 2, 4], usize::from(area.width));
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
                // Each target with where its requests go (endpoint, region,
                // addressing), as k9s shows its context, once gathered.
                let shown: Vec<String> = app
                    .targets
                    .iter()
                    .enumerate()
                    .map(
                        |(i, t)| match app.snapshot.as_ref().and_then(|s| s.targets.get(i)) {
                            Some(r) if r.endpoint != "local" => format!("{t} @ {}", r.endpoint),
                            _ => t.clone(),
                        },
                    )
                    .collect();
                sanitize(&shown.join("  "))
            }
        )),
    ]);
    f.render_widget(Paragraph::new(vec![line1, line2]), area);
}

/// The lease table's columns that fit `inner` cells: PREFIX and HOLDER always,
/// the others dropped lowest priority first (skew, exclusion, TTL, expires,
/// age), then the widths: fixed ones, and what is left split 3:2 between
/// PREFIX and HOLDER.
pub fn lease_columns(inner: u16) -> Vec<(SortKey, u16)> {
    const FIXED: [(SortKey, u16); 6] = [
        (SortKey::Age, 8),
        (SortKey::Ttl, 12),
        (SortKey::Expires, 9),
        (SortKey::State, 10),
        (SortKey::Exclusion, 12),
        (SortKey::Skew, 6),
    ];
    const DROP: [SortKey; 5] = [
        SortKey::Skew,
        SortKey::Exclusion,
        SortKey::Ttl,
        SortKey::Expires,
        SortKey::Age,
    ];
    const NAMES_MIN: u16 = 12 + 12;
    let mut kept: Vec<(SortKey, u16)> = FIXED.to_vec();
    let need = |k: &[(SortKey, u16)]| k.iter().map(|c| c.1 + 1).sum::<u16>() + NAMES_MIN + 1;
    for d in DROP {
        if need(&kept) <= inner {
            break;
        }
        kept.retain(|c| c.0 != d);
    }
    let names = inner.saturating_sub(kept.iter().map(|c| c.1 + 1).sum::<u16>() + 1);
    let prefix = (names * 3 / 5).max(1);
    let holder = names.saturating_sub(prefix).max(1);
    let mut cols = vec![(SortKey::Prefix, prefix), (SortKey::Holder, holder)];
    cols.extend(kept);
    cols
}

/// `text` cut to `width` columns, with `…` when cut.
fn ellipsize(text: &str, width: u16) -> String {
    let width = usize::from(width);
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn render_table(app: &App, f: &mut Frame, area: Rect) {
    let page = usize::from(area.height.saturating_sub(3)).max(1);
    let n = app.row_count();
    let offset = app.offset.min(n.saturating_sub(1));
    let columns = lease_columns(area.width.saturating_sub(2));
    let width_of = |k: SortKey| columns.iter().find(|c| c.0 == k).map(|c| c.1).unwrap_or(0);
    let rows: Vec<Row> = (offset..n.min(offset + page))
        .filter_map(|i| app.lease_row(i).map(|(r, p)| (i, r, p)))
        .map(|(i, r, p)| {
            let cells: Vec<Cell> = columns
                .iter()
                .map(|(k, _)| lease_cell(app, r, p, *k, width_of(*k)))
                .collect();
            let row = Row::new(cells);
            if i == app.selected {
                row.style(Style::default().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        })
        .collect();
    let total = app.total_rows();
    let mut title = if total == 0 {
        " leases (none found) ".to_owned()
    } else if n == 0 {
        format!(" leases 0/{total} ")
    } else {
        format!(" leases {}/{} ", app.selected + 1, n)
    };
    // Rows arrive while the first listing and reads are still going on.
    if let Some((read, known, listed)) = app.loading {
        title.push_str(&format!(
            "· loading: {read} of {known}{} read ",
            if listed { "" } else { "+ (listing)" }
        ));
    }
    if !app.filter.is_empty() || matches!(app.mode, Mode::Filter) {
        let cursor = if matches!(app.mode, Mode::Filter) {
            "▏"
        } else {
            ""
        };
        title.push_str(&format!(
            "· filter /{}{cursor} ({n} of {total}) ",
            sanitize(&app.filter)
        ));
    }
    let header: Vec<Cell> = columns
        .iter()
        .map(|(k, _)| {
            if *k == app.sort {
                Cell::from(format!("{}▼", k.column()))
            } else {
                Cell::from(k.column())
            }
        })
        .collect();
    let widths: Vec<Constraint> = columns.iter().map(|c| Constraint::Length(c.1)).collect();
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(Style::default().add_modifier(Modifier::BOLD)))
        .block(Block::default().borders(Borders::ALL).title(title));
    f.render_widget(table, area);
}

/// How a row names its prefix: the prefix, `(root)` for a lease at the
/// target itself, and the target's short name first when several are open.
pub fn prefix_label(app: &App, target: usize, prefix: &str) -> String {
    let p = if prefix.is_empty() { "(root)" } else { prefix };
    if app.targets.len() > 1 {
        format!(
            "{} {p}",
            target_short_name(app.targets.get(target).map(String::as_str).unwrap_or("?"))
        )
    } else {
        p.to_owned()
    }
}

/// A target's short name: the bucket of `s3://bucket/path/`, the last
/// directory of `file:///dir/name/`.
pub fn target_short_name(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("s3://") {
        return format!("{}:", rest.split('/').next().unwrap_or(rest));
    }
    let path = url.trim_start_matches("file://").trim_end_matches('/');
    format!("{}:", path.rsplit('/').next().unwrap_or(path))
}

fn lease_cell<'a>(
    app: &App,
    r: super::app::LeaseRow,
    p: &'a crate::snapshot::PrefixReport,
    k: SortKey,
    width: u16,
) -> Cell<'a> {
    let dash = || "-".to_owned();
    match k {
        SortKey::Prefix => {
            let held = if app.held.contains(&p.key) {
                "◆ "
            } else {
                ""
            };
            Cell::from(ellipsize(
                &format!(
                    "{held}{}",
                    sanitize(&prefix_label(app, r.target, &p.prefix))
                ),
                width,
            ))
        }
        SortKey::Holder => Cell::from(ellipsize(
            &p.record
                .as_ref()
                .map(|r| sanitize(&r.instance_id))
                .unwrap_or_else(dash),
            width,
        )),
        // Numbers are never cut: a value too long for its column is shown in
        // a coarser unit (fit_secs).
        SortKey::Age => Cell::from(
            p.age_s
                .map(|a| fit_secs(a, width, false))
                .unwrap_or_else(dash),
        ),
        // The TTL and a gauge of the age against it: a holder renewing on
        // schedule (every TTL/3) keeps it in its first third. A TTL too long
        // for the column with its gauge is shown without it.
        SortKey::Ttl => match &p.record {
            Some(r) => {
                let plain = format!("{}s", r.ttl_s);
                let ttl = format!("{plain:<5}");
                let gauge = usize::from(width) >= ttl.chars().count() + 7;
                match p.age_s.filter(|_| {
                    gauge
                        && !p.age_unknown
                        && matches!(p.state, LeaseState::Fresh | LeaseState::Stale)
                }) {
                    _ if plain.chars().count() > usize::from(width) => {
                        Cell::from(fit_secs(r.ttl_s as f64, width, false))
                    }
                    Some(age) => {
                        let (bar, style) = ttl_gauge(age, r.ttl_s, 6);
                        Cell::from(Line::from(vec![
                            Span::raw(format!("{ttl} ")),
                            Span::styled(bar, style),
                        ]))
                    }
                    None => Cell::from(ttl),
                }
            }
            None => Cell::from(dash()),
        },
        // Time left only means something for a lease judged on its age.
        SortKey::Expires => Cell::from(match p.state {
            LeaseState::Fresh | LeaseState::Stale => p
                .expires_in_s
                .map(|x| fit_secs(x, width, false))
                .unwrap_or_else(dash),
            _ => dash(),
        }),
        SortKey::State => Cell::from(Span::styled(p.state.as_str(), state_style(p.state))),
        SortKey::Exclusion => {
            let ex = app.exclusion_of(r.target, p);
            Cell::from(Span::styled(exclusion_name(ex), exclusion_style(ex)))
        }
        SortKey::Skew => Cell::from(
            p.holder_skew_s
                .map(|s| fit_secs(s.round(), width, s >= 0.0))
                .unwrap_or_else(dash),
        ),
    }
}

/// The age as a share of the TTL in `cells` cells (eighth blocks, `·` for
/// the empty part), and its colour: green up to 40 % (a holder renews every
/// TTL/3), yellow above (renewals are late), red once the TTL has run out.
pub fn ttl_gauge(age_s: f64, ttl_s: u64, cells: usize) -> (String, Style) {
    const EIGHTHS: [char; 8] = ['▏', '▎', '▍', '▌', '▋', '▊', '▉', '█'];
    let ratio = if ttl_s == 0 {
        1.0
    } else {
        (age_s / ttl_s as f64).clamp(0.0, 1.0)
    };
    let filled = (ratio * (cells * 8) as f64).round() as usize;
    let mut bar = "█".repeat(filled / 8);
    if !filled.is_multiple_of(8) {
        bar.push(EIGHTHS[filled % 8 - 1]);
    }
    while bar.chars().count() < cells {
        bar.push('·');
    }
    let colour = if age_s >= ttl_s as f64 {
        Color::Red
    } else if ratio > 0.4 {
        Color::Yellow
    } else {
        Color::Green
    };
    (bar, Style::default().fg(colour))
}

/// The exclusion as written in the table and in `--json`.
pub fn exclusion_name(e: ExclusionReport) -> &'static str {
    match e {
        ExclusionReport::Conditional => "conditional",
        ExclusionReport::BestEffort => "best_effort",
        ExclusionReport::Ignored => "IGNORED",
        ExclusionReport::Unprobed => "unprobed",
        ExclusionReport::Error => "probe error",
    }
}

fn exclusion_style(e: ExclusionReport) -> Style {
    match e {
        ExclusionReport::Conditional => Style::default().fg(Color::Green),
        ExclusionReport::BestEffort | ExclusionReport::Error => Style::default().fg(Color::Yellow),
        ExclusionReport::Ignored => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        ExclusionReport::Unprobed => Style::default().fg(Color::DarkGray),
    }
}

/// The detail pane: everything known about the selected prefix.
fn render_detail(app: &App, f: &mut Frame, area: Rect) {
    let Some((r, p)) = app.selected_lease() else {
        f.render_widget(
            Block::default().borders(Borders::ALL).title(" details "),
            area,
        );
        return;
    };
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let kv =
        |k: &str, v: String| Line::from(vec![Span::styled(format!("{k:<14}"), bold), Span::raw(v)]);
    let mut lines = vec![
        kv(
            "target",
            sanitize(app.targets.get(r.target).map(String::as_str).unwrap_or("?")),
        ),
        kv("key", sanitize(&p.key)),
    ];
    if let Some(note) = crate::text::lookalike_note(&p.prefix) {
        lines.push(Line::from(vec![
            Span::styled(format!("{:<14}", "LOOK-ALIKE"), bold.fg(Color::Yellow)),
            Span::raw(note),
        ]));
    }
    lines.push(Line::from(vec![
        Span::styled(format!("{:<14}", "judgement"), bold),
        Span::styled(p.state.as_str(), state_style(p.state)),
        Span::raw(format!(": {}", p.explanation(app.now))),
    ]));
    if let Some(rec) = &p.record {
        lines.push(kv("instance_id", sanitize(&rec.instance_id)));
        lines.push(kv("acquired_at", rec.acquired_at.to_rfc3339()));
        lines.push(kv("renewed_at", rec.renewed_at.to_rfc3339()));
        lines.push(kv("ttl_s", rec.ttl_s.to_string()));
    }
    lines.push(kv("ETag", p.etag.clone().unwrap_or_else(|| "-".into())));
    lines.push(kv(
        "Last-Modified",
        p.last_modified
            .map(|t| format!("{} (server clock)", t.to_rfc3339()))
            .unwrap_or_else(|| "-".into()),
    ));
    if p.age_unknown {
        lines.push(Line::from(vec![
            Span::styled(format!("{:<14}", "AGE UNKNOWN"), bold.fg(Color::Red)),
            Span::raw(sanitize(p.problem.as_deref().unwrap_or_default())),
        ]));
    }
    if let Some(t) = app.snapshot.as_ref().and_then(|s| s.targets.get(r.target)) {
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
    let watched = app.watched_for(&p.key);
    lines.push(kv("ETag seen for", format_secs(watched.as_secs_f64())));
    if let Some(raw) = &p.raw {
        // `raw` is already escaped (as in --json): shown as is, not escaped twice.
        let cut: String = raw.chars().take(400).collect();
        let more = if raw.chars().count() > 400 { "…" } else { "" };
        lines.push(kv("raw body", format!("{}{more}", terminal_safe(&cut))));
    }
    let entries = app.audit_for(r.target, p, 3);
    if entries.is_empty() {
        lines.push(kv("audit", "no takeover recorded here".into()));
    }
    for e in entries {
        lines.push(kv(
            "audit",
            format!(
                "{} {} {} — {}{}",
                e.time.format("%Y-%m-%d %H:%M:%SZ"),
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
    // The holder history beside the details when there is room, else under them.
    let url = app.snapshot.as_ref().and_then(|s| s.targets.get(r.target));
    let timeline = history_lines(app, url.map(|t| t.url.as_str()), p);
    let (details, side) = if area.width >= 100 {
        let [d, h] = ratatui::layout::Layout::horizontal([
            Constraint::Percentage(58),
            Constraint::Percentage(42),
        ])
        .areas(area);
        (d, Some(h))
    } else {
        (area, None)
    };
    if side.is_none() {
        lines.extend(timeline.iter().cloned());
    }
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" details (Enter closes) "),
        ),
        details,
    );
    if let Some(h) = side {
        f.render_widget(
            Paragraph::new(timeline).wrap(Wrap { trim: false }).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" holder history (this session, UTC) "),
            ),
            h,
        );
    }
}

/// The selected prefix's holder changes seen this session, newest first:
/// `HH:MM:SSZ how: previous → holder`, a takeover with its audit entry.
fn history_lines(
    app: &App,
    url: Option<&str>,
    p: &crate::snapshot::PrefixReport,
) -> Vec<Line<'static>> {
    use crate::snapshot::history::ChangeKind;
    let changes = url
        .and_then(|u| app.history.get(u, &p.prefix))
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
                ChangeKind::Takeover => Style::default().fg(Color::Cyan),
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
            if let Some(a) = &c.audit {
                spans.push(Span::raw(format!(" (audit: {a})")));
            }
            Line::from(spans)
        })
        .collect()
}

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
fn render_help(app: &App, f: &mut Frame, area: Rect) {
    let shown: Vec<_> = BINDINGS
        .iter()
        .filter(|b| !b.keys.is_empty())
        .filter(|b| !(app.read_only && b.writes))
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
    lines.push(Line::from(if app.read_only {
        "WATCH mode: the stores are read-only; no key writes.".to_owned()
    } else {
        "OPS mode: p and t write (a scratch key; the LEASE), always after a confirmation."
            .to_owned()
    }));
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

/// A centred box just large enough for `lines` (with borders), wrapped to
/// the screen's width when they are longer; never larger than `area`.
fn fitted(area: Rect, lines: &[Line]) -> Rect {
    let longest = lines.iter().map(|l| l.width()).max().unwrap_or(0) as u16;
    let w = (longest + 2).min(area.width);
    let inner = usize::from(w.saturating_sub(2)).max(1);
    let h: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner)).sum();
    centred(area, w, (h as u16).saturating_add(2))
}

fn render_confirm_quit(app: &App, f: &mut Frame, area: Rect) {
    let mut lines = vec![Line::from(format!(
        "This console holds {} lease(s):",
        app.held.len()
    ))];
    for k in &app.held {
        lines.push(Line::from(format!("  {}", sanitize(k))));
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
fn render_confirm_probe(app: &App, target: usize, f: &mut Frame, area: Rect) {
    let url = sanitize(app.targets.get(target).map(String::as_str).unwrap_or("?"));
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let lines = vec![
        Line::styled("Probe this target's service?", bold),
        Line::from(format!("target   {url}")),
        Line::from(""),
        Line::from("It writes a scratch key, then removes it:"),
        Line::from(format!("  {url}.leasectl-probe/{{random id}}")),
        Line::from("  (and ….absent next to it): conditional PUTs and DELETEs"),
        Line::from("  with If-None-Match and If-Match, seven steps."),
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

/// The takeover dialog: exactly what will be replaced; focus starts on Cancel.
fn render_dialog(app: &App, d: &super::app::TakeoverDialog, f: &mut Frame, area: Rect) {
    let room = usize::from(area.width.min(76)).saturating_sub(30).max(8);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let focus = |x: Field| {
        if d.focus == x {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        }
    };
    let mut lines = vec![
        Line::from(vec![Span::styled("Replace this lease?", bold)]),
        Line::from(format!(
            "target   {}",
            sanitize(
                app.targets
                    .get(d.row.target)
                    .map(String::as_str)
                    .unwrap_or("?")
            )
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
    ];
    if let Some(n) = crate::text::lookalike_note(&d.prefix) {
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
    if let Some(p) = &d.problem {
        lines.push(Line::styled(
            terminal_safe(p).into_owned(),
            Style::default().fg(Color::Red),
        ));
    }
    if d.pending {
        lines.push(Line::from(
            "working… (probe, audit intent, conditional PUT)",
        ));
    }
    lines.push(Line::styled(
        "Tab/↑/↓ field · ←/→ choose · Enter select · Esc cancel",
        Style::default().fg(Color::DarkGray),
    ));
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

/// The pod view: verdicts on top, the process tree, the selected process's
/// duty sentence. Only the visible rows are built.
fn render_pod(app: &App, f: &mut Frame, area: Rect) {
    let notices = app.notice_lines(area.width.saturating_sub(2));
    let (verdicts, table, detail) = layout::pod(area, notices.len() as u16);

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
                Cell::from(Span::styled(p.duty.as_str(), duty_style(p.duty))),
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
            match l.state {
                LockFileState::HeldOutsideNamespace => "held outside this PID namespace".to_owned(),
                LockFileState::Unknown => "unknown".to_owned(),
                LockFileState::Free => "free".to_owned(),
                LockFileState::Held => "locked, holder not visible".to_owned(),
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

/// Two lines: the last result (full width, it may name a path), then the key
/// hints (ordered by importance, from the key table) and the request rate.
fn render_status(app: &App, f: &mut Frame, area: Rect) {
    let message = match &app.message {
        Some((msg, err)) => {
            let style = if *err {
                Style::default().fg(Color::Red)
            } else {
                Style::default().fg(Color::Cyan)
            };
            // Escaped once where it was made: drawn as is (terminal_safe only
            // escapes what would still reach the terminal raw).
            Line::styled(terminal_safe(msg).into_owned(), style)
        }
        None => Line::from(""),
    };
    let mut hints: Vec<_> = BINDINGS
        .iter()
        .filter(|b| b.hint > 0 && !(app.read_only && b.writes))
        .collect();
    hints.sort_by_key(|b| b.hint);
    // Each hint is a part that is shown whole or not at all.
    let mut parts: Vec<Vec<Vec<Span>>> = hints
        .iter()
        .map(|b| {
            // The first key of the binding: "q/Esc Ctrl-C" → "q"; "/" stays "/".
            let first = b.keys.split(' ').next().unwrap_or(b.keys);
            let key = if first.len() > 1 {
                first.split('/').next().unwrap_or(first)
            } else {
                first
            };
            vec![
                vec![
                    Span::styled(key, Style::default().add_modifier(Modifier::BOLD)),
                    Span::raw(format!(" {}  ", b.does)),
                ],
                vec![],
            ]
        })
        .collect();
    let mut steps: Vec<usize> = Vec::new();
    if let Some(r) = app.rates() {
        let (rate, errors) = (r.requests_per_min, r.errors);
        let rate = Span::raw(format!("│ {rate:.0} req/min"));
        let cost = app
            .cost_per_hour()
            .map(|c| Span::raw(format!(" ≈ ${c:.4}/h")));
        let red = Style::default().fg(Color::Red);
        let errors = (errors > 0).then_some(errors);
        let cadence = Span::raw(format!(
            " │ lists every {}",
            humantime::format_duration(app.refresh * app.relist_every)
        ));
        // The rates, widest first: everything; without the listing cadence;
        // without the cost; the errors alone (or the rate when there are none).
        let form = |with_cost: bool, cadence_too: bool| {
            let mut v = vec![rate.clone()];
            if with_cost {
                v.extend(cost.clone());
            }
            if let Some(e) = errors {
                v.push(Span::styled(format!(", {e} errors"), red));
            }
            if cadence_too {
                v.push(cadence.clone());
            }
            v
        };
        parts.push(vec![
            form(true, true),
            form(true, false),
            form(false, false),
            match errors {
                Some(e) => vec![Span::styled(format!("│ {e} errors"), red)],
                None => vec![rate.clone()],
            },
        ]);
        let rates = parts.len() - 1;
        // Least important first: the hints after the third (last first),
        // the cadence, the cost, the third hint, the rate, then the first two.
        let between = |lo: u8, hi: u8| -> Vec<usize> {
            (0..hints.len())
                .rev()
                .filter(|&i| hints[i].hint > lo && hints[i].hint <= hi)
                .collect()
        };
        steps.extend(between(3, u8::MAX));
        steps.extend([rates, rates]);
        steps.extend(between(2, 3));
        steps.push(rates);
        steps.extend(between(0, 2));
    } else {
        steps.extend((0..hints.len()).rev());
    }
    let spans = fit_line(&parts, &steps, usize::from(area.width)).spans;
    // A message longer than the screen is wide (a takeover's report ends with
    // the audit path) takes both lines rather than being cut.
    if message.width() > usize::from(area.width) {
        f.render_widget(Paragraph::new(message).wrap(Wrap { trim: false }), area);
        return;
    }
    f.render_widget(Paragraph::new(vec![message, Line::from(spans)]), area);
}
