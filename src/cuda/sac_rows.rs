//! The CUDA kernels of SAC's row-wise ops (`crate::rl::row_ops`: the trunk's LayerNorm
//! forward, its input gradient and its parameters' gradients, the squashed Gaussian's sample
//! and its gradient): row_ops' per-row functions, line for line, one thread per row (per column
//! for the parameters' gradients) in grid-stride loops, compiled by NVRTC without fused
//! multiply-adds. row_ops' unit test also compiles them for the host with a C++ compiler, one
//! thread striding over everything, and holds them to its CPU ops.

/// The kernels' source.
pub const SOURCE: &str = r#"
#define LN_EPS 1e-5f

// A row's mean (into *mean) and std = sqrt(var + eps), as normalise_row computes them.
__device__ float lfs_row_stats(const float* y, unsigned int f, float* mean_out) {
    float mean = 0.0f;
    for (unsigned int j = 0; j < f; ++j) mean += y[j];
    mean /= (float)f;
    float var = 0.0f;
    for (unsigned int j = 0; j < f; ++j) { float v = y[j] - mean; var += v * v; }
    var /= (float)f;
    *mean_out = mean;
    return sqrtf(var + LN_EPS);
}

// normalise_row: centre, divide by sqrt(var + eps); returns the std.
__device__ float lfs_normalise(const float* y, float* x_hat, unsigned int f) {
    float mean;
    float std = lfs_row_stats(y, f, &mean);
    for (unsigned int j = 0; j < f; ++j) x_hat[j] = (y[j] - mean) / std;
    return std;
}

// LayerNorm's output, one thread per row; x_hat lives in the output row.
extern "C" __global__ void lfs_sac_layer_norm(const float* y, const float* gamma, const float* beta, float* out,
                                              unsigned int b, unsigned int f) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < b; i += blockDim.x * gridDim.x) {
        float* o = out + (unsigned long long)i * f;
        lfs_normalise(y + (unsigned long long)i * f, o, f);
        for (unsigned int j = 0; j < f; ++j) o[j] = o[j] * gamma[j] + beta[j];
    }
}

// layer_norm_input_grad_row, one thread per row; x_hat is recomputed into dy's row first.
extern "C" __global__ void lfs_sac_layer_norm_input_grad(const float* y, const float* gamma, const float* d_out,
                                                         float* dy, unsigned int b, unsigned int f) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < b; i += blockDim.x * gridDim.x) {
        unsigned long long r = (unsigned long long)i * f;
        float* x_hat = dy + r;
        float std = lfs_normalise(y + r, x_hat, f);
        float mean_dx_hat = 0.0f, mean_dx_hat_x_hat = 0.0f;
        for (unsigned int j = 0; j < f; ++j) {
            float dx_hat = d_out[r + j] * gamma[j];
            mean_dx_hat += dx_hat;
            mean_dx_hat_x_hat += dx_hat * x_hat[j];
        }
        mean_dx_hat /= (float)f;
        mean_dx_hat_x_hat /= (float)f;
        for (unsigned int j = 0; j < f; ++j) {
            float dx_hat = d_out[r + j] * gamma[j];
            dy[r + j] = (dx_hat - mean_dx_hat - x_hat[j] * mean_dx_hat_x_hat) / std;
        }
    }
}

// Each row's (mean, std) into stats (b, 2), one thread per row: what the parameters' gradients
// read, so that no column's thread recomputes every row.
extern "C" __global__ void lfs_sac_row_stats(const float* y, float* stats, unsigned int b, unsigned int f) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < b; i += blockDim.x * gridDim.x) {
        stats[2 * i + 1] = lfs_row_stats(y + (unsigned long long)i * f, f, &stats[2 * i]);
    }
}

// d gamma and d beta, one thread per column, the rows summed in order (as the CPU's loop), each
// x_hat from its row's stats as lfs_normalise computes it.
extern "C" __global__ void lfs_sac_layer_norm_param_grads(const float* y, const float* d_out, const float* stats,
                                                          float* grads, unsigned int b, unsigned int f) {
    for (unsigned int j = blockIdx.x * blockDim.x + threadIdx.x; j < f; j += blockDim.x * gridDim.x) {
        float dg = 0.0f, db = 0.0f;
        for (unsigned int i = 0; i < b; ++i) {
            unsigned long long r = (unsigned long long)i * f;
            float x_hat = (y[r + j] - stats[2 * i]) / stats[2 * i + 1];
            float d = d_out[r + j];
            dg += d * x_hat;
            db += d;
        }
        grads[j] = dg;
        grads[f + j] = db;
    }
}

__device__ float lfs_softplus(float z) { return fmaxf(z, 0.0f) + logf(expf(-fabsf(z)) + 1.0f); }

// squash_row's terms into raw_tanh, std, action; returns the log-density term.
__device__ float lfs_squash(float mu, float raw, float eps, float log_std_min, float half_range,
                            float* raw_tanh, float* std_out, float* action) {
    const float half_log_2pi = 0.91893853320467274178f;
    const float ln2 = 0.69314718055994530942f;
    float t = tanhf(raw);
    float log_std = (t + 1.0f) * half_range + log_std_min;
    float std = expf(log_std);
    float x = mu + std * eps;
    float normal = (eps * eps * -0.5f - log_std) - half_log_2pi;
    float log_det = (-(lfs_softplus(x * -2.0f) + x) + ln2) * 2.0f;
    *raw_tanh = t;
    *std_out = std;
    *action = tanhf(x);
    return normal - log_det;
}

// out (b, A + 1) = [action | sum log pi], one thread per row.
extern "C" __global__ void lfs_sac_squashed_sample(const float* head, const float* eps, float* out,
                                                   unsigned int b, unsigned int a,
                                                   float log_std_min, float half_range) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < b; i += blockDim.x * gridDim.x) {
        const float* h = head + (unsigned long long)i * 2 * a;
        const float* e = eps + (unsigned long long)i * a;
        float* o = out + (unsigned long long)i * (a + 1);
        float log_prob = 0.0f, t, s;
        for (unsigned int j = 0; j < a; ++j) {
            log_prob += lfs_squash(h[j], h[a + j], e[j], log_std_min, half_range, &t, &s, &o[j]);
        }
        o[a] = log_prob;
    }
}

// squash_grad_row: d head (b, 2A) = [d mu | d raw], one thread per row.
extern "C" __global__ void lfs_sac_squashed_sample_grad(const float* head, const float* eps, const float* d_action,
                                                        float* d_head, unsigned int b, unsigned int a,
                                                        float log_std_min, float half_range, float d_log_prob) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < b; i += blockDim.x * gridDim.x) {
        const float* h = head + (unsigned long long)i * 2 * a;
        const float* e = eps + (unsigned long long)i * a;
        const float* da = d_action + (unsigned long long)i * a;
        float* dh = d_head + (unsigned long long)i * 2 * a;
        for (unsigned int j = 0; j < a; ++j) {
            float t, s, tanh_x;
            lfs_squash(h[j], h[a + j], e[j], log_std_min, half_range, &t, &s, &tanh_x);
            float d_x = da[j] * (1.0f - tanh_x * tanh_x) + d_log_prob * 2.0f * tanh_x;
            float d_log_std = d_x * s * e[j] - d_log_prob;
            dh[j] = d_x;
            dh[a + j] = d_log_std * half_range * (1.0f - t * t);
        }
    }
}
"#;

#[cfg(feature = "cuda")]
pub use on_cuda::launch_rows;

#[cfg(feature = "cuda")]
mod on_cuda {
    use std::sync::OnceLock;

    use candle_core::cuda::cudarc::driver::PushKernelArg;
    use candle_core::cuda::{CudaStorage, WrapErr};
    use candle_core::{Layout, Shape};

    use super::SOURCE;
    use crate::cuda::runtime::{compiled, contiguous_len, launch_config};

    /// The module's name in candle's per-device cache of custom modules.
    const MODULE: &str = "lfs_sac_rows";

    /// The kernels' PTX, compiled on first use.
    fn ptx() -> candle_core::Result<&'static str> {
        static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
        compiled(&PTX, SOURCE, "SAC row")
    }

    /// Runs kernel `name` over `threads` threads (rows or columns) with its arguments in
    /// SOURCE's order: the f32 inputs, a fresh output of `out_shape`, `(rows, cols)` (b and F,
    /// or b and A) and `scalars`. Every input must be contiguous.
    pub fn launch_rows(
        name: &str,
        out_shape: &Shape,
        inputs: &[(&CudaStorage, &Layout)],
        (rows, cols): (usize, usize),
        scalars: &[f32],
        threads: usize,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (first, _) = inputs[0];
        let dev = first.device.clone();
        let func = dev.get_or_load_custom_func(name, MODULE, ptx()?)?;
        let views = inputs
            .iter()
            .map(|(s, l)| {
                contiguous_len(l, name)?;
                Ok(s.as_cuda_slice::<f32>()?.slice(l.start_offset()..))
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        // SAFETY: every element is written by the kernel.
        let out = unsafe { dev.alloc::<f32>(out_shape.elem_count().max(1))? };
        let (rows, cols) = (rows as u32, cols as u32);
        let mut builder = func.builder();
        for v in &views {
            builder.arg(v);
        }
        builder.arg(&out);
        builder.arg(&rows);
        builder.arg(&cols);
        for s in scalars {
            builder.arg(s);
        }
        // SAFETY: each kernel's parameters are its inputs, its output, (rows, cols) and its
        // scalars, in SOURCE's order; the callers pass shapes the CPU side checks the same way.
        unsafe { builder.launch(launch_config(threads)) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev), out_shape.clone()))
    }
}
