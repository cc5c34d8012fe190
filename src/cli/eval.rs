//! `lfs eval --config pipelines/sac/<name>.toml --encoder <encoder.safetensors|random>
//! --task <task> [--seed N] [--set key=value]… --out-dir <dir>`

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::progress::{say, terminal_bar};
use lfs::env::Task;
use lfs::eval::{self, EncoderChoice, EvalConfig, EvalEvent, EvalSpec};

#[derive(clap::Args)]
pub struct Args {
    /// SAC config (TOML): pipelines/sac/tiny.toml, mini.toml or paper.toml.
    #[arg(long)]
    pub config: PathBuf,
    /// An encoder written by `lfs export`, or `random` (a seeded randomly initialised encoder:
    /// the floor every method must beat).
    #[arg(long)]
    pub encoder: String,
    /// DMControl task, e.g. walker_walk (the nine of the paper).
    #[arg(long)]
    pub task: String,
    /// Shortcut for --set run.seed=N.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override one config field, e.g. --set run.num_train_frames=100000 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run directory: eval.csv, train.jsonl, checkpoint, provenance. A checkpoint already there
    /// is resumed.
    #[arg(long)]
    pub out_dir: PathBuf,
    /// Evaluate even though the encoder was pre-trained on videos of another render quality.
    #[arg(long)]
    pub allow_render_quality_mismatch: bool,
    /// Write the first episode of every evaluation as <out-dir>/eval_video/<frame>.mp4.
    #[arg(long)]
    pub save_video: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut overrides = args.set.clone();
    if let Some(seed) = args.seed {
        overrides.push(format!("run.seed={seed}"));
    }
    let cfg = EvalConfig::load(&args.config, &overrides).context("loading the SAC config")?;
    let task: Task = args.task.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let encoder = match args.encoder.as_str() {
        "random" => EncoderChoice::Random,
        path => EncoderChoice::Exported(PathBuf::from(path)),
    };
    let spec = EvalSpec {
        task,
        encoder,
        allow_render_quality_mismatch: args.allow_render_quality_mismatch,
        save_video: args.save_video,
    };
    let total = cfg.run.num_train_frames.0;
    with_progress("eval", task, total, &args.out_dir, |on_event| {
        eval::run(&cfg, &spec, &args.out_dir, on_event)
    })
}

/// Runs `job` (an `lfs eval` or `lfs train` run of `total` frames into `out_dir`) with a
/// progress bar on a terminal, one line per evaluation otherwise, and the closing line.
pub fn with_progress(
    command: &str,
    task: Task,
    total: u64,
    out_dir: &std::path::Path,
    job: impl FnOnce(&mut dyn FnMut(EvalEvent)) -> lfs::Result<eval::EvalSummary>,
) -> anyhow::Result<ExitCode> {
    let bar = terminal_bar(
        total,
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} frames, {per_sec}, ETA {eta} {msg}",
    );
    if let Some(bar) = &bar {
        bar.set_prefix(format!("{command} {task}"));
    }
    let mut on_event = |event: EvalEvent| match event {
        EvalEvent::Started {
            start_frame,
            num_train_frames,
            resumed,
            encoder,
        } => {
            let how = if resumed {
                format!("resuming at frame {start_frame} of {num_train_frames}")
            } else {
                format!("starting, {num_train_frames} frames")
            };
            say(
                &bar,
                format!("lfs {command} {task}: {how}, encoder {encoder} → {}", out_dir.display()),
            );
            if let Some(bar) = &bar {
                bar.set_position(start_frame);
                bar.reset_eta();
            }
        }
        EvalEvent::Progress { frame } => {
            if let Some(bar) = &bar {
                bar.set_position(frame);
            }
        }
        EvalEvent::Episode(log) => {
            if let Some(bar) = &bar {
                bar.set_message(format!(
                    "episode {} reward {:.1}, {:.0} frames/s",
                    log.episode, log.episode_reward, log.fps
                ));
            }
        }
        EvalEvent::Evaluation(row) => say(
            &bar,
            format!(
                "eval at frame {}: episode_reward {:.1} ({:.0} s)",
                row.frame, row.episode_reward, row.total_time
            ),
        ),
        EvalEvent::Checkpoint { frame } => {
            if bar.is_none() {
                eprintln!("checkpoint at frame {frame}");
            }
        }
        EvalEvent::EpisodeLost { error } => say(&bar, format!("warning: an episode was lost and is skipped: {error}")),
    };
    let what = if command == "eval" { "evaluating" } else { "training" };
    let summary = job(&mut on_event).with_context(|| format!("{what} into {}", out_dir.display()))?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let last = summary
        .last_eval
        .map(|r| format!(", last evaluation {:.1}", r.episode_reward))
        .unwrap_or_default();
    println!(
        "{} frames done{last}; results in {}",
        summary.frames_done,
        out_dir.join(eval::run::EVAL_CSV).display()
    );
    Ok(ExitCode::SUCCESS)
}
