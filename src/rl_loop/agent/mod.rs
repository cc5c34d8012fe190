//! The loop's seam for agents: what acts on features and learns from batches of transitions.
//! SAC ([`SacAgent`], docs/design.md §6), DrQ-v2 ([`DrQv2Agent`], §13) and TACO
//! ([`TacoAgent`], §14); `[agent] kind` chooses ([`AgentConfig`]), and each command runs the loop with the
//! agent its config names. Another agent is a new implementation of [`Agent`] and a new kind,
//! not new arms in the loop.

mod config;
mod drqv2;
mod sac;
mod taco;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use candle_core::{Device, Tensor};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::rl::{Batch, SequenceViews};
use crate::Result;

pub use config::{AgentConfig, AgentKind};
pub use drqv2::DrQv2Sums;
pub use sac::SacSums;
pub use taco::TacoSums;

/// What one update did: its metrics, and the critic loss's gradient with respect to the
/// batch's observation features when they track one (an encoder the critic trains).
pub struct AgentUpdate<M> {
    pub metrics: M,
    pub obs_grad: Option<Tensor>,
}

/// An agent's checkpoint state: tensors under its own names, counters as metadata.
pub struct AgentState {
    pub tensors: BTreeMap<String, Tensor>,
    pub meta: HashMap<String, String>,
}

/// An episode's update metrics summed, for the means `train.jsonl` logs.
pub trait EpisodeSums<M>: Default {
    fn add(&mut self, m: &M);
    /// Updates added.
    fn count(&self) -> u64;
    fn mean(&self) -> M;
}

/// An actor-critic the loop trains on features of its representation.
pub trait Agent: Sized {
    /// What one update reports.
    type Metrics: Serialize + Debug;
    type Sums: EpisodeSums<Self::Metrics>;

    /// Fresh networks from the config's agent section (an error names the section when it is
    /// another agent's), for features of `repr_dim` and actions of `action_dim` in [-1, 1], on
    /// `device`.
    fn new(
        cfg: &AgentConfig,
        repr_dim: usize,
        action_dim: usize,
        device: &Device,
        rng: &mut ChaCha8Rng,
    ) -> Result<Self>;

    /// Transitions per update.
    fn batch_size(&self) -> usize;

    /// Whether it updates at agent step `step` (after the seed frames); the loop samples and
    /// encodes a batch only then.
    fn updates_at(&self, step: u64) -> bool;

    /// Actions for features h (b, repr) at agent step `step`: explored with `rng` (training)
    /// or deterministic (evaluation). Returns (b, A) row-major.
    fn act(&self, h: &Tensor, step: u64, explore: bool, rng: &mut ChaCha8Rng) -> Result<Vec<f32>>;

    /// One update at agent step `step`.
    fn update(&mut self, batch: &Batch, step: u64, rng: &mut ChaCha8Rng) -> Result<AgentUpdate<Self::Metrics>>;

    /// The agent's own objective on sequence views of the batch it just updated on, made after
    /// the encoder's critic step (TACO's loss; the loop makes views only for an agent whose
    /// config asks for action sequences); `reward` (b, 1) is the batch's. Adds its terms to
    /// `metrics` and returns its gradient with respect to `views.anchor`, for the encoder.
    fn update_objective(
        &mut self,
        _views: &SequenceViews,
        _reward: &Tensor,
        _metrics: &mut Self::Metrics,
    ) -> Result<Option<Tensor>> {
        Ok(None)
    }

    /// min(Q1, Q2) of features h (b, repr) and actions (b, A), without a graph (the value
    /// comparison).
    fn min_q(&self, h: &Tensor, action: &Tensor) -> Result<Vec<f32>>;

    fn state(&self) -> Result<AgentState>;

    fn load_state(&mut self, tensors: &BTreeMap<String, Tensor>, meta: &HashMap<String, String>) -> Result<()>;
}
