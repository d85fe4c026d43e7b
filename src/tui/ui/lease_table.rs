//! The leases table: its columns, one cell per lease field, the TTL gauge.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Row, Table};
use ratatui::Frame;

use super::{fit_secs, state_style};
use crate::bucket::LeaseState;
use crate::snapshot::ExclusionReport;
use crate::text::sanitize;
use crate::tui::app::{App, Mode, SortKey};

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

/// The names of the lease columns that `columns` ([`lease_columns`]) left
/// out, in the table's order; the sort column's carries its mark (▼, or ▲
/// reversed).
pub fn hidden_columns(columns: &[(SortKey, u16)], sort: SortKey, reversed: bool) -> Vec<String> {
    [
        SortKey::Age,
        SortKey::Ttl,
        SortKey::Expires,
        SortKey::State,
        SortKey::Exclusion,
        SortKey::Skew,
    ]
    .into_iter()
    .filter(|k| !columns.iter().any(|c| c.0 == *k))
    .map(|k| {
        let mark = match (k == sort, reversed) {
            (false, _) => "",
            (true, false) => "▼",
            (true, true) => "▲",
        };
        format!("{}{mark}", k.column())
    })
    .collect()
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

pub(super) fn render_table(app: &App, f: &mut Frame, area: Rect) {
    let page = usize::from(area.height.saturating_sub(3)).max(1);
    let n = app.row_count();
    let offset = app.leases().cursor().offset().min(n.saturating_sub(1));
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
            if i == app.leases().cursor().selected() {
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
        format!(" leases {}/{} ", app.leases().cursor().selected() + 1, n)
    };
    // Rows arrive while the first listing and reads are still going on.
    if let Some((read, known, listed)) = app.session().loading() {
        title.push_str(&format!(
            "· loading: {read} of {known}{} read ",
            if listed { "" } else { "+ (listing)" }
        ));
    }
    if !app.leases().filter().is_empty() || matches!(app.mode(), Mode::Filter) {
        let cursor = if matches!(app.mode(), Mode::Filter) {
            "▏"
        } else {
            ""
        };
        title.push_str(&format!(
            "· filter /{}{cursor} ({n} of {total}) ",
            sanitize(app.leases().filter())
        ));
    }
    // Issue 35, trip 5: a narrow screen says which columns it dropped (and
    // the sort's mark, when the sort column is one of them).
    let hidden = hidden_columns(&columns, app.leases().sort(), app.leases().reversed());
    if !hidden.is_empty() {
        let named = format!("· hidden: {} ", hidden.join(", "));
        let room = usize::from(area.width.saturating_sub(2));
        if title.chars().count() + named.chars().count() <= room {
            title.push_str(&named);
        } else {
            title.push_str(&format!("· {} columns hidden ", hidden.len()));
        }
    }
    let title = ellipsize(&title, area.width.saturating_sub(2));
    let header: Vec<Cell> = columns
        .iter()
        .map(|(k, _)| {
            if *k == app.leases().sort() {
                // ▼ the column's own order, ▲ reversed (`S`).
                let mark = if app.leases().reversed() {
                    '▲'
                } else {
                    '▼'
                };
                Cell::from(format!("{}{mark}", k.column()))
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
    if app.settings.targets.len() > 1 {
        format!(
            "{} {p}",
            target_short_name(&app.settings.target_url(target))
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
    r: crate::tui::app::LeaseRow,
    p: &'a crate::snapshot::PrefixReport,
    k: SortKey,
    width: u16,
) -> Cell<'a> {
    let dash = || "-".to_owned();
    match k {
        SortKey::Prefix => {
            let held = if app.session().held().contains(&p.key) {
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
            &p.holder()
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
                .map(|s| skew_text(s, width))
                .unwrap_or_else(dash),
        ),
    }
}

/// A holder's clock skew in whole seconds (`Last-Modified` has no finer
/// resolution), signed: `+2.0s`, `-5m00s`; `0s` without a sign when it rounds
/// to zero (either side: "+0ms" and "0ms" stood in one column).
pub fn skew_text(s: f64, width: u16) -> String {
    let whole = s.round();
    if whole == 0.0 {
        return "0s".to_owned();
    }
    fit_secs(whole, width, whole > 0.0)
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
