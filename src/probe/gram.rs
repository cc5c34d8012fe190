//! The Gram matrix `K = X Xᵀ` of feature rows, and its centring with the mean of a subset of
//! the rows.
//!
//! The features are centred with the training rows' mean *before* the product (in f64, then
//! rounded to f32): encoder features (ReLU outputs) share a large common mean, and a Gram of
//! uncentred rows would hold it as a rank-one term many times the size of the variation, which
//! centring afterwards would cancel at the cost of f32's digits. The product itself is an f32
//! GEMM (faer, lower triangle only), widened to f64 for everything after.
//!
//! Centring with another subset's mean (a fold's training rows) needs only `K`, not `X`:
//! `(x_i − x̄)·(x_j − x̄) = K_ij − a_i − a_j + g` with `a_i = x_i·x̄ = mean_{t∈T} K_it` and
//! `g = x̄·x̄ = mean_{t∈T} a_t`. That is exact whatever common vector was taken from `X` first.

use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, Mat, MatRef};
use rayon::prelude::*;

use super::RowMajor;

/// Columns per task when summing columns in parallel.
const COLS_PER_TASK: usize = 4096;

/// The mean of the rows of `x`, accumulated in f64. Shape `(num_cols,)`.
pub fn row_mean(x: RowMajor<'_, f32>) -> Vec<f64> {
    let num_rows = x.num_rows();
    let mut mean = vec![0.0f64; x.num_cols()];
    mean.par_chunks_mut(COLS_PER_TASK)
        .enumerate()
        .for_each(|(chunk, sums)| {
            let start = chunk * COLS_PER_TASK;
            for i in 0..num_rows {
                let row = &x.row(i)[start..start + sums.len()];
                for (s, &v) in sums.iter_mut().zip(row) {
                    *s += f64::from(v);
                }
            }
            for s in sums.iter_mut() {
                *s /= num_rows as f64;
            }
        });
    mean
}

/// `x` with `mean` taken from every row, in f64 and then rounded to f32. Shape
/// `(num_rows, num_cols)`, row-major.
pub fn centred_rows(x: RowMajor<'_, f32>, mean: &[f64]) -> Vec<f32> {
    let mut out = vec![0.0f32; x.data().len()];
    out.par_chunks_mut(x.num_cols().max(1))
        .enumerate()
        .for_each(|(i, row_out)| {
            for ((o, &v), &m) in row_out.iter_mut().zip(x.row(i)).zip(mean) {
                *o = (f64::from(v) - m) as f32;
            }
        });
    out
}

/// Rows `rows` of `x` with `mean` taken from each, in f64, into `out` (resized to `(rows.len(),
/// num_cols)`, row-major): a block of the centred features for products in f64. The caller
/// keeps `out` from block to block, so its pages are touched once.
pub fn centred_rows_f64(x: RowMajor<'_, f32>, mean: &[f64], rows: std::ops::Range<usize>, out: &mut Vec<f64>) {
    let num_cols = x.num_cols();
    out.resize(rows.len() * num_cols, 0.0);
    out.par_chunks_mut(num_cols.max(1))
        .enumerate()
        .for_each(|(r, row_out)| {
            for ((o, &v), &m) in row_out.iter_mut().zip(x.row(rows.start + r)).zip(mean) {
                *o = f64::from(v) - m;
            }
        });
}

/// `K = X Xᵀ` of the rows of `x` (already centred), an f32 GEMM of the lower triangle mirrored
/// and widened to f64. Shape `(num_rows, num_rows)`.
pub fn gram(x: RowMajor<'_, f32>) -> Mat<f64> {
    let n = x.num_rows();
    let a = MatRef::from_row_major_slice(x.data(), n, x.num_cols()); // (n, d)
    let mut k = Mat::<f32>::zeros(n, n);
    triangular::matmul(
        k.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        a,
        BlockStructure::Rectangular,
        a.transpose(), // (d, n)
        BlockStructure::Rectangular,
        1.0f32,
        faer::get_global_parallelism(),
    );
    Mat::from_fn(n, n, |i, j| f64::from(if i >= j { k[(i, j)] } else { k[(j, i)] }))
}

/// What centring a Gram matrix with the mean `x̄` of a subset `T` of its rows needs: `a_i =
/// x_i·x̄` for every row and `g = x̄·x̄`.
#[derive(Debug, Clone)]
pub struct GramCentring {
    /// `a_i = mean_{t∈T} K_it`, for all rows of `K`.
    dot_mean: Vec<f64>,
    /// `g = mean_{t∈T} a_t`.
    mean_dot_mean: f64,
}

impl GramCentring {
    /// The centring of `k` (symmetric) with the mean of rows `subset` (not empty).
    pub fn new(k: MatRef<'_, f64>, subset: &[usize]) -> Self {
        let mut dot_mean = vec![0.0f64; k.nrows()];
        // K is symmetric: sum columns t (contiguous in faer's column-major Mat) instead of rows
        for &t in subset {
            for (a, &v) in dot_mean.iter_mut().zip(k.col(t).iter()) {
                *a += v;
            }
        }
        let m = subset.len() as f64;
        dot_mean.iter_mut().for_each(|a| *a /= m);
        let mean_dot_mean = subset.iter().map(|&t| dot_mean[t]).sum::<f64>() / m;
        GramCentring {
            dot_mean,
            mean_dot_mean,
        }
    }

    /// The centred block `K_c[rows, cols]`. Shape `(rows.len(), cols.len())`.
    pub fn block(&self, k: MatRef<'_, f64>, rows: &[usize], cols: &[usize]) -> Mat<f64> {
        Mat::from_fn(rows.len(), cols.len(), |r, c| {
            let (i, j) = (rows[r], cols[c]);
            k[(i, j)] - self.dot_mean[i] - self.dot_mean[j] + self.mean_dot_mean
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centring_the_gram_is_centring_the_rows() {
        // 5 rows, 3 features; subset {0, 2, 3}
        let x: Vec<f32> = (0..15).map(|v| ((v * 7) % 11) as f32 + 0.5).collect();
        let x = RowMajor::new(&x, 5, 3).unwrap();
        let k = gram(x);
        let subset = [0, 2, 3];
        let mean: Vec<f64> = (0..3)
            .map(|j| subset.iter().map(|&i| f64::from(x.row(i)[j])).sum::<f64>() / 3.0)
            .collect();
        let centred = GramCentring::new(k.as_ref(), &subset).block(k.as_ref(), &[1, 4], &[0, 2, 3]);
        for (r, &i) in [1, 4].iter().enumerate() {
            for (c, &j) in subset.iter().enumerate() {
                let expected: f64 = (0..3)
                    .map(|f| (f64::from(x.row(i)[f]) - mean[f]) * (f64::from(x.row(j)[f]) - mean[f]))
                    .sum();
                assert!((centred[(r, c)] - expected).abs() < 1e-9, "{r} {c}");
            }
        }
    }

    #[test]
    fn row_mean_and_centred_rows() {
        let x = [1.0f32, 10.0, 3.0, 20.0];
        let x = RowMajor::new(&x, 2, 2).unwrap();
        let mean = row_mean(x);
        assert_eq!(mean, vec![2.0, 15.0]);
        assert_eq!(centred_rows(x, &mean), vec![-1.0, -5.0, 1.0, 5.0]);
        let mut block = vec![9.0; 10];
        centred_rows_f64(x, &mean, 1..2, &mut block);
        assert_eq!(block, vec![1.0, 5.0]);
    }
}
