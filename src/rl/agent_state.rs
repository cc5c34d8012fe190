//! An agent's checkpoint state, the same for every agent: each parameter store under its
//! prefix (`actor.trunk.0.weight`, …), each optimiser's moments under its own
//! (`actor_opt.adam.…`) and its step count in the metadata (`lfs.actor_opt_step`).

use std::collections::{BTreeMap, HashMap};

use candle_core::Tensor;

use crate::nn::checkpoint::strip_prefix;
use crate::nn::{Adam, Params};
use crate::{Error, Result};

/// An optimiser with its checkpoint prefix and the store it steps.
pub struct Optimised<'a> {
    prefix: &'static str,
    adam: &'a Adam,
    params: &'a Params,
}

impl<'a> Optimised<'a> {
    pub fn new(prefix: &'static str, adam: &'a Adam, params: &'a Params) -> Self {
        Self { prefix, adam, params }
    }
}

/// The tensors and metadata of `stores` and `optimisers`.
pub fn save(
    stores: &[(&'static str, &Params)],
    optimisers: &[Optimised<'_>],
) -> Result<(BTreeMap<String, Tensor>, HashMap<String, String>)> {
    let mut tensors = BTreeMap::new();
    for (prefix, params) in stores {
        for (name, t) in params.snapshot()? {
            tensors.insert(format!("{prefix}.{name}"), t);
        }
    }
    let mut meta = HashMap::new();
    for o in optimisers {
        for (name, t) in o.adam.state_tensors(o.params)? {
            tensors.insert(format!("{}.{name}", o.prefix), t);
        }
        meta.insert(step_key(o.prefix), o.adam.step.to_string());
    }
    Ok((tensors, meta))
}

/// Restores every store of [`save`]; errors name a missing or mis-shaped tensor.
pub fn load_params(stores: &[(&'static str, &Params)], tensors: &BTreeMap<String, Tensor>) -> Result<()> {
    for (prefix, params) in stores {
        params.load_from(&strip_prefix(tensors, &format!("{prefix}.")))?;
    }
    Ok(())
}

/// Restores the optimiser `prefix` of [`save`] over `params`.
pub fn load_optimiser(
    prefix: &str,
    adam: &mut Adam,
    params: &Params,
    tensors: &BTreeMap<String, Tensor>,
    meta: &HashMap<String, String>,
) -> Result<()> {
    let key = step_key(prefix);
    let step = meta
        .get(&key)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::Shape(format!("no `{key}` in the checkpoint metadata")))?;
    adam.load_state(params, &strip_prefix(tensors, &format!("{prefix}.")), step)
}

fn step_key(prefix: &str) -> String {
    format!("lfs.{prefix}_step")
}

/// An error naming `what` unless `v` is finite (a diverged loss stops the run).
pub fn check_finite(what: &str, v: f64) -> Result<()> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(Error::Training(format!("{what} is {v}")))
    }
}
