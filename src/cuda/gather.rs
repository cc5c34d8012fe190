//! `crate::data::FrameStore::gather` on CUDA as one kernel: each output byte read from the store
//! at `channel[j, k] + row[j, y] + col[j, x]`, from those three small tables, where candle's path
//! builds the full (n, k, h, w) u32 index tensor (520 MB at an LFS update's 2,048 observations;
//! 2.2 of the update's 23 GPU-busy ms on the 2026-11-28 H200 profile). candle's path stays on
//! the CPU's device path (tests) and for an output past 32-bit indexing; the bytes are the same.
//! Checked on a GPU by `examples/device_check.rs` ("replay rows on the device" must be exact).

#[cfg(feature = "cuda")]
pub use on_cuda::{fits, gather, gather_input};

/// The factor of `crate::nn::encoder::scale_pixels` (candle's `x / 255.0` is an affine op by
/// 1/255 rounded to f32), handed to `lfs_gather_input`.
pub const PIXEL_SCALE: f32 = (1.0f64 / 255.0) as f32;

/// The kernel, compiled by NVRTC on CUDA; the unit test below compiles it for the host too
/// (`super::on_host`) and holds it to the CPU's gather.
pub const SOURCE: &str = r#"
// tables = [channel (n·k), row (n·h), col (n·w)] as signed 64-bit positions in the store (which
// may pass 4 GB); the output's own index i < n·k·h·w fits 32 bits (checked by the caller), so
// the divisions are 32-bit ones. The store's position of output element i of (n, k, h, w):
__device__ long long stack_position(const long long* tables, unsigned int i, unsigned int n,
                                    unsigned int k, unsigned int h, unsigned int w) {
    const long long* channel = tables;
    const long long* row = tables + (unsigned long long)n * k;
    const long long* col = row + (unsigned long long)n * h;
    unsigned int x = i % w, t = i / w;
    unsigned int y = t % h;
    t /= h;
    unsigned int kk = t % k, j = t / k;
    return channel[j * k + kk] + row[j * h + y] + col[j * w + x];
}

// out (n, k, h, w) u8: the bytes.
extern "C" __global__ void lfs_gather_stacks(const unsigned char* frames, const long long* tables,
                                             unsigned char* out, unsigned int n, unsigned int k,
                                             unsigned int h, unsigned int w) {
    unsigned int total = n * k * h * w;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
        out[i] = frames[stack_position(tables, i, n, k, h, w)];
    }
}

// out (n, k, h, w) f32: the encoder's input, byte · scale + offset in two roundings as
// candle's two affine ops make it (`crate::nn::encoder::scale_pixels`: x · (1/255), then
// + offset; NVRTC runs without contraction into a fused multiply-add).
extern "C" __global__ void lfs_gather_input(const unsigned char* frames, const long long* tables,
                                            float* out, unsigned int n, unsigned int k,
                                            unsigned int h, unsigned int w, float scale, float offset) {
    unsigned int total = n * k * h * w;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
        float v = (float)frames[stack_position(tables, i, n, k, h, w)] * scale;
        out[i] = offset == 0.0f ? v : v + offset;
    }
}
"#;

#[cfg(feature = "cuda")]
mod on_cuda {
    use std::sync::OnceLock;

    use candle_core::cuda::cudarc::driver::{CudaView, DeviceRepr, PushKernelArg};
    use candle_core::cuda::{CudaDType, CudaDevice, CudaStorage, WrapErr};
    use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};

    use super::SOURCE;
    use crate::cuda::runtime::{compiled, contiguous_len, launch_config};
    use crate::{Error, Result};

    const MODULE: &str = "lfs_cuda_gather";

    fn ptx() -> candle_core::Result<&'static str> {
        static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
        compiled(&PTX, SOURCE, "frame gather")
    }

    /// Whether the store's gather on CUDA of `bytes` output bytes fits this kernel's 32-bit
    /// indexing (candle's broadcast adds and index_select past it).
    pub fn fits(bytes: usize) -> bool {
        bytes <= u32::MAX as usize
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
        run(frames, channel, row, col, Gather { shape, input: None })
    }

    /// [`gather`] into the encoder's input, (n, k, h, w) f32: each byte · `scale` + `offset`
    /// (`crate::nn::encoder::scale_pixels`'s floats, with `scale` = [`super::PIXEL_SCALE`]).
    pub fn gather_input(
        frames: &Tensor,
        channel: &[u64],
        row: &[u64],
        col: &[u64],
        shape: (usize, usize, usize, usize),
        offset: f32,
    ) -> Result<Tensor> {
        let input = Some((super::PIXEL_SCALE, offset));
        run(frames, channel, row, col, Gather { shape, input })
    }

    fn run(frames: &Tensor, channel: &[u64], row: &[u64], col: &[u64], op: Gather) -> Result<Tensor> {
        let shape = op.shape;
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
        Ok(frames.apply_op2_no_bwd(&tables, &op)?)
    }

    /// Launches the kernel `name` (frames, tables, out, n, k, h, w, then `scalars`) over a new
    /// output of n·k·h·w elements of `T`.
    fn launch<T: CudaDType + DeviceRepr>(
        dev: &CudaDevice,
        name: &str,
        frames: &CudaView<'_, u8>,
        tables: &CudaView<'_, i64>,
        dims: [u32; 4],
        scalars: &[f32],
    ) -> candle_core::Result<CudaStorage> {
        let total = dims.iter().map(|&d| d as usize).product::<usize>();
        let func = dev.get_or_load_custom_func(name, MODULE, ptx()?)?;
        // SAFETY: every element is written by the kernel.
        let out = unsafe { dev.alloc::<T>(total.max(1))? };
        let mut builder = func.builder();
        builder.arg(frames);
        builder.arg(tables);
        builder.arg(&out);
        for d in &dims {
            builder.arg(d);
        }
        for v in scalars {
            builder.arg(v);
        }
        // SAFETY: the arguments are as lfs_gather_stacks and lfs_gather_input declare them; the
        // caller's tables index inside the store (FrameStore::gather checks every frame against
        // its rows).
        unsafe { builder.launch(launch_config(total)) }.w()?;
        Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
    }

    struct Gather {
        shape: (usize, usize, usize, usize),
        /// None: the bytes (u8); Some((scale, offset)): the encoder's input (f32).
        input: Option<(f32, f32)>,
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
            if total > u32::MAX as usize {
                candle_core::bail!("gather-stacks-cuda: {total} outputs pass 32-bit indexing");
            }
            let dev = &frames.device;
            let frames_v = frames.as_cuda_slice::<u8>()?.slice(frames_l.start_offset()..);
            let tables_v = tables.as_cuda_slice::<i64>()?.slice(tables_l.start_offset()..);
            let dims = [n, k, h, w].map(|d| d as u32);
            let out = match self.input {
                None => launch::<u8>(dev, "lfs_gather_stacks", &frames_v, &tables_v, dims, &[])?,
                Some((scale, offset)) => {
                    launch::<f32>(dev, "lfs_gather_input", &frames_v, &tables_v, dims, &[scale, offset])?
                }
            };
            Ok((out, Shape::from((n, k, h, w))))
        }
    }
}
