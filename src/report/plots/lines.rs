//! Line pictures: panels of lines over one x axis (the online probe during pre-training, the
//! exploration run's curves).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{draw_header, e, grid, label_decimals, method_colour, panel_chart, render};
use super::{DrawResult, Figure, Picture, HEADER_PX};
use crate::report::pretrain_probe::ProbeCurve;
use crate::Result;

/// Lines over one x axis, one per method that has one, each with a dot at every point.
struct LinePanel {
    caption: String,
    y_desc: &'static str,
    /// (method index, points); non-finite values are not drawn.
    series: Vec<(usize, Vec<(f64, f64)>)>,
}

/// Panels in a grid of `cols` columns (filled row by row) over a shared x range.
struct LinePanels<'a> {
    title: &'a str,
    x_desc: &'a str,
    panels: &'a [LinePanel],
    cols: usize,
    methods: &'a [String],
    subtitle: &'a [String],
}

impl Figure for LinePanels<'_> {
    fn size(&self) -> (u32, u32) {
        let (rows, cols) = grid(self.panels.len(), self.cols);
        (cols.max(2) as u32 * 520, HEADER_PX + rows as u32 * 420)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let drawn = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter().map(|(m, _)| *m))
            .collect();
        let body = draw_header(root, self.title, self.subtitle, self.methods, &drawn)?;
        let max_x = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter().flat_map(|(_, points)| points.iter().map(|q| q.0)))
            .fold(1.0, f64::max);
        for (panel, area) in self
            .panels
            .iter()
            .zip(body.split_evenly(grid(self.panels.len(), self.cols)))
        {
            draw_line_panel(&area, panel, self.x_desc, max_x)?;
        }
        Ok(())
    }
}

fn draw_line_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &LinePanel,
    x_desc: &str,
    max_x: f64,
) -> DrawResult {
    let ys = panel
        .series
        .iter()
        .flat_map(|(_, points)| points.iter().map(|q| q.1))
        .filter(|y| y.is_finite());
    // from 0 (or below, for a negative R²), at least 0.1 high, 5% of room each side
    let lo = ys.clone().fold(0.0, f64::min);
    let hi = ys.fold(lo + 0.1, f64::max);
    let pad = 0.05 * (hi - lo);
    let mut chart = panel_chart(
        area,
        &panel.caption,
        0.0..max_x,
        lo - pad..hi + pad,
        (x_desc, panel.y_desc),
        label_decimals(hi - lo),
    )?;
    for (method, points) in &panel.series {
        let colour = method_colour(*method);
        let line: Vec<(f64, f64)> = points.iter().copied().filter(|p| p.1.is_finite()).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))
            .map_err(e)?;
        chart
            .draw_series(line.into_iter().map(|p| Circle::new(p, 3, colour.filled())))
            .map_err(e)?;
    }
    Ok(())
}

/// The online probe during pre-training, one line per method that ran it: the loss over
/// updates (binned), and beside it the held-out R² of the state and of the reward.
pub fn pretrain_probe(curves: &[ProbeCurve], methods: &[String], subtitle: &[String]) -> Result<Picture> {
    let series = |f: fn(&ProbeCurve) -> Vec<(f64, f64)>| -> Vec<(usize, Vec<(f64, f64)>)> {
        curves.iter().map(|c| (c.method, f(c))).collect()
    };
    let panels = [
        LinePanel {
            caption: "pre-training loss".into(),
            y_desc: "loss",
            series: series(|c| c.probes.loss.iter().map(|&(x, y)| (x as f64, y)).collect()),
        },
        LinePanel {
            caption: "state: held-out R²".into(),
            y_desc: "R²",
            series: series(|c| c.probes.points.iter().map(|p| (p.step as f64, p.state_r2)).collect()),
        },
        LinePanel {
            caption: "reward: held-out R²".into(),
            y_desc: "R²",
            series: series(|c| c.probes.points.iter().map(|p| (p.step as f64, p.reward_r2)).collect()),
        },
    ];
    render(
        "pretrain_probe",
        &LinePanels {
            title: "Online linear probe during pre-training",
            x_desc: "pre-training updates",
            panels: &panels,
            cols: panels.len(),
            methods,
            subtitle,
        },
    )
}

/// One exploring domain's curves over its frames, for [`exploration_curves`].
#[derive(Debug, Clone)]
pub struct ExplorationPanel {
    pub task: String,
    /// (frame, mean intrinsic reward of an episode's updates).
    pub intrinsic_reward: Vec<(f64, f64)>,
    /// (frame, the episode's state entropy: `train/state_entropy`).
    pub state_entropy: Vec<(f64, f64)>,
}

/// `lfs explore`'s picture: per domain (columns), the intrinsic reward and the state entropy of
/// each episode over the run's frames (rows).
pub fn exploration_curves(domains: &[ExplorationPanel], run: &str, subtitle: &[String]) -> Result<Picture> {
    let panels: Vec<LinePanel> = [
        (
            "intrinsic reward",
            "mean per update",
            (|d: &ExplorationPanel| &d.intrinsic_reward) as fn(&ExplorationPanel) -> &Vec<(f64, f64)>,
        ),
        ("state entropy", "k-NN estimate", |d: &ExplorationPanel| {
            &d.state_entropy
        }),
    ]
    .iter()
    .flat_map(|(what, y_desc, f)| {
        domains.iter().map(move |d| LinePanel {
            caption: format!("{}: {what}", d.task),
            y_desc,
            series: vec![(0, f(d).clone())],
        })
    })
    .collect();
    render(
        "exploration",
        &LinePanels {
            title: "Reward-free exploration: intrinsic reward and state coverage per episode",
            x_desc: "frames in the domain",
            panels: &panels,
            cols: domains.len(),
            methods: &[run.to_string()],
            subtitle,
        },
    )
}
