//! `LoopConfig`: the RL loop's config — all of what a `pipelines/sac/<name>.toml` holds for `lfs
//! eval` (frozen-encoder SAC, docs/design.md §6, §8), and the SAC sections of `lfs train`'s.
//! Every field is documented and used; unknown fields are errors; omitted sections take the
//! paper's protocol (`impl Default`). Budgets are in frames (env steps); [`Frames::to_steps`] is
//! the one place they become agent steps.

use serde::{Deserialize, Serialize};

use crate::config::{self, StageConfig};
use crate::device::{DeviceChoice, Precision};
use crate::env::RenderQuality;
use crate::rl::AgentConfig;
use crate::rl::FeatureDtype;
use crate::rl::ReplaySampling;
use crate::{Error, Result};

/// A count of frames: env steps, i.e. agent steps × action repeat (docs/design.md §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Frames(pub u64);

impl Frames {
    /// Agent steps that make these frames (rounded down).
    pub fn to_steps(self, action_repeat: u32) -> u64 {
        self.0 / u64::from(action_repeat)
    }

    /// The frames of `steps` agent steps.
    pub fn from_steps(steps: u64, action_repeat: u32) -> Self {
        Frames(steps * u64::from(action_repeat))
    }
}

/// The whole `lfs eval` config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct LoopConfig {
    pub run: LoopRunConfig,
    pub env: LoopEnvConfig,
    /// The agent: `kind` ("sac", the default, or "drqv2") and its settings.
    pub agent: AgentConfig,
    pub replay: ReplayConfig,
}

/// Budget, evaluation and checkpoint cadence, seeding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopRunConfig {
    /// Seed of the run's RNG (random encoder, init, exploration, sampling, shifts) and of its
    /// environment seeds; `--seed` overrides it.
    pub seed: u64,
    /// Training budget in frames (the paper: 500K).
    pub num_train_frames: Frames,
    /// Frames of uniformly random actions before the first update (the paper: 1000 agent steps
    /// = 2000 frames).
    pub num_seed_frames: Frames,
    /// Evaluate every this many frames, and at the start and the end (the paper: 20K).
    pub eval_every_frames: Frames,
    /// Deterministic episodes (tanh μ) per evaluation (the paper: 10).
    pub num_eval_episodes: usize,
    /// Checkpoint at the first episode end after every this many frames, and at the end.
    pub checkpoint_every_frames: Frames,
    /// Also write the logs' numbers (`eval.csv`, `train.jsonl`, `aux.jsonl`) as TensorBoard
    /// scalars into the run directory (`events.out.tfevents.lfs`, x = frame, as DrQ-v2's). May
    /// change on resume.
    pub tensorboard: bool,
    /// Where the agent's networks (and an online encoder) train: `cpu`, `cuda` or `cuda:N`
    /// (a build with the `cuda` feature). `--device` sets it. May change on resume: checkpoints
    /// are device-independent.
    #[serde(skip_serializing_if = "DeviceChoice::is_cpu")]
    pub device: DeviceChoice,
    /// The precision of the f32 matrix products: `fp32`, or `tf32` on a CUDA device
    /// ([`Precision`]). May change on resume, as the device may.
    #[serde(skip_serializing_if = "Precision::is_fp32")]
    pub precision: Precision,
}

impl LoopRunConfig {
    /// These settings with the fields a resumed run may change (the budget, the checkpoint
    /// cadence, TensorBoard, the device and its precision) set to fixed values: what every command's resume key
    /// holds of `[run]`.
    pub fn for_resume_key(&self) -> Self {
        Self {
            num_train_frames: Frames(0),
            checkpoint_every_frames: Frames(0),
            tensorboard: true,
            device: DeviceChoice::Cpu,
            precision: Precision::Fp32,
            ..self.clone()
        }
    }
}

impl Default for LoopRunConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            num_train_frames: Frames(500_000),
            num_seed_frames: Frames(2_000),
            eval_every_frames: Frames(20_000),
            num_eval_episodes: 10,
            checkpoint_every_frames: Frames(20_000),
            tensorboard: true,
            device: DeviceChoice::Cpu,
            precision: Precision::Fp32,
        }
    }
}

/// The environment (the task comes from `--task`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopEnvConfig {
    /// Env steps per agent step, rewards summed (2).
    pub action_repeat: u32,
    /// `encoder`: render at the quality of the videos the encoder was pre-trained on, as its
    /// export records; dm_control's `default` when it records none (the random encoder, videos
    /// from elsewhere). `default` (dm_control's rendering, what published numbers use) or
    /// `fast` pin the quality: an encoder pre-trained on videos of the other one is refused
    /// unless told to. `config.resolved.toml` holds the quality the run rendered at, and
    /// `run.json` where it came from.
    pub render_quality: RenderQualitySetting,
    /// End every episode, training's and evaluation's, after at most this many frames, the way
    /// the task's time limit ends it (the last step keeps its discount); a multiple of the
    /// action repeat. Absent (the default, and the paper's protocol): the task's own limit,
    /// 1000 frames on the DMControl tasks and 250 on reach_duplo and Jaco's. For smoke runs
    /// and tests, where two whole evaluation episodes are most of a tiny run's time: returns of
    /// cut episodes are not comparable with published ones, and `lfs report` says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episode_frames: Option<Frames>,
}

impl Default for LoopEnvConfig {
    fn default() -> Self {
        Self {
            action_repeat: 2,
            render_quality: RenderQualitySetting::Encoder,
            episode_frames: None,
        }
    }
}

impl LoopEnvConfig {
    /// The cut the environment workers are given (`DmcConfig::episode_frames`).
    pub fn worker_episode_frames(&self) -> Option<u32> {
        // validate() holds it within u32.
        self.episode_frames.map(|f| f.0 as u32)
    }

    fn validate(&self) -> Result<()> {
        if self.action_repeat == 0 {
            return Err(Error::Config("env.action_repeat must be >= 1".into()));
        }
        if let Some(Frames(frames)) = self.episode_frames {
            let repeat = u64::from(self.action_repeat);
            if frames == 0 || frames % repeat != 0 || frames > u64::from(u32::MAX) {
                return Err(Error::Config(format!(
                    "env.episode_frames = {frames} must be a positive multiple of env.action_repeat = {repeat} \
                     (leave it out for the task's own time limit)"
                )));
            }
        }
        Ok(())
    }
}

/// `env.render_quality`: follow the encoder, or one quality pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderQualitySetting {
    /// `"encoder"`.
    Encoder,
    /// `"default"` or `"fast"`.
    Pinned(RenderQuality),
}

/// Where a run's render quality came from (`run.json`'s `render_quality_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderQualitySource {
    /// The config pinned it.
    Config,
    /// The encoder's training videos (`env.render_quality = "encoder"`).
    Encoder,
    /// `"encoder"`, but the encoder records no quality: dm_control's default.
    EncoderRecordsNone,
}

impl RenderQualitySource {
    pub fn name(self) -> &'static str {
        match self {
            RenderQualitySource::Config => "config",
            RenderQualitySource::Encoder => "encoder",
            RenderQualitySource::EncoderRecordsNone => "default: the encoder records no render quality",
        }
    }
}

impl RenderQualitySetting {
    const ENCODER: &'static str = "encoder";

    /// The pinned quality, if any.
    pub fn pinned(self) -> Option<RenderQuality> {
        match self {
            RenderQualitySetting::Encoder => None,
            RenderQualitySetting::Pinned(q) => Some(q),
        }
    }

    /// The quality a run with an encoder pre-trained at `trained` renders at, and why.
    /// A pinned quality other than `trained` is an error unless `allow_mismatch`.
    pub fn resolve(
        self,
        trained: Option<RenderQuality>,
        allow_mismatch: bool,
    ) -> Result<(RenderQuality, RenderQualitySource)> {
        match (self, trained) {
            (RenderQualitySetting::Encoder, Some(q)) => Ok((q, RenderQualitySource::Encoder)),
            (RenderQualitySetting::Encoder, None) => {
                Ok((RenderQuality::Default, RenderQualitySource::EncoderRecordsNone))
            }
            (RenderQualitySetting::Pinned(q), Some(trained)) if q != trained && !allow_mismatch => {
                Err(Error::Config(format!(
                    "the encoder was pre-trained on videos rendered at quality {:?}, and env.render_quality pins {:?}; \
                     set env.render_quality = \"encoder\" to render as the encoder was trained, or pass \
                     --allow-render-quality-mismatch to evaluate at {:?} anyway",
                    trained.name(),
                    q.name(),
                    q.name()
                )))
            }
            (RenderQualitySetting::Pinned(q), _) => Ok((q, RenderQualitySource::Config)),
        }
    }
}

impl Serialize for RenderQualitySetting {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            RenderQualitySetting::Encoder => Self::ENCODER,
            RenderQualitySetting::Pinned(q) => q.name(),
        })
    }
}

impl<'de> Deserialize<'de> for RenderQualitySetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name == Self::ENCODER {
            return Ok(RenderQualitySetting::Encoder);
        }
        name.parse().map(RenderQualitySetting::Pinned).map_err(|_| {
            serde::de::Error::custom(format!(
                "unknown render quality {name:?}: expected \"encoder\", {}",
                RenderQuality::names()
            ))
        })
    }
}

/// The replay buffer and what is stored in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplayConfig {
    /// Transitions held (the paper's table: 40000).
    pub capacity: usize,
    /// Random-shift padding in pixels applied to obs and next obs of every batch (4).
    pub random_shift_pad: usize,
    /// Encode each observation once when it is stored and train on those features, without
    /// augmentation: much faster on a CPU, and a deviation from the paper's protocol that
    /// every result records (false).
    pub feature_cache: bool,
    /// How the cache stores features: "f32" (as encoded), or "f16" (half the memory, each value
    /// rounded to the nearest half; BENCHMARKS.md compares the two). A resumed run keeps its own.
    pub feature_cache_dtype: FeatureDtype,
    /// Which stored transitions a batch draws (docs/design.md §6, §13): "uniform" (the default,
    /// Proto-RL's replay: every stored transition alike, the episode being played included), or
    /// "drqv2" (DrQ-v2's and TACO's replay
    /// loader: finished episodes only, in four shards of episode number mod 4 that take turns
    /// by batch, each shard seeing newly finished episodes only every 1000 of its samples;
    /// src/rl/replay_sampling.rs says what of upstream's loader it keeps). A config without it
    /// writes nothing, so its `config.resolved.toml` and checkpoints are what they were before
    /// the setting existed.
    #[serde(skip_serializing_if = "ReplaySampling::is_uniform")]
    pub sampling: ReplaySampling,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        Self {
            capacity: 40_000,
            random_shift_pad: 4,
            feature_cache: false,
            feature_cache_dtype: FeatureDtype::F32,
            sampling: ReplaySampling::Uniform,
        }
    }
}

impl StageConfig for LoopConfig {
    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        let run = &self.run;
        self.env.validate()?;
        if run.num_train_frames.0 == 0 {
            return bad("run.num_train_frames must be >= 1".into());
        }
        if run.num_seed_frames >= run.num_train_frames {
            return bad(format!(
                "run.num_train_frames = {} is not more than run.num_seed_frames = {}: the agent would never train",
                run.num_train_frames.0, run.num_seed_frames.0
            ));
        }
        if run.eval_every_frames.to_steps(self.env.action_repeat) == 0
            || run.checkpoint_every_frames.to_steps(self.env.action_repeat) == 0
        {
            return bad("run.eval_every_frames and run.checkpoint_every_frames must be at least one agent step".into());
        }
        if run.num_eval_episodes == 0 {
            return bad("run.num_eval_episodes must be >= 1".into());
        }
        if self.replay.capacity < self.agent.batch_size() {
            return bad(format!(
                "replay.capacity = {} is smaller than agent.batch_size = {}",
                self.replay.capacity,
                self.agent.batch_size()
            ));
        }
        self.agent.validate("agent")
    }
}

impl LoopConfig {
    /// Reads `path` with `key.path=value` overrides (see [`crate::config`]).
    pub fn load(path: &std::path::Path, overrides: &[String]) -> Result<Self> {
        config::load(path, overrides)
    }

    pub fn from_toml_str(text: &str, overrides: &[String]) -> Result<Self> {
        config::from_toml_str(text, overrides)
    }

    pub fn to_toml(&self) -> Result<String> {
        config::to_toml(self)
    }

    /// What a resumed run must share with its checkpoint: everything but the budget and the
    /// checkpoint cadence.
    pub fn resume_key(&self) -> Result<String> {
        let mut c = self.clone();
        c.run = c.run.for_resume_key();
        c.to_toml()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_quality_follows_the_encoder_unless_pinned() {
        let (fast, default) = (RenderQuality::Fast, RenderQuality::Default);
        let follow = RenderQualitySetting::Encoder;
        assert_eq!(
            follow.resolve(Some(fast), false).unwrap(),
            (fast, RenderQualitySource::Encoder)
        );
        assert_eq!(
            follow.resolve(None, false).unwrap(),
            (default, RenderQualitySource::EncoderRecordsNone)
        );
        let pinned = RenderQualitySetting::Pinned(fast);
        assert_eq!(
            pinned.resolve(Some(fast), false).unwrap(),
            (fast, RenderQualitySource::Config)
        );
        assert_eq!(
            pinned.resolve(None, false).unwrap(),
            (fast, RenderQualitySource::Config)
        );
        let err = pinned.resolve(Some(default), false).unwrap_err().to_string();
        assert!(err.contains("--allow-render-quality-mismatch"), "{err}");
        assert!(err.contains("\"default\"") && err.contains("pins \"fast\""), "{err}");
        assert_eq!(
            pinned.resolve(Some(default), true).unwrap(),
            (fast, RenderQualitySource::Config)
        );
    }

    #[test]
    fn render_quality_reads_and_writes_its_three_names() {
        for (text, setting) in [
            ("encoder", RenderQualitySetting::Encoder),
            ("default", RenderQualitySetting::Pinned(RenderQuality::Default)),
            ("fast", RenderQualitySetting::Pinned(RenderQuality::Fast)),
        ] {
            let cfg = LoopConfig::from_toml_str(&format!("[env]\nrender_quality = \"{text}\"\n"), &[]).unwrap();
            assert_eq!(cfg.env.render_quality, setting);
            let again = LoopConfig::from_toml_str(&cfg.to_toml().unwrap(), &[]).unwrap();
            assert_eq!(again.env.render_quality, setting);
        }
        let err = LoopConfig::from_toml_str("[env]\nrender_quality = \"best\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"encoder\""), "{err}");
    }
}
