//! CURL (Laskin et al. 2020), the second video baseline of docs/design.md §5: two independent random
//! shifts of the same observation; query through the online encoder + projector, key through
//! the EMA encoder + projector (τ = 0.05); logits q·W·kᵀ, cross-entropy over the batch. CURL's
//! LayerNorm after the projection is left out so that every method exports the same
//! encoder + projector.

use candle_core::Tensor;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::infonce::bilinear_info_nce;
use crate::nn::init::orthogonal;
use crate::nn::Params;
use crate::Result;

/// CURL hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CurlConfig {
    /// EMA coefficient of the key encoder (CURL's encoder_tau: 0.05).
    pub ema_tau: f64,
}

impl Default for CurlConfig {
    fn default() -> Self {
        Self { ema_tau: 0.05 }
    }
}

/// The CURL head: the bilinear `curl_W` (orthogonal init).
#[derive(Debug, Clone)]
pub struct CurlHead {
    w: Tensor,
}

impl CurlHead {
    pub fn new<R: Rng + ?Sized>(latent_dim: usize, params: &mut Params, rng: &mut R) -> Result<Self> {
        let w = Tensor::from_vec(
            orthogonal(latent_dim, latent_dim, 1.0, rng)?,
            (latent_dim, latent_dim),
            params.device(),
        )?;
        Ok(Self {
            w: params.insert("curl_W", w)?,
        })
    }

    /// Shapes: query (b, latent) online, key (b, latent) from the target -> scalar loss.
    pub fn loss(&self, query: &Tensor, key: &Tensor) -> Result<Tensor> {
        bilinear_info_nce(query, &self.w, key)
    }
}
