//! `PretrainConfig`: what a `pipelines/<name>.toml` holds. Every field is documented and used;
//! unknown fields are errors; omitted sections take the paper's defaults (`impl Default`).
//! Loading and `--set key.path=value` overrides are [`crate::config`]'s.

use std::path::{Path, PathBuf};

use candle_core::Device;
use serde::{Deserialize, Serialize};

use super::collapse::CollapseConfig;
use crate::config::{self, StageConfig};
use crate::data::TaskBatching;
use crate::device::{DeviceChoice, Precision};
use crate::nn::AdamConfig;
/// The sections the objective engine is built from live beside it.
pub use crate::objectives::config::{LncLatent, Method, ModelConfig, ObjectiveConfig};
use crate::objectives::TrainerConfig;
use crate::probe::online::OnlineProbeConfig;
use crate::{Error, Result};

/// The whole pre-training config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct PretrainConfig {
    pub run: RunConfig,
    pub data: DataConfig,
    pub model: ModelConfig,
    pub optimizer: AdamConfig,
    pub objective: ObjectiveConfig,
    /// When `lfs pretrain` reports a collapsed representation (not part of the resume check).
    pub collapse: CollapseConfig,
    /// The online probe: every `probe.every_updates` updates, the held-out R² of state and
    /// reward from the online encoder's features on a small probe set, to `metrics.jsonl` (not
    /// part of the resume check: it reads the encoder and draws no random numbers).
    pub probe: OnlineProbeConfig,
}

/// Length, batch size, seeding and checkpoint cadence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Run name; `make pretrain` writes into `runs/<name>/`.
    pub name: String,
    /// Seed of the one ChaCha8 RNG that draws the init, the pairs and the shifts.
    pub seed: u64,
    /// Gradient updates in total (the paper: 60K). 0 writes the initial weights as the
    /// checkpoint: the randomly initialised encoder every method must beat (docs/design.md §5).
    pub num_updates: u64,
    /// M: pairs per update, also the number of synthetic candidates LNC screens (512).
    pub batch_size: usize,
    /// Write a checkpoint every this many updates (and always after the last one).
    pub checkpoint_every_updates: u64,
    /// Also write `metrics.jsonl`'s numbers as TensorBoard scalars into the run directory
    /// (`events.out.tfevents.lfs`, x = update). May change on resume.
    pub tensorboard: bool,
    /// Where the networks train: `cpu` (our kernels), `cuda` or `cuda:N` (candle's ops; a build
    /// with the `cuda` feature). `--device` sets it. May change on resume: checkpoints are
    /// device-independent.
    #[serde(skip_serializing_if = "DeviceChoice::is_cpu")]
    pub device: DeviceChoice,
    /// The precision of the f32 matrix products: `fp32`, or `tf32` on a CUDA device
    /// ([`Precision`]). May change on resume, as the device may.
    #[serde(skip_serializing_if = "Precision::is_fp32")]
    pub precision: Precision,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            name: "paper".to_string(),
            seed: 1,
            num_updates: 60_000,
            batch_size: 512,
            checkpoint_every_updates: 1000,
            tensorboard: true,
            device: DeviceChoice::Cpu,
            precision: Precision::Fp32,
        }
    }
}

/// Which ingested datasets to read and how to batch them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataConfig {
    /// Ingested dataset directories (`lfs ingest` output), relative to the working directory.
    pub datasets: Vec<PathBuf>,
    /// `mixed`: every pair uniform over the pairs of all tasks (the default: it learns);
    /// `round-robin`: one task per update, in turn (the first author's CRPTpro code), which
    /// stalls at the clustering objective's fixed point on our data (docs/design.md §5b).
    pub task_batching: TaskBatching,
    /// Random-shift padding in pixels (4); 0 disables augmentation.
    pub random_shift_pad: usize,
}

impl Default for DataConfig {
    fn default() -> Self {
        Self {
            datasets: vec![],
            task_batching: TaskBatching::Mixed,
            random_shift_pad: 4,
        }
    }
}

impl PretrainConfig {
    /// Reads `path`, applies `key.path=value` overrides, deserialises and validates.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self> {
        config::load(path, overrides)
    }

    /// Parses TOML text with overrides (see [`PretrainConfig::load`]).
    pub fn from_toml_str(text: &str, overrides: &[String]) -> Result<Self> {
        config::from_toml_str(text, overrides)
    }

    /// The resolved config as TOML (written beside checkpoints).
    pub fn to_toml(&self) -> Result<String> {
        config::to_toml(self)
    }

    /// The objective engine's sections: the run's seed and batch size, the shift padding, the
    /// model, optimizer and objective.
    pub fn trainer_config(&self) -> TrainerConfig {
        TrainerConfig {
            seed: self.run.seed,
            batch_size: self.run.batch_size,
            random_shift_pad: self.data.random_shift_pad,
            model: self.model.clone(),
            optimizer: self.optimizer.clone(),
            objective: self.objective.clone(),
        }
    }

    /// Where the networks live ([`RunConfig::device`]), opened: the one place pre-training
    /// chooses a device.
    pub fn device(&self) -> Result<Device> {
        self.run.device.open(self.run.precision)
    }

    /// The settings a resumed run must share with its checkpoint: everything except the run
    /// length and checkpoint cadence (which may be extended), the TensorBoard switch, the device
    /// and its precision, the collapse monitor and the online probe.
    pub fn resume_key(&self) -> Result<String> {
        let mut c = self.clone();
        c.run.num_updates = 0;
        c.run.checkpoint_every_updates = 0;
        c.run.tensorboard = true;
        c.run.device = DeviceChoice::Cpu;
        c.run.precision = Precision::Fp32;
        c.collapse = CollapseConfig::default();
        c.probe = OnlineProbeConfig::default();
        c.to_toml()
    }
}

impl StageConfig for PretrainConfig {
    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.run.checkpoint_every_updates == 0 {
            return bad("run.checkpoint_every_updates must be >= 1".into());
        }
        if self.model.encoder.input_offset != 0.0 {
            return bad(format!(
                "model.encoder.input_offset = {}: pre-trained encoders take pixels / 255 (the paper's, and what \
                 `lfs export` and its PyTorch loader expect); the offset is for DrQ-v2 and TACO end to end",
                self.model.encoder.input_offset
            ));
        }
        self.trainer_config().validate()?;
        let collapse = &self.collapse;
        if collapse.window_updates == 0
            || collapse.margin_nats <= 0.0
            || !(collapse.max_target_cosine > 0.0 && collapse.max_target_cosine <= 1.0)
        {
            return bad(format!(
                "collapse: need window_updates >= 1, margin_nats > 0, 0 < max_target_cosine <= 1 ({collapse:?})"
            ));
        }
        self.probe.validate()
    }
}
