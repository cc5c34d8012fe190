//! The report's pictures, each as PNG and SVG: per-task learning curves (the mean over seeds
//! with its 95% bootstrap interval, one colour per method), the normalised IQM over frames with
//! its 95% interval, rliable's interval-estimate bars, and the encoders' pre-training (N per
//! update, the online probe beside the loss). Every band says in its subtitle what it is; bands
//! are drawn under all the lines, so no line is tinted by another method's band; a legend lists
//! only the methods drawn.
//!
//! Text is drawn with DejaVu Sans embedded in the binary (`font/`, with its licence) through
//! ab_glyph, so the pictures render the same on a headless machine without system fonts or
//! fontconfig. PNGs are drawn into memory and encoded with `image`; nothing is written here.

use std::sync::OnceLock;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::aggregate::Estimate;
use super::pretraining::MethodLnc;
use super::scores::CurvePoint;
use crate::env::Task;
use crate::{Error, Result};

mod bars;
mod lines;

pub use bars::aggregate_bars;
pub use lines::{exploration_curves, pretrain_probe, ExplorationPanel};

/// DejaVu Sans (src/report/plots/font/LICENSE).
static FONT: &[u8] = include_bytes!("font/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

/// A drawn picture: its file stem and both encodings.
#[derive(Debug, Clone)]
pub struct Picture {
    pub stem: &'static str,
    pub png: Vec<u8>,
    pub svg: String,
}

/// One colour per method, in method order (matplotlib's `tab10`, which rliable's plots use).
pub fn method_colour(i: usize) -> RGBColor {
    const TAB10: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = TAB10[i % TAB10.len()];
    RGBColor(r, g, b)
}

/// Register the embedded font once for the whole process.
fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the embedded DejaVu Sans font does not parse".to_string())
        })
        .clone()
        .map_err(Error::Plot)
}

fn font(size: f64) -> TextStyle<'static> {
    (FAMILY, size).into_font().into()
}

/// What a picture draws, on any backend.
trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult;
}

type DrawResult = std::result::Result<(), String>;

/// Any drawing error as text (the backends' error types differ).
fn e<T: std::fmt::Display>(err: T) -> String {
    err.to_string()
}

fn render(stem: &'static str, figure: &impl Figure) -> Result<Picture> {
    ensure_font()?;
    let (w, h) = figure.size();
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        figure.draw(&root).map_err(Error::Plot)?;
        root.present().map_err(|err| Error::Plot(err.to_string()))?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        figure.draw(&root).map_err(Error::Plot)?;
        root.present().map_err(|err| Error::Plot(err.to_string()))?;
    }
    let image = image::RgbImage::from_raw(w, h, rgb).ok_or_else(|| Error::Plot("bitmap of the wrong size".into()))?;
    let mut png = Vec::new();
    image
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|err| Error::Plot(format!("encoding {stem}.png: {err}")))?;
    Ok(Picture { stem, png, svg })
}

/// Frames as axis labels: 0, 500, 2K, 2.5K, 100K, 1M.
pub fn frames_label(frames: f64) -> String {
    let (value, unit) = match frames.abs() {
        f if f >= 1e6 => (frames / 1e6, "M"),
        f if f >= 1e3 => (frames / 1e3, "K"),
        _ => (frames, ""),
    };
    let text = format!("{value:.1}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{unit}")
}

/// Subtitle lines under a picture's title.
fn draw_subtitle<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, subtitle: &[String]) -> DrawResult {
    for (i, line) in subtitle.iter().enumerate() {
        area.draw(&Text::new(line.clone(), (20, 38 + 20 * i as i32), font(16.0)))
            .map_err(e)?;
    }
    Ok(())
}

/// Decimals that tell apart the labels of an axis spanning `span` (returns near 0 need some).
fn label_decimals(span: f64) -> usize {
    match span {
        s if s >= 50.0 => 0,
        s if s >= 5.0 => 1,
        _ => 2,
    }
}

/// A row of coloured swatches with the names of the methods `drawn` (indices into `methods`,
/// which fix the colours).
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    methods: &[String],
    drawn: &std::collections::BTreeSet<usize>,
    y: i32,
) -> DrawResult {
    let mut x = 20;
    for (i, m) in methods.iter().enumerate().filter(|(i, _)| drawn.contains(i)) {
        let colour = method_colour(i);
        area.draw(&Rectangle::new(
            [(x, y - 7), (x + 28, y + 7)],
            colour.mix(0.35).filled(),
        ))
        .map_err(e)?;
        area.draw(&PathElement::new(vec![(x, y), (x + 28, y)], colour.stroke_width(3)))
            .map_err(e)?;
        area.draw(&Text::new(m.clone(), (x + 36, y - 9), font(18.0)))
            .map_err(e)?;
        let width = area.estimate_text_size(m, &font(18.0)).map_err(e)?.0 as i32;
        x += 36 + width + 30;
    }
    Ok(())
}

/// A figure's white page with its header (title, subtitle lines, the legend of the methods
/// `drawn`); returns the area below the header.
fn draw_header<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &[String],
    methods: &[String],
    drawn: &std::collections::BTreeSet<usize>,
) -> std::result::Result<DrawingArea<DB, Shift>, String> {
    root.fill(&WHITE).map_err(e)?;
    let (header, body) = root.split_vertically(HEADER_PX);
    header.draw(&Text::new(title, (20, 8), font(24.0))).map_err(e)?;
    draw_subtitle(&header, subtitle)?;
    draw_legend(&header, methods, drawn, HEADER_PX as i32 - 18)?;
    Ok(body)
}

/// (rows, columns) of a grid of `panels` panels, `cols` to a row.
fn grid(panels: usize, cols: usize) -> (usize, usize) {
    let cols = cols.max(1);
    (panels.div_ceil(cols).max(1), cols)
}

/// One method's learning curve on one task.
#[derive(Debug, Clone)]
pub struct CurveSeries {
    /// Index into the method list (the colour).
    pub method: usize,
    pub points: Vec<CurvePoint>,
}

/// One panel of the learning-curve grid.
#[derive(Debug, Clone)]
pub struct TaskPanel {
    pub task: Task,
    pub seen: bool,
    pub series: Vec<CurveSeries>,
}

/// A grid of per-task panels of curves over frames.
struct LearningCurves<'a> {
    title: &'a str,
    y_desc: &'a str,
    panels: &'a [TaskPanel],
    methods: &'a [String],
    subtitle: &'a [String],
}

/// Title, two subtitle lines and the legend.
const HEADER_PX: u32 = 120;

impl LearningCurves<'_> {
    fn grid(&self) -> (usize, usize) {
        grid(self.panels.len(), self.panels.len().clamp(1, 3))
    }
}

impl Figure for LearningCurves<'_> {
    fn size(&self) -> (u32, u32) {
        let (rows, cols) = self.grid();
        // At least two panels wide, so that the subtitle fits above a single panel.
        (cols.max(2) as u32 * 520, HEADER_PX + rows as u32 * 380)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let drawn = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter().map(|s| s.method))
            .collect();
        let body = draw_header(root, self.title, self.subtitle, self.methods, &drawn)?;
        for (panel, area) in self.panels.iter().zip(body.split_evenly(self.grid())) {
            draw_task_panel(&area, panel, self.y_desc)?;
        }
        Ok(())
    }
}

/// One panel of a grid: its caption, axes over `x` × `y` with six labelled ticks each (x as
/// frames or updates, y to `decimals` places), the axis names `(x_desc, y_desc)`, no grid lines.
fn panel_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    (x_desc, y_desc): (&str, &str),
    decimals: usize,
) -> std::result::Result<ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>, String> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, font(20.0))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&|x| frames_label(*x))
        .y_label_formatter(&|y| format!("{y:.decimals$}"))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(font(14.0))
        .axis_desc_style(font(15.0))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    Ok(chart)
}

fn draw_task_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &TaskPanel, y_desc: &str) -> DrawResult {
    let points = panel.series.iter().flat_map(|s| &s.points);
    let max_frame = points.clone().map(|p| p.frame).max().unwrap_or(1).max(1) as f64;
    let max_y = points.clone().map(|p| p.interval.upper).fold(1.0, f64::max);
    let min_y = points.map(|p| p.interval.lower).fold(0.0, f64::min);
    let caption = format!("{} ({})", panel.task, if panel.seen { "seen" } else { "unseen" });
    let mut chart = panel_chart(
        area,
        &caption,
        0.0..max_frame,
        min_y..max_y * 1.05,
        ("frames", y_desc),
        label_decimals(max_y - min_y),
    )?;
    let curves: Vec<(usize, Vec<BandPoint>)> = panel
        .series
        .iter()
        .map(|s| {
            let points = s
                .points
                .iter()
                .map(|p| BandPoint {
                    x: p.frame as f64,
                    low: p.interval.lower,
                    mid: p.interval.point,
                    high: p.interval.upper,
                })
                .collect();
            (s.method, points)
        })
        .collect();
    draw_band_curves(&mut chart, &curves, 2, 3)
}

/// One x of a curve drawn with a band around it.
#[derive(Debug, Clone, Copy)]
struct BandPoint {
    x: f64,
    low: f64,
    mid: f64,
    high: f64,
}

/// Curves through the `mid`s with dots, each over a light band from `low` to `high`, in the
/// colour of its method (`(method, points)`): every band first, then every line, so that no
/// band covers a line.
fn draw_band_curves<DB: DrawingBackend>(
    chart: &mut ChartContext<DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    curves: &[(usize, Vec<BandPoint>)],
    line_width: u32,
    dot_radius: i32,
) -> DrawResult {
    for (method, points) in curves {
        let upper = points.iter().map(|p| (p.x, p.high));
        let lower = points.iter().rev().map(|p| (p.x, p.low));
        chart
            .draw_series(std::iter::once(Polygon::new(
                upper.chain(lower).collect::<Vec<_>>(),
                method_colour(*method).mix(0.2).filled(),
            )))
            .map_err(e)?;
    }
    for (method, points) in curves {
        let colour = method_colour(*method);
        let line: Vec<(f64, f64)> = points.iter().map(|p| (p.x, p.mid)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), colour.stroke_width(line_width)))
            .map_err(e)?;
        chart
            .draw_series(line.into_iter().map(|p| Circle::new(p, dot_radius, colour.filled())))
            .map_err(e)?;
    }
    Ok(())
}

/// Per-task learning curves in a grid, one panel per task.
pub fn learning_curves(panels: &[TaskPanel], methods: &[String], subtitle: &[String]) -> Result<Picture> {
    render(
        "learning_curves",
        &LearningCurves {
            title: "Learning curves: evaluation return",
            y_desc: "return",
            panels,
            methods,
            subtitle,
        },
    )
}

/// Per-task curves of N, the synthetic pairs in the objective's batch of `lfs train` runs
/// (the paper's figure on N), in the learning curves' grid.
pub fn selected_curves(panels: &[TaskPanel], methods: &[String], subtitle: &[String]) -> Result<Picture> {
    render(
        "synthetic_selected",
        &LearningCurves {
            title: "Synthetic pairs in the objective's batch (N per update)",
            y_desc: "N",
            panels,
            methods,
            subtitle,
        },
    )
}

/// Curves with a band, one per method, on one chart (`curves[i]` belongs to `methods[i]`; an
/// empty curve is not drawn).
struct BandCurves<'a> {
    title: &'a str,
    x_desc: &'a str,
    y_desc: &'a str,
    curves: &'a [Vec<BandPoint>],
    methods: &'a [String],
    subtitle: &'a [String],
}

impl Figure for BandCurves<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, 640)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let drawn = (0..self.curves.len()).filter(|&i| !self.curves[i].is_empty()).collect();
        let body = draw_header(root, self.title, self.subtitle, self.methods, &drawn)?;
        let all = self.curves.iter().flatten();
        let max_x = all.clone().map(|p| p.x).fold(1.0, f64::max);
        let max_y = all.clone().map(|p| p.high).fold(0.1, f64::max);
        let min_y = all.map(|p| p.low).fold(0.0, f64::min);
        let mut chart = ChartBuilder::on(&body)
            .margin(16)
            .x_label_area_size(52)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..max_x, min_y..max_y * 1.05)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_labels(8)
            .y_labels(8)
            .x_label_formatter(&|x| frames_label(*x))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .label_style(font(15.0))
            .axis_desc_style(font(16.0))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(e)?;
        let curves: Vec<(usize, Vec<BandPoint>)> = (self.curves.iter().cloned().enumerate())
            .filter(|(_, c)| !c.is_empty())
            .collect();
        draw_band_curves(&mut chart, &curves, 3, 4)
    }
}

/// The aggregate curve: normalised IQM over frames with its interval, one curve per method
/// (`curves[i]` belongs to `methods[i]`).
pub fn iqm_curves(curves: &[Vec<(u64, Estimate)>], methods: &[String], subtitle: &[String]) -> Result<Picture> {
    let curves: Vec<Vec<BandPoint>> = curves
        .iter()
        .map(|curve| {
            curve
                .iter()
                .map(|(f, est)| BandPoint {
                    x: *f as f64,
                    low: est.lower,
                    mid: est.point,
                    high: est.upper,
                })
                .collect()
        })
        .collect();
    render(
        "iqm_curve",
        &BandCurves {
            title: "IQM of expert-normalised scores over frames",
            x_desc: "frames",
            y_desc: "IQM normalised score",
            curves: &curves,
            methods,
            subtitle,
        },
    )
}

/// N, the synthetic pairs LNC kept per pre-training update, binned, one curve per method that
/// has one (the paper's figure on N, for video pre-training): over a method's runs when it has
/// several ([`super::pretraining::by_method`] says what the band is).
pub fn pretrain_selected(curves: &[MethodLnc], methods: &[String], subtitle: &[String]) -> Result<Picture> {
    let mut by_method = vec![Vec::new(); methods.len()];
    for c in curves {
        by_method[c.method] = c
            .bins
            .iter()
            .map(|b| BandPoint {
                x: b.last as f64,
                low: b.low,
                mid: b.mean,
                high: b.high,
            })
            .collect();
    }
    render(
        "pretrain_selected",
        &BandCurves {
            title: "Synthetic pairs LNC selected during pre-training (N per update)",
            x_desc: "pre-training updates",
            y_desc: "N",
            curves: &by_method,
            methods,
            subtitle,
        },
    )
}
