//! Long, narrow products `x · Wᵀ` on the CPU — a (b, 39200) batch of conv features times a
//! trunk's or the projector's (out, 39200) weights — split by rows of x over rayon's threads,
//! each block one single-threaded GEMM (BENCHMARKS.md, issue 30). The GEMM candle calls runs
//! such a product on one thread whatever the pool.

use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};

use super::cpu_storage::contiguous_f32;
use crate::Result;

/// Inner dimensions from which [`RowSplitProduct`] takes a constant input's product.
const ROW_SPLIT_MIN_INNER: usize = 4096;

/// The number of row blocks a constant input's product (rows, inner) · Wᵀ on the CPU is split
/// into ([`row_split_product`]), or None where one GEMM does better.
pub(crate) fn row_split_parts(rows: usize, inner: usize) -> Option<usize> {
    let threads = rayon::current_num_threads();
    (inner >= ROW_SPLIT_MIN_INNER && rows >= 2 && threads > 1).then(|| threads.min(rows))
}

/// `x · Wᵀ` (b, out) outside the graph, for a constant x (b, in). A trunk's product (b = 128,
/// in = 39200, out = 50) or the projector's (out = 128) is long and narrow: the GEMM candle
/// calls runs it on one thread whatever the pool, so here each thread takes a block of x's
/// rows (BENCHMARKS.md, issue 30).
///
/// Off the CPU it is one GEMM, x · Wᵀ (a split-K by hand was slower on an H200, BENCHMARKS.md
/// 2026-11-29).
pub(crate) fn constant_product(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (b, inner) = x.dims2()?;
    match row_split_parts(b, inner) {
        Some(parts) if x.device().is_cpu() => Ok(x.apply_op2_no_bwd(w, &RowSplitProduct { parts })?),
        _ => Ok(x.matmul(&w.t()?)?),
    }
}

/// y (b, out) = x (b, in) · Wᵀ with W (out, in), x's rows in `parts` blocks, each block one
/// single-threaded GEMM on its own thread.
struct RowSplitProduct {
    parts: usize,
}

impl CustomOp2 for RowSplitProduct {
    fn name(&self) -> &'static str {
        "row-split-product"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        x_layout: &Layout,
        w: &CpuStorage,
        w_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(x, x_layout, self.name())?;
        let w = contiguous_f32(w, w_layout, self.name())?;
        let (b, inner) = x_layout.shape().dims2()?;
        let (out, w_inner) = w_layout.shape().dims2()?;
        if inner != w_inner {
            candle_core::bail!("{}: x (b, {inner}) · Wᵀ with W ({out}, {w_inner})", self.name())
        }
        let y = row_split_product(x, b, inner, w, out, self.parts); // (b, out)
        Ok((CpuStorage::F32(y), Shape::from((b, out))))
    }
}

/// y (rows, out) = x (rows, inner) · Wᵀ with W (out, inner), all row-major: x's rows in
/// `parts` blocks, each block one single-threaded GEMM on its own rayon thread.
pub(crate) fn row_split_product(x: &[f32], rows: usize, inner: usize, w: &[f32], out: usize, parts: usize) -> Vec<f32> {
    use rayon::prelude::*;
    assert!(
        x.len() == rows * inner && w.len() == out * inner,
        "row_split_product: shapes"
    );
    let rows_per_part = rows.div_ceil(parts.max(1)).max(1);
    let mut y = vec![0f32; rows * out]; // (rows, out)
    y.par_chunks_mut(rows_per_part * out)
        .zip(x.par_chunks(rows_per_part * inner))
        .for_each(|(y_rows, x_rows)| {
            let rows = y_rows.len() / out;
            // SAFETY: y_rows is (rows, out) row-major, x_rows (rows, inner) row-major and w
            // (out, inner) row-major, read as Wᵀ (inner, out) through its strides; the three
            // slices hold exactly those elements and y_rows is written by this thread only.
            unsafe {
                gemm::gemm(
                    rows,
                    out,
                    inner,
                    y_rows.as_mut_ptr(),
                    1,
                    out as isize,
                    false,
                    x_rows.as_ptr(),
                    1,
                    inner as isize,
                    w.as_ptr(),
                    inner as isize,
                    1,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                )
            }
        });
    y
}
