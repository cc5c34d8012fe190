//! The score tables: per task (raw and expert-normalised) beside the paper's Table 3 (and
//! Table 2 for Jaco), seen vs unseen tasks, improvements, rliable's aggregates, the published
//! curves, and the pictures.

use super::*;

pub(super) fn our_header(scores: &BudgetScores, method: usize) -> String {
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

pub(super) fn paper_header(p: &PaperColumn) -> String {
    format!("paper {} ({}, 500K, 5 seeds)", p.method, p.pretraining.label())
}

/// The tasks of `among` that some method has a score on, in `among`'s order.
pub(super) fn tasks_in(scores: &BudgetScores, among: &[Task]) -> Vec<Task> {
    among
        .iter()
        .copied()
        .filter(|t| scores.methods.iter().any(|m| m.runs_by_task.contains_key(t)))
        .collect()
}

pub(super) fn scores_at_budget(md: &mut String, report: &Report, budget: &BudgetReport) {
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

pub(super) fn table_header(md: &mut String, first: &[&str], scores: &BudgetScores, paper: &[String]) {
    let mut cols: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    cols.extend((0..scores.methods.len()).map(|i| our_header(scores, i)));
    cols.extend(paper.iter().cloned());
    let _ = writeln!(md, "| {} |", cols.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(cols.len()));
}

pub(super) fn raw_table(md: &mut String, scores: &BudgetScores, tasks: &[Task]) {
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
    row.extend(PAPER_TABLE3.iter().map(|p| match p.mean {
        Some(mean) => format!("{mean:.0} (9 tasks)"),
        None => format!("{:.1} (derived here, 9 tasks)", paper_raw_mean(p, TaskSet::All)),
    }));
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

pub(super) fn normalised_table(md: &mut String, scores: &BudgetScores, tasks: &[Task]) {
    let _ = writeln!(md, "### Expert-normalised scores per task\n");
    let paper: Vec<String> = PAPER_TABLE3
        .iter()
        .map(|p| {
            format!(
                "paper {} ÷ expert (derived here; {}, 500K, 5 seeds)",
                p.method,
                p.pretraining.label()
            )
        })
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
    row.extend(PAPER_TABLE3.iter().map(|p| {
        let derived = paper_normalised_mean(p, TaskSet::All);
        match p.normalised_mean {
            Some(printed) => format!("{derived:.3} (9 tasks; the paper prints {printed:.3})"),
            None => format!("{derived:.3} (9 tasks)"),
        }
    }));
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
pub(super) fn paper_normalised_mean(p: &PaperColumn, set: TaskSet) -> f64 {
    let xs: Vec<f64> = Task::DMC
        .into_iter()
        .filter(|t| set.contains(*t))
        .map(|t| p.normalised(t))
        .collect();
    xs.iter().sum::<f64>() / xs.len() as f64
}

pub(super) fn paper_raw_mean(p: &PaperColumn, set: TaskSet) -> f64 {
    let xs: Vec<f64> = Task::DMC
        .into_iter()
        .filter(|t| set.contains(*t))
        .map(|t| p.score(t).0)
        .collect();
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// URLB's Jaco reach tasks: our raw returns beside every column of the paper's Table 2.
pub(super) fn jaco_table(md: &mut String, scores: &BudgetScores, tasks: &[Task]) {
    let _ = writeln!(md, "### URLB Jaco reach tasks (the paper's Table 2)\n");
    let _ = writeln!(
        md,
        "Raw returns (no expert score: the paper reports these tasks raw); a return is at most {JACO_MAX_RETURN:.0} (one \
         per control step of a 10 s episode). The paper's columns are copied from {PAPER_TABLE2_SCALE}. Its LFS and \
         DrQ-v2 were trained without pre-training; the other eight columns (marked quoted) are unsupervised RL \
         methods as the paper reports them, after URLB's protocol: 1M reward-free frames, then the whole agent \
         fine-tuned with DDPG. lfs's Proto-RL and APT (`lfs explore`) pre-train an encoder alone, for Table 3, so \
         their columns here are quoted, not rerun (docs/design.md §15). Ours are at {} frames{}.\n",
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

pub(super) fn seen_unseen_table(md: &mut String, scores: &BudgetScores) {
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

pub(super) fn improvements_table(md: &mut String, report: &Report, budget: &BudgetReport) {
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

pub(super) fn aggregates_table(md: &mut String, report: &Report, budget: &BudgetReport) {
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
pub(super) fn fmt_range(xs: &[f64]) -> String {
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
pub(super) fn published_section(md: &mut String, report: &Report) {
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
         differ (budget, batch, rendering, replay sampling: the Scale table) their config says so. {}.\n",
        crate::report::published::LABEL,
        crate::report::published::SOURCE,
        scale_line(report),
        crate::report::published::SIMULATOR,
    );
    // The DrQ-v2 methods: those with a DrQ-v2 cell.
    let is_drqv2 = |i: &usize| {
        report.cells[*i]
            .finished
            .as_ref()
            .is_some_and(|f| f.settings.agent_kind == crate::rl::AgentKind::DrQv2.name())
    };
    let methods: Vec<&crate::report::scores::MethodCells> = report
        .methods
        .iter()
        .filter(|m| m.by_task.values().flatten().any(is_drqv2))
        .collect();
    let names: Vec<String> = methods.iter().map(|m| format!("{} (ours)", m.method)).collect();
    let _ = writeln!(
        md,
        "| task | frame | {} | {} |",
        names.join(" | "),
        crate::report::published::LABEL
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
                        .filter_map(|&i| crate::report::scores::eval_at_frame(&report.cells[i], point.frame))
                        .collect();
                    fmt_range(&returns)
                })
                .collect();
            let published = crate::report::published::drqv2_returns(curve.task);
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

pub(super) fn pictures_section(md: &mut String, pictures: &[&str]) {
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
