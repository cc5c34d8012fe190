//! DrQ-v2's update written out as tensor ops on the agent's device, what an agent off the CPU
//! takes ([`DrQv2Gradients::for_device`]): each network's forward keeps what its backward needs
//! ([`crate::rl::written_out`]) and each gradient is written once, where candle's autograd
//! zero-fills and accumulates (on an H200 the same layers in SAC's update took 369 launches and
//! 2.6 ms against autograd's ~1,010 and 7.0 ms; results/gpu-h200-2026-11-28d/).
//!
//! The arithmetic is [`super::DrQv2Agent::critic_losses`] and
//! [`super::DrQv2Agent::actor_losses`] term for term (drqv2.py @c0c650b's `update_critic` and
//! `update_actor`): the target's action μ'(s') + clip(σ·ε'), clamped, the n-step target
//! `r + γⁿ·min(Q1', Q2')`, MSE(Q1, y) + MSE(Q2, y); the actor's action μ(s) + clip(σ·ε) clamped
//! straight-through (d action / d μ = 1), its loss −mean min(Q1, Q2) through the critic held
//! constant. The unit test in `drqv2/mod.rs` holds the gradients, the metrics and the
//! feature gradient to candle's autograd on the same networks, batch and noise.

use std::collections::BTreeMap;

use candle_core::Tensor;

use super::truncated_normal::{TruncatedNormal, SAMPLE_BOUNDS};
use crate::nn::Params;
use crate::rl::batch::Batch;
use crate::rl::mlp::TrunkOutput;
use crate::rl::written_out::{ActorNets, CriticNets, NamedGrads, Regression};
use crate::Result;

/// How a DrQ-v2 agent's updates are differentiated; fixed for its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrQv2Gradients {
    /// candle's autograd over the losses' graphs.
    Autograd,
    /// Written out as tensor ops on the agent's device ([`OnDevice`]).
    OnDevice,
}

impl DrQv2Gradients {
    /// The path on `device`: autograd on the CPU, written out off it (DrQ-v2's update at B=256
    /// on an H200 at 0.64× a strong PyTorch's time so, BENCHMARKS.md, 2026-11-28); an agent
    /// whose critic takes latent actions (TACO's) always autograd (its action encoder's
    /// gradients are not written out). The unit tests below run both paths on the CPU.
    pub fn for_device(device: &candle_core::Device, latent_actions: bool) -> Self {
        Self::choose(device.is_cpu(), latent_actions)
    }

    /// [`DrQv2Gradients::for_device`]'s rule.
    pub(crate) fn choose(cpu: bool, latent_actions: bool) -> Self {
        match (latent_actions, cpu) {
            (false, false) => Self::OnDevice,
            (true, _) | (false, true) => Self::Autograd,
        }
    }
}

/// The networks one update reads, as their stores.
pub(crate) struct Stores<'a> {
    pub actor: &'a Params,
    pub critic: &'a Params,
    pub critic_target: &'a Params,
}

/// The critic's step before its optimiser: the regression's gradients, loss, Q1, Q2 and
/// feature gradient, and the target (b, 1) for the metrics.
pub(crate) struct CriticStep {
    pub fit: Regression,
    pub target_q: Tensor,
}

/// The actor's step before its optimiser.
pub(crate) struct ActorStep {
    pub grads: BTreeMap<String, Tensor>,
    pub loss: Tensor,
    /// The policy and the action (b, A) its loss was taken at (the log-density's metric).
    pub dist: TruncatedNormal,
    pub action: Tensor,
}

/// The written-out path, with the LayerNorms as one op each (on CUDA one kernel, as SAC's).
pub(crate) struct OnDevice;

/// μ + clip(σ·ε, ±c) clamped into (−1, 1): [`TruncatedNormal::sample`]'s value.
fn sample(mu: &Tensor, eps: &Tensor, std: f64, clip: f64) -> Result<Tensor> {
    let noise = (eps * std)?.clamp(-clip, clip)?; // (b, A)
    Ok((mu + noise)?.clamp(SAMPLE_BOUNDS.0, SAMPLE_BOUNDS.1)?)
}

/// DrQ-v2's trunks end in LayerNorm → tanh.
const TRUNK: TrunkOutput = TrunkOutput::LayerNormTanh;

impl OnDevice {
    /// The critic's step on `batch` with the target's noise `next_eps` (b, A) at σ = `std`.
    pub(crate) fn critic_step(
        &self,
        nets: &Stores,
        batch: &Batch,
        std: f64,
        clip: f64,
        next_eps: &Tensor,
    ) -> Result<CriticStep> {
        let obs = batch.obs.detach(); // (b, repr)
        let next_obs = batch.next_obs.detach(); // (b, repr)
        let actor = ActorNets::of(nets.actor, TRUNK)?;
        let (critic, target) = (
            CriticNets::of(nets.critic, TRUNK)?,
            CriticNets::of(nets.critic_target, TRUNK)?,
        );
        // The target: the actor and the target critic on s', no gradient.
        let mu = actor
            .policy
            .forward(actor.trunk.forward(&next_obs)?.out())?
            .out
            .tanh()?; // (b, A)
        let next_action = sample(&mu, next_eps, std, clip)?; // (b, A)
        let x = Tensor::cat(&[target.trunk.forward(&next_obs)?.out(), &next_action], 1)?; // (b, F + A)
        let (tq1, tq2) = (target.q1.forward(&x)?.out, target.q2.forward(&x)?.out); // (b, 1) each
        let target_q = super::critic_target(&batch.reward, &batch.discount, &tq1, &tq2)?; // (b, 1)

        let fit = critic.regress(&obs, &batch.action.detach(), &target_q, batch.obs.track_op())?;
        Ok(CriticStep { fit, target_q })
    }

    /// The actor's step on features `obs` (b, repr) with noise `eps` (b, A) at σ = `std`.
    pub(crate) fn actor_step(
        &self,
        nets: &Stores,
        obs: &Tensor,
        std: f64,
        clip: f64,
        eps: &Tensor,
    ) -> Result<ActorStep> {
        let obs = obs.detach(); // (b, repr)
        let (actor, critic) = (ActorNets::of(nets.actor, TRUNK)?, CriticNets::of(nets.critic, TRUNK)?);
        let trunk = actor.trunk.forward(&obs)?;
        let policy = actor.policy.forward(trunk.out())?; // out (b, A), before the tanh
        let mu = policy.out.tanh()?; // (b, A)
        let action = sample(&mu, eps, std, clip)?; // (b, A)
        let min_q = critic.min_q(&obs, &action)?;
        let loss = min_q.value.mean_all()?.neg()?;
        // Straight through the clamp: d μ = d action; then through μ = tanh(out).
        let d_out = (min_q.action_grad * (1.0 - mu.sqr()?)?)?; // (b, A)
        let g_policy = actor.policy.backward(trunk.out(), &policy, &d_out)?;
        let trunk_grads = actor.trunk.backward(&obs, &trunk, &g_policy.d_x, false)?;
        let mut grads = NamedGrads::new();
        grads.trunk("trunk", &actor.trunk, trunk_grads);
        grads.mlp(&actor.policy, g_policy.layers);
        Ok(ActorStep {
            grads: grads.0,
            loss,
            dist: TruncatedNormal { mu, std },
            action,
        })
    }
}

#[cfg(test)]
mod tests {

    use candle_core::{Device, Var};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::rl::drqv2::{ActorLosses, CriticLosses, DrQv2Agent, DrQv2Config};
    use crate::rl::written_out::test_support::{assert_step_matches, batch, close, value, worst_relative};

    /// An agent after a few autograd updates, so that no LayerNorm γ is 1, no bias 0 and the
    /// target has moved from the critic.
    fn warmed_agent(repr: usize, rng: &mut ChaCha8Rng) -> DrQv2Agent {
        let cfg = DrQv2Config {
            feature_dim: 8,
            hidden_dim: 32,
            batch_size: 16,
            critic_target_tau: 0.3,
            ..DrQv2Config::default()
        };
        let mut agent = DrQv2Agent::new(&cfg, repr, 3, &Device::Cpu, rng).unwrap();
        agent.gradients = DrQv2Gradients::Autograd;
        for step in 0..4 {
            agent.update(&batch(repr, 16, 3, rng), step, rng).unwrap();
        }
        agent
    }

    /// Each step's loss, gradients and values against candle's autograd on the same networks,
    /// batch and noise: the critic's with features that carry a tape (d loss / d features too)
    /// and without, the actor's; at a σ whose noise the clip cuts (0.6·ε beyond ±0.3) and actions the clamp cuts.
    #[test]
    fn the_written_out_steps_match_candles_autograd() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let repr = 40;
        let agent = warmed_agent(repr, &mut rng);
        let (std, clip) = (0.6, agent.cfg.stddev_clip);
        let stores = agent.stores_of_networks();
        let path = OnDevice;
        {
            for tape in [false, true] {
                let mut b = batch(repr, 16, 3, &mut rng);
                // Actions at the bounds, so the target's and the actor's clamps are reached.
                b.action = (b.action * 2.0).unwrap().clamp(-1.0, 1.0).unwrap();
                let obs_var = Var::from_tensor(&b.obs).unwrap();
                if tape {
                    b.obs = obs_var.as_tensor().clone();
                }
                let what = format!("tape {tape}");
                let next_eps = agent.noise(16, &Device::Cpu, &mut rng).unwrap();
                let CriticStep {
                    fit: ours,
                    target_q: ours_target,
                } = path.critic_step(&stores, &b, std, clip, &next_eps).unwrap();
                let CriticLosses { loss, q, target_q } = agent.critic_losses(&b, std, &next_eps).unwrap();
                let grads = loss.backward().unwrap();
                for (x, y) in [(&ours.q1, &q.q1), (&ours.q2, &q.q2), (&ours_target, &target_q)] {
                    assert!(worst_relative(x, y) < 1e-5, "{what}: Q or target");
                }
                assert_step_matches(
                    (value(&ours.loss), value(&loss)),
                    (&ours.grads, &agent.critic_params.grads_by_name(&grads)),
                    &agent.critic_params,
                    &format!("{what}, critic"),
                );
                match (tape, &ours.obs_grad) {
                    (true, Some(d)) => {
                        let reference = grads.get(obs_var.as_tensor()).unwrap();
                        assert!(worst_relative(d, reference) < 1e-4, "{what}: d features");
                    }
                    (false, None) => {}
                    _ => panic!("{what}: a feature gradient exactly when the features carry a tape"),
                }

                let eps = agent.noise(16, &Device::Cpu, &mut rng).unwrap();
                let ours = path.actor_step(&stores, &b.obs, std, clip, &eps).unwrap();
                let ActorLosses { loss, dist, action } = agent.actor_losses(&b.obs.detach(), std, &eps).unwrap();
                let grads = loss.backward().unwrap();
                assert!(worst_relative(&ours.action, &action) < 1e-6, "{what}: action");
                assert!(worst_relative(&ours.dist.mu, &dist.mu) < 1e-6, "{what}: μ");
                assert_step_matches(
                    (value(&ours.loss), value(&loss)),
                    (&ours.grads, &agent.actor_params.grads_by_name(&grads)),
                    &agent.actor_params,
                    &format!("{what}, actor"),
                );
            }
        }
    }

    /// Over 300 updates on the same batches (features with a tape, as `lfs train`'s) and the same
    /// noise, the two paths do not drift apart: every update's critic and actor losses and the
    /// feature gradient handed to the encoder within 1e-5 (they differ at rounding, ~1e-7), and
    /// at the end every tensor of the agents' states (networks, target, Adam's moments).
    #[test]
    fn the_paths_stay_together_over_300_updates() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let repr = 24;
        let cfg = DrQv2Config {
            feature_dim: 8,
            hidden_dim: 32,
            batch_size: 16,
            ..DrQv2Config::default()
        };
        let agent = |path| {
            let mut agent = DrQv2Agent::new(&cfg, repr, 3, &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
            agent.gradients = path;
            (agent, ChaCha8Rng::seed_from_u64(9))
        };
        let (mut a, mut rng_a) = agent(DrQv2Gradients::Autograd);
        let (mut b, mut rng_b) = agent(DrQv2Gradients::OnDevice);
        for step in 0..300 {
            let mut batch = batch(repr, 16, 3, &mut rng);
            batch.obs = Var::from_tensor(&batch.obs).unwrap().as_tensor().clone();
            let (ma, ga) = a.update(&batch, step, &mut rng_a).unwrap();
            let (mb, gb) = b.update(&batch, step, &mut rng_b).unwrap();
            assert!(close(mb.critic_loss, ma.critic_loss), "update {step}: {ma:?} vs {mb:?}");
            assert!(close(mb.actor_loss, ma.actor_loss), "update {step}: {ma:?} vs {mb:?}");
            let worst = worst_relative(&gb.unwrap(), &ga.unwrap());
            assert!(worst < 1e-5, "update {step}: d features {worst}");
        }
        let ((sa, _), (sb, _)) = (a.state().unwrap(), b.state().unwrap());
        assert_eq!(sa.len(), sb.len());
        for (name, t) in &sa {
            assert!(worst_relative(&sb[name], t) < 1e-4, "{name}");
        }
    }

    /// The path each device gets; TACO's agents stay on autograd.
    #[test]
    fn the_path_is_autograd_on_the_cpu_written_out_off_it() {
        use DrQv2Gradients::*;
        assert_eq!(DrQv2Gradients::choose(true, false), Autograd);
        assert_eq!(DrQv2Gradients::choose(false, false), OnDevice);
        for cpu in [true, false] {
            assert_eq!(DrQv2Gradients::choose(cpu, true), Autograd);
        }
    }
}
