//! The layers the actor and critic share: orthogonally initialised Linear layers (Proto-RL's
//! `weight_init`) and a LayerNorm with a backward (candle's fused `LayerNorm` has none when
//! its input is contiguous; docs/design.md §10).

use candle_core::{DType, Module, Tensor};
use candle_nn::Linear;
use rand::Rng;

use crate::nn::projector::init_linear;
use crate::nn::Params;
use crate::Result;

/// `{prefix}.{name}`, or `name` alone for an empty prefix (each network has its own
/// [`Params`] store, so its names start at its own modules: `trunk.0.weight`, ...).
pub fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// torch.nn.LayerNorm's default epsilon.
const LAYER_NORM_EPS: f32 = 1e-5;

/// `Linear(repr → feature) → LayerNorm(feature)`, registered as `{prefix}.0` and `{prefix}.1`
/// (no tanh after it, docs/design.md §6).
#[derive(Debug, Clone)]
pub struct Trunk {
    linear: Linear,
    ln_weight: Tensor,
    ln_bias: Tensor,
}

impl Trunk {
    pub fn new<R: Rng + ?Sized>(
        in_dim: usize,
        out_dim: usize,
        prefix: &str,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        let linear = init_linear(in_dim, out_dim, 1.0, &join(prefix, "0"), params, rng)?;
        let device = params.device().clone();
        let ln_weight = params.insert(&join(prefix, "1.weight"), Tensor::ones(out_dim, DType::F32, &device)?)?;
        let ln_bias = params.insert(&join(prefix, "1.bias"), Tensor::zeros(out_dim, DType::F32, &device)?)?;
        Ok(Self {
            linear,
            ln_weight,
            ln_bias,
        })
    }

    /// The trunk over `{prefix}.0.*` and `{prefix}.1.*` already in `params`.
    pub fn from_params(in_dim: usize, out_dim: usize, prefix: &str, params: &Params) -> Result<Self> {
        Ok(Self {
            linear: linear_from_params(in_dim, out_dim, &join(prefix, "0"), params)?,
            ln_weight: params.tensor(&join(prefix, "1.weight"), &[out_dim])?,
            ln_bias: params.tensor(&join(prefix, "1.bias"), &[out_dim])?,
        })
    }

    /// Shapes: h (b, in) -> (b, out).
    pub fn forward(&self, h: &Tensor) -> Result<Tensor> {
        let x = self.linear.forward(h)?; // (b, out)
        Ok(candle_nn::ops::layer_norm_slow(
            &x,
            &self.ln_weight,
            &self.ln_bias,
            LAYER_NORM_EPS,
        )?)
    }
}

/// `Linear(in → hidden) ReLU Linear(hidden → hidden) ReLU Linear(hidden → out)`, registered as
/// `{prefix}.{0,2,4}` (a PyTorch `nn.Sequential` whose odd indices are the ReLUs).
#[derive(Debug, Clone)]
pub struct Mlp {
    layers: [Linear; 3],
}

impl Mlp {
    pub fn new<R: Rng + ?Sized>(
        in_dim: usize,
        hidden_dim: usize,
        out_dim: usize,
        prefix: &str,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        Ok(Self {
            layers: [
                init_linear(in_dim, hidden_dim, 1.0, &join(prefix, "0"), params, rng)?,
                init_linear(hidden_dim, hidden_dim, 1.0, &join(prefix, "2"), params, rng)?,
                init_linear(hidden_dim, out_dim, 1.0, &join(prefix, "4"), params, rng)?,
            ],
        })
    }

    /// The MLP over `{prefix}.{0,2,4}.*` already in `params`.
    pub fn from_params(
        in_dim: usize,
        hidden_dim: usize,
        out_dim: usize,
        prefix: &str,
        params: &Params,
    ) -> Result<Self> {
        Ok(Self {
            layers: [
                linear_from_params(in_dim, hidden_dim, &join(prefix, "0"), params)?,
                linear_from_params(hidden_dim, hidden_dim, &join(prefix, "2"), params)?,
                linear_from_params(hidden_dim, out_dim, &join(prefix, "4"), params)?,
            ],
        })
    }

    /// Shapes: x (b, in) -> (b, out).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let [l0, l2, l4] = &self.layers;
        let x = l0.forward(x)?.relu()?; // (b, hidden)
        let x = l2.forward(&x)?.relu()?; // (b, hidden)
        Ok(l4.forward(&x)?) // (b, out)
    }
}

/// A Linear(in → out) over `{name}.weight` (out, in) and `{name}.bias` (out) in `params`.
fn linear_from_params(in_dim: usize, out_dim: usize, name: &str, params: &Params) -> Result<Linear> {
    Ok(Linear::new(
        params.tensor(&format!("{name}.weight"), &[out_dim, in_dim])?,
        Some(params.tensor(&format!("{name}.bias"), &[out_dim])?),
    ))
}
