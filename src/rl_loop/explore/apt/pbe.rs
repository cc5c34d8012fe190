//! APT's particle-based entropy reward (docs/design.md §15): the kNN distance of each embedding
//! among the batch's, `log(1 + ·)`. Transcribed from rll-research/url_benchmark @bb98f0c
//! `utils.py`, `RMS` (l.257-276) and `PBE` (l.279-319), with source = target = the batch (what
//! `ICMAPTAgent.compute_intr_reward`, `agent/icm_apt.py` l.96-100, passes).
//!
//! Computed on the host in f64 from the (b, rep) embeddings: the distances are upstream's
//! `torch.norm(source[:, None, :] - target[None, :, :], dim=-1, p=2)`, differences and all (no
//! ‖x‖² + ‖y‖² − 2x·y cancellation), so the self-distance is exactly 0 as upstream's.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The kNN settings of `PBE` (`agent/icm_apt.yaml`: knn_k 12, knn_avg true, knn_rms false,
/// knn_clip 0.0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PbeSettings {
    /// k, the neighbours per row (the zero self-distance among them).
    pub knn_k: usize,
    /// Average the k distances (true) or take the k-th alone.
    pub knn_avg: bool,
    /// Divide the distances by their running mean ([`RunningMeanStd`]).
    pub knn_rms: bool,
    /// Subtracted from the distances, floored at 0, when ≥ 0 (a negative clip turns it off).
    pub knn_clip: f64,
}

/// `utils.RMS`: the running mean M and variance S of every value it has seen, from M = 0,
/// S = 1 over a count of 1e-4 (l.257-276). Only M is read (PBE divides by it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunningMeanStd {
    /// M.
    pub mean: f64,
    /// S (torch.var's unbiased batch variance folded in).
    pub var: f64,
    /// n.
    pub count: f64,
}

impl Default for RunningMeanStd {
    fn default() -> Self {
        Self {
            mean: 0.0,
            var: 1.0,
            count: 1e-4,
        }
    }
}

impl RunningMeanStd {
    /// `RMS.__call__(x)` on the values `x` (a (bs, 1) tensor upstream): folds them in and
    /// returns the new M.
    pub fn update(&mut self, x: &[f64]) -> f64 {
        let bs = x.len() as f64;
        let batch_mean = x.iter().sum::<f64>() / bs;
        // torch.var: unbiased (bs − 1); NaN for one value, as upstream's.
        let batch_var = x.iter().map(|v| (v - batch_mean).powi(2)).sum::<f64>() / (bs - 1.0);
        let delta = batch_mean - self.mean;
        let total = self.count + bs;
        let new_mean = self.mean + delta * bs / total;
        let new_var = (self.var * self.count + batch_var * bs + delta * delta * self.count * bs / total) / total;
        self.mean = new_mean;
        self.var = new_var;
        self.count = total;
        self.mean
    }
}

/// d_ij = ‖x_i − x_j‖₂ over the rows of `rep` (b × dim, row-major), the zero self-distance
/// included: (b, b) row-major.
pub fn pairwise_distances(rep: &[f64], b: usize, dim: usize) -> Result<Vec<f64>> {
    if rep.len() != b * dim {
        return Err(Error::Shape(format!(
            "pbe: {} values for {b} embeddings of {dim}",
            rep.len()
        )));
    }
    let mut d = vec![0.0; b * b];
    d.par_chunks_mut(b.max(1)).enumerate().for_each(|(i, row)| {
        let xi = &rep[i * dim..(i + 1) * dim];
        for (j, out) in row.iter_mut().enumerate() {
            let xj = &rep[j * dim..(j + 1) * dim];
            *out = xi.iter().zip(xj).map(|(a, c)| (a - c) * (a - c)).sum::<f64>().sqrt();
        }
    });
    Ok(d)
}

/// The `k` smallest of each row of the (b, b) `distances`, ascending (`topk(k, largest=False,
/// sorted=True)`): (b, k) row-major.
pub fn knn(distances: &[f64], b: usize, k: usize) -> Result<Vec<f64>> {
    if k == 0 || k > b || distances.len() != b * b {
        return Err(Error::Shape(format!(
            "pbe: the {k} nearest of {b} embeddings ({} distances)",
            distances.len()
        )));
    }
    let mut out = Vec::with_capacity(b * k);
    for row in distances.chunks(b) {
        let mut row = row.to_vec();
        row.select_nth_unstable_by(k - 1, f64::total_cmp);
        let nearest = &mut row[..k];
        nearest.sort_unstable_by(f64::total_cmp);
        out.extend_from_slice(nearest);
    }
    Ok(out)
}

/// `PBE.__call__(rep, rep)` (`utils.py` l.295-319): the particle-based entropy reward of each
/// of the `b` embeddings `rep` (b × dim, row-major) among the batch, `rms` its running mean
/// (updated when `settings.knn_rms`). Returns (b) rewards.
///
/// With knn_avg: r = the b·k kNN distances; r ← r / M(r) when knn_rms; r ← max(r − clip, 0)
/// when clip ≥ 0; the mean over each row's k. Without: the same on each row's k-th distance.
/// reward = log(1 + r).
pub fn pbe_reward(
    rep: &[f64],
    b: usize,
    dim: usize,
    settings: &PbeSettings,
    rms: &mut RunningMeanStd,
) -> Result<Vec<f64>> {
    let k = settings.knn_k;
    let distances = pairwise_distances(rep, b, dim)?; // (b, b)
    let nearest = knn(&distances, b, k)?; // (b, k), ascending
                                          // reward = reward.reshape(-1, 1): (b·k, 1), or the k-th column (b, 1).
    let mut r: Vec<f64> = if settings.knn_avg {
        nearest
    } else {
        nearest.chunks(k).map(|row| row[k - 1]).collect()
    };
    if settings.knn_rms {
        let moving_mean = rms.update(&r);
        r.iter_mut().for_each(|v| *v /= moving_mean);
    }
    if settings.knn_clip >= 0.0 {
        r.iter_mut().for_each(|v| *v = (*v - settings.knn_clip).max(0.0));
    }
    if settings.knn_avg {
        // (b·k, 1) -> (b, k) -> mean over k.
        r = r.chunks(k).map(|row| row.iter().sum::<f64>() / k as f64).collect();
    }
    Ok(r.into_iter().map(|v| (v + 1.0).ln()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three points on a line: distances, the kNN with the zero self-distance first, and the
    /// averaged reward by hand.
    #[test]
    fn knn_includes_the_self_distance_and_averages() -> Result<()> {
        let rep = [0.0, 0.0, 1.0, 0.0, 3.0, 0.0]; // (3, 2)
        let d = pairwise_distances(&rep, 3, 2)?;
        assert_eq!(d, vec![0.0, 1.0, 3.0, 1.0, 0.0, 2.0, 3.0, 2.0, 0.0]);
        assert_eq!(knn(&d, 3, 2)?, vec![0.0, 1.0, 0.0, 1.0, 0.0, 2.0]);
        let settings = PbeSettings {
            knn_k: 2,
            knn_avg: true,
            knn_rms: false,
            knn_clip: 0.0,
        };
        let r = pbe_reward(&rep, 3, 2, &settings, &mut RunningMeanStd::default())?;
        let expected = [1.5f64.ln(), 1.5f64.ln(), 2.0f64.ln()];
        for (a, e) in r.iter().zip(expected) {
            assert!((a - e).abs() < 1e-12, "{a} vs {e}");
        }
        let last = PbeSettings {
            knn_avg: false,
            ..settings
        };
        let r = pbe_reward(&rep, 3, 2, &last, &mut RunningMeanStd::default())?;
        let expected = [2.0f64.ln(), 2.0f64.ln(), 3.0f64.ln()];
        for (a, e) in r.iter().zip(expected) {
            assert!((a - e).abs() < 1e-12, "{a} vs {e}");
        }
        assert!(knn(&d, 3, 4).is_err());
        Ok(())
    }

    /// `RMS` from its initial state on [1, 2, 3]: M = 6 / 3.0001, S by upstream's formula.
    #[test]
    fn running_mean_is_upstreams() {
        let mut rms = RunningMeanStd::default();
        let m = rms.update(&[1.0, 2.0, 3.0]);
        let total = 3.0001;
        assert!((m - 2.0 * 3.0 / total).abs() < 1e-15);
        let s = (1.0 * 1e-4 + 1.0 * 3.0 + 4.0 * 1e-4 * 3.0 / total) / total;
        assert!((rms.var - s).abs() < 1e-15);
        assert_eq!(rms.count, total);
    }
}
