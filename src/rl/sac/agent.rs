//! SAC ([`SacAgent`], docs/design.md §6) behind the loop's agent seam: one-step returns, an
//! update every agent step (the actor's and the target's own cadences inside it).

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor};
use rand_chacha::ChaCha8Rng;

use super::{GradientPath, SacAgent, SacConfig, SacMetrics};
use crate::nn::AdamConfig;
use crate::rl::{Agent, AgentSettings, AgentState, AgentUpdate, Batch, EpisodeSums, Features, NStep};
use crate::Result;

impl Agent for SacAgent {
    const KIND: &'static str = "sac";
    const TITLE: &'static str = "SAC";
    type Config = SacConfig;
    type Metrics = SacMetrics;
    type Sums = SacSums;

    fn new(
        cfg: &SacConfig,
        features: Features,
        action_dim: usize,
        device: &Device,
        rng: &mut ChaCha8Rng,
    ) -> Result<Self> {
        // Written out on constant features on the CPU; candle's autograd otherwise.
        let path = GradientPath::for_features(device, features.encoder_tape);
        SacAgent::new(cfg, features.repr_dim, action_dim, path, device, rng)
    }

    fn batch_size(&self) -> usize {
        self.config().batch_size
    }

    fn updates_at(&self, _step: u64) -> bool {
        true
    }

    fn act(&self, h: &Tensor, _step: u64, explore: bool, rng: &mut ChaCha8Rng) -> Result<Vec<f32>> {
        SacAgent::act(self, h, explore, rng)
    }

    fn update(&mut self, batch: &Batch, step: u64, rng: &mut ChaCha8Rng) -> Result<AgentUpdate<SacMetrics>> {
        let (metrics, obs_grad) = self.update_with_obs_grad(batch, step, rng)?;
        Ok(AgentUpdate { metrics, obs_grad })
    }

    fn min_q(&self, h: &Tensor, action: &Tensor) -> Result<Vec<f32>> {
        SacAgent::min_q(self, h, action)
    }

    fn state(&self) -> Result<AgentState> {
        let (tensors, meta) = SacAgent::state(self)?;
        Ok(AgentState { tensors, meta })
    }

    fn load_state(&mut self, tensors: &BTreeMap<String, Tensor>, meta: &HashMap<String, String>) -> Result<()> {
        SacAgent::load_state(self, tensors, meta)
    }
}

/// SAC's update metrics over an episode: means of the losses and Q values (the actor's over
/// the updates that trained it), and the latest α.
#[derive(Debug, Default)]
pub struct SacSums {
    count: u64,
    actor_count: u64,
    sum: SacMetrics,
}

impl EpisodeSums<SacMetrics> for SacSums {
    fn add(&mut self, m: &SacMetrics) {
        self.count += 1;
        self.sum.critic_loss += m.critic_loss;
        self.sum.critic_q1 += m.critic_q1;
        self.sum.critic_target_q += m.critic_target_q;
        self.sum.alpha = m.alpha; // the latest, not a mean
        if let (Some(a), Some(e), Some(l)) = (m.actor_loss, m.actor_entropy, m.alpha_loss) {
            self.actor_count += 1;
            let add = |s: &mut Option<f64>, v: f64| *s = Some(s.unwrap_or(0.0) + v);
            add(&mut self.sum.actor_loss, a);
            add(&mut self.sum.actor_entropy, e);
            add(&mut self.sum.alpha_loss, l);
        }
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn mean(&self) -> SacMetrics {
        let n = self.count.max(1) as f64;
        let na = self.actor_count.max(1) as f64;
        SacMetrics {
            critic_loss: self.sum.critic_loss / n,
            critic_q1: self.sum.critic_q1 / n,
            critic_target_q: self.sum.critic_target_q / n,
            actor_loss: self.sum.actor_loss.map(|v| v / na),
            actor_entropy: self.sum.actor_entropy.map(|v| v / na),
            alpha_loss: self.sum.alpha_loss.map(|v| v / na),
            alpha: self.sum.alpha,
        }
    }
}

impl AgentSettings for SacConfig {
    fn batch_size(&self) -> usize {
        self.batch_size
    }

    fn optimizer(&self) -> &AdamConfig {
        &self.optimizer
    }

    /// One-step returns.
    fn returns(&self) -> NStep {
        NStep {
            n: 1,
            discount: self.discount,
        }
    }

    fn validate(&self, section: &str) -> Result<()> {
        SacConfig::validate(self, section)
    }
}
