//! `PretrainConfig`: what a `pipelines/<name>.toml` holds. Every field is documented and used;
//! unknown fields are errors; omitted sections take the paper's defaults (`impl Default`).
//! Loading and `--set key.path=value` overrides are [`crate::config`]'s.

use std::path::{Path, PathBuf};

use candle_core::Device;
use serde::{Deserialize, Serialize};

use super::collapse::CollapseConfig;
use crate::config::{self, StageConfig};
use crate::data::TaskBatching;
use crate::nn::kernels::conv_nhwc::OB;
use crate::nn::{AdamConfig, EncoderConfig};
use crate::objectives::atc::AtcConfig;
use crate::objectives::curl::CurlConfig;
use crate::objectives::lfs::ClusteringConfig;
use crate::objectives::LncConfig;
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
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            name: "paper".to_string(),
            seed: 1,
            num_updates: 60_000,
            batch_size: 512,
            checkpoint_every_updates: 1000,
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

/// Networks beyond the conv encoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    pub encoder: EncoderConfig,
    /// Output size of the projector g and the predictor v (128).
    pub latent_dim: usize,
    /// Hidden units of the predictor v (the paper's table: 1024; Proto-RL used 512).
    pub predictor_hidden_dim: usize,
    /// Number of prototypes (512).
    pub num_prototypes: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            encoder: EncoderConfig::default(),
            latent_dim: 128,
            predictor_hidden_dim: 1024,
            num_prototypes: 512,
        }
    }
}

/// The training method, one switch (docs/design.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Frame mask + LNC + clustering (the paper).
    Lfs,
    /// A fixed ceil(fraction·M) random synthetic pairs, no clip.
    LfsNoLnc,
    /// Real pairs only (Proto-RL-style clustering).
    LfsNoFm,
    /// LFS data with InfoNCE in place of clustering.
    LfsCl,
    /// Augmented Temporal Contrast on real pairs.
    Atc,
    /// CURL: two shifts of one observation.
    Curl,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Lfs => "lfs",
            Method::LfsNoLnc => "lfs-no-lnc",
            Method::LfsNoFm => "lfs-no-fm",
            Method::LfsCl => "lfs-cl",
            Method::Atc => "atc",
            Method::Curl => "curl",
        }
    }

    /// Whether the method clusters against prototypes (Sinkhorn targets).
    pub fn clusters(self) -> bool {
        matches!(self, Method::Lfs | Method::LfsNoLnc | Method::LfsNoFm)
    }

    /// Whether the method trains on frame-mask synthetic pairs (episodes need 5 frames).
    pub fn uses_synthetic_pairs(self) -> bool {
        matches!(self, Method::Lfs | Method::LfsNoLnc | Method::LfsCl)
    }

    /// Whether the method screens synthetic candidates with LNC.
    pub fn uses_lnc(self) -> bool {
        matches!(self, Method::Lfs | Method::LfsCl)
    }
}

/// Which latent LNC measures distances in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LncLatent {
    /// Online encoder + projector output (128-d): Proto-RL's `Encoder.forward`.
    Projector,
    /// The 39200-d conv output.
    Conv,
}

/// The objective and its hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ObjectiveConfig {
    /// `lfs`, `lfs-no-lnc`, `lfs-no-fm`, `lfs-cl`, `atc` or `curl`.
    pub method: Method,
    /// η of the EMA target θ' ← (1 − η)θ' + ηθ for the lfs* methods (0.05).
    pub ema_tau: f64,
    pub clustering: ClusteringConfig,
    pub lnc: LncConfig,
    /// The latent LNC measures distances in.
    pub lnc_latent: LncLatent,
    /// lfs-no-lnc: synthetic pairs per update = ceil(fraction·M) (0.1; the paper's 52 at M = 512).
    pub no_lnc_synthetic_fraction: f64,
    /// lfs-cl: temperature of the cosine InfoNCE (0.1, as the clustering softmax).
    pub cl_temperature: f64,
    pub atc: AtcConfig,
    pub curl: CurlConfig,
}

impl Default for ObjectiveConfig {
    fn default() -> Self {
        Self {
            method: Method::Lfs,
            ema_tau: 0.05,
            clustering: ClusteringConfig::default(),
            lnc: LncConfig::default(),
            lnc_latent: LncLatent::Projector,
            no_lnc_synthetic_fraction: 0.1,
            cl_temperature: 0.1,
            atc: AtcConfig::default(),
            curl: CurlConfig::default(),
        }
    }
}

impl ObjectiveConfig {
    /// The EMA coefficient the chosen method uses.
    pub fn target_tau(&self) -> f64 {
        match self.method {
            Method::Atc => self.atc.ema_tau,
            Method::Curl => self.curl.ema_tau,
            _ => self.ema_tau,
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

    /// Where the networks live. The pre-trainer's kernels are CPU kernels (src/nn/kernels), so
    /// this is the one place a device is chosen for pre-training.
    pub fn device(&self) -> Device {
        Device::Cpu
    }

    /// The settings a resumed run must share with its checkpoint: everything except the run
    /// length and checkpoint cadence (which may be extended) and the collapse monitor.
    pub fn resume_key(&self) -> Result<String> {
        let mut c = self.clone();
        c.run.num_updates = 0;
        c.run.checkpoint_every_updates = 0;
        c.collapse = CollapseConfig::default();
        c.to_toml()
    }
}

impl StageConfig for PretrainConfig {
    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        let (run, obj, model) = (&self.run, &self.objective, &self.model);
        if run.checkpoint_every_updates == 0 {
            return bad("run.checkpoint_every_updates must be >= 1".into());
        }
        if run.batch_size < 2 {
            return bad(format!("run.batch_size = {} must be >= 2", run.batch_size));
        }
        if obj.method.uses_lnc() && obj.lnc.k >= run.batch_size {
            return bad(format!(
                "objective.lnc.k = {} must be < run.batch_size = {}",
                obj.lnc.k, run.batch_size
            ));
        }
        if obj.lnc.k == 0 || obj.lnc.r < 0.0 || obj.lnc.c - obj.lnc.r / 2.0 < 0.0 {
            return bad(format!(
                "objective.lnc: need k >= 1, r >= 0, c - r/2 >= 0 (k {}, c {}, r {})",
                obj.lnc.k, obj.lnc.c, obj.lnc.r
            ));
        }
        for (name, tau) in [
            ("objective.ema_tau", obj.ema_tau),
            ("objective.atc.ema_tau", obj.atc.ema_tau),
            ("objective.curl.ema_tau", obj.curl.ema_tau),
        ] {
            if !(tau > 0.0 && tau <= 1.0) {
                return bad(format!("{name} = {tau} must be in (0, 1]"));
            }
        }
        if !(obj.atc.clip_grad_norm >= 0.0 && obj.atc.clip_grad_norm.is_finite()) {
            return bad(format!(
                "objective.atc.clip_grad_norm = {} must be >= 0 (0: no clipping)",
                obj.atc.clip_grad_norm
            ));
        }
        if !(0.0..=1.0).contains(&obj.no_lnc_synthetic_fraction) {
            return bad(format!(
                "objective.no_lnc_synthetic_fraction = {} must be in [0, 1]",
                obj.no_lnc_synthetic_fraction
            ));
        }
        if obj.clustering.temperature <= 0.0 || obj.cl_temperature <= 0.0 {
            return bad("temperatures must be > 0".into());
        }
        if model.encoder.in_channels != 9 {
            return bad(format!(
                "model.encoder.in_channels = {}: observations stack 3 RGB frames (9)",
                model.encoder.in_channels
            ));
        }
        if model.latent_dim == 0
            || model.predictor_hidden_dim == 0
            || model.num_prototypes == 0
            || obj.atc.hidden_dim == 0
        {
            return bad("model dimensions must be >= 1".into());
        }
        model.encoder.repr_dim()?;
        if model.encoder.num_filters % OB != 0 {
            return bad(format!(
                "model.encoder.num_filters = {}: the pre-trainer's CPU conv kernels need a multiple of {OB}",
                model.encoder.num_filters
            ));
        }
        let collapse = &self.collapse;
        if collapse.window_updates == 0
            || collapse.margin_nats <= 0.0
            || !(collapse.max_target_cosine > 0.0 && collapse.max_target_cosine <= 1.0)
        {
            return bad(format!(
                "collapse: need window_updates >= 1, margin_nats > 0, 0 < max_target_cosine <= 1 ({collapse:?})"
            ));
        }
        self.optimizer.validate("optimizer")
    }
}
