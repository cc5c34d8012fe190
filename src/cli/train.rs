//! `lfs train --config pipelines/e2e/<name>.toml --task <task> [--seed N] [--set key=value]…
//! [--init-encoder encoder.safetensors] --out-dir <dir>`: end-to-end SAC with an auxiliary
//! objective on the same encoder (docs/design.md §7).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::progress::run_with_progress;
use super::run_args::RunArgs;
use lfs::rl_loop::train::{self, TrainConfig};
use lfs::rl_loop::EncoderChoice;

#[derive(clap::Args)]
pub struct Args {
    /// End-to-end config (TOML): pipelines/e2e/tiny.toml, mini.toml or paper.toml.
    #[arg(long)]
    pub config: PathBuf,
    /// Start the encoder from an `lfs export` file instead of the run's seed (pre-train, then
    /// fine-tune).
    #[arg(long)]
    pub init_encoder: Option<PathBuf>,
    #[command(flatten)]
    pub run: RunArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = TrainConfig::load(&args.config, &args.run.overrides()).context("loading the end-to-end config")?;
    let encoder = match &args.init_encoder {
        Some(path) => EncoderChoice::Exported(path.clone()),
        None => EncoderChoice::Random,
    };
    let spec = args.run.spec(encoder)?;
    let out_dir = &args.run.out_dir;
    run_with_progress("train", spec.task, cfg.run.num_train_frames.0, out_dir, |on_event| {
        train::run(&cfg, &spec, out_dir, on_event)
    })
}
