//! lfs's own CUDA code, in one place (cargo feature `cuda`; issue 72): the kernels NVRTC
//! compiles at first use and cuDNN's convolutions, each a module that the encoder, the
//! objectives, the agents and the data call by named functions. Nothing here imports the rest
//! of lfs: what a kernel needs comes in as tensors and scalars.
//!
//! - [`runtime`]: NVRTC's compilation (no fused multiply-adds: each element rounded as the
//!   CPU's f32 loop rounds it), the launch shape, the layouts' checks;
//! - [`adam_ema`]: Adam's step and the EMA target update, one kernel per parameter;
//! - [`cudnn_conv`]: cuDNN's forward, backward-data and backward-filter, algorithms timed;
//! - [`conv_block`]: one encoder layer, relu(conv(x, w) + b), as one graph node;
//! - [`gather`]: the frames' shifted gather into a batch (bytes, or the encoder's input);
//! - [`lnc`]: LNC's distances and k-th neighbours;
//! - [`sac_rows`]: SAC's and DrQ-v2's row-wise ops (LayerNorm, the squashed Gaussian).
//!
//! The kernels' sources are compiled on the CPU too, by the unit tests of the code each one
//! stands in for (through [`on_host`]), which hold them to that code; a GPU runs them in
//! `examples/device_check.rs`.

#[cfg(feature = "cuda")]
pub mod adam_ema;
#[cfg(feature = "cuda")]
pub mod conv_block;
#[cfg(feature = "cuda")]
pub mod cudnn_conv;
#[cfg(any(test, feature = "cuda"))]
pub mod gather;
#[cfg(any(test, feature = "cuda"))]
pub mod lnc;
#[cfg(test)]
pub(crate) mod on_host;
#[cfg(feature = "cuda")]
pub mod runtime;
#[cfg(any(test, feature = "cuda"))]
pub mod sac_rows;
