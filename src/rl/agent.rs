//! The seam between the RL loop and its agents: what acts on features and learns from batches
//! of transitions ([`Agent`]), and what the loop reads of an agent's `[agent]` section
//! ([`AgentSettings`]). Each agent lives in its own folder (`rl/<agent>/`) with its networks,
//! update, config, metrics and its `impl Agent`; `rl/mod.rs` registers it under its `kind`
//! ([`crate::agents!`]). The loop knows only this trait.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use candle_core::{Device, Tensor};
use rand_chacha::ChaCha8Rng;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::nn::AdamConfig;
use crate::rl::{Batch, NStep, SequenceViews};
use crate::Result;

/// What the loop reads of an agent's `[agent]` section, whichever agent it is.
pub trait AgentSettings {
    /// Transitions per update.
    fn batch_size(&self) -> usize;

    /// The agent's Adam settings: what an encoder the critic trains steps with, as SAC from
    /// pixels, CURL and DrQ-v2 give it the agent's learning rate.
    fn optimizer(&self) -> &AdamConfig;

    /// The returns its batches carry.
    fn returns(&self) -> NStep;

    /// K of the action sequences its batches carry (for an objective of its own on sequence
    /// views, [`Agent::update_objective`]), 0 for none.
    fn action_sequence(&self) -> usize {
        0
    }

    /// Checks ranges; errors name the field under `section`.
    fn validate(&self, section: &str) -> Result<()>;

    /// Why the agent cannot run on a frozen encoder (`lfs eval`), when it cannot.
    fn frozen_encoder_refusal(&self) -> Option<String> {
        None
    }

    /// Why the agent refuses `lfs train`'s `aux` settings (`aux.method`, whether it has an
    /// objective, `aux.critic_gradient`), when it does.
    fn end_to_end_refusal(&self, _aux_method: &str, _aux_objective: bool, _critic_gradient: bool) -> Option<String> {
        None
    }
}

/// The features an agent learns on, as the loop's representation gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Per observation.
    pub repr_dim: usize,
    /// Whether they carry their encoder's tape: the critic loss's gradient with respect to
    /// them trains the encoder ([`AgentUpdate::obs_grad`]). False: constants (a frozen
    /// encoder's, or one that only an objective trains).
    pub encoder_tape: bool,
}

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
    /// Its `kind` in configs, `cell.json` and the report.
    const KIND: &'static str;
    /// Its name in messages ("TACO").
    const TITLE: &'static str;
    /// Tables of `[agent]` that are its own (`[agent.taco]`): another kind's config naming one
    /// is refused with the owner's name.
    const OWN_TABLES: &'static [&'static str] = &[];

    /// Its `[agent]` section, `kind` aside.
    type Config: AgentSettings + Debug + Clone + PartialEq + Serialize + DeserializeOwned;
    /// What one update reports.
    type Metrics: Serialize + Debug;
    type Sums: EpisodeSums<Self::Metrics>;

    /// Fresh networks from its `[agent]` section, for `features` and actions of `action_dim`
    /// in [-1, 1], on `device`.
    fn new(
        cfg: &Self::Config,
        features: Features,
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
