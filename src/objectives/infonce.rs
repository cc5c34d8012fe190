//! InfoNCE (CPC) over a batch: row i's positive is column i, every other column a negative.
//! LFS-CL uses the cosine form (paper §4.5 "LFS-CL": contrastive learning in place of
//! clustering, same data); ATC and CURL use the bilinear form `q·W·kᵀ`.

use candle_core::{DType, Tensor};

use crate::Result;

/// Mean cross-entropy of `logits` (b, b) against the diagonal labels 0..b.
pub fn diagonal_cross_entropy(logits: &Tensor) -> Result<Tensor> {
    let b = logits.dim(0)?;
    let labels = Tensor::arange(0u32, b as u32, logits.device())?;
    Ok(candle_nn::loss::cross_entropy(logits, &labels)?)
}

/// Cosine InfoNCE: logits = normalize(q)·normalize(k)ᵀ / τ; k is detached (target branch).
/// Shapes: q, k (b, d) -> scalar.
pub fn cosine_info_nce(q: &Tensor, k: &Tensor, temperature: f64) -> Result<Tensor> {
    let q = crate::nn::prototypes::l2_normalize(q)?;
    let k = crate::nn::prototypes::l2_normalize(&k.detach())?;
    let logits = (q.matmul(&k.t()?)? / temperature)?; // (b, b)
    diagonal_cross_entropy(&logits)
}

/// Bilinear InfoNCE (CURL, ATC): logits = q·W·kᵀ minus each row's (detached) max.
/// Shapes: q (b, d), w (d, d), k (b, d) -> scalar.
pub fn bilinear_info_nce(q: &Tensor, w: &Tensor, k: &Tensor) -> Result<Tensor> {
    let wk = w.matmul(&k.detach().t()?)?; // (d, b)
    let logits = q.matmul(&wk)?; // (b, b)
    let row_max = logits.detach().max_keepdim(1)?; // (b, 1)
    let logits = logits.broadcast_sub(&row_max)?;
    debug_assert_eq!(logits.dtype(), DType::F32);
    diagonal_cross_entropy(&logits)
}
