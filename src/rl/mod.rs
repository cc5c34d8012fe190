//! The agents on an encoder's features: Soft Actor-Critic (docs/design.md §6) and DrQ-v2
//! (§13). Pure tensor logic, no I/O.
//! The agent never sees pixels or the encoder: its callers encode observations (a frozen
//! encoder for `lfs eval`), so nothing in here can train the encoder.

pub mod action_encoding;
pub mod actor;
mod agent_state;
mod batch;
pub mod critic;
pub mod drqv2;
pub mod feature_cache;
pub(crate) mod mlp;
pub mod replay_buffer;
pub mod sac;
mod sac_backward;
pub mod squashed_gaussian;
pub mod taco;

pub use action_encoding::ActionEncoding;
pub use actor::Actor;
pub use batch::{Batch, SequenceViews};
pub use critic::Critic;
pub use drqv2::{DrQv2Agent, DrQv2Config, DrQv2Metrics};
pub use mlp::TrunkOutput;

pub use feature_cache::{CachedFeatures, FeatureDtype};
pub use replay_buffer::{NStep, ReplayBuffer, StoredEpisode, Transitions};
pub use sac::{SacAgent, SacConfig, SacMetrics};
pub use squashed_gaussian::SquashedGaussian;
pub use taco::{TacoAgent, TacoMetrics, TacoSettings};
