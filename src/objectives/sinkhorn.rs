//! Sinkhorn–Knopp equipartition over the batch (SwAV; Proto-RL's `Proto.sinkhorn`, docs/design.md §4):
//! `Q = exp(S/τ − max(S/τ))ᵀ` (K×B), divided by its sum; `num_iters` times {scale rows to sum
//! 1/K, scale columns to sum 1/B}; finally scale each column to sum 1 and return Qᵀ (B×K).
//! Computed in f64, on the host for CPU tensors and with candle's ops on any other device (so that
//! a GPU does not stop for it: [`crate::device::statistics_on_host`]); the matrix is at most
//! 512×512, and no gradient flows through it.

use candle_core::{DType, Tensor, D};

use crate::device::statistics_on_host;
use crate::{Error, Result};

/// Soft cluster assignments for `scores` (b, k), one row per sample, rows summing to 1.
pub fn sinkhorn(scores: &Tensor, temperature: f64, num_iters: usize) -> Result<Tensor> {
    if statistics_on_host(scores.device()) {
        sinkhorn_on_host(scores, temperature, num_iters)
    } else {
        sinkhorn_on_device(scores, temperature, num_iters)
    }
}

/// [`sinkhorn`] on the host: errors if the scores or the assignments are not finite.
pub fn sinkhorn_on_host(scores: &Tensor, temperature: f64, num_iters: usize) -> Result<Tensor> {
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

/// [`sinkhorn_on_host`]'s steps with candle's ops in f64 on the scores' device, without reading
/// anything back: non-finite scores give non-finite assignments, and so a non-finite loss,
/// which the trainer refuses.
pub fn sinkhorn_on_device(scores: &Tensor, temperature: f64, num_iters: usize) -> Result<Tensor> {
    let (b, k) = scores.dims2()?;
    let s = (scores.detach().to_dtype(DType::F64)? / temperature)?; // (b, k)
    let q = s.broadcast_sub(&s.max_all()?)?.exp()?.t()?; // (k, b)
    let mut q = q.broadcast_div(&q.sum_all()?)?;
    let (r, c) = (1.0 / k as f64, 1.0 / b as f64);
    for _ in 0..num_iters {
        // rows: u = r / Q.sum(1), an all-zero row's infinite factor replaced by the largest
        // finite one (Proto-RL's `remove_infs`)
        let u = q.sum_keepdim(1)?.recip()?.affine(r, 0.0)?; // (k, 1)
        let finite = u.lt(f64::INFINITY)?; // (k, 1) u8
        let finite_max = finite
            .where_cond(&u, &Tensor::full(f64::NEG_INFINITY, u.shape(), u.device())?)?
            .max_keepdim(0)?; // (1, 1)
        let u = finite.where_cond(&u, &finite_max.broadcast_as(u.shape())?)?;
        q = q.broadcast_mul(&u)?;
        // columns: Q *= c / Q.sum(0)
        q = q.broadcast_mul(&q.sum_keepdim(0)?.recip()?.affine(c, 0.0)?)?; // (k, b)
    }
    // Q / Q.sum(0), back to (b, k)
    let q = q.broadcast_div(&q.sum_keepdim(0)?)?.t()?;
    Ok(q.to_dtype(DType::F32)?.contiguous()?)
}

/// The mean assignment entropy of `q` (b, k) as an f64 scalar tensor on q's device: on the host
/// for a CPU tensor ([`assignment_entropy`]), with candle's ops elsewhere, read later with the
/// update's other numbers.
pub fn assignment_entropy_tensor(q: &Tensor) -> Result<Tensor> {
    if statistics_on_host(q.device()) {
        Ok(Tensor::new(assignment_entropy(q)?, q.device())?)
    } else {
        assignment_entropy_on_device(q)
    }
}

/// [`assignment_entropy`] with candle's ops in f64 on q's device: an f64 scalar tensor.
pub fn assignment_entropy_on_device(q: &Tensor) -> Result<Tensor> {
    let q = q.detach().to_dtype(DType::F64)?; // (b, k)

    // −p ln p, with 0 for p = 0 (ln of a zero entry is replaced by 0 before the product)
    let positive = q.gt(0f64)?;
    let log = positive.where_cond(&q, &q.ones_like()?)?.log()?;
    let per_sample = q.mul(&log)?.sum(D::Minus1)?.neg()?; // (b)
    Ok(per_sample.mean(0)?)
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
