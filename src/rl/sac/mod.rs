//! The SAC agent (docs/design.md §6; Proto-RL's `update_critic` and `update_actor_and_alpha`):
//! twin-Q critic with an EMA target, tanh-squashed Gaussian actor, learned temperature α.
//! Each network has its own [`Params`] store and its own Adam (explicit settings, no weight
//! decay). Updates return metrics; nothing here prints, samples environments or encodes pixels.

pub mod actor;
mod agent;
mod backward;
pub mod gradients;
mod host_matrix;
mod on_device;
pub mod squashed_gaussian;

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::device::{read_scalar_list, read_scalars};
use crate::nn::ema::ema_update;
use crate::nn::init::standard_normal;
use crate::nn::{Adam, AdamConfig, Params};
use crate::rl::agent_state::{self, check_finite, Optimised};
use crate::rl::batch::Batch;
use crate::rl::critic::{Critic, NetworkDims};
use crate::rl::mlp::TrunkOutput;
use crate::{Error, Result};
use actor::Actor;
pub use agent::SacSums;
use gradients::{ActorGradients, CriticGradients, Gradients, Networks};

/// The agent's hyper-parameters (Proto-RL's and the paper's table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SacConfig {
    /// Output of the actor's and critic's trunks, Linear(repr → feature) → LayerNorm (50).
    pub feature_dim: usize,
    /// Hidden units of the policy and Q MLPs (1024).
    pub hidden_dim: usize,
    /// The actor's log σ is squashed into [log_std_min, log_std_max] (−10, 2).
    pub log_std_min: f64,
    pub log_std_max: f64,
    /// γ (0.99): one-step targets, each batch's `discount` (docs/design.md §6). Targets
    /// bootstrap through the last step: DMC episodes end only at their time limit (no done
    /// mask, as Proto-RL and DrQ-v2).
    pub discount: f64,
    /// Initial α (0.1); log α is learned with target entropy −|A|.
    pub init_temperature: f64,
    /// EMA coefficient of the target critic (0.01).
    pub critic_target_tau: f64,
    /// The target critic follows every this many agent steps (2).
    pub critic_target_update_every_steps: u64,
    /// The actor and α are updated every this many agent steps (2); the critic every step.
    pub actor_update_every_steps: u64,
    /// Transitions per update (512).
    pub batch_size: usize,
    /// One Adam setting for the actor, the critic and log α (lr 1e-4, no weight decay).
    pub optimizer: AdamConfig,
}

impl Default for SacConfig {
    fn default() -> Self {
        Self {
            feature_dim: 50,
            hidden_dim: 1024,
            log_std_min: -10.0,
            log_std_max: 2.0,
            discount: 0.99,
            init_temperature: 0.1,
            critic_target_tau: 0.01,
            critic_target_update_every_steps: 2,
            actor_update_every_steps: 2,
            batch_size: 512,
            optimizer: AdamConfig::default(),
        }
    }
}

impl SacConfig {
    /// Checks ranges; errors name the field under `section`.
    pub fn validate(&self, section: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("{section}.{m}")));
        if self.feature_dim == 0 || self.hidden_dim == 0 {
            return bad("feature_dim and hidden_dim must be >= 1".into());
        }
        if self.log_std_min >= self.log_std_max {
            return bad(format!(
                "log_std_min {} must be < log_std_max {}",
                self.log_std_min, self.log_std_max
            ));
        }
        if !(0.0..=1.0).contains(&self.discount) {
            return bad(format!("discount = {} must be in [0, 1]", self.discount));
        }
        if self.init_temperature <= 0.0 {
            return bad(format!("init_temperature = {} must be > 0", self.init_temperature));
        }
        if !(self.critic_target_tau > 0.0 && self.critic_target_tau <= 1.0) {
            return bad(format!(
                "critic_target_tau = {} must be in (0, 1]",
                self.critic_target_tau
            ));
        }
        if self.critic_target_update_every_steps == 0 || self.actor_update_every_steps == 0 {
            return bad("critic_target_update_every_steps and actor_update_every_steps must be >= 1".into());
        }
        if self.batch_size == 0 {
            return bad("batch_size must be >= 1".into());
        }
        self.optimizer.validate(&format!("{section}.optimizer"))
    }
}

/// The actor's step and α's loss, left to [`SacAgent::read_metrics`].
struct ActorReadings {
    actor: ActorGradients,
    alpha_loss: Tensor,
}

/// What one update reports (keys `train/<name>` in `train.jsonl`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SacMetrics {
    #[serde(rename = "train/critic_loss")]
    pub critic_loss: f64,
    /// Mean Q1 on the batch.
    #[serde(rename = "train/critic_q1")]
    pub critic_q1: f64,
    /// Mean bootstrapped target.
    #[serde(rename = "train/critic_target_q")]
    pub critic_target_q: f64,
    /// The actor and α losses and the policy entropy estimate −E[log π] (steps that update
    /// the actor only).
    #[serde(rename = "train/actor_loss")]
    pub actor_loss: Option<f64>,
    #[serde(rename = "train/actor_entropy")]
    pub actor_entropy: Option<f64>,
    #[serde(rename = "train/alpha_loss")]
    pub alpha_loss: Option<f64>,
    /// α after this update.
    #[serde(rename = "train/alpha")]
    pub alpha: f64,
}

/// The bootstrapped critic target `r + γ·(min(Q1', Q2') − α·log π(a'|s'))` (b, 1), detached;
/// `discount` (b, 1) is the batch's γ.
pub fn critic_target(
    reward: &Tensor,
    target_q1: &Tensor,
    target_q2: &Tensor,
    next_log_prob: &Tensor,
    alpha: f64,
    discount: &Tensor,
) -> Result<Tensor> {
    let target_v = (target_q1.minimum(target_q2)? - (next_log_prob * alpha)?)?; // (b, 1)
    Ok((reward + target_v.mul(discount)?)?.detach())
}

/// `mean(α·log π − min(Q1, Q2))` with α a constant.
pub fn actor_loss(alpha: f64, log_prob: &Tensor, q1: &Tensor, q2: &Tensor) -> Result<Tensor> {
    Ok(((log_prob * alpha)? - q1.minimum(q2)?)?.mean_all()?)
}

/// `mean(α·(−log π − target_entropy))` with α = exp(log α) and the bracket a constant.
pub fn alpha_loss(log_alpha: &Tensor, log_prob: &Tensor, target_entropy: f64) -> Result<Tensor> {
    let bracket = ((log_prob.neg()? - target_entropy)?).detach(); // (b, 1)
    Ok(bracket.broadcast_mul(&log_alpha.exp()?)?.mean_all()?)
}

/// How an agent's updates are differentiated; fixed for its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradientPath {
    /// candle's autograd ([`gradients::Autograd`]).
    Autograd,
    /// Written out over host buffers (`backward::WrittenOut`).
    WrittenOut,
    /// Written out as tensor ops on the agent's device (`on_device::OnDevice`).
    OnDevice,
}

impl GradientPath {
    /// The fastest path for features on `device`: written out over host buffers for constants
    /// on the CPU; candle's autograd for features that carry their encoder's tape on the CPU
    /// (`encoder_tape`: the critic's gradient trains it); written out as tensor ops off the
    /// CPU, either way (on an H200 at B=128 / 512: 2.6 / 3.6 ms against autograd's 6.97 / 7.52,
    /// BENCHMARKS.md, 2026-11-28). The unit tests below run every path on the CPU.
    pub fn for_features(device: &Device, encoder_tape: bool) -> Self {
        Self::choose(device.is_cpu(), encoder_tape)
    }

    /// [`GradientPath::for_features`]' rule.
    fn choose(cpu: bool, encoder_tape: bool) -> Self {
        match (cpu, encoder_tape) {
            (true, false) => Self::WrittenOut,
            (true, true) => Self::Autograd,
            (false, _) => Self::OnDevice,
        }
    }

    /// The implementation behind this path.
    fn gradients(self) -> &'static dyn Gradients {
        match self {
            Self::Autograd => &gradients::Autograd,
            Self::WrittenOut => &backward::WrittenOut,
            Self::OnDevice => &on_device::OnDevice,
        }
    }
}

/// The name of log α in its store and in checkpoints (Proto-RL's attribute).
const LOG_ALPHA: &str = "log_alpha";

/// log α's tensor in its store.
fn log_alpha(alpha_params: &Params) -> Result<&Tensor> {
    alpha_params
        .get(LOG_ALPHA)
        .map(|v| v.as_tensor())
        .ok_or_else(|| Error::Shape("sac: no log_alpha".into()))
}

/// α = exp(log α), read from the store.
fn read_alpha(alpha_params: &Params) -> Result<f64> {
    let [alpha] = read_scalars([&log_alpha(alpha_params)?.exp()?])?;
    Ok(alpha)
}

/// The agent: networks, their stores and their optimisers.
pub struct SacAgent {
    cfg: SacConfig,
    dims: NetworkDims,
    actor: Actor,
    critic: Critic,
    critic_target: Critic,
    actor_params: Params,
    critic_params: Params,
    critic_target_params: Params,
    alpha_params: Params,
    actor_opt: Adam,
    critic_opt: Adam,
    alpha_opt: Adam,
    /// How its updates are differentiated, chosen at construction.
    gradient_path: GradientPath,
    /// α = exp(log α) as last read from its tensor (at construction, after each α step and on
    /// loading a state): the update's graphs take it as a number, and reading it anew would stop
    /// a GPU once more per update.
    alpha: f64,
}

impl SacAgent {
    /// Fresh networks (orthogonal init, zero biases) for `repr_dim` features and `action_dim`
    /// actions, differentiated along `gradient_path`; the target critic starts as a copy of the
    /// critic; log α = ln(init_temperature).
    pub fn new<R: Rng + ?Sized>(
        cfg: &SacConfig,
        repr_dim: usize,
        action_dim: usize,
        gradient_path: GradientPath,
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
        let actor = Actor::new(dims, (cfg.log_std_min, cfg.log_std_max), "", &mut actor_params, rng)?;
        let mut critic_params = Params::new(device);
        let critic = Critic::new(dims, TrunkOutput::LayerNorm, "", &mut critic_params, rng)?;
        // The target starts as an exact copy of the critic.
        let critic_target_params = Params::from_tensors(&critic_params.snapshot()?, device)?;
        let critic_target = Critic::from_params(dims, TrunkOutput::LayerNorm, "", &critic_target_params)?;
        let mut alpha_params = Params::new(device);
        alpha_params.insert(LOG_ALPHA, Tensor::new(&[cfg.init_temperature.ln() as f32], device)?)?;
        let alpha = read_alpha(&alpha_params)?;
        Ok(Self {
            actor_opt: Adam::new(cfg.optimizer.clone(), &actor_params),
            critic_opt: Adam::new(cfg.optimizer.clone(), &critic_params),
            alpha_opt: Adam::new(cfg.optimizer.clone(), &alpha_params),
            cfg: cfg.clone(),
            dims,
            actor,
            critic,
            critic_target,
            actor_params,
            critic_params,
            critic_target_params,
            alpha_params,
            gradient_path,
            alpha,
        })
    }

    pub fn action_dim(&self) -> usize {
        self.dims.action_dim
    }

    /// The settings it was built with.
    pub fn config(&self) -> &SacConfig {
        &self.cfg
    }

    /// −|A|.
    pub fn target_entropy(&self) -> f64 {
        -(self.dims.action_dim as f64)
    }

    /// Current α.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    fn log_alpha(&self) -> Result<&Tensor> {
        log_alpha(&self.alpha_params)
    }

    /// Every trainable store by checkpoint prefix: what the optimisers can reach.
    pub fn param_stores(&self) -> [(&'static str, &Params); 4] {
        [
            ("actor", &self.actor_params),
            ("critic", &self.critic_params),
            ("critic_target", &self.critic_target_params),
            ("alpha", &self.alpha_params),
        ]
    }

    /// Actions for encoded observations h (b, repr): sampled from the policy with `rng`
    /// (training), or tanh(μ) (evaluation). Returns (b, A) row-major.
    pub fn act<R: Rng + ?Sized>(&self, h: &Tensor, sample: bool, rng: &mut R) -> Result<Vec<f32>> {
        let dist = self.actor.forward(h)?;
        let action = if sample {
            let b = h.dim(0)?;
            let eps = Tensor::from_vec(self.noise(b, rng), (b, self.dims.action_dim), h.device())?; // (b, A)
            dist.rsample(&eps)?.action
        } else {
            dist.mean_action()?
        };
        Ok(action.detach().flatten_all()?.to_vec1::<f32>()?)
    }

    /// min(Q1, Q2) of the online critic for features h (b, repr) and actions (b, A): (b) values,
    /// computed without a graph.
    pub fn min_q(&self, h: &Tensor, action: &Tensor) -> Result<Vec<f32>> {
        let q = self.critic.detached().forward(&h.detach(), &action.detach())?.min()?; // (b, 1)
        Ok(q.flatten_all()?.to_vec1::<f32>()?)
    }

    /// Standard normal noise (b, A) from `rng` (so a resumed run draws the same noise),
    /// row-major.
    fn noise<R: Rng + ?Sized>(&self, b: usize, rng: &mut R) -> Vec<f32> {
        (0..b * self.dims.action_dim)
            .map(|_| standard_normal(rng) as f32)
            .collect()
    }

    /// What [`Gradients`] differentiates.
    fn nets(&self) -> Networks<'_> {
        Networks {
            dims: self.dims,
            log_std_bounds: (self.cfg.log_std_min, self.cfg.log_std_max),
            actor: &self.actor,
            critic: &self.critic,
            critic_target: &self.critic_target,
            actor_params: &self.actor_params,
            critic_params: &self.critic_params,
            critic_target_params: &self.critic_target_params,
        }
    }

    /// One update at agent step `step`: the critic every step; the actor and α every
    /// `actor_update_every_steps`; the target critic's EMA every
    /// `critic_target_update_every_steps`.
    pub fn update<R: Rng + ?Sized>(&mut self, batch: &Batch, step: u64, rng: &mut R) -> Result<SacMetrics> {
        Ok(self.update_with_obs_grad(batch, step, rng)?.0)
    }

    /// [`SacAgent::update`], also returning the critic loss's gradient with respect to
    /// `batch.obs` (b, repr) when `batch.obs` carries its encoder's tape (SAC from pixels; the
    /// agent is then built with [`GradientPath::Autograd`]). The actor always sees `batch.obs`
    /// detached.
    pub fn update_with_obs_grad<R: Rng + ?Sized>(
        &mut self,
        batch: &Batch,
        step: u64,
        rng: &mut R,
    ) -> Result<(SacMetrics, Option<Tensor>)> {
        let gradients = self.gradient_path.gradients();
        let alpha = self.alpha;
        let b = batch.obs.dim(0)?;

        // The critic, on y = r + γ·(min Q'(s', a') − α·log π(a'|s')), a' ~ π(·|s').
        let next_eps = self.noise(b, rng); // (b, A)
        let critic = gradients.critic(&self.nets(), batch, &next_eps, alpha)?;
        self.critic_opt.step_named(&self.critic_params, &critic.grads)?;

        // The actor, on α·log π(a|s) − min Q(s, a), a ~ π(·|s), and α on its log π.
        let actor = match step.is_multiple_of(self.cfg.actor_update_every_steps) {
            true => {
                let eps = self.noise(b, rng); // (b, A)
                let actor = gradients.actor(&self.nets(), &batch.obs.detach(), &eps, alpha)?;
                self.actor_opt.step_named(&self.actor_params, &actor.grads)?;
                let alpha_loss = self.alpha_step(&actor.log_prob)?;
                Some(ActorReadings { actor, alpha_loss })
            }
            false => None,
        };

        // The target critic follows the critic.
        if step.is_multiple_of(self.cfg.critic_target_update_every_steps) {
            ema_update(
                &self.critic_params,
                &self.critic_target_params,
                self.cfg.critic_target_tau,
            )?;
        }
        let metrics = self.read_metrics(&critic, actor.as_ref())?;
        Ok((metrics, critic.obs_grad))
    }

    /// α's step on the actor step's log π (b, 1): its loss, a scalar on the device.
    fn alpha_step(&mut self, log_prob: &Tensor) -> Result<Tensor> {
        let loss = alpha_loss(self.log_alpha()?, log_prob, self.target_entropy())?;
        let grads = loss.backward()?;
        self.alpha_opt.step(&self.alpha_params, &grads)?;
        Ok(loss.detach())
    }

    /// The update's numbers in one read after all its steps are launched (a GPU stops once per
    /// update, where it stopped after the critic's, the actor's and α's steps), the new α among
    /// them; an error if a loss is not finite.
    fn read_metrics(&mut self, critic: &CriticGradients, actor: Option<&ActorReadings>) -> Result<SacMetrics> {
        let mut scalars = vec![&critic.loss, &critic.q1, &critic.target_q];
        let alpha;
        if let Some(ActorReadings { actor, alpha_loss }) = actor {
            alpha = self.log_alpha()?.exp()?; // after α's step
            scalars.extend([&actor.loss, &actor.mean_log_prob, alpha_loss, &alpha]);
        }
        let read = read_scalar_list(&scalars)?;
        check_finite("critic loss", read[0])?;
        let mut metrics = SacMetrics {
            critic_loss: read[0],
            critic_q1: read[1],
            critic_target_q: read[2],
            ..SacMetrics::default()
        };
        if let [actor_loss, mean_log_prob, alpha_loss, alpha] = read[3..] {
            check_finite("actor loss", actor_loss)?;
            metrics.actor_loss = Some(actor_loss);
            metrics.actor_entropy = Some(-mean_log_prob);
            metrics.alpha_loss = Some(alpha_loss);
            self.alpha = alpha;
        }
        metrics.alpha = self.alpha;
        Ok(metrics)
    }

    // ---- checkpoints

    /// Every parameter and optimiser moment under its checkpoint prefix (`actor.…`,
    /// `critic.…`, `critic_target.…`, `alpha.log_alpha`, `actor_opt.adam.…`, …), and the
    /// optimisers' step counts for the metadata.
    pub fn state(&self) -> Result<(BTreeMap<String, Tensor>, HashMap<String, String>)> {
        agent_state::save(&self.param_stores(), &self.optimised())
    }

    /// Restores [`SacAgent::state`]; errors name a missing or mis-shaped tensor.
    pub fn load_state(&mut self, tensors: &BTreeMap<String, Tensor>, meta: &HashMap<String, String>) -> Result<()> {
        agent_state::load_params(&self.param_stores(), tensors)?;
        let (a, c, l) = (&self.actor_params, &self.critic_params, &self.alpha_params);
        agent_state::load_optimiser("actor_opt", &mut self.actor_opt, a, tensors, meta)?;
        agent_state::load_optimiser("critic_opt", &mut self.critic_opt, c, tensors, meta)?;
        agent_state::load_optimiser("alpha_opt", &mut self.alpha_opt, l, tensors, meta)?;
        self.alpha = read_alpha(&self.alpha_params)?;
        Ok(())
    }

    fn optimised(&self) -> [Optimised<'_>; 3] {
        [
            Optimised::new("actor_opt", &self.actor_opt, &self.actor_params),
            Optimised::new("critic_opt", &self.critic_opt, &self.critic_params),
            Optimised::new("alpha_opt", &self.alpha_opt, &self.alpha_params),
        ]
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::rl::written_out::test_support::{assert_step_matches, batch, close, value, worst_relative};

    /// [`assert_step_matches`] for a critic step.
    fn assert_critic_matches(
        ours: &gradients::CriticGradients,
        reference: &gradients::CriticGradients,
        params: &Params,
        what: &str,
    ) {
        let what = format!("{what}, critic");
        assert_step_matches(
            (value(&ours.loss), value(&reference.loss)),
            (&ours.grads, &reference.grads),
            params,
            &what,
        );
    }

    /// [`assert_step_matches`] for an actor step, log π of each sample too.
    fn assert_actor_matches(
        ours: &gradients::ActorGradients,
        reference: &gradients::ActorGradients,
        params: &Params,
        what: &str,
    ) {
        let what = format!("{what}, actor");
        assert_step_matches(
            (value(&ours.loss), value(&reference.loss)),
            (&ours.grads, &reference.grads),
            params,
            &what,
        );
        let values = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (x, y) in values(&ours.log_prob).iter().zip(&values(&reference.log_prob)) {
            assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{what}: log π {x} vs {y}");
        }
    }

    /// The written-out update (backward.rs) against candle's autograd on the same networks,
    /// batch and noise: every parameter's gradient, and the losses. (Adam is blind to a
    /// gradient's scale, so comparing parameters after a step would not catch a wrong factor.)
    #[test]
    fn written_out_gradients_match_candles_autograd() {
        let (autograd, written_out) = (GradientPath::Autograd.gradients(), GradientPath::WrittenOut.gradients());
        for repr in [40, 5000] {
            // 5000 features: the trunks' products split by rows, as at the real 39200.
            let cfg = SacConfig {
                feature_dim: 8,
                hidden_dim: 32,
                batch_size: 16,
                ..SacConfig::default()
            };
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
            let path = GradientPath::for_features(&Device::Cpu, false);
            assert_eq!(path, GradientPath::WrittenOut);
            let mut agent = SacAgent::new(&cfg, repr, 3, path, &Device::Cpu, &mut rng).unwrap();
            // A few updates first, so no LayerNorm γ is 1, no bias 0 and the target has moved.
            let warm = batch(repr, 16, 3, &mut rng);
            for step in 1..=4 {
                agent.update(&warm, step, &mut rng).unwrap();
            }
            let batch = batch(repr, 16, 3, &mut rng);
            let eps = agent.noise(16, &mut rng); // (b, A)
            let alpha = agent.alpha();
            let nets = agent.nets();
            let what = format!("repr {repr}");
            let (ours, reference) = (
                written_out.critic(&nets, &batch, &eps, alpha).unwrap(),
                autograd.critic(&nets, &batch, &eps, alpha).unwrap(),
            );
            assert_critic_matches(&ours, &reference, &agent.critic_params, &what);
            let (ours, reference) = (
                written_out.actor(&nets, &batch.obs, &eps, alpha).unwrap(),
                autograd.actor(&nets, &batch.obs, &eps, alpha).unwrap(),
            );
            assert_actor_matches(&ours, &reference, &agent.actor_params, &what);
        }
    }

    /// The on-device path (on_device.rs, run here on the CPU), with its row ops (row_ops.rs),
    /// against candle's autograd: every gradient, the losses, log π, and the critic loss's
    /// gradient reaching features that carry a tape.
    #[test]
    fn on_device_gradients_match_candles_autograd() {
        let on_device = on_device::OnDevice;
        let autograd = GradientPath::Autograd.gradients();
        let cfg = SacConfig {
            feature_dim: 8,
            hidden_dim: 32,
            batch_size: 16,
            ..SacConfig::default()
        };
        let (repr, b) = (40, 16);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(12);
        let mut agent = SacAgent::new(&cfg, repr, 3, GradientPath::Autograd, &Device::Cpu, &mut rng).unwrap();
        // A few updates first, so no LayerNorm γ is 1, no bias 0 and the target has moved.
        let warm = batch(repr, b, 3, &mut rng);
        for step in 1..=4 {
            agent.update(&warm, step, &mut rng).unwrap();
        }
        let mut batch = batch(repr, b, 3, &mut rng);
        // Features with a tape, as `lfs train` hands an encoder's output to the agent (a variable
        // cut from the encoder's graph): both paths must give back d loss / d obs.
        batch.obs = candle_core::Var::from_tensor(&batch.obs).unwrap().as_tensor().clone();
        let eps = agent.noise(b, &mut rng); // (b, A)
        let alpha = agent.alpha();
        let nets = agent.nets();
        let what = "on device";
        let (ours, reference) = (
            on_device.critic(&nets, &batch, &eps, alpha).unwrap(),
            autograd.critic(&nets, &batch, &eps, alpha).unwrap(),
        );
        assert_critic_matches(&ours, &reference, &agent.critic_params, what);
        assert!(close(value(&ours.q1), value(&reference.q1)));
        assert!(close(value(&ours.target_q), value(&reference.target_q)));
        let (obs_grad, reference_obs_grad) = (ours.obs_grad.unwrap(), reference.obs_grad.unwrap());
        assert_eq!(obs_grad.dims(), &[b, repr]);
        let worst = worst_relative(&obs_grad, &reference_obs_grad);
        assert!(worst < 1e-4, "{what}: d loss / d obs: {worst}");
        // Constant features get none.
        let constant = Batch {
            obs: batch.obs.detach(),
            ..batch.clone()
        };
        assert!(on_device
            .critic(&nets, &constant, &eps, alpha)
            .unwrap()
            .obs_grad
            .is_none());

        let (ours, reference) = (
            on_device.actor(&nets, &batch.obs.detach(), &eps, alpha).unwrap(),
            autograd.actor(&nets, &batch.obs.detach(), &eps, alpha).unwrap(),
        );
        assert_actor_matches(&ours, &reference, &agent.actor_params, what);
        assert!(close(value(&ours.mean_log_prob), value(&reference.mean_log_prob)));
    }

    /// The path each device and feature kind gets.
    #[test]
    fn each_device_and_feature_kind_gets_its_path() {
        use GradientPath::*;
        for (cpu, tape) in [(true, false), (true, true), (false, false), (false, true)] {
            let default = match (cpu, tape) {
                (true, false) => WrittenOut,
                (true, true) => Autograd,
                (false, _) => OnDevice,
            };
            assert_eq!(GradientPath::choose(cpu, tape), default);
        }
    }

    /// The written-out path refuses features with a tape instead of dropping their gradient.
    #[test]
    fn the_written_out_path_refuses_features_with_a_tape() {
        let cfg = SacConfig {
            feature_dim: 8,
            hidden_dim: 16,
            batch_size: 4,
            ..SacConfig::default()
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut agent = SacAgent::new(&cfg, 6, 2, GradientPath::WrittenOut, &Device::Cpu, &mut rng).unwrap();
        let mut b = batch(6, 4, 2, &mut rng);
        b.obs = candle_core::Var::from_tensor(&b.obs).unwrap().as_tensor().clone();
        let err = agent.update(&b, 1, &mut rng).unwrap_err().to_string();
        assert!(err.contains("GradientPath::Autograd"), "{err}");
        assert_eq!(GradientPath::for_features(&Device::Cpu, true), GradientPath::Autograd);
    }
}
