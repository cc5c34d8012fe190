//! DrQ-v2's actor (`drqv2.py` `Actor`, facebookresearch/drqv2 @c0c650b): trunk
//! `Linear(repr → 50) → LayerNorm → Tanh`, then the policy MLP 50 → 1024 → 1024 → A whose tanh
//! is the mean of a [`TruncatedNormal`] with the scheduled σ. PyTorch names `trunk.{0,1}`,
//! `policy.{0,2,4}`.

use candle_core::Tensor;
use rand::Rng;

use super::truncated_normal::TruncatedNormal;
use crate::nn::Params;
use crate::rl::critic::NetworkDims;
use crate::rl::mlp::{join, Mlp, Trunk, TrunkOutput};
use crate::Result;

#[derive(Debug, Clone)]
pub struct Actor {
    trunk: Trunk,
    policy: Mlp,
}

impl Actor {
    /// Registers `{prefix}.trunk.*` and `{prefix}.policy.*` in `params`.
    pub fn new<R: Rng + ?Sized>(dims: NetworkDims, prefix: &str, params: &mut Params, rng: &mut R) -> Result<Self> {
        Ok(Self {
            trunk: Trunk::new(
                dims.repr_dim,
                dims.feature_dim,
                TrunkOutput::LayerNormTanh,
                &join(prefix, "trunk"),
                params,
                rng,
            )?,
            policy: Mlp::new(
                dims.feature_dim,
                dims.hidden_dim,
                dims.action_dim,
                &join(prefix, "policy"),
                params,
                rng,
            )?,
        })
    }

    /// Shapes: h (b, repr) -> the policy over (b, A) with standard deviation `std`.
    pub fn forward(&self, h: &Tensor, std: f64) -> Result<TruncatedNormal> {
        let mu = self.policy.forward(&self.trunk.forward(h)?)?.tanh()?; // (b, A)
        Ok(TruncatedNormal { mu, std })
    }
}
