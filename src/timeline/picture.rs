//! The timeline as a picture for the post-mortem (`-o svg`): per prefix, one
//! lane per holder across the time axis, tenures as bars, gaps as grey bands,
//! overlaps as red bands, takeovers as marks with the operator. Drawn with
//! `plotters` (its SVG backend: text is left to the viewer's fonts).

use chrono::{DateTime, Utc};
use plotters::prelude::*;

use super::render::{PrefixTimeline, Report};
use super::Ending;

/// The width of the picture, pixels.
const WIDTH: u32 = 1200;

/// The SVG document of `r`.
///
/// Errors: what the drawing library reports (a sentence).
pub fn svg(r: &Report) -> Result<String, String> {
    let lanes: Vec<Vec<String>> = r.prefixes.iter().map(lanes_of).collect();
    let heights: Vec<u32> = lanes
        .iter()
        .map(|l| 110 + 44 * l.len().max(1) as u32)
        .collect();
    let total: u32 = heights.iter().sum::<u32>().max(120);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, total)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut rest = root.clone();
        for (i, p) in r.prefixes.iter().enumerate() {
            let (area, below) = rest.split_vertically(heights[i]);
            draw_prefix(&area, p, &lanes[i], r.from, r.to).map_err(|e| e.to_string())?;
            rest = below;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The holders of `p`, in the order they first held it.
fn lanes_of(p: &PrefixTimeline) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in &p.derived.tenures {
        if !out.contains(&t.holder) {
            out.push(t.holder.clone());
        }
    }
    out
}

fn end_of(t: &super::Tenure, to: DateTime<Utc>) -> DateTime<Utc> {
    match &t.ending {
        Ending::Released { at }
        | Ending::Expired { at }
        | Ending::Replaced { at, .. }
        | Ending::Overwritten { at } => *at,
        Ending::Holding => to.max(t.last_seen),
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_prefix(
    area: &Area<'_>,
    p: &PrefixTimeline,
    lanes: &[String],
    from: Option<DateTime<Utc>>,
    to: DateTime<Utc>,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let d = &p.derived;
    let first = d
        .tenures
        .iter()
        .map(|t| t.first_seen)
        .chain(d.gaps.iter().map(|g| g.from))
        .min();
    let start = from.or(first).unwrap_or(to - chrono::Duration::hours(1));
    let span = (to - start).num_milliseconds().max(1000) as f64 / 1000.0;
    let x = |t: DateTime<Utc>| ((t - start).num_milliseconds() as f64 / 1000.0).clamp(0.0, span);
    let n = lanes.len().max(1) as i32;
    let caption = format!(
        "{}  —  {} tenure(s), {} gap(s), {} overlap(s), {} generation(s) back",
        p.url,
        d.tenures.len(),
        d.gaps.len(),
        d.overlaps.len(),
        d.generations_back.len()
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(170)
        .build_cartesian_2d(0.0..span, (0..n).into_segmented())?;
    let fmt = if span > 86_400.0 {
        "%m-%d %H:%M"
    } else {
        "%H:%M:%S"
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_labels(8)
        .x_label_formatter(&|s| {
            (start + chrono::Duration::milliseconds((s * 1000.0) as i64))
                .format(fmt)
                .to_string()
        })
        .y_labels(lanes.len().max(1) + 1)
        .y_label_formatter(&|v| match v {
            // The row above the lanes holds the takeovers' marks.
            SegmentValue::CenterOf(i) if *i == n => "takeovers".to_owned(),
            // The first holder at the top.
            SegmentValue::CenterOf(i) => lanes
                .get((n - 1 - *i) as usize)
                .map(|s| s.chars().take(24).collect())
                .unwrap_or_default(),
            _ => String::new(),
        })
        .x_desc("UTC")
        .draw()?;
    // Gaps: nobody held it.
    chart.draw_series(d.gaps.iter().map(|g| {
        Rectangle::new(
            [
                (x(g.from), SegmentValue::Exact(0)),
                (x(g.to), SegmentValue::Exact(n)),
            ],
            RGBColor(225, 225, 225).filled(),
        )
    }))?;
    // Tenures, one lane per holder (the first holder at the top).
    for (i, name) in lanes.iter().enumerate() {
        let y = n - 1 - i as i32;
        let colour = Palette99::pick(i);
        chart.draw_series(d.tenures.iter().filter(|t| &t.holder == name).map(|t| {
            let end = end_of(t, to);
            let x1 = x(end).max(x(t.first_seen) + span / 600.0);
            let mut bar = Rectangle::new(
                [
                    (x(t.first_seen), SegmentValue::Exact(y)),
                    (x1, SegmentValue::Exact(y + 1)),
                ],
                colour.filled(),
            );
            bar.set_margin(6, 6, 0, 0);
            bar
        }))?;
    }
    // Overlaps: two holders could both write.
    chart.draw_series(d.overlaps.iter().map(|o| {
        Rectangle::new(
            [
                (x(o.from), SegmentValue::Exact(0)),
                (
                    x(o.to).max(x(o.from) + span / 300.0),
                    SegmentValue::Exact(n),
                ),
            ],
            RED.mix(0.45).filled(),
        )
    }))?;
    // Takeovers: a mark at the new holder's first write, with the operator;
    // one that ends no tenure seen, at the time its audit entry gives.
    let marks = d
        .tenures
        .iter()
        .filter_map(|t| match &t.ending {
            Ending::Replaced {
                at,
                takeover: Some(tk),
                ..
            } => Some((*at, tk)),
            _ => None,
        })
        .chain(
            p.takeovers
                .iter()
                .filter(|tk| !super::render::ends_a_tenure(p, tk))
                .map(|tk| (tk.time, tk)),
        );
    for (at, tk) in marks {
        chart.plotting_area().draw(&TriangleMarker::new(
            (x(at), SegmentValue::CenterOf(n)),
            7,
            BLACK.filled(),
        ))?;
        chart.plotting_area().draw(&Text::new(
            format!(
                "takeover by {}",
                tk.operator.chars().take(30).collect::<String>()
            ),
            (x(at) + span / 120.0, SegmentValue::CenterOf(n)),
            ("sans-serif", 11).into_font().color(&BLACK),
        ))?;
    }
    Ok(())
}
