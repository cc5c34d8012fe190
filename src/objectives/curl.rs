//! CURL (Laskin et al. 2020; MishaLaskin/curl `curl_sac.py`), the second video baseline of
//! docs/design.md §5: two independent random shifts of the same observation; query through the
//! online encoder + projector, key through the EMA encoder + projector (τ = 0.05); logits
//! q·W·kᵀ minus each row's max, cross-entropy with labels on the diagonal
//! (`CURL.compute_logits`). Upstream's encoder ends in fc → LayerNorm; by default the LayerNorm
//! is left out so that every method exports the same encoder + projector, and
//! [`CurlConfig::layer_norm`] puts it back (online γ, β trained; the key side's EMA copy).

use candle_core::{DType, Tensor};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::infonce::bilinear_info_nce;
use super::objective::{two_shifts, Draw, Drawn, Objective, ObjectiveLoss};
use super::update_metrics::UpdateMetrics;
use crate::nn::init::orthogonal;
use crate::nn::Params;
use crate::Result;

/// torch.nn.LayerNorm's default epsilon, as CURL's `PixelEncoder.ln`.
const LAYER_NORM_EPS: f32 = 1e-5;

/// CURL hyper-parameters. Deliberate differences from upstream that are not switches here
/// (docs/design.md §5): `W` is orthogonal (upstream `torch.rand`, uniform in [0, 1)); the key
/// encoder follows every update (upstream every second one, with the critic's); one Adam steps
/// the encoder (upstream two: `encoder_optimizer` and `cpc_optimizer` both hold it); the
/// augmentation is lfs's random shift (upstream: random crop 100 → 84).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CurlConfig {
    /// EMA coefficient of the key encoder (CURL's encoder_tau: 0.05).
    pub ema_tau: f64,
    /// Upstream's LayerNorm (affine, eps 1e-5) on both projections before the logits: `false`
    /// (the default) keeps every method's exported encoder + projector the same; `true` is
    /// upstream's `PixelEncoder` (fc → LayerNorm, no tanh), with `curl_ln.{weight,bias}` trained
    /// on the query side and EMA-copied into the target for the key side.
    pub layer_norm: bool,
}

impl Default for CurlConfig {
    fn default() -> Self {
        Self {
            ema_tau: 0.05,
            layer_norm: false,
        }
    }
}

/// CURL's LayerNorm parameters, `curl_ln.weight` (γ) and `curl_ln.bias` (β), each (latent).
#[derive(Debug, Clone)]
pub struct CurlLayerNorm {
    weight: Tensor,
    bias: Tensor,
}

impl CurlLayerNorm {
    pub const WEIGHT: &'static str = "curl_ln.weight";
    pub const BIAS: &'static str = "curl_ln.bias";

    /// γ = 1, β = 0 (torch's init), registered in `params`.
    fn new(latent_dim: usize, params: &mut Params) -> Result<Self> {
        let device = params.device().clone();
        Ok(Self {
            weight: params.insert(Self::WEIGHT, Tensor::ones(latent_dim, DType::F32, &device)?)?,
            bias: params.insert(Self::BIAS, Tensor::zeros(latent_dim, DType::F32, &device)?)?,
        })
    }

    /// A copy of these parameters registered in `params` (the target's, which the EMA updates).
    fn copy_into(&self, params: &mut Params) -> Result<Self> {
        Ok(Self {
            weight: params.insert(Self::WEIGHT, self.weight.copy()?)?,
            bias: params.insert(Self::BIAS, self.bias.copy()?)?,
        })
    }

    /// Shapes: x (b, latent) -> (b, latent); differentiable.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::layer_norm_slow(
            x,
            &self.weight,
            &self.bias,
            LAYER_NORM_EPS,
        )?)
    }
}

/// The CURL head: the bilinear `curl_W` (orthogonal init) and, with [`CurlConfig::layer_norm`],
/// the query's and the key's LayerNorms.
#[derive(Debug, Clone)]
pub struct CurlHead {
    w: Tensor,
    /// (online, target) LayerNorms; the target one exists once [`CurlHead::attach_target`] ran.
    layer_norm: Option<(CurlLayerNorm, Option<CurlLayerNorm>)>,
}

impl CurlHead {
    pub fn new<R: Rng + ?Sized>(latent_dim: usize, cfg: &CurlConfig, params: &mut Params, rng: &mut R) -> Result<Self> {
        let w = Tensor::from_vec(
            orthogonal(latent_dim, latent_dim, 1.0, rng)?,
            (latent_dim, latent_dim),
            params.device(),
        )?;
        let w = params.insert("curl_W", w)?;
        let layer_norm = if cfg.layer_norm {
            Some((CurlLayerNorm::new(latent_dim, params)?, None))
        } else {
            None
        };
        Ok(Self { w, layer_norm })
    }

    /// Registers the key side's copy of the head's target parameters (the LayerNorm's, if any)
    /// in `target`, the store the EMA updates and checkpoints save.
    pub fn attach_target(&mut self, target: &mut Params) -> Result<()> {
        if let Some((online, key)) = &mut self.layer_norm {
            *key = Some(online.copy_into(target)?);
        }
        Ok(())
    }

    /// Shapes: query (b, latent) online, key (b, latent) from the target -> scalar loss.
    pub fn loss(&self, query: &Tensor, key: &Tensor) -> Result<Tensor> {
        match &self.layer_norm {
            None => bilinear_info_nce(query, &self.w, key),
            Some((online, key_ln)) => {
                let key_ln = key_ln.as_ref().unwrap_or(online);
                let q = online.forward(query)?; // (b, latent)
                let k = key_ln.forward(&key.detach())?.detach(); // (b, latent)
                bilinear_info_nce(&q, &self.w, &k)
            }
        }
    }
}

/// CURL as a pre-training objective: two shifts of O_t as query and key, the head's loss.
#[derive(Debug, Clone)]
pub struct Curl {
    head: CurlHead,
}

impl Curl {
    pub fn new<R: Rng + ?Sized>(latent_dim: usize, cfg: &CurlConfig, params: &mut Params, rng: &mut R) -> Result<Self> {
        Ok(Self {
            head: CurlHead::new(latent_dim, cfg, params, rng)?,
        })
    }
}

impl Objective for Curl {
    fn draw(&self, d: Draw, _metrics: &mut UpdateMetrics) -> Result<Drawn> {
        two_shifts(d)
    }

    fn loss(&self, z: &Tensor, t: &Tensor) -> Result<ObjectiveLoss> {
        Ok(ObjectiveLoss::alone(self.head.loss(z, t)?))
    }

    fn attach_target(&mut self, target: &mut Params) -> Result<()> {
        self.head.attach_target(target)
    }
}
