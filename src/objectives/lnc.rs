//! Latent Nearest-neighbour Clip (paper §3.2, Eq. 3–4, appendix "PyTorch-style pseudo code for
//! LNC"; docs/design.md §3). Distances are computed exactly (‖a − b‖, as `torch.norm` of the difference,
//! not via the ‖a‖² + ‖b‖² − 2ab expansion) in f64: on the host for CPU latents, by lfs's
//! kernels on CUDA (`crate::cuda::lnc`: the same sums in the same order), which then copy back
//! only the 2M distances the selection needs.

use candle_core::Tensor;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::objective::{Draw, Drawn, OnlinePass};
use super::update_metrics::UpdateMetrics;
use crate::data::PairKind;
use crate::{Error, Result};

/// Which latent LNC measures distances in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LncLatent {
    /// Online encoder + projector output (128-d): Proto-RL's `Encoder.forward`.
    Projector,
    /// The 39200-d conv output.
    Conv,
}

/// LNC hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LncConfig {
    /// Which nearest neighbour: the k-th, self excluded (1).
    pub k: usize,
    /// Clip centre coefficient c (0.9 for RL; 0.6 for video pre-training).
    pub c: f64,
    /// Clip range coefficient r (0.1; 0.2 for walker_run, cheetah_run and URLB).
    pub r: f64,
}

impl Default for LncConfig {
    fn default() -> Self {
        Self { k: 1, c: 0.9, r: 0.1 }
    }
}

/// What LNC kept, and the numbers the paper plots.
#[derive(Debug, Clone, PartialEq)]
pub struct LncSelection {
    /// Indices j of the synthetic candidates with (c − r/2)·D < D_j < (c + r/2)·D, ascending.
    pub selected: Vec<usize>,
    /// D: mean k-th-nearest-neighbour distance among the real latents (Eq. 3).
    pub d_internal: f64,
    pub clip_low: f64,
    pub clip_high: f64,
    /// D_j for every candidate (Eq. 4).
    pub d_synthetic: Vec<f64>,
}

/// The k-th neighbour of Eq. 3 (self excluded) exists: 1 <= k < the real batch's size.
fn check_k(cfg: &LncConfig, n_real: usize) -> Result<()> {
    if cfg.k == 0 || cfg.k >= n_real {
        return Err(Error::Config(format!(
            "lnc: k = {} needs 1 <= k < real batch size {n_real}",
            cfg.k
        )));
    }
    Ok(())
}

/// Selects synthetic candidates by their distance to the real batch in latent space.
/// `real` and `synthetic` are row-major (n, dim) latents of the "previous" observations.
pub fn lnc_select(real: &[f32], synthetic: &[f32], dim: usize, cfg: &LncConfig) -> Result<LncSelection> {
    if dim == 0 || !real.len().is_multiple_of(dim) || !synthetic.len().is_multiple_of(dim) {
        return Err(Error::Shape(format!(
            "lnc: latents of length {}/{} are not rows of {dim}",
            real.len(),
            synthetic.len()
        )));
    }
    let n_real = real.len() / dim;
    check_k(cfg, n_real)?;
    let row = |xs: &'_ [f32], i: usize| -> Vec<f64> { xs[i * dim..(i + 1) * dim].iter().map(|v| *v as f64).collect() };
    let real_rows: Vec<Vec<f64>> = (0..n_real).map(|i| row(real, i)).collect();
    let dist = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
    // The `idx`-th smallest distance from `a` to the real rows (0-based; self included).
    let kth = |a: &[f64], idx: usize| -> f64 {
        let mut d: Vec<f64> = real_rows.iter().map(|r| dist(a, r)).collect();
        d.sort_by(f64::total_cmp);
        d[idx]
    };
    // Each row's distances on its own thread (the rows are independent); the mean is then
    // summed in row order, so the result does not depend on the threads.
    // Eq. 3: topk(k + 1) includes self at distance 0; its last entry is the k-th neighbour.
    let d_real: Vec<f64> = real_rows.par_iter().map(|r| kth(r, cfg.k)).collect();
    let d_internal = d_real.iter().sum::<f64>() / n_real as f64;
    // Eq. 4: topk(k) to the real rows; its last entry.
    let d_synthetic: Vec<f64> = (0..synthetic.len() / dim)
        .into_par_iter()
        .map(|j| kth(&row(synthetic, j), cfg.k - 1))
        .collect();
    Ok(LncSelection::clip(d_internal, d_synthetic, cfg))
}

/// [`lnc_select`] by lfs's CUDA kernels (`crate::cuda::lnc`) on `latent` (2M, dim), real rows
/// first: the same sums in the same order as the host's, then one copy of the 2M distances and
/// D's mean on the host in row order. `None` off CUDA.
fn select_on_cuda(latent: &Tensor, m: usize, cfg: &LncConfig) -> Result<Option<LncSelection>> {
    #[cfg(feature = "cuda")]
    if latent.device().is_cuda() {
        check_k(cfg, m)?;
        let d = crate::cuda::lnc::kth_distances(latent, m, cfg.k)?.to_vec1::<f64>()?; // (2M)
        let d_internal = d[..m].iter().sum::<f64>() / m as f64;
        return Ok(Some(LncSelection::clip(d_internal, d[m..].to_vec(), cfg)));
    }
    let _ = (latent, m, cfg);
    Ok(None)
}

impl LncSelection {
    /// The clip of Eq. 4 around D (`d_internal`) applied to the candidates' distances.
    fn clip(d_internal: f64, d_synthetic: Vec<f64>, cfg: &LncConfig) -> LncSelection {
        let clip_low = d_internal * (cfg.c - cfg.r / 2.0);
        let clip_high = d_internal * (cfg.c + cfg.r / 2.0);
        let selected = d_synthetic
            .iter()
            .enumerate()
            .filter(|(_, d)| **d > clip_low && **d < clip_high)
            .map(|(j, _)| j)
            .collect();
        LncSelection {
            selected,
            d_internal,
            clip_low,
            clip_high,
            d_synthetic,
        }
    }
}

/// LFS data (docs/design.md §3): M real pairs and M synthetic candidates, both shifted; LNC
/// keeps N candidates; the batch is those N plus M − N real pairs drawn without replacement.
/// The online forward over all 2M previous observations gives LNC its latents (`latent` says
/// which) and is kept for the loss: its rows for the batch are returned with it.
pub fn lnc_pairs(d: Draw, cfg: &LncConfig, latent: LncLatent, metrics: &mut UpdateMetrics) -> Result<Drawn> {
    let m = d.m;
    let mut real = d.source.sample_pairs(PairKind::Real, d.task, m, &mut *d.rng)?;
    let mut syn = d.source.sample_pairs(PairKind::Synthetic, d.task, m, &mut *d.rng)?;
    real.augment(d.shift, &mut *d.rng)?;
    syn.augment(d.shift, &mut *d.rng)?;
    let obs = real.prev.clone().concat(&syn.prev)?; // (2M, 9, 84, 84): real rows 0..M, candidates M..2M
    let features = super::stacks::forward_stacks(d.online_net, &obs, 2 * m, true)?;
    let latent = match latent {
        LncLatent::Projector => &features.z,
        LncLatent::Conv => &features.encoded.h,
    }; // (2M, dim)
    let sel = match select_on_cuda(latent, m, cfg)? {
        Some(sel) => sel,
        None => {
            let host = |t: Tensor| t.flatten_all()?.to_vec1::<f32>();
            let (real, syn) = (latent.narrow(0, 0, m)?, latent.narrow(0, m, m)?); // (M, dim) each
            lnc_select(&host(real)?, &host(syn)?, latent.dim(1)?, cfg)?
        }
    };
    let n = sel.selected.len();
    let mut real_idx = rand::seq::index::sample(&mut *d.rng, m, m - n).into_vec();
    real_idx.sort_unstable();
    metrics.num_synthetic = n;
    metrics.lnc_d = Some(sel.d_internal);
    metrics.clip_low = Some(sel.clip_low);
    metrics.clip_high = Some(sel.clip_high);
    let rows = sel
        .selected
        .iter()
        .map(|&j| m + j)
        .chain(real_idx.iter().copied())
        .collect();
    let selected = syn.select(&sel.selected);
    let batch = selected.clone().concat(&real.select(&real_idx))?;
    Ok(Drawn {
        batch,
        online: Some(OnlinePass { features, rows }),
        selected: Some(selected),
    })
}

/// LNC's CUDA kernels (`crate::cuda::lnc`), compiled for the host, against this file's code.
#[cfg(test)]
mod cuda_kernels {
    use rand::{Rng, SeedableRng};

    use super::{lnc_select, LncConfig};
    use crate::cuda::lnc::SOURCE;
    use crate::cuda::on_host as cuda_on_host;

    /// argv: rows n_real dim k; stdin: the latent as f32; stdout: (rows) f64.
    const MAIN: &str = r#"
int main(int argc, char** argv) {
    unsigned int rows = atoi(argv[1]), n_real = atoi(argv[2]), dim = atoi(argv[3]), k = atoi(argv[4]);
    auto latent = in<float>((size_t)rows * dim);
    std::vector<double> dist((size_t)rows * n_real), o(rows, -1.0);
    lfs_lnc_distances(latent.data(), dist.data(), rows, n_real, dim);
    lfs_lnc_kth(dist.data(), o.data(), rows, n_real, k);
    out(o);
    return 0;
}
"#;

    /// The kernels, compiled for the host, against [`lnc_select`] on the same latents: D (the
    /// real rows' mean, taken on the host in row order as on CUDA) and every D_j bit for bit,
    /// with k = 1 and k = 3, and ties (a real row repeated, a candidate equal to a real row).
    #[test]
    fn the_cuda_kernels_find_the_neighbours_lnc_select_finds() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let exe = cuda_on_host::build("lnc", SOURCE, MAIN);
        for (m, dim, k) in [(12, 7, 1), (12, 7, 3), (9, 33, 2)] {
            let mut latent: Vec<f32> = (0..2 * m * dim).map(|_| rng.random_range(-1.0..1.0)).collect();
            latent.copy_within(0..dim, dim); // real rows 0 and 1 equal
            latent.copy_within(2 * dim..3 * dim, (m + 1) * dim); // candidate 1 equals real row 2
            let cfg = LncConfig { k, c: 0.9, r: 0.1 };
            let host = lnc_select(&latent[..m * dim], &latent[m * dim..], dim, &cfg).unwrap();

            let input: Vec<u8> = latent.iter().flat_map(|v| v.to_le_bytes()).collect();
            let args = [2 * m, m, dim, k].map(|v| v.to_string());
            let kernel: Vec<f64> = cuda_on_host::run(&exe, &args, &input)
                .chunks(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                .collect();
            let d_internal = kernel[..m].iter().sum::<f64>() / m as f64;
            assert_eq!(d_internal.to_bits(), host.d_internal.to_bits(), "m {m} dim {dim} k {k}");
            assert_eq!(kernel[m..], host.d_synthetic[..], "m {m} dim {dim} k {k}");
            if k == 1 {
                assert_eq!(kernel[m + 1], 0.0, "a candidate equal to a real row is at distance 0");
            }
        }
    }
}
