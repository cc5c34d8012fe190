//! Encoder f followed by projector g (docs/design.md §4): what Proto-RL calls its `Encoder`, and
//! what `lfs export` writes (`encoder.convnet.*`, `projector.*`). The pre-trainer keeps one copy
//! online and one as the EMA target.
//!
//! Like [`Encoder`], it runs two ways: [`EncoderProjector::forward`] on a candle tensor under
//! candle's autograd, and [`EncoderProjector::forward_pixels`] + [`EncoderProjector::backward`]
//! on uint8 pixels with hand-computed gradients (the pre-trainer's path). Both give the same
//! features in the same (C, H, W) order, up to float rounding (`tests/nn.rs`).

use std::collections::BTreeMap;

use candle_core::Tensor;
use rand::Rng;

use super::encoder::{row_index, Encoded, NamedGrads};
use super::kernels::row_split::constant_product;
use super::{Encoder, EncoderConfig, Params, Projector};
use crate::{Error, Result};

/// PyTorch `state_dict` prefix of the encoder f.
pub const ENCODER_PREFIX: &str = "encoder";
/// PyTorch `state_dict` prefix of the projector g.
pub const PROJECTOR_PREFIX: &str = "projector";

#[derive(Debug, Clone)]
pub struct EncoderProjector {
    pub encoder: Encoder,
    pub projector: Projector,
}

/// What one forward of f and g produced.
pub struct Features {
    pub encoded: Encoded,
    /// Projector output (b, latent_dim).
    pub z: Tensor,
}

impl Features {
    /// Rows `rows` of z, in that order: (rows.len(), latent_dim).
    pub fn z_rows(&self, rows: &[usize]) -> Result<Tensor> {
        let idx = row_index(rows, self.z.dim(0)?, self.z.device())?;
        Ok(self.z.index_select(&idx, 0)?)
    }
}

impl EncoderProjector {
    /// Registers `encoder.convnet.*` and `projector.*` in `params`.
    pub fn new<R: Rng + ?Sized>(
        cfg: &EncoderConfig,
        latent_dim: usize,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        let encoder = Encoder::new(cfg, ENCODER_PREFIX, params, rng)?;
        let projector = Projector::new(encoder.repr_dim(), latent_dim, PROJECTOR_PREFIX, params, rng)?;
        Ok(Self { encoder, projector })
    }

    /// f and g over their parameters in `params`, trained with them.
    pub fn from_params(cfg: &EncoderConfig, latent_dim: usize, params: &Params) -> Result<Self> {
        let encoder = Encoder::from_params(cfg, ENCODER_PREFIX, params)?;
        let projector = Projector::from_params(encoder.repr_dim(), latent_dim, PROJECTOR_PREFIX, params)?;
        Ok(Self { encoder, projector })
    }

    /// f and g over a new [`Params`] store on `backend` (or a `&Device`) holding copies of the `encoder.*` /
    /// `projector.*` entries of `tensors` (other keys are ignored); errors if anything else
    /// under those prefixes is there.
    pub fn from_tensors(
        cfg: &EncoderConfig,
        latent_dim: usize,
        tensors: &BTreeMap<String, Tensor>,
        backend: impl Into<crate::device::Backend>,
    ) -> Result<(Self, Params)> {
        let mine: BTreeMap<String, Tensor> = tensors
            .iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{ENCODER_PREFIX}.")) || k.starts_with(&format!("{PROJECTOR_PREFIX}."))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let params = Params::from_tensors(&mine, backend)?;
        let net = Self::from_params(cfg, latent_dim, &params)?;
        if params.len() != 2 * cfg.num_layers + 2 {
            return Err(Error::Shape(format!(
                "unexpected encoder/projector tensors: {:?}",
                params.names()
            )));
        }
        Ok((net, params))
    }

    /// Shapes: obs (b, 9, 84, 84) f32 pixels -> h (b, 39200), z (b, latent); differentiable.
    pub fn forward(&self, obs: &Tensor) -> Result<Features> {
        let h = self.encoder.forward(obs)?;
        let z = self.projector.forward(&h)?;
        Ok(Features {
            encoded: Encoded::without_tape(h),
            z,
        })
    }

    /// Shapes: obs (b, 9, 84, 84) u8 pixels -> h (b, 39200), z (b, latent), without a candle
    /// graph. With `keep`, the activations are kept for [`EncoderProjector::backward`].
    pub fn forward_pixels(&self, obs: &[u8], b: usize, keep: bool) -> Result<Features> {
        self.project(self.encoder.encode(obs, b, keep)?)
    }

    /// z = g(h) for the encoder's output (the pre-trainer's batches on the device come here
    /// through `objectives::stacks`).
    pub fn project(&self, encoded: Encoded) -> Result<Features> {
        // g as candle's Linear: h · Wᵀ + bias, on detached parameters (no graph is built); the
        // long, narrow product split by rows over the threads on the CPU.
        let w = self.projector.weight().detach(); // (latent, repr)
        let bias = self.projector.bias().detach(); // (latent)
        let z = constant_product(&encoded.h, &w)?.broadcast_add(&bias)?; // (b, latent)
        Ok(Features { encoded, z })
    }

    /// The gradients of every parameter of f and g for the loss gradient `dz` (rows.len(),
    /// latent) of the samples `rows` of a kept [`EncoderProjector::forward_pixels`] (`dz` row i
    /// belongs to sample rows[i]; a sample may appear more than once).
    pub fn backward(&self, features: &Features, rows: &[usize], dz: &Tensor) -> Result<NamedGrads> {
        features.encoded.tape()?; // before the projector's work
        let h = &features.encoded.h; // (b, repr)
        let idx = row_index(rows, h.dim(0)?, h.device())?;
        // g: dW = dzᵀ · h_rows, db = Σ dz, dh = dz · W.
        let h_rows = h.index_select(&idx, 0)?; // (n_rows, repr)
        let d_proj_w = dz.t()?.matmul(&h_rows)?; // (latent, repr)
        let d_proj_b = dz.sum(0)?; // (latent)
        let w = self.projector.weight().detach(); // (latent, repr)
        let dh = dz.matmul(&w)?; // (n_rows, repr)
        let mut grads = self.encoder.backward(&features.encoded, rows, &dh)?;
        let [weight, bias] = self.projector.param_names();
        grads.push((weight, d_proj_w));
        grads.push((bias, d_proj_b));
        Ok(grads)
    }
}
