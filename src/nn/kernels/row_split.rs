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
/// Off the CPU it is one GEMM, x · Wᵀ; with `LFS_LONG_PRODUCT=w-xt`, (W · xᵀ)ᵀ, the same
/// product with its operands swapped, an A/B for a GPU not yet timed: on the 2026-11-28 H200
/// profile the projector's x · Wᵀ at K = 39,200 ran as a 32×64-tile kernel without split-K (64
/// tiles for B = 1,024 and 128 outputs, on 132 SMs), 1.7 of the LFS update's 15.8 GPU-busy ms,
/// and cuBLAS chooses its kernel by the problem's orientation and shape. (A split-K by hand,
/// 8 chunk products in one batched GEMM, made the LFS update slower: 15.95 against 14.53 ms,
/// results/gpu-h200-2026-11-28-review/cmd1/summary.txt.)
pub(crate) fn constant_product(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (b, inner) = x.dims2()?;
    match (row_split_parts(b, inner), long_product()) {
        (Some(parts), _) if x.device().is_cpu() => Ok(x.apply_op2_no_bwd(w, &RowSplitProduct { parts })?),
        (_, order) => one_gemm(x, w, order == LongProduct::Swapped),
    }
}

/// x · Wᵀ (b, out) as one GEMM, or as (W · xᵀ)ᵀ when `swapped`.
fn one_gemm(x: &Tensor, w: &Tensor, swapped: bool) -> Result<Tensor> {
    Ok(match swapped {
        true => w.matmul(&x.t()?)?.t()?.contiguous()?, // (out, b)ᵀ
        false => x.matmul(&w.t()?)?,
    })
}

/// How [`constant_product`] runs off the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LongProduct {
    /// x · Wᵀ, one GEMM (`LFS_LONG_PRODUCT=x-wt`, the default).
    Plain,
    /// (W · xᵀ)ᵀ (`w-xt`).
    Swapped,
}

fn long_product() -> LongProduct {
    static ORDER: std::sync::OnceLock<LongProduct> = std::sync::OnceLock::new();
    *ORDER.get_or_init(
        || match crate::device::env_value("LFS_LONG_PRODUCT", &["x-wt", "w-xt"]) {
            Some("w-xt") => LongProduct::Swapped,
            _ => LongProduct::Plain,
        },
    )
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

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::one_gemm;

    /// The swapped product (`LFS_LONG_PRODUCT=w-xt`) is the same x · Wᵀ, laid out as candle's:
    /// contiguous (b, out), every entry within rounding of the unswapped one's.
    #[test]
    fn the_swapped_product_is_the_same_product() {
        let x = Tensor::randn(0f32, 1.0, (5, 300), &Device::Cpu).unwrap();
        let w = Tensor::randn(0f32, 1.0, (7, 300), &Device::Cpu).unwrap();
        let (a, b) = (one_gemm(&x, &w, false).unwrap(), one_gemm(&x, &w, true).unwrap());
        assert_eq!(b.dims(), &[5, 7]);
        assert!(b.is_contiguous());
        assert_same_product(&a, &b);
    }

    fn assert_same_product(a: &Tensor, b: &Tensor) {
        let (a, b) = (a.to_vec2::<f32>().unwrap(), b.to_vec2::<f32>().unwrap());
        for (ra, rb) in a.iter().zip(&b) {
            for (x, y) in ra.iter().zip(rb) {
                assert!((x - y).abs() <= 1e-4 * x.abs().max(1.0), "{x} vs {y}");
            }
        }
    }
}
