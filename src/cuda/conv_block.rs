//! One layer of the encoder on CUDA with cuDNN, `relu(conv(x, w) + b)`, as one graph node where
//! candle's path makes three (convolution, broadcast add, ReLU), each with its own backward and
//! gradient sums: 24.6 against 39.8 ms per LFS update at B=512 on an H200 (BENCHMARKS.md,
//! 2026-11-28; the profile behind it, results/gpu-h200-2026-11-28b/).
//!
//! Forward: cuDNN's convolution (`super::cudnn_conv`), then one kernel adding the bias and taking
//! the ReLU in place. Backward: one kernel masking the output gradient where the output is not
//! positive (PyTorch's `threshold_backward`), a deterministic two-pass channel sum for the bias
//! gradient (64 partial sums per channel, then their sum), cuDNN's backward-filter and, when x
//! carries a graph, backward-data. Checked on a GPU by `examples/device_check.rs` against the
//! CPU's kernels; nothing here runs on a CPU.

use std::sync::OnceLock;

use candle_core::cuda::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::cuda::{CudaStorage, WrapErr};
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor};

use super::runtime::{compiled, contiguous_len, launch_config};
use crate::Result;

/// The gradients of one layer y = relu(conv(x, w) + b).
pub struct LayerGrads {
    /// dL/dx (n, c, h, w), when asked for.
    pub input: Option<Tensor>,
    /// dL/dw (o, c, k, k).
    pub weight: Tensor,
    /// dL/db (o).
    pub bias: Tensor,
}

const SOURCE: &str = r#"
extern "C" __global__ void lfs_bias_relu(float* y, const float* bias, unsigned int n, unsigned int c, unsigned int hw) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float v = y[i] + bias[(i / hw) % c];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

extern "C" __global__ void lfs_relu_grad(const float* g, const float* out, float* dy, unsigned int n) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        dy[i] = out[i] > 0.0f ? g[i] : 0.0f;
    }
}

// grid (chunks, c), 256 threads: partial[ch * chunks + k] = the k-th chunk's sum of channel ch
// of dy (b, c, hw).
extern "C" __global__ void lfs_channel_sum_partial(const float* dy, float* partial, unsigned int b,
                                                   unsigned int c, unsigned int hw) {
    __shared__ float sums[256];
    unsigned int ch = blockIdx.y, chunks = gridDim.x, per = b * hw;
    float s = 0.0f;
    for (unsigned int j = blockIdx.x * blockDim.x + threadIdx.x; j < per; j += blockDim.x * chunks) {
        s += dy[((j / hw) * c + ch) * hw + j % hw];
    }
    sums[threadIdx.x] = s;
    __syncthreads();
    for (unsigned int step = 128; step > 0; step >>= 1) {
        if (threadIdx.x < step) sums[threadIdx.x] += sums[threadIdx.x + step];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[ch * chunks + blockIdx.x] = sums[0];
}

extern "C" __global__ void lfs_channel_sum_final(const float* partial, float* out, unsigned int c, unsigned int chunks) {
    unsigned int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < c) {
        float s = 0.0f;
        for (unsigned int k = 0; k < chunks; k++) s += partial[ch * chunks + k];
        out[ch] = s;
    }
}
"#;

const MODULE: &str = "lfs_cudnn_block";

/// Partial sums per channel in the bias gradient's first pass.
const CHUNKS: u32 = 64;

fn ptx() -> candle_core::Result<&'static str> {
    static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    compiled(&PTX, SOURCE, "convolution block")
}

/// relu(conv(x, w) + b): x (n, c, h, w), w (o, c, k, k), b (o) → (n, o, ho, wo), no padding,
/// stride `stride`; differentiable in x (when it carries a graph), w and b.
pub fn conv_bias_relu(x: &Tensor, w: &Tensor, b: &Tensor, stride: usize) -> Result<Tensor> {
    let (x, w, b) = (x.contiguous()?, w.contiguous()?, b.contiguous()?);
    // A graph node only when one of them carries a graph (candle records none otherwise).
    Ok(x.apply_op3(&w, &b, Block { stride })?) // (n, o, ho, wo)
}

/// The graph node: forward (x, w, b) → y; backward through [`Block::bwd`].
struct Block {
    stride: usize,
}

impl CustomOp3 for Block {
    fn name(&self) -> &'static str {
        "conv2d-bias-relu-cudnn"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!("conv2d-bias-relu-cudnn runs on CUDA only")
    }

    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        x_l: &Layout,
        w: &CudaStorage,
        w_l: &Layout,
        b: &CudaStorage,
        b_l: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (mut y, shape) = super::cudnn_conv::forward_storage(x, x_l, w, w_l, self.stride)?;
        let y_l = Layout::contiguous(shape.clone());
        bias_relu(&mut y, &y_l, b, b_l)?;
        Ok((y, shape))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        res: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let input_grad = x.track_op(); // never for layer 0's pixels
        let grads = grads(&x.detach(), &w.detach(), &res.detach(), g, self.stride, input_grad)
            .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        Ok((grads.input, Some(grads.weight), Some(grads.bias)))
    }
}

/// The gradients of y = relu(conv(x, w) + b) for g = dL/dy, from x and y (CUDA tensors, outside
/// any graph): [`Block`]'s backward, and the encoder's over the rows of a forward it kept
/// (`Encoder::backward`). The input gradient only when `input_grad`.
pub fn grads(x: &Tensor, w: &Tensor, y: &Tensor, g: &Tensor, stride: usize, input_grad: bool) -> Result<LayerGrads> {
    let (x, y) = (x.contiguous()?, y.contiguous()?);
    let dy = g.detach().contiguous()?.apply_op2_no_bwd(&y, &ReluGrad)?; // (n, o, ho, wo)
    let bias = dy.apply_op1_no_bwd(&ChannelSum)?; // (o)
    let weight = super::cudnn_conv::backward_filter(&x, &dy, w.dim(2)?, stride)?; // (o, c, k, k)
    let input = match input_grad {
        true => Some(super::cudnn_conv::backward_data(
            w,
            &dy,
            (x.dim(2)?, x.dim(3)?),
            stride,
        )?), // (n, c, h, w)
        false => None,
    };
    Ok(LayerGrads { input, weight, bias })
}

/// y ← relu(y + b[channel]) in place: y (n, o, ho, wo), b (o).
fn bias_relu(y: &mut CudaStorage, y_l: &Layout, b: &CudaStorage, b_l: &Layout) -> candle_core::Result<()> {
    let n = contiguous_len(y_l, "y")?;
    let (_, c, ho, wo) = y_l.shape().dims4()?;
    if contiguous_len(b_l, "the bias")? != c {
        candle_core::bail!("bias-relu-cuda: {c} channels, a bias of {}", b_l.shape().elem_count())
    }
    let func = y.device.get_or_load_custom_func("lfs_bias_relu", MODULE, ptx()?)?;
    let b = b.as_cuda_slice::<f32>()?.slice(b_l.start_offset()..);
    let start = y_l.start_offset();
    let mut y = y.as_cuda_slice_mut::<f32>()?.slice_mut(start..);
    let (n32, c32, hw) = (n as u32, c as u32, (ho * wo) as u32);
    let mut builder = func.builder();
    builder.arg(&mut y);
    builder.arg(&b);
    builder.arg(&n32);
    builder.arg(&c32);
    builder.arg(&hw);
    // SAFETY: the arguments are as lfs_bias_relu declares them; y covers n f32s, b c.
    unsafe { builder.launch(launch_config(n)) }.w()?;
    Ok(())
}

/// dy = g where the block's output is positive, else 0 (args: g, the output), a new tensor.
struct ReluGrad;

impl CustomOp2 for ReluGrad {
    fn name(&self) -> &'static str {
        "relu-grad-cuda"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!("relu-grad-cuda runs on CUDA only")
    }

    fn cuda_fwd(
        &self,
        g: &CudaStorage,
        g_l: &Layout,
        out: &CudaStorage,
        out_l: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let n = contiguous_len(g_l, "the output gradient")?;
        if contiguous_len(out_l, "the output")? != n {
            candle_core::bail!(
                "relu-grad-cuda: {n} gradients for {} outputs",
                out_l.shape().elem_count()
            )
        }
        let dev = g.device.clone();
        let func = dev.get_or_load_custom_func("lfs_relu_grad", MODULE, ptx()?)?;
        let g_v = g.as_cuda_slice::<f32>()?.slice(g_l.start_offset()..);
        let out_v = out.as_cuda_slice::<f32>()?.slice(out_l.start_offset()..);
        // SAFETY: every element is written by the kernel.
        let dy = unsafe { dev.alloc::<f32>(n)? };
        let n32 = n as u32;
        let mut builder = func.builder();
        builder.arg(&g_v);
        builder.arg(&out_v);
        builder.arg(&dy);
        builder.arg(&n32);
        // SAFETY: the arguments are as lfs_relu_grad declares them; each covers n f32s.
        unsafe { builder.launch(launch_config(n)) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(dy, dev), g_l.shape().clone()))
    }
}

/// Σ over (n, h, w) of dy (n, o, h, w) → (o), in two deterministic passes.
struct ChannelSum;

impl CustomOp1 for ChannelSum {
    fn name(&self) -> &'static str {
        "channel-sum-cuda"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!("channel-sum-cuda runs on CUDA only")
    }

    fn cuda_fwd(&self, dy: &CudaStorage, dy_l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        contiguous_len(dy_l, "the gradient")?;
        let (b, c, h, w) = dy_l.shape().dims4()?;
        let dev = dy.device.clone();
        let dy_v = dy.as_cuda_slice::<f32>()?.slice(dy_l.start_offset()..);
        // SAFETY: every element of both is written by the kernels.
        let partial = unsafe { dev.alloc::<f32>(c * CHUNKS as usize)? };
        let out = unsafe { dev.alloc::<f32>(c)? };
        let (b32, c32, hw) = (b as u32, c as u32, (h * w) as u32);
        let first = dev.get_or_load_custom_func("lfs_channel_sum_partial", MODULE, ptx()?)?;
        let mut builder = first.builder();
        builder.arg(&dy_v);
        builder.arg(&partial);
        builder.arg(&b32);
        builder.arg(&c32);
        builder.arg(&hw);
        let cfg = LaunchConfig {
            grid_dim: (CHUNKS, c32, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: as lfs_channel_sum_partial declares; dy covers b·c·hw f32s, partial c·CHUNKS.
        unsafe { builder.launch(cfg) }.w()?;
        let second = dev.get_or_load_custom_func("lfs_channel_sum_final", MODULE, ptx()?)?;
        let mut builder = second.builder();
        builder.arg(&partial);
        builder.arg(&out);
        builder.arg(&c32);
        builder.arg(&CHUNKS);
        // SAFETY: as lfs_channel_sum_final declares; out covers c f32s.
        unsafe { builder.launch(launch_config(c)) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from(c)))
    }
}
