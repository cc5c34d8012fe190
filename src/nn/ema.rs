//! The EMA target update θ' ← (1 − η)·θ' + η·θ (SPEC §4, η = 0.05 for LFS), walking the target's
//! parameters by sorted name; a missing key or a shape mismatch is an error, not a skip. Each
//! target parameter is updated in place (no temporaries over the projector's 5M elements).

use candle_core::{CpuStorage, InplaceOp2, Layout};
use rayon::prelude::*;

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
        t_var.as_tensor().inplace_op2(o, &op)?;
    }
    Ok(())
}

/// θ' ← θ'·keep + θ·take as a candle in-place op (dst = θ', src = θ); the same f32 arithmetic
/// as `(θ' * (1 − η)) + (θ * η)` with candle's scalar ops.
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
        let (CpuStorage::F32(target), CpuStorage::F32(online)) = (dst, src) else {
            candle_core::bail!("ema: only f32 parameters are supported")
        };
        let (Some((t0, t1)), Some((o0, o1))) = (dst_l.contiguous_offsets(), src_l.contiguous_offsets()) else {
            candle_core::bail!("ema: parameters must be contiguous")
        };
        let (target, online) = (&mut target[t0..t1], &online[o0..o1]);
        if target.len() != online.len() {
            candle_core::bail!("ema: {} target vs {} online elements", target.len(), online.len())
        }
        let (keep, take) = (self.keep, self.take);
        target
            .par_chunks_mut(1 << 16)
            .zip(online.par_chunks(1 << 16))
            .for_each(|(t, o)| {
                for (t, &o) in t.iter_mut().zip(o) {
                    *t = *t * keep + o * take;
                }
            });
        Ok(())
    }
}
