//! DrQ-v2 (Yarats et al. 2021; `drqv2.py`, facebookresearch/drqv2 @c0c650b), the paper's
//! end-to-end expert (docs/design.md §13): a DDPG-style actor-critic. The critic is a twin Q
//! with a tanh trunk and an EMA target (τ = 0.01) that learns n-step targets
//! `Σᵢ γⁱ r_{t+i} + γⁿ·min(Q1', Q2')(O_{t+n}, a')`, a' the actor's action with clipped noise;
//! the actor maximises min(Q1, Q2) of its own clipped-noise action on detached features; the
//! exploration σ follows a schedule in agent steps. Everything updates every
//! `update_every_steps`. The encoder is the caller's: with the critic's gradient on the batch's
//! features (`lfs train`'s `aux.critic_gradient`) the critic alone trains it, as in DrQ-v2.
//! Updates return metrics; nothing here prints, samples environments or encodes pixels.

pub mod actor;
mod agent;
pub mod on_device;
pub mod schedule;
pub mod truncated_normal;

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::agent_state::{self, check_finite, Optimised};
use super::batch::Batch;
use super::critic::{critic_loss, Critic, NetworkDims, TwinQ};
use super::latent_actions::{LatentActions, ACT_TOK};
use super::mlp::TrunkOutput;
use crate::device::read_scalars;
use crate::nn::ema::ema_update;
use crate::nn::init::standard_normal;
use crate::nn::{Adam, AdamConfig, Params};
use crate::{Error, Result};
pub use actor::Actor;
pub use agent::DrQv2Sums;
pub use on_device::DrQv2Gradients;
pub use schedule::StddevSchedule;
pub use truncated_normal::TruncatedNormal;

/// DrQ-v2's hyper-parameters (its `cfgs/config.yaml`; the per-task-group ones, `nstep`,
/// `batch_size` and `stddev_schedule`, at the easy tasks' values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DrQv2Config {
    /// Output of the actor's and critic's trunks, Linear(repr → feature) → LayerNorm → Tanh (50).
    pub feature_dim: usize,
    /// Hidden units of the policy and Q MLPs (1024).
    pub hidden_dim: usize,
    /// γ (0.99).
    pub discount: f64,
    /// The n of the n-step returns (3; DrQ-v2's walker tasks 1).
    pub nstep: usize,
    /// EMA coefficient of the target critic, which follows every update (0.01).
    pub critic_target_tau: f64,
    /// The agent updates (critic, actor, target) every this many agent steps (2).
    pub update_every_steps: u64,
    /// σ of the actor's noise over agent steps (easy tasks: linear 1.0 → 0.1 over 100K steps;
    /// medium: over 500K).
    pub stddev_schedule: StddevSchedule,
    /// The noise of the target's action and of the actor loss's action is clipped to ±this (0.3).
    pub stddev_clip: f64,
    /// Transitions per update (256; DrQ-v2's walker tasks 512).
    pub batch_size: usize,
    /// One Adam setting for the actor, the critic and the encoder (lr 1e-4, no weight decay).
    pub optimizer: AdamConfig,
}

impl Default for DrQv2Config {
    fn default() -> Self {
        Self {
            feature_dim: 50,
            hidden_dim: 1024,
            discount: 0.99,
            nstep: 3,
            critic_target_tau: 0.01,
            update_every_steps: 2,
            stddev_schedule: StddevSchedule::Linear {
                start: 1.0,
                end: 0.1,
                duration_steps: 100_000,
            },
            stddev_clip: 0.3,
            batch_size: 256,
            optimizer: AdamConfig::default(),
        }
    }
}

impl DrQv2Config {
    /// Checks ranges; errors name the field under `section`.
    pub fn validate(&self, section: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("{section}.{m}")));
        if self.feature_dim == 0 || self.hidden_dim == 0 {
            return bad("feature_dim and hidden_dim must be >= 1".into());
        }
        if !(0.0..=1.0).contains(&self.discount) {
            return bad(format!("discount = {} must be in [0, 1]", self.discount));
        }
        if self.nstep == 0 {
            return bad("nstep must be >= 1".into());
        }
        if !(self.critic_target_tau > 0.0 && self.critic_target_tau <= 1.0) {
            return bad(format!(
                "critic_target_tau = {} must be in (0, 1]",
                self.critic_target_tau
            ));
        }
        if self.update_every_steps == 0 {
            return bad("update_every_steps must be >= 1".into());
        }
        if !self.stddev_clip.is_finite() || self.stddev_clip <= 0.0 {
            return bad(format!("stddev_clip = {} must be > 0", self.stddev_clip));
        }
        if self.batch_size == 0 {
            return bad("batch_size must be >= 1".into());
        }
        self.stddev_schedule.validate(&format!("{section}.stddev_schedule"))?;
        self.optimizer.validate(&format!("{section}.optimizer"))
    }
}

/// What one update reports (keys `train/<name>` in `train.jsonl`, DrQ-v2's metric names).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DrQv2Metrics {
    #[serde(rename = "train/critic_loss")]
    pub critic_loss: f64,
    /// Mean Q1 and Q2 on the batch.
    #[serde(rename = "train/critic_q1")]
    pub critic_q1: f64,
    #[serde(rename = "train/critic_q2")]
    pub critic_q2: f64,
    /// Mean n-step target.
    #[serde(rename = "train/critic_target_q")]
    pub critic_target_q: f64,
    /// −mean min(Q1, Q2) of the actor's action.
    #[serde(rename = "train/actor_loss")]
    pub actor_loss: f64,
    /// Mean Normal log-density of the actor's action, summed over the action dimensions.
    #[serde(rename = "train/actor_logprob")]
    pub actor_logprob: f64,
    /// The Normal's entropy, summed over the action dimensions.
    #[serde(rename = "train/actor_ent")]
    pub actor_ent: f64,
    /// The scheduled σ of the update.
    #[serde(rename = "train/actor_stddev")]
    pub actor_stddev: f64,
    /// Mean n-step reward of the batch.
    #[serde(rename = "train/batch_reward")]
    pub batch_reward: f64,
}

/// The n-step target `reward + discount·min(Q1', Q2')` (b, 1), detached; `reward` is the
/// batch's Σᵢ γⁱ r_{t+i} and `discount` its γⁿ.
pub fn critic_target(reward: &Tensor, discount: &Tensor, target_q1: &Tensor, target_q2: &Tensor) -> Result<Tensor> {
    let target_v = target_q1.minimum(target_q2)?; // (b, 1)
    Ok((reward + discount.mul(&target_v)?)?.detach())
}

/// `−mean(min(Q1, Q2))`.
pub fn actor_loss(q1: &Tensor, q2: &Tensor) -> Result<Tensor> {
    Ok(q1.minimum(q2)?.mean_all()?.neg()?)
}

/// What the critic's step leaves to be read: its loss and the means of Q1, Q2 and the target,
/// scalars on the batch's device.
struct CriticReadings {
    loss: Tensor,
    q1: Tensor,
    q2: Tensor,
    target_q: Tensor,
}

impl CriticReadings {
    /// From the loss, Q1, Q2 and the target, (b, 1) each.
    fn of(loss: &Tensor, q1: &Tensor, q2: &Tensor, target_q: &Tensor) -> Result<Self> {
        Ok(Self {
            loss: loss.clone(),
            q1: q1.mean_all()?,
            q2: q2.mean_all()?,
            target_q: target_q.mean_all()?,
        })
    }
}

/// What the actor's step leaves to be read: its loss and its action's mean log-density
/// (scalars on the device), and the policy's entropy (known on the host).
struct ActorReadings {
    loss: Tensor,
    logprob: Tensor,
    entropy: f64,
}

/// The update's metrics in one read after all its steps are launched (a GPU stops once per
/// update, not after the critic's step and again after the actor's); an error if either loss
/// is not finite. `actor_ent` and `actor_stddev` are the caller's.
fn read_metrics(critic: &CriticReadings, actor: &ActorReadings, batch: &Batch) -> Result<DrQv2Metrics> {
    let [critic_loss, critic_q1, critic_q2, critic_target_q, batch_reward, actor_loss, actor_logprob] =
        read_scalars([
            &critic.loss,
            &critic.q1,
            &critic.q2,
            &critic.target_q,
            &batch.reward.mean_all()?,
            &actor.loss,
            &actor.logprob,
        ])?;
    check_finite("critic loss", critic_loss)?;
    check_finite("actor loss", actor_loss)?;
    Ok(DrQv2Metrics {
        critic_loss,
        critic_q1,
        critic_q2,
        critic_target_q,
        batch_reward,
        actor_loss,
        actor_logprob,
        ..DrQv2Metrics::default()
    })
}

/// The critic's loss and what it is made of.
pub struct CriticLosses {
    pub loss: Tensor,
    /// Q1, Q2 of the batch's observations and actions: (b, 1) each.
    pub q: TwinQ,
    /// The n-step target: (b, 1), without a graph.
    pub target_q: Tensor,
}

/// The actor's loss, its policy and the action the loss was taken at.
pub struct ActorLosses {
    pub loss: Tensor,
    pub dist: TruncatedNormal,
    /// (b, A), differentiable in μ.
    pub action: Tensor,
}

/// The agent: networks, their stores and their optimisers.
pub struct DrQv2Agent {
    cfg: DrQv2Config,
    action_dim: usize,
    actor: Actor,
    critic: Critic,
    critic_target: Critic,
    actor_params: Params,
    critic_params: Params,
    critic_target_params: Params,
    actor_opt: Adam,
    critic_opt: Adam,
    /// TACO's critic takes latent actions ([`LatentActions`]); None: the actions themselves.
    latent_actions: Option<LatentActions>,
    /// candle's autograd, or written out on the device ([`DrQv2Gradients::for_device`]).
    gradients: DrQv2Gradients,
}

impl DrQv2Agent {
    /// Fresh networks (orthogonal init, zero biases, as DrQ-v2's `weight_init`) for
    /// `repr_dim` features and `action_dim` actions; the target critic starts as a copy.
    pub fn new<R: Rng + ?Sized>(
        cfg: &DrQv2Config,
        repr_dim: usize,
        action_dim: usize,
        device: &Device,
        rng: &mut R,
    ) -> Result<Self> {
        Self::with_latent_actions(cfg, repr_dim, action_dim, None, device, rng)
    }

    /// [`DrQv2Agent::new`], with `latent` = (L, K) a critic that takes actions encoded to L
    /// dimensions by an [`crate::rl::ActionEncoding`] for sequences of K (TACO's critic).
    pub fn with_latent_actions<R: Rng + ?Sized>(
        cfg: &DrQv2Config,
        repr_dim: usize,
        action_dim: usize,
        latent: Option<(usize, usize)>,
        device: &Device,
        rng: &mut R,
    ) -> Result<Self> {
        cfg.validate("agent")?;
        let dims = NetworkDims {
            repr_dim,
            feature_dim: cfg.feature_dim,
            hidden_dim: cfg.hidden_dim,
            action_dim,
        };
        let mut actor_params = Params::new(device);
        let actor = Actor::new(dims, "", &mut actor_params, rng)?;
        let latent_actions = match latent {
            Some((latent_dim, k)) => Some(LatentActions::new(
                action_dim,
                latent_dim,
                k,
                &cfg.optimizer,
                device,
                rng,
            )?),
            None => None,
        };
        // The critic's action input: the latent action, or the action.
        let critic_dims = NetworkDims {
            action_dim: latent_actions.as_ref().map_or(action_dim, |l| l.encoding.latent_dim()),
            ..dims
        };
        let mut critic_params = Params::new(device);
        let critic = Critic::new(critic_dims, TrunkOutput::LayerNormTanh, "", &mut critic_params, rng)?;
        let critic_target_params = Params::from_tensors(&critic_params.snapshot()?, device)?;
        let critic_target = Critic::from_params(critic_dims, TrunkOutput::LayerNormTanh, "", &critic_target_params)?;
        Ok(Self {
            gradients: DrQv2Gradients::for_device(device, latent_actions.is_some()),
            latent_actions,
            actor_opt: Adam::new(cfg.optimizer.clone(), &actor_params),
            critic_opt: Adam::new(cfg.optimizer.clone(), &critic_params),
            cfg: cfg.clone(),
            action_dim,
            actor,
            critic,
            critic_target,
            actor_params,
            critic_params,
            critic_target_params,
        })
    }

    /// The settings it was built with.
    pub fn config(&self) -> &DrQv2Config {
        &self.cfg
    }

    pub fn action_dim(&self) -> usize {
        self.action_dim
    }

    /// Every network's parameter store by checkpoint prefix (DrQ-v2's attribute names).
    pub fn param_stores(&self) -> [(&'static str, &Params); 3] {
        [
            ("actor", &self.actor_params),
            ("critic", &self.critic_params),
            ("critic_target", &self.critic_target_params),
        ]
    }

    /// The critic's action encoder, when it takes latent actions (TACO).
    pub fn latent_actions(&self) -> Option<&LatentActions> {
        self.latent_actions.as_ref()
    }

    /// The critic's input for actions (b, A): the actions, or their latent (b, L), through the
    /// encoder as trained (`detached`: as constants).
    fn critic_action(&self, action: &Tensor, detached: bool) -> Result<Tensor> {
        match &self.latent_actions {
            None => Ok(action.clone()),
            Some(l) => l.encode(action, detached),
        }
    }

    /// Actions for features h (b, repr) at agent step `step`: μ plus unclipped scheduled noise
    /// from `rng`, clamped into (−1, 1) (training), or μ (evaluation). Returns (b, A) row-major.
    pub fn act<R: Rng + ?Sized>(&self, h: &Tensor, step: u64, explore: bool, rng: &mut R) -> Result<Vec<f32>> {
        let dist = self.actor.forward(h, self.cfg.stddev_schedule.at(step))?;
        let action = match explore {
            true => dist.sample(&self.noise(h.dim(0)?, h.device(), rng)?, None)?,
            false => dist.mean().clone(),
        };
        Ok(action.detach().flatten_all()?.to_vec1::<f32>()?)
    }

    /// min(Q1, Q2) of the online critic for features h (b, repr) and actions (b, A), without a
    /// graph.
    pub fn min_q(&self, h: &Tensor, action: &Tensor) -> Result<Vec<f32>> {
        let action = self.critic_action(&action.detach(), true)?;
        let q = self.critic.detached().forward(&h.detach(), &action)?.min()?; // (b, 1)
        Ok(q.flatten_all()?.to_vec1::<f32>()?)
    }

    /// Standard normal noise (b, A) from `rng` (so a resumed run draws the same noise).
    fn noise<R: Rng + ?Sized>(&self, b: usize, device: &Device, rng: &mut R) -> Result<Tensor> {
        let eps: Vec<f32> = (0..b * self.action_dim).map(|_| standard_normal(rng) as f32).collect();
        Ok(Tensor::from_vec(eps, (b, self.action_dim), device)?)
    }

    /// One update at agent step `step` (the loop calls it every `update_every_steps`): the
    /// critic, the actor on detached features, the target's EMA. Also returns the critic
    /// loss's gradient with respect to `batch.obs` (b, repr) when `batch.obs` tracks one (an
    /// encoder the critic trains).
    pub fn update<R: Rng + ?Sized>(
        &mut self,
        batch: &Batch,
        step: u64,
        rng: &mut R,
    ) -> Result<(DrQv2Metrics, Option<Tensor>)> {
        let std = self.cfg.stddev_schedule.at(step);
        let (critic, obs_grad) = self.update_critic(batch, std, rng)?;
        let actor = self.update_actor(&batch.obs.detach(), std, rng)?;
        ema_update(
            &self.critic_params,
            &self.critic_target_params,
            self.cfg.critic_target_tau,
        )?;
        let mut metrics = read_metrics(&critic, &actor, batch)?;
        metrics.actor_ent = actor.entropy;
        metrics.actor_stddev = std;
        Ok((metrics, obs_grad))
    }

    /// The critic's loss on `batch` with the target's noise `next_eps` (b, A) at σ = `std`:
    /// the target's action a' = μ'(next_obs) + clip(σ·ε'), the n-step target
    /// `reward + discount·min(Q1', Q2')(next_obs, a')` without a graph, and
    /// `MSE(Q1, target) + MSE(Q2, target)`, differentiable in the critic (and in `batch.obs`).
    pub fn critic_losses(&self, batch: &Batch, std: f64, next_eps: &Tensor) -> Result<CriticLosses> {
        let next_obs = batch.next_obs.detach();
        let next_action = self
            .actor
            .forward(&next_obs, std)?
            .sample(next_eps, Some(self.cfg.stddev_clip))?
            .detach(); // (b, A)
        let next_action = self.critic_action(&next_action, true)?;
        let target = self.critic_target.forward(&next_obs, &next_action)?;
        let target_q = critic_target(&batch.reward, &batch.discount, &target.q1, &target.q2)?; // (b, 1)
        let q = self
            .critic
            .forward(&batch.obs, &self.critic_action(&batch.action, false)?)?;
        Ok(CriticLosses {
            loss: critic_loss(&q.q1, &q.q2, &target_q)?,
            q,
            target_q,
        })
    }

    /// The actor's loss on features `obs` (b, repr) with noise `eps` (b, A) at σ = `std`: its
    /// action μ(obs) + clip(σ·ε), clamped straight-through, and `−mean(min(Q1, Q2))` through
    /// the critic as constants (DrQ-v2 zeroes the critic's gradients before its next step).
    pub fn actor_losses(&self, obs: &Tensor, std: f64, eps: &Tensor) -> Result<ActorLosses> {
        let dist = self.actor.forward(obs, std)?;
        let action = dist.sample(eps, Some(self.cfg.stddev_clip))?; // (b, A)
        let q = self
            .critic
            .detached()
            .forward(obs, &self.critic_action(&action, true)?)?;
        Ok(ActorLosses {
            loss: actor_loss(&q.q1, &q.q2)?,
            dist,
            action,
        })
    }

    fn update_critic<R: Rng + ?Sized>(
        &mut self,
        batch: &Batch,
        std: f64,
        rng: &mut R,
    ) -> Result<(CriticReadings, Option<Tensor>)> {
        let next_eps = self.noise(batch.obs.dim(0)?, batch.obs.device(), rng)?;
        if let Some(on_device) = self.on_device() {
            let step =
                on_device.critic_step(&self.stores_of_networks(), batch, std, self.cfg.stddev_clip, &next_eps)?;
            let fit = step.fit;
            let readings = CriticReadings::of(&fit.loss, &fit.q1, &fit.q2, &step.target_q)?;
            self.critic_opt.step_named(&self.critic_params, &fit.grads)?;
            return Ok((readings, fit.obs_grad));
        }
        let CriticLosses { loss, q, target_q } = self.critic_losses(batch, std, &next_eps)?;
        let readings = CriticReadings::of(&loss, &q.q1, &q.q2, &target_q)?;
        let grads = loss.backward()?;
        self.critic_opt.step(&self.critic_params, &grads)?;
        if let Some(l) = &mut self.latent_actions {
            l.step_on_critic_loss(&grads)?;
        }
        let obs_grad = match batch.obs.track_op() {
            true => grads.get(&batch.obs).cloned(),
            false => None,
        };
        Ok((readings, obs_grad))
    }

    /// The written-out path, when the agent takes it.
    fn on_device(&self) -> Option<on_device::OnDevice> {
        (self.gradients == DrQv2Gradients::OnDevice).then_some(on_device::OnDevice)
    }

    fn stores_of_networks(&self) -> on_device::Stores<'_> {
        on_device::Stores {
            actor: &self.actor_params,
            critic: &self.critic_params,
            critic_target: &self.critic_target_params,
        }
    }

    fn update_actor<R: Rng + ?Sized>(&mut self, obs: &Tensor, std: f64, rng: &mut R) -> Result<ActorReadings> {
        let eps = self.noise(obs.dim(0)?, obs.device(), rng)?;
        if let Some(on_device) = self.on_device() {
            let step = on_device.actor_step(&self.stores_of_networks(), obs, std, self.cfg.stddev_clip, &eps)?;
            let readings = self.actor_readings(&step.loss, &step.dist, &step.action)?;
            self.actor_opt.step_named(&self.actor_params, &step.grads)?;
            return Ok(readings);
        }
        let ActorLosses { loss, dist, action } = self.actor_losses(obs, std, &eps)?;
        let readings = self.actor_readings(&loss, &dist, &action)?;
        let grads = loss.backward()?;
        self.actor_opt.step(&self.actor_params, &grads)?;
        Ok(readings)
    }

    /// The actor's loss, the mean log-density of its action and the policy's entropy.
    fn actor_readings(&self, loss: &Tensor, dist: &TruncatedNormal, action: &Tensor) -> Result<ActorReadings> {
        Ok(ActorReadings {
            loss: loss.clone(),
            logprob: dist.log_prob(&action.detach())?.mean_all()?,
            entropy: dist.entropy(self.action_dim),
        })
    }

    /// Replaces the networks' parameters with `tensors` (`actor.…`, `critic.…`,
    /// `critic_target.…`), keeping the optimisers (reference tests start from given weights).
    pub fn load_networks(&self, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
        agent_state::load_params(&self.stores(), tensors)
    }

    /// Every store a checkpoint holds: the networks' and the action encoder's.
    fn stores(&self) -> Vec<(&'static str, &Params)> {
        let mut stores = self.param_stores().to_vec();
        stores.extend(self.latent_actions.as_ref().map(|l| (ACT_TOK, &l.params)));
        stores
    }

    // ---- checkpoints

    fn optimised(&self) -> Vec<Optimised<'_>> {
        let mut optimised = vec![
            Optimised::new("actor_opt", &self.actor_opt, &self.actor_params),
            Optimised::new("critic_opt", &self.critic_opt, &self.critic_params),
        ];
        if let Some(l) = &self.latent_actions {
            optimised.push(l.optimised());
        }
        optimised
    }

    /// Every parameter and optimiser moment under its checkpoint prefix (`actor.…`, `critic.…`,
    /// `critic_target.…`, `actor_opt.adam.…`, `critic_opt.adam.…`), and the optimisers' step
    /// counts for the metadata.
    pub fn state(&self) -> Result<(BTreeMap<String, Tensor>, HashMap<String, String>)> {
        agent_state::save(&self.stores(), &self.optimised())
    }

    /// Restores [`DrQv2Agent::state`]; errors name a missing or mis-shaped tensor.
    pub fn load_state(&mut self, tensors: &BTreeMap<String, Tensor>, meta: &HashMap<String, String>) -> Result<()> {
        agent_state::load_params(&self.stores(), tensors)?;
        let (a, c) = (&self.actor_params, &self.critic_params);
        agent_state::load_optimiser("actor_opt", &mut self.actor_opt, a, tensors, meta)?;
        agent_state::load_optimiser("critic_opt", &mut self.critic_opt, c, tensors, meta)?;
        if let Some(l) = &mut self.latent_actions {
            l.load_optimiser(tensors, meta)?;
        }
        Ok(())
    }
}
