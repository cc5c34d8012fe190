//! A CPU 3×3 convolution (no padding, stride 1 or 2, f32, NCHW) as candle custom ops, because
//! candle's stock CPU conv2d and its backward dominate the update (docs/design.md §10).
//!
//! Each op converts one sample at a time to channels-last and runs the register-tiled kernels
//! of [`super::conv_nhwc`] (channel counts that are not a multiple of 16 are zero-padded to
//! one), samples in parallel on rayon's pool, single-threaded inside, so threads are not
//! oversubscribed. The backward is two more ops: the weight gradient and the input gradient;
//! the latter is skipped when the input tracks no gradient (the encoder's first layer sees
//! the image). [`conv2d_3x3_bias_relu`] fuses the bias and the ReLU (its backward masks the
//! gradient with the saved output and sums the bias gradient itself). Reductions over
//! samples add fixed groups in order, so results do not depend on rayon's scheduling.
//! `Encoder::forward` on the CPU runs the whole encoder as one op instead ([`super::encoder_op`]), and
//! uses these per-layer ops only when the image itself tracks a gradient or a layer's output
//! channels are not a multiple of 16.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape as TensorShape, Tensor};
use rayon::prelude::*;

use super::conv_nhwc::{self, padded, Kernel, Shape};
use super::cpu_storage::contiguous_f32;
use super::{sum_in_order, GROUPS};

use crate::Result;

/// The kernel is 3×3.
const KS: usize = 3;

/// `relu(x ⊛ w + bias)` with bias (o) and ReLU fused into the op: x (b, c, h, w),
/// w (o, c, 3, 3) -> (b, o, ho, wo); differentiable in all three arguments.
pub fn conv2d_3x3_bias_relu(x: &Tensor, w: &Tensor, bias: &Tensor, stride: usize) -> Result<Tensor> {
    let x = x.contiguous()?;
    let w = w.contiguous()?;
    let bias = bias.contiguous()?;
    Ok(x.apply_op3(&w, &bias, Conv3x3BiasRelu { stride })?)
}

/// Geometry of one convolution: input (b, c, h, w), output (b, ·, ho, wo).
#[derive(Debug, Clone, Copy)]
struct Geom {
    b: usize,
    c: usize,
    h: usize,
    w: usize,
    ho: usize,
    wo: usize,
    stride: usize,
}

impl Geom {
    fn new(x_dims: &[usize], c_w: usize, stride: usize) -> candle_core::Result<Self> {
        let &[b, c, h, w] = x_dims else {
            candle_core::bail!("conv3x3: input must be (b, c, h, w), got {x_dims:?}")
        };
        if c != c_w || h < KS || w < KS || !(stride == 1 || stride == 2) {
            candle_core::bail!("conv3x3: input {x_dims:?}, weight in-channels {c_w}, stride {stride} unsupported")
        }
        Ok(Self {
            b,
            c,
            h,
            w,
            ho: (h - KS) / stride + 1,
            wo: (w - KS) / stride + 1,
            stride,
        })
    }

    /// Weights per output channel (c·9).
    fn k(&self) -> usize {
        self.c * KS * KS
    }

    /// Output pixels per sample (ho·wo).
    fn n(&self) -> usize {
        self.ho * self.wo
    }

    /// Elements of one input sample (c·h·w).
    fn in_len(&self) -> usize {
        self.c * self.h * self.w
    }
}

/// (o, c) of a (o, c, 3, 3) weight.
fn weight_dims(l: &Layout) -> candle_core::Result<(usize, usize)> {
    match *l.dims() {
        [o, c, KS, KS] => Ok((o, c)),
        _ => candle_core::bail!("conv3x3: weight must be (o, c, 3, 3), got {:?}", l.dims()),
    }
}

/// The per-sample shape for the channels-last kernels, output channels padded to 16.
fn nhwc_shape(g: &Geom, o: usize) -> Shape {
    Shape {
        h: g.h,
        w: g.w,
        c: g.c,
        o: padded(o),
        stride: g.stride,
    }
}

/// The fused op's forward, samples in parallel: the output starts from the bias and a ReLU
/// follows. Returns (b, o, ho, wo).
fn forward_conv(g: &Geom, x: &[f32], wt: &[f32], o: usize, bias: &[f32]) -> Vec<f32> {
    let (s, n, kernel) = (nhwc_shape(g, o), g.n(), Kernel::detect());
    let wf = conv_nhwc::weights_forward(wt, o, g.c, s.o);
    let mut bias_pad = bias.to_vec();
    bias_pad.resize(s.o, 0.0);
    let mut out = vec![0f32; g.b * o * n]; // (b, o, ho, wo)
    out.par_chunks_mut(o * n).zip(x.par_chunks(g.in_len())).for_each_init(
        || (vec![0f32; s.in_len()], vec![0f32; s.out_len()]),
        |(xh, yh), (y, xb)| {
            conv_nhwc::chw_to_hwc(xb, g.c, g.h * g.w, g.c, xh);
            conv_nhwc::forward(kernel, &s, xh, &wf, Some(&bias_pad), true, yh);
            conv_nhwc::hwc_to_chw(yh, o, n, s.o, y);
        },
    );
    out
}

/// The conv's gradients for the gradient `grad` (b, o, ho, wo) of its (pre-activation)
/// output: the input gradient, skipped for an input that tracks no op (the image: nothing
/// upstream can use it), and the weight gradient.
fn input_and_weight_grads(
    x: &Tensor,
    w: &Tensor,
    grad: &Tensor,
    stride: usize,
) -> candle_core::Result<(Option<Tensor>, Tensor)> {
    let dw = x.apply_op2_no_bwd(grad, &WeightGrad { stride })?;
    let dx = if x.track_op() {
        let (_, _, h, wd) = x.dims4()?;
        Some(grad.apply_op2_no_bwd(w, &InputGrad { stride, h, w: wd })?)
    } else {
        None
    };
    Ok((dx, dw))
}

/// Fused forward op: (x, w, bias) -> relu(x ⊛ w + bias).
struct Conv3x3BiasRelu {
    stride: usize,
}

impl CustomOp3 for Conv3x3BiasRelu {
    fn name(&self) -> &'static str {
        "conv3x3-bias-relu-cpu"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, TensorShape)> {
        let x = contiguous_f32(s1, l1, self.name())?;
        let wt = contiguous_f32(s2, l2, self.name())?;
        let bias = contiguous_f32(s3, l3, self.name())?;
        let (o, c_w) = weight_dims(l2)?;
        if l3.dims() != [o] {
            candle_core::bail!(
                "conv3x3: weight {:?} / bias {:?} must be (o, c, 3, 3) / (o)",
                l2.dims(),
                l3.dims()
            )
        }
        let g = Geom::new(l1.dims(), c_w, self.stride)?;
        let out = forward_conv(&g, x, wt, o, bias);
        Ok((CpuStorage::F32(out), TensorShape::from((g.b, o, g.ho, g.wo))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _bias: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        // The gradient before the ReLU: zero where the output was clamped.
        let grad = grad.contiguous()?.apply_op2_no_bwd(res, &ReluMask)?; // (b, o, ho, wo)
        let db = grad.apply_op1_no_bwd(&BiasGrad)?; // (o)
        let (dx, dw) = input_and_weight_grads(x, w, &grad, self.stride)?;
        Ok((dx, Some(dw), Some(db)))
    }
}

/// (grad, res) -> grad where res > 0, else 0 (the ReLU's backward, from its output).
struct ReluMask;

impl CustomOp2 for ReluMask {
    fn name(&self) -> &'static str {
        "relu-mask-cpu"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, TensorShape)> {
        let gr = contiguous_f32(s1, l1, self.name())?;
        let res = contiguous_f32(s2, l2, self.name())?;
        if l1.dims() != l2.dims() {
            candle_core::bail!("relu mask: grad {:?} vs output {:?}", l1.dims(), l2.dims())
        }
        let mut out = gr.to_vec();
        out.par_chunks_mut(1 << 14)
            .zip(res.par_chunks(1 << 14))
            .for_each(|(o, r)| {
                o.iter_mut()
                    .zip(r)
                    .for_each(|(o, r)| *o = if *r > 0.0 { *o } else { 0.0 });
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// (b, o, ho, wo) -> (o): the bias gradient, a sum over samples and pixels.
struct BiasGrad;

impl CustomOp1 for BiasGrad {
    fn name(&self) -> &'static str {
        "bias-grad-cpu"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, TensorShape)> {
        let gr = contiguous_f32(s, l, self.name())?;
        let &[_, o, ho, wo] = l.dims() else {
            candle_core::bail!("bias grad: input must be 4-d")
        };
        let n = ho * wo;
        // Per-sample channel sums, added in sample order (reproducible, as in WeightGrad).
        let partials: Vec<Vec<f32>> = gr
            .par_chunks(o * n)
            .map(|gb| gb.chunks_exact(n).map(|row| row.iter().sum::<f32>()).collect())
            .collect();
        let db = sum_in_order(partials, o);
        Ok((CpuStorage::F32(db), TensorShape::from(o)))
    }
}

/// Weight gradient: (x (b, c, h, w), g (b, o, ho, wo)) -> dL/dw (o, c, 3, 3), summed over samples.
struct WeightGrad {
    stride: usize,
}

impl CustomOp2 for WeightGrad {
    fn name(&self) -> &'static str {
        "conv3x3-cpu-weight-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, TensorShape)> {
        let x = contiguous_f32(s1, l1, self.name())?;
        let gr = contiguous_f32(s2, l2, self.name())?;
        let &[_, o, _, _] = l2.dims() else {
            candle_core::bail!("conv3x3: grad must be 4-d")
        };
        let g = Geom::new(l1.dims(), l1.dims()[1], self.stride)?;
        if l2.dims() != [g.b, o, g.ho, g.wo] {
            candle_core::bail!("conv3x3: grad {:?} does not match input {:?}", l2.dims(), l1.dims())
        }
        let (s, n, kernel) = (nhwc_shape(&g, o), g.n(), Kernel::detect());
        // Partial sums over fixed groups of samples, added in order: the result does not depend
        // on how rayon schedules the groups (runs stay bit-reproducible).
        let per = g.b.div_ceil(GROUPS).max(1);
        let partials: Vec<Vec<f32>> = gr
            .par_chunks(per * o * n)
            .zip(x.par_chunks(per * g.in_len()))
            .map(|(gs, xs)| {
                let mut dw = vec![0f32; 9 * g.c * s.o]; // [ky][kx][c][o_pad]
                let (mut xh, mut gh) = (vec![0f32; s.in_len()], vec![0f32; s.out_len()]);
                for (gb, xb) in gs.chunks_exact(o * n).zip(xs.chunks_exact(g.in_len())) {
                    conv_nhwc::chw_to_hwc(xb, g.c, g.h * g.w, g.c, &mut xh);
                    conv_nhwc::chw_to_hwc(gb, o, n, s.o, &mut gh);
                    conv_nhwc::weight_grad(kernel, &s, &xh, &gh, &mut dw);
                }
                dw
            })
            .collect();
        let mut dw = vec![0f32; o * g.k()]; // (o, c, 3, 3)
        conv_nhwc::add_weight_grad_to_torch(&sum_in_order(partials, 9 * g.c * s.o), o, g.c, s.o, &mut dw);
        Ok((CpuStorage::F32(dw), TensorShape::from((o, g.c, KS, KS))))
    }
}

/// Input gradient: (g (b, o, ho, wo), w (o, c, 3, 3)) -> dL/dx (b, c, h, w).
struct InputGrad {
    stride: usize,
    h: usize,
    w: usize,
}

impl CustomOp2 for InputGrad {
    fn name(&self) -> &'static str {
        "conv3x3-cpu-input-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, TensorShape)> {
        let gr = contiguous_f32(s1, l1, self.name())?;
        let wt = contiguous_f32(s2, l2, self.name())?;
        let (&[b, o, ho, wo], &[o_w, c, _, _]) = (l1.dims(), l2.dims()) else {
            candle_core::bail!("conv3x3: grad and weight must be 4-d")
        };
        let g = Geom::new(&[b, c, self.h, self.w], c, self.stride)?;
        if (o_w, ho, wo) != (o, g.ho, g.wo) {
            candle_core::bail!("conv3x3: grad {:?} does not match weight {:?}", l1.dims(), l2.dims())
        }
        let (n, c_pad, kernel) = (g.n(), padded(c), Kernel::detect());
        let s = Shape {
            h: g.h,
            w: g.w,
            c,
            o,
            stride: g.stride,
        };
        let wg = conv_nhwc::weights_input_grad(wt, o, c, c_pad);
        let mut dx = vec![0f32; b * g.in_len()]; // (b, c, h, w)
        dx.par_chunks_mut(g.in_len()).zip(gr.par_chunks(o * n)).for_each_init(
            || (vec![0f32; n * o], vec![0f32; g.h * g.w * c_pad], Vec::new()),
            |(gh, dxh, pad), (dxb, gb)| {
                conv_nhwc::chw_to_hwc(gb, o, n, o, gh);
                conv_nhwc::input_grad(kernel, &s, c_pad, gh, &wg, pad, dxh);
                conv_nhwc::hwc_to_chw(dxh, c, g.h * g.w, c_pad, dxb);
            },
        );
        Ok((CpuStorage::F32(dx), TensorShape::from((b, c, g.h, g.w))))
    }
}
