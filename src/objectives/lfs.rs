//! The LFS clustering-based temporal association loss (paper §3.3, Eq. 5–6; Proto-RL's
//! `Proto.forward`): online `z = normalize(v(g(f(O_prev))))`, `log p = log_softmax(z·Cᵀ/τ)`;
//! target `t = normalize(g'(f'(O_cur)))`, `q = sinkhorn(t·Cᵀ)`; `J = −(1/M) Σ_x Σ_k q_xk log p_xk`.

use candle_core::Tensor;
use serde::{Deserialize, Serialize};

use super::sinkhorn::{assignment_entropy, sinkhorn};
use crate::nn::prototypes::{l2_normalize, Prototypes};
use crate::Result;

/// Hyper-parameters of the clustering objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusteringConfig {
    /// Softmax temperature τ for both the online scores and the Sinkhorn targets (0.1).
    pub temperature: f64,
    /// Sinkhorn–Knopp iterations (3; a real field, unlike Proto-RL's hard-coded 3).
    pub sinkhorn_iters: usize,
}

impl Default for ClusteringConfig {
    fn default() -> Self {
        Self {
            temperature: 0.1,
            sinkhorn_iters: 3,
        }
    }
}

/// The loss and what the trainer logs about it.
#[derive(Debug, Clone)]
pub struct ClusteringOutput {
    /// Scalar loss J (differentiable w.r.t. the predictor input and the prototypes).
    pub loss: Tensor,
    /// Mean Sinkhorn assignment entropy (nats).
    pub sinkhorn_entropy: f64,
}

/// Shapes: `predicted` (b, latent) = v(g(f(O_prev))) before normalisation; `target` (b, latent)
/// = g'(f'(O_cur)) (detached here). Re-normalises the prototypes in place first.
pub fn clustering_loss(
    predicted: &Tensor,
    target: &Tensor,
    protos: &Prototypes,
    cfg: &ClusteringConfig,
) -> Result<ClusteringOutput> {
    protos.normalize_in_place()?;
    let z = l2_normalize(predicted)?; // (b, latent)
    let scores_s = protos.forward(&z)?; // (b, K)
    let log_p = candle_nn::ops::log_softmax(&(scores_s / cfg.temperature)?, 1)?; // (b, K)
    let t = l2_normalize(&target.detach())?; // (b, latent)
    let scores_t = protos.forward(&t)?.detach(); // (b, K)
    let q = sinkhorn(&scores_t, cfg.temperature, cfg.sinkhorn_iters)?; // (b, K)
    let loss = (q.mul(&log_p)?.sum(1)?.mean(0)? * -1.0)?;
    Ok(ClusteringOutput {
        loss,
        sinkhorn_entropy: assignment_entropy(&q)?,
    })
}
