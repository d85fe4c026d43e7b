//! The timeline as a picture for the post-mortem (`-o svg`), made to be
//! pasted into an incident review and read without leasectl at hand. Per
//! prefix: a title with the window (date and time, UTC), one lane per holder
//! across a time axis that names its date and time zone, tenures as bars, gaps
//! as pale bands, overlaps as red bands hatched across every lane, and a
//! numbered mark for every finding of the text report (overlaps, generations
//! gone back or not advanced, records replaced while fresh, late renewals,
//! takeovers — those the audit log alone records too), each number a line
//! under the chart in the text report's words, then what could not be read
//! and the notes; a legend at the foot. Holder colours are blues, greens,
//! purples and browns, never red, and each is the holder's own lane; the
//! overlap is also hatched, so it stays apart printed in grey. A label too
//! long for its place ends with `…` and is listed whole under the chart.
//! Drawn with `plotters` (its SVG backend: text is left to the viewer's fonts).

use chrono::{DateTime, Utc};
use plotters::prelude::*;

use super::render::{PrefixTimeline, Report};
use super::{Ending, Tenure};

/// The width of the picture, pixels.
const WIDTH: u32 = 1200;
/// The height of one holder's lane, pixels.
const LANE: u32 = 36;
/// The height of one line of text under a chart, pixels.
const LINE: u32 = 16;
/// The room for the lanes' labels, pixels, and how many characters fit in it.
const LABEL_PX: u32 = 190;
const LABEL_CHARS: usize = 26;
/// The longest line of text under a chart, in characters (about 6.5 px each).
const TEXT_CHARS: usize = 175;

/// Holder colours: no red, orange or pink (the overlap's), alternating
/// light and dark so that neighbours differ in grey too.
pub const HOLDERS: [RGBColor; 10] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(120, 190, 120), // light green
    RGBColor(84, 39, 143),   // purple
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 109, 44),    // dark green
    RGBColor(188, 189, 220), // lavender
    RGBColor(102, 76, 40),   // brown
    RGBColor(140, 200, 200), // light teal
    RGBColor(37, 52, 148),   // navy
    RGBColor(191, 165, 110), // sand
];
/// The overlap band and its hatching.
const OVERLAP: RGBColor = RGBColor(215, 25, 28);
/// A time nobody held the lease.
const GAP: RGBColor = RGBColor(232, 232, 232);
/// Marks and their numbers.
const MARK: RGBColor = RGBColor(0, 0, 0);

/// The SVG document of `r`.
///
/// Errors: what the drawing library reports (a sentence).
pub fn svg(r: &Report) -> Result<String, String> {
    let plans: Vec<Plan> = r.prefixes.iter().map(|p| plan(p, r.from, r.to)).collect();
    let heights: Vec<u32> = plans.iter().map(Plan::height).collect();
    let legend = legend_lines().len() as u32 * LINE + 24;
    let total = heights.iter().sum::<u32>() + legend;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, total)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut rest = root.clone();
        for (i, p) in r.prefixes.iter().enumerate() {
            let (area, below) = rest.split_vertically(heights[i]);
            draw_prefix(&area, p, &plans[i]).map_err(|e| e.to_string())?;
            rest = below;
        }
        draw_legend(&rest).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// What one prefix's picture holds: its lanes, window, findings (each a
/// numbered mark and its sentence) and the text under the chart.
struct Plan {
    /// The holders, in the order they first held it (the first on top).
    lanes: Vec<String>,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    findings: Vec<Finding>,
    /// Lines under the chart: the findings' sentences, the labels cut, what
    /// could not be read, the notes, the holders' clocks (colour, text).
    text: Vec<(RGBColor, String)>,
}

impl Plan {
    fn height(&self) -> u32 {
        // Title, axis and margins; a lane per holder and the takeovers' row.
        90 + LANE * (self.lanes.len().max(1) as u32 + 1) + LINE * self.text.len() as u32 + 16
    }
}

/// A finding of the text report, where its mark goes.
struct Finding {
    at: DateTime<Utc>,
    /// The lane of the holder concerned; `None`: the takeovers' row.
    lane: Option<usize>,
    shape: Shape,
}

/// How a finding is marked.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// A takeover (the audit log's): a triangle in the takeovers' row.
    Takeover,
    /// A generation gone back or not advanced: a diamond.
    Generation,
    /// A record replaced while fresh: a cross.
    Replaced,
    /// An overlap: its number above the band.
    Overlap,
    /// Late renewals: a ring on the tenure.
    Late,
}

/// The plan of `p`'s picture in the window `from`..`to`.
fn plan(p: &PrefixTimeline, from: Option<DateTime<Utc>>, to: DateTime<Utc>) -> Plan {
    let d = &p.derived;
    let mut lanes: Vec<String> = Vec::new();
    for t in &d.tenures {
        if !lanes.contains(&t.holder) {
            lanes.push(t.holder.clone());
        }
    }
    let first = d
        .tenures
        .iter()
        .map(|t| t.first_seen)
        .chain(d.gaps.iter().map(|g| g.from))
        .chain(p.takeovers.iter().map(|t| t.time))
        .min();
    let start = from.or(first).unwrap_or(to - chrono::Duration::hours(1));
    let lane_of = |h: &str| lanes.iter().position(|l| l == h);
    // The findings, each with the sentence the text report gives it.
    let mut found: Vec<(Finding, String)> = Vec::new();
    for e in super::render::events(p) {
        let shape = match e.event {
            "overlap" => Shape::Overlap,
            "generation_back" => Shape::Generation,
            "takeover" => Shape::Takeover,
            "replaced" if e.text.contains("REPLACED WHILE FRESH") => Shape::Replaced,
            "replaced" if e.text.contains("taken over by") => Shape::Takeover,
            "acquired" if e.text.contains(": LATE") => Shape::Late,
            _ => continue,
        };
        let lane = match shape {
            Shape::Takeover | Shape::Overlap => None,
            _ => e.holder.as_deref().and_then(lane_of),
        };
        found.push((
            Finding {
                at: e.time,
                lane,
                shape,
            },
            e.text,
        ));
    }
    let mut text: Vec<(RGBColor, String)> = Vec::new();
    let mut findings = Vec::new();
    for (i, (f, sentence)) in found.into_iter().enumerate() {
        let colour = if matches!(
            f.shape,
            Shape::Overlap | Shape::Generation | Shape::Replaced
        ) {
            OVERLAP
        } else {
            MARK
        };
        text.extend(wrapped(
            colour,
            &format!(
                "({}) {}  {sentence}",
                i + 1,
                crate::clock::rfc3339(f.at, chrono::SecondsFormat::Millis)
            ),
        ));
        findings.push(f);
    }
    if findings.is_empty() {
        text.push((MARK, "no finding: no overlap, no generation gone back or not advanced, no record replaced while fresh, no late renewal, no takeover".into()));
    }
    for l in lanes.iter().filter(|l| l.chars().count() > LABEL_CHARS) {
        text.extend(wrapped(MARK, &format!("lane {}: {l}", cut(l, LABEL_CHARS))));
    }
    for s in &p.problems {
        text.extend(wrapped(OVERLAP, &format!("UNKNOWN: {s}")));
    }
    for s in &p.notes {
        text.extend(wrapped(MARK, &format!("note: {s}")));
    }
    for c in &d.clocks {
        text.extend(wrapped(
            MARK,
            &format!(
                "clock of {}: renewed_at − Last-Modified from {} to {} over {} version(s) (±1 s)",
                c.holder,
                crate::text::format_secs(c.min_s),
                crate::text::format_secs(c.max_s),
                c.samples
            ),
        ));
    }
    Plan {
        lanes,
        start,
        end: to.max(start + chrono::Duration::seconds(1)),
        findings,
        text,
    }
}

/// `s` in lines of at most [`TEXT_CHARS`] characters, each with `colour`.
fn wrapped(colour: RGBColor, s: &str) -> Vec<(RGBColor, String)> {
    crate::text::wrap(s, TEXT_CHARS)
        .into_iter()
        .map(|l| (colour, l))
        .collect()
}

/// `s` in at most `n` characters, the cut marked with `…`.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// When tenure `t` ended (its lane's bar ends there), or the window's end.
fn end_of(t: &Tenure, to: DateTime<Utc>) -> DateTime<Utc> {
    match &t.ending {
        Ending::Released { at }
        | Ending::Expired { at }
        | Ending::Replaced { at, .. }
        | Ending::Overwritten { at } => *at,
        Ending::Holding => to.max(t.last_seen),
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// The axis' description: the time zone and the date(s) of the window.
fn axis_description(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    let (a, b) = (start.format("%Y-%m-%d"), end.format("%Y-%m-%d"));
    if a.to_string() == b.to_string() {
        format!("time (UTC) on {a}")
    } else {
        format!("time (UTC) from {a} to {b}")
    }
}

fn draw_prefix(area: &Area<'_>, p: &PrefixTimeline, plan: &Plan) -> DrawResult {
    let d = &p.derived;
    let text_h = LINE * plan.text.len() as u32 + 16;
    let (chart_area, text_area) = area.split_vertically(area.dim_in_pixel().1 - text_h);
    let start = plan.start;
    let span = ((plan.end - start).num_milliseconds().max(1000)) as f64 / 1000.0;
    let x = |t: DateTime<Utc>| ((t - start).num_milliseconds() as f64 / 1000.0).clamp(0.0, span);
    let n = plan.lanes.len().max(1) as i32;
    let caption = format!(
        "{}  —  {} tenure(s), {} gap(s), {} overlap(s), {} generation(s) back or not advanced  —  {} to {} UTC",
        cut(&p.url, 60),
        d.tenures.len(),
        d.gaps.len(),
        d.overlaps.len(),
        d.generations_back.len(),
        start.format("%Y-%m-%d %H:%M:%S"),
        plan.end.format("%Y-%m-%d %H:%M:%S"),
    );
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(caption, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(LABEL_PX)
        .build_cartesian_2d(0.0..span, (0..n).into_segmented())?;
    let fmt = if plan.end - start > chrono::Duration::days(1) {
        "%m-%d %H:%M"
    } else {
        "%H:%M:%S"
    };
    let lanes = &plan.lanes;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(WHITE)
        .x_labels(8)
        .x_label_formatter(&|s| {
            (start + chrono::Duration::milliseconds((s * 1000.0) as i64))
                .format(fmt)
                .to_string()
        })
        .y_labels(lanes.len().max(1) + 1)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) if *i == n => "takeovers (audit log)".to_owned(),
            // The first holder at the top.
            SegmentValue::CenterOf(i) => lanes
                .get((n - 1 - *i) as usize)
                .map(|s| cut(s, LABEL_CHARS))
                .unwrap_or_default(),
            _ => String::new(),
        })
        .x_desc(axis_description(start, plan.end))
        .label_style(("sans-serif", 12))
        .draw()?;
    // Gaps: nobody held it.
    chart.draw_series(d.gaps.iter().map(|g| {
        Rectangle::new(
            [
                (x(g.from), SegmentValue::Exact(0)),
                (x(g.to), SegmentValue::Exact(n)),
            ],
            GAP.filled(),
        )
    }))?;
    // Tenures, one lane per holder (the first holder at the top), a dark
    // outline so that light colours stay apart from the background.
    for (i, name) in lanes.iter().enumerate() {
        let y = n - 1 - i as i32;
        let colour = HOLDERS[i % HOLDERS.len()];
        for t in d.tenures.iter().filter(|t| &t.holder == name) {
            let x0 = x(t.first_seen);
            let x1 = x(end_of(t, plan.end)).max(x0 + span / 600.0);
            for style in [colour.filled(), BLACK.stroke_width(1)] {
                let mut bar = Rectangle::new(
                    [
                        (x0, SegmentValue::Exact(y)),
                        (x1, SegmentValue::Exact(y + 1)),
                    ],
                    style,
                );
                bar.set_margin(7, 7, 0, 0);
                chart.draw_series(std::iter::once(bar))?;
            }
        }
    }
    // Overlaps: a red band across every lane, hatched.
    let screen = chart.plotting_area().use_screen_coord();
    for o in &d.overlaps {
        let x1 = x(o.to).max(x(o.from) + span / 300.0);
        chart.draw_series(std::iter::once(Rectangle::new(
            [
                (x(o.from), SegmentValue::Exact(0)),
                (x1, SegmentValue::Exact(n)),
            ],
            OVERLAP.mix(0.35).filled(),
        )))?;
        let a = chart
            .plotting_area()
            .map_coordinate(&(x(o.from), SegmentValue::Exact(n)));
        let b = chart
            .plotting_area()
            .map_coordinate(&(x1, SegmentValue::Exact(0)));
        for segment in hatch(a, b, 7) {
            screen.draw(&PathElement::new(segment, OVERLAP.stroke_width(2)))?;
        }
    }
    // The findings: a mark each, with its number on a white ground, never
    // over another number of its row (moved right of it).
    let mut right_of: std::collections::BTreeMap<i32, i32> = Default::default();
    for (i, f) in plan.findings.iter().enumerate() {
        let row = f.lane.map_or(n, |l| n - 1 - l as i32);
        let (px, py) = chart
            .plotting_area()
            .map_coordinate(&(x(f.at), SegmentValue::CenterOf(row)));
        let style = match f.shape {
            Shape::Generation | Shape::Replaced => OVERLAP.filled(),
            _ => MARK.filled(),
        };
        // Each mark on a white halo, so that it stands out on any bar, in
        // grey too.
        match f.shape {
            Shape::Takeover => screen.draw(&TriangleMarker::new((px, py), 7, style))?,
            Shape::Generation => {
                let diamond = |r: i32| vec![(px, py - r), (px + r, py), (px, py + r), (px - r, py)];
                screen.draw(&Polygon::new(diamond(11), WHITE.filled()))?;
                screen.draw(&Polygon::new(diamond(8), style))?;
            }
            Shape::Replaced => {
                screen.draw(&Cross::new((px, py), 8, WHITE.stroke_width(7)))?;
                screen.draw(&Cross::new((px, py), 7, OVERLAP.stroke_width(3)))?;
            }
            Shape::Late => {
                screen.draw(&Circle::new((px, py), 8, WHITE.stroke_width(5)))?;
                screen.draw(&Circle::new((px, py), 7, MARK.stroke_width(2)))?;
            }
            Shape::Overlap => {}
        }
        // Beside the mark; an overlap's number in the takeovers' row, over
        // its band.
        let (lx, ly) = (px + 9, py - 17);
        let label = format!("({})", i + 1);
        let w = 8 * label.len() as i32;
        let lx = lx.max(right_of.get(&ly).copied().unwrap_or(i32::MIN));
        right_of.insert(ly, lx + w + 3);
        screen.draw(&Rectangle::new(
            [(lx, ly + 1), (lx + w, ly + 16)],
            WHITE.mix(0.85).filled(),
        ))?;
        screen.draw(&Text::new(
            label,
            (lx + 2, ly + 2),
            ("sans-serif", 13).into_font().color(&style.color),
        ))?;
    }
    // The findings' sentences and what else the text report says.
    for (i, (colour, line)) in plan.text.iter().enumerate() {
        text_area.draw(&Text::new(
            line.clone(),
            (LABEL_PX as i32 / 4, (LINE * i as u32) as i32 + 4),
            ("sans-serif", 12).into_font().color(colour),
        ))?;
    }
    Ok(())
}

/// Hatching of the rectangle from `a` (top left) to `b` (bottom right):
/// lines rising to the right, `step` pixels apart, each cut to the rectangle.
fn hatch(a: (i32, i32), b: (i32, i32), step: i32) -> Vec<Vec<(i32, i32)>> {
    let (x0, y0, x1, y1) = (a.0.min(b.0), a.1.min(b.1), a.0.max(b.0), a.1.max(b.1));
    let mut out = Vec::new();
    // Lines x + y = c, from the top-left corner to the bottom-right one.
    let mut c = x0 + y0 + step;
    while c < x1 + y1 {
        // Where the line enters and leaves the rectangle.
        let (sx, sy) = if c - y1 >= x0 {
            (c - y1, y1)
        } else {
            (x0, c - x0)
        };
        let (ex, ey) = if c - y0 <= x1 {
            (c - y0, y0)
        } else {
            (x1, c - x1)
        };
        out.push(vec![(sx, sy), (ex, ey)]);
        c += step;
    }
    out
}

/// The legend's lines: each a swatch and what it means.
fn legend_lines() -> Vec<(Swatch, &'static str)> {
    vec![
        (Swatch::Holder, "a holder's tenure, from its first write seen to its end, on the lane named on the left (a bar to the right edge: still held)"),
        (Swatch::Gap, "nobody held the lease (a gap)"),
        (Swatch::Overlap, "OVERLAP: two holders could both write (red, hatched)"),
        (Swatch::Takeover, "(n) takeover recorded in the audit log, in the takeovers' row"),
        (Swatch::Generation, "(n) generation gone back or not advanced, on the lane of the holder that wrote it"),
        (Swatch::Replaced, "(n) record replaced while fresh with no takeover in the audit log, on the replaced holder's lane"),
        (Swatch::Late, "(n) late renewals: a gap between writes longer than TTL/3 (plus 1 s)"),
    ]
}

/// A legend's swatch.
#[derive(Clone, Copy)]
enum Swatch {
    Holder,
    Gap,
    Overlap,
    Takeover,
    Generation,
    Replaced,
    Late,
}

fn draw_legend(area: &Area<'_>) -> DrawResult {
    area.draw(&Text::new(
        "legend".to_owned(),
        (20, 4),
        ("sans-serif", 13).into_font().style(FontStyle::Bold),
    ))?;
    for (i, (swatch, what)) in legend_lines().into_iter().enumerate() {
        let y = 22 + (LINE * i as u32) as i32;
        let (cx, cy) = (40, y + 6);
        match swatch {
            Swatch::Holder => {
                for (k, c) in HOLDERS.iter().take(3).enumerate() {
                    let x = 20 + 14 * k as i32;
                    area.draw(&Rectangle::new([(x, y), (x + 12, y + 11)], c.filled()))?;
                    area.draw(&Rectangle::new(
                        [(x, y), (x + 12, y + 11)],
                        BLACK.stroke_width(1),
                    ))?;
                }
            }
            Swatch::Gap => area.draw(&Rectangle::new([(20, y), (60, y + 11)], GAP.filled()))?,
            Swatch::Overlap => {
                area.draw(&Rectangle::new(
                    [(20, y), (60, y + 11)],
                    OVERLAP.mix(0.35).filled(),
                ))?;
                for segment in hatch((20, y), (60, y + 11), 5) {
                    area.draw(&PathElement::new(segment, OVERLAP.stroke_width(2)))?;
                }
            }
            Swatch::Takeover => area.draw(&TriangleMarker::new((cx, cy), 6, MARK.filled()))?,
            Swatch::Generation => area.draw(&Polygon::new(
                vec![(cx, cy - 6), (cx + 6, cy), (cx, cy + 6), (cx - 6, cy)],
                OVERLAP.filled(),
            ))?,
            Swatch::Replaced => area.draw(&Cross::new((cx, cy), 6, OVERLAP.stroke_width(3)))?,
            Swatch::Late => area.draw(&Circle::new((cx, cy), 6, MARK.stroke_width(2)))?,
        }
        area.draw(&Text::new(
            what.to_owned(),
            (72, y),
            ("sans-serif", 12).into_font(),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hatching_stays_inside_its_rectangle() {
        let lines = hatch((10, 20), (50, 40), 7);
        assert!(lines.len() > 5);
        for l in lines {
            for (x, y) in l {
                assert!((10..=50).contains(&x) && (20..=40).contains(&y), "{x},{y}");
            }
        }
    }

    #[test]
    fn a_cut_is_marked() {
        assert_eq!(cut("holder-a", 26), "holder-a");
        assert_eq!(cut("abcdef", 4), "abc…");
    }
}
