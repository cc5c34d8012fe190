//! The EMA target update θ' ← (1 − η)·θ' + η·θ (SPEC §4, η = 0.05 for LFS), walking the target's
//! parameters by sorted name; a missing key or a shape mismatch is an error, not a skip.

use super::Params;
use crate::{Error, Result};

/// Moves every target parameter towards the online parameter of the same name.
pub fn ema_update(online: &Params, target: &Params, tau: f64) -> Result<()> {
    for (name, t_var) in target.iter() {
        let o_var = online.get(name).ok_or_else(|| Error::CheckpointMismatch {
            key: name.clone(),
            expected: format!("{:?} in the online network", t_var.dims()),
            got: "missing".to_string(),
        })?;
        if o_var.dims() != t_var.dims() {
            return Err(Error::CheckpointMismatch {
                key: name.clone(),
                expected: format!("{:?}", t_var.dims()),
                got: format!("{:?}", o_var.dims()),
            });
        }
        let updated = ((t_var.as_detached_tensor() * (1.0 - tau))? + (o_var.as_detached_tensor() * tau)?)?;
        t_var.set(&updated)?;
    }
    Ok(())
}
