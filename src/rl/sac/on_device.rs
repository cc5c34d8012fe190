//! SAC's update written out as tensor ops on the agent's device (issue 52): the [`OnDevice`]
//! path behind [`super::gradients`]' seam, which an agent on a GPU takes.
//!
//! [`super::backward`]'s arithmetic (Proto-RL's `update_critic` and `update_actor_and_alpha`,
//! term for term) with candle's tensor ops instead of host loops: each forward keeps what its
//! backward needs, and the backward writes every gradient once, with no zeroing, accumulation or
//! graph (on a GPU the update is bound by kernel launches: candle's autograd made ~1,010 per
//! update at B=128, results/gpu-h200-2026-11-28c). On the CPU the host loops are faster, so
//! [`super::GradientPath::for_features`] chooses this path off the CPU only.
//!
//! Unlike the host path it also takes features that carry their encoder's tape (SAC from
//! pixels, `sac/paper`): it computes on them detached and returns the critic loss's gradient
//! with respect to them, which `lfs train` hands to the encoder's own backward.
//!
//! The unit test in `sac/mod.rs` holds every gradient and the returned feature gradient to
//! candle's autograd on the same networks, batch and noise.

use candle_core::Tensor;

use super::gradients::{noise, ActorGradients, CriticGradients, Gradients, Networks};
use crate::rl::batch::Batch;
use crate::rl::mlp::TrunkOutput;
use crate::rl::row_ops;
use crate::rl::written_out::{ActorNets, CriticNets, NamedGrads};
use crate::Result;

// ---- the two steps

/// `GradientPath::OnDevice`, with [`row_ops`]' ops.
pub(crate) struct OnDevice;

impl Gradients for OnDevice {
    fn critic(&self, nets: &Networks, batch: &Batch, next_eps: &[f32], alpha: f64) -> Result<CriticGradients> {
        let a = nets.dims.action_dim;
        let obs = batch.obs.detach(); // (b, repr)
        let next_obs = batch.next_obs.detach(); // (b, repr)
        let next_eps = noise(next_eps, &obs, a)?; // (b, A)
        let actor = ActorNets::of(nets.actor_params, TrunkOutput::LayerNorm)?;
        let critic = CriticNets::of(nets.critic_params, TrunkOutput::LayerNorm)?;
        let target = CriticNets::of(nets.critic_target_params, TrunkOutput::LayerNorm)?;

        // The target: the actor and the target critic on s', no gradient.
        let head = actor.policy.forward(actor.trunk.forward(&next_obs)?.out())?.out; // (b, 2A)

        // The reparameterised sample a' = tanh(μ + σ·ε) and Σ_A log π(a'): (b, A), (b, 1).
        let (next_action, next_log_prob) = row_ops::squashed_sample(&head, &next_eps, nets.log_std_bounds)?;
        let x = Tensor::cat(&[target.trunk.forward(&next_obs)?.out(), &next_action], 1)?; // (b, F + A)
        let (tq1, tq2) = (target.q1.forward(&x)?.out, target.q2.forward(&x)?.out); // (b, 1) each
        let target_v = (tq1.minimum(&tq2)? - (next_log_prob * alpha)?)?; // (b, 1)
        let target_q = (&batch.reward.detach() + target_v.mul(&batch.discount.detach())?)?; // (b, 1)

        let fit = critic.regress(&obs, &batch.action.detach(), &target_q, batch.obs.track_op())?;
        Ok(CriticGradients {
            grads: fit.grads,
            loss: fit.loss,
            q1: fit.q1.mean_all()?,
            target_q: target_q.mean_all()?,
            obs_grad: fit.obs_grad,
        })
    }

    fn actor(&self, nets: &Networks, obs: &Tensor, eps: &[f32], alpha: f64) -> Result<ActorGradients> {
        let a = nets.dims.action_dim;
        let b = obs.dim(0)?;
        let obs = obs.detach(); // (b, repr)
        let eps = noise(eps, &obs, a)?; // (b, A)
        let actor = ActorNets::of(nets.actor_params, TrunkOutput::LayerNorm)?;
        let critic = CriticNets::of(nets.critic_params, TrunkOutput::LayerNorm)?;

        let trunk = actor.trunk.forward(&obs)?;
        let policy = actor.policy.forward(trunk.out())?; // out (b, 2A)
        let (action, log_prob) = row_ops::squashed_sample(&policy.out, &eps, nets.log_std_bounds)?; // (b, A), (b, 1)
        let min_q = critic.min_q(&obs, &action)?;
        let loss = ((&log_prob * alpha)? - &min_q.value)?.mean_all()?;
        let d_action = min_q.action_grad; // d (−mean min Q) / d action: (b, A)

        // Back through the sample (x = μ + σ·ε, tanh, log π's −log σ − log(1 − tanh² x));
        // d log π = α / b per row. d head = [d μ | d raw]: (b, 2A).
        let d_head =
            row_ops::squashed_sample_grad(&policy.out, &eps, &d_action, alpha / b as f64, nets.log_std_bounds)?;
        let g_policy = actor.policy.backward(trunk.out(), &policy, &d_head)?;
        let trunk_grads = actor.trunk.backward(&obs, &trunk, &g_policy.d_x, false)?;

        let mut grads = NamedGrads::new();
        grads.trunk("trunk", &actor.trunk, trunk_grads);
        grads.mlp(&actor.policy, g_policy.layers);
        Ok(ActorGradients {
            grads: grads.0,
            loss,
            mean_log_prob: log_prob.mean_all()?,
            log_prob,
        })
    }
}
