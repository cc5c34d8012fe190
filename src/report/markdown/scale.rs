//! The report's framing: the scale beside the paper's, the cells not counted, render-quality
//! mismatches, what the suite cost and where its numbers came from.

use super::*;

pub(super) fn scale(md: &mut String, report: &Report) {
    let _ = writeln!(md, "## Scale\n");
    if report.methods.is_empty() {
        let _ = writeln!(md, "No cell is done yet: nothing to score.\n");
        return;
    }
    ours_row(md, report);
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

/// The scale table's header and its row for this suite: every distinct value of its done
/// cells' frames, seeds, evaluation and settings.
fn ours_row(md: &mut String, report: &Report) {
    let s = settings(report);
    let frames = distinct(s.clone().map(|s| s.num_train_frames));
    let feature_cache = distinct(s.clone().map(|s| {
        if s.feature_cache {
            format!("on, {} (features cached, no augmentation)", s.feature_cache_dtype)
        } else {
            "off (random shift on every batch)".to_string()
        }
    }));
    // Episodes cut short of the task's time limit (`env.episode_frames`) are said; the task's
    // own length is not.
    let cut = if s.clone().any(|s| s.episode_frames.is_some()) {
        format!(
            "; episode length {}",
            distinct(
                s.clone()
                    .map(|s| crate::report::mismatch::episode_length(s.episode_frames))
            )
        )
    } else {
        String::new()
    };
    let _ = writeln!(md, "| | frames (env steps) | seeds per task | evaluation | settings |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    let _ = writeln!(
        md,
        "| ours (this suite) | {frames} (action repeat {}{cut}) | {} | episodes: {}, every {} frames | batch {}, replay {} \
         (sampling {}), feature cache {feature_cache}, render quality {} |",
        distinct(s.clone().map(|s| s.action_repeat)),
        seeds_per_task(report),
        distinct(s.clone().map(|s| s.num_eval_episodes)),
        distinct(s.clone().map(|s| s.eval_every_frames)),
        distinct(s.clone().map(|s| s.batch_size)),
        distinct(s.clone().map(|s| s.replay_capacity)),
        distinct(s.clone().map(|s| s.replay_sampling.clone())),
        distinct(s.map(|s| s.render_quality.clone())),
    );
}

pub(super) fn not_counted(md: &mut String, report: &Report) {
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

pub(super) fn mismatches(md: &mut String, report: &Report) {
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
pub(super) fn compute_cost(md: &mut String, report: &Report) {
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

pub(super) fn provenance(md: &mut String, report: &Report) {
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
pub(super) fn cell_columns(c: &Cell, agents_differ: bool) -> String {
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
