//! The pre-trainer: config (TOML), and the run loop that drives the objective engine
//! ([`crate::objectives::Trainer`], every method of docs/design.md §5) over video pairs, with
//! metrics, checkpoints, resume and the collapse monitor.

pub mod collapse;
pub mod config;
pub mod export;
pub mod run;

/// The objective engine `lfs pretrain` drives lives beside the objectives.
pub use crate::objectives::{Trainer, UpdateMetrics};
pub use config::{Method, PretrainConfig};
pub use run::{run, video_pair_sampler, RunEvent, RunSummary};
