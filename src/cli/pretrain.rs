//! `lfs pretrain --config pipelines/<name>.toml [--set key=value]… [--out-dir runs/<name>]`

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::ProgressBar;

use super::progress::terminal_bar;
use super::run_args::ConfigOverrides;

use lfs::data::TaskEpisodeLengths;
use lfs::pretrain::collapse::Collapse;
use lfs::pretrain::{self, PretrainConfig, RunEvent};

#[derive(clap::Args)]
pub struct Args {
    /// Pre-training config (TOML): pipelines/tiny.toml, mini.toml or paper.toml.
    #[arg(long)]
    pub config: PathBuf,
    /// Run directory for checkpoint, metrics and provenance (default: runs/<run.name>). A
    /// checkpoint already there is resumed.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: ConfigOverrides,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let overrides = args.overrides.list();
    let cfg = PretrainConfig::load(&args.config, &overrides).context("loading the pre-training config")?;
    let out_dir = args
        .out_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(&cfg.run.name));
    let bar = terminal_bar(
        cfg.run.num_updates,
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} updates, ETA {eta} {msg}",
    );
    if let Some(bar) = &bar {
        bar.set_prefix(format!("pretrain {}", cfg.objective.method.name()));
    }
    let mut progress = Progress {
        bar,
        last_line: Instant::now(),
        out_dir: &out_dir,
        num_updates: cfg.run.num_updates,
    };
    let mut on_event = |event: RunEvent| progress.show(event);
    let summary = pretrain::run(&cfg, &out_dir, &mut on_event)
        .with_context(|| format!("pre-training into {}", out_dir.display()))?;
    super::progress::finish(progress.bar);
    let last = summary
        .last_metrics
        .map(|m| format!(", last loss {:.4}", m.loss))
        .unwrap_or_default();
    println!(
        "{} updates done{last}; checkpoint {}",
        summary.steps_done,
        summary.checkpoint.display()
    );
    if let Some(collapse) = &summary.collapse {
        println!("{}", collapse_warning(collapse));
    }
    Ok(ExitCode::SUCCESS)
}

/// What the run's events show: a progress bar on a terminal; off one (CI, logs), one line per
/// checkpoint and at most one line every 30 s.
struct Progress<'a> {
    bar: Option<ProgressBar>,
    last_line: Instant,
    out_dir: &'a Path,
    num_updates: u64,
}

impl Progress<'_> {
    fn show(&mut self, event: RunEvent) {
        match event {
            RunEvent::Started {
                frames,
                start_step,
                num_updates,
                resumed,
            } => {
                let how = if resumed {
                    format!("resuming at update {start_step} of {num_updates}")
                } else {
                    format!("starting, {num_updates} updates")
                };
                eprintln!("lfs pretrain: {how} → {} ({frames})", self.out_dir.display());
                if let Some(bar) = &self.bar {
                    bar.set_position(start_step);
                    bar.reset_eta();
                }
            }
            RunEvent::Update(m) => {
                let n = m.num_synthetic;
                let msg = format!(
                    "loss {:.4} N {n} cos {:.4} {:.2} upd/s",
                    m.loss, m.target_cosine, m.updates_per_s
                );
                match &self.bar {
                    Some(bar) => {
                        bar.set_position(m.step);
                        bar.set_message(msg);
                    }
                    None if self.last_line.elapsed() > Duration::from_secs(30) => {
                        eprintln!("update {}/{}: {msg}", m.step, self.num_updates);
                        self.last_line = Instant::now();
                    }
                    None => {}
                }
            }
            RunEvent::Collapse(collapse) => {
                let line = collapse_warning(collapse);
                match &self.bar {
                    Some(bar) => bar.println(line),
                    None => eprintln!("{line}"),
                }
            }
            RunEvent::Probe(line) => {
                let msg = format!(
                    "probe at update {}: held-out R² state {:.3}, reward {:.3} ({:.1} s)",
                    line.step, line.state_r2, line.reward_r2, line.seconds
                );
                super::progress::say(&self.bar, msg);
            }
            RunEvent::ShortEpisodes(tasks) => {
                for t in tasks {
                    eprintln!("{}", short_episodes_warning(t));
                }
            }
            RunEvent::Checkpoint { step, path } => {
                let line = format!("checkpoint at update {step}: {}", path.display());
                match &self.bar {
                    Some(bar) => bar.println(line),
                    None => eprintln!("{line}"),
                }
            }
        }
    }
}

fn collapse_warning(collapse: &Collapse) -> String {
    format!(
        "warning: the representation has collapsed since update {}: {}. The encoder is not learning; \
         see docs/design.md (\"Multi-task batches\") for the settings that avoid it",
        collapse.since_step, collapse.reason
    )
}

fn short_episodes_warning(t: &TaskEpisodeLengths) -> String {
    use lfs::data::episode_lengths::{MIN_FRAMES_FOR_REAL_PAIR, MIN_FRAMES_FOR_SYNTHETIC_PAIR};
    format!(
        "warning: task {}: {} of {} episodes are shorter than {} frames (no synthetic pair) and {} shorter than {} (no pair at all); they add nothing of those kinds",
        t.task,
        t.without_synthetic_pair,
        t.episodes,
        MIN_FRAMES_FOR_SYNTHETIC_PAIR,
        t.without_real_pair,
        MIN_FRAMES_FOR_REAL_PAIR
    )
}
