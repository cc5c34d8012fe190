//! A named parameter store with a deterministic (sorted) order.
//!
//! `candle_nn::VarMap` is a `HashMap`, so its `all_vars()` order is unspecified (candle's own
//! reinforcement-learning example, ddpg.rs, trips over this); checkpoints, EMA and Adam walk
//! parameters by sorted name instead.

use std::collections::BTreeMap;

use candle_core::{Device, Tensor, Var};

use crate::device::Backend;

use crate::{Error, Result};

/// The tensor stored under `key`, checked to have the shape `dims`. A missing key or another
/// shape is an [`Error::CheckpointMismatch`] naming the key; `missing_from` is appended to the
/// expected shape when the key is missing (e.g. " in the online network").
pub(crate) fn expect_stored<'a>(
    key: &str,
    dims: &[usize],
    stored: Option<&'a Tensor>,
    missing_from: &str,
) -> Result<&'a Tensor> {
    let mismatch = |expected: String, got: String| Error::CheckpointMismatch {
        key: key.to_string(),
        expected,
        got,
    };
    match stored {
        None => Err(mismatch(format!("{dims:?}{missing_from}"), "missing".to_string())),
        Some(t) if t.dims() != dims => Err(mismatch(format!("{dims:?}"), format!("{:?}", t.dims()))),
        Some(t) => Ok(t),
    }
}

/// Parameters of one network (online or target), keyed by PyTorch `state_dict` names, all on
/// one device.
#[derive(Debug, Clone)]
pub struct Params {
    vars: BTreeMap<String, Var>,
    backend: Backend,
}

impl Params {
    /// An empty store whose parameters live on a device (`&Device`: its default compute, or a
    /// [`Backend`]).
    pub fn new(backend: impl Into<Backend>) -> Self {
        Self {
            vars: BTreeMap::new(),
            backend: backend.into(),
        }
    }

    /// Where the parameters live; modules create their initial values here.
    pub fn device(&self) -> &Device {
        &self.backend.device
    }

    /// The device and how the encoder over these parameters computes.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Adds a parameter initialised to `init` (moved to the store's device); returns the tensor
    /// view a module keeps.
    pub fn insert(&mut self, name: &str, init: Tensor) -> Result<Tensor> {
        if self.vars.contains_key(name) {
            return Err(Error::Shape(format!("parameter {name} defined twice")));
        }
        let var = Var::from_tensor(&init.to_device(self.device())?)?;
        let tensor = var.as_tensor().clone();
        self.vars.insert(name.to_string(), var);
        Ok(tensor)
    }

    /// A params store on `backend` (or a `&Device`) holding copies of `tensors` (keys = names).
    pub fn from_tensors(tensors: &BTreeMap<String, Tensor>, backend: impl Into<Backend>) -> Result<Self> {
        let mut params = Self::new(backend);
        for (name, t) in tensors {
            params.insert(name, t.copy()?)?;
        }
        Ok(params)
    }

    /// The module view of parameter `name`, checked against `shape`.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let stored = self.vars.get(name).map(|v| v.as_tensor());
        Ok(expect_stored(name, shape, stored, "")?.clone())
    }

    pub fn get(&self, name: &str) -> Option<&Var> {
        self.vars.get(name)
    }

    /// The parameters whose names start with `prefix`, sharing their storage with these: an
    /// optimiser over the subset updates this store's tensors.
    pub fn subset(&self, prefix: &str) -> Params {
        Params {
            vars: self
                .vars
                .iter()
                .filter(|(name, _)| name.starts_with(prefix))
                .map(|(name, var)| (name.clone(), var.clone()))
                .collect(),
            backend: self.backend.clone(),
        }
    }

    /// Sorted (name, var) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Var)> {
        self.vars.iter()
    }

    pub fn names(&self) -> Vec<String> {
        self.vars.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.vars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// Overwrites every parameter from `tensors` (keys = names). Errors on a missing key or a
    /// shape mismatch, naming the key.
    pub fn load_from(&self, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
        for (name, var) in &self.vars {
            let src = expect_stored(name, var.dims(), tensors.get(name), "")?;
            var.set(&src.to_dtype(var.dtype())?.to_device(var.device())?)?;
        }
        Ok(())
    }

    /// `grads`' entries for these parameters, keyed by name (what [`crate::nn::Adam::step_named`]
    /// takes); a parameter the gradients do not reach has none.
    pub fn grads_by_name(&self, grads: &candle_core::backprop::GradStore) -> BTreeMap<String, Tensor> {
        self.vars
            .iter()
            .filter_map(|(name, var)| grads.get(var.as_tensor()).map(|g| (name.clone(), g.clone())))
            .collect()
    }

    /// Detached copies of every parameter, keyed by name (for checkpoints and export).
    pub fn snapshot(&self) -> Result<BTreeMap<String, Tensor>> {
        let mut out = BTreeMap::new();
        for (name, var) in &self.vars {
            let t = var.as_detached_tensor();
            // Host tensors whatever the device (checkpoints and exports do not depend on it);
            // on the CPU a `copy`, so later in-place updates of the Var do not alias the snapshot.
            let host = if t.device().is_cpu() {
                t.copy()?
            } else {
                t.to_device(&Device::Cpu)?
            };
            out.insert(name.clone(), host);
        }
        Ok(out)
    }
}
