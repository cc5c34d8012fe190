//! The EMA target update θ' ← (1 − η)·θ' + η·θ (SPEC §4, η = 0.05 for LFS), walking the target's
//! parameters by sorted name; a missing key or a shape mismatch is an error, not a skip.

use super::params::expect_stored;
use super::Params;
use crate::Result;

/// Moves every target parameter towards the online parameter of the same name.
pub fn ema_update(online: &Params, target: &Params, tau: f64) -> Result<()> {
    for (name, t_var) in target.iter() {
        let online_value = online.get(name).map(|v| v.as_tensor());
        let o = expect_stored(name, t_var.dims(), online_value, " in the online network")?;
        let updated = ((t_var.as_detached_tensor() * (1.0 - tau))? + (o.detach() * tau)?)?;
        t_var.set(&updated)?;
    }
    Ok(())
}
