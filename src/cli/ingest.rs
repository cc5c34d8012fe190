//! `lfs ingest <VIDEO_DIR> --out <DATASET_DIR>`

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use lfs::data::episode_lengths::MIN_FRAMES_FOR_SYNTHETIC_PAIR;
use lfs::ingest::{self, IngestOptions, IngestReport, Outcome, Progress, Skip, SourceReport, NO_STATE_COLUMNS};
use lfs::shards::FrameCodec;
use lfs::video::{Crop, DecodeOptions, FrameSize};

#[derive(clap::Args)]
pub struct Args {
    /// Folder of videos (mp4, webm, mkv, avi, mov, gif…) and/or folders of numbered PNG/JPEG
    /// frames. The first folder level under it is the task label.
    pub video_dir: PathBuf,
    /// Dataset folder to create or extend (LeRobot v3 layout).
    #[arg(long)]
    pub out: PathBuf,
    /// Output frame size: N (square) or WxH.
    #[arg(long, default_value = "84")]
    pub size: FrameSize,
    /// Fit the source's aspect ratio by a centre crop, or stretch it (none).
    #[arg(long, value_enum, default_value_t = Crop::Center)]
    pub crop: Crop,
    /// png: LeRobot image struct (loadable by LeRobot). raw: FixedSizeBinary HWC uint8,
    /// faster to write and read, NOT loadable by LeRobot.
    #[arg(long, value_enum, default_value_t = FrameCodec::Png)]
    pub frame_codec: FrameCodec,
    /// Task label for every source instead of the folder name.
    #[arg(long)]
    pub task: Option<String>,
    /// Parallel decoders (default: one per core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Give up on one source after this many seconds.
    #[arg(long, default_value_t = 300.0)]
    pub timeout: f64,
    /// Frame rate recorded for image sequences (they carry no timing).
    #[arg(long, default_value_t = 30.0)]
    pub image_fps: f64,
    /// Resample every source to N frames per second, as FFmpeg's `fps` filter does (a frame
    /// per 1/N s: the nearest earlier one, repeated or dropped; rewards summed), for LeRobot,
    /// which reads one rate per dataset. Default: each source's own frames and rate (what lfs
    /// pretrain wants); sources at several rates then get `fps: null` in meta/info.json.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub fps: Option<u32>,
    /// Commit finished episodes at least this often (seconds); a killed run loses at most
    /// this much work and a re-run completes it.
    #[arg(long, default_value_t = 60.0)]
    pub commit_every: f64,
}

/// A bar on a terminal, one line per source otherwise (logs, CI).
struct Reporter {
    bar: Option<ProgressBar>,
    done: Mutex<usize>,
    total: Mutex<usize>,
}

impl Progress for Reporter {
    fn start(&self, sources: usize) {
        *self.total.lock().unwrap_or_else(|e| e.into_inner()) = sources;
        if let Some(bar) = &self.bar {
            bar.set_length(sources as u64);
        } else {
            eprintln!("ingest: {sources} sources");
        }
    }

    fn source_done(&self, r: &SourceReport) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        *done += 1;
        let total = *self.total.lock().unwrap_or_else(|e| e.into_inner());
        let line = match &r.outcome {
            Outcome::Ingested {
                episode_index,
                frames,
                state_not_stored,
            } => {
                format!(
                    "ok      {} [{}]: {frames} frames -> episode {episode_index}{}{}",
                    r.path.display(),
                    r.task,
                    too_short_note(*frames),
                    if *state_not_stored {
                        " (state/rewards not stored: the dataset has no state columns)"
                    } else {
                        ""
                    }
                )
            }
            Outcome::Skipped(Skip::Unchanged { episode_index }) => {
                format!(
                    "skip    {}: unchanged, already episode {episode_index}",
                    r.path.display()
                )
            }
            Outcome::Skipped(Skip::SameContent { episode_index, path }) => {
                format!(
                    "skip    {}: same content as episode {episode_index} ({path})",
                    r.path.display()
                )
            }
            Outcome::Failed(reason) => format!("FAILED  {reason}"),
        };
        match &self.bar {
            Some(bar) => {
                if matches!(r.outcome, Outcome::Failed(_)) {
                    bar.println(line);
                }
                bar.inc(1);
            }
            None => eprintln!("[{done}/{total}] {line}"),
        }
    }
}

/// The warning on an ingested episode too short for a synthetic pair (1 to 4 frames): kept, as
/// it still gives real pairs (2 frames and up), but pre-training draws no synthetic pair from it.
fn too_short_note(frames: usize) -> String {
    if frames < MIN_FRAMES_FOR_SYNTHETIC_PAIR {
        format!(" (too short for a synthetic pair: fewer than {MIN_FRAMES_FOR_SYNTHETIC_PAIR} frames)")
    } else {
        String::new()
    }
}

fn print_summary(args: &Args, report: &IngestReport) {
    let ingested = report.count(|o| matches!(o, Outcome::Ingested { .. }));
    let skipped = report.count(|o| matches!(o, Outcome::Skipped(_)));
    let frames = report.frames_ingested();
    println!(
        "ingested {ingested} source(s), {frames} frames in {:.1} s ({:.0} frames/s); skipped {skipped} already in the dataset; failed {}",
        report.seconds,
        frames as f64 / report.seconds.max(1e-9),
        report.failed()
    );
    let short =
        report.count(|o| matches!(o, Outcome::Ingested { frames, .. } if *frames < MIN_FRAMES_FOR_SYNTHETIC_PAIR));
    if short > 0 {
        println!(
            "warning: {short} source(s) too short for a synthetic pair (fewer than {MIN_FRAMES_FOR_SYNTHETIC_PAIR} frames): pre-training draws only real pairs from them"
        );
    }
    let not_stored = report.count(|o| {
        matches!(
            o,
            Outcome::Ingested {
                state_not_stored: true,
                ..
            }
        )
    });
    if not_stored > 0 {
        println!("warning: {not_stored} source(s) with state or rewards in their sidecar: {NO_STATE_COLUMNS}");
    }
    if !report.ignored.is_empty() {
        println!(
            "ignored {} file(s) that are not videos or frame images, e.g. {}",
            report.ignored.len(),
            report.ignored[0].display()
        );
    }
    for s in &report.sources {
        if let Outcome::Failed(reason) = &s.outcome {
            println!("  failed: {reason}");
        }
    }
    println!(
        "dataset {}: {} task(s), {} episode(s), {} frames",
        args.out.display(),
        report.dataset_tasks,
        report.dataset_episodes,
        report.dataset_frames
    );
    match (args.fps, report.source_rates.as_slice()) {
        (Some(n), _) => println!("frame rate: every source resampled to {n} fps (meta/info.json: fps {n})"),
        (None, [] | [_]) => {}
        (None, rates) => println!(
            "note: the sources are at {} fps and keep their own frames (what lfs pretrain reads); meta/info.json's \
             fps is null, as LeRobot reads one rate per dataset: ingest with --fps N into another --out for LeRobot",
            rates.iter().map(|r| format!("{r}")).collect::<Vec<_>>().join(", ")
        ),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.timeout > 0.0, "--timeout must be positive");
    anyhow::ensure!(args.image_fps > 0.0, "--image-fps must be positive");
    anyhow::ensure!(args.commit_every >= 0.0, "--commit-every must not be negative");
    let opts = IngestOptions {
        video_dir: args.video_dir.clone(),
        out: args.out.clone(),
        decode: DecodeOptions {
            size: args.size,
            crop: args.crop,
            timeout: Duration::from_secs_f64(args.timeout),
            image_fps: args.image_fps,
        },
        frame_codec: args.frame_codec,
        task: args.task.clone(),
        jobs: args
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        commit_every: Duration::from_secs_f64(args.commit_every),
        fps: args.fps,
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} sources  {elapsed_precise} eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let reporter = Reporter {
        bar,
        done: Mutex::new(0),
        total: Mutex::new(0),
    };
    let report = ingest::ingest(&opts, &reporter)
        .with_context(|| format!("ingesting {} into {}", args.video_dir.display(), args.out.display()))?;
    if let Some(bar) = &reporter.bar {
        bar.finish_and_clear();
    }
    print_summary(&args, &report);
    Ok(if report.failed() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
