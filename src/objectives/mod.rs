//! Training objectives, pure tensor logic (no io, no sampling): the LFS clustering loss with
//! Sinkhorn–Knopp targets (docs/design.md §4), the Latent Nearest-neighbour Clip (docs/design.md §3), InfoNCE for
//! LFS-CL, and the ATC and CURL baselines (docs/design.md §5); and the objective engine that
//! trains any of them on the encoder ([`Trainer`], built from [`TrainerConfig`]: the sections
//! `lfs pretrain` and `lfs train` share), with what one update reports ([`UpdateMetrics`]).

pub mod atc;
pub mod config;
pub mod curl;
pub mod infonce;
pub mod lfs;
pub mod lnc;
pub mod sinkhorn;
pub mod spread;
pub mod trainer;
pub mod update_metrics;

pub use config::{Method, ModelConfig, ObjectiveConfig};
pub use lnc::{lnc_select, LncConfig, LncSelection};
pub use sinkhorn::{assignment_entropy, sinkhorn};
pub use trainer::{Trainer, TrainerConfig};
pub use update_metrics::UpdateMetrics;
