//! End-to-end SAC with an auxiliary objective on the same encoder (`lfs train`, docs/design.md
//! §7, the paper's Algorithm 1). The SAC loop is `lfs eval`'s ([`crate::eval::run`]); what
//! differs is where the features come from: an encoder the objective trains every step.

pub mod config;
pub mod online_encoder;
pub mod value_comparison;

pub use config::{AuxConfig, AuxMethod, TrainConfig};
pub use online_encoder::OnlineEncoder;
