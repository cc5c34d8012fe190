//! `lfs collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes 320 --video-frames 250 --out videos/`

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressState, ProgressStyle};

use lfs::collect::{self, CollectConfig, CollectEvent, CollectFormat};
use lfs::env::{default_python, RenderQuality, Task, DEFAULT_ACTION_REPEAT, PYTHON_ENV_VAR};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("output").required(true).args(["out", "dataset"])))]
pub struct Args {
    /// Tasks to record, comma-separated (the paper's seen tasks by default).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "reach_duplo,walker_run,cartpole_swingup"
    )]
    pub tasks: Vec<Task>,
    /// Episodes (videos) per task.
    #[arg(long, default_value_t = 320)]
    pub episodes: usize,
    /// Video frames per episode at most, the reset frame included; shorter episodes give
    /// shorter videos. A video frame is one agent step, i.e. action-repeat env frames (2): the
    /// "frames" of RL budgets (`lfs eval`) are env frames. `--frames` is an alias.
    #[arg(long = "video-frames", alias = "frames", default_value_t = 250)]
    pub frames: usize,
    /// Output folder: `<out>/<task>/<episode>.mkv` plus a `.json` sidecar each, for `lfs ingest`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the episodes straight into this dataset (Parquet frame shards, as `lfs ingest`
    /// makes of the videos, without FFmpeg) instead of videos; created, or extended by a second
    /// run.
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Parallel dm_control worker processes (default: one per core).
    #[arg(long, short = 'j')]
    pub workers: Option<usize>,
    /// Base seed: episode i is reset (and its random actions drawn) with seed + i.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Env steps per agent step (one video frame per agent step).
    #[arg(long, default_value_t = DEFAULT_ACTION_REPEAT)]
    pub action_repeat: u32,
    /// MuJoCo render settings; recorded in every sidecar.
    #[arg(long, value_enum, default_value_t = RenderQuality::Default)]
    pub render_quality: RenderQuality,
    /// Python with python/requirements.txt installed [default: $LFS_PYTHON, else .venv/bin/python].
    #[arg(long)]
    pub python: Option<PathBuf>,
}

/// A bar with frames/s on a terminal; otherwise a line per episode with the running rate.
struct Reporter {
    bar: Option<ProgressBar>,
    start: Instant,
    frames: usize,
    done: usize,
    episodes: usize,
}

impl Reporter {
    fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            let style = ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} frames ({fps} frames/s, eta {eta}) {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key("fps", |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.1}", state.per_sec());
            })
            .progress_chars("=> ");
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Self {
            bar,
            start: Instant::now(),
            frames: 0,
            done: 0,
            episodes: 0,
        }
    }

    fn event(&mut self, event: CollectEvent) {
        match event {
            CollectEvent::Started {
                episodes,
                already_done,
                max_frames_to_record,
            } => {
                self.episodes = episodes;
                self.done = already_done;
                let line = format!(
                    "collect: {episodes} episodes, {already_done} already complete, up to {max_frames_to_record} frames to record"
                );
                match &self.bar {
                    Some(bar) => {
                        bar.set_length(max_frames_to_record as u64);
                        bar.println(line);
                    }
                    None => eprintln!("{line}"),
                }
            }
            CollectEvent::Frames(n) => {
                self.frames += n;
                if let Some(bar) = &self.bar {
                    bar.inc(n as u64);
                }
            }
            CollectEvent::EpisodeDone {
                task,
                episode,
                num_frames,
                written_to,
            } => {
                self.done += 1;
                match &self.bar {
                    Some(bar) => bar.set_message(format!("{}/{} episodes", self.done, self.episodes)),
                    None => eprintln!(
                        "[{}/{}] {task} episode {episode}: {num_frames} frames -> {} ({:.1} frames/s)",
                        self.done,
                        self.episodes,
                        written_to.display(),
                        self.frames as f64 / self.start.elapsed().as_secs_f64().max(1e-9)
                    ),
                }
            }
            CollectEvent::EpisodeLost { task, episode, reason } => {
                let line = format!("lost {task} episode {episode}, redoing it: {reason}");
                match &self.bar {
                    Some(bar) => bar.println(line),
                    None => eprintln!("{line}"),
                }
            }
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let workers = match args.workers {
        Some(n) => n,
        None => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    };
    let (out_dir, format) = match (&args.out, &args.dataset) {
        (_, Some(dataset)) => (dataset.clone(), CollectFormat::Dataset),
        (Some(out), None) => (out.clone(), CollectFormat::Videos),
        (None, None) => anyhow::bail!("give --out (videos) or --dataset"),
    };
    let config = CollectConfig {
        tasks: args.tasks,
        episodes: args.episodes,
        max_frames: args.frames,
        out_dir: out_dir.clone(),
        format,
        workers,
        seed: args.seed,
        action_repeat: args.action_repeat,
        render_quality: args.render_quality,
        python: args.python.unwrap_or_else(default_python),
    };
    let what = match format {
        CollectFormat::Videos => "videos",
        CollectFormat::Dataset => "a dataset",
    };
    let mut reporter = Reporter::new();
    let summary = collect::collect(&config, &mut |e| reporter.event(e)).with_context(|| {
        format!(
            "collecting {} into {} (python {}; set {PYTHON_ENV_VAR} or --python to change it)",
            what,
            out_dir.display(),
            config.python.display()
        )
    })?;
    if let Some(bar) = &reporter.bar {
        bar.finish_and_clear();
    }
    println!(
        "collect: wrote {} episode(s), {} frames in {:.1} s ({:.1} frames/s, {} worker(s), render quality {}); kept {} \
         complete episode(s); {} lost and redone, {} worker restart(s); {what} in {}",
        summary.episodes_written,
        summary.frames_written,
        summary.seconds,
        summary.frames_written as f64 / summary.seconds.max(1e-9),
        workers,
        config.render_quality,
        summary.episodes_kept,
        summary.episodes_lost,
        summary.worker_restarts,
        out_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
