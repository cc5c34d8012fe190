//! The progress display every long-running subcommand shares: a bar on a terminal, plain lines
//! otherwise (logs, CI, a scheduler's output file).

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use lfs::env::Task;
use lfs::rl_loop::{LoopEvent, LoopSummary};
use lfs::run_dir::EVAL_CSV;

/// A bar of `len` steps drawn with `template` (indicatif's syntax), when stderr is a terminal.
pub fn terminal_bar(len: u64, template: &str) -> Option<ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(len);
        bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
        bar
    })
}

/// Clears the bar, if there is one, before the closing line.
pub fn finish(bar: Option<ProgressBar>) {
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

/// Prints a line above the bar, or to stderr when there is none.
pub fn say(bar: &Option<ProgressBar>, line: String) {
    match bar {
        Some(bar) => bar.println(line),
        None => eprintln!("{line}"),
    }
}

/// Runs `job` (an `lfs eval` or `lfs train` run of `total` frames into `out_dir`) with a
/// progress bar on a terminal, one line per evaluation otherwise, and the closing line.
pub fn run_with_progress(
    command: &str,
    task: Task,
    total: u64,
    out_dir: &std::path::Path,
    job: impl FnOnce(&mut dyn FnMut(LoopEvent)) -> lfs::Result<LoopSummary>,
) -> anyhow::Result<ExitCode> {
    let bar = terminal_bar(
        total,
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} frames, {per_sec}, ETA {eta} {msg}",
    );
    if let Some(bar) = &bar {
        bar.set_prefix(format!("{command} {task}"));
    }
    let mut on_event = |event: LoopEvent| match event {
        LoopEvent::Started(start) => {
            say(
                &bar,
                format!(
                    "lfs {command} {task}: {}, encoder {} → {}",
                    start.how(),
                    start.encoder,
                    out_dir.display()
                ),
            );
            if let Some(bar) = &bar {
                bar.set_position(start.start_frame);
                bar.reset_eta();
            }
        }
        LoopEvent::Progress { frame } => {
            if let Some(bar) = &bar {
                bar.set_position(frame);
            }
        }
        LoopEvent::Episode(log) => {
            if let Some(bar) = &bar {
                bar.set_message(format!(
                    "episode {} reward {:.1}, {:.0} frames/s",
                    log.episode, log.episode_reward, log.fps
                ));
            }
        }
        LoopEvent::Evaluation(row) => say(&bar, row.line()),
        LoopEvent::Checkpoint { frame } => {
            if bar.is_none() {
                eprintln!("checkpoint at frame {frame}");
            }
        }
        LoopEvent::EpisodeLost { error } => say(&bar, format!("warning: an episode was lost and is skipped: {error}")),
    };
    let what = if command == "eval" { "evaluating" } else { "training" };
    let summary = job(&mut on_event).with_context(|| format!("{what} into {}", out_dir.display()))?;
    finish(bar);
    let last = summary
        .last_eval
        .map(|r| format!(", last evaluation {:.1}", r.episode_reward))
        .unwrap_or_default();
    println!(
        "{} frames done{last}; results in {}",
        summary.frames_done,
        out_dir.join(EVAL_CSV).display()
    );
    Ok(ExitCode::SUCCESS)
}
