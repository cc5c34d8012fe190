//! What the loop is told and what it tells: the run ([`LoopSpec`]), the command's [`Stage`],
//! the events it reports ([`LoopEvent`]) and where it ended ([`LoopSummary`]).

use crate::device::Backend;
use crate::env::Task;
use crate::Result;

use super::config::{self, LoopConfig, RenderQualitySetting, RenderQualitySource};
use super::logs::{EpisodeLog, EvalRow};
use super::representation::{EncoderChoice, Representation};
use super::value_comparison::ValueComparison;

/// What a run is, beyond its config.
#[derive(Debug, Clone)]
pub struct LoopSpec {
    pub task: Task,
    pub encoder: EncoderChoice,
    /// Evaluate on a render quality other than the encoder's training videos'.
    pub allow_render_quality_mismatch: bool,
    /// Write the first episode of every evaluation as `eval_video/<frame>.mp4`.
    pub save_video: bool,
}

/// Where a run starts: at frame 0, or resumed.
#[derive(Debug)]
pub struct LoopStart<'a> {
    pub start_frame: u64,
    pub num_train_frames: u64,
    pub resumed: bool,
    /// The representation's identity.
    pub encoder: &'a str,
    /// What the run keeps on its device beside the agent (the feature cache's rows, or the
    /// replay's frames), and its size.
    pub device_cache: Option<String>,
}

impl LoopStart<'_> {
    /// "starting, N frames" or "resuming at frame F of N", for messages.
    pub fn how(&self) -> String {
        let how = match self.resumed {
            true => format!("resuming at frame {} of {}", self.start_frame, self.num_train_frames),
            false => format!("starting, {} frames", self.num_train_frames),
        };
        match &self.device_cache {
            Some(cache) => format!("{how}, {cache}"),
            None => how,
        }
    }
}

/// What the loop reports to its caller.
#[derive(Debug)]
pub enum LoopEvent<'a> {
    Started(LoopStart<'a>),
    /// After every agent step: frames done.
    Progress {
        frame: u64,
    },
    Episode(&'a EpisodeLog),
    Evaluation(&'a EvalRow),
    Checkpoint {
        frame: u64,
    },
    /// An episode was lost (a worker died or dm_control raised); the run goes on.
    EpisodeLost {
        error: String,
    },
}

/// Where the run ended.
#[derive(Debug, Clone)]
pub struct LoopSummary {
    pub frames_done: u64,
    pub resumed_from_frame: Option<u64>,
    pub last_eval: Option<EvalRow>,
}

/// What the loop needs to know of the command it runs for, beyond the RL loop's sections.
pub struct Stage {
    /// `eval` or `train`: the command, in messages, `run.json` and the folder's claim.
    pub command: &'static str,
    /// The `lfs.kind` of its checkpoints.
    pub checkpoint_kind: &'static str,
    /// The RL loop's sections of the config (all of `lfs eval`'s: run, env, agent, replay), its
    /// render quality resolved.
    pub rl: LoopConfig,
    /// The whole config as TOML (`config.resolved.toml`, the checkpoint's `lfs.config`).
    pub toml: String,
    /// What a resumed run must share with its checkpoint.
    pub resume_key: String,
    /// The resume key of a config a checkpoint recorded (its TOML).
    pub saved_resume_key: fn(&str) -> Result<String>,
    /// The paper's value comparison window, when asked for (`lfs train`); the loop takes it
    /// over at the start.
    pub value_comparison: Option<ValueComparison>,
    /// `rl.run.device`, opened once (a CUDA device opened twice is two devices to candle): the
    /// agent, the representation and every batch live there.
    pub backend: Backend,
}

/// Pins `env.render_quality` (`"encoder"` resolved against `representation`) and says where the
/// quality came from; a pinned quality the encoder was not trained at is refused unless `spec`
/// allows it.
pub fn resolve_render_quality(
    env: &mut config::LoopEnvConfig,
    representation: &dyn Representation,
    spec: &LoopSpec,
) -> Result<RenderQualitySource> {
    let (quality, source) = env.render_quality.resolve(
        representation.training_render_quality(),
        spec.allow_render_quality_mismatch,
    )?;
    env.render_quality = RenderQualitySetting::Pinned(quality);
    Ok(source)
}
