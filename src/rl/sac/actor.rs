//! The actor (docs/design.md §6): trunk `Linear(repr → 50) → LayerNorm`, then the policy MLP
//! 50 → 1024 → 1024 → 2A, giving a tanh-squashed Gaussian. PyTorch names `trunk.{0,1}`,
//! `policy.{0,2,4}`.

use candle_core::Tensor;
use rand::Rng;

use super::squashed_gaussian::SquashedGaussian;
use crate::nn::Params;
use crate::rl::critic::NetworkDims;
use crate::rl::mlp::{join, Mlp, Trunk, TrunkOutput};
use crate::Result;

#[derive(Debug, Clone)]
pub struct Actor {
    trunk: Trunk,
    policy: Mlp,
    log_std_min: f64,
    log_std_max: f64,
}

impl Actor {
    /// Registers `{prefix}.trunk.*` and `{prefix}.policy.*` in `params`.
    pub fn new<R: Rng + ?Sized>(
        dims: NetworkDims,
        log_std_bounds: (f64, f64),
        prefix: &str,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        Ok(Self {
            trunk: Trunk::new(
                dims.repr_dim,
                dims.feature_dim,
                TrunkOutput::LayerNorm,
                &join(prefix, "trunk"),
                params,
                rng,
            )?,
            policy: Mlp::new(
                dims.feature_dim,
                dims.hidden_dim,
                2 * dims.action_dim,
                &join(prefix, "policy"),
                params,
                rng,
            )?,
            log_std_min: log_std_bounds.0,
            log_std_max: log_std_bounds.1,
        })
    }

    /// Shapes: h (b, repr) -> the policy over (b, A).
    pub fn forward(&self, h: &Tensor) -> Result<SquashedGaussian> {
        let head = self.policy.forward(&self.trunk.forward(h)?)?; // (b, 2A)
        SquashedGaussian::from_head(&head, self.log_std_min, self.log_std_max)
    }
}
