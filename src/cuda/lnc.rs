//! LNC's distances and k-th neighbours (`crate::objectives::lnc`, Eq. 3–4) on CUDA as two
//! kernels, computing what `lnc_select` computes on the host in the same order: each distance a
//! sequential f64 sum of squared differences of the f32 latents, its square root, and the
//! idx-th smallest of a row as a stable sort orders ties; the host then takes D's mean in row
//! order. LNC's GPU time per LFS update on an H200: 0.46 ms, against 2.4 with candle's ops
//! (BENCHMARKS.md, results/gpu-h200-2026-11-28d/).

#[cfg(feature = "cuda")]
pub use on_cuda::kth_distances;

/// The kernels, compiled by NVRTC on CUDA (`--fmad=false`); the unit test below compiles them
/// for the host too (`super::on_host`) and holds them to `lnc_select`.
pub const SOURCE: &str = r#"
// latent (rows, dim) f32, its first n_real rows the real ones; dist (rows, n_real) f64:
// dist[r, j] = ||latent[r] - latent[j]||, the squares summed in column order.
extern "C" __global__ void lfs_lnc_distances(const float* latent, double* dist, unsigned int rows,
                                             unsigned int n_real, unsigned int dim) {
    unsigned long long total = (unsigned long long)rows * n_real;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (unsigned long long)blockDim.x * gridDim.x) {
        const float* a = latent + (i / n_real) * dim;
        const float* b = latent + (i % n_real) * dim;
        double s = 0.0;
        for (unsigned int c = 0; c < dim; ++c) {
            double d = (double)a[c] - (double)b[c];
            s += d * d;
        }
        dist[i] = sqrt(s);
    }
}

// Whether x sorts before y: ascending, NaN last (so that every row's ranks are 0..n_real).
__device__ bool lfs_lnc_before(double x, double y) { return x < y || (x == x && y != y); }

// out (rows) f64: row r's idx-th smallest distance (0-based, self at 0 for a real row), idx = k
// for the real rows and k - 1 for the others: the entry whose rank (entries before it, ties
// broken by column) is idx.
extern "C" __global__ void lfs_lnc_kth(const double* dist, double* out, unsigned int rows,
                                       unsigned int n_real, unsigned int k) {
    unsigned long long total = (unsigned long long)rows * n_real;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (unsigned long long)blockDim.x * gridDim.x) {
        unsigned long long r = i / n_real;
        unsigned int j = i % n_real;
        const double* row = dist + r * n_real;
        double v = row[j];
        unsigned int rank = 0;
        for (unsigned int l = 0; l < n_real; ++l) {
            rank += lfs_lnc_before(row[l], v) || (l < j && !lfs_lnc_before(v, row[l]));
        }
        if (rank == (r < n_real ? k : k - 1)) out[r] = v;
    }
}
"#;

#[cfg(feature = "cuda")]
mod on_cuda {
    use std::sync::OnceLock;

    use candle_core::cuda::cudarc::driver::PushKernelArg;
    use candle_core::cuda::{CudaStorage, WrapErr};
    use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};

    use super::SOURCE;
    use crate::cuda::runtime::{compiled, contiguous_len, launch_config};
    use crate::{Error, Result};

    const MODULE: &str = "lfs_cuda_lnc";

    fn ptx() -> candle_core::Result<&'static str> {
        static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
        compiled(&PTX, SOURCE, "LNC")
    }

    /// For `latent` (rows, dim) on CUDA whose first `n_real` rows are the real ones: (rows) f64,
    /// each real row's k-th-nearest real neighbour's distance (self excluded: Eq. 3's topk(k + 1)
    /// last entry) and each other row's k-th nearest real row's (Eq. 4's topk(k) last entry).
    pub fn kth_distances(latent: &Tensor, n_real: usize, k: usize) -> Result<Tensor> {
        let (rows, dim) = latent.dims2()?;
        if k == 0 || k >= n_real || n_real > rows || rows * n_real > u32::MAX as usize {
            return Err(Error::Config(format!(
                "lnc (CUDA): k = {k} with {n_real} real rows of {rows}"
            )));
        }
        let latent = latent.to_dtype(DType::F32)?.contiguous()?;
        Ok(latent.apply_op1_no_bwd(&KthDistances { rows, n_real, dim, k })?)
    }

    struct KthDistances {
        rows: usize,
        n_real: usize,
        dim: usize,
        k: usize,
    }

    impl CustomOp1 for KthDistances {
        fn name(&self) -> &'static str {
            "lnc-kth-distances-cuda"
        }

        fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
            candle_core::bail!("lnc-kth-distances-cuda runs on CUDA only (the CPU's is lnc_select)")
        }

        fn cuda_fwd(&self, latent: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
            contiguous_len(l, "LNC's latent")?;
            let Self { rows, n_real, dim, k } = *self;
            let dev = latent.device.clone();
            let latent_v = latent.as_cuda_slice::<f32>()?.slice(l.start_offset()..);
            let pairs = rows * n_real;
            // SAFETY: every entry of both is written by the kernels (each row has exactly one
            // entry of rank idx: the ranks are a permutation of 0..n_real).
            let dist = unsafe { dev.alloc::<f64>(pairs)? };
            let out = unsafe { dev.alloc::<f64>(rows)? };
            let (rows_u, n_real_u, dim_u, k_u) = (rows as u32, n_real as u32, dim as u32, k as u32);

            let func = dev.get_or_load_custom_func("lfs_lnc_distances", MODULE, ptx()?)?;
            let mut builder = func.builder();
            builder.arg(&latent_v);
            builder.arg(&dist);
            builder.arg(&rows_u);
            builder.arg(&n_real_u);
            builder.arg(&dim_u);
            // SAFETY: the arguments are as lfs_lnc_distances declares them; the latent holds rows·dim.
            unsafe { builder.launch(launch_config(pairs)) }.w()?;

            let func = dev.get_or_load_custom_func("lfs_lnc_kth", MODULE, ptx()?)?;
            let mut builder = func.builder();
            builder.arg(&dist);
            builder.arg(&out);
            builder.arg(&rows_u);
            builder.arg(&n_real_u);
            builder.arg(&k_u);
            // SAFETY: as lfs_lnc_kth declares them; dist holds rows·n_real, out rows.
            unsafe { builder.launch(launch_config(pairs)) }.w()?;
            Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from(rows)))
        }
    }
}
