//! The layers the actor and critic share: orthogonally initialised Linear layers (Proto-RL's
//! `weight_init`) and a LayerNorm with a backward (candle's fused `LayerNorm` has none when
//! its input is contiguous; docs/design.md §10).

use candle_core::{CpuStorage, CustomOp2, DType, Layout, Shape, Tensor};
use candle_nn::Linear;
use rand::Rng;

use crate::nn::kernels::row_split::constant_product;
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
pub(crate) const LAYER_NORM_EPS: f32 = 1e-5;

/// What follows a trunk's LayerNorm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrunkOutput {
    /// Nothing: Proto-RL's SAC trunk (docs/design.md §6).
    LayerNorm,
    /// A tanh (`trunk.2`, no parameters): DrQ-v2's trunk (docs/design.md §13).
    LayerNormTanh,
}

/// `Linear(repr → feature) → LayerNorm(feature)` (→ tanh), registered as `{prefix}.0` and
/// `{prefix}.1`.
#[derive(Debug, Clone)]
pub struct Trunk {
    linear: Linear,
    ln_weight: Tensor,
    ln_bias: Tensor,
    output: TrunkOutput,
}

impl Trunk {
    pub fn new<R: Rng + ?Sized>(
        in_dim: usize,
        out_dim: usize,
        output: TrunkOutput,
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
            output,
        })
    }

    /// The trunk over `{prefix}.0.*` and `{prefix}.1.*` already in `params`.
    pub fn from_params(
        in_dim: usize,
        out_dim: usize,
        output: TrunkOutput,
        prefix: &str,
        params: &Params,
    ) -> Result<Self> {
        Ok(Self {
            linear: linear_from_params(in_dim, out_dim, &join(prefix, "0"), params)?,
            ln_weight: params.tensor(&join(prefix, "1.weight"), &[out_dim])?,
            ln_bias: params.tensor(&join(prefix, "1.bias"), &[out_dim])?,
            output,
        })
    }

    /// Shapes: h (b, in) -> (b, out).
    pub fn forward(&self, h: &Tensor) -> Result<Tensor> {
        let x = linear(&self.linear, h)?; // (b, out)
        let x = candle_nn::ops::layer_norm_slow(&x, &self.ln_weight, &self.ln_bias, LAYER_NORM_EPS)?;
        Ok(match self.output {
            TrunkOutput::LayerNorm => x,
            TrunkOutput::LayerNormTanh => x.tanh()?,
        })
    }

    /// The same trunk over detached copies of its parameters: no gradient reaches them.
    pub fn detached(&self) -> Self {
        Self {
            linear: detach_linear(&self.linear),
            ln_weight: self.ln_weight.detach(),
            ln_bias: self.ln_bias.detach(),
            output: self.output,
        }
    }
}

/// `x · Wᵀ + b`, computing only the gradients something can use.
///
/// Candle's matmul backward always computes both operands' gradients. When one operand is a
/// constant — the frozen encoder's (b, 39200) features feeding a trunk, or the detached weights
/// of the critic the actor's loss goes through — that gradient is work nobody reads (for a
/// trunk, as costly as the weight gradient itself). Then the product is taken outside the graph
/// and joined back to the other operand alone by [`OneSidedGrad`].
pub(crate) fn linear(linear: &Linear, x: &Tensor) -> Result<Tensor> {
    let w = linear.weight(); // (out, in)
    let y = match (x.track_op(), w.track_op()) {
        // [`OneSidedGrad`] is a CPU op; on other devices candle's matmul and its backward.
        _ if !x.device().is_cpu() => x.matmul(&w.t()?)?, // (b, out)
        (true, true) => x.matmul(&w.t()?)?,              // (b, out)
        (false, false) => constant_product(x, w)?,       // (b, out)
        (false, true) => constant_product(x, &w.detach())? // (b, out), outside the graph
            .apply_op2(w, OneSidedGrad::Weight { input: x.clone() })?,
        (true, false) => x
            .detach()
            .matmul(&w.t()?)? // (b, out), outside the graph
            .apply_op2(x, OneSidedGrad::Input { weight: w.clone() })?,
    };
    Ok(match linear.bias() {
        Some(b) => y.broadcast_add(b)?,
        None => y,
    })
}

/// The identity on a product `y = x · Wᵀ` computed outside the graph, joined to the one
/// operand that needs a gradient: its backward gives that operand its gradient and `y` none.
enum OneSidedGrad {
    /// Joined to W (out, in); x (b, in) is a constant: dW = gradᵀ · x.
    Weight { input: Tensor },
    /// Joined to x (b, in); W (out, in) is a constant: dx = grad · W.
    Input { weight: Tensor },
}

impl CustomOp2 for OneSidedGrad {
    fn name(&self) -> &'static str {
        "linear-one-sided-grad"
    }

    fn cpu_fwd(
        &self,
        y: &CpuStorage,
        layout: &Layout,
        _operand: &CpuStorage,
        _operand_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = y else {
            candle_core::bail!("{}: expects f32", self.name())
        };
        let out = match layout.contiguous_offsets() {
            Some((start, end)) => data[start..end].to_vec(),
            None => candle_core::bail!("{}: expects a contiguous product", self.name()),
        };
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }

    fn bwd(
        &self,
        _y: &Tensor,
        _operand: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let d = match self {
            OneSidedGrad::Weight { input } => grad.t()?.matmul(input)?, // (out, b) · (b, in)
            OneSidedGrad::Input { weight } => grad.matmul(weight)?,     // (b, out) · (out, in)
        };
        Ok((None, Some(d)))
    }
}

pub(crate) fn detach_linear(linear: &Linear) -> Linear {
    Linear::new(linear.weight().detach(), linear.bias().map(Tensor::detach))
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

    /// The same MLP over detached copies of its parameters: no gradient reaches them, and
    /// none is computed for them.
    pub fn detached(&self) -> Self {
        Self {
            layers: self.layers.each_ref().map(detach_linear),
        }
    }

    /// Shapes: x (b, in) -> (b, out).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let [l0, l2, l4] = &self.layers;
        let x = linear(l0, x)?.relu()?; // (b, hidden)
        let x = linear(l2, &x)?.relu()?; // (b, hidden)
        linear(l4, &x) // (b, out)
    }
}

/// A Linear(in → out) over `{name}.weight` (out, in) and `{name}.bias` (out) in `params`.
fn linear_from_params(in_dim: usize, out_dim: usize, name: &str, params: &Params) -> Result<Linear> {
    Ok(Linear::new(
        params.tensor(&format!("{name}.weight"), &[out_dim, in_dim])?,
        Some(params.tensor(&format!("{name}.bias"), &[out_dim])?),
    ))
}
