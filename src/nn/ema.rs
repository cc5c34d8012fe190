//! The EMA target update θ' ← (1 − η)·θ' + η·θ (docs/design.md §4, η = 0.05 for LFS), walking the target's
//! parameters by sorted name; a missing key or a shape mismatch is an error, not a skip. Each
//! target parameter is updated in place (no temporaries over the projector's 5M elements).

use candle_core::{CpuStorage, InplaceOp2, Layout};
use rayon::prelude::*;

use super::kernels::cpu_storage::{contiguous_f32, contiguous_f32_mut, PAR_CHUNK};
use super::params::expect_stored;
use super::Params;
use crate::Result;

/// Moves every target parameter towards the online parameter of the same name.
pub fn ema_update(online: &Params, target: &Params, tau: f64) -> Result<()> {
    let op = EmaOp {
        keep: (1.0 - tau) as f32,
        take: tau as f32,
    };
    for (name, t_var) in target.iter() {
        let online_value = online.get(name).map(|v| v.as_tensor());
        let o = expect_stored(name, t_var.dims(), online_value, " in the online network")?;
        t_var.as_tensor().inplace_op2(&o.contiguous()?, &op)?;
    }
    Ok(())
}

/// θ' ← θ'·keep + θ·take as a candle in-place op (dst = θ', src = θ); the same f32 arithmetic
/// as `(θ' * (1 − η)) + (θ * η)` with candle's scalar ops, on CUDA one kernel per parameter
/// (`crate::cuda::adam_ema`, compiled without fused multiply-adds).
struct EmaOp {
    keep: f32,
    take: f32,
}

impl InplaceOp2 for EmaOp {
    fn name(&self) -> &'static str {
        "ema"
    }

    fn cpu_fwd(
        &self,
        dst: &mut CpuStorage,
        dst_l: &Layout,
        src: &CpuStorage,
        src_l: &Layout,
    ) -> candle_core::Result<()> {
        let target = contiguous_f32_mut(dst, dst_l, self.name())?;
        let online = contiguous_f32(src, src_l, self.name())?;
        if target.len() != online.len() {
            candle_core::bail!("ema: {} target vs {} online elements", target.len(), online.len())
        }
        let (keep, take) = (self.keep, self.take);
        target
            .par_chunks_mut(PAR_CHUNK)
            .zip(online.par_chunks(PAR_CHUNK))
            .for_each(|(t, o)| {
                for (t, &o) in t.iter_mut().zip(o) {
                    *t = *t * keep + o * take;
                }
            });
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        dst: &mut candle_core::CudaStorage,
        dst_l: &Layout,
        src: &candle_core::CudaStorage,
        src_l: &Layout,
    ) -> candle_core::Result<()> {
        crate::cuda::adam_ema::ema(dst, dst_l, src, src_l, self.keep, self.take)
    }
}
