//! The projector g: Linear(repr_dim → latent_dim) on the flattened conv features
//! (docs/design.md §4).
//! Proto-RL keeps it inside its `Encoder`; here it is a separate module so that the export
//! names it `projector.*` beside `encoder.convnet.*`.

use candle_core::{Module, Tensor};
use candle_nn::Linear;
use rand::Rng;

use super::init::orthogonal;
use super::Params;
use crate::Result;

#[derive(Debug, Clone)]
pub struct Projector {
    linear: Linear,
    /// The `state_dict` prefix of its `weight` and `bias`.
    prefix: String,
}

impl Projector {
    /// Registers `{prefix}.weight` (latent_dim, repr_dim) and `{prefix}.bias` in `params`.
    pub fn new<R: Rng + ?Sized>(
        repr_dim: usize,
        latent_dim: usize,
        prefix: &str,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        let linear = init_linear(repr_dim, latent_dim, 1.0, prefix, params, rng)?;
        Ok(Self {
            linear,
            prefix: prefix.to_string(),
        })
    }

    /// The projector over `{prefix}.weight` / `{prefix}.bias` already in `params`.
    pub fn from_params(repr_dim: usize, latent_dim: usize, prefix: &str, params: &Params) -> Result<Self> {
        let w = params.tensor(&format!("{prefix}.weight"), &[latent_dim, repr_dim])?;
        let b = params.tensor(&format!("{prefix}.bias"), &[latent_dim])?;
        Ok(Self {
            linear: Linear::new(w, Some(b)),
            prefix: prefix.to_string(),
        })
    }

    /// (latent_dim, repr_dim).
    pub fn weight(&self) -> &Tensor {
        self.linear.weight()
    }

    /// (latent_dim). Invariant: both constructors give the Linear a bias.
    pub fn bias(&self) -> &Tensor {
        self.linear.bias().expect("the projector is built with a bias")
    }

    /// `[{prefix}.weight, {prefix}.bias]`.
    pub fn param_names(&self) -> [String; 2] {
        [format!("{}.weight", self.prefix), format!("{}.bias", self.prefix)]
    }

    /// Shapes: h (b, repr_dim) -> z (b, latent_dim).
    pub fn forward(&self, h: &Tensor) -> Result<Tensor> {
        Ok(self.linear.forward(h)?)
    }
}

/// An orthogonally initialised Linear(in → out) with a zero bias, registered under `prefix`.
pub fn init_linear<R: Rng + ?Sized>(
    in_dim: usize,
    out_dim: usize,
    gain: f64,
    prefix: &str,
    params: &mut Params,
    rng: &mut R,
) -> Result<Linear> {
    let device = params.device().clone();
    let w = Tensor::from_vec(orthogonal(out_dim, in_dim, gain, rng)?, (out_dim, in_dim), &device)?;
    let w = params.insert(&format!("{prefix}.weight"), w)?;
    let b = params.insert(
        &format!("{prefix}.bias"),
        Tensor::zeros(out_dim, candle_core::DType::F32, &device)?,
    )?;
    Ok(Linear::new(w, Some(b)))
}
