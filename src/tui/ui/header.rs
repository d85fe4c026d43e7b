//! The header: mode, targets, the refresh and its age, the service clock, the exclusion.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::fit_line;
use crate::text::format_secs;
use crate::text::sanitize;
use crate::tui::app::App;

pub(super) fn render_header(app: &App, f: &mut Frame, area: Rect) {
    let mode = if app.settings.read_only {
        Span::styled(
            " WATCH (read-only) ",
            Style::default().bg(Color::Blue).fg(Color::White),
        )
    } else {
        let ex = match app.settings.exclusion {
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
    let last = app.session().last_refresh().map(|t| {
        let ago = format_secs((app.now() - t).num_milliseconds().max(0) as f64 / 1000.0);
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
                humantime::format_duration(app.settings.refresh)
            ))],
            vec![],
        ],
        last_forms,
        vec![
            vec![Span::raw(format!(
                "  clock {}",
                app.now().format("%Y-%m-%d %H:%M:%SZ")
            ))],
            vec![Span::raw(format!(
                "  clock {}",
                app.now().format("%H:%M:%SZ")
            ))],
            vec![],
        ],
    ];
    // This reader's clock against the service's: every age depends on it.
    parts.extend(service_clock_part(app));
    // Least important first: the date, the refresh interval, the clock, the
    // service clock's error, the last refresh's time, then the rest.
    let line1 = fit_line(&parts, &[3, 1, 3, 4, 2, 2, 4], usize::from(area.width));
    let line2 = view_line(app, usize::from(area.width));
    f.render_widget(Paragraph::new(vec![line1, line2]), area);
}

/// The header's service-clock part (its forms, widest first), when the
/// snapshot says anything about the service's clock.
fn service_clock_part(app: &App) -> Option<Vec<Vec<Span<'static>>>> {
    if let Some(snap) = app.snapshot() {
        if let Some(o) = snap.reader_clock.server_offset_s {
            let untrusted = app.ages_unknown();
            let text = format!(
                "  service clock {o:+.1}s ±{:.1}s",
                snap.reader_clock.server_offset_error_s.unwrap_or(0.0)
            );
            return Some(if untrusted {
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
            return Some(vec![
                vec![Span::styled(
                    "  service clock unknown (no usable Date header) ",
                    yellow,
                )],
                vec![Span::styled("  service clock unknown ", yellow)],
            ]);
        }
    }
    None
}

/// The header's second line: the view, then the targets with where their
/// requests go, cut to `width` columns with `…`.
fn view_line(app: &App, width: usize) -> Line<'static> {
    // "view " and the view's name in its box take the rest.
    let targets_width = width.saturating_sub(5 + app.view().as_str().len() + 2);
    Line::from(vec![
        Span::raw("view "),
        Span::styled(
            format!(" {} ", app.view().as_str()),
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        ),
        Span::raw(super::ellipsize(
            &format!(
                "  targets: {}",
                if app.settings.targets.is_empty() {
                    "(none)".to_owned()
                } else {
                    // Each target with where its requests go (endpoint, region,
                    // addressing), as k9s shows its context, once gathered.
                    let shown: Vec<String> = app
                        .settings
                        .targets
                        .iter()
                        .enumerate()
                        .map(
                            |(i, t)| match app.snapshot().and_then(|s| s.targets.get(i)) {
                                Some(r) if r.endpoint != "local" => format!("{t} @ {}", r.endpoint),
                                _ => t.to_string(),
                            },
                        )
                        .collect();
                    sanitize(&shown.join("  "))
                }
            ),
            targets_width,
        )),
    ])
}
