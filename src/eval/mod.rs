//! `lfs eval`: does an encoder make downstream RL better? SAC trained on one DMControl task on
//! top of a frozen encoder (docs/design.md §6, §8): the config, and the run loop with its logs,
//! evaluations and resumable checkpoints.

pub mod config;
pub mod run;

pub use config::{EvalConfig, Frames};
pub use run::{run, EncoderChoice, EvalEvent, EvalRow, EvalSpec, EvalSummary};
