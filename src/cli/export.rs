//! `lfs export <CHECKPOINT> --out encoder.safetensors [--encoder-only]`

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use lfs::pretrain::export::ExportContents;

#[derive(clap::Args)]
pub struct Args {
    /// A checkpoint written by `lfs pretrain` (runs/<name>/checkpoint.safetensors).
    pub checkpoint: PathBuf,
    /// Output file; `<stem>.example.safetensors` (a fixed input batch and its features) is
    /// written beside it.
    #[arg(long)]
    pub out: PathBuf,
    /// Leave the projector out: the file holds the conv encoder alone (~120 KB instead of
    /// ~20 MB at the default sizes), which is all that `lfs eval`, `lfs train --init-encoder` and
    /// `lfs probe` read.
    #[arg(long)]
    pub encoder_only: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let contents = if args.encoder_only {
        ExportContents::EncoderOnly
    } else {
        ExportContents::EncoderAndProjector
    };
    let summary = lfs::pretrain::export::export(&args.checkpoint, &args.out, contents)
        .with_context(|| format!("exporting {} to {}", args.checkpoint.display(), args.out.display()))?;
    let what = match summary.contents {
        ExportContents::EncoderAndProjector => "encoder and projector",
        ExportContents::EncoderOnly => "encoder without its projector",
    };
    println!(
        "exported the {} {what} (update {}) to {} and {}",
        summary.method,
        summary.step,
        summary.encoder.display(),
        summary.example.display()
    );
    Ok(ExitCode::SUCCESS)
}
