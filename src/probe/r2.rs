//! Held-out R²: per target dimension and their mean, with a bootstrap over held-out groups.
//!
//! R² of one dimension is sklearn's `r2_score(y_true, y_pred, multioutput="raw_values")`:
//! `1 − SS_res / SS_tot` with `SS_tot` about the held-out mean, and for `SS_tot = 0` (a
//! constant held-out target) 1 if the predictions are exact, else 0 (`force_finite=True`).
//!
//! The interval resamples whole groups (episodes) with replacement, as many as there are, since
//! frames of one episode are not independent draws. Every statistic of a resample is a sum over
//! its groups, so per-group sums are taken once ([`GroupSums`]) and one resample costs
//! `O(groups · k)` whatever the number of rows. The interval is the percentile interval of the
//! replicates (NumPy's linearly interpolated percentiles), for each dimension and for the mean
//! over dimensions (the mean of each replicate's per-dimension R²).

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::{check_rows, RowMajor};
use crate::{Error, Result};

/// R² per target dimension and their mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct R2Scores {
    pub per_dim: Vec<f64>,
    pub mean: f64,
}

/// The bootstrap over held-out groups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GroupBootstrapConfig {
    /// Resamples of the held-out groups. Default 10,000 (each costs `O(groups · k)`).
    pub num_resamples: usize,
    /// Coverage of the percentile interval, in (0, 1). Default 0.95.
    pub confidence: f64,
    /// Seed of the ChaCha8 generator that draws the resamples. Default 0.
    pub seed: u64,
}

impl Default for GroupBootstrapConfig {
    fn default() -> Self {
        GroupBootstrapConfig {
            num_resamples: 10_000,
            confidence: 0.95,
            seed: 0,
        }
    }
}

/// A point estimate with its bootstrap percentile interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct R2Interval {
    pub point: f64,
    pub low: f64,
    pub high: f64,
}

/// Held-out R² with intervals: what probe.json reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutR2 {
    /// The mean over dimensions.
    pub mean: R2Interval,
    /// One per target dimension, in the caller's column order.
    pub per_dim: Vec<R2Interval>,
    pub num_rows: usize,
    /// Distinct held-out groups (episodes), the bootstrap's units.
    pub num_groups: usize,
    pub bootstrap: GroupBootstrapConfig,
}

/// sklearn's R² from the two sums of squares (see the module doc for `SS_tot = 0`).
fn r2_from(ss_res: f64, ss_tot: f64) -> f64 {
    if ss_tot == 0.0 {
        if ss_res == 0.0 {
            1.0
        } else {
            0.0
        }
    } else {
        1.0 - ss_res / ss_tot
    }
}

/// R² of `y_pred` against `y_true` (both `(n, k)`, n ≥ 1), per dimension and their mean.
pub fn r2_scores(y_true: RowMajor<'_, f64>, y_pred: RowMajor<'_, f64>) -> Result<R2Scores> {
    check_same_shape(y_true, y_pred)?;
    let (n, k) = (y_true.num_rows(), y_true.num_cols());
    let per_dim: Vec<f64> = (0..k)
        .map(|j| {
            let mean = (0..n).map(|i| y_true.row(i)[j]).sum::<f64>() / n as f64;
            let ss_tot = (0..n).map(|i| (y_true.row(i)[j] - mean).powi(2)).sum();
            let ss_res = (0..n).map(|i| (y_true.row(i)[j] - y_pred.row(i)[j]).powi(2)).sum();
            r2_from(ss_res, ss_tot)
        })
        .collect();
    let mean = per_dim.iter().sum::<f64>() / k as f64;
    Ok(R2Scores { per_dim, mean })
}

/// Per-group sums of the held-out rows, from which the R² of any multiset of whole groups
/// follows. Values are taken about the held-out mean `c` of each dimension, which keeps
/// `SS_tot = Σ(y − c)² − (Σ(y − c))² / N` free of cancellation.
#[derive(Debug, Clone)]
pub struct GroupSums {
    num_dims: usize,
    /// Rows per group. Shape `(groups,)`, groups in ascending id order.
    counts: Vec<f64>,
    /// `Σ (y − c)`. Shape `(groups, k)`, row-major.
    sum: Vec<f64>,
    /// `Σ (y − c)²`. Shape `(groups, k)`.
    sum_sq: Vec<f64>,
    /// `Σ (y − ŷ)²`. Shape `(groups, k)`.
    sum_res: Vec<f64>,
}

impl GroupSums {
    /// The sums of `y_true`, `y_pred` (both `(n, k)`) by `groups` (one id per row).
    pub fn new(y_true: RowMajor<'_, f64>, y_pred: RowMajor<'_, f64>, groups: &[u64]) -> Result<Self> {
        check_same_shape(y_true, y_pred)?;
        check_rows("the group ids", groups.len(), y_true.num_rows())?;
        let (n, k) = (y_true.num_rows(), y_true.num_cols());
        let centre: Vec<f64> = (0..k)
            .map(|j| (0..n).map(|i| y_true.row(i)[j]).sum::<f64>() / n as f64)
            .collect();
        // BTreeMap: groups in ascending id order, each with its index
        let mut index_of_group: BTreeMap<u64, usize> = groups.iter().map(|&g| (g, 0)).collect();
        for (index, slot) in index_of_group.values_mut().enumerate() {
            *slot = index;
        }
        let num_groups = index_of_group.len();
        let mut sums = GroupSums {
            num_dims: k,
            counts: vec![0.0; num_groups],
            sum: vec![0.0; num_groups * k],
            sum_sq: vec![0.0; num_groups * k],
            sum_res: vec![0.0; num_groups * k],
        };
        for (i, g) in groups.iter().enumerate() {
            let g = index_of_group[g];
            sums.counts[g] += 1.0;
            let (truth, pred) = (y_true.row(i), y_pred.row(i));
            for (j, c) in centre.iter().enumerate() {
                let (v, p) = (truth[j] - c, pred[j] - c);
                sums.sum[g * k + j] += v;
                sums.sum_sq[g * k + j] += v * v;
                sums.sum_res[g * k + j] += (v - p) * (v - p);
            }
        }
        Ok(sums)
    }

    pub fn num_groups(&self) -> usize {
        self.counts.len()
    }

    /// R² per dimension (into `out`, `(k,)`) of the rows of group `g` taken `multiplicity[g]`
    /// times (groups in ascending id order; not all zero). `SS_tot` at or below `16 ε Σ(y − c)²`
    /// is taken as 0: the rounding left when the rows drawn are all equal.
    pub fn weighted_r2(&self, multiplicity: &[u32], out: &mut [f64]) {
        let k = self.num_dims;
        let num_rows: f64 = multiplicity
            .iter()
            .zip(&self.counts)
            .map(|(&w, n)| f64::from(w) * n)
            .sum();
        for (j, o) in out.iter_mut().enumerate() {
            let (mut s1, mut s2, mut res) = (0.0f64, 0.0f64, 0.0f64);
            for (g, &w) in multiplicity.iter().enumerate().filter(|(_, &w)| w > 0) {
                let w = f64::from(w);
                s1 += w * self.sum[g * k + j];
                s2 += w * self.sum_sq[g * k + j];
                res += w * self.sum_res[g * k + j];
            }
            let ss_tot = s2 - s1 * s1 / num_rows;
            let ss_tot = if ss_tot <= 16.0 * f64::EPSILON * s2 {
                0.0
            } else {
                ss_tot
            };
            *o = r2_from(res, ss_tot);
        }
    }
}

/// Held-out R² per dimension and its mean, with percentile intervals from a bootstrap over the
/// held-out `groups` (one id per row). [`Error::Config`] for a bad bootstrap setting or fewer
/// than 2 groups; [`Error::Shape`] for mismatched inputs.
pub fn held_out_r2(
    y_true: RowMajor<'_, f64>,
    y_pred: RowMajor<'_, f64>,
    groups: &[u64],
    cfg: &GroupBootstrapConfig,
) -> Result<HeldOutR2> {
    if cfg.num_resamples == 0 || !(cfg.confidence > 0.0 && cfg.confidence < 1.0) {
        return Err(Error::Config(format!(
            "probe: the bootstrap needs num_resamples ≥ 1 and a confidence in (0, 1), got {} and {}",
            cfg.num_resamples, cfg.confidence
        )));
    }
    let point = r2_scores(y_true, y_pred)?;
    let sums = GroupSums::new(y_true, y_pred, groups)?;
    let (num_groups, k) = (sums.num_groups(), y_true.num_cols());
    if num_groups < 2 {
        return Err(Error::Config(format!(
            "probe: the bootstrap over held-out groups (episodes) needs at least 2 of them, got {num_groups}"
        )));
    }

    // replicates[j] for dimension j, replicates[k] for the mean
    let mut replicates = vec![Vec::with_capacity(cfg.num_resamples); k + 1];
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut multiplicity = vec![0u32; num_groups];
    let mut r2 = vec![0.0f64; k];
    for _ in 0..cfg.num_resamples {
        multiplicity.fill(0);
        for _ in 0..num_groups {
            multiplicity[rng.random_range(0..num_groups)] += 1;
        }
        sums.weighted_r2(&multiplicity, &mut r2);
        for (values, &v) in replicates.iter_mut().zip(&r2) {
            values.push(v);
        }
        replicates[k].push(r2.iter().sum::<f64>() / k as f64);
    }
    let mut intervals: Vec<R2Interval> = replicates
        .into_iter()
        .zip(point.per_dim.iter().chain([&point.mean]))
        .map(|(values, &point)| percentile_interval(point, values, cfg.confidence))
        .collect();
    let mean = intervals.pop().unwrap_or(R2Interval {
        point: point.mean,
        low: point.mean,
        high: point.mean,
    });
    Ok(HeldOutR2 {
        mean,
        per_dim: intervals,
        num_rows: y_true.num_rows(),
        num_groups,
        bootstrap: cfg.clone(),
    })
}

/// `point` with the central `confidence` percentile interval of `replicates` (not empty).
fn percentile_interval(point: f64, mut replicates: Vec<f64>, confidence: f64) -> R2Interval {
    replicates.sort_by(f64::total_cmp);
    R2Interval {
        point,
        low: percentile(&replicates, (1.0 - confidence) / 2.0),
        high: percentile(&replicates, (1.0 + confidence) / 2.0),
    }
}

/// NumPy's default ("linear") percentile of sorted values, `q` in [0, 1].
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let position = q * (sorted.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    sorted[below] + (sorted[above] - sorted[below]) * (position - below as f64)
}

/// [`Error::Shape`] unless both are `(n, k)` with n ≥ 1 and k ≥ 1.
fn check_same_shape(y_true: RowMajor<'_, f64>, y_pred: RowMajor<'_, f64>) -> Result<()> {
    if (y_true.num_rows(), y_true.num_cols()) != (y_pred.num_rows(), y_pred.num_cols()) {
        return Err(Error::Shape(format!(
            "probe: targets are {} × {} but predictions {} × {}",
            y_true.num_rows(),
            y_true.num_cols(),
            y_pred.num_rows(),
            y_pred.num_cols()
        )));
    }
    if y_true.num_rows() == 0 || y_true.num_cols() == 0 {
        return Err(Error::Shape(
            "probe: R² needs at least one row and one dimension".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r2_matches_sklearn_including_constant_targets() {
        // sklearn.metrics.r2_score([[1, 5, 2], [2, 5, 2], [3, 5, 2], [4, 5, 2]],
        //     [[1.5, 5, 2], [2, 4, 2], [2.5, 5, 2], [4, 5, 2]], multioutput="raw_values")
        // -> [0.9, 0.0, 1.0]
        let y = [1.0, 5.0, 2.0, 2.0, 5.0, 2.0, 3.0, 5.0, 2.0, 4.0, 5.0, 2.0];
        let p = [1.5, 5.0, 2.0, 2.0, 4.0, 2.0, 2.5, 5.0, 2.0, 4.0, 5.0, 2.0];
        let s = r2_scores(RowMajor::new(&y, 4, 3).unwrap(), RowMajor::new(&p, 4, 3).unwrap()).unwrap();
        assert!((s.per_dim[0] - 0.9).abs() < 1e-15);
        assert_eq!(&s.per_dim[1..], &[0.0, 1.0]);
        assert!((s.mean - 1.9 / 3.0).abs() < 1e-15);
    }

    #[test]
    fn percentile_is_numpys_linear() {
        // numpy.percentile([1, 2, 4, 8], [2.5, 97.5]) -> [1.075, 7.7]
        let v = [1.0, 2.0, 4.0, 8.0];
        assert!((percentile(&v, 0.025) - 1.075).abs() < 1e-12);
        assert!((percentile(&v, 0.975) - 7.7).abs() < 1e-12);
    }
}
