//! Why a GPU's encoder gradients at a training batch cannot match the CPU's to 1e-4 through
//! their own forwards: a forward that differs by rounding flips the ReLU mask wherever a
//! pre-activation is within rounding of 0, and at 256 samples (12.5M positions in layer 1) a few
//! do, each moving the gradients by a whole term (issue 52's one failing parity check, 4.08e-4
//! on an H200 at B=256 in every GPU build, ~1e-6 at B ≤ 64).
//!
//! Here on the CPU, both sides the same kernels: the paper's encoder as `device_check`'s
//! "encoder at a training batch" builds it (seed 7, random pixels of seed 1, its rows and dh),
//! against the same encoder with each weight times (1 + ε·u), u uniform in [−1, 1] (seed 99): a
//! forward that differs by rounding-sized amounts. Prints the relative L2 error of h and of
//! every gradient for 16, 64 and 256 samples, and how many of the last layer's ReLUs flipped.
//!
//!     cargo run --release --example relu_kink -- 1e-7
use std::collections::BTreeMap;

use candle_core::{DType, Device, Tensor};
use lfs::device::Backend;
use lfs::nn::{Encoder, EncoderConfig, Params};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// ‖a − b‖ / ‖b‖ in f64, as device_check's `Worst::compare`.
fn relative_l2(a: &Tensor, b: &Tensor) -> anyhow::Result<f64> {
    let host = |t: &Tensor| -> anyhow::Result<Vec<f64>> { Ok(t.flatten_all()?.to_dtype(DType::F64)?.to_vec1()?) };
    let (a, b) = (host(a)?, host(b)?);
    let diff = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
    Ok(diff / b.iter().map(|y| y * y).sum::<f64>().sqrt())
}

fn main() -> anyhow::Result<()> {
    let eps: f64 = match std::env::args().nth(1) {
        Some(v) => v.parse()?,
        None => 1e-7,
    };
    let cfg = EncoderConfig::default();
    let mut host = Params::new(&Device::Cpu);
    Encoder::new(&cfg, "encoder", &mut host, &mut ChaCha8Rng::seed_from_u64(7))?;
    let init = host.snapshot()?;
    let mut noise = ChaCha8Rng::seed_from_u64(99);
    let mut perturbed = BTreeMap::new();
    for (name, t) in &init {
        let values: Vec<f32> = t
            .flatten_all()?
            .to_vec1::<f32>()?
            .iter()
            .map(|v| v * (1.0 + (eps * noise.random_range(-1.0..1.0)) as f32))
            .collect();
        perturbed.insert(name.clone(), Tensor::from_vec(values, t.shape(), &Device::Cpu)?);
    }
    let backend = Backend::new(&Device::Cpu);
    let (a_params, b_params) = (
        Params::from_tensors(&perturbed, &backend)?,
        Params::from_tensors(&init, &backend)?,
    );
    let a = Encoder::from_params(&cfg, "encoder", &a_params)?;
    let b = Encoder::from_params(&cfg, "encoder", &b_params)?;
    for n in [16usize, 64, 256] {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let obs: Vec<u8> = (0..n * 9 * 84 * 84).map(|_| rng.random()).collect();
        let (ea, eb) = (a.encode(&obs, n, true)?, b.encode(&obs, n, true)?);
        let rows: Vec<usize> = [0, 2, 2, n - 1].into_iter().chain((3..n - 1).step_by(3)).collect();
        let dh: Vec<f32> = (0..rows.len() * a.repr_dim())
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let dh = Tensor::from_vec(dh, (rows.len(), a.repr_dim()), &Device::Cpu)?; // (rows, repr)
        let ga: BTreeMap<String, Tensor> = a.backward(&ea, &rows, &dh)?.into_iter().collect();
        let gb: BTreeMap<String, Tensor> = b.backward(&eb, &rows, &dh)?.into_iter().collect();
        // The last layer's mask flips: features zero on one side and not on the other.
        let (ha, hb) = (
            ea.h.flatten_all()?.to_vec1::<f32>()?,
            eb.h.flatten_all()?.to_vec1::<f32>()?,
        );
        let flips = ha.iter().zip(&hb).filter(|(x, y)| (**x > 0.0) != (**y > 0.0)).count();
        let mut line = format!(
            "eps {eps:e} n {n}: h {:.2e} (last layer's mask flips {flips} of {})",
            relative_l2(&ea.h, &eb.h)?,
            ha.len()
        );
        for (name, g) in &ga {
            line += &format!(" {name}={:.2e}", relative_l2(g, &gb[name])?);
        }
        println!("{line}");
    }
    Ok(())
}
