//! The twin-Q critic (docs/design.md §6): trunk `Linear(repr → 50) → LayerNorm` (→ tanh for
//! DrQ-v2, §13), then two heads `(50 + A) → 1024 → 1024 → 1`. PyTorch names `trunk.{0,1}`,
//! `Q1.{0,2,4}`, `Q2.{0,2,4}`.

use candle_core::{Tensor, D};
use rand::Rng;

use super::mlp::{join, Mlp, Trunk, TrunkOutput};
use crate::nn::Params;
use crate::Result;

#[derive(Debug, Clone)]
pub struct Critic {
    trunk: Trunk,
    q1: Mlp,
    q2: Mlp,
}

/// Sizes of the actor and the critic (Proto-RL's `feature_dim`, `hidden_dim`).
#[derive(Debug, Clone, Copy)]
pub struct NetworkDims {
    /// Encoder features in (39200).
    pub repr_dim: usize,
    /// Trunk output (50).
    pub feature_dim: usize,
    /// Hidden units of the MLPs (1024).
    pub hidden_dim: usize,
    /// Action dimensions A.
    pub action_dim: usize,
}

/// MSE(Q1, target) + MSE(Q2, target), each a mean over the batch.
pub fn critic_loss(q1: &Tensor, q2: &Tensor, target_q: &Tensor) -> Result<Tensor> {
    let mse = |q: &Tensor| -> Result<Tensor> { Ok(q.sub(target_q)?.sqr()?.mean_all()?) };
    Ok((mse(q1)? + mse(q2)?)?)
}

/// The two Q estimates, (b, 1) each.
#[derive(Debug, Clone)]
pub struct TwinQ {
    pub q1: Tensor,
    pub q2: Tensor,
}

impl TwinQ {
    /// min(Q1, Q2): (b, 1).
    pub fn min(&self) -> Result<Tensor> {
        Ok(self.q1.minimum(&self.q2)?)
    }
}

impl Critic {
    /// Registers `{prefix}.trunk.*`, `{prefix}.Q1.*`, `{prefix}.Q2.*` in `params`.
    pub fn new<R: Rng + ?Sized>(
        dims: NetworkDims,
        trunk: TrunkOutput,
        prefix: &str,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        let head_in = dims.feature_dim + dims.action_dim;
        Ok(Self {
            trunk: Trunk::new(
                dims.repr_dim,
                dims.feature_dim,
                trunk,
                &join(prefix, "trunk"),
                params,
                rng,
            )?,
            q1: Mlp::new(head_in, dims.hidden_dim, 1, &join(prefix, "Q1"), params, rng)?,
            q2: Mlp::new(head_in, dims.hidden_dim, 1, &join(prefix, "Q2"), params, rng)?,
        })
    }

    /// The critic over its parameters already in `params` (e.g. a copy: the EMA target).
    pub fn from_params(dims: NetworkDims, trunk: TrunkOutput, prefix: &str, params: &Params) -> Result<Self> {
        let head_in = dims.feature_dim + dims.action_dim;
        Ok(Self {
            trunk: Trunk::from_params(dims.repr_dim, dims.feature_dim, trunk, &join(prefix, "trunk"), params)?,
            q1: Mlp::from_params(head_in, dims.hidden_dim, 1, &join(prefix, "Q1"), params)?,
            q2: Mlp::from_params(head_in, dims.hidden_dim, 1, &join(prefix, "Q2"), params)?,
        })
    }

    /// The same critic over detached copies of its parameters: Q's gradient still reaches the
    /// action, but no parameter of the critic (the actor's loss, which Proto-RL lets fill the
    /// critic's gradients only to zero them before the critic's next step).
    pub fn detached(&self) -> Self {
        Self {
            trunk: self.trunk.detached(),
            q1: self.q1.detached(),
            q2: self.q2.detached(),
        }
    }

    /// Shapes: h (b, repr), action (b, A) -> Q1, Q2 (b, 1).
    pub fn forward(&self, h: &Tensor, action: &Tensor) -> Result<TwinQ> {
        let x = Tensor::cat(&[&self.trunk.forward(h)?, action], D::Minus1)?; // (b, 50 + A)
        Ok(TwinQ {
            q1: self.q1.forward(&x)?,
            q2: self.q2.forward(&x)?,
        })
    }
}
