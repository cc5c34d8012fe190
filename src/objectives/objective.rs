//! The seam between the objective engine ([`crate::objectives::Trainer`]) and a pre-training
//! objective: the method's head on the online network, how it draws its training pairs, and
//! its loss on the online and target projections. One file per objective implements it (LFS
//! and its ablations in `lfs.rs`, `lfs_cl.rs`, `atc.rs`, `curl.rs`);
//! [`ObjectiveConfig::build`](super::ObjectiveConfig::build) is the one place that maps a
//! configured method to its objective.

use std::fmt::Debug;

use candle_core::Tensor;
use rand_chacha::ChaCha8Rng;

use super::update_metrics::UpdateMetrics;
use crate::data::{PairBatch, PairKind, PairSource, RandomShift};
use crate::nn::encoder_projector::Features;
use crate::nn::{EncoderProjector, Params};
use crate::Result;

/// What an objective draws its pairs with: the engine's source, RNG, shift and online network,
/// for one update of M real pairs.
pub struct Draw<'a> {
    pub source: &'a mut dyn PairSource,
    /// The task of single-task batches; None: mixed.
    pub task: Option<usize>,
    /// M: real pairs per update.
    pub m: usize,
    pub shift: &'a RandomShift,
    pub rng: &'a mut ChaCha8Rng,
    /// f and g of the online network, for an objective that screens candidates with it (LNC).
    pub online_net: &'a EncoderProjector,
}

/// The online forward the loss differentiates, and which of its samples form the batch, in
/// batch order.
pub struct OnlinePass {
    pub features: Features,
    pub rows: Vec<usize>,
}

/// An objective's training pairs (prev → online, cur → target), shifted.
pub struct Drawn {
    pub batch: PairBatch,
    /// The online forward over the batch, when drawing it already ran one (LNC's).
    pub online: Option<OnlinePass>,
    /// The synthetic pairs LNC selected, as shifted for it (LNC objectives only).
    pub selected: Option<PairBatch>,
}

impl Drawn {
    fn of(batch: PairBatch) -> Self {
        Self {
            batch,
            online: None,
            selected: None,
        }
    }
}

/// What an objective's loss gives the trainer. Its terms stay on the loss's device until the
/// trainer reads them, with the loss, in one copy (a GPU stops once for them all).
#[derive(Debug, Clone)]
pub struct ObjectiveLoss {
    /// The scalar loss J.
    pub loss: Tensor,
    /// LFS: the mean Sinkhorn assignment entropy (nats), an f64 scalar.
    pub sinkhorn_entropy: Option<Tensor>,
}

impl ObjectiveLoss {
    /// A loss with no terms of its own (ATC, CURL).
    pub fn alone(loss: Tensor) -> Self {
        Self {
            loss,
            sinkhorn_entropy: None,
        }
    }
}

/// A pre-training objective on the encoder (docs/design.md §3–§5).
pub trait Objective: Debug {
    /// The update's training pairs; records what it drew in `metrics` (`num_synthetic`, LNC's).
    fn draw(&self, d: Draw, metrics: &mut UpdateMetrics) -> Result<Drawn>;

    /// The loss on the online projections `z` (M, latent) and the target ones `t` (M, latent),
    /// with the objective's own terms as tensors: the trainer reads them with the loss, at once.
    fn loss(&self, z: &Tensor, t: &Tensor) -> Result<ObjectiveLoss>;

    /// Clip the global gradient norm at this value before the Adam step; 0: no clipping.
    fn clip_grad_norm(&self) -> f64 {
        0.0
    }

    /// Registers the head's target-side parameters, if it has any, in `target` (the store the
    /// EMA updates and checkpoints save).
    fn attach_target(&mut self, _target: &mut Params) -> Result<()> {
        Ok(())
    }
}

/// M real pairs, shifted: the draw of ATC and of LFS without the frame mask.
pub fn real_pairs(d: Draw) -> Result<Drawn> {
    let mut real = d.source.sample_pairs(PairKind::Real, d.task, d.m, &mut *d.rng)?;
    real.augment(d.shift, &mut *d.rng)?;
    Ok(Drawn::of(real))
}

/// ⌈fraction·M⌉ frame-mask synthetic pairs and the rest real, all shifted, without LNC's
/// screening (`lfs-no-lnc`).
pub fn fixed_share_pairs(d: Draw, fraction: f64, metrics: &mut UpdateMetrics) -> Result<Drawn> {
    let m = d.m;
    let n = ((fraction * m as f64).ceil() as usize).min(m);
    let mut syn = d.source.sample_pairs(PairKind::Synthetic, d.task, n, &mut *d.rng)?;
    let mut real = d.source.sample_pairs(PairKind::Real, d.task, m - n, &mut *d.rng)?;
    syn.augment(d.shift, &mut *d.rng)?;
    real.augment(d.shift, &mut *d.rng)?;
    metrics.num_synthetic = n;
    Ok(Drawn::of(syn.concat(&real)?))
}

/// Two independent shifts of the same observation O_t, as query (prev) and key (cur): CURL's.
pub fn two_shifts(d: Draw) -> Result<Drawn> {
    let real = d.source.sample_pairs(PairKind::Real, d.task, d.m, &mut *d.rng)?;
    let mut pair = PairBatch {
        prev: real.cur.clone(),
        cur: real.cur,
        len: real.len,
        obs_shape: real.obs_shape,
    };
    pair.augment(d.shift, &mut *d.rng)?;
    Ok(Drawn::of(pair))
}
