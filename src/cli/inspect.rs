//! `lfs inspect <DATASET_DIR> [--contact-sheet out.png]`

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use lfs::inspect::{summarize, write_contact_sheet};
use lfs::shards::Dataset;

#[derive(clap::Args)]
pub struct Args {
    /// Dataset folder written by `lfs ingest`.
    pub dataset: PathBuf,
    /// Write a PNG grid of sampled frames, one row per task.
    #[arg(long)]
    pub contact_sheet: Option<PathBuf>,
    /// Frames per task on the contact sheet.
    #[arg(long, default_value_t = 8)]
    pub per_task: usize,
    /// Decode every frame with the trainer's loader (checks integrity, reports frames/s).
    #[arg(long)]
    pub verify: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let ds = Dataset::open(&args.dataset).with_context(|| format!("opening dataset {}", args.dataset.display()))?;
    let s = summarize(&ds);
    println!("dataset   {}", ds.root.display());
    println!("id        {}", s.id);
    println!(
        "frames    {}x{} RGB, {} codec, crop {}, render quality {}",
        ds.meta.width,
        ds.meta.height,
        format!("{:?}", ds.meta.frame_codec).to_lowercase(),
        format!("{:?}", ds.meta.crop).to_lowercase(),
        ds.meta
            .render_quality
            .map_or("unknown (not from lfs collect)", |q| q.name())
    );
    println!(
        "size      {:.1} MiB in {} data file(s)",
        s.data_bytes as f64 / (1 << 20) as f64,
        s.data_files
    );
    println!();
    println!(
        "{:<4} {:<28} {:>9} {:>10} {:>14}",
        "row", "task", "episodes", "frames", "frames/ep"
    );
    for (i, t) in s.tasks.iter().enumerate() {
        println!(
            "{:<4} {:<28} {:>9} {:>10} {:>14}",
            i,
            t.task,
            t.episodes,
            t.frames,
            format!("{}-{}", t.min_len, t.max_len)
        );
    }
    println!("{:<4} {:<28} {:>9} {:>10}", "", "total", s.episodes, s.frames);
    if args.verify {
        let started = std::time::Instant::now();
        let episodes = ds.load_episodes().context("verifying: decoding every frame")?;
        let secs = started.elapsed().as_secs_f64();
        let frames: usize = episodes.iter().map(|e| e.num_frames).sum();
        let bytes: usize = episodes.iter().map(|e| e.frames.len()).sum();
        println!(
            "\nverified  {frames} frames of {} episodes decode ({:.0} MiB in memory) in {secs:.2} s ({:.0} frames/s)",
            episodes.len(),
            bytes as f64 / (1 << 20) as f64,
            frames as f64 / secs.max(1e-9)
        );
    }
    if let Some(out) = &args.contact_sheet {
        write_contact_sheet(&ds, args.per_task, out)
            .with_context(|| format!("writing contact sheet {}", out.display()))?;
        println!(
            "\ncontact sheet: {} (one row per task, in the order above)",
            out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
