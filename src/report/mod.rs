//! `lfs report`: a benchmark-suite directory becomes a report to paste into a paper.
//!
//! [`analyse`] reads the suite's cells ([`cells`]), refuses cells that cannot stand side by
//! side ([`mismatch`]), and computes the scores of the done cells at each budget ([`scores`]),
//! expert-normalised by the published references ([`reference`], docs/design.md §8–§9), with
//! rliable's aggregates and intervals ([`aggregate`]). [`render`] turns that into the files:
//! `report.md` ([`markdown`]), `results.csv` ([`results_csv`]) and the pictures ([`plots`]),
//! beside the encoders' pre-training ([`pretraining`], [`pretrain_probe`]) and their linear
//! probes ([`probes`], with `probe.csv`) when the suite's encoder rows have them,
//! all in memory, so that [`write`] either writes every one of them (atomically, one by one)
//! or, when anything failed before, nothing.

pub mod aggregate;
pub mod cells;
pub mod exploration;
pub mod markdown;
pub mod mismatch;
pub mod plots;
pub mod pretrain_probe;
pub mod pretraining;
pub mod primary;
pub mod probes;
pub mod published;
pub mod reference;
pub mod results_csv;
pub mod scores;
pub mod seed_units;
pub mod update_bins;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use aggregate::{BootstrapConfig, Estimate};
use cells::Cell;
use mismatch::Mismatch;
use scores::{BudgetAggregates, BudgetScores, MethodCells};

use crate::fsutil::write_bytes_atomic;
use crate::rl::AgentKind;
use crate::suite::runner::SUITE_FILE;
use crate::suite::status::{self, StateCounts};
use crate::{Error, Result};

/// The report's main file.
pub const REPORT_MD: &str = "report.md";
/// Every evaluation in DrQ-v2's long format.
pub const RESULTS_CSV: &str = "results.csv";

/// What the user asked for beyond the suite directory.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Report cells that differ in render quality, feature cache, budget, action repeat or
    /// episode length, listing the differences, instead of refusing.
    pub allow_mismatch: bool,
    /// Budgets (frames) to score the runs at; empty: the budgets of the done cells.
    pub budgets: Vec<u64>,
    pub bootstrap: BootstrapConfig,
    /// `probe.json` files of `lfs probe` to set beside the SAC returns, besides those found
    /// beside the encoder rows' exports.
    pub probes: Vec<PathBuf>,
}

/// The suite, analysed.
#[derive(Debug, Clone)]
pub struct Report {
    pub suite_dir: PathBuf,
    /// Every cell with a folder, done or not, by index.
    pub cells: Vec<Cell>,
    /// How far the suite has got, cells not started included when the folder has the suite's
    /// plan (the `suite.toml` that `lfs suite run` writes).
    pub progress: StateCounts,
    /// The suite mixes agents, so a method is `encoder+agent`.
    pub agents_differ: bool,
    /// The done cells by method; methods in the order of their first cell (their colours).
    pub methods: Vec<MethodCells>,
    /// Differences reported with `allow_mismatch` (empty otherwise).
    pub mismatches: Vec<Mismatch>,
    /// One entry per budget, increasing.
    pub budgets: Vec<BudgetReport>,
    /// Normalised IQM over frames, one curve per method.
    pub iqm_curves: Vec<Vec<(u64, Estimate)>>,
    /// N during the pre-training of the encoders that LNC methods made.
    pub pretraining: pretraining::Pretraining,
    /// The encoders' linear probes beside their SAC returns at the largest budget.
    pub probes: probes::Probes,
    /// DrQ-v2's published curves on the tasks the suite ran DrQ-v2 on, up to the frames its
    /// cells reached there.
    pub published: Vec<PublishedCurve>,
    /// The verdicts of the suite file's pre-registered `[primary]` comparison, one per method of
    /// its `b` (none when it declares none).
    pub primary: Vec<primary::PrimaryVerdict>,
    pub bootstrap: BootstrapConfig,
}

/// DrQ-v2's published learning curve on one task ([`published`]).
#[derive(Debug, Clone)]
pub struct PublishedCurve {
    pub task: crate::env::Task,
    pub points: Vec<scores::CurvePoint>,
}

/// Scores and aggregates at one budget.
#[derive(Debug, Clone)]
pub struct BudgetReport {
    pub scores: BudgetScores,
    pub aggregates: BudgetAggregates,
}

impl Report {
    pub fn method_names(&self) -> Vec<String> {
        self.methods.iter().map(|m| m.method.clone()).collect()
    }

    pub fn done_cells(&self) -> impl Iterator<Item = &Cell> + Clone {
        self.cells.iter().filter(|c| c.is_done())
    }
}

/// Read and analyse the suite at `suite_dir`. Cells that differ in a setting that matters are
/// an [`Error::CellMismatch`] naming the settings and cells, unless `allow_mismatch`.
pub fn analyse(suite_dir: &Path, opts: &ReportOptions) -> Result<Report> {
    let cells = cells::read_suite(suite_dir)?;
    let mismatches = mismatch::find_mismatches(&cells);
    if !mismatches.is_empty() && !opts.allow_mismatch {
        let list: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
        return Err(Error::CellMismatch(list.join("; ")));
    }
    let agents: BTreeSet<&str> = cells.iter().map(|c| c.meta.agent.as_str()).collect();
    let agents_differ = agents.len() > 1;
    let methods = scores::group_by_method(&cells, agents_differ);
    let floor = floor_method(&cells, &methods);
    let declared = primary::declared(suite_dir)?;
    let mut budgets: BTreeSet<u64> = if opts.budgets.is_empty() {
        cells
            .iter()
            .filter_map(|c| c.finished.as_ref().map(|f| f.settings.num_train_frames))
            .collect()
    } else {
        opts.budgets.iter().copied().collect()
    };
    // The primary comparison is decided at the suite's own budget, whatever else is asked.
    if let Some((_, budget)) = &declared {
        budgets.insert(*budget);
    }
    let budgets: Vec<BudgetReport> = budgets
        .into_iter()
        .map(|budget| {
            let scores = scores::scores_at(&cells, &methods, budget);
            let aggregates = scores::aggregates_at(&scores, floor.as_deref(), &opts.bootstrap);
            BudgetReport { scores, aggregates }
        })
        .collect();
    let iqm_curves = methods
        .iter()
        .map(|m| scores::iqm_curve(&cells, m, &opts.bootstrap))
        .collect();
    let pretraining = pretraining::read(&cells, &methods);
    let probes = probes::read(&cells, &methods, budgets.last().map(|b| &b.scores), &opts.probes);
    let progress = progress(suite_dir, &cells)?;
    let published = published_curves(&cells, &opts.bootstrap);
    let primary = declared
        .map(|(declared, budget)| {
            let scores = &budgets
                .iter()
                .find(|b| b.scores.budget == budget)
                .expect("inserted above")
                .scores;
            primary::decide(&declared, scores, &opts.bootstrap)
        })
        .unwrap_or_default();
    Ok(Report {
        suite_dir: suite_dir.to_path_buf(),
        cells,
        progress,
        agents_differ,
        methods,
        mismatches: if opts.allow_mismatch { mismatches } else { Vec::new() },
        budgets,
        iqm_curves,
        pretraining,
        probes,
        published,
        primary,
        bootstrap: opts.bootstrap,
    })
}

/// DrQ-v2's published curve on every task with a done DrQ-v2 cell, at the published frames up
/// to the last frame the suite's cells evaluated there.
fn published_curves(cells: &[Cell], bootstrap: &BootstrapConfig) -> Vec<PublishedCurve> {
    crate::env::Task::ALL
        .into_iter()
        .filter_map(|task| {
            let done = cells
                .iter()
                .filter(|c| c.meta.task == task)
                .filter_map(|c| c.finished.as_ref());
            if !done.clone().any(|f| f.settings.agent_kind == AgentKind::DrQv2.name()) {
                return None;
            }
            let last = done.flat_map(|f| f.evals.last()).map(|r| r.frame).max()?;
            let mut returns = published::drqv2_returns(task);
            returns.retain(|&frame, _| frame <= last);
            let points = scores::curve_points(returns, bootstrap);
            (!points.is_empty()).then_some(PublishedCurve { task, points })
        })
        .collect()
}

/// Every cell of the suite's plan when `suite_dir` holds it (a cell not started is pending),
/// else the cell folders alone.
fn progress(suite_dir: &Path, cells: &[Cell]) -> Result<StateCounts> {
    if suite_dir.join(SUITE_FILE).is_file() {
        let rows = status::status(suite_dir)?;
        return Ok(StateCounts::of(rows.iter().map(|r| r.shown)));
    }
    Ok(StateCounts::of(cells.iter().map(Cell::shown)))
}

/// The floor every method is compared with: the method of the suite's never-trained encoder
/// under frozen-encoder SAC (source `random`, agent `sac`), if it has one.
fn floor_method(cells: &[Cell], methods: &[MethodCells]) -> Option<String> {
    methods
        .iter()
        .find(|m| {
            m.by_task
                .values()
                .flatten()
                .next()
                .is_some_and(|&i| cells[i].meta.encoder_source == "random" && cells[i].meta.agent == "sac")
        })
        .map(|m| m.method.clone())
}

/// One output file: its name in the report folder and its bytes.
#[derive(Debug, Clone)]
pub struct ReportFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Every file of the report, in memory. Pictures are drawn only when some cell is done.
pub fn render(report: &Report) -> Result<Vec<ReportFile>> {
    let pictures = if report.methods.is_empty() {
        Vec::new()
    } else {
        draw_pictures(report)?
    };
    let stems: Vec<&str> = pictures.iter().map(|p| p.stem).collect();
    let mut files = vec![
        ReportFile {
            name: REPORT_MD.to_string(),
            bytes: markdown::render(report, &stems).into_bytes(),
        },
        ReportFile {
            name: RESULTS_CSV.to_string(),
            bytes: results_csv::to_csv(&results_csv::rows(&report.cells)).into_bytes(),
        },
    ];
    if !report.probes.rows.is_empty() {
        files.push(ReportFile {
            name: probes::PROBE_CSV.to_string(),
            bytes: probes::to_csv(report).into_bytes(),
        });
    }
    for p in pictures {
        files.push(ReportFile {
            name: format!("{}.png", p.stem),
            bytes: p.png,
        });
        files.push(ReportFile {
            name: format!("{}.svg", p.stem),
            bytes: p.svg.into_bytes(),
        });
    }
    Ok(files)
}

/// What a learning curve's band is, for its subtitle.
const CURVE_BAND: &str = "95% bootstrap interval of the mean (seeds resampled; with few seeds, a rough guide)";

fn draw_pictures(report: &Report) -> Result<Vec<plots::Picture>> {
    let methods = report.method_names();
    let scale = markdown::scale_line(report);
    // DrQ-v2's published curves, where the suite ran DrQ-v2, as one more line of its panels.
    let mut panels = task_panels(report, scores::task_curve);
    let mut curve_methods = methods.clone();
    if !report.published.is_empty() {
        curve_methods.push(published::LABEL.to_string());
        for curve in &report.published {
            if let Some(panel) = panels.iter_mut().find(|p| p.task == curve.task) {
                panel.series.push(plots::CurveSeries {
                    method: methods.len(),
                    points: curve.points.clone(),
                });
            }
        }
    }
    let mut pictures = vec![plots::learning_curves(
        &panels,
        &curve_methods,
        &[format!("mean over seeds; band: {CURVE_BAND}"), scale.clone()],
    )?];
    // Normalised scores exist on DMControl tasks only (the Jaco tasks have no expert score).
    if report.iqm_curves.iter().any(|c| !c.is_empty()) {
        pictures.push(plots::iqm_curves(
            &report.iqm_curves,
            &methods,
            &[
                "95% stratified-bootstrap intervals (rliable); expert score: DrQ-v2 at 500K frames".to_string(),
                scale.clone(),
            ],
        )?);
    }
    let selected = task_panels(report, scores::selected_curve);
    if !selected.is_empty() {
        pictures.push(plots::selected_curves(
            &selected,
            &methods,
            &[
                format!("lfs train runs: mean N per update between evaluations; mean over seeds; band: {CURVE_BAND}"),
                markdown::scale_line(report),
            ],
        )?);
    }
    if !report.pretraining.curves.is_empty() {
        pictures.push(pretrain_selected_picture(report, &methods)?);
    }
    if !report.pretraining.probes.is_empty() {
        pictures.push(plots::pretrain_probe(
            &report.pretraining.probes,
            &methods,
            &[format!(
                "each encoder's lfs pretrain log: loss (mean over {} bins of updates) and the online probe's held-out R² \
                 (mean over the probe set's tasks)",
                update_bins::NUM_BINS
            )],
        )?);
    }
    if let Some(bars) = aggregate_picture(report, &methods, scale)? {
        pictures.push(bars);
    }
    Ok(pictures)
}

/// N per update of each method's pre-training runs, binned by update, with what its band is.
fn pretrain_selected_picture(report: &Report, methods: &[String]) -> Result<plots::Picture> {
    let curves = pretraining::by_method(&report.pretraining.curves);
    let mut subtitle = vec![format!(
        "each encoder's lfs pretrain log, {} bins of updates: N, the mean over a bin's updates",
        update_bins::NUM_BINS
    )];
    if curves.iter().any(|c| c.runs == 1) {
        subtitle.push(
            "a method with one pre-training run: band ±1 std of N within the bin (the spread of N, not an interval)"
                .to_string(),
        );
    }
    if curves.iter().any(|c| c.runs > 1) {
        subtitle.push(
            "a method with several pre-training runs (one per seed): the mean over its runs; band: its lowest and \
             highest run (the spread between runs, not an interval)"
                .to_string(),
        );
    }
    let left_out: usize = curves.iter().map(|c| c.left_out).sum();
    if left_out > 0 {
        subtitle.push(format!(
            "{left_out} run(s) with another number of updates than their method's first not drawn; every run's \
             table is in report.md"
        ));
    }
    plots::pretrain_selected(&curves, methods, &subtitle)
}

/// The aggregate bars over all tasks at the last frame budget, when any row covers them all.
fn aggregate_picture(report: &Report, methods: &[String], scale: String) -> Result<Option<plots::Picture>> {
    let Some(last) = report.budgets.last() else {
        return Ok(None);
    };
    let rows: Vec<scores::AggregateRow> = last
        .aggregates
        .rows
        .iter()
        .filter(|r| r.set == scores::TaskSet::All)
        .cloned()
        .collect();
    if rows.is_empty() {
        return Ok(None);
    }
    let subtitle = [
        format!(
            "all tasks, scores at {} frames; expert score: DrQ-v2 at 500K frames",
            plots::frames_label(last.scores.budget as f64)
        ),
        scale,
    ];
    Ok(Some(plots::aggregate_bars(&rows, methods, &subtitle)?))
}

/// One panel per task holding `curve` of every method that has one there.
fn task_panels(
    report: &Report,
    curve: fn(&[Cell], &[usize], &BootstrapConfig) -> Vec<scores::CurvePoint>,
) -> Vec<plots::TaskPanel> {
    crate::env::Task::ALL
        .into_iter()
        .filter_map(|task| {
            let series: Vec<plots::CurveSeries> = report
                .methods
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    let points = curve(&report.cells, m.by_task.get(&task)?, &report.bootstrap);
                    (!points.is_empty()).then_some(plots::CurveSeries { method: i, points })
                })
                .collect();
            (!series.is_empty()).then(|| plots::TaskPanel {
                task,
                seen: reference::is_seen(task),
                series,
            })
        })
        .collect()
}

/// Write the files into `out_dir` (created if needed), each atomically; returns their paths.
pub fn write(files: &[ReportFile], out_dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out_dir)?;
    files
        .iter()
        .map(|f| {
            let path = out_dir.join(&f.name);
            write_bytes_atomic(&path, &f.bytes)?;
            Ok(path)
        })
        .collect()
}
