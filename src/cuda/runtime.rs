//! What lfs's CUDA kernels share (cargo feature `cuda`): their compilation by NVRTC at first use
//! (each element rounded as the CPU's f32 loop rounds it), their launch shape and the check of
//! their arguments' layouts. Each kernel's module in this folder holds its source and launches.

use std::sync::OnceLock;

use candle_core::cuda::cudarc::driver::LaunchConfig;
use candle_core::cuda::cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use candle_core::Layout;

/// `source`'s PTX, compiled by NVRTC into `cell` on first use, without contraction into fused
/// multiply-adds and with IEEE square root and division (each element rounded as the CPU's f32
/// loop rounds it); `what` names the kernels in the error.
pub fn compiled(
    cell: &'static OnceLock<std::result::Result<String, String>>,
    source: &str,
    what: &str,
) -> candle_core::Result<&'static str> {
    let compiled = cell.get_or_init(|| {
        let opts = CompileOptions {
            fmad: Some(false),
            prec_sqrt: Some(true),
            prec_div: Some(true),
            ftz: Some(false),
            ..Default::default()
        };
        compile_ptx_with_opts(source, opts)
            .map(|p| p.to_src())
            .map_err(|e| format!("NVRTC could not compile lfs's {what} kernels: {e}"))
    });
    compiled.as_deref().map_err(|e| candle_core::Error::Msg(e.clone()))
}

/// Blocks of 256 threads, at most 4096 of them (the kernels stride past that).
pub fn launch_config(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(256).clamp(1, 4096) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The elements of a contiguous layout; an error naming `what` otherwise.
pub fn contiguous_len(l: &Layout, what: &str) -> candle_core::Result<usize> {
    if !l.is_contiguous() {
        candle_core::bail!("cuda: {what} is not contiguous")
    }
    Ok(l.shape().elem_count())
}
