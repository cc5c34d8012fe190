//! SAC's update written out as tensor ops on the agent's device (issue 52): the [`OnDevice`]
//! path behind [`super::gradients`]' seam, which an agent on a GPU takes.
//!
//! On a GPU the update is bound by kernel launches, not arithmetic: the H200's profile of the
//! autograd path (results/gpu-h200-2026-11-28c) counted ~1,010 launches per update at B=128
//! with the GPU busy 2.2 of ~12 ms, 437 of the launches candle's autograd zero-filling a
//! gradient and adding each node's part into it. This path is [`super::backward`]'s arithmetic
//! (Proto-RL's `update_critic` and `update_actor_and_alpha`, term for term) written with
//! candle's tensor ops instead of host loops: each network's forward keeps what its backward
//! needs, and the backward writes every gradient once, with no zeroing, no accumulation and no
//! graph bookkeeping. It runs on any device; on the CPU the host loops of [`super::backward`]
//! are faster, so [`super::GradientPath::for_features`] chooses it off the CPU only.
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

// ---- the squashed Gaussian

/// The reparameterised sample from the policy head (b, 2A) and noise ε (b, A), as
/// [`super::squashed_gaussian`]: μ = head[:, :A], log σ = min + (tanh(raw) + 1)·½(max − min),
/// x = μ + σ·ε, action = tanh(x), log π summed over A.
struct SquashedSample {
    /// tanh(x): (b, A).
    action: Tensor,
    /// Σ_A log π(action): (b, 1).
    log_prob: Tensor,
    /// The head (b, 2A), from which [`row_ops`] recompute each row's terms in the backward.
    head: Tensor,
}

impl SquashedSample {
    fn new(head: &Tensor, eps: &Tensor, bounds: (f64, f64)) -> Result<Self> {
        let (action, log_prob) = row_ops::squashed_sample(head, eps, bounds)?; // (b, A), (b, 1)
        Ok(Self {
            action,
            log_prob,
            head: head.clone(),
        })
    }

    /// d head (b, 2A) = [d μ | d raw], given d action (b, A) and d log π per row, through
    /// x = μ + σ·ε, action = tanh(x), and log π's terms −log σ and −log(1 − tanh² x), whose
    /// derivative in x is 2·tanh(x).
    fn grad(&self, eps: &Tensor, d_action: &Tensor, d_log_prob: f64, bounds: (f64, f64)) -> Result<Tensor> {
        row_ops::squashed_sample_grad(&self.head, eps, d_action, d_log_prob, bounds)
    }
}

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
        let next = SquashedSample::new(&head, &next_eps, nets.log_std_bounds)?;
        let x = Tensor::cat(&[target.trunk.forward(&next_obs)?.out(), &next.action], 1)?; // (b, F + A)
        let (tq1, tq2) = (target.q1.forward(&x)?.out, target.q2.forward(&x)?.out); // (b, 1) each
        let target_v = (tq1.minimum(&tq2)? - (next.log_prob * alpha)?)?; // (b, 1)
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
        let sample = SquashedSample::new(&policy.out, &eps, nets.log_std_bounds)?;
        let min_q = critic.min_q(&obs, &sample.action)?;
        let loss = ((&sample.log_prob * alpha)? - &min_q.value)?.mean_all()?;
        let d_action = min_q.action_grad; // d (−mean min Q) / d action: (b, A)

        // Back through the sample; d log π = α / b per row.
        let d_head = sample.grad(&eps, &d_action, alpha / b as f64, nets.log_std_bounds)?; // (b, 2A)
        let g_policy = actor.policy.backward(trunk.out(), &policy, &d_head)?;
        let trunk_grads = actor.trunk.backward(&obs, &trunk, &g_policy.d_x, false)?;

        let mut grads = NamedGrads::new();
        grads.trunk("trunk", &actor.trunk, trunk_grads);
        grads.mlp(&actor.policy, g_policy.layers);
        Ok(ActorGradients {
            grads: grads.0,
            loss,
            mean_log_prob: sample.log_prob.mean_all()?,
            log_prob: sample.log_prob,
        })
    }
}
