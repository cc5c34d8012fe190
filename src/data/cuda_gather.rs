//! [`FrameStore::gather`](super::device_stacks::FrameStore::gather) on CUDA as one kernel (cargo
//! feature `cuda`, issue 52): each output byte read from the store at
//! `channel[j, k] + row[j, y] + col[j, x]`, from those three small tables, where candle's path
//! builds the full (n, k, h, w) index tensor with two broadcast adds and then gathers: at an LFS
//! update's 2,048 observations that is 130M u32 indices (520 MB) written and read again, 2.2 of
//! the update's 23 GPU-busy ms on the 2026-11-28 H200 profile (`badd_u32`, `is_u32_u8`).
//! `LFS_FUSED_GATHER=0` keeps candle's path. The bytes are the same either way.
//!
//! Checked on a GPU by `examples/device_check.rs` (its pre-training checks gather their batches
//! on the device against the host's stacking; "replay rows on the device" must be exact).

use std::sync::OnceLock;

use candle_core::cuda::cudarc::driver::PushKernelArg;
use candle_core::cuda::{CudaStorage, WrapErr};
use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};

use crate::nn::cuda_step::{compiled, contiguous_len, launch_config, switched_on};
use crate::{Error, Result};

const SOURCE: &str = r#"
// out (n, k, h, w) u8; tables = [channel (n·k), row (n·h), col (n·w)] as signed 64-bit
// positions in the store (which may pass 4 GB); the output's own index fits 32 bits (checked by
// the caller), so the divisions are 32-bit ones.
extern "C" __global__ void lfs_gather_stacks(const unsigned char* frames, const long long* tables,
                                             unsigned char* out, unsigned int n, unsigned int k,
                                             unsigned int h, unsigned int w) {
    const long long* channel = tables;
    const long long* row = tables + (unsigned long long)n * k;
    const long long* col = row + (unsigned long long)n * h;
    unsigned int total = n * k * h * w;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
        unsigned int x = i % w, t = i / w;
        unsigned int y = t % h;
        t /= h;
        unsigned int kk = t % k, j = t / k;
        out[i] = frames[channel[j * k + kk] + row[j * h + y] + col[j * w + x]];
    }
}
"#;

const MODULE: &str = "lfs_cuda_gather";

fn ptx() -> candle_core::Result<&'static str> {
    static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    compiled(&PTX, SOURCE, "frame gather")
}

/// Whether the store's gather on CUDA of `bytes` output bytes is this kernel: unless
/// `LFS_FUSED_GATHER=0`, NVRTC cannot compile it, or the output passes 32-bit indexing (candle's
/// broadcast adds and index_select then).
pub fn fused(bytes: usize) -> bool {
    static FUSED: OnceLock<bool> = OnceLock::new();
    let on = *FUSED.get_or_init(|| switched_on("LFS_FUSED_GATHER", ptx, "the frames' gather runs as candle's ops"));
    on && bytes <= u32::MAX as usize
}

/// Out (n, k, h, w) u8 with out[j, c, y, x] = frames[channel[j·k + c] + row[j·h + y] + col[j·w + x]]
/// (positions in `frames` flattened), `frames` on CUDA.
pub fn gather(
    frames: &Tensor,
    channel: &[u64],
    row: &[u64],
    col: &[u64],
    shape: (usize, usize, usize, usize),
) -> Result<Tensor> {
    let (n, k, h, w) = shape;
    if channel.len() != n * k || row.len() != n * h || col.len() != n * w {
        return Err(Error::Shape(format!(
            "frame gather: tables of {}, {}, {} for (n, k, h, w) = {shape:?}",
            channel.len(),
            row.len(),
            col.len()
        )));
    }
    let tables: Vec<i64> = channel.iter().chain(row).chain(col).map(|&v| v as i64).collect();
    let tables = Tensor::from_vec(tables, n * (k + h + w), frames.device())?;
    let frames = frames.flatten_all()?;
    Ok(frames.apply_op2_no_bwd(&tables, &Gather { shape })?)
}

struct Gather {
    shape: (usize, usize, usize, usize),
}

impl CustomOp2 for Gather {
    fn name(&self) -> &'static str {
        "gather-stacks-cuda"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!("gather-stacks-cuda runs on CUDA only")
    }

    fn cuda_fwd(
        &self,
        frames: &CudaStorage,
        frames_l: &Layout,
        tables: &CudaStorage,
        tables_l: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        contiguous_len(frames_l, "the frames")?;
        contiguous_len(tables_l, "the index tables")?;
        let (n, k, h, w) = self.shape;
        let total = n * k * h * w;
        let dev = frames.device.clone();
        let func = dev.get_or_load_custom_func("lfs_gather_stacks", MODULE, ptx()?)?;
        let frames_v = frames.as_cuda_slice::<u8>()?.slice(frames_l.start_offset()..);
        let tables_v = tables.as_cuda_slice::<i64>()?.slice(tables_l.start_offset()..);
        // SAFETY: every byte is written by the kernel.
        let out = unsafe { dev.alloc::<u8>(total.max(1))? };
        if total > u32::MAX as usize {
            candle_core::bail!("gather-stacks-cuda: {total} bytes pass 32-bit indexing");
        }
        let dims = [n, k, h, w].map(|d| d as u32);
        let mut builder = func.builder();
        builder.arg(&frames_v);
        builder.arg(&tables_v);
        builder.arg(&out);
        for d in &dims {
            builder.arg(d);
        }
        // SAFETY: the arguments are as lfs_gather_stacks declares them; the caller's tables index
        // inside the store (FrameStore::gather checks every frame against its rows).
        unsafe { builder.launch(launch_config(total)) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from((n, k, h, w))))
    }
}
