//! One encoder layer, `relu(conv(x, w) + b)`, on candle's path ([`crate::device::Compute::Candle`]:
//! a GPU, or the CPU in the device tests), and its gradients from kept activations.
//!
//! On CUDA (f32) the layer is one graph node of cuDNN's convolution and our kernels
//! (`src/cuda/conv_block.rs`: 24.6 against 39.8 ms per LFS update as three candle nodes on an
//! H200, BENCHMARKS.md 2026-11-28). Elsewhere it is candle's conv2d, broadcast add and ReLU under
//! candle's autograd: the CPU reference the device tests and `examples/device_check.rs` hold the
//! CUDA layer to.

use candle_core::{Tensor, Var};

use crate::Result;

/// y = relu(conv(x, w) + b): x (n, c, h, w), w (o, c, k, k), b (o) → (n, o, ho, wo), no
/// padding, differentiable in x, w and b.
pub fn conv2d_bias_relu(x: &Tensor, w: &Tensor, b: &Tensor, stride: usize) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if crate::cuda::cudnn_conv::applies(x) {
        return crate::cuda::conv_block::conv_bias_relu(x, w, b, stride);
    }
    let o = b.dim(0)?;
    Ok(x.conv2d(w, 0, stride, 1, 1)? // (n, o, ho, wo)
        .broadcast_add(&b.reshape((1, o, 1, 1))?)?
        .relu()?)
}

/// The gradients of one encoder layer y = relu(conv(x, w) + b).
pub struct LayerGrads {
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
/// kernels' rule), the bias gradient as the masked gradient's sum per channel, the weight and
/// (when `with_input`) input gradients by the convolution's backward: cuDNN's on CUDA
/// (`src/cuda/conv_block.rs`), candle's autograd elsewhere.
pub fn conv2d_bias_relu_grads(
    x: &Tensor,
    w: &Tensor,
    y: &Tensor,
    g: &Tensor,
    stride: usize,
    with_input: bool,
) -> Result<LayerGrads> {
    #[cfg(feature = "cuda")]
    if crate::cuda::cudnn_conv::applies(x) {
        let crate::cuda::conv_block::LayerGrads { input, weight, bias } =
            crate::cuda::conv_block::grads(x, w, y, g, stride, with_input)?;
        return Ok(LayerGrads { input, weight, bias });
    }
    let g = g.contiguous()?;
    let dy = y.gt(&y.zeros_like()?)?.where_cond(&g, &g.zeros_like()?)?; // (n, o, ho, wo)
    let bias = dy.sum((0, 2, 3))?; // (o)

    // dL/dw and dL/dx of Σ conv(x, w) ⊙ dy, through candle's conv2d backward.
    let wv = Var::from_tensor(&w.detach())?;
    let xv = match with_input {
        true => Some(Var::from_tensor(&x.detach())?),
        false => None,
    };
    let input = xv.as_ref().map_or_else(|| x.detach(), |v| v.as_tensor().clone());
    let conv = input.conv2d(wv.as_tensor(), 0, stride, 1, 1)?; // (n, o, ho, wo)
    let grads = (conv * dy)?.sum_all()?.backward()?;
    let weight = grads
        .get(wv.as_tensor())
        .cloned()
        .ok_or_else(|| crate::Error::Shape("conv_layer: no weight gradient".into()))?;
    let input = xv.and_then(|v| grads.get(v.as_tensor()).cloned());
    Ok(LayerGrads { input, weight, bias })
}
