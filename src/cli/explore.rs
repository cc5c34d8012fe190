//! `lfs explore --config pipelines/explore/<method>/<scale>.toml [--seed N] [--set key=value]…
//! [--device D] --out-dir <dir>`: reward-free exploration pre-training (Proto-RL, APT) of one
//! encoder across the configured domains (docs/design.md §15); resumes a killed run and
//! leaves `<dir>/encoder.safetensors` in `lfs export`'s format, and with every checkpoint
//! redraws the run's picture (`exploration.{png,svg}`, [`lfs::report::exploration`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::progress::{finish, say, terminal_bar};
use super::run_args::ConfigOverrides;
use lfs::report::exploration;
use lfs::rl_loop::explore::{self, ExploreConfig, ExploreEvent};

#[derive(clap::Args)]
pub struct Args {
    /// Exploration config (TOML): pipelines/explore/proto/mini.toml, apt/mini.toml, … paper.toml.
    #[arg(long)]
    pub config: PathBuf,
    #[command(flatten)]
    pub overrides: ConfigOverrides,
    /// The run's folder (created; a checkpoint there is resumed).
    #[arg(long)]
    pub out_dir: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = ExploreConfig::load(&args.config, &args.overrides.list()).context("loading the exploration config")?;
    let out_dir = &args.out_dir;
    let bar = terminal_bar(
        cfg.run.num_train_frames.0,
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} frames per domain, ETA {eta} {msg}",
    );
    if let Some(bar) = &bar {
        bar.set_prefix(format!("explore {}", cfg.explore.method.name()));
    }
    let mut domains: Vec<&'static str> = Vec::new();
    let mut on_event = |event: ExploreEvent| match event {
        ExploreEvent::Started {
            start_frame,
            num_train_frames,
            resumed,
            tasks,
        } => {
            domains = tasks.clone();
            let how = match resumed {
                true => format!("resuming at frame {start_frame} of {num_train_frames}"),
                false => format!("starting, {num_train_frames} frames"),
            };
            say(
                &bar,
                format!(
                    "lfs explore {}: {how} in each of {} → {}",
                    cfg.explore.method.name(),
                    tasks.join(", "),
                    out_dir.display()
                ),
            );
            if let Some(bar) = &bar {
                bar.set_position(start_frame);
                bar.reset_eta();
            }
        }
        ExploreEvent::Progress { frame } => {
            if let Some(bar) = &bar {
                bar.set_position(frame);
            }
        }
        ExploreEvent::Episode { task, log } => {
            let line = format!(
                "{task}: episode {} at frame {}, {:.0} frames/s",
                log.episode, log.frame, log.fps
            );
            match &bar {
                Some(bar) => bar.set_message(line),
                None => eprintln!("{line}"),
            }
        }
        ExploreEvent::Checkpoint { frame, encoder } => {
            if bar.is_none() {
                eprintln!("checkpoint at frame {frame}; encoder {}", encoder.display());
            }
            // The picture is read back from the logs the checkpoint has just made whole; a
            // failure to draw it costs the run nothing, so it is a warning.
            if let Err(e) = exploration::write(out_dir, &domains, cfg.explore.method.name(), cfg.run.seed) {
                say(&bar, format!("warning: the exploration picture was not drawn: {e}"));
            }
        }
        ExploreEvent::EpisodeLost { task, error } => say(
            &bar,
            format!("warning: a {task} episode was lost and is skipped: {error}"),
        ),
    };
    let summary =
        explore::run(&cfg, out_dir, &mut on_event).with_context(|| format!("exploring into {}", out_dir.display()))?;
    finish(bar);
    println!(
        "{} frames per domain done, {} representation updates; encoder in {}",
        summary.frames_done,
        summary.updates,
        summary.encoder.display()
    );
    Ok(ExitCode::SUCCESS)
}
