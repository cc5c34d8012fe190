//! TACO ([`TacoAgent`], docs/design.md §14) behind the loop's agent seam: DrQ-v2's cadence and
//! returns, batches with action sequences, and a second gradient for the encoder (its loss's).

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor};
use rand_chacha::ChaCha8Rng;

use super::{TacoAgent, TacoConfig, TacoMetrics, TACO_TABLE};
use crate::rl::drqv2::DrQv2Sums;
use crate::rl::{Agent, AgentState, AgentUpdate, Batch, EpisodeSums, Features, SequenceViews};
use crate::Result;

impl Agent for TacoAgent {
    const KIND: &'static str = "taco";
    const TITLE: &'static str = "TACO";
    const OWN_TABLES: &'static [&'static str] = &[TACO_TABLE];
    type Config = TacoConfig;
    type Metrics = TacoMetrics;
    type Sums = TacoSums;

    fn new(
        cfg: &TacoConfig,
        features: Features,
        action_dim: usize,
        device: &Device,
        rng: &mut ChaCha8Rng,
    ) -> Result<Self> {
        TacoAgent::new(&cfg.agent, &cfg.taco, features.repr_dim, action_dim, device, rng)
    }

    fn batch_size(&self) -> usize {
        self.core().config().batch_size
    }

    fn updates_at(&self, step: u64) -> bool {
        step.is_multiple_of(self.core().config().update_every_steps)
    }

    fn act(&self, h: &Tensor, step: u64, explore: bool, rng: &mut ChaCha8Rng) -> Result<Vec<f32>> {
        self.core().act(h, step, explore, rng)
    }

    fn update(&mut self, batch: &Batch, step: u64, rng: &mut ChaCha8Rng) -> Result<AgentUpdate<TacoMetrics>> {
        let (metrics, obs_grad) = TacoAgent::update(self, batch, step, rng)?;
        Ok(AgentUpdate { metrics, obs_grad })
    }

    fn update_objective(
        &mut self,
        views: &SequenceViews,
        reward: &Tensor,
        metrics: &mut TacoMetrics,
    ) -> Result<Option<Tensor>> {
        TacoAgent::update_taco(self, views, reward, metrics)
    }

    fn min_q(&self, h: &Tensor, action: &Tensor) -> Result<Vec<f32>> {
        self.core().min_q(h, action)
    }

    fn state(&self) -> Result<AgentState> {
        let (tensors, meta) = TacoAgent::state(self)?;
        Ok(AgentState { tensors, meta })
    }

    fn load_state(&mut self, tensors: &BTreeMap<String, Tensor>, meta: &HashMap<String, String>) -> Result<()> {
        TacoAgent::load_state(self, tensors, meta)
    }
}

/// TACO's update metrics over an episode: DrQ-v2's, and the means of its loss's terms.
#[derive(Debug, Default)]
pub struct TacoSums {
    agent: DrQv2Sums,
    taco_loss: f64,
    curl_loss: Option<f64>,
    reward_loss: Option<f64>,
}

impl EpisodeSums<TacoMetrics> for TacoSums {
    fn add(&mut self, m: &TacoMetrics) {
        self.agent.add(&m.agent);
        self.taco_loss += m.taco_loss;
        let add = |s: &mut Option<f64>, v: Option<f64>| {
            if let Some(v) = v {
                *s = Some(s.unwrap_or(0.0) + v);
            }
        };
        add(&mut self.curl_loss, m.curl_loss);
        add(&mut self.reward_loss, m.reward_loss);
    }

    fn count(&self) -> u64 {
        self.agent.count()
    }

    fn mean(&self) -> TacoMetrics {
        let n = self.count().max(1) as f64;
        TacoMetrics {
            agent: self.agent.mean(),
            taco_loss: self.taco_loss / n,
            curl_loss: self.curl_loss.map(|v| v / n),
            reward_loss: self.reward_loss.map(|v| v / n),
        }
    }
}
