//! ATC (Stooke et al. 2021, "Augmented Temporal Contrast"; astooke/rlpyt
//! `ul/algos/ul_for_rl/augmented_temporal_contrast.py` and `ul/models/ul/atc_models.py`), the
//! action-free video baseline of docs/design.md §5: anchor O_t through the online encoder +
//! projector, a residual MLP head `c = z + MLP(z)`, positive O_{t+1} through the EMA encoder +
//! projector (τ = 0.01), bilinear W, cross-entropy over the batch with labels on the diagonal.
//!
//! rlpyt's pre-training encoder (`EncoderModel`: conv, then a Linear "compressor" to the
//! latent) has no LayerNorm: the LayerNorm after the compressor belongs to its downstream RL
//! model (`ul/models/rl/sac_rl_models.py`), so the shared encoder + projector here is already
//! upstream's pre-training network and needs no switch. rlpyt's `W` is a torch Linear
//! (logits `c·Wᵀ·kᵀ`); `atc_W` here is used as `c·W·kᵀ`, i.e. it holds rlpyt's `Wᵀ`.

use candle_core::Tensor;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::infonce::bilinear_info_nce;
use super::objective::{real_pairs, Draw, Drawn, Objective, ObjectiveLoss};
use super::update_metrics::UpdateMetrics;
use crate::nn::init::orthogonal;
use crate::nn::{Params, Predictor};
use crate::Result;

/// ATC hyper-parameters. Deliberate differences from rlpyt that are not switches here
/// (docs/design.md §5): the head and `W` are initialised orthogonally (rlpyt: torch's default
/// Linear init); lfs's optimiser settings (rlpyt's DMControl runs use lr 1e-3). Gradient-norm
/// clipping is off by default and a switch ([`AtcConfig::clip_grad_norm`]; rlpyt clips at 10,
/// and the PyTorch transcription measures norms above 10 in 8% of the first 300 updates on the
/// embedded sample; BENCHMARKS.md "ATC and CURL dynamics").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AtcConfig {
    /// Hidden units of the residual predictor MLP (ATC's anchor_hidden_sizes = 512).
    pub hidden_dim: usize,
    /// EMA coefficient of the target encoder (ATC: 0.01).
    pub ema_tau: f64,
    /// Clip the global gradient norm of every trained parameter at this value before the Adam
    /// step (`torch.nn.utils.clip_grad_norm_`); 0 (the default) does not clip. rlpyt's ATC
    /// clips at 10: set 10 for upstream's behaviour.
    pub clip_grad_norm: f64,
}

impl Default for AtcConfig {
    fn default() -> Self {
        Self {
            hidden_dim: 512,
            ema_tau: 0.01,
            clip_grad_norm: 0.0,
        }
    }
}

/// The ATC head: residual predictor `atc_predictor.{0,2}` and bilinear `atc_W` (orthogonal init).
#[derive(Debug, Clone)]
pub struct AtcHead {
    predictor: Predictor,
    w: Tensor,
}

impl AtcHead {
    pub fn new<R: Rng + ?Sized>(latent_dim: usize, cfg: &AtcConfig, params: &mut Params, rng: &mut R) -> Result<Self> {
        let predictor = Predictor::new(latent_dim, cfg.hidden_dim, "atc_predictor", params, rng)?;
        let w = Tensor::from_vec(
            orthogonal(latent_dim, latent_dim, 1.0, rng)?,
            (latent_dim, latent_dim),
            params.device(),
        )?;
        let w = params.insert("atc_W", w)?;
        Ok(Self { predictor, w })
    }

    /// Shapes: anchor z (b, latent) online, positive (b, latent) from the target -> scalar loss.
    pub fn loss(&self, anchor: &Tensor, positive: &Tensor) -> Result<Tensor> {
        let c = (anchor + self.predictor.forward(anchor)?)?; // (b, latent)
        bilinear_info_nce(&c, &self.w, positive)
    }
}

/// ATC as a pre-training objective: real pairs (O_t, O_{t+1}) shifted, the head's loss, and
/// rlpyt's optional gradient clipping.
#[derive(Debug, Clone)]
pub struct Atc {
    head: AtcHead,
    clip_grad_norm: f64,
}

impl Atc {
    pub fn new<R: Rng + ?Sized>(latent_dim: usize, cfg: &AtcConfig, params: &mut Params, rng: &mut R) -> Result<Self> {
        Ok(Self {
            head: AtcHead::new(latent_dim, cfg, params, rng)?,
            clip_grad_norm: cfg.clip_grad_norm,
        })
    }
}

impl Objective for Atc {
    fn draw(&self, d: Draw, _metrics: &mut UpdateMetrics) -> Result<Drawn> {
        real_pairs(d)
    }

    fn loss(&self, z: &Tensor, t: &Tensor) -> Result<ObjectiveLoss> {
        Ok(ObjectiveLoss::alone(self.head.loss(z, t)?))
    }

    fn clip_grad_norm(&self) -> f64 {
        self.clip_grad_norm
    }
}
