//! The objective engine's sections of a config: the networks beside the encoder (`[model]`) and
//! the objective (`[objective]`), as `lfs pretrain`'s config holds them and `lfs train`'s
//! `[aux]` does again.

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::nn::EncoderConfig;
use crate::nn::Params;
use crate::objectives::atc::Atc;
use crate::objectives::atc::AtcConfig;
use crate::objectives::curl::Curl;
use crate::objectives::curl::CurlConfig;
use crate::objectives::lfs::ClusteringConfig;
use crate::objectives::lfs::{Lfs, LfsPairs};
use crate::objectives::lfs_cl::LfsCl;
pub use crate::objectives::lnc::LncLatent;
use crate::objectives::objective::Objective;
use crate::objectives::LncConfig;
use crate::Result;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

impl<'de> Deserialize<'de> for Method {
    /// By [`Method::name`]; `taco`, an objective that needs actions, is refused with where TACO
    /// is (an agent of `lfs train`).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let name = String::deserialize(deserializer)?;
        if let Some(m) = Method::ALL.into_iter().find(|m| m.name() == name) {
            return Ok(m);
        }
        if name == "taco" {
            return Err(D::Error::custom(
                "`taco` needs the actions of the run, so it is no objective for action-free videos (lfs pretrain) \
                 nor for aux.method: TACO trains end to end as an agent, [agent] kind = \"taco\" (pipelines/taco/*.toml)",
            ));
        }
        let names: Vec<String> = Method::ALL.iter().map(|m| format!("`{}`", m.name())).collect();
        Err(D::Error::custom(format!(
            "unknown variant `{name}`, expected one of {}",
            names.join(", ")
        )))
    }
}

impl Method {
    /// Every method, in the order of their names in messages.
    pub const ALL: [Method; 6] = [
        Method::Lfs,
        Method::LfsNoLnc,
        Method::LfsNoFm,
        Method::LfsCl,
        Method::Atc,
        Method::Curl,
    ];

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
    /// The objective [`ObjectiveConfig::method`] names (the one place that maps a method to
    /// its implementation), its head's parameters created in `params` from `rng` (the order of
    /// creation is the checkpoints' and the initialisation's).
    pub fn build(&self, model: &ModelConfig, params: &mut Params, rng: &mut ChaCha8Rng) -> Result<Box<dyn Objective>> {
        let (latent, hidden) = (model.latent_dim, model.predictor_hidden_dim);
        let lfs = |pairs: LfsPairs, params: &mut Params, rng: &mut ChaCha8Rng| -> Result<Box<dyn Objective>> {
            Ok(Box::new(Lfs::new(
                pairs,
                &self.clustering,
                latent,
                hidden,
                model.num_prototypes,
                params,
                rng,
            )?))
        };
        let lnc = LfsPairs::Lnc {
            lnc: self.lnc.clone(),
            latent: self.lnc_latent,
        };
        Ok(match self.method {
            Method::Lfs => lfs(lnc, params, rng)?,
            Method::LfsNoLnc => lfs(LfsPairs::FixedShare(self.no_lnc_synthetic_fraction), params, rng)?,
            Method::LfsNoFm => lfs(LfsPairs::RealOnly, params, rng)?,
            Method::LfsCl => Box::new(LfsCl::new(
                &self.lnc,
                self.lnc_latent,
                self.cl_temperature,
                latent,
                hidden,
                params,
                rng,
            )?),
            Method::Atc => Box::new(Atc::new(latent, &self.atc, params, rng)?),
            Method::Curl => Box::new(Curl::new(latent, &self.curl, params, rng)?),
        })
    }

    /// The EMA coefficient the chosen method uses.
    pub fn target_tau(&self) -> f64 {
        match self.method {
            Method::Atc => self.atc.ema_tau,
            Method::Curl => self.curl.ema_tau,
            _ => self.ema_tau,
        }
    }
}
