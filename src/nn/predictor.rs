//! The predictor v: Linear(latent → hidden) ReLU Linear(hidden → latent) (docs/design.md §4; the paper's
//! table says 1024 hidden units, Proto-RL used 512). Names `predictor.0.*`, `predictor.2.*`
//! mirror PyTorch's `nn.Sequential` indices.

use candle_core::{Module, Tensor};
use candle_nn::Linear;
use rand::Rng;

use super::projector::init_linear;
use super::Params;
use crate::Result;

#[derive(Debug, Clone)]
pub struct Predictor {
    fc0: Linear,
    fc2: Linear,
}

impl Predictor {
    pub fn new<R: Rng + ?Sized>(
        latent_dim: usize,
        hidden_dim: usize,
        prefix: &str,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        let fc0 = init_linear(latent_dim, hidden_dim, 1.0, &format!("{prefix}.0"), params, rng)?;
        let fc2 = init_linear(hidden_dim, latent_dim, 1.0, &format!("{prefix}.2"), params, rng)?;
        Ok(Self { fc0, fc2 })
    }

    /// Shapes: z (b, latent) -> (b, latent).
    pub fn forward(&self, z: &Tensor) -> Result<Tensor> {
        let h = self.fc0.forward(z)?.relu()?; // (b, hidden)
        Ok(self.fc2.forward(&h)?)
    }
}
