//! Training objectives, pure tensor logic (no io, no sampling): the LFS clustering loss with
//! Sinkhorn–Knopp targets (SPEC §4), the Latent Nearest-neighbour Clip (SPEC §3), InfoNCE for
//! LFS-CL, and the ATC and CURL baselines (SPEC §5).

pub mod atc;
pub mod curl;
pub mod infonce;
pub mod lfs;
pub mod lnc;
pub mod sinkhorn;

pub use lnc::{lnc_select, LncConfig, LncSelection};
pub use sinkhorn::{assignment_entropy, sinkhorn};
