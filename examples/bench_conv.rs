//! Times the SPEC encoder on the CPU with candle's stock conv2d and with our conv op
//! (src/nn/conv_cpu.rs), interleaved in one run: forward, and forward + backward to the
//! parameters (loss = Σ h · r), medians over repeats. One JSON line per (batch, workload).
//!
//!     cargo run --release --example bench_conv -- --batch 32,128 --repeats 3 --stock-backward-max 128

use std::time::Instant;

use anyhow::Context;
use candle_core::{Device, Tensor};
use lfs::nn::{Encoder, EncoderConfig, Params};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn arg<'a>(args: &'a [String], name: &str, default: &'a str) -> &'a str {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |s| s.as_str())
}

/// The encoder with candle's own ops: conv2d + bias, ReLU, over the same parameters.
/// Shapes: obs (b, 9, 84, 84) -> (b, 39200).
fn stock_forward(params: &Params, cfg: &EncoderConfig, obs: &Tensor) -> anyhow::Result<Tensor> {
    let mut h = (obs / 255.0)?;
    for layer in 0..cfg.num_layers {
        let c_in = if layer == 0 { cfg.in_channels } else { cfg.num_filters };
        let w = params.tensor(
            &format!("enc.convnet.{}.weight", 2 * layer),
            &[cfg.num_filters, c_in, 3, 3],
        )?;
        let b = params.tensor(&format!("enc.convnet.{}.bias", 2 * layer), &[cfg.num_filters])?;
        let stride = if layer == 0 { 2 } else { 1 };
        h = h
            .conv2d(&w, 0, stride, 1, 1)?
            .broadcast_add(&b.reshape((1, cfg.num_filters, 1, 1))?)?
            .relu()?;
    }
    let b = h.dim(0)?;
    Ok(h.reshape((b, ()))?)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds of one call.
fn time<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<f64> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed().as_secs_f64())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let batches: Vec<usize> = arg(&args, "--batch", "32,128")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("--batch")?;
    let repeats: usize = arg(&args, "--repeats", "3").parse().context("--repeats")?;
    let stock_bwd_max: usize = arg(&args, "--stock-backward-max", "128")
        .parse()
        .context("--stock-backward-max")?;
    if args.iter().any(|a| a == "--kernels") {
        return kernels(&batches, repeats);
    }
    let cfg = EncoderConfig::default();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut params = Params::new();
    let encoder = Encoder::new(&cfg, "enc", &mut params, &mut rng)?;
    let vars: Vec<Tensor> = params.iter().map(|(_, v)| v.as_tensor().clone()).collect();
    for &b in &batches {
        let pixels: Vec<f32> = (0..b * 9 * 84 * 84)
            .map(|_| rng.random_range(0..=255u8) as f32)
            .collect();
        let obs = Tensor::from_vec(pixels, (b, 9, 84, 84), &Device::Cpu)?;
        let r: Vec<f32> = (0..b * cfg.repr_dim()?)
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect();
        let r = Tensor::from_vec(r, (b, cfg.repr_dim()?), &Device::Cpu)?;
        // Same features both ways (max |Δ| / max |h|).
        let (ours, stock) = (encoder.forward(&obs)?, stock_forward(&params, &cfg, &obs)?);
        let diff =
            (ours.sub(&stock))?.abs()?.max_all()?.to_scalar::<f32>()? / stock.abs()?.max_all()?.to_scalar::<f32>()?;
        let fb = |stock_path: bool| -> anyhow::Result<()> {
            let h = if stock_path {
                stock_forward(&params, &cfg, &obs)?
            } else {
                encoder.forward(&obs)?
            };
            let grads = (h * &r)?.sum_all()?.backward()?;
            anyhow::ensure!(
                vars.iter().all(|v| grads.get(v).is_some()),
                "a parameter got no gradient"
            );
            Ok(())
        };
        let (mut t_fwd, mut t_fb) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
        for _ in 0..repeats {
            for (i, stock_path) in [true, false].into_iter().enumerate() {
                t_fwd[i].push(time(|| {
                    if stock_path {
                        stock_forward(&params, &cfg, &obs)
                    } else {
                        Ok(encoder.forward(&obs)?)
                    }
                })?);
                if !stock_path || b <= stock_bwd_max {
                    t_fb[i].push(time(|| fb(stock_path))?);
                }
            }
        }
        // Forward FLOPs: 2·b·Σ_layers (o · c·9 · ho·wo); backward 2× forward (1× at layer 0).
        let layers = [(9usize, 41usize), (32, 39), (32, 37), (32, 35)];
        let gflop = |&(c, s): &(usize, usize)| 2.0 * (b * 32 * c * 9 * s * s) as f64 / 1e9;
        let fwd_gflop: f64 = layers.iter().map(gflop).sum();
        let fb_gflop = 3.0 * fwd_gflop - gflop(&layers[0]); // no input gradient at layer 0
        for (name, t, gflop) in [("forward", &t_fwd, fwd_gflop), ("forward_backward", &t_fb, fb_gflop)] {
            let stock = (!t[0].is_empty()).then(|| median(t[0].clone()));
            let ours = median(t[1].clone());
            println!(
                "{{\"batch\":{b},\"workload\":\"{name}\",\"stock_s\":{},\"ours_s\":{ours:.4},\"ratio_ours_over_stock\":{},\
                 \"ours_gflops\":{:.1},\"max_rel_diff\":{diff:.2e},\"repeats\":{repeats}}}",
                stock.map_or("null".into(), |s| format!("{s:.4}")),
                stock.map_or("null".into(), |s| format!("{:.3}", ours / s)),
                gflop / ours
            );
        }
    }
    Ok(())
}

/// `--kernels`: our op alone at the 32→32 stride-1 layer on 41×41 (b, 32, 41, 41): forward,
/// forward + weight gradient, forward + both gradients, and candle's bias + ReLU around it.
fn kernels(batches: &[usize], repeats: usize) -> anyhow::Result<()> {
    use candle_core::Var;
    use lfs::nn::conv_cpu::conv2d_3x3;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut random = |dims: &[usize]| -> anyhow::Result<Tensor> {
        let v: Vec<f32> = (0..dims.iter().product())
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect();
        Ok(Tensor::from_vec(v, dims, &Device::Cpu)?)
    };
    for &b in batches {
        let x = Var::from_tensor(&random(&[b, 32, 41, 41])?)?;
        let w = Var::from_tensor(&random(&[32, 32, 3, 3])?)?;
        let bias = Var::from_tensor(&random(&[1, 32, 1, 1])?)?;
        let r = random(&[b, 32, 39, 39])?;
        let gflop = 2.0 * (b * 32 * 32 * 9 * 39 * 39) as f64 / 1e9;
        let y0 = Var::from_tensor(&conv2d_3x3(&x, &w, 1)?)?;
        let run_case = |name: &str| -> anyhow::Result<()> {
            let conv_loss = |x: &Tensor| -> anyhow::Result<()> {
                (conv2d_3x3(x, &w, 1)? * &r)?.sum_all()?.backward()?;
                Ok(())
            };
            match name {
                "loss_only" => drop((y0.as_tensor() * &r)?.sum_all()?.backward()?),
                "conv_forward" => drop(conv2d_3x3(&x, &w, 1)?),
                "conv_forward_weight_grad" => conv_loss(&x.as_tensor().detach())?,
                "conv_forward_both_grads" => conv_loss(&x)?,
                _ => drop(
                    (x.as_tensor().broadcast_add(&bias)?.relu()? * x.as_tensor())?
                        .sum_all()?
                        .backward()?,
                ),
            }
            Ok(())
        };
        // (name, GFLOP of the conv work); "loss_only" is what Σ y · r and its backward cost alone.
        let cases = [
            ("loss_only", 0.0),
            ("conv_forward", gflop),
            ("conv_forward_weight_grad", 2.0 * gflop),
            ("conv_forward_both_grads", 3.0 * gflop),
            ("candle_bias_relu_forward_backward", 0.0),
        ];
        let mut loss_s = 0.0;
        for (name, gflop) in cases {
            let t = median(
                (0..repeats)
                    .map(|_| time(|| run_case(name)))
                    .collect::<anyhow::Result<_>>()?,
            );
            if name == "loss_only" {
                loss_s = t;
            }
            // GFLOP/s of the conv alone: rows with a backward pay for the loss too.
            let conv_s = if name.contains("grad") { t - loss_s } else { t };
            println!(
                "{{\"batch\":{b},\"kernel\":\"{name}\",\"seconds\":{t:.4},\"conv_gflops_net_of_loss\":{:.1}}}",
                gflop / conv_s
            );
        }
    }
    Ok(())
}
