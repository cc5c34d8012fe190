//! The pre-trainer: config (TOML), the per-update trainer for every method of docs/design.md §5, the
//! run loop with metrics, checkpoints and resume.

pub mod collapse;
pub mod config;
pub mod metrics;
pub mod run;
pub mod trainer;

pub use config::{Method, PretrainConfig};
pub use metrics::UpdateMetrics;
pub use run::{run, RunEvent, RunSummary};
pub use trainer::{video_pair_sampler, Trainer};
