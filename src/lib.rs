//! lfs: pre-train visual encoders for RL on action-free videos (LFS) and evaluate them on
//! DeepMind Control.
//!
//! The modules follow the data flow: video folder -> [`video`] decode -> [`shards`] (Parquet,
//! LeRobot v3 layout) -> pairs -> encoder -> checkpoint -> frozen SAC -> report.

pub mod error;
pub mod fsutil;
pub mod ingest;
pub mod inspect;
pub mod shards;
pub mod video;

pub use error::{Error, Result};
