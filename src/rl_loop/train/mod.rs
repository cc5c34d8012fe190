//! `lfs train`: an agent trained end to end, with an auxiliary objective on the same encoder
//! (docs/design.md §7, the paper's Algorithm 1) or the critic's gradient (DrQ-v2, TACO). The
//! loop is the one `lfs eval` runs too ([`crate::rl_loop`]); what differs is where the features come from: an encoder the objective
//! (and, for the pixel baselines, the critic) trains every step ([`OnlineRepresentation`]).

pub mod config;
pub mod online_encoder;
pub mod run;

pub use config::{AuxConfig, AuxMethod, TrainConfig};
pub use online_encoder::OnlineEncoder;
pub use run::{run, OnlineRepresentation};
