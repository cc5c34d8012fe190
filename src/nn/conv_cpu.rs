//! A CPU 3×3 convolution (no padding, stride 1 or 2, f32, NCHW) as candle custom ops, because
//! candle's stock CPU conv2d and its backward dominate the update (SPEC §10).
//!
//! Per sample: im2col with contiguous rows (for each (c, ky, kx), whole output rows are copied,
//! not one pixel at a time), then one GEMM over the `gemm` crate candle itself uses. Samples run
//! in parallel on rayon's pool with a single-threaded GEMM each, so threads are not
//! oversubscribed. The backward is two more ops: the weight gradient Σ_b G_b · col_bᵀ and the
//! input gradient col2im(Wᵀ · G_b); the latter is skipped when the input tracks no gradient
//! (the encoder's first layer sees the image). [`conv2d_3x3_bias_relu`] also fuses the bias and
//! the ReLU (its backward masks the gradient with the saved output and sums the bias gradient
//! itself), which the encoder uses on the CPU. Reductions over samples add fixed groups in
//! order, so results do not depend on rayon's scheduling.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor};
use gemm::{gemm, Parallelism};
use rayon::prelude::*;

use crate::Result;

/// The kernel is 3×3.
const KS: usize = 3;

/// `x (b, c, h, w) ⊛ w (o, c, 3, 3) -> (b, o, (h−3)/s+1, (w−3)/s+1)` on the CPU, no bias,
/// no padding; differentiable in both arguments. Inputs are made contiguous first.
pub fn conv2d_3x3(x: &Tensor, w: &Tensor, stride: usize) -> Result<Tensor> {
    let x = x.contiguous()?;
    let w = w.contiguous()?;
    Ok(x.apply_op2(&w, Conv3x3 { stride })?)
}

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

    /// Rows of the im2col matrix (c·9) = the GEMM depth of the forward.
    fn k(&self) -> usize {
        self.c * KS * KS
    }

    /// Output pixels per sample (ho·wo) = columns of the im2col matrix.
    fn n(&self) -> usize {
        self.ho * self.wo
    }
}

/// The contiguous f32 slice behind a storage + layout, or an error naming the op.
fn contiguous_f32<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(v) = s else {
        candle_core::bail!("{op}: only f32 is supported")
    };
    match l.contiguous_offsets() {
        Some((start, end)) => Ok(&v[start..end]),
        None => candle_core::bail!("{op}: input must be contiguous"),
    }
}

/// Fills `col` (k, n) with the patches of one sample `x` (c, h, w): row c·9 + ky·3 + kx holds
/// x[c, oy·s + ky, ox·s + kx] at column oy·wo + ox, copied a whole output row at a time.
fn im2col(g: &Geom, x: &[f32], col: &mut [f32]) {
    let n = g.n();
    for c in 0..g.c {
        for ky in 0..KS {
            for kx in 0..KS {
                let row = &mut col[((c * KS + ky) * KS + kx) * n..][..n];
                for oy in 0..g.ho {
                    let src = &x[(c * g.h + oy * g.stride + ky) * g.w + kx..];
                    let dst = &mut row[oy * g.wo..][..g.wo];
                    if g.stride == 1 {
                        dst.copy_from_slice(&src[..g.wo]);
                    } else {
                        for (d, s) in dst.iter_mut().zip(src.iter().step_by(g.stride)) {
                            *d = *s;
                        }
                    }
                }
            }
        }
    }
}

/// The adjoint of [`im2col`]: adds `col` (k, n) into one sample's gradient `dx` (c, h, w).
fn col2im_add(g: &Geom, col: &[f32], dx: &mut [f32]) {
    let n = g.n();
    for c in 0..g.c {
        for ky in 0..KS {
            for kx in 0..KS {
                let row = &col[((c * KS + ky) * KS + kx) * n..][..n];
                for oy in 0..g.ho {
                    let dst = &mut dx[(c * g.h + oy * g.stride + ky) * g.w + kx..];
                    let src = &row[oy * g.wo..][..g.wo];
                    if g.stride == 1 {
                        for (d, s) in dst[..g.wo].iter_mut().zip(src) {
                            *d += *s;
                        }
                    } else {
                        for (d, s) in dst.iter_mut().step_by(g.stride).zip(src) {
                            *d += *s;
                        }
                    }
                }
            }
        }
    }
}

/// Sample groups of the weight gradient's partial sums (fixed, so results are reproducible).
const GROUPS: usize = 16;

/// Σ of equal-length vectors, in the given order.
fn sum_in_order(parts: Vec<Vec<f32>>, len: usize) -> Vec<f32> {
    parts.into_iter().fold(vec![0f32; len], |mut acc, p| {
        acc.iter_mut().zip(&p).for_each(|(a, p)| *a += p);
        acc
    })
}

/// Row-major matrix operand for [`matmul`]: base pointer, column stride, row stride.
type Mat = (*const f32, isize, isize);

/// dst (m, n, row-major, contiguous) = [dst +] lhs (m, k) · rhs (k, n), single-threaded.
///
/// # Safety
/// `dst` must be valid for m·n writes, and `lhs`/`rhs` valid for reads at every
/// (row·rs + col·cs) of an (m, k) / (k, n) matrix; `dst` must not alias them.
unsafe fn matmul(m: usize, n: usize, k: usize, dst: &mut [f32], accumulate: bool, lhs: Mat, rhs: Mat) {
    debug_assert!(dst.len() >= m * n);
    // SAFETY: the caller guarantees the operand extents; dst is a live exclusive slice of
    // at least m·n elements, row stride n, column stride 1.
    unsafe {
        gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.0,
            lhs.1,
            lhs.2,
            rhs.0,
            rhs.1,
            rhs.2,
            1.0, // alpha: scales the old dst when accumulating
            1.0, // beta: scales lhs · rhs
            false,
            false,
            false,
            Parallelism::None,
        )
    }
}

/// (o, c) of a (o, c, 3, 3) weight.
fn weight_dims(l: &Layout) -> candle_core::Result<(usize, usize)> {
    match *l.dims() {
        [o, c, KS, KS] => Ok((o, c)),
        _ => candle_core::bail!("conv3x3: weight must be (o, c, 3, 3), got {:?}", l.dims()),
    }
}

/// The forward of both ops, per sample in parallel: im2col, then one GEMM (o, k) × (k, n).
/// With a bias, each output row starts from its bias and a ReLU follows (the fused op).
/// Returns (b, o, ho, wo).
fn forward_conv(g: &Geom, x: &[f32], wt: &[f32], o: usize, bias: Option<&[f32]>) -> Vec<f32> {
    let (k, n) = (g.k(), g.n());
    let mut out = vec![0f32; g.b * o * n]; // (b, o, ho, wo)
    out.par_chunks_mut(o * n)
        .zip(x.par_chunks(g.c * g.h * g.w))
        .for_each_init(
            || vec![0f32; k * n],
            |col, (y, xb)| {
                im2col(g, xb, col);
                if let Some(bias) = bias {
                    for (row, b) in y.chunks_exact_mut(n).zip(bias) {
                        row.fill(*b);
                    }
                }
                // SAFETY: y is (o, n), wt is (o, k) row-major, col is (k, n) row-major; all
                // sized above and disjoint.
                unsafe {
                    matmul(
                        o,
                        n,
                        k,
                        y,
                        bias.is_some(),
                        (wt.as_ptr(), 1, k as isize),
                        (col.as_ptr(), 1, n as isize),
                    )
                }
                if bias.is_some() {
                    y.iter_mut().for_each(|v| *v = v.max(0.0));
                }
            },
        );
    out
}

/// Forward op: (x, w) -> x ⊛ w.
struct Conv3x3 {
    stride: usize,
}

impl CustomOp2 for Conv3x3 {
    fn name(&self) -> &'static str {
        "conv3x3-cpu"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(s1, l1, self.name())?;
        let wt = contiguous_f32(s2, l2, self.name())?;
        let (o, c_w) = weight_dims(l2)?;
        let g = Geom::new(l1.dims(), c_w, self.stride)?;
        let out = forward_conv(&g, x, wt, o, None);
        Ok((CpuStorage::F32(out), Shape::from((g.b, o, g.ho, g.wo))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?; // (b, o, ho, wo)
        let (dx, dw) = input_and_weight_grads(x, w, &grad, self.stride)?;
        Ok((dx, Some(dw)))
    }
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
    ) -> candle_core::Result<(CpuStorage, Shape)> {
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
        let out = forward_conv(&g, x, wt, o, Some(bias));
        Ok((CpuStorage::F32(out), Shape::from((g.b, o, g.ho, g.wo))))
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
    ) -> candle_core::Result<(CpuStorage, Shape)> {
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

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
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
        Ok((CpuStorage::F32(db), Shape::from(o)))
    }
}

/// Weight gradient: (x (b, c, h, w), g (b, o, ho, wo)) -> Σ_b g_b · im2col(x_b)ᵀ as (o, c, 3, 3).
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
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(s1, l1, self.name())?;
        let gr = contiguous_f32(s2, l2, self.name())?;
        let &[_, o, _, _] = l2.dims() else {
            candle_core::bail!("conv3x3: grad must be 4-d")
        };
        let g = Geom::new(l1.dims(), l1.dims()[1], self.stride)?;
        if l2.dims() != [g.b, o, g.ho, g.wo] {
            candle_core::bail!("conv3x3: grad {:?} does not match input {:?}", l2.dims(), l1.dims())
        }
        let (k, n) = (g.k(), g.n());
        // Partial sums over fixed groups of samples, added in order: the result does not depend
        // on how rayon schedules the groups (runs stay bit-reproducible).
        let per = g.b.div_ceil(GROUPS).max(1);
        let partials: Vec<Vec<f32>> = gr
            .par_chunks(per * o * n)
            .zip(x.par_chunks(per * g.c * g.h * g.w))
            .map(|(gs, xs)| {
                let (mut dw, mut col) = (vec![0f32; o * k], vec![0f32; k * n]);
                for (gb, xb) in gs.chunks_exact(o * n).zip(xs.chunks_exact(g.c * g.h * g.w)) {
                    im2col(&g, xb, &mut col);
                    // SAFETY: dw is (o, k); gb is (o, n) row-major; col read transposed as
                    // (n, k) with row stride 1 and column stride n; all sized above.
                    unsafe {
                        matmul(
                            o,
                            k,
                            n,
                            &mut dw,
                            true,
                            (gb.as_ptr(), 1, n as isize),
                            (col.as_ptr(), n as isize, 1),
                        )
                    }
                }
                dw
            })
            .collect();
        let dw = sum_in_order(partials, o * k);
        Ok((CpuStorage::F32(dw), Shape::from((o, g.c, KS, KS))))
    }
}

/// Input gradient: (g (b, o, ho, wo), w (o, c, 3, 3)) -> col2im(wᵀ · g_b) as (b, c, h, w).
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
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let gr = contiguous_f32(s1, l1, self.name())?;
        let wt = contiguous_f32(s2, l2, self.name())?;
        let (&[b, o, ho, wo], &[o_w, c, _, _]) = (l1.dims(), l2.dims()) else {
            candle_core::bail!("conv3x3: grad and weight must be 4-d")
        };
        let g = Geom::new(&[b, c, self.h, self.w], c, self.stride)?;
        if (o_w, ho, wo) != (o, g.ho, g.wo) {
            candle_core::bail!("conv3x3: grad {:?} does not match weight {:?}", l1.dims(), l2.dims())
        }
        let (k, n) = (g.k(), g.n());
        let mut dx = vec![0f32; b * c * g.h * g.w]; // (b, c, h, w)
        dx.par_chunks_mut(c * g.h * g.w)
            .zip(gr.par_chunks(o * n))
            .for_each_init(
                || vec![0f32; k * n],
                |col, (dxb, gb)| {
                    // SAFETY: col is (k, n); wt (o, k) row-major read transposed as (k, o) with row
                    // stride 1 and column stride k; gb is (o, n) row-major; all sized above.
                    unsafe {
                        matmul(
                            k,
                            n,
                            o,
                            col,
                            false,
                            (wt.as_ptr(), k as isize, 1),
                            (gb.as_ptr(), 1, n as isize),
                        )
                    }
                    col2im_add(&g, col, dxb);
                },
            );
        Ok((CpuStorage::F32(dx), Shape::from((b, c, g.h, g.w))))
    }
}
