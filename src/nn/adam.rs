//! Adam (Kingma & Ba), written out so its moments can be checkpointed: `candle_nn::AdamW`
//! keeps them private and defaults to weight_decay 0.01, which torch's Adam does not have
//! (docs/design.md §10). The arithmetic is torch.optim.Adam's (foreach=False) step, term for term.

use std::cell::RefCell;
use std::collections::BTreeMap;

use candle_core::backprop::GradStore;
use candle_core::{CpuStorage, InplaceOp2, Layout, Tensor};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::adam_step::{adam_elementwise, AdamCoeffs};
use super::kernels::cpu_storage::{contiguous_f32, contiguous_f32_mut, PAR_CHUNK};
use super::params::expect_stored;
use super::Params;
use crate::{Error, Result};

/// Adam hyper-parameters, all explicit (the paper: lr 1e-4, torch defaults otherwise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamConfig {
    /// Learning rate (1e-4).
    pub lr: f64,
    /// Exponential decay of the first moment (0.9).
    pub beta1: f64,
    /// Exponential decay of the second moment (0.999).
    pub beta2: f64,
    /// Added to the denominator (1e-8).
    pub eps: f64,
    /// L2 penalty added to the gradient, as torch's Adam `weight_decay` (0: the paper has none).
    pub weight_decay: f64,
}

impl Default for AdamConfig {
    fn default() -> Self {
        Self {
            lr: 1e-4,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }
}

impl AdamConfig {
    /// Checks ranges; the error names the config section `section`.
    pub fn validate(&self, section: &str) -> Result<()> {
        if self.lr <= 0.0
            || !(0.0..1.0).contains(&self.beta1)
            || !(0.0..1.0).contains(&self.beta2)
            || self.eps <= 0.0
            || self.weight_decay < 0.0
        {
            return Err(Error::Config(format!("{section}: invalid Adam settings {self:?}")));
        }
        Ok(())
    }
}

/// Adam state: step count and per-parameter moments (`exp_avg`, `exp_avg_sq`, torch's names).
///
/// A parameter on the CPU has its moments in host memory, updated in place with it. A
/// parameter on another device (a GPU) has them on that device from its first step on
/// ([`DeviceMoments`], uploaded from the host vectors), so a step moves nothing through host
/// memory; [`Adam::state_tensors`] brings them back to the host for checkpoints.
#[derive(Debug, Clone)]
pub struct Adam {
    pub cfg: AdamConfig,
    /// Number of steps taken (torch keeps one per parameter; all are equal here).
    pub step: u64,
    exp_avg: BTreeMap<String, Vec<f32>>,
    exp_avg_sq: BTreeMap<String, Vec<f32>>,
    /// The moments of parameters that live off the CPU; these supersede the host vectors.
    on_device: BTreeMap<String, DeviceMoments>,
}

/// One off-CPU parameter's moments, on its device, shaped like it.
#[derive(Debug, Clone)]
struct DeviceMoments {
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
}

impl Adam {
    pub fn new(cfg: AdamConfig, params: &Params) -> Self {
        let zeros = |_: ()| {
            params
                .iter()
                .map(|(n, v)| (n.clone(), vec![0f32; v.elem_count()]))
                .collect::<BTreeMap<_, _>>()
        };
        Self {
            cfg,
            step: 0,
            exp_avg: zeros(()),
            exp_avg_sq: zeros(()),
            on_device: BTreeMap::new(),
        }
    }

    /// One Adam step over every parameter that has a gradient in `grads`, in place: each
    /// parameter's storage is updated by [`AdamStepOp`] without a copy of θ or of its gradient.
    pub fn step(&mut self, params: &Params, grads: &GradStore) -> Result<()> {
        self.step_with(params, |_, var| grads.get(var.as_tensor()))
    }

    /// [`Adam::step`] with gradients by parameter name (computed outside candle's autograd,
    /// e.g. by the encoder's own backward).
    pub fn step_named(&mut self, params: &Params, grads: &BTreeMap<String, Tensor>) -> Result<()> {
        self.step_with(params, |name, _| grads.get(name))
    }

    fn step_with<'g>(
        &mut self,
        params: &Params,
        grad_of: impl Fn(&str, &candle_core::Var) -> Option<&'g Tensor>,
    ) -> Result<()> {
        self.step += 1;
        let AdamConfig {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
        } = self.cfg;
        let bias_correction1 = 1.0 - beta1.powi(self.step as i32);
        let bias_correction2_sqrt = (1.0 - beta2.powi(self.step as i32)).sqrt();
        let coeffs = AdamCoeffs {
            step_size: (lr / bias_correction1) as f32,
            // (1 − β) in f64 before the cast: 1 − 0.999f32 loses ~4 digits (torch passes 1 − β
            // as a Python float too).
            one_minus_beta1: (1.0 - beta1) as f32,
            one_minus_beta2: (1.0 - beta2) as f32,
            beta2: beta2 as f32,
            eps: eps as f32,
            weight_decay: weight_decay as f32,
            bias_correction2_sqrt: bias_correction2_sqrt as f32,
        };
        for (name, var) in params.iter() {
            let Some(grad) = grad_of(name, var) else {
                continue;
            };
            let (m, v) = match (self.exp_avg.get_mut(name), self.exp_avg_sq.get_mut(name)) {
                (Some(m), Some(v)) => (m, v),
                _ => return Err(Error::Shape(format!("adam: no moments for parameter {name}"))),
            };
            if !var.device().is_cpu() {
                let moments = match self.on_device.remove(name) {
                    Some(moments) => moments,
                    None => DeviceMoments {
                        exp_avg: Tensor::from_slice(m, var.shape(), var.device())?,
                        exp_avg_sq: Tensor::from_slice(v, var.shape(), var.device())?,
                    },
                };
                let moments = step_on_device(coeffs, var, grad, moments)?;
                self.on_device.insert(name.clone(), moments);
                continue;
            }
            let grad = grad.contiguous()?; // candle's gradients already are: no copy
            let op = AdamStepOp {
                coeffs,
                exp_avg: RefCell::new(m),
                exp_avg_sq: RefCell::new(v),
            };
            var.as_tensor().inplace_op2(&grad, &op)?;
        }
        Ok(())
    }

    /// Moments as host tensors named `adam.exp_avg.<param>` / `adam.exp_avg_sq.<param>`.
    pub fn state_tensors(&self, params: &Params) -> Result<BTreeMap<String, Tensor>> {
        let mut out = BTreeMap::new();
        for (name, var) in params.iter() {
            if let Some(moments) = self.on_device.get(name) {
                for (kind, t) in [("exp_avg", &moments.exp_avg), ("exp_avg_sq", &moments.exp_avg_sq)] {
                    out.insert(format!("adam.{kind}.{name}"), t.to_device(&candle_core::Device::Cpu)?);
                }
                continue;
            }
            for (kind, map) in [("exp_avg", &self.exp_avg), ("exp_avg_sq", &self.exp_avg_sq)] {
                let data = map
                    .get(name)
                    .ok_or_else(|| Error::Shape(format!("adam: no {kind} for {name}")))?;
                out.insert(
                    format!("adam.{kind}.{name}"),
                    Tensor::from_slice(data, var.shape(), &candle_core::Device::Cpu)?, // host, as the moments
                );
            }
        }
        Ok(out)
    }

    /// Restores moments saved by [`Adam::state_tensors`] and the step count.
    pub fn load_state(&mut self, params: &Params, tensors: &BTreeMap<String, Tensor>, step: u64) -> Result<()> {
        for (name, var) in params.iter() {
            for kind in ["exp_avg", "exp_avg_sq"] {
                let key = format!("adam.{kind}.{name}");
                let t = expect_stored(&key, var.dims(), tensors.get(&key), "")?;
                let data = t.flatten_all()?.to_vec1::<f32>()?;
                let map = if kind == "exp_avg" {
                    &mut self.exp_avg
                } else {
                    &mut self.exp_avg_sq
                };
                map.insert(name.clone(), data);
            }
        }
        // The next step uploads the loaded moments for parameters off the CPU.
        self.on_device.clear();
        self.step = step;
        Ok(())
    }
}

/// One Adam step of a parameter on CUDA: one fused kernel ([`crate::cuda::adam_ema`]) updates
/// θ and the moments in place (checked against [`adam_elementwise`] by
/// `examples/device_check.rs` on a GPU). No other device holds parameters.
fn step_on_device(
    c: AdamCoeffs,
    var: &candle_core::Var,
    grad: &Tensor,
    moments: DeviceMoments,
) -> Result<DeviceMoments> {
    let theta = var.as_tensor();
    #[cfg(feature = "cuda")]
    if theta.device().is_cuda() {
        let grad = grad.contiguous()?;
        crate::cuda::adam_ema::adam_step(c.kernel_scalars(), theta, &grad, &moments.exp_avg, &moments.exp_avg_sq)?;
        return Ok(moments);
    }
    let _ = (c, grad, moments);
    Err(Error::Shape(format!(
        "adam: no step for a parameter on {:?}",
        theta.device().location()
    )))
}

/// One parameter's Adam step as a candle in-place op: dst = θ, src = its gradient.
struct AdamStepOp<'a> {
    coeffs: AdamCoeffs,
    exp_avg: RefCell<&'a mut Vec<f32>>,
    exp_avg_sq: RefCell<&'a mut Vec<f32>>,
}

impl InplaceOp2 for AdamStepOp<'_> {
    fn name(&self) -> &'static str {
        "adam-step"
    }

    fn cpu_fwd(&self, dst: &mut CpuStorage, dst_l: &Layout, g: &CpuStorage, g_l: &Layout) -> candle_core::Result<()> {
        let theta = contiguous_f32_mut(dst, dst_l, self.name())?;
        let g = contiguous_f32(g, g_l, self.name())?;
        let (mut m, mut v) = (self.exp_avg.borrow_mut(), self.exp_avg_sq.borrow_mut());
        if g.len() != theta.len() || m.len() != theta.len() || v.len() != theta.len() {
            candle_core::bail!(
                "adam-step: {} parameters, {} gradients, {}/{} moments",
                theta.len(),
                g.len(),
                m.len(),
                v.len()
            )
        }
        let c = self.coeffs;
        theta
            .par_chunks_mut(PAR_CHUNK)
            .zip(g.par_chunks(PAR_CHUNK))
            .zip(m.par_chunks_mut(PAR_CHUNK))
            .zip(v.par_chunks_mut(PAR_CHUNK))
            .for_each(|(((t, g), m), v)| adam_elementwise(c, t, g, m, v));
        Ok(())
    }
}
