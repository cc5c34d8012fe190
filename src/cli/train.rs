//! `lfs train --config pipelines/e2e/<name>.toml --task <task> [--seed N] [--set key=value]…
//! [--init-encoder encoder.safetensors] --out-dir <dir>`: end-to-end SAC with an auxiliary
//! objective on the same encoder (docs/design.md §7).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::eval::with_progress;
use lfs::e2e::TrainConfig;
use lfs::env::Task;
use lfs::eval::{self, EncoderChoice, EvalSpec};

#[derive(clap::Args)]
pub struct Args {
    /// End-to-end config (TOML): pipelines/e2e/tiny.toml, mini.toml or paper.toml.
    #[arg(long)]
    pub config: PathBuf,
    /// DMControl task, e.g. walker_walk (the nine of the paper).
    #[arg(long)]
    pub task: String,
    /// Shortcut for --set run.seed=N.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override one config field, e.g. --set aux.method=atc (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Start the encoder from an `lfs export` file instead of the run's seed (pre-train, then
    /// fine-tune).
    #[arg(long)]
    pub init_encoder: Option<PathBuf>,
    /// Run directory: eval.csv, train.jsonl, aux.jsonl, checkpoint, provenance. A checkpoint
    /// already there is resumed.
    #[arg(long)]
    pub out_dir: PathBuf,
    /// Start from an encoder pre-trained on videos of another render quality.
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
    let cfg = TrainConfig::load(&args.config, &overrides).context("loading the end-to-end config")?;
    let task: Task = args.task.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let spec = EvalSpec {
        task,
        encoder: match &args.init_encoder {
            Some(path) => EncoderChoice::Exported(path.clone()),
            None => EncoderChoice::Random,
        },
        allow_render_quality_mismatch: args.allow_render_quality_mismatch,
        save_video: args.save_video,
    };
    let total = cfg.run.num_train_frames.0;
    with_progress("train", task, total, &args.out_dir, |on_event| {
        eval::run::train(&cfg, &spec, &args.out_dir, on_event)
    })
}
