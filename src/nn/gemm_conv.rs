//! The encoder's convolution on candle's path ([`crate::device::Compute::Candle`]: a GPU, or the
//! CPU in the device tests): candle's conv2d forward, with a backward written as GEMMs.
//!
//! candle's own conv2d backward (`candle-core` 0.11.1, `backprop.rs`) computes
//! - the input gradient with `conv_transpose2d`, a direct kernel on CUDA, for every layer,
//!   layer 0's too, whose input is pixels and needs none;
//! - the weight gradient as one conv2d of the transposed input by the transposed output
//!   gradient: an im2col whose "kernel" is the whole output map, then one GEMM of 288 × 32
//!   outputs, each a sum of 1.6M terms (B = 1024 at layer 1): few output tiles over which a GPU
//!   can spread the work (issue 52 names these "very narrow GEMMs"; not yet profiled alone).
//!
//! Issue 52 measured the LFS update's backward at 0.125 s on an H200 against PyTorch's 0.02 s
//! for the whole update. Here instead, for `y = conv(x, w)` (no padding, stride s, k × k):
//! - **weight gradient**: per sample, `g_b (o, ho·wo) · col_b(x)ᵀ (ho·wo, c·k·k)`, one batched
//!   GEMM over the batch (the batch split of the long sum), then the sum over samples;
//!   `col_b(x)` is x's k·k shifted (and strided) views stacked, the im2col of x;
//! - **input gradient**, only when x carries a graph (never for the pixels of layer 0): for
//!   stride 1, a conv2d of g padded by k − 1 with the kernel flipped and its channels swapped,
//!   so candle's im2col + GEMM forward does it; for a larger stride, candle's
//!   `conv_transpose2d`, as before.
//!
//! The forward is candle's conv2d on detached tensors; the graph node is a [`CustomOp3`] over
//! (x, w, y) whose forward hands back y and whose backward is the above (candle's own backward
//! timed level with it on an H200, 65.3 against 66.5 ms and 68.2 against 64.5 per LFS update:
//! BENCHMARKS.md). The CUDA build (cargo feature `cuda`) runs the forward and both gradients by
//! cuDNN instead on CUDA in f32 (`src/cuda/cudnn_conv.rs`): 26.2 ms per LFS update against 69.8
//! with cuDNN's forward and these GEMMs' backward (results/gpu-h200-2026-11-28d, command 3).

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp3, Layout, Shape, Tensor};

use crate::{Error, Result};

/// Samples per batched GEMM of the weight gradient: bounds the im2col buffer (at B = 256 and a
/// 32-channel 41 × 41 input, 256 · 288 · 39² floats = 450 MB).
const CHUNK: usize = 256;

/// One encoder layer, relu(conv(x, w) + b) with b (o) per channel: on CUDA one graph node
/// (`src/cuda/conv_block.rs`: 24.6 against 39.8 ms per LFS update as three candle nodes on an
/// H200, BENCHMARKS.md), elsewhere [`conv2d`], candle's broadcast add and ReLU.
pub fn conv2d_bias_relu(x: &Tensor, w: &Tensor, b: &Tensor, stride: usize) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if on_cudnn(x) {
        return crate::cuda::conv_block::conv_bias_relu(x, w, b, stride);
    }
    let o = b.dim(0)?;
    Ok(conv2d(x, w, stride)? // (b, o, ho, wo)
        .broadcast_add(&b.reshape((1, o, 1, 1))?)?
        .relu()?)
}

/// The gradients of one encoder layer y = relu(conv(x, w) + b).
pub struct BlockGrads {
    /// dL/dx (n, c, h, w), when asked for (never for layer 0's pixels).
    pub input: Option<Tensor>,
    /// dL/dw (o, c, k, k).
    pub weight: Tensor,
    /// dL/db (o).
    pub bias: Tensor,
}

/// [`conv2d_bias_relu`]'s gradients for g = dL/dy (n, o, ho, wo), from its input x (n, c, h, w)
/// and output y, tensors outside any graph (the rows of a forward the encoder kept,
/// `Encoder::backward`): the ReLU's mask from y (PyTorch's `threshold_backward`, the CPU
/// kernels' rule), the bias gradient as the mask's sum per channel, the weight and (when
/// `with_input`) input gradients as [`conv2d`]'s backward computes them. On CUDA the block's
/// own kernels (`src/cuda/conv_block.rs`).
pub fn conv2d_bias_relu_grads(
    x: &Tensor,
    w: &Tensor,
    y: &Tensor,
    g: &Tensor,
    stride: usize,
    with_input: bool,
) -> Result<BlockGrads> {
    let cudnn = on_cudnn(x);
    #[cfg(feature = "cuda")]
    if cudnn {
        let crate::cuda::conv_block::LayerGrads { input, weight, bias } =
            crate::cuda::conv_block::grads(x, w, y, g, stride, with_input)?;
        return Ok(BlockGrads { input, weight, bias });
    }
    let g = g.contiguous()?;
    let dy = y.gt(&y.zeros_like()?)?.where_cond(&g, &g.zeros_like()?)?; // (n, o, ho, wo)
    let bias = dy.sum((0, 2, 3))?; // (o)
    let (input, weight) = conv_grads(x, w, &dy, stride, with_input, cudnn)?;
    Ok(BlockGrads { input, weight, bias })
}

/// dx (when `with_input`) and dw of y = conv(x, w) for g = dL/dy: by cuDNN when `cudnn`, else as
/// GEMMs ([`input_grad`], [`weight_grad`]). [`conv2d`]'s backward and [`conv2d_bias_relu_grads`].
fn conv_grads(
    x: &Tensor,
    w: &Tensor,
    g: &Tensor,
    stride: usize,
    with_input: bool,
    cudnn: bool,
) -> Result<(Option<Tensor>, Tensor)> {
    if cudnn {
        return cudnn_grads(x, w, g, stride, with_input);
    }
    let dw = weight_grad(x, g, w.dim(2)?, stride)?;
    let dx = match with_input {
        true => Some(input_grad(x, w, g, stride)?),
        false => None,
    };
    Ok((dx, dw))
}

/// `x.conv2d(w, padding 0, stride, dilation 1, groups 1)`: x (b, c, h, w), w (o, c, k, k) →
/// (b, o, ho, wo), differentiable in x and w through [`ConvGrad`].
pub fn conv2d(x: &Tensor, w: &Tensor, stride: usize) -> Result<Tensor> {
    let cudnn = on_cudnn(x);
    let y = match cudnn {
        true => cudnn_forward(&x.detach(), &w.detach(), stride)?,
        false => x.detach().conv2d(&w.detach(), 0, stride, 1, 1)?,
    }; // (b, o, ho, wo)
    if !x.track_op() && !w.track_op() {
        return Ok(y);
    }
    let op = ConvGrad {
        stride,
        input_grad: x.track_op(),
        cudnn,
    };
    Ok(x.apply_op3(w, &y, op)?)
}

#[cfg(feature = "cuda")]
fn on_cudnn(x: &Tensor) -> bool {
    crate::cuda::cudnn_conv::applies(x)
}

#[cfg(not(feature = "cuda"))]
fn on_cudnn(_: &Tensor) -> bool {
    false
}

#[cfg(feature = "cuda")]
fn cudnn_forward(x: &Tensor, w: &Tensor, stride: usize) -> Result<Tensor> {
    crate::cuda::cudnn_conv::forward(x, w, stride)
}

#[cfg(not(feature = "cuda"))]
fn cudnn_forward(_: &Tensor, _: &Tensor, _: usize) -> Result<Tensor> {
    Err(Error::Shape("gemm_conv: this build has no cuDNN".into()))
}

#[cfg(feature = "cuda")]
fn cudnn_grads(
    x: &Tensor,
    w: &Tensor,
    g: &Tensor,
    stride: usize,
    input_grad: bool,
) -> Result<(Option<Tensor>, Tensor)> {
    let grads = crate::cuda::cudnn_conv::grads(x, w, g, stride, input_grad)?;
    Ok((grads.input, grads.weight))
}

#[cfg(not(feature = "cuda"))]
fn cudnn_grads(_: &Tensor, _: &Tensor, _: &Tensor, _: usize, _: bool) -> Result<(Option<Tensor>, Tensor)> {
    Err(Error::Shape("gemm_conv: this build has no cuDNN".into()))
}

/// The graph node of [`conv2d`]: args (x, w, y), y computed already; forward returns y.
struct ConvGrad {
    stride: usize,
    /// Whether x carries a graph (false: layer 0's pixels, no input gradient computed).
    input_grad: bool,
    /// Whether cuDNN computes the gradients (it computed y).
    cudnn: bool,
}

/// y's storage, which is the whole of y (a fresh conv2d output: contiguous from offset 0).
fn whole<S: BackendStorage>(s: &S, l: &Layout) -> candle_core::Result<(S, Shape)> {
    if !l.is_contiguous() || l.start_offset() != 0 {
        candle_core::bail!("gemm_conv: the conv output is not contiguous from offset 0");
    }
    Ok((s.try_clone(l)?, l.shape().clone()))
}

impl CustomOp3 for ConvGrad {
    fn name(&self) -> &'static str {
        "conv2d-gemm-backward"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        y: &CpuStorage,
        y_l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        whole(y, y_l)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        _: &candle_core::CudaStorage,
        _: &Layout,
        _: &candle_core::CudaStorage,
        _: &Layout,
        y: &candle_core::CudaStorage,
        y_l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        whole(y, y_l)
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _y: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let to_candle = |e: Error| candle_core::Error::Msg(e.to_string());
        let (x, w, g) = (x.detach(), w.detach(), g.detach().contiguous()?);
        let (dx, dw) = conv_grads(&x, &w, &g, self.stride, self.input_grad, self.cudnn).map_err(to_candle)?;
        Ok((dx, Some(dw), None))
    }
}

/// dL/dw (o, c, k, k) = Σ_b g_b (o, ho·wo) · col_b(x)ᵀ (ho·wo, c·k·k), over chunks of samples.
pub fn weight_grad(x: &Tensor, g: &Tensor, k: usize, stride: usize) -> Result<Tensor> {
    let (b, o, ho, wo) = g.dims4()?;
    let c = x.dim(1)?;
    let mut dw: Option<Tensor> = None;
    for start in (0..b).step_by(CHUNK) {
        let n = CHUNK.min(b - start);
        let col = im2col(&x.narrow(0, start, n)?, k, stride, ho, wo)?; // (n, c·k·k, ho·wo)
        let g = g.narrow(0, start, n)?.reshape((n, o, ho * wo))?; // (n, o, ho·wo)
        let part = g.matmul(&col.transpose(1, 2)?)?.sum(0)?; // (o, c·k·k)
        dw = Some(match dw {
            None => part,
            Some(sum) => (sum + part)?,
        });
    }
    let dw = dw.ok_or_else(|| Error::Shape("gemm_conv: an empty batch".into()))?;
    Ok(dw.reshape((o, c, k, k))?)
}

/// dL/dx (b, c, h, w): for stride 1 the full correlation of g with the flipped kernel, as a
/// conv2d of g padded by k − 1 with w (o, c, k, k) → (c, o, k, k) flipped in both spatial dims.
pub fn input_grad(x: &Tensor, w: &Tensor, g: &Tensor, stride: usize) -> Result<Tensor> {
    let (_, _, h, _) = x.dims4()?;
    let k = w.dim(2)?;
    if stride != 1 {
        // candle's own, as its backprop does: (ho − 1)·s + k ≤ h, the rest is output padding.
        let out_padding = h - ((g.dim(2)? - 1) * stride + k);
        return Ok(g.conv_transpose2d(w, 0, out_padding, stride, 1)?);
    }
    let rev: Vec<u32> = (0..k as u32).rev().collect();
    let rev = Tensor::new(rev.as_slice(), w.device())?;
    let w_flip = w
        .transpose(0, 1)? // (c, o, k, k)
        .contiguous()?
        .index_select(&rev, 2)?
        .index_select(&rev, 3)?
        .contiguous()?;
    Ok(g.conv2d(&w_flip, k - 1, 1, 1, 1)?) // (b, c, ho + k − 1, wo + k − 1) = (b, c, h, w)
}

/// im2col: x (n, c, h, w) → (n, c·k·k, ho·wo), entry (c, ky, kx), (i, j) = x[c, s·i + ky, s·j + kx].
fn im2col(x: &Tensor, k: usize, s: usize, ho: usize, wo: usize) -> Result<Tensor> {
    let (n, c, h, w) = x.dims4()?;
    let mut taps = Vec::with_capacity(k * k);
    if s == 1 {
        for ky in 0..k {
            for kx in 0..k {
                taps.push(x.narrow(2, ky, ho)?.narrow(3, kx, wo)?); // (n, c, ho, wo)
            }
        }
    } else {
        // Rows s·i + ky as (phase ky mod s, index i + ky div s) of x padded to a multiple of s.
        let hp = s * (h.div_ceil(s)).max((k - 1) / s + ho);
        let wp = s * (w.div_ceil(s)).max((k - 1) / s + wo);
        let xp = x.pad_with_zeros(2, 0, hp - h)?.pad_with_zeros(3, 0, wp - w)?;
        let xp = xp.reshape((n, c, hp / s, s, wp / s, s))?; // (n, c, i, phase_y, j, phase_x)
        for ky in 0..k {
            for kx in 0..k {
                let tap = xp
                    .narrow(3, ky % s, 1)?
                    .narrow(2, ky / s, ho)?
                    .narrow(5, kx % s, 1)?
                    .narrow(4, kx / s, wo)?
                    .reshape((n, c, ho, wo))?;
                taps.push(tap);
            }
        }
    }
    let col = Tensor::stack(&taps, 2)?; // (n, c, k·k, ho, wo)
    Ok(col.reshape((n, c * k * k, ho * wo))?)
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Var};

    use super::*;

    /// Gradients of Σ (conv(x, w) ⊙ r) by this module and by candle's own backward, in f64.
    fn grads(stride: usize, h: usize, x_is_var: bool) -> [(Tensor, Tensor); 2] {
        let dev = Device::Cpu;
        let (b, c, o, k) = (3, 4, 5, 3);
        let x0 = Tensor::randn(0f64, 1.0, (b, c, h, h), &dev).unwrap();
        let w0 = Tensor::randn(0f64, 1.0, (o, c, k, k), &dev).unwrap();
        let ho = (h - k) / stride + 1;
        let r = Tensor::randn(0f64, 1.0, (b, o, ho, ho), &dev).unwrap();
        let run = |ours: bool| {
            let x = Var::from_tensor(&x0).unwrap();
            let w = Var::from_tensor(&w0).unwrap();
            let xin = if x_is_var { x.as_tensor().clone() } else { x0.clone() };
            let y = if ours {
                conv2d(&xin, w.as_tensor(), stride).unwrap()
            } else {
                xin.conv2d(w.as_tensor(), 0, stride, 1, 1).unwrap()
            };
            let gs = (y * &r).unwrap().sum_all().unwrap().backward().unwrap();
            let dx = gs
                .get(x.as_tensor())
                .cloned()
                .unwrap_or_else(|| x0.zeros_like().unwrap());
            (dx, gs.get(w.as_tensor()).unwrap().clone())
        };
        [run(true), run(false)]
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f64>()
            .unwrap()
    }

    #[test]
    fn weight_and_input_gradients_match_candles_backward() {
        for (stride, h) in [(1, 9), (2, 11), (2, 12), (3, 13)] {
            let [(dx, dw), (dx_ref, dw_ref)] = grads(stride, h, true);
            assert!(
                max_diff(&dw, &dw_ref) < 1e-10,
                "stride {stride}, h {h}: weight gradient"
            );
            assert!(max_diff(&dx, &dx_ref) < 1e-10, "stride {stride}, h {h}: input gradient");
            assert!(dx.abs().unwrap().max_all().unwrap().to_scalar::<f64>().unwrap() > 0.1);
        }
    }

    #[test]
    fn pixels_get_no_gradient_and_the_weights_still_do() {
        let [(dx, dw), (_, dw_ref)] = grads(2, 84 / 4, false);
        assert!(max_diff(&dw, &dw_ref) < 1e-10);
        assert_eq!(dx.abs().unwrap().max_all().unwrap().to_scalar::<f64>().unwrap(), 0.0);
    }

    #[test]
    fn the_weight_gradient_sums_chunks_of_samples() {
        // More samples than one chunk: the chunked sum equals candle's single product.
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (CHUNK + 3, 2, 6, 6), &dev).unwrap();
        let w = Var::randn(0f32, 1.0, (2, 2, 3, 3), &dev).unwrap();
        let g = Tensor::randn(0f32, 1.0, (CHUNK + 3, 2, 4, 4), &dev).unwrap();
        let ours = weight_grad(&x, &g, 3, 1).unwrap();
        let y = x.conv2d(w.as_tensor(), 0, 1, 1, 1).unwrap();
        let reference = (y * &g).unwrap().sum_all().unwrap().backward().unwrap();
        let reference = reference.get(w.as_tensor()).unwrap();
        let scale = reference.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        let diff = (ours - reference)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(diff < 1e-5 * scale, "{diff} against a scale of {scale}");
        assert_eq!(x.dtype(), DType::F32);
    }
}
