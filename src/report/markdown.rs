//! `report.md`: the suite's scale beside the paper's, the cells not counted, per-task scores
//! (raw and expert-normalised) beside the paper's Table 3, seen vs unseen tasks, rliable's
//! aggregates, the encoders' linear probes beside their returns, the pictures, the encoders'
//! pre-training (N, the online probe), and what the suite cost. Every number says what it is at: ours at
//! the suite's budget and seeds, the paper's at 500K frames and 5 seeds (docs/design.md §9);
//! a reduced-scale number is never presented as the paper's.

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
    if let Some(verdict) = &report.primary {
        md.push_str(&super::primary::markdown(verdict));
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

fn scale(md: &mut String, report: &Report) {
    let s = settings(report);
    let _ = writeln!(md, "## Scale\n");
    if report.methods.is_empty() {
        let _ = writeln!(md, "No cell is done yet: nothing to score.\n");
        return;
    }
    let frames = distinct(s.clone().map(|s| s.num_train_frames));
    let feature_cache = distinct(s.clone().map(|s| {
        if s.feature_cache {
            format!("on, {} (features cached, no augmentation)", s.feature_cache_dtype)
        } else {
            "off (random shift on every batch)".to_string()
        }
    }));
    let _ = writeln!(md, "| | frames (env steps) | seeds per task | evaluation | settings |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    let _ = writeln!(
        md,
        "| ours (this suite) | {frames} (action repeat {}) | {} | episodes: {}, every {} frames | batch {}, replay {}, \
         feature cache {feature_cache}, render quality {} |",
        distinct(s.clone().map(|s| s.action_repeat)),
        seeds_per_task(report),
        distinct(s.clone().map(|s| s.num_eval_episodes)),
        distinct(s.clone().map(|s| s.eval_every_frames)),
        distinct(s.clone().map(|s| s.batch_size)),
        distinct(s.clone().map(|s| s.replay_capacity)),
        distinct(s.map(|s| s.render_quality.clone())),
    );
    let has_task = |among: &[Task]| {
        report
            .methods
            .iter()
            .any(|m| m.by_task.keys().any(|t| among.contains(t)))
    };
    let (has_dmc, has_jaco) = (has_task(&Task::DMC), has_task(&Task::JACO));
    if has_dmc {
        let _ = writeln!(
            md,
            "| the paper (Table 3) | {PAPER_FRAMES} (action repeat 2) | {PAPER_SEEDS} | episodes: 10, every 20000 frames | \
             the paper's (docs/design.md §6, §8): batch 512, replay 40000, augmentation, default rendering |"
        );
    }
    if has_jaco {
        let _ = writeln!(
            md,
            "| the paper (Table 2, Jaco tasks) | {PAPER_TABLE2_FRAMES} (action repeat 2) | not stated | not stated | \
             end to end from pixels (URLB's Jaco reach) |"
        );
    }
    let _ = writeln!(md);
    let max_frames = settings(report).map(|s| s.num_train_frames).max().unwrap_or(0);
    let min_seeds = report
        .methods
        .iter()
        .flat_map(|m| m.by_task.values().map(Vec::len))
        .min()
        .unwrap_or(0);
    // The paper's budget for the tables this suite's tasks are in (Table 3's when it has both).
    let paper_frames = if has_dmc { PAPER_FRAMES } else { PAPER_TABLE2_FRAMES };
    if max_frames < paper_frames || (has_dmc && min_seeds < PAPER_SEEDS) {
        let paper_seeds = if has_dmc {
            format!(" and {PAPER_SEEDS} seeds")
        } else {
            String::new()
        };
        let _ = writeln!(
            md,
            "**Reduced scale.** Our numbers come from at most {} frames and as few as {} per task; \
             the paper's from {} frames{paper_seeds}. They are not the paper's numbers, and neither \
             reproduce nor refute them.\n",
            frames_label(max_frames as f64),
            seeds_count(&min_seeds.to_string()),
            frames_label(paper_frames as f64),
        );
    }
    let mut sources = Vec::new();
    if has_dmc {
        sources.push(PAPER_SCALE);
    }
    if has_jaco {
        sources.push(PAPER_TABLE2_SCALE);
    }
    let _ = writeln!(
        md,
        "The paper's columns below are copied from {}; nothing in them is computed here except where \
         a column says \"derived\".\n",
        sources.join(", and from ")
    );
}

fn not_counted(md: &mut String, report: &Report) {
    let others: Vec<&Cell> = report.cells.iter().filter(|c| !c.is_done()).collect();
    if others.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Cells not counted\n");
    let _ = writeln!(
        md,
        "| cell | method | task | seed | state | frames done | attempts | error |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for c in others {
        let error = c
            .meta
            .error
            .as_deref()
            .unwrap_or("")
            .replace('|', "\\|")
            .replace('\n', " ");
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            cell_columns(c, report.agents_differ),
            c.meta.attempts,
            error
        );
    }
    let _ = writeln!(md);
}

fn mismatches(md: &mut String, report: &Report) {
    if report.mismatches.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Settings that differ between cells\n");
    let _ = writeln!(
        md,
        "Reported with `--allow-mismatch`: these cells differ in settings that change what a score means, \
         so the numbers below pool or set side by side runs that are not the same experiment.\n"
    );
    for m in &report.mismatches {
        let _ = writeln!(md, "- {m}");
    }
    let _ = writeln!(md);
}

/// Column headers for our methods at a budget: the method, its budget and seeds.
fn our_header(scores: &BudgetScores, method: usize) -> String {
    let m = &scores.methods[method];
    let seeds: BTreeSet<usize> = m.runs_by_task.values().map(Vec::len).collect();
    let seeds = match (seeds.first(), seeds.last()) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}–{b}"),
        _ => "0".into(),
    };
    format!(
        "{} (ours, {}, {})",
        m.method,
        frames_label(scores.budget as f64),
        seeds_count(&seeds)
    )
}

fn paper_header(p: &PaperColumn) -> String {
    format!("paper {} (500K, 5 seeds)", p.method)
}

/// The tasks of `among` that some method has a score on, in `among`'s order.
fn tasks_in(scores: &BudgetScores, among: &[Task]) -> Vec<Task> {
    among
        .iter()
        .copied()
        .filter(|t| scores.methods.iter().any(|m| m.runs_by_task.contains_key(t)))
        .collect()
}

fn scores_at_budget(md: &mut String, report: &Report, budget: &BudgetReport) {
    let scores = &budget.scores;
    let label = frames_label(scores.budget as f64);
    let _ = writeln!(md, "## Scores at {label} frames ({} frames)\n", scores.budget);
    let tasks = tasks_in(scores, &Task::DMC);
    let jaco = tasks_in(scores, &Task::JACO);
    if tasks.is_empty() && jaco.is_empty() {
        let _ = writeln!(md, "No done run reached {} frames.\n", scores.budget);
        return;
    }
    if !jaco.is_empty() {
        jaco_table(md, scores, &jaco);
    }
    if tasks.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "A run's score is its last evaluation at or before {} frames (the mean return of its evaluation \
         episodes). Per task: mean ± std over seeds (std with ddof = 0, NumPy's default), number of runs in \
         brackets. Normalised: score ÷ expert score, the expert being {EXPERT_SOURCE}, whatever the budget of \
         ours.\n",
        scores.budget
    );
    raw_table(md, scores, &tasks);
    normalised_table(md, scores, &tasks);
    seen_unseen_table(md, scores);
    aggregates_table(md, report, budget);
    improvements_table(md, report, budget);
}

fn table_header(md: &mut String, first: &[&str], scores: &BudgetScores, paper: &[String]) {
    let mut cols: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    cols.extend((0..scores.methods.len()).map(|i| our_header(scores, i)));
    cols.extend(paper.iter().cloned());
    let _ = writeln!(md, "| {} |", cols.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(cols.len()));
}

fn raw_table(md: &mut String, scores: &BudgetScores, tasks: &[Task]) {
    let _ = writeln!(md, "### Returns per task\n");
    let paper: Vec<String> = PAPER_TABLE3.iter().map(paper_header).collect();
    table_header(md, &["task", "seen", "expert"], scores, &paper);
    for &task in tasks {
        let mut row = vec![
            task.name().to_string(),
            if is_seen(task) { "seen" } else { "unseen" }.to_string(),
            expert_score(task).map_or("–".to_string(), |e| format!("{e:.0}")),
        ];
        row.extend(scores.methods.iter().map(|m| fmt_stats(m.stats(task), 1)));
        row.extend(PAPER_TABLE3.iter().map(|p| {
            let (mean, std) = p.score(task);
            format!("{mean:.0} ± {std:.0}")
        }));
        let _ = writeln!(md, "| {} |", row.join(" | "));
    }
    let mut row = vec!["**mean over tasks**".to_string(), String::new(), String::new()];
    row.extend(scores.methods.iter().map(|m| match m.mean_raw(TaskSet::All) {
        Some((mean, n)) => format!("{mean:.1} ({})", tasks_count(n)),
        None => "–".into(),
    }));
    row.extend(PAPER_TABLE3.iter().map(|p| format!("{:.0} (9 tasks)", p.mean)));
    let _ = writeln!(md, "| {} |", row.join(" | "));
    if tasks.len() < Task::DMC.len() {
        // the paper's mean over the same tasks as ours, so the two means can be read together
        let mut row = vec![
            "**mean over the tasks shown**".to_string(),
            String::new(),
            String::new(),
        ];
        row.extend(scores.methods.iter().map(|_| String::new()));
        row.extend(PAPER_TABLE3.iter().map(|p| {
            let mean = tasks.iter().map(|t| p.score(*t).0).sum::<f64>() / tasks.len() as f64;
            format!("{mean:.1} (derived here, {})", tasks_count(tasks.len()))
        }));
        let _ = writeln!(md, "| {} |", row.join(" | "));
    }
    let _ = writeln!(md);
}

fn normalised_table(md: &mut String, scores: &BudgetScores, tasks: &[Task]) {
    let _ = writeln!(md, "### Expert-normalised scores per task\n");
    let paper: Vec<String> = PAPER_TABLE3
        .iter()
        .map(|p| format!("paper {} ÷ expert (derived here; 500K, 5 seeds)", p.method))
        .collect();
    table_header(md, &["task", "seen"], scores, &paper);
    for &task in tasks {
        let mut row = vec![
            task.name().to_string(),
            if is_seen(task) { "seen" } else { "unseen" }.to_string(),
        ];
        row.extend(scores.methods.iter().map(|m| fmt_stats(m.normalised_stats(task), 3)));
        row.extend(PAPER_TABLE3.iter().map(|p| format!("{:.3}", p.normalised(task))));
        let _ = writeln!(md, "| {} |", row.join(" | "));
    }
    let mut row = vec!["**mean over tasks**".to_string(), String::new()];
    row.extend(scores.methods.iter().map(|m| {
        let table = m.table(TaskSet::All);
        format!("{:.3} ({})", Aggregate::Mean.of(&table), tasks_count(table.tasks.len()))
    }));
    row.extend(
        PAPER_TABLE3
            .iter()
            .map(|p| format!("{:.3} (9 tasks)", paper_normalised_mean(p, TaskSet::All))),
    );
    let _ = writeln!(md, "| {} |", row.join(" | "));
    if tasks.len() < Task::DMC.len() {
        let mut row = vec!["**mean over the tasks shown**".to_string(), String::new()];
        row.extend(scores.methods.iter().map(|_| String::new()));
        row.extend(PAPER_TABLE3.iter().map(|p| {
            let mean = tasks.iter().map(|t| p.normalised(*t)).sum::<f64>() / tasks.len() as f64;
            format!("{mean:.3} (derived here, {})", tasks_count(tasks.len()))
        }));
        let _ = writeln!(md, "| {} |", row.join(" | "));
    }
    let _ = writeln!(md);
}

/// The mean over the tasks of `set` of the paper's task means ÷ expert (derived here).
fn paper_normalised_mean(p: &PaperColumn, set: TaskSet) -> f64 {
    let xs: Vec<f64> = Task::DMC
        .into_iter()
        .filter(|t| set.contains(*t))
        .map(|t| p.normalised(t))
        .collect();
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn paper_raw_mean(p: &PaperColumn, set: TaskSet) -> f64 {
    let xs: Vec<f64> = Task::DMC
        .into_iter()
        .filter(|t| set.contains(*t))
        .map(|t| p.score(t).0)
        .collect();
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// URLB's Jaco reach tasks: our raw returns beside every column of the paper's Table 2.
fn jaco_table(md: &mut String, scores: &BudgetScores, tasks: &[Task]) {
    let _ = writeln!(md, "### URLB Jaco reach tasks (the paper's Table 2)\n");
    let _ = writeln!(
        md,
        "Raw returns (no expert score: the paper reports these tasks raw); a return is at most {JACO_MAX_RETURN:.0} (one \
         per control step of a 10 s episode). The paper's columns are copied from {PAPER_TABLE2_SCALE}. Its LFS and \
         DrQ-v2 were trained without pre-training; the other eight columns (marked quoted) are unsupervised RL \
         methods that lfs does not implement, as the paper reports them. Ours are at {} frames{}.\n",
        scores.budget,
        if scores.budget == PAPER_TABLE2_FRAMES {
            ", the paper's budget"
        } else {
            ", not the paper's 100K: read them as reduced scale"
        },
    );
    let paper: Vec<String> = PAPER_TABLE2
        .iter()
        .map(|p| {
            let quoted = if p.pretrained { ", quoted" } else { "" };
            format!("paper {} (100K{quoted})", p.method)
        })
        .collect();
    table_header(md, &["task"], scores, &paper);
    for &task in tasks {
        let mut row = vec![task.name().to_string()];
        row.extend(scores.methods.iter().map(|m| fmt_stats(m.stats(task), 1)));
        row.extend(PAPER_TABLE2.iter().map(|p| {
            let (mean, pm) = p.score(task);
            format!("{mean:.0} ± {pm:.0}")
        }));
        let _ = writeln!(md, "| {} |", row.join(" | "));
    }
    let mut row = vec!["**mean over tasks**".to_string()];
    row.extend(scores.methods.iter().map(|m| {
        let means: Vec<f64> = tasks.iter().filter_map(|t| m.stats(*t)).map(|s| s.mean).collect();
        if means.is_empty() {
            "–".to_string()
        } else {
            format!(
                "{:.1} ({})",
                means.iter().sum::<f64>() / means.len() as f64,
                tasks_count(means.len())
            )
        }
    }));
    row.extend(PAPER_TABLE2.iter().map(|p| {
        if tasks.len() == Task::JACO.len() {
            format!("{:.0} (4 tasks)", p.mean)
        } else {
            let mean = tasks.iter().map(|t| p.score(*t).0).sum::<f64>() / tasks.len() as f64;
            format!("{mean:.1} (derived here, {})", tasks_count(tasks.len()))
        }
    }));
    let _ = writeln!(md, "| {} |\n", row.join(" | "));
}

fn seen_unseen_table(md: &mut String, scores: &BudgetScores) {
    let seen: Vec<&str> = Task::SEEN.iter().map(|t| t.name()).collect();
    let _ = writeln!(md, "### Seen vs unseen tasks\n");
    let _ = writeln!(
        md,
        "Seen tasks are those whose videos the encoders were pre-trained on: {} (docs/design.md §8). Means \
         over the tasks of each set of the per-task means; the paper's rows are derived here from its Table 3.\n",
        seen.join(", ")
    );
    let _ = writeln!(
        md,
        "| method | seen: mean return | seen: mean normalised | unseen: mean return | unseen: mean normalised |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    for (i, m) in scores.methods.iter().enumerate() {
        let mut row = vec![our_header(scores, i)];
        for set in [TaskSet::Seen, TaskSet::Unseen] {
            match m.mean_raw(set) {
                Some((mean, n)) => {
                    row.push(format!("{mean:.1} ({})", tasks_count(n)));
                    row.push(format!("{:.3}", Aggregate::Mean.of(&m.table(set))));
                }
                None => row.extend(["–".to_string(), "–".to_string()]),
            }
        }
        let _ = writeln!(md, "| {} |", row.join(" | "));
    }
    for p in &PAPER_TABLE3 {
        let mut row = vec![paper_header(p)];
        for set in [TaskSet::Seen, TaskSet::Unseen] {
            row.push(format!("{:.1}", paper_raw_mean(p, set)));
            row.push(format!("{:.3}", paper_normalised_mean(p, set)));
        }
        let _ = writeln!(md, "| {} |", row.join(" | "));
    }
    let _ = writeln!(md);
}

fn improvements_table(md: &mut String, report: &Report, budget: &BudgetReport) {
    let rows = &budget.aggregates.improvements;
    let Some(floor) = rows.first().map(|r| r.floor.as_str()) else {
        return;
    };
    let b = &report.bootstrap;
    let _ = writeln!(
        md,
        "### Probability of improvement over `{floor}` (rliable)
"
    );
    let _ = writeln!(
        md,
        "P(X > {floor}): the probability that a run of X scores higher than a run of the never-trained encoder \
         on a task, averaged over the tasks both have runs on (rliable's `probability_of_improvement`: the \
         Mann-Whitney U statistic over all pairs of runs, a tie counting ½). 0.5 is no difference. Brackets: \
         {:.0}% stratified-bootstrap percentile intervals (each method's runs resampled independently within \
         each task, {} replications, seed {}).\n",
        100.0 * b.confidence,
        b.reps,
        b.seed
    );
    let _ = writeln!(md, "| method | tasks | P(method > {floor}) |");
    let _ = writeln!(md, "|---|---|---|");
    for set in TaskSet::ALL {
        for row in rows.iter().filter(|r| r.set == set) {
            let _ = writeln!(
                md,
                "| {} | {} ({}) | {} |",
                row.method,
                set.name(),
                row.num_tasks,
                fmt_estimate(&row.estimate)
            );
        }
    }
    let _ = writeln!(md);
}

fn aggregates_table(md: &mut String, report: &Report, budget: &BudgetReport) {
    let b = &report.bootstrap;
    let _ = writeln!(md, "### Aggregates (rliable)\n");
    let _ = writeln!(
        md,
        "Expert-normalised scores aggregated as rliable does (Agarwal et al. 2021): IQM (25% trimmed mean of \
         all runs of all tasks), median and mean of the per-task means, optimality gap (1 − mean of scores \
         clipped at 1; lower is better). Brackets: {:.0}% stratified-bootstrap percentile intervals (runs \
         resampled with replacement within each task, {} replications, seed {}). A method's aggregates cover \
         only the tasks it has runs on.\n",
        100.0 * b.confidence,
        b.reps,
        b.seed
    );
    let names: Vec<&str> = Aggregate::ALL.iter().map(|a| a.name()).collect();
    let _ = writeln!(md, "| method | tasks | runs | {} |", names.join(" | "));
    let _ = writeln!(md, "|---|---|---|{}", "---|".repeat(names.len()));
    for set in TaskSet::ALL {
        for row in budget.aggregates.rows.iter().filter(|r| r.set == set) {
            let est: Vec<String> = row.estimates.iter().map(fmt_estimate).collect();
            let _ = writeln!(
                md,
                "| {} | {} ({}) | {} | {} |",
                row.method,
                set.name(),
                row.num_tasks,
                row.num_runs,
                est.join(" | ")
            );
        }
    }
    let _ = writeln!(md);
}

/// "mean [min, max] (n)" of returns, or "–".
fn fmt_range(xs: &[f64]) -> String {
    match SeedStats::of(xs) {
        Some(s) => {
            let (lo, hi) = xs
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
            format!("{:.1} [{lo:.1}, {hi:.1}] ({})", s.mean, s.n)
        }
        None => "–".to_string(),
    }
}

/// The suite's DrQ-v2 runs beside DrQ-v2's published curves, at the published frames.
fn published_section(md: &mut String, report: &Report) {
    if report.published.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "## DrQ-v2 beside its published curves
"
    );
    let _ = writeln!(
        md,
        "{}: {}. Ours: the suite's cells with `[agent] kind = \"drqv2\"` ({}). Evaluation return at the \
         published frames: mean [min, max] (seeds). The published runs are DrQ-v2's own protocol; where ours \
         differ (budget, batch, rendering) their config says so.\n",
        super::published::LABEL,
        super::published::SOURCE,
        scale_line(report)
    );
    // The DrQ-v2 methods: those with a DrQ-v2 cell.
    let is_drqv2 = |i: &usize| {
        report.cells[*i]
            .finished
            .as_ref()
            .is_some_and(|f| f.settings.agent_kind == crate::rl_loop::AgentKind::DrQv2.name())
    };
    let methods: Vec<&super::scores::MethodCells> = report
        .methods
        .iter()
        .filter(|m| m.by_task.values().flatten().any(is_drqv2))
        .collect();
    let names: Vec<String> = methods.iter().map(|m| format!("{} (ours)", m.method)).collect();
    let _ = writeln!(
        md,
        "| task | frame | {} | {} |",
        names.join(" | "),
        super::published::LABEL
    );
    let _ = writeln!(md, "|---|---|{}---|", "---|".repeat(names.len()));
    for curve in &report.published {
        for point in &curve.points {
            let ours: Vec<String> = methods
                .iter()
                .map(|m| {
                    let returns: Vec<f64> = m
                        .by_task
                        .get(&curve.task)
                        .into_iter()
                        .flatten()
                        .filter(|&i| is_drqv2(i))
                        .filter_map(|&i| super::scores::eval_at_frame(&report.cells[i], point.frame))
                        .collect();
                    fmt_range(&returns)
                })
                .collect();
            let published = super::published::drqv2_returns(curve.task);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                curve.task,
                frames_label(point.frame as f64),
                ours.join(" | "),
                fmt_range(published.get(&point.frame).map(Vec::as_slice).unwrap_or_default())
            );
        }
    }
    let _ = writeln!(md);
}

fn pictures_section(md: &mut String, pictures: &[&str]) {
    let _ = writeln!(md, "## Pictures\n");
    if pictures.is_empty() {
        let _ = writeln!(md, "None: no cell is done.\n");
        return;
    }
    for stem in pictures {
        let what = match *stem {
            "learning_curves" => {
                "Learning curves per task: evaluation return, mean over seeds with its 95% bootstrap interval \
                 (seeds resampled)"
            }
            "iqm_curve" => "IQM of expert-normalised scores over frames, 95% stratified-bootstrap interval",
            "aggregates" => "rliable's aggregates at the largest budget, 95% stratified-bootstrap intervals",
            "synthetic_selected" => {
                "N per update of the lfs train runs (synthetic pairs in the objective's batch; LNC's selection for \
                 lfs and lfs-cl), mean between evaluations, mean over seeds with its 95% bootstrap interval"
            }
            "pretrain_probe" => {
                "The online probe during pre-training: the loss over updates, and the held-out R² of linear probes \
                 of the state and of the reward, mean over the probe set's tasks"
            }
            "pretrain_selected" => {
                "N per pre-training update of the encoders made with LNC (synthetic pairs LNC kept in the batch), \
                 mean within bins of updates; band: ±1 std of N within a bin for a method with one run (its spread, \
                 not an interval), the lowest and highest run for a method with several"
            }
            _ => stem,
        };
        let _ = writeln!(md, "{what} (also [{stem}.svg]({stem}.svg)):\n\n![{what}]({stem}.png)\n");
    }
}

fn lnc_during_pretraining(md: &mut String, report: &Report) {
    let pre = &report.pretraining;
    if pre.curves.is_empty() && pre.notes.is_empty() {
        return;
    }
    let _ = writeln!(md, "## LNC during pre-training\n");
    let _ = writeln!(
        md,
        "N: the synthetic (frame-mask) pairs LNC kept in each pre-training batch of M pairs (the paper's §3.2; the \
         rest of the batch is real pairs), read from the pre-training log (`metrics.jsonl`) of each encoder made \
         with LNC. Means over bins of updates; D: the mean k-NN distance among the real latents; window: LNC's \
         clip window (c − r/2)·D to (c + r/2)·D, which a synthetic latent's distance to its nearest real one must \
         fall in.\n"
    );
    for c in &pre.curves {
        let _ = writeln!(
            md,
            "### {} (`{}`, M = {})\n",
            report.methods[c.method].method,
            c.log.display(),
            c.batch_size
        );
        let _ = writeln!(md, "| updates | N (mean ± std) | N / M | D | window | loss |");
        let _ = writeln!(md, "|---|---|---|---|---|---|");
        for b in &c.bins {
            let _ = writeln!(
                md,
                "| {}–{} | {:.2} ± {:.2} | {:.3} | {:.4} | {:.4}–{:.4} | {:.4} |",
                b.first,
                b.last,
                b.num_synthetic,
                b.num_synthetic_std,
                b.num_synthetic / c.batch_size.max(1) as f64,
                b.lnc_d,
                b.clip_low,
                b.clip_high,
                b.loss
            );
        }
        let _ = writeln!(md);
    }
    for n in &pre.notes {
        let _ = writeln!(
            md,
            "The pre-training log of {} (`{}`) could not be read: {}.\n",
            n.method,
            n.log.display(),
            n.reason
        );
    }
}

/// "0.710 [0.660, 0.750]", "0.710" without an interval, "–" when undefined.
fn fmt_r2(r: &R2) -> String {
    match (r.point.is_finite(), r.low.is_finite() && r.high.is_finite()) {
        (false, _) => "–".to_string(),
        (true, true) => format!("{:.3} [{:.3}, {:.3}]", r.point, r.low, r.high),
        (true, false) => format!("{:.3}", r.point),
    }
}

fn fmt_rho(a: Option<RankAgreement>) -> String {
    match a {
        Some(a) if a.rho.is_finite() => format!("{:.3} ({} encoders)", a.rho, a.num_encoders),
        Some(a) => format!("undefined: all tied ({} encoders)", a.num_encoders),
        None => format!("– (fewer than {MIN_ENCODERS} encoders)"),
    }
}

/// "1/6": the chance of ρ = 1 (or of ρ = −1) under a random order of n encoders without ties.
fn chance_of_perfect_order(n: usize) -> String {
    match (1..=n as u64).try_fold(1u64, |f, k| f.checked_mul(k)) {
        Some(f) => format!("1/{f}"),
        None => format!("1/{n}!"),
    }
}

/// What the report says of the encoder a probe probed: the random encoder's seed, or its id.
fn probed_encoder(f: &ProbeFile) -> String {
    match f.encoder_id.strip_prefix("random:") {
        Some(seed) if f.is_random() => format!(
            "the random encoder of seed {seed} (`{}`; each SAC run draws its own from the run's seed)",
            f.encoder_id
        ),
        _ => match &f.bound_to {
            Some(row) => format!(
                "`{}` (sha256 `{}`), bound to the row `{row}` by `--probe {row}=FILE`: not the export its \
                 runs record, but one said to hold the same encoder",
                f.encoder_source, f.encoder_id
            ),
            None => format!("`{}` (sha256 `{}`)", f.encoder_source, f.encoder_id),
        },
    }
}

fn probes_section(md: &mut String, report: &Report) {
    let probes = &report.probes;
    if probes.rows.is_empty() && probes.notes.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Linear probes beside SAC returns\n");
    if let (Some(budget), false) = (probes.budget, probes.rows.is_empty()) {
        let label = frames_label(budget as f64);
        let _ = writeln!(
            md,
            "Held-out R² of `lfs probe`'s linear (ridge) probes from each encoder's frozen features to the task's \
             state and to its reward (mean over the target's dimensions; brackets: the interval probe.json gives, a \
             bootstrap over held-out episodes), beside the SAC return of the same encoder row at {label} frames \
             (mean ± std over seeds, runs in brackets, as in \"Scores at {label} frames\"). Every encoder row and \
             task that has both. Also in [{PROBE_CSV}]({PROBE_CSV}).\n"
        );
        let _ = writeln!(
            md,
            "| encoder | task | SAC return at {label} | state R² [low, high] | reward R² [low, high] |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|");
        for r in &probes.rows {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                report.methods[r.method].method,
                r.task,
                fmt_stats(Some(r.sac), 1),
                fmt_r2(&r.r2.state),
                fmt_r2(&r.r2.reward)
            );
        }
        let _ = writeln!(md, "\nThe probes:\n");
        let mut used: Vec<(usize, usize)> = Vec::new();
        for r in &probes.rows {
            if !used.contains(&(r.method, r.file)) {
                used.push((r.method, r.file));
            }
        }
        for (method, file) in used {
            let f = &probes.files[file];
            let _ = writeln!(
                md,
                "- {}: `{}`, {}; probe set `{}`{}",
                report.methods[method].method,
                f.path.display(),
                probed_encoder(f),
                f.dataset,
                f.dataset_render_quality
                    .as_deref()
                    .map_or(String::new(), |q| format!(" (render quality {q})"))
            );
        }
        let _ = writeln!(md);
    }
    if !probes.ranks.is_empty() {
        let _ = writeln!(md, "### Do the probes order the encoders as SAC does?\n");
        let _ = writeln!(
            md,
            "Spearman's rank correlation ρ across encoder rows, per task, between the probe's held-out R² and the \
             mean SAC return above (average ranks for ties; 1: the same order, −1: the reverse), on tasks where at \
             least {MIN_ENCODERS} encoder rows have both.\n"
        );
        let _ = writeln!(md, "| task | ρ(state R², return) | ρ(reward R², return) |");
        let _ = writeln!(md, "|---|---|---|");
        for t in &probes.ranks {
            let _ = writeln!(md, "| {} | {} | {} |", t.task, fmt_rho(t.state), fmt_rho(t.reward));
        }
        let counts: BTreeSet<usize> = probes
            .ranks
            .iter()
            .flat_map(|t| [t.state, t.reward])
            .flatten()
            .map(|a| a.num_encoders)
            .collect();
        let chances: Vec<String> = counts
            .iter()
            .map(|&n| format!("{} at n = {n}", chance_of_perfect_order(n)))
            .collect();
        let _ = writeln!(
            md,
            "\n**Caveat.** Each ρ is over only {} encoders (n per cell above), each encoder's return a mean over few \
             seeds: with n encoders in a random order, ρ = 1 happens by chance with probability 1/n! ({}), and no \
             test or interval is given here. Read ρ as a description of these encoders, not as evidence that the \
             probe predicts SAC.\n",
            distinct(counts.iter()),
            chances.join(", ")
        );
    }
    for n in &probes.notes {
        let _ = writeln!(
            md,
            "The probe file `{}` was not used: {}.\n",
            n.path.display(),
            n.reason
        );
    }
}

fn online_probe(md: &mut String, report: &Report) {
    let pre = &report.pretraining;
    if pre.probes.is_empty() && pre.probe_notes.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Online probe during pre-training\n");
    if !pre.probes.is_empty() {
        let _ = writeln!(
            md,
            "Held-out R² of linear (ridge) probes from the encoder's features to the state and to the reward, fitted \
         while pre-training ran (`[probe]` of the pre-training config), means over the probe set's tasks, read \
         from the `probe/*` lines of each encoder's `metrics.jsonl`. Update 0 is the initial encoder; – : R² \
         undefined (logged as null). Drawn beside the pre-training loss in the pretrain_probe picture.\n"
        );
    }
    for c in &pre.probes {
        let rows = c.table_rows();
        let _ = writeln!(md, "### {} (`{}`)\n", report.methods[c.method].method, c.log.display());
        if rows.len() < c.probes.points.len() {
            let _ = writeln!(
                md,
                "{} probes; {} shown, evenly spaced (the first and the last among them).\n",
                c.probes.points.len(),
                rows.len()
            );
        }
        let _ = writeln!(md, "| update | state R² | reward R² |");
        let _ = writeln!(md, "|---|---|---|");
        let fmt = |x: f64| {
            if x.is_finite() {
                format!("{x:.3}")
            } else {
                "–".to_string()
            }
        };
        for p in rows {
            let _ = writeln!(md, "| {} | {} | {} |", p.step, fmt(p.state_r2), fmt(p.reward_r2));
        }
        let _ = writeln!(md);
    }
    for n in &pre.probe_notes {
        let _ = writeln!(
            md,
            "The online probe in the pre-training log of {} (`{}`) could not be read: {}.\n",
            n.method,
            n.log.display(),
            n.reason
        );
    }
}

fn compute_cost(md: &mut String, report: &Report) {
    let _ = writeln!(md, "## Compute cost\n");
    let _ = writeln!(
        md,
        "Wall-clock time and frames per second of each cell as the suite runner recorded them (`cell.json`).\n"
    );
    let _ = writeln!(md, "| method | done cells | frames | wall-clock | mean frames/s |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    for m in &report.methods {
        let cells: Vec<&Cell> = m.by_task.values().flatten().map(|&i| &report.cells[i]).collect();
        let frames: u64 = cells.iter().map(|c| c.meta.frames_done).sum();
        let seconds: f64 = cells.iter().map(|c| c.meta.wall_clock_s).sum();
        let fps: Vec<f64> = cells.iter().map(|c| c.meta.frames_per_s).collect();
        let mean_fps = if fps.is_empty() {
            "–".to_string()
        } else {
            format!("{:.1}", fps.iter().sum::<f64>() / fps.len() as f64)
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {mean_fps} |",
            m.method,
            cells.len(),
            frames,
            fmt_hours(seconds)
        );
    }
    let total: f64 = report.cells.iter().map(|c| c.meta.wall_clock_s).sum();
    let _ = writeln!(md, "\nAll cells together (done or not): {}.\n", fmt_hours(total));
    let _ = writeln!(
        md,
        "| cell | method | task | seed | state | frames | wall-clock (s) | frames/s | attempts |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    for c in &report.cells {
        let opt = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1}"));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            cell_columns(c, report.agents_differ),
            opt((c.meta.attempts > 0).then_some(c.meta.wall_clock_s)),
            opt((c.meta.attempts > 0).then_some(c.meta.frames_per_s)),
            c.meta.attempts
        );
    }
    let _ = writeln!(md);
}

fn provenance(md: &mut String, report: &Report) {
    let _ = writeln!(md, "## Provenance\n");
    if !report.methods.is_empty() {
        let _ = writeln!(
            md,
            "| method | encoder source | encoder sha256 | encoder pre-training render quality |"
        );
        let _ = writeln!(md, "|---|---|---|---|");
        for m in &report.methods {
            let cells: Vec<&Cell> = m.by_task.values().flatten().map(|&i| &report.cells[i]).collect();
            let runs = cells.iter().filter_map(|c| c.finished.as_ref().map(|f| &f.run));
            let source = distinct(cells.iter().map(|c| c.meta.encoder_source.clone()));
            // a random encoder's id is per seed (`random:<seed>`); one line says so
            let sha = distinct(runs.clone().map(|r| {
                if r.encoder_sha256.starts_with("random:") {
                    "random:<seed>".to_string()
                } else {
                    r.encoder_sha256.clone()
                }
            }));
            let quality = distinct(runs.map(|r| r.encoder_render_quality.clone().unwrap_or_else(|| "–".into())));
            let _ = writeln!(md, "| {} | `{source}` | `{sha}` | {quality} |", m.method);
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(
        md,
        "Every evaluation of every done cell is in [{RESULTS_CSV}]({RESULTS_CSV}), in DrQ-v2's long format \
         (`agent,encoder,task,seed,frame,episode_reward,hour`)."
    );
}

/// The columns every table of cells starts with: cell, method, task, seed, state, frames.
fn cell_columns(c: &Cell, agents_differ: bool) -> String {
    format!(
        "{} | {} | {} | {} | {} | {} / {}",
        c.name,
        c.method(agents_differ),
        c.meta.task,
        c.meta.seed,
        c.shown().name(),
        c.meta.frames_done,
        c.meta.num_train_frames
    )
}
