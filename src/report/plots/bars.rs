//! rliable's interval-estimate bars: one row per method, one panel per aggregate.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{draw_subtitle, e, font, method_colour, render, DrawResult, Figure, Picture, HEADER_PX};
use crate::report::aggregate::Aggregate;
use crate::report::scores::AggregateRow;
use crate::Result;

struct AggregateBars<'a> {
    /// One row per method, in method order, over all tasks.
    rows: &'a [AggregateRow],
    methods: &'a [String],
    subtitle: &'a [String],
}

const LABEL_PX: u32 = 200;

impl AggregateBars<'_> {
    /// Panel `k`'s scores: centred on the intervals, at least 0.05 wide (one run per task
    /// gives none).
    fn x_range(&self, k: usize) -> std::ops::Range<f64> {
        let values = self
            .rows
            .iter()
            .flat_map(|r| [r.estimates[k].lower, r.estimates[k].upper]);
        let lo = values.clone().fold(f64::INFINITY, f64::min);
        let hi = values.fold(f64::NEG_INFINITY, f64::max);
        let (mid, half) = ((lo + hi) / 2.0, 0.55 * (hi - lo).max(0.05));
        mid - half..mid + half
    }
}

/// An aggregate's panel title; a median of one or two per-task means says it is their mean.
fn panel_caption(agg: Aggregate, max_tasks: usize) -> String {
    match (agg, max_tasks) {
        (Aggregate::Median, 1 | 2) => format!(
            "median (= mean: {max_tasks} task{})",
            if max_tasks == 1 { "" } else { "s" }
        ),
        (Aggregate::OptimalityGap, _) => "optimality gap (lower is better)".to_string(),
        _ => agg.name().to_string(),
    }
}

impl Figure for AggregateBars<'_> {
    fn size(&self) -> (u32, u32) {
        (
            LABEL_PX + 4 * 300,
            HEADER_PX + 100 + 56 * self.methods.len().max(1) as u32,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        root.fill(&WHITE).map_err(e)?;
        let (header, body) = root.split_vertically(HEADER_PX - 36);
        header
            .draw(&Text::new(
                "Aggregate expert-normalised scores, 95% stratified-bootstrap intervals",
                (20, 8),
                font(24.0),
            ))
            .map_err(e)?;
        draw_subtitle(&header, self.subtitle)?;
        let (labels, panels) = body.split_horizontally(LABEL_PX);
        let n = self.methods.len();
        // The median of two per-task means is their mean: a reader comparing the panels is told.
        let max_tasks = self.rows.iter().map(|r| r.num_tasks).max().unwrap_or(0);
        for (k, (agg, area)) in Aggregate::ALL.iter().zip(panels.split_evenly((1, 4))).enumerate() {
            let mut chart = ChartBuilder::on(&area)
                .caption(panel_caption(*agg, max_tasks), font(20.0))
                .margin(14)
                .x_label_area_size(56)
                .build_cartesian_2d(self.x_range(k), 0.0..n as f64)
                .map_err(e)?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(0)
                .x_labels(5)
                .x_label_formatter(&|x| format!("{x:.2}"))
                .x_desc("normalised score")
                .label_style(font(14.0))
                .axis_desc_style(font(15.0))
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(e)?;
            for row in self.rows {
                let Some(i) = self.methods.iter().position(|m| *m == row.method) else {
                    continue;
                };
                let est = row.estimates[k];
                // method 0 at the top, as rliable's plots list them
                let y = (n - 1 - i) as f64;
                let colour = method_colour(i);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(est.lower, y + 0.2), (est.upper, y + 0.8)],
                        colour.mix(0.75).filled(),
                    )))
                    .map_err(e)?;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(est.point, y + 0.12), (est.point, y + 0.88)],
                        BLACK.stroke_width(3),
                    )))
                    .map_err(e)?;
                if k == 0 {
                    // the method names, level with the bars of the first panel
                    // (backend_coord is in the picture's pixels, Text in the label area's)
                    let (_, py) = chart.backend_coord(&(est.point, y + 0.5));
                    let (_, ly) = labels.get_base_pixel();
                    let text = row.method.clone();
                    let width = labels.estimate_text_size(&text, &font(18.0)).map_err(e)?.0 as i32;
                    labels
                        .draw(&Text::new(
                            text,
                            (LABEL_PX as i32 - 12 - width, py - ly - 10),
                            font(18.0),
                        ))
                        .map_err(e)?;
                }
            }
        }
        Ok(())
    }
}

/// rliable's interval-estimate bars: per aggregate, one bar per method from the lower to the
/// upper bound, with the point estimate marked.
pub fn aggregate_bars(rows: &[AggregateRow], methods: &[String], subtitle: &[String]) -> Result<Picture> {
    render(
        "aggregates",
        &AggregateBars {
            rows,
            methods,
            subtitle,
        },
    )
}
