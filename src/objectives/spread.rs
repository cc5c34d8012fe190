//! The spread of a batch of projections: the mean pairwise cosine and mean norm every update
//! reports of its target projections, the collapse monitor's evidence (`crate::pretrain::collapse`).
//!
//! It is computed in two halves so that a GPU reads it with the update's other numbers in one
//! copy: [`spread_sums`] reduces the batch to three sums (on the host in f64 for a CPU tensor,
//! with candle's ops in f64 on any other device), and [`Spread::from_sums`] finishes on the host.

use candle_core::{DType, Tensor};

use crate::device::statistics_on_host;
use crate::Result;

/// How spread out a batch of projections is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Mean cosine between the projections of different samples: 1 when all are parallel.
    pub mean_pairwise_cosine: f64,
    /// Mean L2 norm of the projections.
    pub mean_norm: f64,
}

/// How many sums [`spread_sums`] returns.
pub const SPREAD_SUMS: usize = 3;

impl Spread {
    /// From [`spread_sums`]'s `[‖Σ û_i‖², units, Σ ‖z_i‖]` of a batch of `b` rows. The mean over
    /// pairs i ≠ j of û_i·û_j is (‖Σ û_i‖² − n) / (n(n − 1)) over the n rows with a norm > 0.
    pub fn from_sums(sums: [f64; SPREAD_SUMS], b: usize) -> Spread {
        let [unit_sum_sq, units, norms] = sums;
        let pairs = units * (units - 1.0).max(0.0);
        let mean_pairwise_cosine = if pairs > 0.0 {
            (unit_sum_sq - units) / pairs
        } else {
            f64::NAN
        };
        Spread {
            mean_pairwise_cosine,
            mean_norm: norms / b.max(1) as f64,
        }
    }
}

/// The spread of `z` (b, d), b >= 2, read at once.
pub fn spread(z: &Tensor) -> Result<Spread> {
    let sums: [f64; SPREAD_SUMS] = spread_sums(z)?.to_vec1::<f64>()?.try_into().expect("three sums");
    Ok(Spread::from_sums(sums, z.dim(0)?))
}

/// `[‖Σ û_i‖², n, Σ ‖z_i‖]` of `z` (b, d) as an f64 tensor (3) on z's device, û_i = z_i/‖z_i‖
/// over the n rows with a norm > 0. O(b·d).
pub fn spread_sums(z: &Tensor) -> Result<Tensor> {
    if statistics_on_host(z.device()) {
        Ok(Tensor::new(&host_sums(z)?, z.device())?)
    } else {
        device_sums(z)
    }
}

/// [`spread_sums`] with candle's ops in f64 on z's device.
pub fn device_sums(z: &Tensor) -> Result<Tensor> {
    let z = z.detach().to_dtype(DType::F64)?; // (b, d)
    let norms = z.sqr()?.sum_keepdim(1)?.sqrt()?; // (b, 1)
    let nonzero = norms.gt(0f64)?; // (b, 1) u8

    // Rows of norm 0 divide by 1 and stay 0, so they add nothing to the sum of unit vectors.
    let safe = nonzero.where_cond(&norms, &norms.ones_like()?)?; // (b, 1)
    let unit_sum = z.broadcast_div(&safe)?.sum(0)?; // (d)
    Ok(Tensor::stack(
        &[
            unit_sum.sqr()?.sum_all()?,
            nonzero.to_dtype(DType::F64)?.sum_all()?,
            norms.sum_all()?,
        ],
        0,
    )?) // (3)
}

/// [`spread_sums`] on the host, in f64, row after row (the CPU's numbers, unchanged).
pub fn host_sums(z: &Tensor) -> Result<[f64; SPREAD_SUMS]> {
    let rows = z.detach().to_dtype(DType::F64)?.to_vec2::<f64>()?;
    let d = rows.first().map_or(0, Vec::len);
    let mut sum = vec![0f64; d];
    let mut norms = 0.0;
    let mut units = 0usize;
    for row in &rows {
        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        norms += norm;
        if norm > 0.0 {
            units += 1;
            sum.iter_mut().zip(row).for_each(|(s, v)| *s += v / norm);
        }
    }
    Ok([sum.iter().map(|s| s * s).sum::<f64>(), units as f64, norms])
}
