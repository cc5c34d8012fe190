//! Pre-training objectives, one file each behind one trait ([`Objective`]: the head, how it
//! draws its pairs from a [`crate::data::PairSource`], its loss): LFS and its ablations with
//! the Sinkhorn–Knopp clustering loss (docs/design.md §4) and the Latent Nearest-neighbour Clip
//! (§3), LFS-CL, and the ATC and CURL baselines (§5); and the objective engine that trains any
//! of them on the encoder ([`Trainer`], built from [`TrainerConfig`]: the sections `lfs
//! pretrain` and `lfs train` share), with what one update reports ([`UpdateMetrics`]). No I/O.

pub mod atc;
pub mod config;
pub mod curl;
pub mod infonce;
pub mod lfs;
pub mod lfs_cl;
pub mod lnc;
pub mod objective;
pub mod sinkhorn;
pub mod spread;
pub mod stacks;
pub mod trainer;
pub mod update_metrics;

pub use config::{Method, ModelConfig, ObjectiveConfig};
pub use lnc::{lnc_select, LncConfig, LncSelection};
pub use objective::Objective;
pub use sinkhorn::{assignment_entropy, sinkhorn};
pub use trainer::{Trainer, TrainerConfig};
pub use update_metrics::UpdateMetrics;
