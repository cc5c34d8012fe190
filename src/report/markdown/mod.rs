//! `report.md`: the suite's scale beside the paper's, the cells not counted, per-task scores
//! (raw and expert-normalised) beside the paper's Table 3, seen vs unseen tasks, rliable's
//! aggregates, the encoders' linear probes beside their returns, the pictures, the encoders'
//! pre-training (N, the online probe), and what the suite cost. Every number says what it is at: ours at
//! the suite's budget and seeds, the paper's at 500K frames and 5 seeds (docs/design.md §9);
//! a reduced-scale number is never presented as the paper's.

mod probes;
mod scale;
mod tables;

use std::collections::BTreeSet;
use std::fmt::Write;

use super::aggregate::{Aggregate, Estimate};
use super::cells::{Cell, CellSettings};
use super::plots::frames_label;
use super::probes::{ProbeFile, RankAgreement, MIN_ENCODERS, PROBE_CSV, R2};
use super::reference::{
    expert_score, is_seen, PaperColumn, EXPERT_SOURCE, JACO_MAX_RETURN, PAPER_SCALE, PAPER_TABLE2, PAPER_TABLE2_FRAMES,
    PAPER_TABLE2_SCALE, PAPER_TABLE3,
};
use super::scores::{BudgetScores, SeedStats, TaskSet};
use super::{BudgetReport, Report, RESULTS_CSV};
use crate::env::Task;

/// The paper's budget and seeds (docs/design.md §8–§9).
const PAPER_FRAMES: u64 = 500_000;
const PAPER_SEEDS: usize = 5;

/// Distinct values, in order, joined.
fn distinct<T: Ord + ToString>(values: impl Iterator<Item = T>) -> String {
    let set: BTreeSet<T> = values.collect();
    set.iter().map(ToString::to_string).collect::<Vec<_>>().join(" / ")
}

fn settings(report: &Report) -> impl Iterator<Item = &CellSettings> + Clone {
    report
        .done_cells()
        .filter_map(|c| c.finished.as_ref().map(|f| &f.settings))
}

/// Seeds per task over every method and task with a done run: "3" or "2–3".
fn seeds_per_task(report: &Report) -> String {
    let counts: BTreeSet<usize> = report
        .methods
        .iter()
        .flat_map(|m| m.by_task.values().map(Vec::len))
        .collect();
    match (counts.first(), counts.last()) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}–{b}"),
        _ => "0".to_string(),
    }
}

/// One line of scale for the pictures' subtitles.
pub fn scale_line(report: &Report) -> String {
    let frames: BTreeSet<u64> = settings(report).map(|s| s.num_train_frames).collect();
    let frames: Vec<String> = frames.iter().map(|f| frames_label(*f as f64)).collect();
    format!(
        "ours: {} frames, {} per task (the paper: 500K frames, 5 seeds)",
        frames.join("/"),
        seeds_count(&seeds_per_task(report))
    )
}

fn fmt_stats(s: Option<SeedStats>, decimals: usize) -> String {
    match s {
        Some(s) => format!("{:.*} ± {:.*} ({})", decimals, s.mean, decimals, s.std, s.n),
        None => "–".to_string(),
    }
}

fn fmt_estimate(e: &Estimate) -> String {
    format!("{:.3} [{:.3}, {:.3}]", e.point, e.lower, e.upper)
}

/// "1 task", "3 tasks".
fn tasks_count(n: usize) -> String {
    format!("{n} task{}", if n == 1 { "" } else { "s" })
}

/// "1 seed", "3 seeds", "2–3 seeds".
fn seeds_count(n: &str) -> String {
    format!("{n} seed{}", if n == "1" { "" } else { "s" })
}

fn fmt_hours(seconds: f64) -> String {
    if seconds >= 3600.0 {
        format!("{:.2} h", seconds / 3600.0)
    } else {
        format!("{:.1} min", seconds / 60.0)
    }
}

/// The whole file. `pictures` are the stems of the pictures written beside it.
pub fn render(report: &Report, pictures: &[&str]) -> String {
    let mut md = String::new();
    header(&mut md, report);
    scale(&mut md, report);
    if !report.primary.is_empty() {
        md.push_str(&super::primary::markdown(&report.primary));
    }
    not_counted(&mut md, report);
    mismatches(&mut md, report);
    for budget in &report.budgets {
        scores_at_budget(&mut md, report, budget);
    }
    probes_section(&mut md, report);
    published_section(&mut md, report);
    pictures_section(&mut md, pictures);
    lnc_during_pretraining(&mut md, report);
    online_probe(&mut md, report);
    compute_cost(&mut md, report);
    provenance(&mut md, report);
    md
}

fn header(md: &mut String, report: &Report) {
    let _ = writeln!(md, "# Benchmark report\n");
    let _ = writeln!(
        md,
        "Suite `{}`: {}. Only done cells count in scores, aggregates and pictures. Written by \
         `lfs report` (lfs {}).\n",
        report.suite_dir.display(),
        report.progress,
        env!("CARGO_PKG_VERSION"),
    );
}

use probes::*;
use scale::*;
use tables::*;
