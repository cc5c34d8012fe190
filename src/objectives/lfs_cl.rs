//! LFS-CL (docs/design.md §5): LFS's data (LNC over frame-mask candidates) with a contrastive
//! loss instead of the clustering one: predictor v on the online projection, cosine InfoNCE
//! against the EMA target's projections of the same pairs.

use candle_core::Tensor;
use rand_chacha::ChaCha8Rng;

use super::infonce::cosine_info_nce;
use super::lnc::{lnc_pairs, LncConfig, LncLatent};
use super::objective::{Draw, Drawn, Objective, ObjectiveLoss};
use super::update_metrics::UpdateMetrics;
use crate::nn::{Params, Predictor};
use crate::Result;

#[derive(Debug, Clone)]
pub struct LfsCl {
    lnc: LncConfig,
    /// The latent LNC measures distances in.
    latent: LncLatent,
    predictor: Predictor,
    /// τ of the cosine InfoNCE.
    temperature: f64,
}

impl LfsCl {
    pub fn new(
        lnc: &LncConfig,
        latent: LncLatent,
        temperature: f64,
        latent_dim: usize,
        predictor_hidden_dim: usize,
        params: &mut Params,
        rng: &mut ChaCha8Rng,
    ) -> Result<Self> {
        Ok(Self {
            lnc: lnc.clone(),
            latent,
            predictor: Predictor::new(latent_dim, predictor_hidden_dim, "predictor", params, rng)?,
            temperature,
        })
    }
}

impl Objective for LfsCl {
    fn draw(&self, d: Draw, metrics: &mut UpdateMetrics) -> Result<Drawn> {
        lnc_pairs(d, &self.lnc, self.latent, metrics)
    }

    fn loss(&self, z: &Tensor, t: &Tensor) -> Result<ObjectiveLoss> {
        Ok(ObjectiveLoss::alone(cosine_info_nce(
            &self.predictor.forward(z)?,
            t,
            self.temperature,
        )?))
    }
}
