//! The LFS clustering-based temporal association loss (paper §3.3, Eq. 5–6; Proto-RL's
//! `Proto.forward`): online `z = normalize(v(g(f(O_prev))))`, `log p = log_softmax(z·Cᵀ/τ)`;
//! target `t = normalize(g'(f'(O_cur)))`, `q = sinkhorn(t·Cᵀ)`; `J = −(1/M) Σ_x Σ_k q_xk log p_xk`.

use candle_core::Tensor;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::lnc::{lnc_pairs, LncConfig, LncLatent};
use super::objective::{fixed_share_pairs, real_pairs, Draw, Drawn, Objective, ObjectiveLoss};
use super::sinkhorn::{assignment_entropy_tensor, sinkhorn};
use super::update_metrics::UpdateMetrics;
use crate::nn::prototypes::{l2_normalize, Prototypes};
use crate::nn::{Params, Predictor};
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
    /// Mean Sinkhorn assignment entropy (nats), an f64 scalar on the loss's device.
    pub sinkhorn_entropy: Tensor,
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
        sinkhorn_entropy: assignment_entropy_tensor(&q)?,
    })
}

/// Where LFS's training pairs come from: the paper's (LNC over frame-mask candidates) or an
/// ablation's (docs/design.md §5).
#[derive(Debug, Clone)]
pub enum LfsPairs {
    /// `lfs`: M real pairs and M synthetic candidates; LNC keeps N of the candidates.
    Lnc { lnc: LncConfig, latent: LncLatent },
    /// `lfs-no-lnc`: ⌈share·M⌉ synthetic pairs, unscreened.
    FixedShare(f64),
    /// `lfs-no-fm`: real pairs only (no frame mask).
    RealOnly,
}

/// LFS and its ablations: predictor v and prototypes C on the online projection, the
/// clustering loss against Sinkhorn targets of the EMA target's.
#[derive(Debug, Clone)]
pub struct Lfs {
    pairs: LfsPairs,
    predictor: Predictor,
    prototypes: Prototypes,
    clustering: ClusteringConfig,
}

impl Lfs {
    /// Predictor v (latent → hidden → latent) and K prototypes, created in that order.
    pub fn new(
        pairs: LfsPairs,
        clustering: &ClusteringConfig,
        latent_dim: usize,
        predictor_hidden_dim: usize,
        num_prototypes: usize,
        params: &mut Params,
        rng: &mut ChaCha8Rng,
    ) -> Result<Self> {
        Ok(Self {
            pairs,
            predictor: Predictor::new(latent_dim, predictor_hidden_dim, "predictor", params, rng)?,
            prototypes: Prototypes::new(num_prototypes, latent_dim, "protos", params, rng)?,
            clustering: clustering.clone(),
        })
    }
}

impl Objective for Lfs {
    fn draw(&self, d: Draw, metrics: &mut UpdateMetrics) -> Result<Drawn> {
        match &self.pairs {
            LfsPairs::Lnc { lnc, latent } => lnc_pairs(d, lnc, *latent, metrics),
            LfsPairs::FixedShare(share) => fixed_share_pairs(d, *share, metrics),
            LfsPairs::RealOnly => real_pairs(d),
        }
    }

    fn loss(&self, z: &Tensor, t: &Tensor) -> Result<ObjectiveLoss> {
        let out = clustering_loss(&self.predictor.forward(z)?, t, &self.prototypes, &self.clustering)?;
        Ok(ObjectiveLoss {
            loss: out.loss,
            sinkhorn_entropy: Some(out.sinkhorn_entropy),
        })
    }
}
