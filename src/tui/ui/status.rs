//! The status bar: the last result, then the key hints (from the key table),
//! the request rate and how old the oldest reading is.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{ellipsize, fit_line};
use crate::tui::app::{terminal_safe, App, BINDINGS};

/// Two lines: the last result (full width, it may name a path), then the key
/// hints (ordered by importance, from the key table), the request rate and
/// the age of the oldest reading of any row (yellow once it is older than
/// two listing cadences: the request budget is holding reads back).
pub(super) fn render_status(app: &App, f: &mut Frame, area: Rect) {
    let message = match app.message() {
        Some((msg, err)) => {
            let style = if err {
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
        .filter(|b| b.hint > 0 && !(app.settings.read_only && b.writes))
        .collect();
    hints.sort_by_key(|b| b.hint);
    // Each hint is a part that is shown whole or not at all.
    let mut parts: Vec<Vec<Vec<Span>>> = hints
        .iter()
        .map(|b| {
            // The first key of the binding: "q Ctrl-C" → "q"; "/" stays "/".
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
    let rates_shown = app.rates().is_some();
    if let Some(r) = app.rates() {
        let (rate, errors) = (r.requests_per_min, r.errors);
        // Not extrapolated from a few seconds: "measuring" until the window
        // is long enough (the cost is then unknown too).
        let rate = Span::raw(if r.measured() {
            format!("│ {rate:.0} req/min")
        } else {
            "│ req/min: measuring".to_owned()
        });
        let cost = app
            .cost_per_hour()
            .map(|c| Span::raw(format!(" ≈ ${c:.4}/h")));
        let red = Style::default().fg(Color::Red);
        let errors = (errors > 0).then_some(errors);
        let cadence = Span::raw(format!(
            " │ lists every {}",
            humantime::format_duration(app.settings.refresh * app.settings.relist_every)
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
        let oldest = oldest_part(app, &mut parts, rates_shown);
        steps.extend(between(3, u8::MAX));
        steps.extend([rates, rates]);
        steps.extend(oldest);
        steps.extend(between(2, 3));
        steps.push(rates);
        steps.extend(oldest);
        steps.extend(between(0, 2));
    } else {
        let oldest = oldest_part(app, &mut parts, rates_shown);
        steps.extend(oldest);
        steps.extend((0..hints.len()).rev());
    }
    let spans = fit_line(&parts, &steps, usize::from(area.width)).spans;
    // A message longer than the screen is wide (a takeover's report ends with
    // the audit path) takes both lines; one longer than both ends with `…`
    // and says where it is in full (the log of results, `m`).
    if message.width() > usize::from(area.width) {
        let style = message.style;
        let text: String = message.spans.iter().map(|s| s.content.as_ref()).collect();
        let lines = two_lines(&text, usize::from(area.width))
            .into_iter()
            .map(|l| Line::styled(l, style))
            .collect::<Vec<_>>();
        f.render_widget(Paragraph::new(lines), area);
        return;
    }
    f.render_widget(Paragraph::new(vec![message, Line::from(spans)]), area);
}

/// What the log of results is called where a message is cut.
pub(super) const IN_FULL: &str = " (m: in full)";

/// `text` on at most two lines of `width` columns, word-wrapped; when it
/// needs more, the second ends with `…` and [`IN_FULL`].
fn two_lines(text: &str, width: usize) -> Vec<String> {
    let wrapped = crate::tui::app::wrap(text, width);
    if wrapped.len() <= 2 {
        return wrapped;
    }
    let rest: Vec<&str> = wrapped[1..].iter().map(|l| l.trim()).collect();
    let room = width.saturating_sub(Span::raw(IN_FULL).width());
    vec![
        wrapped[0].clone(),
        format!(
            "  {}{IN_FULL}",
            ellipsize(&rest.join(" "), room.saturating_sub(2))
        ),
    ]
}

/// Adds the part "oldest reading AGE" (forms: long, short, none) when a
/// reading is known; returns its index.
fn oldest_part(
    app: &App,
    parts: &mut Vec<Vec<Vec<Span<'static>>>>,
    after_rates: bool,
) -> Option<usize> {
    let at = app.session().oldest_reading()?;
    let age = (app.now() - at).num_milliseconds().max(0) as f64 / 1000.0;
    let late = age > 2.0 * (app.settings.refresh * app.settings.relist_every.max(1)).as_secs_f64();
    let style = if late {
        Style::default().fg(Color::Yellow)
    } else {
        Style::default()
    };
    let bar = if after_rates { " │ " } else { "│ " };
    let age = crate::text::format_secs(age.floor());
    parts.push(vec![
        vec![Span::styled(format!("{bar}oldest reading {age}"), style)],
        vec![Span::styled(format!("{bar}oldest {age}"), style)],
        vec![],
    ]);
    Some(parts.len() - 1)
}
