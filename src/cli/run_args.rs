//! The arguments `lfs eval` and `lfs train` share (the RL loop's run), and the `--seed`
//! shortcut every training command has.

use std::path::PathBuf;

use lfs::env::Task;
use lfs::rl_loop::{EncoderChoice, LoopSpec};

/// `--seed`, `--device` and `--set`: the config overrides every training command takes
/// (`lfs pretrain`, `lfs eval`, `lfs train`, `lfs explore`).
#[derive(clap::Args)]
pub struct ConfigOverrides {
    /// Shortcut for --set run.seed=N.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where the networks train: cpu, cuda or cuda:N (shortcut for --set run.device=...;
    /// CUDA needs `make build-cuda`'s lfs).
    #[arg(long)]
    pub device: Option<String>,
    /// Override one config field, e.g. --set run.tensorboard=false (repeatable; the value is
    /// parsed as TOML, else taken as a string).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

impl ConfigOverrides {
    /// The `--set` overrides with `--seed N` as `run.seed=N` and `--device D` as
    /// `run.device="D"` last.
    pub fn list(&self) -> Vec<String> {
        let mut overrides = self.set.clone();
        if let Some(seed) = self.seed {
            overrides.push(format!("run.seed={seed}"));
        }
        if let Some(device) = &self.device {
            overrides.push(format!("run.device=\"{device}\""));
        }
        overrides
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// DMControl task, e.g. walker_walk (the nine of the paper).
    #[arg(long)]
    pub task: String,
    #[command(flatten)]
    pub overrides: ConfigOverrides,
    /// Run directory: eval.csv, train.jsonl (and aux.jsonl for `lfs train`), checkpoint,
    /// provenance. A checkpoint already there is resumed.
    #[arg(long)]
    pub out_dir: PathBuf,
    /// Use an encoder pre-trained on videos of another render quality than a pinned
    /// env.render_quality.
    #[arg(long)]
    pub allow_render_quality_mismatch: bool,
    /// Write the first episode of every evaluation as <out-dir>/eval_video/<frame>.mp4.
    #[arg(long)]
    pub save_video: bool,
}

impl RunArgs {
    pub fn overrides(&self) -> Vec<String> {
        self.overrides.list()
    }

    /// The run's task and encoder, as the loop takes them.
    pub fn spec(&self, encoder: EncoderChoice) -> anyhow::Result<LoopSpec> {
        let task: Task = self.task.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        Ok(LoopSpec {
            task,
            encoder,
            allow_render_quality_mismatch: self.allow_render_quality_mismatch,
            save_video: self.save_video,
        })
    }
}
