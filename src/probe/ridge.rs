//! Ridge regression in the dual (kernel) form, λ chosen by group k-fold cross-validation.
//!
//! Protocol ([`fit`]; eval/probe_reference.py transcribes it in primal form):
//! 1. Targets standardised with the training rows' mean and std; dimensions with zero training
//!    variance excluded and reported ([`super::targets`]).
//! 2. Features centred with the training rows' mean; `scale = trace(K_c) / n`, the mean squared
//!    norm of a centred row; the grid `λ = c · scale` for every `c` of
//!    [`RidgeConfig::relative_lambdas`], so the grid follows the features' scale.
//! 3. Group k-fold over episodes ([`super::folds`]). For each fold, the fold's training Gram
//!    centred with *its* training mean (the intercept is not penalised) is eigendecomposed once,
//!    `K_c = U S Uᵀ`; then every λ costs only products with `diag(1 / (S + λ))`:
//!    `α = U (S + λ)⁻¹ Uᵀ (Y − ȳ)` and `Ŷ_val = K_c[val, train] α + ȳ`.
//! 4. CV R² per dimension is `1 − SS_res / SS_tot` of the pooled out-of-fold predictions over all
//!    training rows; the chosen λ has the best mean over dimensions (ties: the larger λ).
//! 5. Refit on all training rows with that λ.
//!
//! Eigenvalues at or below the f32 Gram's rounding floor, `√m · ε_f32 · s_max` (`m` rows,
//! `s_max` the largest eigenvalue), are treated as exact zeros: their directions are (or cannot
//! be told from) the Gram's null space, where `X_cᵀ u = 0` and `K_c u = 0`, so they take no
//! part. Without that, with fewer features than rows, rounding noise divided by a tiny λ
//! would leak into the predictions.
//!
//! The refit's dual coefficients `α` give the same linear map in primal form, `W = X_cᵀ α`
//! (d × k, computed in f64 from the f32 features). [`RidgeModel::predict`] uses `W`:
//! `(X_test − x̄) W` is `K_c[test, train] α` (the cross Gram times the dual coefficients) with
//! the product taken in the other order, which costs `d·k` per row instead of `d·n`, and the
//! model need not keep the training features.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Side};
use serde::{Deserialize, Serialize};

use super::folds::{group_folds, GroupFolds};
use super::gram::{self, GramCentring};
use super::targets::StandardisedTargets;
use super::{check_rows, RowMajor};
use crate::{Error, Result};

/// Rows of features widened to f64 at a time for the primal products (`W = X_cᵀ α`, predict):
/// 256 rows of 39,200 features are 80 MB.
const ROWS_PER_BLOCK: usize = 256;

/// The probe's ridge settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RidgeConfig {
    /// Folds of the group k-fold cross-validation that chooses λ; every fold holds whole groups
    /// (episodes), at least 2 of them. Default 5.
    pub num_folds: usize,
    /// The λ grid relative to the features' scale: `λ = c · trace(K_c) / n`, with `K_c` the
    /// training rows' Gram centred with their mean (so `trace(K_c) / n` is the mean squared norm
    /// of a centred feature row). Each `c > 0`. Default: 10⁻⁶ to 10³ in half decades (19
    /// values), from near interpolation to predicting the mean.
    pub relative_lambdas: Vec<f64>,
}

impl Default for RidgeConfig {
    fn default() -> Self {
        RidgeConfig {
            num_folds: 5,
            relative_lambdas: (-12..=6)
                .map(|half_decades| 10f64.powf(f64::from(half_decades) / 2.0))
                .collect(),
        }
    }
}

impl RidgeConfig {
    /// [`Error::Config`] for an empty grid or a `c` that is not finite and positive.
    pub fn validate(&self) -> Result<()> {
        if self.relative_lambdas.is_empty() {
            return Err(Error::Config("probe: relative_lambdas is empty".into()));
        }
        if let Some(c) = self.relative_lambdas.iter().find(|c| !(c.is_finite() && **c > 0.0)) {
            return Err(Error::Config(format!(
                "probe: relative_lambdas must be finite and positive, got {c}"
            )));
        }
        Ok(())
    }
}

/// A ridge penalty, relative to the features' scale and absolute (`absolute = relative · scale`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Lambda {
    pub relative: f64,
    pub absolute: f64,
}

/// The cross-validated R² of one λ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CvScore {
    pub lambda: Lambda,
    /// Mean of `r2_per_dim`.
    pub mean_r2: f64,
    /// R² of the pooled out-of-fold predictions, one per kept target dimension (in the order of
    /// [`LambdaSelection::kept_dims`]).
    pub r2_per_dim: Vec<f64>,
}

/// How λ was chosen: the summary of a fit that goes into probe.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LambdaSelection {
    /// The λ with the best mean CV R².
    pub chosen: Lambda,
    /// One score per λ of the grid, in the grid's order.
    pub cv: Vec<CvScore>,
    /// `trace(K_c) / n` of the training rows, the unit of the relative λ.
    pub kernel_scale: f64,
    pub num_folds: usize,
    /// Distinct groups (episodes) among the training rows.
    pub num_groups: usize,
    pub num_train_rows: usize,
    /// Target dimensions probed (indices into the caller's targets), ascending.
    pub kept_dims: Vec<usize>,
    /// Target dimensions left out for zero training variance, ascending.
    pub excluded_dims: Vec<usize>,
}

/// A fitted probe: everything needed to predict the kept target dimensions of new rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RidgeModel {
    pub lambda: Lambda,
    /// `d`, the width of a feature row.
    pub num_features: usize,
    /// Target dimensions of the training targets, kept or not.
    pub num_targets: usize,
    /// Which of them the model predicts, ascending.
    pub kept_dims: Vec<usize>,
    /// The training rows' feature mean `x̄`. Shape `(d,)`.
    pub feature_mean: Vec<f64>,
    /// Dual coefficients `α` in target units: `ŷ(x) = Σ_i (x − x̄)·(x_i − x̄) α_i + intercept`.
    /// Shape `(num_train_rows, kept)`, row-major.
    pub dual_coef: Vec<f64>,
    /// Primal weights `W = X_cᵀ α`: `ŷ(x) = (x − x̄) W + intercept`. Shape `(d, kept)`,
    /// row-major.
    pub weights: Vec<f64>,
    /// Shape `(kept,)`.
    pub intercept: Vec<f64>,
}

/// [`fit`]'s result.
#[derive(Debug, Clone)]
pub struct RidgeFit {
    pub selection: LambdaSelection,
    pub model: RidgeModel,
}

/// Ridge probe of targets `y` `(n, k)` from features `x` `(n, d)`, λ chosen by group k-fold
/// cross-validation over `groups` (one id per row, the episode), then refit on all rows. See the
/// module doc for the protocol.
///
/// Errors: [`Error::Shape`] for mismatched rows or no features; [`Error::Config`] for a bad
/// grid or too few groups for the folds; [`Error::Training`] for non-finite values, constant
/// features or targets, or a failed eigendecomposition.
pub fn fit(x: RowMajor<'_, f32>, y: RowMajor<'_, f64>, groups: &[u64], cfg: &RidgeConfig) -> Result<RidgeFit> {
    cfg.validate()?;
    let (n, d) = (x.num_rows(), x.num_cols());
    check_rows("the targets", y.num_rows(), n)?;
    check_rows("the group ids", groups.len(), n)?;
    if d == 0 {
        return Err(Error::Shape("probe: the feature rows are empty (d = 0)".into()));
    }
    let folds = group_folds(groups, cfg.num_folds)?;
    check_finite_features(x)?;
    let targets = StandardisedTargets::new(y)?;
    let k = targets.num_kept();

    // the training Gram, from features centred with the training mean
    let feature_mean = gram::row_mean(x);
    let gram_all = {
        let x_c = gram::centred_rows(x, &feature_mean); // (n, d)
        gram::gram(RowMajor::new(&x_c, n, d)?) // (n, n)
    };
    let all_rows: Vec<usize> = (0..n).collect();
    let gram_c = GramCentring::new(gram_all.as_ref(), &all_rows).block(gram_all.as_ref(), &all_rows, &all_rows);
    let kernel_scale = (0..n).map(|i| gram_c[(i, i)]).sum::<f64>() / n as f64;
    if kernel_scale.is_nan() || kernel_scale <= 0.0 {
        return Err(Error::Training(format!(
            "probe: the features are constant on the {n} training rows"
        )));
    }
    let lambdas: Vec<Lambda> = cfg
        .relative_lambdas
        .iter()
        .map(|&c| Lambda {
            relative: c,
            absolute: c * kernel_scale,
        })
        .collect();

    // λ by cross-validation, then the refit on all training rows
    let cv = cross_validate(gram_all.as_ref(), &targets, &folds, &lambdas)?;
    let chosen = choose_lambda(&cv)?;
    let solution = refit(gram_c, &targets, chosen.absolute)?;
    let weights = primal_weights(x, &feature_mean, RowMajor::new(&solution.dual_coef, n, k)?);
    let selection = LambdaSelection {
        chosen,
        cv,
        kernel_scale,
        num_folds: folds.num_folds,
        num_groups: folds.num_groups,
        num_train_rows: n,
        kept_dims: targets.kept_dims.clone(),
        excluded_dims: targets.excluded_dims.clone(),
    };
    let model = RidgeModel {
        lambda: chosen,
        num_features: d,
        num_targets: y.num_cols(),
        kept_dims: targets.kept_dims,
        feature_mean,
        dual_coef: solution.dual_coef,
        weights,
        intercept: solution.intercept,
    };
    Ok(RidgeFit { selection, model })
}

/// CV R² of every λ: per fold, one eigendecomposition of the fold's training Gram (centred with
/// its training mean), then each λ's out-of-fold predictions; R² of the pooled predictions.
fn cross_validate(
    gram_all: MatRef<'_, f64>,
    targets: &StandardisedTargets,
    folds: &GroupFolds,
    lambdas: &[Lambda],
) -> Result<Vec<CvScore>> {
    let k = targets.num_kept();
    let mut ss_res = vec![vec![0.0f64; k]; lambdas.len()]; // (lambdas, k)
    for fold in 0..folds.num_folds {
        let train = folds.rows_out(fold);
        let val = folds.rows_in(fold);
        let centring = GramCentring::new(gram_all, &train);
        let spectrum = Spectrum::new(centring.block(gram_all, &train, &train))?;
        let (y_train, y_train_mean) = centred_targets(targets, &train); // (m, k), (k,)
        let q = spectrum.project(y_train.as_ref()); // (r, k): Uᵀ (Y − ȳ)
        let k_val = centring.block(gram_all, &val, &train); // (n_val, m)
        let p = matmul_new(k_val.as_ref(), spectrum.vectors.as_ref()); // (n_val, r): K_c[val, train] U
        for (lambda, ss) in lambdas.iter().zip(&mut ss_res) {
            let pred = matmul_new(p.as_ref(), spectrum.shrink(q.as_ref(), lambda.absolute).as_ref()); // (n_val, k)
            for (r, &i) in val.iter().enumerate() {
                for (c, s) in ss.iter_mut().enumerate() {
                    *s += (targets.get(i, c) - (pred[(r, c)] + y_train_mean[c])).powi(2);
                }
            }
        }
    }
    let ss_tot = total_sum_of_squares(targets);
    Ok(lambdas
        .iter()
        .zip(&ss_res)
        .map(|(lambda, ss)| {
            let r2_per_dim: Vec<f64> = ss.iter().zip(&ss_tot).map(|(res, tot)| 1.0 - res / tot).collect();
            CvScore {
                lambda: *lambda,
                mean_r2: r2_per_dim.iter().sum::<f64>() / k as f64,
                r2_per_dim,
            }
        })
        .collect())
}

/// The refit's dual coefficients and intercept, in target units.
struct DualSolution {
    /// Shape `(n, k)`, row-major.
    dual_coef: Vec<f64>,
    /// Shape `(k,)`.
    intercept: Vec<f64>,
}

/// Ridge on all training rows: `α = U (S + λ)⁻¹ Uᵀ (Y − ȳ)` from the centred Gram `gram_c`
/// `(n, n)`, then back from standardised to target units (column `c` times `std_c`; intercept
/// `mean_c + std_c · ȳ_c`).
fn refit(gram_c: Mat<f64>, targets: &StandardisedTargets, lambda: f64) -> Result<DualSolution> {
    let (n, k) = (gram_c.nrows(), targets.num_kept());
    let spectrum = Spectrum::new(gram_c)?;
    let all_rows: Vec<usize> = (0..n).collect();
    let (y, y_mean) = centred_targets(targets, &all_rows); // (n, k), (k,)
    let shrunk = spectrum.shrink(spectrum.project(y.as_ref()).as_ref(), lambda); // (r, k)
    let alpha = matmul_new(spectrum.vectors.as_ref(), shrunk.as_ref()); // (n, k), standardised units
    let dual_coef = (0..n)
        .flat_map(|i| (0..k).map(move |c| (i, c)))
        .map(|(i, c)| alpha[(i, c)] * targets.std[c])
        .collect();
    let intercept = (0..k).map(|c| targets.mean[c] + targets.std[c] * y_mean[c]).collect();
    Ok(DualSolution { dual_coef, intercept })
}

impl RidgeModel {
    /// Predictions for the rows of `x` `(n_test, d)`: the kept target dimensions, shape
    /// `(n_test, kept)`, row-major. [`Error::Shape`] if `d` differs from training.
    pub fn predict(&self, x: RowMajor<'_, f32>) -> Result<Vec<f64>> {
        if x.num_cols() != self.num_features {
            return Err(Error::Shape(format!(
                "probe: the model was fitted on {} features, these rows have {}",
                self.num_features,
                x.num_cols()
            )));
        }
        let (n, d, k) = (x.num_rows(), self.num_features, self.kept_dims.len());
        let w = MatRef::from_row_major_slice(&self.weights, d, k); // (d, k)
        let mut out = vec![0.0f64; n * k];
        let mut block = Vec::new();
        for start in (0..n).step_by(ROWS_PER_BLOCK) {
            let rows = start..(start + ROWS_PER_BLOCK).min(n);
            gram::centred_rows_f64(x, &self.feature_mean, rows.clone(), &mut block);
            let x_c = MatRef::from_row_major_slice(&block, rows.len(), d); // (b, d)
            let pred = matmul_new(x_c, w); // (b, k)
            for (r, i) in rows.enumerate() {
                for c in 0..k {
                    out[i * k + c] = pred[(r, c)] + self.intercept[c];
                }
            }
        }
        Ok(out)
    }

    /// The kept dimensions of targets `y` `(n, num_targets)`: shape `(n, kept)`, row-major, to
    /// set beside [`RidgeModel::predict`]'s output.
    pub fn kept_targets(&self, y: RowMajor<'_, f64>) -> Result<Vec<f64>> {
        if y.num_cols() != self.num_targets {
            return Err(Error::Shape(format!(
                "probe: the model was fitted on {} target dimensions, these rows have {}",
                self.num_targets,
                y.num_cols()
            )));
        }
        Ok((0..y.num_rows())
            .flat_map(|i| self.kept_dims.iter().map(move |&j| y.row(i)[j]))
            .collect())
    }
}

/// The eigendecomposition of a centred Gram matrix, `K_c = U S Uᵀ`, eigenvalues at or below the
/// f32 rounding floor dropped (see the module doc).
struct Spectrum {
    /// Eigenvalues kept `(r,)`, ascending.
    values: Vec<f64>,
    /// Their eigenvectors, `(m, r)`.
    vectors: Mat<f64>,
}

impl Spectrum {
    fn new(k: Mat<f64>) -> Result<Self> {
        let m = k.nrows();
        let evd = k
            .self_adjoint_eigen(Side::Lower)
            .map_err(|e| Error::Training(format!("probe: eigendecomposition of a {m} × {m} Gram matrix: {e:?}")))?;
        let s = evd.S().column_vector(); // ascending
        let s_max = s.iter().copied().fold(0.0f64, f64::max);
        let floor = (m as f64).sqrt() * f64::from(f32::EPSILON) * s_max;
        let kept: Vec<usize> = (0..m).filter(|&i| s[i] > floor).collect();
        let u = evd.U();
        Ok(Spectrum {
            values: kept.iter().map(|&i| s[i]).collect(),
            vectors: Mat::from_fn(m, kept.len(), |row, c| u[(row, kept[c])]),
        })
    }

    /// `Uᵀ b` for `b` `(m, k)`. Shape `(r, k)`.
    fn project(&self, b: MatRef<'_, f64>) -> Mat<f64> {
        matmul_new(self.vectors.transpose(), b)
    }

    /// `(S + λ)⁻¹ q` for `q` `(r, k)` in the eigenbasis. Shape `(r, k)`.
    fn shrink(&self, q: MatRef<'_, f64>, lambda: f64) -> Mat<f64> {
        Mat::from_fn(q.nrows(), q.ncols(), |r, c| q[(r, c)] / (self.values[r] + lambda))
    }
}

/// `a b` into a new matrix.
fn matmul_new(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
    let mut out = Mat::<f64>::zeros(a.nrows(), b.ncols());
    matmul(out.as_mut(), Accum::Replace, a, b, 1.0, faer::get_global_parallelism());
    out
}

/// The standardised targets of `rows`, centred with their own mean, and that mean. Shapes
/// `(rows.len(), k)` and `(k,)`.
fn centred_targets(targets: &StandardisedTargets, rows: &[usize]) -> (Mat<f64>, Vec<f64>) {
    let k = targets.num_kept();
    let mean: Vec<f64> = (0..k)
        .map(|c| rows.iter().map(|&i| targets.get(i, c)).sum::<f64>() / rows.len() as f64)
        .collect();
    let centred = Mat::from_fn(rows.len(), k, |r, c| targets.get(rows[r], c) - mean[c]);
    (centred, mean)
}

/// `SS_tot` of each kept dimension over all training rows. Shape `(k,)`.
fn total_sum_of_squares(targets: &StandardisedTargets) -> Vec<f64> {
    let n = targets.values.len() / targets.num_kept();
    let (centred, _) = centred_targets(targets, &(0..n).collect::<Vec<_>>());
    (0..targets.num_kept())
        .map(|c| centred.col(c).iter().map(|v| v * v).sum())
        .collect()
}

/// The λ with the best mean CV R²; of equal ones, the larger λ. [`Error::Training`] if no score
/// is finite.
fn choose_lambda(cv: &[CvScore]) -> Result<Lambda> {
    cv.iter()
        .filter(|s| s.mean_r2.is_finite())
        .max_by(|a, b| {
            a.mean_r2
                .total_cmp(&b.mean_r2)
                .then(a.lambda.absolute.total_cmp(&b.lambda.absolute))
        })
        .map(|s| s.lambda)
        .ok_or_else(|| Error::Training("probe: no λ of the grid has a finite CV R²".into()))
}

/// `W = X_cᵀ α` in f64, `X_c` the features centred with `mean`, taken in blocks of rows.
/// Shape `(d, k)`, row-major.
fn primal_weights(x: RowMajor<'_, f32>, mean: &[f64], alpha: RowMajor<'_, f64>) -> Vec<f64> {
    let (n, d, k) = (x.num_rows(), x.num_cols(), alpha.num_cols());
    let mut w = Mat::<f64>::zeros(d, k);
    let mut block = Vec::new();
    for start in (0..n).step_by(ROWS_PER_BLOCK) {
        let rows = start..(start + ROWS_PER_BLOCK).min(n);
        gram::centred_rows_f64(x, mean, rows.clone(), &mut block);
        let x_c = MatRef::from_row_major_slice(&block, rows.len(), d); // (b, d)
        let a = MatRef::from_row_major_slice(&alpha.data()[start * k..rows.end * k], rows.len(), k); // (b, k)
        matmul(
            w.as_mut(),
            Accum::Add,
            x_c.transpose(),
            a,
            1.0,
            faer::get_global_parallelism(),
        );
    }
    (0..d)
        .flat_map(|j| (0..k).map(move |c| (j, c)))
        .map(|(j, c)| w[(j, c)])
        .collect()
}

/// [`Error::Training`] for a non-finite feature value, naming its row.
fn check_finite_features(x: RowMajor<'_, f32>) -> Result<()> {
    use rayon::prelude::*;
    let bad = (0..x.num_rows())
        .into_par_iter()
        .find_first(|&i| x.row(i).iter().any(|v| !v.is_finite()));
    match bad {
        Some(i) => Err(Error::Training(format!(
            "probe: feature row {i} has a non-finite value"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_grid_is_half_decades_from_1e_minus_6_to_1e3() {
        let grid = RidgeConfig::default().relative_lambdas;
        assert_eq!(grid.len(), 19);
        assert!((grid[0] - 1e-6).abs() < 1e-20 && (grid[18] - 1e3).abs() < 1e-9);
        assert!(grid.windows(2).all(|w| (w[1] / w[0] - 10f64.sqrt()).abs() < 1e-12));
    }

    #[test]
    fn ties_go_to_the_larger_lambda() {
        let score = |c: f64, mean_r2: f64| CvScore {
            lambda: Lambda {
                relative: c,
                absolute: c,
            },
            mean_r2,
            r2_per_dim: vec![mean_r2],
        };
        let cv = [
            score(1.0, 0.5),
            score(10.0, 0.5),
            score(100.0, 0.2),
            score(1000.0, f64::NAN),
        ];
        assert_eq!(choose_lambda(&cv).unwrap().relative, 10.0);
    }

    #[test]
    fn bad_grids_are_config_errors() {
        let empty = RidgeConfig {
            num_folds: 5,
            relative_lambdas: vec![],
        };
        assert!(empty.validate().unwrap_err().to_string().contains("empty"));
        let negative = RidgeConfig {
            num_folds: 5,
            relative_lambdas: vec![1.0, -1.0],
        };
        assert!(negative
            .validate()
            .unwrap_err()
            .to_string()
            .contains("finite and positive, got -1"));
    }
}
