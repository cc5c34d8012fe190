//! ATC (Stooke et al. 2021, "Augmented Temporal Contrast"), the action-free video baseline of
//! docs/design.md §5: anchor O_t through the online encoder + projector, a residual MLP head
//! `c = z + MLP(z)`, positive O_{t+1} through the EMA encoder + projector (τ = 0.01), bilinear
//! W, cross-entropy over the batch. ATC's compressor LayerNorm is left out so that every method
//! exports the same encoder + projector.

use candle_core::Tensor;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::infonce::bilinear_info_nce;
use crate::nn::init::orthogonal;
use crate::nn::{Params, Predictor};
use crate::Result;

/// ATC hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AtcConfig {
    /// Hidden units of the residual predictor MLP (ATC's anchor_hidden_sizes = 512).
    pub hidden_dim: usize,
    /// EMA coefficient of the target encoder (ATC: 0.01).
    pub ema_tau: f64,
}

impl Default for AtcConfig {
    fn default() -> Self {
        Self {
            hidden_dim: 512,
            ema_tau: 0.01,
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
