//! A critic's latent actions (TACO, docs/design.md §14): the [`ActionEncoding`] in front of a
//! DrQ-v2 critic, its parameters and the Adam that steps them on the critic's loss (TACO's
//! `encoder_opt` holds the action encoder with the image encoder; FrankZheng2022/TACO @84c38e3).
//! The DrQ-v2 agent holds one when its critic takes latent actions; TACO's own losses
//! (`super::taco`) read and train it too.

use std::collections::{BTreeMap, HashMap};

use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor};
use rand::Rng;

use super::action_encoding::ActionEncoding;
use super::agent_state::{self, Optimised};
use crate::nn::{Adam, AdamConfig, Params};
use crate::Result;

/// Checkpoint names of the action encoder's parameters and of its critic-loss Adam.
pub(crate) const ACT_TOK: &str = "act_tok";
const ACT_TOK_CRITIC_OPT: &str = "act_tok_critic_opt";

/// An action encoder in front of the critic and the Adam that steps it on the critic's loss.
pub struct LatentActions {
    pub encoding: ActionEncoding,
    pub params: Params,
    critic_opt: Adam,
}

impl LatentActions {
    /// Actions of `action_dim` encoded to `latent_dim`, sequences of `k`; its Adam with
    /// `optimizer`.
    pub(crate) fn new<R: Rng + ?Sized>(
        action_dim: usize,
        latent_dim: usize,
        k: usize,
        optimizer: &AdamConfig,
        device: &Device,
        rng: &mut R,
    ) -> Result<Self> {
        let mut params = Params::new(device);
        let encoding = ActionEncoding::new(action_dim, latent_dim, k, "", &mut params, rng)?;
        Ok(Self {
            critic_opt: Adam::new(optimizer.clone(), &params),
            encoding,
            params,
        })
    }

    /// The critic's input for actions (b, A): their latent (b, L), through the encoder as
    /// trained, or as constants (`detached`).
    pub(crate) fn encode(&self, action: &Tensor, detached: bool) -> Result<Tensor> {
        match detached {
            false => self.encoding.encode(action),
            true => self.encoding.detached().encode(action),
        }
    }

    /// The critic-loss step of the action encoder's parameters.
    pub(crate) fn step_on_critic_loss(&mut self, grads: &GradStore) -> Result<()> {
        self.critic_opt.step(&self.params, grads)
    }

    /// Its Adam under its checkpoint prefix.
    pub(crate) fn optimised(&self) -> Optimised<'_> {
        Optimised::new(ACT_TOK_CRITIC_OPT, &self.critic_opt, &self.params)
    }

    /// Restores its Adam from a checkpoint (`tensors`, `meta`).
    pub(crate) fn load_optimiser(
        &mut self,
        tensors: &BTreeMap<String, Tensor>,
        meta: &HashMap<String, String>,
    ) -> Result<()> {
        agent_state::load_optimiser(ACT_TOK_CRITIC_OPT, &mut self.critic_opt, &self.params, tensors, meta)
    }
}
