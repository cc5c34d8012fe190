//! Sinkhorn–Knopp equipartition over the batch (SwAV; Proto-RL's `Proto.sinkhorn`, docs/design.md §4):
//! `Q = exp(S/τ − max(S/τ))ᵀ` (K×B), divided by its sum; `num_iters` times {scale rows to sum
//! 1/K, scale columns to sum 1/B}; finally scale each column to sum 1 and return Qᵀ (B×K).
//! Computed in f64 on the host: the matrix is at most 512×512, and no gradient flows through it.

use candle_core::{DType, Tensor};

use crate::{Error, Result};

/// Soft cluster assignments for `scores` (b, k), one row per sample, rows summing to 1.
pub fn sinkhorn(scores: &Tensor, temperature: f64, num_iters: usize) -> Result<Tensor> {
    let (b, k) = scores.dims2()?;
    let s = scores.detach().to_dtype(DType::F64)?.to_vec2::<f64>()?;
    // q[kk][i]: the transposed (K, B) matrix of the reference.
    let max = s
        .iter()
        .flatten()
        .map(|v| v / temperature)
        .fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return Err(Error::Training(format!("sinkhorn: non-finite scores (max {max})")));
    }
    let mut q = vec![vec![0f64; b]; k];
    for (i, row) in s.iter().enumerate() {
        for (kk, v) in row.iter().enumerate() {
            q[kk][i] = (v / temperature - max).exp();
        }
    }
    let total: f64 = q.iter().flatten().sum();
    q.iter_mut().flatten().for_each(|v| *v /= total);
    let (r, c) = (1.0 / k as f64, 1.0 / b as f64);
    for _ in 0..num_iters {
        // rows: u = r / Q.sum(1), with infinities (an all-zero row) replaced by the largest
        // finite factor, as Proto-RL's `remove_infs` does.
        let mut u: Vec<f64> = q.iter().map(|row| r / row.iter().sum::<f64>()).collect();
        let finite_max = u
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(f64::NEG_INFINITY, f64::max);
        u.iter_mut().filter(|v| v.is_infinite()).for_each(|v| *v = finite_max);
        for (row, ui) in q.iter_mut().zip(&u) {
            row.iter_mut().for_each(|v| *v *= ui);
        }
        // columns: Q *= c / Q.sum(0)
        for i in 0..b {
            let col: f64 = q.iter().map(|row| row[i]).sum();
            q.iter_mut().for_each(|row| row[i] *= c / col);
        }
    }
    // Q / Q.sum(0): each sample's assignment sums to 1, then transpose back to (B, K).
    let mut out = vec![0f32; b * k];
    for i in 0..b {
        let col: f64 = q.iter().map(|row| row[i]).sum();
        for kk in 0..k {
            out[i * k + kk] = (q[kk][i] / col) as f32;
        }
    }
    if out.iter().any(|v| !v.is_finite()) {
        return Err(Error::Training("sinkhorn: non-finite assignments".to_string()));
    }
    Ok(Tensor::from_vec(out, (b, k), scores.device())?)
}

/// Mean over samples of the assignment entropy −Σ_k q_k ln q_k (nats), a collapse monitor:
/// ln K means uniform soft assignments, 0 means hard ones.
pub fn assignment_entropy(q: &Tensor) -> Result<f64> {
    let rows = q.detach().to_dtype(DType::F64)?.to_vec2::<f64>()?;
    let n = rows.len().max(1) as f64;
    let total: f64 = rows
        .iter()
        .map(|row| row.iter().filter(|p| **p > 0.0).map(|p| -p * p.ln()).sum::<f64>())
        .sum();
    Ok(total / n)
}
