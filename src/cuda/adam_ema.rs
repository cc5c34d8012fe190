//! Adam's step and the EMA target update on CUDA, one kernel per parameter (with candle's ops
//! ~12 and ~4 launches: the LFS update's optimiser part took 3.29 ms so on an H200 and 0.29 ms
//! with these, BENCHMARKS.md 2026-11-28). The arithmetic is `crate::nn::adam`'s
//! `adam_elementwise` and `crate::nn::ema`'s `EmaOp` term for term, compiled by NVRTC without
//! fused multiply-adds, so each element is rounded as the CPU's f32 loop rounds it. Checked on a
//! GPU by `examples/device_check.rs`; nothing here runs on a CPU.

use std::sync::OnceLock;

use candle_core::cuda::cudarc::driver::PushKernelArg;
use candle_core::cuda::{CudaDevice, CudaStorage, WrapErr};
use candle_core::{CpuStorage, InplaceOp2, Layout, Storage, Tensor};

use super::runtime::{compiled, contiguous_len, launch_config};
use crate::{Error, Result};

/// The two kernels. Each thread strides over the elements (`n` may exceed one grid).
const SOURCE: &str = r#"
extern "C" __global__ void lfs_adam_step(
    float* theta, const float* grad, float* exp_avg, float* exp_avg_sq, unsigned int n,
    float step_size, float one_minus_beta1, float one_minus_beta2, float beta2, float eps,
    float weight_decay, float bias_correction2_sqrt) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float t = theta[i];
        float g = grad[i] + weight_decay * t;
        float m = exp_avg[i];
        m += (g - m) * one_minus_beta1;
        float v = exp_avg_sq[i] * beta2 + one_minus_beta2 * g * g;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        float denom = sqrtf(v) / bias_correction2_sqrt + eps;
        theta[i] = t - step_size * m / denom;
    }
}

extern "C" __global__ void lfs_ema(float* target, const float* online, unsigned int n, float keep, float take) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        target[i] = target[i] * keep + online[i] * take;
    }
}
"#;

/// The module's name in candle's per-device cache of custom modules.
const MODULE: &str = "lfs_cuda_step";

/// The kernels' PTX, compiled on first use.
fn ptx() -> candle_core::Result<&'static str> {
    static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    compiled(&PTX, SOURCE, "Adam/EMA")
}

/// One Adam step of `theta` (a parameter on CUDA) in place, its moments in place too, with the
/// step's scalars in the kernel's order: step size, 1 − β1, 1 − β2, β2, ε, weight decay and
/// √(bias correction 2) (`crate::nn::adam_step::AdamCoeffs::kernel_scalars`).
pub fn adam_step(
    scalars: [f32; 7],
    theta: &Tensor,
    grad: &Tensor,
    exp_avg: &Tensor,
    exp_avg_sq: &Tensor,
) -> Result<()> {
    let n = theta.elem_count();
    for (what, t) in [("gradient", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)] {
        if t.dims() != theta.dims() || !t.is_contiguous() || t.dtype() != candle_core::DType::F32 {
            return Err(Error::Shape(format!(
                "adam (CUDA): parameter {:?}, its {what} {:?} ({:?}, contiguous: {})",
                theta.dims(),
                t.dims(),
                t.dtype(),
                t.is_contiguous()
            )));
        }
    }
    let grad = grad.detach(); // the op records nothing either way
    let op = AdamStepOp {
        scalars,
        exp_avg,
        exp_avg_sq,
        n,
    };
    theta.inplace_op2(&grad, &op)?;
    Ok(())
}

/// θ ← θ − Adam's update (dst = θ, src = its gradient); the moments are the op's own tensors.
struct AdamStepOp<'a> {
    scalars: [f32; 7],
    exp_avg: &'a Tensor,
    exp_avg_sq: &'a Tensor,
    n: usize,
}

impl InplaceOp2 for AdamStepOp<'_> {
    fn name(&self) -> &'static str {
        "adam-step-cuda"
    }

    fn cpu_fwd(&self, _: &mut CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> candle_core::Result<()> {
        candle_core::bail!("adam-step-cuda runs on CUDA only (the CPU has adam's own op)")
    }

    fn cuda_fwd(
        &self,
        dst: &mut CudaStorage,
        dst_l: &Layout,
        g: &CudaStorage,
        g_l: &Layout,
    ) -> candle_core::Result<()> {
        let n = contiguous_len(dst_l, "θ")?;
        if contiguous_len(g_l, "the gradient")? != n || n != self.n {
            candle_core::bail!("adam-step-cuda: {n} parameters, {} gradients", g_l.shape().elem_count())
        }
        let dev: CudaDevice = dst.device.clone();
        let func = dev.get_or_load_custom_func("lfs_adam_step", MODULE, ptx()?)?;
        // The moments: Adam's own tensors (detached, never in a graph, never shared), written
        // by the kernel through their device pointers, as candle's kernels write their outputs.
        let (m_store, m_l) = self.exp_avg.storage_and_layout();
        let (v_store, v_l) = self.exp_avg_sq.storage_and_layout();
        let (Storage::Cuda(m), Storage::Cuda(v)) = (&*m_store, &*v_store) else {
            candle_core::bail!("adam-step-cuda: the moments are not on CUDA")
        };
        let m = m.as_cuda_slice::<f32>()?.slice(m_l.start_offset()..);
        let v = v.as_cuda_slice::<f32>()?.slice(v_l.start_offset()..);
        let g = g.as_cuda_slice::<f32>()?.slice(g_l.start_offset()..);
        let start = dst_l.start_offset();
        let mut theta = dst.as_cuda_slice_mut::<f32>()?.slice_mut(start..);
        let n32 = n as u32;
        let mut builder = func.builder();
        builder.arg(&mut theta);
        builder.arg(&g);
        builder.arg(&m);
        builder.arg(&v);
        builder.arg(&n32);
        for scalar in &self.scalars {
            builder.arg(scalar);
        }
        // SAFETY: the kernel's arguments are as declared in SOURCE; every pointer covers n f32s.
        unsafe { builder.launch(launch_config(n)) }.w()?;
        Ok(())
    }
}

/// θ' ← θ'·keep + θ·take in place on CUDA (`dst` the target parameter θ', `src` the online θ):
/// the CUDA side of the EMA's in-place op (`crate::nn::ema`).
pub fn ema(
    dst: &mut CudaStorage,
    dst_l: &Layout,
    src: &CudaStorage,
    src_l: &Layout,
    keep: f32,
    take: f32,
) -> candle_core::Result<()> {
    let n = contiguous_len(dst_l, "the target parameter")?;
    if contiguous_len(src_l, "the online parameter")? != n {
        candle_core::bail!("ema-cuda: {n} target vs {} online elements", src_l.shape().elem_count())
    }
    let dev: CudaDevice = dst.device.clone();
    let func = dev.get_or_load_custom_func("lfs_ema", MODULE, ptx()?)?;
    let online = src.as_cuda_slice::<f32>()?.slice(src_l.start_offset()..);
    let start = dst_l.start_offset();
    let mut target = dst.as_cuda_slice_mut::<f32>()?.slice_mut(start..);
    let n32 = n as u32;
    let mut builder = func.builder();
    builder.arg(&mut target);
    builder.arg(&online);
    builder.arg(&n32);
    builder.arg(&keep);
    builder.arg(&take);
    // SAFETY: the kernel's arguments are as declared in SOURCE; both pointers cover n f32s.
    unsafe { builder.launch(launch_config(n)) }.w()?;
    Ok(())
}
