//! Row-major f32 matrices on the host for the written-out SAC update ([`super::backward`]):
//! strided views and their product through the GEMM crate candle calls, and the column sums
//! and concatenations the backward passes need.

/// Products below this many FLOPs run on one thread (splitting them costs more than it saves).
const PARALLEL_MIN_FLOPS: usize = 1 << 22;

/// A read-only matrix view: element (i, j) at `data[i·rs + j·cs]`.
#[derive(Clone, Copy)]
pub(super) struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Mat<'a> {
    /// A row-major (rows, cols) matrix.
    pub(super) fn new(data: &'a [f32], rows: usize, cols: usize) -> Self {
        assert_eq!(data.len(), rows * cols, "matrix of {rows}×{cols}");
        Self {
            data,
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose, as a view of the same data.
    pub(super) fn t(self) -> Self {
        Self {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
        }
    }
}

/// dst (m, n) row-major = a (m, k) · b (k, n).
pub(super) fn matmul(dst: &mut [f32], a: Mat, b: Mat) {
    assert_eq!(a.cols, b.rows, "matmul: inner dimensions");
    let (m, n, k) = (a.rows, b.cols, a.cols);
    assert_eq!(dst.len(), m * n, "matmul: destination");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        dst.fill(0.0);
        return;
    }
    let last = |x: &Mat| (x.rows - 1) * x.rs + (x.cols - 1) * x.cs;
    assert!(last(&a) < a.data.len() && last(&b) < b.data.len(), "matmul: views");
    let threads = rayon::current_num_threads();
    let parallelism = match 2 * m * n * k >= PARALLEL_MIN_FLOPS && threads > 1 {
        true => gemm::Parallelism::Rayon(threads),
        false => gemm::Parallelism::None,
    };
    // SAFETY: dst is (m, n) row-major and holds m·n elements; a's and b's largest offsets were
    // checked against their slices above, and dst is borrowed mutably, so nothing aliases it.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// Σ over rows of a row-major (rows, cols) matrix: (cols).
pub(super) fn column_sums(x: &[f32], cols: usize) -> Vec<f32> {
    let mut sums = vec![0f32; cols];
    for row in x.chunks_exact(cols) {
        sums.iter_mut().zip(row).for_each(|(s, v)| *s += v);
    }
    sums
}

/// Columns `from..from + width` of x + y, both row-major (rows, cols): (rows, width). (The two
/// Q heads' gradients reaching their shared input's trunk features or action.)
pub(super) fn sum_of_columns(x: &[f32], y: &[f32], cols: usize, from: usize, width: usize) -> Vec<f32> {
    x.chunks_exact(cols)
        .zip(y.chunks_exact(cols))
        .flat_map(|(rx, ry)| rx[from..from + width].iter().zip(&ry[from..from + width]))
        .map(|(x, y)| x + y)
        .collect()
}

/// [a | b] with a (rows, ca) and b (rows, cb): (rows, ca + cb), as `Tensor::cat` on the last dim.
pub(super) fn concat_columns(a: &[f32], ca: usize, b: &[f32], cb: usize) -> Vec<f32> {
    a.chunks_exact(ca)
        .zip(b.chunks_exact(cb))
        .flat_map(|(ra, rb)| ra.iter().chain(rb))
        .copied()
        .collect()
}
