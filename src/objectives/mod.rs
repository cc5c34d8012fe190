//! Training objectives, pure tensor logic (no io, no sampling): the LFS clustering loss with
//! Sinkhorn–Knopp targets (docs/design.md §4), the Latent Nearest-neighbour Clip (docs/design.md §3), InfoNCE for
//! LFS-CL, and the ATC and CURL baselines (docs/design.md §5).

pub mod atc;
pub mod curl;
pub mod infonce;
pub mod lfs;
pub mod lnc;
pub mod sinkhorn;

pub use lnc::{lnc_select, LncConfig, LncSelection};
pub use sinkhorn::{assignment_entropy, sinkhorn};
