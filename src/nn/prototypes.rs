//! The prototypes C: `num_prototypes × latent_dim`, no bias, orthogonal init (docs/design.md §4).
//! Every forward first re-normalises each prototype row to unit length in place, outside
//! autograd (Proto-RL's `self.protos.weight.data.copy_(F.normalize(C))`).

use candle_core::{Tensor, Var};
use rand::Rng;

use super::init::orthogonal;
use super::Params;
use crate::{Error, Result};

#[derive(Debug, Clone)]
pub struct Prototypes {
    weight: Var,
}

impl Prototypes {
    /// Registers `{prefix}.weight` (num_prototypes, latent_dim).
    pub fn new<R: Rng + ?Sized>(
        num_prototypes: usize,
        latent_dim: usize,
        prefix: &str,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        let name = format!("{prefix}.weight");
        let w = orthogonal(num_prototypes, latent_dim, 1.0, rng)?;
        let w = Tensor::from_vec(w, (num_prototypes, latent_dim), params.device())?;
        params.insert(&name, w)?;
        // Invariant: the name was inserted on the line above.
        let weight = params
            .get(&name)
            .ok_or_else(|| Error::Shape(format!("{name} vanished")))?
            .clone();
        Ok(Self { weight })
    }

    /// Re-normalises every row of C to unit L2 norm, in place and outside autograd.
    pub fn normalize_in_place(&self) -> Result<()> {
        let c = self.weight.as_detached_tensor();
        self.weight.set(&l2_normalize(&c)?)?;
        Ok(())
    }

    /// The current prototype matrix (differentiable view), (num_prototypes, latent_dim).
    pub fn weight(&self) -> &Tensor {
        self.weight.as_tensor()
    }

    /// Shapes: z (b, latent) -> scores z·Cᵀ (b, num_prototypes).
    pub fn forward(&self, z: &Tensor) -> Result<Tensor> {
        Ok(z.matmul(&self.weight.as_tensor().t()?)?)
    }
}

/// Row-wise `F.normalize(x, dim=1, p=2)`: x / max(||x||, 1e-12), differentiable.
/// Shapes: (b, d) -> (b, d).
pub fn l2_normalize(x: &Tensor) -> Result<Tensor> {
    let norm = x.sqr()?.sum_keepdim(1)?.sqrt()?.maximum(1e-12)?; // (b, 1)
    Ok(x.broadcast_div(&norm)?)
}
