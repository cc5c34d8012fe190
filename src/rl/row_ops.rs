//! The row-wise parts of SAC's and DrQ-v2's updates, each as one op: the trunk's LayerNorm
//! forward, its input gradient and its parameters' gradients, and the squashed Gaussian's sample
//! and its gradient (with candle's element-wise ops ~12, ~14, ~26 and ~14 kernel launches each;
//! SAC's update on an H200 at B=128 / 512 took 2.6 / 3.6 ms with these, 4.98 / 5.28 ms without,
//! BENCHMARKS.md 2026-11-28). SAC's update off the CPU ([`super::sac::on_device`]) and the
//! written-out layers ([`super::written_out`]) use them.
//!
//! The arithmetic per row lives here once, in plain functions ([`normalise_row`],
//! [`layer_norm_input_grad_row`], [`squash_row`], [`squash_grad_row`]) that the host path
//! (`super::sac::backward`) and these ops' CPU side call; the CUDA kernels
//! (`crate::cuda::sac_rows`) are the same lines in C, compiled by NVRTC without fused
//! multiply-adds, one thread per row (per column for the parameters' gradients, summing the
//! rows in the CPU's order). Nothing differentiates through these ops. Checked against candle's
//! autograd on the CPU (`sac/mod.rs`' unit test) and on a GPU by `examples/device_check.rs`.

use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor};

use crate::nn::kernels::cpu_storage::contiguous_f32;
use crate::rl::mlp::LAYER_NORM_EPS;
use crate::Result;

// ---- the arithmetic per row

/// LayerNorm's normalisation of one row in place, as candle's `layer_norm_slow`: centre,
/// divide by sqrt(var + eps). Returns that standard deviation.
pub(super) fn normalise_row(row: &mut [f32]) -> f32 {
    let f = row.len() as f32;
    let mean = row.iter().sum::<f32>() / f;
    row.iter_mut().for_each(|v| *v -= mean);
    let var = row.iter().map(|v| v * v).sum::<f32>() / f;
    let std = (var + LAYER_NORM_EPS).sqrt();
    row.iter_mut().for_each(|v| *v /= std);
    std
}

/// d y of one row of `y → x_hat = normalise(y) → x_hat·γ + β`, given d out, x_hat and std;
/// written into `dy`.
pub(super) fn layer_norm_input_grad_row(dy: &mut [f32], d_out: &[f32], x_hat: &[f32], std: f32, gamma: &[f32]) {
    let f = dy.len() as f32;
    let mut mean_dx_hat = 0f32;
    let mut mean_dx_hat_x_hat = 0f32;
    for j in 0..dy.len() {
        let dx_hat = d_out[j] * gamma[j];
        mean_dx_hat += dx_hat;
        mean_dx_hat_x_hat += dx_hat * x_hat[j];
        dy[j] = dx_hat;
    }
    mean_dx_hat /= f;
    mean_dx_hat_x_hat /= f;
    for j in 0..dy.len() {
        dy[j] = (dy[j] - mean_dx_hat - x_hat[j] * mean_dx_hat_x_hat) / std;
    }
}

/// The squashed Gaussian's constants: log σ = min + (tanh(raw) + 1)·half_range.
#[derive(Debug, Clone, Copy)]
pub(super) struct Squash {
    pub log_std_min: f32,
    pub half_range: f32,
}

impl Squash {
    pub(super) fn new((log_std_min, log_std_max): (f64, f64)) -> Self {
        Self {
            log_std_min: log_std_min as f32,
            half_range: (0.5 * (log_std_max - log_std_min)) as f32,
        }
    }
}

/// One sample's terms at action dimension j.
pub(super) struct SquashTerms {
    /// tanh of the raw log-std.
    pub raw_tanh: f32,
    /// σ.
    pub std: f32,
    /// tanh(x).
    pub action: f32,
    /// log π's term (summed over the action's dimensions).
    pub log_prob: f32,
}

/// The reparameterised sample x = μ + σ·ε of one action dimension, squashed: action = tanh(x),
/// log π = −ε²/2 − log σ − ½ log 2π − log|d tanh(x)/dx|, the last in the stable form
/// 2·(ln 2 − x − softplus(−2x)).
pub(super) fn squash_row(mu: f32, raw: f32, eps: f32, s: Squash) -> SquashTerms {
    let half_log_2pi = (0.5 * (2.0 * std::f64::consts::PI).ln()) as f32;
    let ln2 = std::f64::consts::LN_2 as f32;
    let softplus = |z: f32| z.max(0.0) + ((-z.abs()).exp() + 1.0).ln();
    let t = raw.tanh();
    let log_std = (t + 1.0) * s.half_range + s.log_std_min;
    let std = log_std.exp();
    let x = mu + std * eps;
    let normal = (eps * eps * -0.5 - log_std) - half_log_2pi;
    let log_det = (-(softplus(x * -2.0) + x) + ln2) * 2.0;
    SquashTerms {
        raw_tanh: t,
        std,
        action: x.tanh(),
        log_prob: normal - log_det,
    }
}

/// d μ and d raw of one action dimension, given d action and d log π (per row): through
/// x = μ + σ·ε, action = tanh(x), and log π's terms −log σ and −log(1 − tanh² x), whose
/// derivative in x is 2·tanh(x).
pub(super) fn squash_grad_row(terms: &SquashTerms, eps: f32, d_action: f32, d_log_prob: f32, s: Squash) -> (f32, f32) {
    let tanh_x = terms.action;
    let d_x = d_action * (1.0 - tanh_x * tanh_x) + d_log_prob * 2.0 * tanh_x;
    let d_log_std = d_x * terms.std * eps - d_log_prob;
    let t = terms.raw_tanh;
    (d_x, d_log_std * s.half_range * (1.0 - t * t))
}

// ---- the ops

/// y (b, F), γ, β (F) -> LayerNorm's output x_hat·γ + β (b, F).
struct LayerNormForward;

/// y (b, F), γ (F), d out (b, F) -> d y (b, F).
struct LayerNormInputGrad;

/// y (b, F), d out (b, F) -> (2, F): [d γ = Σ_rows d out·x_hat ; d β = Σ_rows d out] (on CUDA
/// two kernels: each row's statistics, then one thread per column over the rows).
struct LayerNormParamGrads;

/// head (b, 2A) = [μ | raw], ε (b, A) -> (b, A + 1): [action | Σ_A log π].
struct SquashedSample(Squash);

/// head (b, 2A), ε (b, A), d action (b, A) -> d head (b, 2A), with d log π per row.
struct SquashedSampleGrad {
    squash: Squash,
    d_log_prob: f32,
}

impl CustomOp3 for LayerNormForward {
    fn name(&self) -> &'static str {
        "sac-layer-norm"
    }

    fn cpu_fwd(
        &self,
        y: &CpuStorage,
        y_l: &Layout,
        g: &CpuStorage,
        g_l: &Layout,
        b: &CpuStorage,
        b_l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let name = self.name();
        let (y, gamma, beta) = (
            contiguous_f32(y, y_l, name)?,
            contiguous_f32(g, g_l, name)?,
            contiguous_f32(b, b_l, name)?,
        );
        let mut out = y.to_vec();
        for row in out.chunks_exact_mut(gamma.len()) {
            normalise_row(row);
            row.iter_mut()
                .zip(gamma.iter().zip(beta))
                .for_each(|(v, (g, b))| *v = *v * g + b);
        }
        Ok((CpuStorage::F32(out), y_l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        y: &candle_core::CudaStorage,
        y_l: &Layout,
        g: &candle_core::CudaStorage,
        g_l: &Layout,
        b: &candle_core::CudaStorage,
        b_l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let (rows, f) = y_l.shape().dims2()?;
        crate::cuda::sac_rows::launch_rows(
            "lfs_sac_layer_norm",
            y_l.shape(),
            &[(y, y_l), (g, g_l), (b, b_l)],
            (rows, f),
            &[],
            rows,
        )
    }
}

impl CustomOp3 for LayerNormInputGrad {
    fn name(&self) -> &'static str {
        "sac-layer-norm-input-grad"
    }

    fn cpu_fwd(
        &self,
        y: &CpuStorage,
        y_l: &Layout,
        g: &CpuStorage,
        g_l: &Layout,
        d: &CpuStorage,
        d_l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let name = self.name();
        let (y, gamma, d_out) = (
            contiguous_f32(y, y_l, name)?,
            contiguous_f32(g, g_l, name)?,
            contiguous_f32(d, d_l, name)?,
        );
        let f = gamma.len();
        let mut x_hat = vec![0f32; f];
        let mut dy = vec![0f32; y.len()];
        for ((dy, y), d_out) in dy.chunks_exact_mut(f).zip(y.chunks_exact(f)).zip(d_out.chunks_exact(f)) {
            x_hat.copy_from_slice(y);
            let std = normalise_row(&mut x_hat);
            layer_norm_input_grad_row(dy, d_out, &x_hat, std, gamma);
        }
        Ok((CpuStorage::F32(dy), y_l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        y: &candle_core::CudaStorage,
        y_l: &Layout,
        g: &candle_core::CudaStorage,
        g_l: &Layout,
        d: &candle_core::CudaStorage,
        d_l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let (rows, f) = y_l.shape().dims2()?;
        crate::cuda::sac_rows::launch_rows(
            "lfs_sac_layer_norm_input_grad",
            y_l.shape(),
            &[(y, y_l), (g, g_l), (d, d_l)],
            (rows, f),
            &[],
            rows,
        )
    }
}

impl CustomOp2 for LayerNormParamGrads {
    fn name(&self) -> &'static str {
        "sac-layer-norm-param-grads"
    }

    fn cpu_fwd(
        &self,
        y: &CpuStorage,
        y_l: &Layout,
        d: &CpuStorage,
        d_l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let name = self.name();
        let (y, d_out) = (contiguous_f32(y, y_l, name)?, contiguous_f32(d, d_l, name)?);
        let f = y_l.dims()[1];
        let mut grads = vec![0f32; 2 * f]; // (2, F)
        let mut x_hat = vec![0f32; f];
        for (y, d_out) in y.chunks_exact(f).zip(d_out.chunks_exact(f)) {
            x_hat.copy_from_slice(y);
            normalise_row(&mut x_hat);
            for j in 0..f {
                grads[j] += d_out[j] * x_hat[j];
                grads[f + j] += d_out[j];
            }
        }
        Ok((CpuStorage::F32(grads), Shape::from((2, f))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        y: &candle_core::CudaStorage,
        y_l: &Layout,
        d: &candle_core::CudaStorage,
        d_l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let (rows, f) = y_l.shape().dims2()?;
        let stats_shape = Shape::from((rows, 2));
        let (stats, _) =
            crate::cuda::sac_rows::launch_rows("lfs_sac_row_stats", &stats_shape, &[(y, y_l)], (rows, f), &[], rows)?;
        let stats_l = Layout::contiguous(stats_shape);
        crate::cuda::sac_rows::launch_rows(
            "lfs_sac_layer_norm_param_grads",
            &Shape::from((2, f)),
            &[(y, y_l), (d, d_l), (&stats, &stats_l)],
            (rows, f),
            &[],
            f,
        )
    }
}

impl CustomOp2 for SquashedSample {
    fn name(&self) -> &'static str {
        "sac-squashed-sample"
    }

    fn cpu_fwd(
        &self,
        h: &CpuStorage,
        h_l: &Layout,
        e: &CpuStorage,
        e_l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let name = self.name();
        let (head, eps) = (contiguous_f32(h, h_l, name)?, contiguous_f32(e, e_l, name)?);
        let (b, a) = (e_l.dims()[0], e_l.dims()[1]);
        let mut out = vec![0f32; b * (a + 1)]; // (b, A + 1)
        for ((out, head), eps) in out
            .chunks_exact_mut(a + 1)
            .zip(head.chunks_exact(2 * a))
            .zip(eps.chunks_exact(a))
        {
            let mut log_prob = 0f32;
            for j in 0..a {
                let terms = squash_row(head[j], head[a + j], eps[j], self.0);
                out[j] = terms.action;
                log_prob += terms.log_prob;
            }
            out[a] = log_prob;
        }
        Ok((CpuStorage::F32(out), Shape::from((b, a + 1))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        h: &candle_core::CudaStorage,
        h_l: &Layout,
        e: &candle_core::CudaStorage,
        e_l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let (b, a) = (e_l.dims()[0], e_l.dims()[1]);
        let s = self.0;
        crate::cuda::sac_rows::launch_rows(
            "lfs_sac_squashed_sample",
            &Shape::from((b, a + 1)),
            &[(h, h_l), (e, e_l)],
            (b, a),
            &[s.log_std_min, s.half_range],
            b,
        )
    }
}

impl CustomOp3 for SquashedSampleGrad {
    fn name(&self) -> &'static str {
        "sac-squashed-sample-grad"
    }

    fn cpu_fwd(
        &self,
        h: &CpuStorage,
        h_l: &Layout,
        e: &CpuStorage,
        e_l: &Layout,
        d: &CpuStorage,
        d_l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let name = self.name();
        let (head, eps, d_action) = (
            contiguous_f32(h, h_l, name)?,
            contiguous_f32(e, e_l, name)?,
            contiguous_f32(d, d_l, name)?,
        );
        let a = e_l.dims()[1];
        let mut d_head = vec![0f32; head.len()]; // (b, 2A): [d μ | d raw]
        for (((d_head, head), eps), d_action) in d_head
            .chunks_exact_mut(2 * a)
            .zip(head.chunks_exact(2 * a))
            .zip(eps.chunks_exact(a))
            .zip(d_action.chunks_exact(a))
        {
            for j in 0..a {
                let terms = squash_row(head[j], head[a + j], eps[j], self.squash);
                let (d_mu, d_raw) = squash_grad_row(&terms, eps[j], d_action[j], self.d_log_prob, self.squash);
                d_head[j] = d_mu;
                d_head[a + j] = d_raw;
            }
        }
        Ok((CpuStorage::F32(d_head), h_l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        h: &candle_core::CudaStorage,
        h_l: &Layout,
        e: &candle_core::CudaStorage,
        e_l: &Layout,
        d: &candle_core::CudaStorage,
        d_l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let s = self.squash;
        let (b, a) = e_l.shape().dims2()?;
        crate::cuda::sac_rows::launch_rows(
            "lfs_sac_squashed_sample_grad",
            h_l.shape(),
            &[(h, h_l), (e, e_l), (d, d_l)],
            (b, a),
            &[s.log_std_min, s.half_range, self.d_log_prob],
            b,
        )
    }
}

// ---- what the written-out layers (crate::rl::written_out) and on_device call

/// y (b, F) -> x_hat·γ + β (b, F).
pub(crate) fn layer_norm(y: &Tensor, gamma: &Tensor, beta: &Tensor) -> Result<Tensor> {
    Ok(y.contiguous()?.apply_op3_no_bwd(gamma, beta, &LayerNormForward)?)
}

/// d y (b, F) of the LayerNorm over y (b, F), given d out (b, F).
pub(crate) fn layer_norm_input_grad(y: &Tensor, gamma: &Tensor, d_out: &Tensor) -> Result<Tensor> {
    Ok(y.contiguous()?
        .apply_op3_no_bwd(gamma, &d_out.contiguous()?, &LayerNormInputGrad)?)
}

/// (d γ, d β), (F) each, of the LayerNorm over y (b, F), given d out (b, F).
pub(crate) fn layer_norm_param_grads(y: &Tensor, d_out: &Tensor) -> Result<(Tensor, Tensor)> {
    let grads = y
        .contiguous()?
        .apply_op2_no_bwd(&d_out.contiguous()?, &LayerNormParamGrads)?; // (2, F)
    Ok((grads.get(0)?, grads.get(1)?))
}

/// (action (b, A), Σ_A log π (b, 1)) of the sample from head (b, 2A) with noise ε (b, A).
pub(super) fn squashed_sample(head: &Tensor, eps: &Tensor, bounds: (f64, f64)) -> Result<(Tensor, Tensor)> {
    let a = eps.dim(1)?;
    let out = head
        .contiguous()?
        .apply_op2_no_bwd(eps, &SquashedSample(Squash::new(bounds)))?; // (b, A + 1)
    Ok((out.narrow(1, 0, a)?, out.narrow(1, a, 1)?.contiguous()?))
}

/// d head (b, 2A) of that sample, given d action (b, A) and d log π (the same for every row).
pub(super) fn squashed_sample_grad(
    head: &Tensor,
    eps: &Tensor,
    d_action: &Tensor,
    d_log_prob: f64,
    bounds: (f64, f64),
) -> Result<Tensor> {
    let op = SquashedSampleGrad {
        squash: Squash::new(bounds),
        d_log_prob: d_log_prob as f32,
    };
    Ok(head.contiguous()?.apply_op3_no_bwd(eps, &d_action.contiguous()?, &op)?)
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::cuda::on_host as cuda_on_host;
    use crate::cuda::sac_rows::SOURCE;

    /// Runs the kernel named by argv[1] over (argv[2], argv[3]) = (rows, cols) on raw f32 from
    /// stdin.
    const MAIN: &str = r#"
int main(int argc, char** argv) {
    std::string k = argv[1];
    unsigned int b = atoi(argv[2]), c = atoi(argv[3]);
    std::vector<float> o;
    if (k == "lfs_sac_layer_norm") {
        auto y = in<float>(b * c), g = in<float>(c), be = in<float>(c); o.resize(b * c);
        lfs_sac_layer_norm(y.data(), g.data(), be.data(), o.data(), b, c);
    } else if (k == "lfs_sac_layer_norm_input_grad") {
        auto y = in<float>(b * c), g = in<float>(c), d = in<float>(b * c); o.resize(b * c);
        lfs_sac_layer_norm_input_grad(y.data(), g.data(), d.data(), o.data(), b, c);
    } else if (k == "lfs_sac_layer_norm_param_grads") {
        auto y = in<float>(b * c), d = in<float>(b * c); o.resize(2 * c);
        std::vector<float> stats(2 * b);
        lfs_sac_row_stats(y.data(), stats.data(), b, c);
        lfs_sac_layer_norm_param_grads(y.data(), d.data(), stats.data(), o.data(), b, c);
    } else if (k == "lfs_sac_squashed_sample") {
        auto s = in<float>(2), h = in<float>(b * 2 * c), e = in<float>(b * c); o.resize(b * (c + 1));
        lfs_sac_squashed_sample(h.data(), e.data(), o.data(), b, c, s[0], s[1]);
    } else if (k == "lfs_sac_squashed_sample_grad") {
        auto s = in<float>(3), h = in<float>(b * 2 * c), e = in<float>(b * c), d = in<float>(b * c);
        o.resize(b * 2 * c);
        lfs_sac_squashed_sample_grad(h.data(), e.data(), d.data(), o.data(), b, c, s[0], s[1], s[2]);
    } else { fprintf(stderr, "no kernel %s\n", argv[1]); return 2; }
    out(o);
    return 0;
}
"#;

    /// Kernel `name` over (rows, cols) on `inputs` (each flattened), run on the host.
    fn run(name: &str, rows: usize, cols: usize, inputs: &[&[f32]]) -> Vec<f32> {
        let exe = cuda_on_host::build("sac_rows", SOURCE, MAIN);
        let bytes: Vec<u8> = inputs
            .iter()
            .flat_map(|v| v.iter().flat_map(|x| x.to_le_bytes()))
            .collect();
        let args = [name.to_string(), rows.to_string(), cols.to_string()];
        cuda_on_host::run(&exe, &args, &bytes)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }
    fn values(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    }

    /// Every entry within 1e-6 of the CPU op's, relative to the larger of 1 and its size.
    fn assert_close(what: &str, kernel: &[f32], cpu: &[f32]) {
        assert_eq!(kernel.len(), cpu.len(), "{what}");
        for (i, (k, c)) in kernel.iter().zip(cpu).enumerate() {
            assert!(
                (k - c).abs() <= 1e-6 * c.abs().max(1.0),
                "{what}[{i}]: kernel {k}, CPU {c}"
            );
        }
    }

    /// The CUDA kernels' arithmetic, compiled for the host, against the ops' CPU side: the same
    /// lines, so the same numbers to float rounding (libm's tanh, exp and log may round their
    /// last bit differently from candle's). Catches a kernel whose indexing, argument order or
    /// formula drifts from the CPU's, which no CPU-only build would run.
    #[test]
    fn the_cuda_kernels_compute_what_the_cpu_ops_compute() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let mut draw = |n: usize, scale: f32| -> Vec<f32> { (0..n).map(|_| rng.random_range(-scale..scale)).collect() };
        let dev = &Device::Cpu;
        let (b, f, a) = (37, 50, 6);
        let (y, gamma, beta, d_out) = (draw(b * f, 3.0), draw(f, 1.5), draw(f, 0.5), draw(b * f, 1.0));
        let t = |v: &[f32], shape: &[usize]| Tensor::from_slice(v, shape, dev).unwrap();
        let (yt, gt, bt, dt) = (t(&y, &[b, f]), t(&gamma, &[f]), t(&beta, &[f]), t(&d_out, &[b, f]));

        let cpu = values(&layer_norm(&yt, &gt, &bt).unwrap());
        assert_close(
            "layer norm",
            &run("lfs_sac_layer_norm", b, f, &[&y, &gamma, &beta]),
            &cpu,
        );
        let cpu = values(&layer_norm_input_grad(&yt, &gt, &dt).unwrap());
        let kernel = run("lfs_sac_layer_norm_input_grad", b, f, &[&y, &gamma, &d_out]);
        assert_close("layer norm's input gradient", &kernel, &cpu);
        let (dg, db) = layer_norm_param_grads(&yt, &dt).unwrap();
        let cpu = [values(&dg), values(&db)].concat();
        let kernel = run("lfs_sac_layer_norm_param_grads", b, f, &[&y, &d_out]);
        assert_close("layer norm's parameter gradients", &kernel, &cpu);

        let bounds = (-10.0, 2.0);
        let s = Squash::new(bounds);
        let (head, eps, d_action) = (draw(b * 2 * a, 2.0), draw(b * a, 2.0), draw(b * a, 1.0));
        let (ht, et, dat) = (t(&head, &[b, 2 * a]), t(&eps, &[b, a]), t(&d_action, &[b, a]));
        let (action, log_prob) = squashed_sample(&ht, &et, bounds).unwrap();
        let cpu = Tensor::cat(&[&action, &log_prob], 1).unwrap(); // (b, A + 1)
        let scalars = [s.log_std_min, s.half_range];
        let kernel = run("lfs_sac_squashed_sample", b, a, &[&scalars, &head, &eps]);
        assert_close("squashed sample", &kernel, &values(&cpu));
        let d_log_prob = 0.1 / b as f64;
        let cpu = values(&squashed_sample_grad(&ht, &et, &dat, d_log_prob, bounds).unwrap());
        let scalars = [s.log_std_min, s.half_range, d_log_prob as f32];
        let kernel = run(
            "lfs_sac_squashed_sample_grad",
            b,
            a,
            &[&scalars, &head, &eps, &d_action],
        );
        assert_close("squashed sample's gradient", &kernel, &cpu);
    }
}
