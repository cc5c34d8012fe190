//! Latent Nearest-neighbour Clip (paper §3.2, Eq. 3–4, appendix "PyTorch-style pseudo code for
//! LNC"; docs/design.md §3). Distances are computed exactly (‖a − b‖, as `torch.norm` of the difference,
//! not via the ‖a‖² + ‖b‖² − 2ab expansion) in f64 on the host.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::objective::{Draw, Drawn, OnlinePass};
use super::update_metrics::UpdateMetrics;
use crate::data::PairKind;
use crate::{Error, Result};

/// Which latent LNC measures distances in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LncLatent {
    /// Online encoder + projector output (128-d): Proto-RL's `Encoder.forward`.
    Projector,
    /// The 39200-d conv output.
    Conv,
}

/// LNC hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LncConfig {
    /// Which nearest neighbour: the k-th, self excluded (1).
    pub k: usize,
    /// Clip centre coefficient c (0.9 for RL; 0.6 for video pre-training).
    pub c: f64,
    /// Clip range coefficient r (0.1; 0.2 for walker_run, cheetah_run and URLB).
    pub r: f64,
}

impl Default for LncConfig {
    fn default() -> Self {
        Self { k: 1, c: 0.9, r: 0.1 }
    }
}

/// What LNC kept, and the numbers the paper plots.
#[derive(Debug, Clone, PartialEq)]
pub struct LncSelection {
    /// Indices j of the synthetic candidates with (c − r/2)·D < D_j < (c + r/2)·D, ascending.
    pub selected: Vec<usize>,
    /// D: mean k-th-nearest-neighbour distance among the real latents (Eq. 3).
    pub d_internal: f64,
    pub clip_low: f64,
    pub clip_high: f64,
    /// D_j for every candidate (Eq. 4).
    pub d_synthetic: Vec<f64>,
}

/// Selects synthetic candidates by their distance to the real batch in latent space.
/// `real` and `synthetic` are row-major (n, dim) latents of the "previous" observations.
pub fn lnc_select(real: &[f32], synthetic: &[f32], dim: usize, cfg: &LncConfig) -> Result<LncSelection> {
    if dim == 0 || !real.len().is_multiple_of(dim) || !synthetic.len().is_multiple_of(dim) {
        return Err(Error::Shape(format!(
            "lnc: latents of length {}/{} are not rows of {dim}",
            real.len(),
            synthetic.len()
        )));
    }
    let n_real = real.len() / dim;
    if cfg.k == 0 || cfg.k >= n_real {
        return Err(Error::Config(format!(
            "lnc: k = {} needs 1 <= k < real batch size {n_real}",
            cfg.k
        )));
    }
    let row = |xs: &'_ [f32], i: usize| -> Vec<f64> { xs[i * dim..(i + 1) * dim].iter().map(|v| *v as f64).collect() };
    let real_rows: Vec<Vec<f64>> = (0..n_real).map(|i| row(real, i)).collect();
    let dist = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
    // The `idx`-th smallest distance from `a` to the real rows (0-based; self included).
    let kth = |a: &[f64], idx: usize| -> f64 {
        let mut d: Vec<f64> = real_rows.iter().map(|r| dist(a, r)).collect();
        d.sort_by(f64::total_cmp);
        d[idx]
    };
    // Each row's distances on its own thread (the rows are independent); the mean is then
    // summed in row order, so the result does not depend on the threads.
    // Eq. 3: topk(k + 1) includes self at distance 0; its last entry is the k-th neighbour.
    let d_real: Vec<f64> = real_rows.par_iter().map(|r| kth(r, cfg.k)).collect();
    let d_internal = d_real.iter().sum::<f64>() / n_real as f64;
    // Eq. 4: topk(k) to the real rows; its last entry.
    let d_synthetic: Vec<f64> = (0..synthetic.len() / dim)
        .into_par_iter()
        .map(|j| kth(&row(synthetic, j), cfg.k - 1))
        .collect();
    let clip_low = d_internal * (cfg.c - cfg.r / 2.0);
    let clip_high = d_internal * (cfg.c + cfg.r / 2.0);
    let selected = d_synthetic
        .iter()
        .enumerate()
        .filter(|(_, d)| **d > clip_low && **d < clip_high)
        .map(|(j, _)| j)
        .collect();
    Ok(LncSelection {
        selected,
        d_internal,
        clip_low,
        clip_high,
        d_synthetic,
    })
}

/// LFS data (docs/design.md §3): M real pairs and M synthetic candidates, both shifted; LNC
/// keeps N candidates; the batch is those N plus M − N real pairs drawn without replacement.
/// The online forward over all 2M previous observations gives LNC its latents (`latent` says
/// which) and is kept for the loss: its rows for the batch are returned with it.
pub fn lnc_pairs(d: Draw, cfg: &LncConfig, latent: LncLatent, metrics: &mut UpdateMetrics) -> Result<Drawn> {
    let m = d.m;
    let mut real = d.source.sample_pairs(PairKind::Real, d.task, m, &mut *d.rng)?;
    let mut syn = d.source.sample_pairs(PairKind::Synthetic, d.task, m, &mut *d.rng)?;
    real.augment(d.shift, &mut *d.rng);
    syn.augment(d.shift, &mut *d.rng);
    let mut obs = real.prev.clone(); // (2M, 9, 84, 84): real rows 0..M, candidates M..2M
    obs.extend_from_slice(&syn.prev);
    let features = d.online_net.forward_pixels(&obs, 2 * m, true)?;
    let latent = match latent {
        LncLatent::Projector => &features.z,
        LncLatent::Conv => &features.encoded.h,
    }; // (2M, dim)
    let dim = latent.dim(1)?;
    let real_latent = latent.narrow(0, 0, m)?.flatten_all()?.to_vec1::<f32>()?;
    let syn_latent = latent.narrow(0, m, m)?.flatten_all()?.to_vec1::<f32>()?;
    let sel = lnc_select(&real_latent, &syn_latent, dim, cfg)?;
    let n = sel.selected.len();
    let mut real_idx = rand::seq::index::sample(&mut *d.rng, m, m - n).into_vec();
    real_idx.sort_unstable();
    metrics.num_synthetic = n;
    metrics.lnc_d = Some(sel.d_internal);
    metrics.clip_low = Some(sel.clip_low);
    metrics.clip_high = Some(sel.clip_high);
    let rows = sel
        .selected
        .iter()
        .map(|&j| m + j)
        .chain(real_idx.iter().copied())
        .collect();
    let selected = syn.select(&sel.selected);
    let batch = selected.clone().concat(&real.select(&real_idx))?;
    Ok(Drawn {
        batch,
        online: Some(OnlinePass { features, rows }),
        selected: Some(selected),
    })
}
