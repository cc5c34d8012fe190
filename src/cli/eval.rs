//! `lfs eval --config pipelines/sac/<name>.toml --encoder <encoder.safetensors|random>
//! --task <task> [--seed N] [--set key=value]… --out-dir <dir>`

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::progress::run_with_progress;
use super::run_args::RunArgs;
use lfs::rl_loop::EncoderChoice;
use lfs::rl_loop::{eval, LoopConfig};

#[derive(clap::Args)]
pub struct Args {
    /// SAC config (TOML): pipelines/sac/tiny.toml, mini.toml or paper.toml.
    #[arg(long)]
    pub config: PathBuf,
    /// An encoder written by `lfs export`, or `random` (a seeded randomly initialised encoder:
    /// the floor every method must beat).
    #[arg(long)]
    pub encoder: String,
    #[command(flatten)]
    pub run: RunArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = LoopConfig::load(&args.config, &args.run.overrides()).context("loading the SAC config")?;
    let encoder = match args.encoder.as_str() {
        "random" => EncoderChoice::Random,
        path => EncoderChoice::Exported(PathBuf::from(path)),
    };
    let spec = args.run.spec(encoder)?;
    let out_dir = &args.run.out_dir;
    run_with_progress("eval", spec.task, cfg.run.num_train_frames.0, out_dir, |on_event| {
        eval::run(&cfg, &spec, out_dir, on_event)
    })
}
