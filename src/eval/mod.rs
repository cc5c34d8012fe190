//! `lfs eval`: does an encoder make downstream RL better? SAC trained on one DMControl task on
//! top of a frozen encoder (docs/design.md §6, §8). Its config is the RL loop's
//! ([`crate::rl_loop::EvalConfig`]); [`run`] gives the loop the encoder as constants.

pub mod run;

pub use crate::rl_loop::EvalConfig;
pub use run::run;
