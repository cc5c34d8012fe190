//! DrQ-v2 ([`DrQv2Agent`], docs/design.md §13) behind the loop's agent seam: n-step returns,
//! an update every `update_every_steps` agent steps, exploration σ by the agent step.

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor};
use rand_chacha::ChaCha8Rng;

use super::{DrQv2Agent, DrQv2Config, DrQv2Metrics};
use crate::nn::AdamConfig;
use crate::rl::{Agent, AgentSettings, AgentState, AgentUpdate, Batch, EpisodeSums, Features, NStep};
use crate::Result;

impl Agent for DrQv2Agent {
    const KIND: &'static str = "drqv2";
    const TITLE: &'static str = "DrQ-v2";
    type Config = DrQv2Config;
    type Metrics = DrQv2Metrics;
    type Sums = DrQv2Sums;

    fn new(
        cfg: &DrQv2Config,
        features: Features,
        action_dim: usize,
        device: &Device,
        rng: &mut ChaCha8Rng,
    ) -> Result<Self> {
        DrQv2Agent::new(cfg, features.repr_dim, action_dim, device, rng)
    }

    fn batch_size(&self) -> usize {
        self.config().batch_size
    }

    fn updates_at(&self, step: u64) -> bool {
        step.is_multiple_of(self.config().update_every_steps)
    }

    fn act(&self, h: &Tensor, step: u64, explore: bool, rng: &mut ChaCha8Rng) -> Result<Vec<f32>> {
        DrQv2Agent::act(self, h, step, explore, rng)
    }

    fn update(&mut self, batch: &Batch, step: u64, rng: &mut ChaCha8Rng) -> Result<AgentUpdate<DrQv2Metrics>> {
        let (metrics, obs_grad) = DrQv2Agent::update(self, batch, step, rng)?;
        Ok(AgentUpdate { metrics, obs_grad })
    }

    fn min_q(&self, h: &Tensor, action: &Tensor) -> Result<Vec<f32>> {
        DrQv2Agent::min_q(self, h, action)
    }

    fn state(&self) -> Result<AgentState> {
        let (tensors, meta) = DrQv2Agent::state(self)?;
        Ok(AgentState { tensors, meta })
    }

    fn load_state(&mut self, tensors: &BTreeMap<String, Tensor>, meta: &HashMap<String, String>) -> Result<()> {
        DrQv2Agent::load_state(self, tensors, meta)
    }
}

/// DrQ-v2's update metrics over an episode: means of every metric but σ, the latest.
#[derive(Debug, Default)]
pub struct DrQv2Sums {
    count: u64,
    sum: DrQv2Metrics,
}

impl EpisodeSums<DrQv2Metrics> for DrQv2Sums {
    fn add(&mut self, m: &DrQv2Metrics) {
        self.count += 1;
        let s = &mut self.sum;
        s.critic_loss += m.critic_loss;
        s.critic_q1 += m.critic_q1;
        s.critic_q2 += m.critic_q2;
        s.critic_target_q += m.critic_target_q;
        s.actor_loss += m.actor_loss;
        s.actor_logprob += m.actor_logprob;
        s.actor_ent += m.actor_ent;
        s.batch_reward += m.batch_reward;
        s.actor_stddev = m.actor_stddev; // the latest, not a mean
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn mean(&self) -> DrQv2Metrics {
        let n = self.count.max(1) as f64;
        let s = &self.sum;
        DrQv2Metrics {
            critic_loss: s.critic_loss / n,
            critic_q1: s.critic_q1 / n,
            critic_q2: s.critic_q2 / n,
            critic_target_q: s.critic_target_q / n,
            actor_loss: s.actor_loss / n,
            actor_logprob: s.actor_logprob / n,
            actor_ent: s.actor_ent / n,
            actor_stddev: s.actor_stddev,
            batch_reward: s.batch_reward / n,
        }
    }
}

impl AgentSettings for DrQv2Config {
    fn batch_size(&self) -> usize {
        self.batch_size
    }

    fn optimizer(&self) -> &AdamConfig {
        &self.optimizer
    }

    fn returns(&self) -> NStep {
        NStep {
            n: self.nstep,
            discount: self.discount,
        }
    }

    fn validate(&self, section: &str) -> Result<()> {
        DrQv2Config::validate(self, section)
    }
}
