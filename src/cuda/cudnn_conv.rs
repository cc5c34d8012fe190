//! cuDNN's convolutions for the encoder on CUDA: the forward, the input gradient (backward-data)
//! and the weight gradient (backward-filter) of `y = conv(x, w)` (no padding, stride s, k × k,
//! NCHW f32), each one cuDNN call through cudarc.
//!
//! The math type follows `run.precision`: `fp32` → `CUDNN_FMA_MATH` (FP32 arithmetic only),
//! `tf32` → `CUDNN_DEFAULT_MATH` (TF32 allowed, as PyTorch's `cudnn.allow_tf32`). candle's own
//! `cudnn` feature leaves the default, which runs f32 convolutions in TF32 on Hopper. The
//! algorithm is chosen once per shape and remembered: the fastest of every algorithm cuDNN runs
//! for it, each timed on the call's own buffers (as PyTorch's `cudnn.benchmark` does with
//! `cudnnFind*`). Checked on a GPU by `examples/device_check.rs` against the CPU's kernels;
//! nothing here runs on a CPU.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::thread::LocalKey;

use candle_core::cuda::cudarc::cudnn::safe::{
    ConvBackwardData, ConvBackwardFilter, ConvDescriptor, ConvForward, Cudnn, FilterDescriptor, TensorDescriptor,
};
use candle_core::cuda::cudarc::cudnn::sys::{
    cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionFwdAlgo_t, cudnnConvolutionMode_t,
    cudnnMathType_t, cudnnTensorFormat_t,
};
use candle_core::cuda::cudarc::driver::CudaSlice;
use candle_core::cuda::{CudaDevice, CudaStorage, DeviceId, WrapErr};
use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};

use crate::Result;

thread_local! {
    // cuDNN handles are neither Send nor Sync: one per thread and device, as candle keeps its own.
    static HANDLES: RefCell<HashMap<DeviceId, Arc<Cudnn>>> = RefCell::new(HashMap::new());
}

/// What an algorithm is chosen for: the device, the shapes of x, w and y, the stride and
/// whether TF32 is allowed.
type AlgoKey = (DeviceId, [usize; 4], [usize; 4], [usize; 4], usize, bool);

/// One part's chosen algorithms by [`AlgoKey`], each with its workspace's bytes.
type Chosen<A> = RefCell<HashMap<AlgoKey, (A, usize)>>;

thread_local! {
    // The timed choice per convolution and part, made once (an LFS update runs ~19
    // convolutions of a handful of shapes), as PyTorch caches its own.
    static FORWARD_CHOSEN: Chosen<cudnnConvolutionFwdAlgo_t> = RefCell::new(HashMap::new());
    static DATA_CHOSEN: Chosen<cudnnConvolutionBwdDataAlgo_t> = RefCell::new(HashMap::new());
    static FILTER_CHOSEN: Chosen<cudnnConvolutionBwdFilterAlgo_t> = RefCell::new(HashMap::new());
}

/// Algorithms needing a larger workspace are not tried (some FFT ones ask for gigabytes).
const MAX_WORKSPACE_BYTES: usize = 1 << 30;

/// The fastest of `candidates` and its workspace's bytes (`size(algo)`). `launch(algo, ws)` runs
/// the convolution with `algo` on the call's buffers; an algorithm whose size or launch fails
/// (cuDNN cannot run it for this shape) or whose workspace is over [`MAX_WORKSPACE_BYTES`] is
/// skipped. Each runs twice, the second timed between two waits for the device; at least one
/// must run.
fn fastest<A: Copy + std::fmt::Debug>(
    dev: &CudaDevice,
    candidates: &[A],
    size: impl Fn(A) -> candle_core::Result<usize>,
    mut launch: impl FnMut(A, &mut CudaSlice<u8>) -> candle_core::Result<()>,
) -> candle_core::Result<(A, usize)> {
    let stream = dev.cuda_stream();
    let mut best: Option<(A, usize, std::time::Duration)> = None;
    for &algo in candidates {
        let Ok(bytes) = size(algo) else { continue };
        if bytes > MAX_WORKSPACE_BYTES {
            continue;
        }
        // SAFETY: a workspace, written by cuDNN before it reads it.
        let mut ws = unsafe { dev.alloc::<u8>(bytes.max(1))? };
        if launch(algo, &mut ws).is_err() {
            continue;
        }
        stream.synchronize().w()?;
        let start = std::time::Instant::now();
        if launch(algo, &mut ws).is_err() {
            continue;
        }
        stream.synchronize().w()?;
        let took = start.elapsed();
        if best.is_none_or(|(_, _, t)| took < t) {
            best = Some((algo, bytes, took));
        }
    }
    best.map(|(algo, bytes, _)| (algo, bytes))
        .ok_or_else(|| candle_core::Error::Msg(format!("cudnn_conv: none of {candidates:?} runs for this shape")))
}

/// Every algorithm of each part that cuDNN may run, timed by [`fastest`] once per shape.
const FORWARD_ALGOS: [cudnnConvolutionFwdAlgo_t; 8] = {
    use cudnnConvolutionFwdAlgo_t as F;
    [
        F::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
        F::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
        F::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
        F::CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
        F::CUDNN_CONVOLUTION_FWD_ALGO_FFT,
        F::CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
        F::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
        F::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
    ]
};
const DATA_ALGOS: [cudnnConvolutionBwdDataAlgo_t; 6] = {
    use cudnnConvolutionBwdDataAlgo_t as D;
    [
        D::CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
        D::CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
        D::CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT,
        D::CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
        D::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
        D::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
    ]
};
const FILTER_ALGOS: [cudnnConvolutionBwdFilterAlgo_t; 6] = {
    use cudnnConvolutionBwdFilterAlgo_t as W;
    [
        W::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
        W::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
        W::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
        W::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
        W::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
        W::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
    ]
};

/// One part's convolution: the algorithm `chosen` for `key` (the [`fastest`] of `all`, timed on
/// the call's own buffers the first time, then remembered), then one `launch(algo, workspace)`
/// with it; `size(algo)` is its workspace's bytes.
fn run_part<A: Copy + std::fmt::Debug>(
    dev: &CudaDevice,
    chosen: &'static LocalKey<Chosen<A>>,
    key: AlgoKey,
    all: &[A],
    size: impl Fn(A) -> candle_core::Result<usize>,
    mut launch: impl FnMut(A, &mut CudaSlice<u8>) -> candle_core::Result<()>,
) -> candle_core::Result<()> {
    let (algo, bytes) = match chosen.with(|c| c.borrow().get(&key).copied()) {
        Some(found) => found,
        None => {
            let picked = fastest(dev, all, &size, &mut launch)?;
            chosen.with(|c| c.borrow_mut().insert(key, picked));
            picked
        }
    };
    // SAFETY: a workspace, written by cuDNN before it reads it.
    let mut ws = unsafe { dev.alloc::<u8>(bytes.max(1))? };
    launch(algo, &mut ws)
}

fn handle(dev: &CudaDevice) -> candle_core::Result<Arc<Cudnn>> {
    HANDLES.with(|h| {
        if let Some(c) = h.borrow().get(&dev.id()) {
            return Ok(c.clone());
        }
        let c = Cudnn::new(dev.cuda_stream())?;
        h.borrow_mut().insert(dev.id(), c.clone());
        Ok(c)
    })
}

/// Whether `x` is where these run: f32 on a CUDA device.
pub fn applies(x: &Tensor) -> bool {
    x.device().is_cuda() && x.dtype() == candle_core::DType::F32
}

/// y = conv(x, w): x (b, c, h, w), w (o, c, k, k) → (b, o, ho, wo), on storages, for an op that
/// goes on with y (`super::conv_block`).
pub fn forward_storage(
    x: &CudaStorage,
    x_l: &Layout,
    w: &CudaStorage,
    w_l: &Layout,
    stride: usize,
) -> candle_core::Result<(CudaStorage, Shape)> {
    Conv {
        stride,
        part: Part::Forward,
    }
    .cuda_fwd(x, x_l, w, w_l)
}

/// dL/dx (b, c, h, w) of y = conv(x, w) for dL/dy `g` (b, o, ho, wo); `x_hw` is x's (h, w).
pub fn backward_data(w: &Tensor, g: &Tensor, x_hw: (usize, usize), stride: usize) -> Result<Tensor> {
    let part = Part::Data { x_hw };
    Ok(g.contiguous()?
        .apply_op2_no_bwd(&w.contiguous()?, &Conv { stride, part })?)
}

/// dL/dw (o, c, k, k) of y = conv(x, w) for dL/dy `g` (b, o, ho, wo).
pub fn backward_filter(x: &Tensor, g: &Tensor, k: usize, stride: usize) -> Result<Tensor> {
    let part = Part::Filter { k };
    Ok(x.contiguous()?
        .apply_op2_no_bwd(&g.contiguous()?, &Conv { stride, part })?)
}

/// Which of the three a [`Conv`] computes, with what its arguments' shapes do not say.
#[derive(Debug, Clone, Copy)]
enum Part {
    /// args (x, w) → y.
    Forward,
    /// args (g, w) → dx of spatial size `x_hw` (a stride > 1 does not say it).
    Data { x_hw: (usize, usize) },
    /// args (x, g) → dw of size k × k.
    Filter { k: usize },
}

struct Conv {
    stride: usize,
    part: Part,
}

/// The convolution's shapes: x (b, c, h, w), w (o, c, k, k), y (b, o, ho, wo).
struct Shapes {
    x: [usize; 4],
    w: [usize; 4],
    y: [usize; 4],
}

/// cuDNN's descriptors of one convolution: the operation and its three tensors.
struct Descriptors {
    conv: ConvDescriptor<f32>,
    x: TensorDescriptor<f32>,
    w: FilterDescriptor<f32>,
    y: TensorDescriptor<f32>,
}

impl Conv {
    /// The descriptors for shapes `sh`, f32 NCHW, the math type FP32 unless `tf32`.
    fn descriptors(&self, cudnn: &Arc<Cudnn>, sh: &Shapes, tf32: bool) -> candle_core::Result<Descriptors> {
        let s = self.stride as i32;
        let mode = cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION;
        let mut conv = cudnn.create_conv2d::<f32>([0, 0], [s, s], [1, 1], mode)?;
        conv.set_math_type(match tf32 {
            true => cudnnMathType_t::CUDNN_DEFAULT_MATH,
            false => cudnnMathType_t::CUDNN_FMA_MATH,
        })?;
        let nchw = cudnnTensorFormat_t::CUDNN_TENSOR_NCHW;
        let i32s = |d: [usize; 4]| d.map(|v| v as i32);
        Ok(Descriptors {
            conv,
            x: cudnn.create_4d_tensor::<f32>(nchw, i32s(sh.x))?,
            w: cudnn.create_4d_filter::<f32>(nchw, i32s(sh.w))?,
            y: cudnn.create_4d_tensor::<f32>(nchw, i32s(sh.y))?,
        })
    }

    fn shapes(&self, a: &Layout, b: &Layout) -> candle_core::Result<Shapes> {
        let s = self.stride;
        let out = |n: usize, k: usize| if n >= k { (n - k) / s + 1 } else { 0 };
        let (a, b) = (a.shape().dims4()?, b.shape().dims4()?);
        Ok(match self.part {
            Part::Forward => {
                let ((bs, c, h, w), (o, _, k, _)) = (a, b);
                Shapes {
                    x: [bs, c, h, w],
                    w: [o, c, k, k],
                    y: [bs, o, out(h, k), out(w, k)],
                }
            }
            Part::Data { x_hw: (h, w) } => {
                let ((bs, o, ho, wo), (_, c, k, _)) = (a, b);
                Shapes {
                    x: [bs, c, h, w],
                    w: [o, c, k, k],
                    y: [bs, o, ho, wo],
                }
            }
            Part::Filter { k } => {
                let ((bs, c, h, w), (_, o, ho, wo)) = (a, b);
                Shapes {
                    x: [bs, c, h, w],
                    w: [o, c, k, k],
                    y: [bs, o, ho, wo],
                }
            }
        })
    }
}

impl CustomOp2 for Conv {
    fn name(&self) -> &'static str {
        "conv2d-cudnn"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!("cudnn_conv: cuDNN's convolutions run on CUDA only")
    }

    fn cuda_fwd(
        &self,
        a: &CudaStorage,
        a_l: &Layout,
        b: &CudaStorage,
        b_l: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        for l in [a_l, b_l] {
            if !l.is_contiguous() {
                candle_core::bail!("cudnn_conv: a non-contiguous argument");
            }
        }
        let dev = a.device.clone();
        let sh = self.shapes(a_l, b_l)?;
        let tf32 = candle_core::cuda::gemm_reduced_precision_f32();
        let key: AlgoKey = (dev.id(), sh.x, sh.w, sh.y, self.stride, tf32);
        let d = self.descriptors(&handle(&dev)?, &sh, tf32)?;
        let (conv, x, w, y) = (&d.conv, &d.x, &d.w, &d.y);
        // Each argument from its layout's start (contiguous, checked above).
        let a_v = a.as_cuda_slice::<f32>()?.slice(a_l.start_offset()..);
        let b_v = b.as_cuda_slice::<f32>()?.slice(b_l.start_offset()..);
        let out_dims = match self.part {
            Part::Forward => sh.y,
            Part::Data { .. } => sh.x,
            Part::Filter { .. } => sh.w,
        };
        // SAFETY: every element is written by the convolution (beta = 0).
        let mut out = unsafe { dev.alloc::<f32>(out_dims.iter().product())? };
        // SAFETY (each launch): the descriptors are the buffers' shapes, f32 NCHW.
        match self.part {
            Part::Forward => {
                let op = ConvForward { conv, x, w, y }; // a = x, b = w
                let size = |algo| Ok(op.get_workspace_size(algo)?);
                run_part(&dev, &FORWARD_CHOSEN, key, &FORWARD_ALGOS, size, |algo, ws| {
                    unsafe { op.launch(algo, Some(ws), (1f32, 0f32), &a_v, &b_v, &mut out)? };
                    Ok(())
                })?;
            }
            Part::Data { .. } => {
                let op = ConvBackwardData { conv, dx: x, w, dy: y }; // a = g (dy), b = w
                let size = |algo| Ok(op.get_workspace_size(algo)?);
                run_part(&dev, &DATA_CHOSEN, key, &DATA_ALGOS, size, |algo, ws| {
                    unsafe { op.launch(algo, Some(ws), (1f32, 0f32), &mut out, &b_v, &a_v)? };
                    Ok(())
                })?;
            }
            Part::Filter { .. } => {
                let op = ConvBackwardFilter { conv, x, dw: w, dy: y }; // a = x, b = g (dy)
                let size = |algo| Ok(op.get_workspace_size(algo)?);
                run_part(&dev, &FILTER_CHOSEN, key, &FILTER_ALGOS, size, |algo, ws| {
                    unsafe { op.launch(algo, Some(ws), (1f32, 0f32), &a_v, &mut out, &b_v)? };
                    Ok(())
                })?;
            }
        }
        Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from(out_dims.to_vec())))
    }
}
