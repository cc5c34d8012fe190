//! Soft Actor-Critic on an encoder's features (docs/design.md §6): pure tensor logic, no I/O.
//! The agent never sees pixels or the encoder: its callers encode observations (a frozen
//! encoder for `lfs eval`), so nothing in here can train the encoder.

pub mod actor;
pub mod critic;
pub mod feature_cache;
mod mlp;
pub mod replay_buffer;
pub mod sac;
pub mod squashed_gaussian;

pub use actor::Actor;
pub use critic::Critic;

pub use feature_cache::{CachedFeatures, FeatureDtype};
pub use replay_buffer::{ReplayBuffer, StoredEpisode, Transitions};
pub use sac::{SacAgent, SacBatch, SacConfig, SacMetrics};
pub use squashed_gaussian::SquashedGaussian;
