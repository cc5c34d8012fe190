//! lfs: pre-train visual encoders for RL on action-free videos (LFS) and evaluate them on
//! DeepMind Control.
//!
//! The modules follow the data flow: DMControl ([`mod@env`], [`collect`]) -> video folder ->
//! [`video`] decode -> [`shards`] (Parquet, LeRobot v3 layout, written by [`ingest`]) ->
//! stacked frames ([`observation`]) -> real and frame-mask pairs ([`data`]) -> encoder and
//! heads ([`nn`]) trained by an objective ([`objectives`]) in [`pretrain`] -> checkpoint ->
//! `lfs export` ([`pretrain::export`]; the file's format, PyTorch `state_dict` names, written
//! and read by [`nn::encoder_file`]) -> an agent ([`rl`]: SAC, DrQ-v2, TACO, each in its folder) in the RL
//! loop ([`rl_loop`]: on a frozen encoder, [`rl_loop::eval`], or end to end,
//! [`rl_loop::train`]) -> a benchmark suite's [`report`].

pub mod alloc;
pub mod collect;
pub mod config;
pub mod cuda;
pub mod data;
pub mod device;
pub mod env;
pub mod error;
pub mod fsutil;
pub mod ingest;
pub mod inspect;
pub mod log_files;
pub mod nn;
pub mod objectives;
pub mod observation;
pub mod pretrain;
pub mod probe;
pub mod report;
pub mod rl;
pub mod rl_loop;
pub mod run_dir;
pub mod shards;
pub mod suite;
pub mod switches;
pub mod tensorboard;
pub mod video;

pub use error::{Error, Result};
