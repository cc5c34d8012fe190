//! Where SAC's update gets its gradients: one seam ([`Gradients`]), its path chosen once, when
//! the agent is built (`GradientPath`, in `sac/mod.rs`). [`super::SacAgent::update`] draws the
//! noise, steps the Adams and moves the target; what stands behind this seam computes the
//! critic's and the actor's losses and their gradients by parameter name, nothing else.
//!
//! - [`Autograd`]: the losses as candle graphs ([`super::critic_target`], [`super::actor_loss`],
//!   [`crate::rl::critic::critic_loss`]), differentiated by candle. Any device, and features
//!   that carry their encoder's tape: the critic loss's gradient with respect to them is what
//!   trains that encoder (SAC from pixels in `lfs train`).
//! - [`super::backward::WrittenOut`]: the same arithmetic over host buffers, forward and
//!   backward written out (issue 30; about a fifth faster). Constant features on the CPU only:
//!   `lfs eval`'s frozen encoder, `lfs explore`'s agents, `lfs train` without the critic's
//!   gradient.
//! - [`super::on_device::OnDevice`]: the same arithmetic as tensor ops on the agent's device,
//!   each gradient written once (issue 52: on a GPU the update is bound by kernel launches).
//!   Off the CPU, for constant features and for features with a tape alike.

use std::collections::BTreeMap;

use candle_core::Tensor;

use super::actor::Actor;
use super::{actor_loss, critic_target};
use crate::nn::Params;
use crate::rl::batch::Batch;
use crate::rl::critic::{critic_loss, Critic, NetworkDims};
use crate::Result;

/// What one update differentiates: the agent's networks, as modules and as their stores.
pub(crate) struct Networks<'a> {
    pub dims: NetworkDims,
    pub log_std_bounds: (f64, f64),
    pub actor: &'a Actor,
    pub critic: &'a Critic,
    pub critic_target: &'a Critic,
    pub actor_params: &'a Params,
    pub critic_params: &'a Params,
    pub critic_target_params: &'a Params,
}

/// The critic's step, before its optimiser: gradients by parameter name and what the metrics
/// report, as scalar tensors that the update reads with the rest of its numbers in one copy
/// ([`super::SacAgent::update`]).
pub(crate) struct CriticGradients {
    pub grads: BTreeMap<String, Tensor>,
    pub loss: Tensor,
    /// Mean Q1 and mean target on the batch.
    pub q1: Tensor,
    pub target_q: Tensor,
    /// The loss's gradient with respect to `batch.obs` (b, repr), when the features carry a
    /// tape.
    pub obs_grad: Option<Tensor>,
}

/// The actor's step, before its optimiser; scalars as [`CriticGradients`]'s.
pub(crate) struct ActorGradients {
    pub grads: BTreeMap<String, Tensor>,
    pub loss: Tensor,
    /// mean log π on the batch (the policy's entropy estimate is its negative).
    pub mean_log_prob: Tensor,
    /// log π of each sampled action (b, 1), constant: α's step reads it.
    pub log_prob: Tensor,
}

/// The two losses of SAC's update and their gradients.
pub(crate) trait Gradients {
    /// The critic's loss MSE(Q1, y) + MSE(Q2, y), y = r + γ·(min Q'(s', a') − α·log π(a'|s')),
    /// a' ~ π(·|s') drawn with `next_eps` (b, A); gradients for every critic parameter.
    fn critic(&self, nets: &Networks, batch: &Batch, next_eps: &[f32], alpha: f64) -> Result<CriticGradients>;

    /// The actor's loss mean(α·log π(a|s) − min Q(s, a)), a ~ π(·|s) drawn with `eps` (b, A),
    /// through the critic held constant, on constant features `obs` (b, repr); gradients for
    /// every actor parameter.
    fn actor(&self, nets: &Networks, obs: &Tensor, eps: &[f32], alpha: f64) -> Result<ActorGradients>;
}

/// candle's autograd over the losses' graphs.
pub(crate) struct Autograd;

/// `values` (b·A) as a (b, A) tensor on `like`'s device.
pub(super) fn noise(values: &[f32], like: &Tensor, action_dim: usize) -> Result<Tensor> {
    let b = like.dim(0)?;
    Ok(Tensor::from_slice(values, (b, action_dim), like.device())?)
}

impl Gradients for Autograd {
    fn critic(&self, nets: &Networks, batch: &Batch, next_eps: &[f32], alpha: f64) -> Result<CriticGradients> {
        let next_eps = noise(next_eps, &batch.obs, nets.dims.action_dim)?; // (b, A)

        // The critic's loss as a graph, with the Q1 and target values its metrics report.
        let next = nets.actor.forward(&batch.next_obs)?.rsample(&next_eps)?;
        let target = nets.critic_target.forward(&batch.next_obs, &next.action.detach())?;
        let log_prob = next.log_prob.detach();
        let target_q = critic_target(&batch.reward, &target.q1, &target.q2, &log_prob, alpha, &batch.discount)?; // (b, 1)
        let q = nets.critic.forward(&batch.obs, &batch.action)?;
        let loss = critic_loss(&q.q1, &q.q2, &target_q)?;
        let grads = loss.backward()?;
        Ok(CriticGradients {
            grads: nets.critic_params.grads_by_name(&grads),
            loss: loss.detach(),
            q1: q.q1.mean_all()?,
            target_q: target_q.mean_all()?,
            obs_grad: match batch.obs.track_op() {
                true => grads.get(&batch.obs).cloned(),
                false => None,
            },
        })
    }

    fn actor(&self, nets: &Networks, obs: &Tensor, eps: &[f32], alpha: f64) -> Result<ActorGradients> {
        let eps = noise(eps, obs, nets.dims.action_dim)?; // (b, A)

        // The actor's loss as a graph through the detached critic.
        let sample = nets.actor.forward(obs)?.rsample(&eps)?;
        let q = nets.critic.detached().forward(obs, &sample.action)?;
        let loss = actor_loss(alpha, &sample.log_prob, &q.q1, &q.q2)?;
        let log_prob = sample.log_prob;
        // Only the actor's gradients are kept: the critic is detached, so this loss gives it
        // none (Proto-RL computes them and zeroes them before the critic's next step).
        let grads = loss.backward()?;
        Ok(ActorGradients {
            grads: nets.actor_params.grads_by_name(&grads),
            loss: loss.detach(),
            mean_log_prob: log_prob.mean_all()?,
            log_prob: log_prob.detach(),
        })
    }
}
