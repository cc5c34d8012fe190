//! The spread of a batch of projections: the mean pairwise cosine and mean norm every update
//! reports of its target projections, the collapse monitor's evidence (`crate::pretrain::collapse`).

use candle_core::{DType, Tensor};

use crate::Result;

/// How spread out a batch of projections is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Mean cosine between the projections of different samples: 1 when all are parallel.
    pub mean_pairwise_cosine: f64,
    /// Mean L2 norm of the projections.
    pub mean_norm: f64,
}

/// The spread of `z` (b, d), b >= 2. The mean over pairs i ≠ j of û_i·û_j is
/// (‖Σ û_i‖² − b) / (b(b − 1)) for unit vectors û, so it costs O(b·d).
pub fn spread(z: &Tensor) -> Result<Spread> {
    let rows = z.detach().to_dtype(DType::F64)?.to_vec2::<f64>()?;
    let b = rows.len();
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
    let pairs = (units * units.saturating_sub(1)) as f64;
    let mean_pairwise_cosine = if pairs > 0.0 {
        (sum.iter().map(|s| s * s).sum::<f64>() - units as f64) / pairs
    } else {
        f64::NAN
    };
    Ok(Spread {
        mean_pairwise_cosine,
        mean_norm: norms / b.max(1) as f64,
    })
}
