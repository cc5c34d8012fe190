//! `lfs export <CHECKPOINT> --out encoder.safetensors`

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    /// A checkpoint written by `lfs pretrain` (runs/<name>/checkpoint.safetensors).
    pub checkpoint: PathBuf,
    /// Output file; `<stem>.example.safetensors` (a fixed input batch and its features) is
    /// written beside it.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let summary = lfs::export::export(&args.checkpoint, &args.out)
        .with_context(|| format!("exporting {} to {}", args.checkpoint.display(), args.out.display()))?;
    println!(
        "exported the {} encoder (update {}) to {} and {}",
        summary.method,
        summary.step,
        summary.encoder.display(),
        summary.example.display()
    );
    Ok(ExitCode::SUCCESS)
}
