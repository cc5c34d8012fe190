//! Orthogonal initialisation (`torch.nn.init.orthogonal_`), as Proto-RL's `weight_init` does:
//! conv and linear weights orthogonal with a gain (√2 for conv, 1 for linear), biases zero.
//!
//! torch flattens the weight to `(rows, cols)` = `(out, in·kh·kw)`, draws a standard normal
//! matrix, takes the QR of the tall orientation and fixes the signs so that `diag(R) > 0`.
//! Modified Gram–Schmidt (run twice for stability) yields exactly that Q, because it produces
//! an R with a positive diagonal. The result: rows orthonormal when `rows <= cols`
//! (`W Wᵀ = gain²·I`), columns orthonormal otherwise (`Wᵀ W = gain²·I`).

use rand::Rng;

use crate::{Error, Result};

/// One standard normal sample (Box–Muller; rand 0.9 has no normal distribution without
/// rand_distr).
pub fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    // 1 - u keeps the log argument in (0, 1].
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A `(rows, cols)` row-major orthogonal matrix scaled by `gain`.
pub fn orthogonal<R: Rng + ?Sized>(rows: usize, cols: usize, gain: f64, rng: &mut R) -> Result<Vec<f32>> {
    if rows == 0 || cols == 0 {
        return Err(Error::Shape(format!(
            "orthogonal init of an empty ({rows}, {cols}) matrix"
        )));
    }
    // The tall orientation: n vectors of length len, n <= len.
    let (n, len) = if rows < cols { (rows, cols) } else { (cols, rows) };
    // vecs[j] is column j of the tall (len, n) normal matrix.
    let mut vecs: Vec<Vec<f64>> = (0..n)
        .map(|_| (0..len).map(|_| standard_normal(rng)).collect())
        .collect();
    for j in 0..n {
        // Two passes of modified Gram–Schmidt against the earlier vectors.
        for _pass in 0..2 {
            for i in 0..j {
                let (done, rest) = vecs.split_at_mut(j);
                let qi = &done[i];
                let vj = &mut rest[0];
                let dot: f64 = qi.iter().zip(vj.iter()).map(|(a, b)| a * b).sum();
                vj.iter_mut().zip(qi).for_each(|(v, q)| *v -= dot * q);
            }
        }
        let norm = vecs[j].iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm < 1e-12 {
            return Err(Error::Training(
                "orthogonal init: rank-deficient normal draw".to_string(),
            ));
        }
        vecs[j].iter_mut().for_each(|v| *v /= norm);
    }
    let mut out = vec![0f32; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            // rows < cols: W = Qᵀ, so W[r, c] = Q[c, r] = vecs[r][c]; else W = Q, W[r, c] = vecs[c][r].
            let q = if rows < cols { vecs[r][c] } else { vecs[c][r] };
            out[r * cols + c] = (gain * q) as f32;
        }
    }
    Ok(out)
}
