//! TACO's action encoder (`utils.ActionEncoding`, FrankZheng2022/TACO @84c38e3; docs/design.md
//! §14), in front of the critic of a DrQ-v2 agent with latent actions: an action
//! becomes a latent action, `Linear(A → 64) → Tanh → Linear(64 → L)`, what the critic takes in
//! its place; a sequence of K actions becomes the K latent actions concatenated and mixed by
//! `Linear(K·L → K·L) → LayerNorm → Tanh`. PyTorch names `action_tokenizer.{0,2}`,
//! `action_seq_tokenizer.{0,1}`.

use candle_core::Tensor;
use candle_nn::Linear;
use rand::Rng;

use crate::nn::projector::init_linear;
use crate::nn::Params;
use crate::rl::mlp::{detach_linear, join, linear, Trunk, TrunkOutput};
use crate::Result;

#[derive(Debug, Clone)]
pub struct ActionEncoding {
    tokenizer: [Linear; 2],
    sequence: Trunk,
    latent_dim: usize,
}

/// The hidden units of the action tokenizer (TACO's 64).
const TOKENIZER_HIDDEN: usize = 64;

impl ActionEncoding {
    /// Registers `{prefix}.action_tokenizer.*` and `{prefix}.action_seq_tokenizer.*` for actions
    /// of `action_dim`, latent actions of `latent_dim` and sequences of `k`.
    pub fn new<R: Rng + ?Sized>(
        action_dim: usize,
        latent_dim: usize,
        k: usize,
        prefix: &str,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        let tok = join(prefix, "action_tokenizer");
        Ok(Self {
            tokenizer: [
                init_linear(action_dim, TOKENIZER_HIDDEN, 1.0, &join(&tok, "0"), params, rng)?,
                init_linear(TOKENIZER_HIDDEN, latent_dim, 1.0, &join(&tok, "2"), params, rng)?,
            ],
            sequence: Trunk::new(
                latent_dim * k,
                latent_dim * k,
                TrunkOutput::LayerNormTanh,
                &join(prefix, "action_seq_tokenizer"),
                params,
                rng,
            )?,
            latent_dim,
        })
    }

    pub fn latent_dim(&self) -> usize {
        self.latent_dim
    }

    /// Shapes: action (b, A) -> latent action (b, L).
    pub fn encode(&self, action: &Tensor) -> Result<Tensor> {
        let [l0, l2] = &self.tokenizer;
        let h = linear(l0, action)?.tanh()?; // (b, 64)
        linear(l2, &h)
    }

    /// Shapes: actions (b, K, A) -> the sequence's latent (b, K·L).
    pub fn encode_sequence(&self, actions: &Tensor) -> Result<Tensor> {
        let (b, k, a) = actions.dims3()?;
        let latent = self.encode(&actions.reshape((b * k, a))?)?; // (b·K, L)
        self.sequence.forward(&latent.reshape((b, k * self.latent_dim))?) // (b, K·L)
    }

    /// The same encoder over detached copies of its parameters: no gradient reaches them.
    pub fn detached(&self) -> Self {
        Self {
            tokenizer: self.tokenizer.each_ref().map(detach_linear),
            sequence: self.sequence.detached(),
            latent_dim: self.latent_dim,
        }
    }
}
