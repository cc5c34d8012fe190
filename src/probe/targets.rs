//! Standardised targets: every target dimension scaled to mean 0 and std 1 on the training rows,
//! and the dimensions that do not vary there left out (a constant has nothing to probe, and
//! its R² would be 0/0).

use crate::{Error, Result};

use super::RowMajor;

/// A dimension whose training std is at most this times `|mean|` counts as constant: the
/// rounding of a mean of equal values leaves a std of about 1e-16 |mean|, not 0.
pub const ZERO_STD_RELATIVE: f64 = 1e-10;

/// The training targets, standardised, constant dimensions out.
#[derive(Debug, Clone)]
pub struct StandardisedTargets {
    /// Indices (into the caller's target dimensions) of the dimensions kept, ascending.
    pub kept_dims: Vec<usize>,
    /// Indices of the dimensions with zero training variance, ascending.
    pub excluded_dims: Vec<usize>,
    /// Training mean of each kept dimension. Shape `(kept,)`.
    pub mean: Vec<f64>,
    /// Training std (ddof 0) of each kept dimension. Shape `(kept,)`.
    pub std: Vec<f64>,
    /// `(y − mean) / std` of the kept dimensions. Shape `(num_rows, kept)`, row-major.
    pub values: Vec<f64>,
}

impl StandardisedTargets {
    /// Standardises `y` (num_rows ≥ 1). [`Error::Training`] for a non-finite value or when no
    /// dimension varies.
    pub fn new(y: RowMajor<'_, f64>) -> Result<Self> {
        let (n, k) = (y.num_rows(), y.num_cols());
        if let Some(i) = (0..n).find(|&i| y.row(i).iter().any(|v| !v.is_finite())) {
            return Err(Error::Training(format!("probe: target row {i} has a non-finite value")));
        }
        // two passes (mean, then deviations): the std of a constant is then the mean's rounding
        let mean_all: Vec<f64> = (0..k)
            .map(|j| (0..n).map(|i| y.row(i)[j]).sum::<f64>() / n as f64)
            .collect();
        let std_all: Vec<f64> = (0..k)
            .map(|j| ((0..n).map(|i| (y.row(i)[j] - mean_all[j]).powi(2)).sum::<f64>() / n as f64).sqrt())
            .collect();
        let varies = |j: usize| std_all[j] > 0.0 && std_all[j] > ZERO_STD_RELATIVE * mean_all[j].abs();
        let (kept_dims, excluded_dims): (Vec<usize>, Vec<usize>) = (0..k).partition(|&j| varies(j));
        if kept_dims.is_empty() {
            return Err(Error::Training(format!(
                "probe: none of the {k} target dimensions varies on the {n} training rows"
            )));
        }
        let mean: Vec<f64> = kept_dims.iter().map(|&j| mean_all[j]).collect();
        let std: Vec<f64> = kept_dims.iter().map(|&j| std_all[j]).collect();
        let values = (0..n)
            .flat_map(|i| {
                let row = y.row(i);
                kept_dims
                    .iter()
                    .zip(&mean)
                    .zip(&std)
                    .map(move |((&j, m), s)| (row[j] - m) / s)
            })
            .collect();
        Ok(StandardisedTargets {
            kept_dims,
            excluded_dims,
            mean,
            std,
            values,
        })
    }

    /// Number of kept dimensions.
    pub fn num_kept(&self) -> usize {
        self.kept_dims.len()
    }

    /// Kept dimension `c` of row `i`, standardised.
    pub fn get(&self, i: usize, c: usize) -> f64 {
        self.values[i * self.num_kept() + c]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_dimensions_are_excluded() {
        // dims: varying, constant 0.1 (not exactly representable), constant 0, varying
        let y = [1.0, 0.1, 0.0, -2.0, 3.0, 0.1, 0.0, 2.0, 5.0, 0.1, 0.0, 0.0];
        let t = StandardisedTargets::new(RowMajor::new(&y, 3, 4).unwrap()).unwrap();
        assert_eq!(t.kept_dims, vec![0, 3]);
        assert_eq!(t.excluded_dims, vec![1, 2]);
        assert_eq!(t.mean, vec![3.0, 0.0]);
        assert!((t.get(0, 0) + 1.224744871391589).abs() < 1e-12);
        let all_constant = [1.0, 1.0];
        let err = StandardisedTargets::new(RowMajor::new(&all_constant, 2, 1).unwrap()).unwrap_err();
        assert!(
            err.to_string().contains("none of the 1 target dimensions varies"),
            "{err}"
        );
    }
}
