//! Times the paper's encoder (docs/design.md §4) on the CPU four ways, interleaved in one run:
//! candle's stock conv2d (`stock`), `Encoder::forward` under candle's autograd (`ops`: the whole
//! encoder as one candle op over our kernels), the pre-trainer's hand-written backward
//! called directly (`tape`: `Encoder::encode` + `Encoder::backward`, src/nn/kernels/tape.rs),
//! and the GPU's code path on the CPU (`candle`: an encoder on `Compute::Candle`, candle's conv2d
//! under its autograd, src/nn/conv_layer.rs, with the backward from kept activations). Workloads: forward (no gradient), and forward + backward to the 8
//! parameters (loss = Σ h · r). Medians over repeats; one JSON line per (batch, workload,
//! impl). eval/bench/compare.py --suite encoder runs it beside eval/bench/encoder_torch.py.
//!
//!     cargo run --release --example bench_conv -- --batch 32,128 --repeats 3 --stock-backward-max 128

use std::time::Instant;

use anyhow::Context;
use candle_core::{Device, Tensor};
use lfs::device::Backend;
use lfs::nn::{Encoder, EncoderConfig, Params};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// As the `lfs` binary (src/alloc.rs).
#[global_allocator]
static GLOBAL: lfs::alloc::Allocator = lfs::alloc::Allocator {};

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
    lfs::alloc::keep_freed_memory();
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
    if args.iter().any(|a| a == "--peak") {
        return peak();
    }
    if args.iter().any(|a| a == "--layers") {
        return layers(&batches, repeats);
    }
    let skip_stock = args.iter().any(|a| a == "--no-stock");
    let cfg = EncoderConfig::default();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut params = Params::new(&Device::Cpu);
    let encoder = Encoder::new(&cfg, "enc", &mut params, &mut rng)?;
    // The same parameters (same seed) on candle's path, as a GPU runs it.
    let mut params_candle = Params::new(Backend::candle(&Device::Cpu));
    let encoder_candle = Encoder::new(&cfg, "enc", &mut params_candle, &mut ChaCha8Rng::seed_from_u64(0))?;
    let vars: Vec<Tensor> = params
        .iter()
        .filter(|(n, _)| n.starts_with("enc."))
        .map(|(_, v)| v.as_tensor().clone())
        .collect();
    for &b in &batches {
        let pixels: Vec<u8> = (0..b * 9 * 84 * 84).map(|_| rng.random_range(0..=255u8)).collect();
        let obs = Tensor::from_slice(&pixels, (b, 9, 84, 84), &Device::Cpu)?.to_dtype(candle_core::DType::F32)?;
        let r: Vec<f32> = (0..b * cfg.repr_dim()?)
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect();
        let r = Tensor::from_vec(r, (b, cfg.repr_dim()?), &Device::Cpu)?;
        let rows: Vec<usize> = (0..b).collect();
        // Same features every way (max |Δ| / max |h|), against the stock path.
        let reference = stock_forward(&params, &cfg, &obs)?;
        let rel_diff = |h: &Tensor| -> anyhow::Result<f32> {
            Ok((h.sub(&reference))?.abs()?.max_all()?.to_scalar::<f32>()?
                / reference.abs()?.max_all()?.to_scalar::<f32>()?)
        };
        let diffs = [
            ("stock", 0.0),
            ("ops", rel_diff(&encoder.forward(&obs)?)?),
            ("tape", rel_diff(&encoder.encode(&pixels, b, false)?.h)?),
            ("candle", rel_diff(&encoder_candle.encode(&pixels, b, false)?.h)?),
        ];
        let forward = |imp: &str| -> anyhow::Result<Tensor> {
            Ok(match imp {
                "stock" => stock_forward(&params, &cfg, &obs)?,
                "ops" => encoder.forward(&obs)?,
                "candle" => encoder_candle.encode(&pixels, b, false)?.h,
                _ => encoder.encode(&pixels, b, false)?.h,
            })
        };
        let forward_backward = |imp: &str| -> anyhow::Result<()> {
            if imp == "tape" || imp == "candle" {
                let encoder = if imp == "candle" { &encoder_candle } else { &encoder };
                let encoded = encoder.encode(&pixels, b, true)?;
                let grads = encoder.backward(&encoded, &rows, &r)?;
                anyhow::ensure!(grads.len() == vars.len(), "a parameter got no gradient");
                return Ok(());
            }
            let h = forward(imp)?;
            let grads = (h * &r)?.sum_all()?.backward()?;
            anyhow::ensure!(
                vars.iter().all(|v| grads.get(v).is_some()),
                "a parameter got no gradient"
            );
            Ok(())
        };
        let imps: Vec<&str> = ["stock", "ops", "tape", "candle"]
            .into_iter()
            .filter(|i| *i != "stock" || !skip_stock)
            .collect();
        let mut t_fwd = vec![Vec::new(); imps.len()];
        let mut t_fb = vec![Vec::new(); imps.len()];
        for _ in 0..repeats {
            for (i, imp) in imps.iter().enumerate() {
                t_fwd[i].push(time(|| forward(imp))?);
                if *imp != "stock" || b <= stock_bwd_max {
                    t_fb[i].push(time(|| forward_backward(imp))?);
                }
            }
        }
        // Forward FLOPs: 2·b·Σ_layers (o · c·9 · ho·wo); backward 2× forward (1× at layer 0).
        let layers = [(9usize, 41usize), (32, 39), (32, 37), (32, 35)];
        let gflop = |&(c, s): &(usize, usize)| 2.0 * (b * 32 * c * 9 * s * s) as f64 / 1e9;
        let fwd_gflop: f64 = layers.iter().map(gflop).sum();
        let fb_gflop = 3.0 * fwd_gflop - gflop(&layers[0]); // no input gradient at layer 0
        for (workload, t, gflop) in [("forward", &t_fwd, fwd_gflop), ("forward_backward", &t_fb, fb_gflop)] {
            for (i, imp) in imps.iter().enumerate() {
                if t[i].is_empty() {
                    continue;
                }
                let secs = median(t[i].clone());
                let diff = diffs.iter().find(|d| d.0 == *imp).map_or(0.0, |d| d.1);
                println!(
                    "{{\"impl\":\"{imp}\",\"batch\":{b},\"workload\":\"{workload}\",\"seconds\":{secs:.4},\
                     \"gflops\":{:.1},\"max_rel_diff\":{diff:.2e},\"repeats\":{repeats}}}",
                    gflop / secs
                );
            }
        }
    }
    Ok(())
}

/// `--kernels`: our op alone (bias and ReLU fused) at the 32→32 stride-1 layer on 41×41
/// (b, 32, 41, 41): forward, forward + weight gradient, forward + both gradients, and candle's
/// bias + ReLU as separate ops for scale.
fn kernels(batches: &[usize], repeats: usize) -> anyhow::Result<()> {
    use candle_core::Var;
    use lfs::nn::kernels::conv_ops::conv2d_3x3_bias_relu;
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
        let conv = |x: &Tensor| conv2d_3x3_bias_relu(x, &w, &bias.flatten_all()?, 1);
        let y0 = Var::from_tensor(&conv(&x)?)?;
        let run_case = |name: &str| -> anyhow::Result<()> {
            let conv_loss = |x: &Tensor| -> anyhow::Result<()> {
                (conv(x)? * &r)?.sum_all()?.backward()?;
                Ok(())
            };
            match name {
                "loss_only" => drop((y0.as_tensor() * &r)?.sum_all()?.backward()?),
                "conv_forward" => drop(conv(&x)?),
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

/// `--layers`: how close each pass of the encoder's kernels comes to `--peak` by itself, and
/// what the whole forward loses around them. Per layer of the default encoder, on one thread,
/// one sample's data used over and over (so they stay in cache): GFLOP/s of the forward, the
/// weight gradient and the input gradient (counting the useful FLOPs: 2·o·c·9·ho·wo each).
/// Then the whole encoder (`tape::encode_batch`) at each batch, on one thread and on every
/// thread, without and with its tape; and the image's conversion to channels-last in the two
/// loop orders (plane by plane as before, pixel by pixel as now; one thread).
fn layers(batches: &[usize], repeats: usize) -> anyhow::Result<()> {
    use lfs::nn::kernels::conv_nhwc::{self, Kernel, Shape};
    use lfs::nn::kernels::tape::{encode_batch, layer_shapes, LayerWeights};
    let kernel = Kernel::detect();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut random = |n: usize, scale: f32| -> Vec<f32> { (0..n).map(|_| rng.random_range(-scale..scale)).collect() };
    let shapes = layer_shapes((9, 84, 84), &[(32, 2), (32, 1), (32, 1), (32, 1)]).context("encoder shapes")?;
    let weights: Vec<LayerWeights> = shapes
        .iter()
        .map(|s| LayerWeights {
            weight: random(s.o * s.c * 9, 0.1),
            bias: random(s.o, 0.1),
        })
        .collect();
    // Samples per timing, so that one timing is a few ms.
    let per = 64;
    let best_of = |f: &mut dyn FnMut()| -> f64 {
        (0..repeats.max(1))
            .map(|_| {
                let start = Instant::now();
                (0..per).for_each(|_| f());
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    pool.install(|| -> anyhow::Result<()> {
        for (l, (s, w)) in shapes.iter().zip(&weights).enumerate() {
            let s: &Shape = s;
            let gflop = 2.0 * (s.o * s.c * 9 * s.ho() * s.wo() * per) as f64 / 1e9;
            let x = random(s.in_len(), 1.0);
            let dy = random(s.out_len(), 1.0);
            let wf = conv_nhwc::weights_forward(&w.weight, s.o, s.c, s.o);
            let wg = conv_nhwc::weights_input_grad(&w.weight, s.o, s.c, s.c);
            let (mut y, mut dw, mut dx, mut pad) = (vec![0f32; s.out_len()], vec![0f32; wf.len()], vec![0f32; s.in_len()], Vec::new());
            let mut passes: Vec<(&str, f64)> = vec![
                ("forward", best_of(&mut || conv_nhwc::forward(kernel, s, &x, &wf, Some(&w.bias), true, &mut y))),
                ("weight_grad", best_of(&mut || conv_nhwc::weight_grad(kernel, s, &x, &dy, &mut dw))),
            ];
            if l > 0 {
                passes.push(("input_grad", best_of(&mut || conv_nhwc::input_grad(kernel, s, s.c, &dy, &wg, &mut pad, &mut dx))));
            }
            for (pass, seconds) in passes {
                println!(
                    "{{\"layer\":{l},\"c\":{},\"h\":{},\"stride\":{},\"pass\":\"{pass}\",\"kernel\":\"{}\",\"threads\":1,\"gflops\":{:.1}}}",
                    s.c, s.h, s.stride, kernel.name(), gflop / seconds
                );
            }
        }
        // The image to channels-last, scaled, in the two loop orders.
        let (c, hw) = (9usize, 84 * 84);
        let image: Vec<u8> = (0..c * hw).map(|i| (i * 31 % 256) as u8).collect();
        let mut x0 = vec![0f32; c * hw];
        let scale = (1.0f64 / 255.0) as f32;
        let planes = best_of(&mut || {
            for (ch, plane) in image.chunks_exact(hw).enumerate() {
                for (p, &v) in plane.iter().enumerate() {
                    x0[p * c + ch] = f32::from(v) * scale;
                }
            }
            std::hint::black_box(&mut x0);
        });
        let pixels = best_of(&mut || {
            for (p, px) in x0.chunks_exact_mut(c).enumerate() {
                for (ch, x) in px.iter_mut().enumerate() {
                    *x = f32::from(image[ch * hw + p]) * scale;
                }
            }
            std::hint::black_box(&mut x0);
        });
        for (order, seconds) in [("plane by plane", planes), ("pixel by pixel", pixels)] {
            println!("{{\"image_to_channels_last\":\"{order}\",\"us_per_image\":{:.1}}}", seconds / per as f64 * 1e6);
        }
        Ok(())
    })?;
    let flop_per_sample = 2.0
        * shapes
            .iter()
            .map(|s| (s.o * s.c * 9 * s.ho() * s.wo()) as f64)
            .sum::<f64>();
    for &b in batches {
        let obs: Vec<u8> = (0..b * shapes[0].in_len()).map(|i| (i * 7919 % 256) as u8).collect();
        for threads in [1, rayon::current_num_threads()] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
            for keep in [false, true] {
                let seconds = pool.install(|| {
                    let times = (0..repeats.max(1) + 1).map(|_| {
                        let start = Instant::now();
                        drop(encode_batch(kernel, &shapes, &weights, &obs, b, keep, 0.0));
                        start.elapsed().as_secs_f64()
                    });
                    // The first call allocates what the later ones reuse.
                    median(times.skip(1).collect())
                });
                println!(
                    "{{\"batch\":{b},\"encode_batch\":true,\"tape\":{keep},\"threads\":{threads},\"seconds\":{seconds:.4},\"gflops\":{:.1}}}",
                    flop_per_sample * b as f64 / seconds / 1e9
                );
            }
        }
    }
    Ok(())
}

/// `--peak`: the vector throughput of this machine's cores on one thread and on every core,
/// from 12 independent chains per thread with nothing loaded from memory: f32 FMA on 256-bit
/// (AVX2) and 512-bit (AVX-512) registers, and the bf16 dot product (AVX512_BF16) where the
/// CPU has them. The ceiling for the GFLOP/s columns.
fn peak() -> anyhow::Result<()> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // 12 independent accumulator chains per thread, n steps each, of one instruction:
        // FLOPs per instruction = 2 × lanes (a dot product of bf16 pairs: 2 × 2 × 16).
        #[target_feature(enable = "avx2,fma")]
        fn fma_ymm(n: usize) -> f32 {
            let (a, b) = (_mm256_set1_ps(1.000_000_1), _mm256_set1_ps(0.999_999_9));
            let mut acc = [_mm256_setzero_ps(); 12];
            for _ in 0..n {
                for v in acc.iter_mut() {
                    *v = _mm256_fmadd_ps(*v, a, b);
                }
            }
            let mut sum = [0f32; 8];
            // SAFETY: `sum` holds 8 floats.
            unsafe {
                _mm256_storeu_ps(
                    sum.as_mut_ptr(),
                    acc.iter().fold(_mm256_setzero_ps(), |s, v| _mm256_add_ps(s, *v)),
                )
            };
            sum.iter().sum()
        }
        #[target_feature(enable = "avx512f")]
        fn fma_zmm(n: usize) -> f32 {
            let (a, b) = (_mm512_set1_ps(1.000_000_1), _mm512_set1_ps(0.999_999_9));
            let mut acc = [_mm512_setzero_ps(); 12];
            for _ in 0..n {
                for v in acc.iter_mut() {
                    *v = _mm512_fmadd_ps(*v, a, b);
                }
            }
            _mm512_reduce_add_ps(acc.iter().fold(_mm512_setzero_ps(), |s, v| _mm512_add_ps(s, *v)))
        }
        #[target_feature(enable = "avx512f,avx512bf16")]
        fn dpbf16_zmm(n: usize) -> f32 {
            // bf16 1.0 and 2^-23 in every lane. SAFETY (both transmutes): __m512i and
            // __m512bh are 512-bit vectors of the same size, every bit pattern valid.
            let a: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi16(0x3f80)) };
            let b: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi16(0x3400)) };
            let mut acc = [_mm512_setzero_ps(); 12];
            for _ in 0..n {
                for v in acc.iter_mut() {
                    *v = _mm512_dpbf16_ps(*v, a, b);
                }
            }
            _mm512_reduce_add_ps(acc.iter().fold(_mm512_setzero_ps(), |s, v| _mm512_add_ps(s, *v)))
        }
        let has = |f: &str| match f {
            "fma ymm" => std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"),
            "fma zmm" => std::is_x86_feature_detected!("avx512f"),
            _ => std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bf16"),
        };
        let n = 200_000_000usize;
        /// A name, its chains, and the FLOPs of one of its instructions.
        type Peak = (&'static str, fn(usize) -> f32, usize);
        let kinds: [Peak; 3] = [
            // SAFETY (each): called only where `has` found the instruction set.
            ("fma ymm", |n| unsafe { fma_ymm(n) }, 16),
            ("fma zmm", |n| unsafe { fma_zmm(n) }, 32),
            ("dpbf16 zmm", |n| unsafe { dpbf16_zmm(n) }, 64),
        ];
        anyhow::ensure!(has("fma ymm"), "no AVX2 + FMA on this CPU");
        for (name, chains, flop_per_instruction) in kinds {
            if !has(name) {
                println!("{{\"peak\":\"{name}\",\"available\":false}}");
                continue;
            }
            for threads in [1, rayon::current_num_threads()] {
                let start = Instant::now();
                let handles: Vec<_> = (0..threads).map(|_| std::thread::spawn(move || chains(n))).collect();
                for h in handles {
                    std::hint::black_box(h.join().expect("peak thread"));
                }
                let seconds = start.elapsed().as_secs_f64();
                let gflops = (threads * n * 12 * flop_per_instruction) as f64 / seconds / 1e9;
                println!("{{\"peak\":\"{name}\",\"threads\":{threads},\"gflops\":{gflops:.1}}}");
            }
        }
        Ok(())
    }
    #[cfg(not(target_arch = "x86_64"))]
    anyhow::bail!("--peak measures x86-64 vector instructions")
}
