//! The CPU 3×3 conv op (bias and ReLU fused) against candle's own conv2d and its autograd, and
//! against direct f64 loops: forward, input and weight gradients to 1e-4 relative, on seeded
//! random inputs, odd batch sizes, the paper's shapes and odd-sized stride-2 cases; the input
//! gradient is skipped for a non-variable input; the bias gradient against candle's
//! conv2d → broadcast_add → relu.

use candle_core::{Device, Tensor, Var};
use lfs::nn::kernels::conv_nhwc::{self, Kernel, Shape};
use lfs::nn::kernels::conv_ops::conv2d_3x3_bias_relu;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Seeded uniform(−1, 1) tensor of `dims`.
fn random(rng: &mut ChaCha8Rng, dims: &[usize]) -> Tensor {
    let n = dims.iter().product();
    let v: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    Tensor::from_vec(v, dims, &Device::Cpu).unwrap()
}

/// max |a − b| / max |b|, over all elements.
fn rel_err(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims());
    let a = a.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = b.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
    assert!(scale > 0.0, "reference is all zeros");
    a.iter().zip(&b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

/// relu(x ⊛ w) by the op, with a zero bias.
fn conv_relu(x: &Tensor, w: &Tensor, stride: usize) -> candle_core::Result<Tensor> {
    let bias = Tensor::zeros(w.dim(0)?, candle_core::DType::F32, &Device::Cpu)?;
    conv2d_3x3_bias_relu(x, w, &bias, stride).map_err(|e| candle_core::Error::Msg(e.to_string()))
}

/// Output, input gradient and weight gradient of `loss = Σ relu(conv(x, w)) · r` for one conv.
struct Run {
    y: Tensor,
    dx: Option<Tensor>,
    dw: Tensor,
}

fn run(x: &Tensor, w: &Tensor, r: &Tensor, stride: usize, ours: bool, x_is_var: bool) -> Run {
    let xv = Var::from_tensor(x).unwrap();
    let wv = Var::from_tensor(w).unwrap();
    let x_in = if x_is_var { xv.as_tensor().clone() } else { x.clone() };
    let y = if ours {
        conv_relu(&x_in, wv.as_tensor(), stride).unwrap()
    } else {
        x_in.conv2d(wv.as_tensor(), 0, stride, 1, 1).unwrap().relu().unwrap()
    };
    let grads = (&y * r).unwrap().sum_all().unwrap().backward().unwrap();
    Run {
        dx: grads.get(xv.as_tensor()).cloned(),
        dw: grads.get(wv.as_tensor()).unwrap().clone(),
        y,
    }
}

/// Checks ours against candle for x (b, c, h, w), w (o, c, 3, 3).
fn check(seed: u64, b: usize, c: usize, o: usize, h: usize, w: usize, stride: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x = random(&mut rng, &[b, c, h, w]);
    let wt = random(&mut rng, &[o, c, 3, 3]);
    let (ho, wo) = ((h - 3) / stride + 1, (w - 3) / stride + 1);
    let r = random(&mut rng, &[b, o, ho, wo]);
    let ours = run(&x, &wt, &r, stride, true, true);
    let stock = run(&x, &wt, &r, stride, false, true);
    assert_eq!(ours.y.dims(), &[b, o, ho, wo]);
    let tag = format!("b={b} c={c} o={o} {h}×{w} s={stride}");
    let e = rel_err(&ours.y, &stock.y);
    assert!(e < 1e-4, "{tag}: forward rel err {e}");
    let e = rel_err(&ours.dw, &stock.dw);
    assert!(e < 1e-4, "{tag}: weight grad rel err {e}");
    let e = rel_err(ours.dx.as_ref().unwrap(), stock.dx.as_ref().unwrap());
    assert!(e < 1e-4, "{tag}: input grad rel err {e}");
}

/// Direct loops in f64: (y, dx, dw) of `loss = Σ relu(conv(x, w)) · r`, an independent reference
/// where candle's own conv2d backward fails (stride 2 with an even height: a shape mismatch in add).
fn naive(x: &Tensor, w: &Tensor, r: &Tensor, stride: usize) -> (Tensor, Tensor, Tensor) {
    let (b, c, h, wd) = x.dims4().unwrap();
    let (o, _, _, _) = w.dims4().unwrap();
    let (_, _, ho, wo) = r.dims4().unwrap();
    let xs = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let ws = w.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let rs = r.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let (mut y, mut dx, mut dw) = (vec![0f64; b * o * ho * wo], vec![0f64; xs.len()], vec![0f64; ws.len()]);
    let outputs = || {
        (0..b).flat_map(|bi| {
            (0..o).flat_map(move |oi| (0..ho).flat_map(move |oy| (0..wo).map(move |ox| (bi, oi, oy, ox))))
        })
    };
    let taps = || (0..c).flat_map(|ci| (0..3).flat_map(move |ky| (0..3).map(move |kx| (ci, ky, kx))));
    // The forward, then the ReLU's gradient (r where the sum is positive) back to x and w.
    for pass in [0, 1] {
        for (bi, oi, oy, ox) in outputs() {
            let yi = ((bi * o + oi) * ho + oy) * wo + ox;
            let g = if y[yi] > 0.0 { rs[yi] as f64 } else { 0.0 };
            for (ci, ky, kx) in taps() {
                let xi = ((bi * c + ci) * h + oy * stride + ky) * wd + ox * stride + kx;
                let wi = ((oi * c + ci) * 3 + ky) * 3 + kx;
                match pass {
                    0 => y[yi] += xs[xi] as f64 * ws[wi] as f64,
                    _ => {
                        dx[xi] += ws[wi] as f64 * g;
                        dw[wi] += xs[xi] as f64 * g;
                    }
                }
            }
        }
    }
    y.iter_mut().for_each(|v| *v = v.max(0.0));
    let t = |v: Vec<f64>, d: &[usize]| {
        Tensor::from_vec(v.into_iter().map(|v| v as f32).collect::<Vec<_>>(), d, &Device::Cpu).unwrap()
    };
    (t(y, r.dims()), t(dx, x.dims()), t(dw, w.dims()))
}

/// Checks ours against [`naive`] for x (b, c, h, w), w (o, c, 3, 3).
fn check_naive(seed: u64, b: usize, c: usize, o: usize, h: usize, w: usize, stride: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x = random(&mut rng, &[b, c, h, w]);
    let wt = random(&mut rng, &[o, c, 3, 3]);
    let r = random(&mut rng, &[b, o, (h - 3) / stride + 1, (w - 3) / stride + 1]);
    let ours = run(&x, &wt, &r, stride, true, true);
    let (y, dx, dw) = naive(&x, &wt, &r, stride);
    let tag = format!("b={b} c={c} o={o} {h}×{w} s={stride}");
    for (name, a, b) in [
        ("forward", &ours.y, &y),
        ("input grad", ours.dx.as_ref().unwrap(), &dx),
        ("weight grad", &ours.dw, &dw),
    ] {
        let e = rel_err(a, b);
        assert!(e < 1e-4, "{tag}: {name} rel err {e} vs direct loops");
    }
}

#[test]
fn spec_first_layer_9_to_32_stride2_on_84() {
    check(1, 1, 9, 32, 84, 84, 2);
}

#[test]
fn spec_later_layer_32_to_32_stride1_on_41() {
    check(2, 3, 32, 32, 41, 41, 1);
}

#[test]
fn odd_sizes_and_batches_stride2() {
    check(3, 5, 3, 4, 13, 11, 2);
    check_naive(4, 3, 5, 7, 12, 9, 2);
    check_naive(9, 1, 3, 2, 10, 10, 2);
}

#[test]
fn direct_loops_agree_on_small_cases() {
    check_naive(10, 3, 4, 5, 9, 8, 1);
    check_naive(11, 5, 9, 4, 15, 13, 2);
}

#[test]
fn odd_sizes_and_batches_stride1() {
    check(5, 5, 4, 6, 7, 10, 1);
    check(6, 1, 2, 3, 3, 3, 1);
}

#[test]
fn non_variable_input_gets_no_gradient_but_weights_do() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let x = random(&mut rng, &[3, 9, 17, 17]);
    let wt = random(&mut rng, &[8, 9, 3, 3]);
    let r = random(&mut rng, &[3, 8, 8, 8]);
    let ours = run(&x, &wt, &r, 2, true, false);
    let stock = run(&x, &wt, &r, 2, false, true);
    assert!(ours.dx.is_none());
    let e = rel_err(&ours.dw, &stock.dw);
    assert!(e < 1e-4, "weight grad rel err {e}");
}

#[test]
fn non_contiguous_input_is_accepted() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    // (b, c, w, h) transposed to (b, c, h, w): a strided view.
    let x = random(&mut rng, &[3, 4, 11, 9]).transpose(2, 3).unwrap();
    let wt = random(&mut rng, &[5, 4, 3, 3]);
    let ours = conv_relu(&x, &wt, 1).unwrap();
    let stock = x.conv2d(&wt, 0, 1, 1, 1).unwrap().relu().unwrap();
    let e = rel_err(&ours, &stock);
    assert!(e < 1e-4, "forward rel err {e}");
}

#[test]
fn rejects_unsupported_shapes() {
    let x = Tensor::zeros((1, 4, 8, 8), candle_core::DType::F32, &Device::Cpu).unwrap();
    let w5 = Tensor::zeros((2, 4, 5, 5), candle_core::DType::F32, &Device::Cpu).unwrap();
    let w_c = Tensor::zeros((2, 3, 3, 3), candle_core::DType::F32, &Device::Cpu).unwrap();
    let w = Tensor::zeros((2, 4, 3, 3), candle_core::DType::F32, &Device::Cpu).unwrap();
    assert!(conv_relu(&x, &w5, 1).is_err());
    assert!(conv_relu(&x, &w_c, 1).is_err());
    assert!(conv_relu(&x, &w, 3).is_err());
}

/// (y, dx, dw, db) of `loss = Σ relu(conv(x, w) + bias) · r`, fused op or candle's ops.
fn run_fused(x: &Tensor, w: &Tensor, bias: &Tensor, r: &Tensor, stride: usize, ours: bool) -> [Tensor; 4] {
    let (xv, wv, bv) = (
        Var::from_tensor(x).unwrap(),
        Var::from_tensor(w).unwrap(),
        Var::from_tensor(bias).unwrap(),
    );
    let y = if ours {
        conv2d_3x3_bias_relu(&xv, &wv, &bv, stride).unwrap()
    } else {
        let o = bias.dim(0).unwrap();
        let b4 = bv.as_tensor().reshape((1, o, 1, 1)).unwrap();
        xv.conv2d(&wv, 0, stride, 1, 1)
            .unwrap()
            .broadcast_add(&b4)
            .unwrap()
            .relu()
            .unwrap()
    };
    let grads = (&y * r).unwrap().sum_all().unwrap().backward().unwrap();
    let g = |v: &Var| grads.get(v.as_tensor()).unwrap().clone();
    [y.clone(), g(&xv), g(&wv), g(&bv)]
}

#[test]
fn fused_bias_relu_matches_candle_ops_on_spec_shapes() {
    for (seed, b, c, o, hw, stride) in [(20, 1, 9, 32, 84, 2), (21, 3, 32, 32, 41, 1), (22, 5, 3, 4, 13, 2)] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let x = random(&mut rng, &[b, c, hw, hw]);
        let wt = random(&mut rng, &[o, c, 3, 3]);
        // Biases around zero so that some outputs are clamped and some are not.
        let bias = random(&mut rng, &[o]);
        let s = (hw - 3) / stride + 1;
        let r = random(&mut rng, &[b, o, s, s]);
        let ours = run_fused(&x, &wt, &bias, &r, stride, true);
        let stock = run_fused(&x, &wt, &bias, &r, stride, false);
        let zeros = ours[0]
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
            .iter()
            .filter(|v| **v == 0.0)
            .count();
        assert!(
            zeros > 0 && zeros < ours[0].elem_count(),
            "the ReLU should clamp some outputs, not all"
        );
        for (name, (got, want)) in ["forward", "input grad", "weight grad", "bias grad"]
            .iter()
            .zip(ours.iter().zip(&stock))
        {
            let e = rel_err(got, want);
            assert!(e < 1e-4, "b={b} c={c} o={o} {hw}² s={stride}: {name} rel err {e}");
        }
    }
}

#[test]
fn fused_first_layer_skips_the_image_gradient() {
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let x = random(&mut rng, &[3, 9, 17, 17]);
    let (wt, bias) = (random(&mut rng, &[8, 9, 3, 3]), random(&mut rng, &[8]));
    let (wv, bv) = (Var::from_tensor(&wt).unwrap(), Var::from_tensor(&bias).unwrap());
    let y = conv2d_3x3_bias_relu(&x, &wv, &bv, 2).unwrap();
    let grads = y.sum_all().unwrap().backward().unwrap();
    assert!(grads.get(&x).is_none());
    assert!(grads.get(wv.as_tensor()).is_some() && grads.get(bv.as_tensor()).is_some());
}

#[test]
fn gradients_are_bit_reproducible() {
    let mut rng = ChaCha8Rng::seed_from_u64(24);
    let x = random(&mut rng, &[37, 4, 9, 9]);
    let (wt, bias, r) = (
        random(&mut rng, &[5, 4, 3, 3]),
        random(&mut rng, &[5]),
        random(&mut rng, &[37, 5, 7, 7]),
    );
    let first = run_fused(&x, &wt, &bias, &r, 1, true);
    for _ in 0..3 {
        let again = run_fused(&x, &wt, &bias, &r, 1, true);
        for (a, b) in first.iter().zip(&again) {
            let (a, b) = (
                a.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                b.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            );
            assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }
}

/// Direct loops over one channels-last sample: y (ho, wo, o), dx (h, w, c), dw [ky][kx][c][o]
/// for the output gradient dy.
fn naive_nhwc(s: &Shape, x: &[f32], w: &[f32], dy: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (ho, wo) = (s.ho(), s.wo());
    let (mut y, mut dx, mut dw) = (
        vec![0f32; s.out_len()],
        vec![0f32; s.in_len()],
        vec![0f32; 9 * s.c * s.o],
    );
    for oy in 0..ho {
        for ox in 0..wo {
            for k in 0..9 {
                let (iy, ix) = (oy * s.stride + k / 3, ox * s.stride + k % 3);
                for c in 0..s.c {
                    for o in 0..s.o {
                        let wi = (o * s.c + c) * 9 + k; // PyTorch (o, c, 3, 3)
                        let xi = (iy * s.w + ix) * s.c + c;
                        let yi = (oy * wo + ox) * s.o + o;
                        y[yi] += x[xi] * w[wi];
                        dx[xi] += dy[yi] * w[wi];
                        dw[(k * s.c + c) * s.o + o] += dy[yi] * x[xi];
                    }
                }
            }
        }
    }
    (y, dx, dw)
}

#[test]
fn channels_last_kernels_match_direct_loops_with_every_tile() {
    // Every tile this CPU runs (AVX-512 with 32-wide tiles where o = 32, AVX2, plain Rust), on
    // odd spatial sizes with partial 6-pixel / 6-channel tiles, both strides.
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let kernels = Kernel::supported();
    // (12, 10): a stride-2 layer whose last input row and column no output reaches.
    for (h, w, c, o, stride) in [
        (11, 9, 5, 16, 2),
        (12, 10, 5, 32, 2),
        (9, 10, 16, 32, 1),
        (8, 13, 7, 16, 1),
    ] {
        let s = Shape { h, w, c, o, stride };
        let mut uniform = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect() };
        let (x, wt, dy) = (uniform(s.in_len()), uniform(o * c * 9), uniform(s.out_len()));
        let (y_ref, dx_ref, dw_ref) = naive_nhwc(&s, &x, &wt, &dy);
        let close = |a: &[f32], b: &[f32], what: &str| {
            let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let err = a.iter().zip(b).fold(0f32, |m, (p, q)| m.max((p - q).abs())) / scale;
            assert!(err < 1e-5, "{what} {h}×{w} c={c} o={o} s={stride}: {err}");
        };
        for &kernel in &kernels {
            let mut y = vec![f32::NAN; s.out_len()];
            conv_nhwc::forward(
                kernel,
                &s,
                &x,
                &conv_nhwc::weights_forward(&wt, o, c, o),
                None,
                false,
                &mut y,
            );
            assert!(
                y.iter().all(|v| v.is_finite()),
                "{kernel:?} forward: a value was not written"
            );
            close(&y, &y_ref, &format!("{kernel:?} forward"));
            let mut dw = vec![0f32; 9 * c * o];
            conv_nhwc::weight_grad(kernel, &s, &x, &dy, &mut dw);
            close(&dw, &dw_ref, &format!("{kernel:?} weight grad"));
            let c_pad = conv_nhwc::padded(c);
            let wg = conv_nhwc::weights_input_grad(&wt, o, c, c_pad);
            // The output and the scratch start full of NaN, as stale values of another layer
            // would be: every element must be written (the scratch's zero border included).
            for scratch_len in [0, (h + 8) * (w + 8) * o] {
                let (mut dx_pad, mut scratch) = (vec![f32::NAN; h * w * c_pad], vec![f32::NAN; scratch_len]);
                conv_nhwc::input_grad(kernel, &s, c_pad, &dy, &wg, &mut scratch, &mut dx_pad);
                assert!(
                    dx_pad.iter().all(|v| v.is_finite()),
                    "{kernel:?} input grad {h}×{w} s={stride}: a stale value was left"
                );
                let dx: Vec<f32> = dx_pad.chunks(c_pad).flat_map(|px| px[..c].to_vec()).collect();
                close(&dx, &dx_ref, &format!("{kernel:?} input grad"));
            }
        }
    }
}

#[test]
fn avx512_tiles_give_the_avx2_bits() {
    // The 32-wide AVX-512 tile takes the same fused sums in the same order as the AVX2 one, so
    // every output must be bit for bit the same, on the encoder's own layer shapes (o = 32).
    let kernels = Kernel::supported();
    if !kernels.contains(&Kernel::Avx512) {
        // A CPU feature, not something to install: skipped loudly under CI=true too, where the
        // host's CPU decides (BENCHMARKS.md, "Machines").
        return crate::common::skipped("no AVX-512F on this CPU, so its tiles cannot run here");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for (h, w, c, o, stride) in [(84, 84, 9, 32, 2), (41, 41, 32, 32, 1), (13, 11, 7, 64, 2)] {
        let s = Shape { h, w, c, o, stride };
        let mut uniform = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect() };
        let (x, wt, dy, bias) = (
            uniform(s.in_len()),
            uniform(o * c * 9),
            uniform(s.out_len()),
            uniform(o),
        );
        let wf = conv_nhwc::weights_forward(&wt, o, c, o);
        let c_pad = conv_nhwc::padded(c);
        let wg = conv_nhwc::weights_input_grad(&wt, o, c, c_pad);
        let run = |kernel: Kernel| {
            let mut y = vec![0f32; s.out_len()];
            conv_nhwc::forward(kernel, &s, &x, &wf, Some(&bias), true, &mut y);
            let mut dw = vec![0f32; 9 * c * o];
            conv_nhwc::weight_grad(kernel, &s, &x, &dy, &mut dw);
            let (mut dx, mut scratch) = (vec![0f32; h * w * c_pad], Vec::new());
            conv_nhwc::input_grad(kernel, &s, c_pad, &dy, &wg, &mut scratch, &mut dx);
            [y, dw, dx].map(|v| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>())
        };
        let (wide, narrow) = (run(Kernel::Avx512), run(Kernel::Avx2));
        for (what, (a, b)) in ["forward", "weight grad", "input grad"]
            .iter()
            .zip(wide.iter().zip(&narrow))
        {
            let differ = a.iter().zip(b).filter(|(p, q)| p != q).count();
            assert_eq!(
                differ,
                0,
                "{what} {h}×{w} c={c} o={o} s={stride}: {differ} of {} values differ",
                a.len()
            );
        }
    }
}

#[test]
fn a_conv_kernel_request_the_cpu_cannot_run_is_refused_by_name() {
    let cpu = [Kernel::Avx2, Kernel::Plain];
    assert_eq!(Kernel::choose(None, &cpu), (Kernel::Avx2, None));
    assert_eq!(Kernel::choose(Some("plain"), &cpu), (Kernel::Plain, None));
    for request in ["avx512", "AVX2", ""] {
        let (kernel, why) = Kernel::choose(Some(request), &cpu);
        assert_eq!(kernel, Kernel::Avx2, "{request:?}");
        assert_eq!(
            why.as_deref(),
            Some(
                format!("LFS_CONV_KERNEL={request}: not one of this CPU's conv kernels (avx2, plain); using avx2")
                    .as_str()
            )
        );
    }
}

#[test]
fn layout_transposes_move_every_value_to_its_place() {
    // (c, h, w) <-> (h, w, c_pad) against the index formula, with a pixel count that is not a
    // whole number of the transposes' blocks and padding channels that must come out zero.
    let (c, c_pad, hw) = (9, 16, 7 * 5 + 3);
    let chw: Vec<f32> = (0..c * hw).map(|i| i as f32 + 0.5).collect();
    let mut hwc = vec![f32::NAN; hw * c_pad];
    conv_nhwc::chw_to_hwc(&chw, c, hw, c_pad, &mut hwc);
    for p in 0..hw {
        for ch in 0..c_pad {
            let want = if ch < c { chw[ch * hw + p] } else { 0.0 };
            assert_eq!(hwc[p * c_pad + ch], want, "pixel {p}, channel {ch}");
        }
    }
    let mut back = vec![f32::NAN; c * hw];
    conv_nhwc::hwc_to_chw(&hwc, c, hw, c_pad, &mut back);
    assert_eq!(back, chw);
}
