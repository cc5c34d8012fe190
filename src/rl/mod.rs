//! The agents on an encoder's features, each in its own folder: Soft Actor-Critic
//! ([`sac`], docs/design.md §6), DrQ-v2 ([`drqv2`], §13) and TACO ([`taco`], §14), behind the
//! loop's seam ([`Agent`], [`AgentSettings`]) and registered under their `kind` below; beside
//! them what they share (the twin-Q critic, trunks, replay, batches, feature cache). Pure
//! tensor logic, no I/O. The agent never sees pixels or the encoder: its callers encode
//! observations, and pass back the critic's gradient when the encoder trains.
//!
//! A new agent is a folder here (`rl/<agent>/`: networks, update, config, metrics, `impl
//! Agent`), its `pub mod` line and its line in [`agents!`](crate::agents) below.

pub mod action_encoding;
mod agent;
pub mod agent_config;
mod agent_state;
mod batch;
pub mod critic;
pub mod device_feature_cache;
pub mod device_frames;
mod device_rows;
pub mod feature_cache;
pub mod latent_actions;
pub(crate) mod mlp;
pub mod replay_buffer;
pub mod replay_sampling;
pub(crate) mod row_ops;
pub(crate) mod written_out;

pub mod drqv2;
pub mod sac;
pub mod taco;

pub use action_encoding::ActionEncoding;
pub use agent::{Agent, AgentSettings, AgentState, AgentUpdate, EpisodeSums, Features};
pub use agent_config::{AgentVisitor, Registered};
pub use batch::{Batch, SequenceViews};
pub use critic::{Critic, NetworkDims};
pub use device_feature_cache::DeviceFeatureCache;
pub use device_frames::DeviceFrames;
pub use drqv2::{DrQv2Agent, DrQv2Config, DrQv2Metrics, DrQv2Sums};
pub use feature_cache::{CachedFeatures, FeatureDtype};
pub use latent_actions::LatentActions;
pub use mlp::TrunkOutput;
pub use replay_buffer::{NStep, ReplayBuffer, SamplingState, StoredEpisode, Transitions};
pub use replay_sampling::ReplaySampling;
pub use sac::actor::Actor;
pub use sac::squashed_gaussian::SquashedGaussian;
pub use sac::{GradientPath, SacAgent, SacConfig, SacMetrics, SacSums};
pub use taco::{TacoAgent, TacoConfig, TacoMetrics, TacoSettings, TacoSums};

crate::agents! {
    /// Soft Actor-Critic, the paper's (docs/design.md §6); the kind of a config without one.
    Sac => sac::SacAgent,
    /// DrQ-v2, the paper's expert (docs/design.md §13).
    DrQv2 => drqv2::DrQv2Agent,
    /// TACO: DrQ-v2 with latent actions and its temporal contrastive loss (§14).
    Taco => taco::TacoAgent,
}
