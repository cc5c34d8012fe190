//! [`FrameStore::gather`](super::device_stacks::FrameStore::gather) on CUDA as one kernel (cargo
//! feature `cuda`, issue 52): each output byte read from the store at
//! `channel[j, k] + row[j, y] + col[j, x]`, from those three small tables, where candle's path
//! builds the full (n, k, h, w) index tensor with two broadcast adds and then gathers: at an LFS
//! update's 2,048 observations that is 130M u32 indices (520 MB) written and read again, 2.2 of
//! the update's 23 GPU-busy ms on the 2026-11-28 H200 profile (`badd_u32`, `is_u32_u8`).
//! candle's path stays on the CPU's device path (tests) and for an output past 32-bit indexing.
//! The bytes are the same either way.
//!
//! Checked on a GPU by `examples/device_check.rs` (its pre-training checks gather their batches
//! on the device against the host's stacking; "replay rows on the device" must be exact).

#[cfg(feature = "cuda")]
pub use on_cuda::{fits, gather, gather_input};

/// The factor of `crate::nn::encoder::scale_pixels` (candle's `x / 255.0` is an affine op by
/// 1/255 rounded to f32), handed to `lfs_gather_input`.
pub const PIXEL_SCALE: f32 = (1.0f64 / 255.0) as f32;

/// The kernel, compiled by NVRTC on CUDA; the unit test below compiles it for the host too
/// (`crate::nn::cuda_on_host`) and holds it to the CPU's gather.
const SOURCE: &str = r#"
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
    use crate::nn::cuda_step::{compiled, contiguous_len, launch_config};
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

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};
    use rand::{Rng, SeedableRng};

    use super::SOURCE;
    use crate::data::device_stacks::GatherTables;
    use crate::data::FrameStore;
    use crate::nn::cuda_on_host;
    use crate::nn::encoder::scale_pixels;
    use crate::observation::StackIndices;

    /// argv: n k h w and the store's bytes; stdin: the store's bytes, then the tables as i64.
    const MAIN: &str = r#"
int main(int argc, char** argv) {
    unsigned int n = atoi(argv[1]), k = atoi(argv[2]), h = atoi(argv[3]), w = atoi(argv[4]);
    size_t bytes = atol(argv[5]);
    auto frames = in<unsigned char>(bytes);
    auto tables = in<long long>((size_t)n * (k + h + w));
    std::vector<unsigned char> o((size_t)n * k * h * w);
    lfs_gather_stacks(frames.data(), tables.data(), o.data(), n, k, h, w);
    out(o);
    return 0;
}
"#;

    /// argv: n k h w, the store's bytes, the offset; stdin as [`MAIN`]'s.
    const MAIN_INPUT: &str = r#"
int main(int argc, char** argv) {
    unsigned int n = atoi(argv[1]), k = atoi(argv[2]), h = atoi(argv[3]), w = atoi(argv[4]);
    size_t bytes = atol(argv[5]);
    float scale = strtof(argv[6], nullptr), offset = strtof(argv[7], nullptr);
    auto frames = in<unsigned char>(bytes);
    auto tables = in<long long>((size_t)n * (k + h + w));
    std::vector<float> o((size_t)n * k * h * w);
    lfs_gather_input(frames.data(), tables.data(), o.data(), n, k, h, w, scale, offset);
    out(o);
    return 0;
}
"#;

    /// The kernel, compiled for the host, against [`FrameStore::gather`]'s CPU path (candle's
    /// broadcast adds and index_select) on the same tables: every byte, for shifted and
    /// unshifted stacks, a frame shape that is not square, and shifts past the edges.
    #[test]
    fn the_cuda_kernel_gathers_what_the_cpu_gathers() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let (c, h, w, rows) = (3, 7, 9, 11);
        let bytes: Vec<u8> = (0..rows * c * h * w).map(|_| rng.random()).collect();
        let frames = Tensor::from_slice(&bytes, (rows, c * h * w), &Device::Cpu).unwrap();
        let store = FrameStore::new(frames, (c, h, w)).unwrap();
        let n = 5;
        let stacks: Vec<StackIndices> = (0..n)
            .map(|_| std::array::from_fn(|_| rng.random_range(0..rows)))
            .collect();
        let shifts: Vec<(isize, isize)> = (0..n)
            .map(|j| match j {
                0 => (0, 0),
                1 => (-(h as isize), w as isize),
                _ => (
                    rng.random_range(-4i32..=4) as isize,
                    rng.random_range(-4i32..=4) as isize,
                ),
            })
            .collect();
        let cpu = store.gather(&stacks, &shifts).unwrap(); // (n, k, h, w)
        let GatherTables {
            channel,
            row,
            col,
            shape: (n, k, h, w),
        } = store.tables(&stacks, &shifts).unwrap();
        let mut input = bytes.clone();
        for v in channel.iter().chain(&row).chain(&col) {
            input.extend((*v as i64).to_le_bytes());
        }
        let exe = cuda_on_host::build("gather_stacks", SOURCE, MAIN);
        let args = [n, k, h, w, bytes.len()].map(|v| v.to_string());
        let kernel = cuda_on_host::run(&exe, &args, &input);
        assert_eq!(kernel, cpu.flatten_all().unwrap().to_vec1::<u8>().unwrap());

        // The gather into the encoder's input: the floats of the encoder's own scaling of the
        // CPU's bytes, bit for bit, without and with DrQ-v2's offset. The scale travels as
        // text: Rust's shortest round-trip digits, which strtof reads back to the same float.
        let exe = cuda_on_host::build("gather_input", SOURCE, MAIN_INPUT);
        for offset in [0.0f32, -0.5] {
            let mut args = args.to_vec();
            args.extend([super::PIXEL_SCALE.to_string(), offset.to_string()]);
            let kernel: Vec<u32> = cuda_on_host::run(&exe, &args, &input)
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            let scaled = scale_pixels(&cpu.to_dtype(DType::F32).unwrap(), offset).unwrap();
            let expected: Vec<u32> = scaled
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(kernel, expected, "offset {offset}");
        }
    }
}
