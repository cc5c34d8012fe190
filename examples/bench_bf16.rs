//! An experiment for issue 30, not a kernel lfs runs: the encoder's forward with its inputs and
//! weights rounded to bf16 and their products summed in f32 by AVX512_BF16's dot product
//! (`vdpbf16ps`, twice the f32 FMA's rate on a Zen 4: `bench_conv --peak`), beside lfs's f32
//! kernels on the same weights and observations. It says how much faster such a forward would
//! be and how far its features would be from f32's, so that whether to build it (it changes
//! every number downstream) can be decided on measurements. Prints one JSON line per result.
//!
//!     cargo build --release --locked --example bench_bf16
//!     target/release/examples/bench_bf16 --batch 128 --repeats 5 \
//!         --weights results/study-2/encoders/lfs-s1.safetensors
//!
//! Observations are stacks of three consecutive frames of the procedural moving-square
//! episodes (`lfs::data::moving_squares`), so that activations have image-like statistics.

/// As the `lfs` binary (src/alloc.rs).
#[global_allocator]
static GLOBAL: lfs::alloc::Allocator = lfs::alloc::Allocator {};

#[path = "common/args.rs"]
mod args;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::time::Instant;

    use super::args::arg;
    use anyhow::Context;
    use lfs::data::moving_squares::moving_square_episodes;
    use lfs::nn::kernels::conv_nhwc::{self, Kernel, Shape};
    use lfs::nn::kernels::tape::{encode_batch, layer_shapes, LayerWeights};
    use rayon::prelude::*;

    /// Output channels of every layer (the paper's encoder), and rows of output pixels per tile.
    const O: usize = 32;
    const P_MAX: usize = 6;

    /// f32 -> bf16 bits, rounding to nearest even (as `vcvtneps2bf16` does).
    fn to_bf16(x: f32) -> u16 {
        half::bf16::from_f32(x).to_bits()
    }

    /// One layer for the bf16 forward: its shape with the input channels rounded up to even (c
    /// pairs are what one dot-product lane sums), weights as [ky][kx][c/2][o][2] bf16, bias f32.
    struct Bf16Layer {
        s: Shape,
        w: Vec<u16>,
        bias: Vec<f32>,
    }

    impl Bf16Layer {
        fn new(s: &Shape, w: &LayerWeights) -> Self {
            let c = s.c.next_multiple_of(2);
            let mut packed = vec![0u16; 9 * c * O];
            for o in 0..O {
                for ci in 0..s.c {
                    for k in 0..9 {
                        // PyTorch's (o, c, ky, kx) -> [k][c / 2][o][c % 2].
                        packed[((k * c / 2 + ci / 2) * O + o) * 2 + ci % 2] = to_bf16(w.weight[(o * s.c + ci) * 9 + k]);
                    }
                }
            }
            Self {
                s: Shape { c, ..*s },
                w: packed,
                bias: w.bias.clone(),
            }
        }
    }

    /// acc[i][j] += Σ_segments Σ_k Σ_{t=0,1} A[i, 2k + t] · B[2k + t, j] for 32 columns: A's bf16
    /// pairs (one u32 each) at `a[seg.0 + i·a_row + k]`, B's 32 pairs of column j at
    /// `b[seg.1 + k·2·O + 2j ..]`.
    ///
    /// # Safety
    /// Every address reached must be in bounds, and the CPU must have AVX-512F and AVX512_BF16.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn tile_bf16<const P: usize>(
        acc: &mut [[f32; O]; P],
        a: &[u32],
        b: &[u16],
        a_row: usize,
        segs: &[(usize, usize, usize)],
    ) {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees the bounds and the CPU features; loads are unaligned, and
        // __m512i and __m512bh are 512-bit vectors of the same size, every bit pattern valid.
        unsafe {
            let mut r = [[_mm512_setzero_ps(); 2]; P];
            for (ri, row) in r.iter_mut().zip(acc.iter()) {
                ri[0] = _mm512_loadu_ps(row.as_ptr());
                ri[1] = _mm512_loadu_ps(row.as_ptr().add(16));
            }
            for &(a0, b0, len) in segs {
                let (pa, pb) = (a.as_ptr().add(a0), b.as_ptr().add(b0));
                for k in 0..len {
                    let bk = pb.add(k * 2 * O);
                    let w0: __m512bh = std::mem::transmute(_mm512_loadu_si512(bk.cast()));
                    let w1: __m512bh = std::mem::transmute(_mm512_loadu_si512(bk.add(32).cast()));
                    for (i, ri) in r.iter_mut().enumerate() {
                        let x: __m512bh = std::mem::transmute(_mm512_set1_epi32(*pa.add(i * a_row + k) as i32));
                        ri[0] = _mm512_dpbf16_ps(ri[0], x, w0);
                        ri[1] = _mm512_dpbf16_ps(ri[1], x, w1);
                    }
                }
            }
            for (ri, row) in r.iter().zip(acc.iter_mut()) {
                _mm512_storeu_ps(row.as_mut_ptr(), ri[0]);
                _mm512_storeu_ps(row.as_mut_ptr().add(16), ri[1]);
            }
        }
    }

    /// y (ho, wo, 32) f32 = ReLU(x ⊛ w + bias) for x (h, w, c) in bf16 pairs; as
    /// `conv_nhwc::forward`'s loop, over bf16 tiles.
    fn forward_bf16(layer: &Bf16Layer, x: &[u32], y: &mut [f32]) {
        let s = &layer.s;
        let (ho, wo, cp) = (s.ho(), s.wo(), s.c / 2);
        assert_eq!((x.len(), y.len()), (s.h * s.w * cp, ho * wo * O));
        let mut acc = [[0f32; O]; P_MAX];
        for yo in 0..ho {
            for x0 in (0..wo).step_by(P_MAX) {
                let p = P_MAX.min(wo - x0);
                let a_base = (yo * s.stride * s.w + x0 * s.stride) * cp;
                let segs: [(usize, usize, usize); 3] =
                    std::array::from_fn(|ky| (a_base + ky * s.w * cp, ky * 3 * cp * 2 * O, 3 * cp));
                // Bounds: the last pair a tile reads, and the last weight.
                let last_a = a_base + 2 * s.w * cp + (p - 1) * s.stride * cp + 3 * cp - 1;
                assert!(last_a < x.len() && 9 * cp * 2 * O <= layer.w.len());
                for row in acc[..p].iter_mut() {
                    row.copy_from_slice(&layer.bias);
                }
                // SAFETY: bounds checked above; main() runs this only where the CPU has AVX512_BF16.
                unsafe {
                    match p {
                        1 => tile_bf16::<1>((&mut acc[..1]).try_into().unwrap(), x, &layer.w, s.stride * cp, &segs),
                        2 => tile_bf16::<2>((&mut acc[..2]).try_into().unwrap(), x, &layer.w, s.stride * cp, &segs),
                        3 => tile_bf16::<3>((&mut acc[..3]).try_into().unwrap(), x, &layer.w, s.stride * cp, &segs),
                        4 => tile_bf16::<4>((&mut acc[..4]).try_into().unwrap(), x, &layer.w, s.stride * cp, &segs),
                        5 => tile_bf16::<5>((&mut acc[..5]).try_into().unwrap(), x, &layer.w, s.stride * cp, &segs),
                        _ => tile_bf16::<6>(&mut acc, x, &layer.w, s.stride * cp, &segs),
                    }
                }
                for (i, row) in acc[..p].iter().enumerate() {
                    let dst = &mut y[(yo * wo + x0 + i) * O..][..O];
                    dst.iter_mut().zip(row).for_each(|(d, v)| *d = v.max(0.0));
                }
            }
        }
    }

    /// f32 (pixels × c) -> bf16 pairs, 16 at a time with `vcvtneps2bf16`.
    #[target_feature(enable = "avx512f,avx512bf16")]
    fn to_bf16_pairs(src: &[f32], dst: &mut [u32]) {
        use std::arch::x86_64::*;
        assert_eq!(src.len(), 2 * dst.len());
        let whole = src.len() / 16 * 16;
        for (chunk, out) in src[..whole].chunks_exact(16).zip(dst.chunks_exact_mut(8)) {
            // SAFETY: 16 floats read, 8 u32 (16 bf16) written, both in bounds; __m256bh and
            // __m256i are the same 256 bits.
            unsafe {
                let v: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(_mm512_loadu_ps(chunk.as_ptr())));
                _mm256_storeu_si256(out.as_mut_ptr().cast(), v);
            }
        }
        for (pair, out) in src[whole..].chunks_exact(2).zip(&mut dst[whole / 2..]) {
            *out = u32::from(to_bf16(pair[0])) | (u32::from(to_bf16(pair[1])) << 16);
        }
    }

    /// Per-sample buffers of the bf16 forward.
    struct Scratch {
        x0: Vec<f32>,
        pairs: Vec<u32>,
        acts: Vec<Vec<f32>>,
    }

    /// The whole encoder on one observation (9, 84, 84) u8 in bf16: h in (C, H, W) order, as
    /// `encode_batch` gives it.
    fn encode_bf16(layers: &[Bf16Layer], obs: &[u8], scratch: &mut Scratch, h: &mut [f32]) {
        let first = &layers[0].s;
        let (c_real, hw) = (obs.len() / (first.h * first.w), first.h * first.w);
        let scale = (1.0f64 / 255.0) as f32;
        for (p, px) in scratch.x0.chunks_exact_mut(first.c).enumerate() {
            for (ch, x) in px.iter_mut().enumerate() {
                *x = if ch < c_real {
                    f32::from(obs[ch * hw + p]) * scale
                } else {
                    0.0
                };
            }
        }
        for (l, layer) in layers.iter().enumerate() {
            let input = if l == 0 { &scratch.x0 } else { &scratch.acts[l - 1] };
            let pairs = &mut scratch.pairs[..input.len() / 2];
            // SAFETY: main() runs this only where the CPU has AVX512_BF16.
            unsafe { to_bf16_pairs(input, pairs) };
            let pairs = &scratch.pairs[..input.len() / 2];
            forward_bf16(layer, pairs, &mut scratch.acts[l]);
        }
        let s = &layers[layers.len() - 1].s;
        conv_nhwc::hwc_to_chw(&scratch.acts[layers.len() - 1], O, s.ho() * s.wo(), O, h);
    }

    fn encode_bf16_batch(layers: &[Bf16Layer], obs: &[u8], b: usize) -> Vec<f32> {
        let in_len = obs.len() / b;
        let repr = layers[layers.len() - 1].s.out_len();
        let mut h = vec![0f32; b * repr];
        h.par_chunks_mut(repr).zip(obs.par_chunks(in_len)).for_each_init(
            || Scratch {
                x0: vec![0f32; layers[0].s.in_len()],
                pairs: vec![0u32; layers.iter().map(|l| l.s.in_len() / 2).max().unwrap_or(0)],
                acts: layers.iter().map(|l| vec![0f32; l.s.out_len()]).collect(),
            },
            |scratch, (h_row, obs)| encode_bf16(layers, obs, scratch, h_row),
        );
        h
    }

    pub fn run() -> anyhow::Result<()> {
        let args: Vec<String> = std::env::args().collect();
        let b: usize = arg(&args, "--batch", 128)?;
        let repeats: usize = arg(&args, "--repeats", 5)?;
        let weights_path = args
            .iter()
            .position(|a| a == "--weights")
            .and_then(|i| args.get(i + 1))
            .map_or("results/study-2/encoders/lfs-s1.safetensors", String::as_str);
        anyhow::ensure!(
            std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bf16"),
            "this CPU has no AVX512_BF16"
        );

        let file = lfs::nn::checkpoint::load(std::path::Path::new(&weights_path)).context("--weights")?;
        let shapes = layer_shapes((9, 84, 84), &[(O, 2), (O, 1), (O, 1), (O, 1)]).context("encoder shapes")?;
        let weights: Vec<LayerWeights> = (0..shapes.len())
            .map(|l| -> anyhow::Result<LayerWeights> {
                let get = |what: &str| -> anyhow::Result<Vec<f32>> {
                    let name = format!("encoder.convnet.{}.{what}", 2 * l);
                    let t = file
                        .tensors
                        .get(&name)
                        .with_context(|| format!("{weights_path}: no {name}"))?;
                    Ok(t.flatten_all()?.to_vec1::<f32>()?)
                };
                Ok(LayerWeights {
                    weight: get("weight")?,
                    bias: get("bias")?,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let layers: Vec<Bf16Layer> = shapes.iter().zip(&weights).map(|(s, w)| Bf16Layer::new(s, w)).collect();

        // b observations: three consecutive frames of moving-square episodes, (9, 84, 84) each.
        let episodes = moving_square_episodes("cartpole_swingup", 0, b.div_ceil(40), 42, None);
        let frame = 3 * 84 * 84;
        let mut obs = Vec::with_capacity(b * 3 * frame);
        for i in 0..b {
            let (e, t) = (&episodes[i / 40], i % 40 + 2);
            obs.extend_from_slice(&e.frames[(t - 2) * frame..(t + 1) * frame]);
        }

        let kernel = Kernel::detect();
        let h32 = encode_batch(kernel, &shapes, &weights, &obs, b, false, 0.0).h;
        let h16 = encode_bf16_batch(&layers, &obs, b);
        let max_h = h32.iter().fold(0f32, |m, v| m.max(v.abs()));
        let max_diff = h32.iter().zip(&h16).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        let diff: Vec<f32> = h32.iter().zip(&h16).map(|(a, b)| a - b).collect();
        println!(
            "{{\"batch\":{b},\"weights\":\"{weights_path}\",\"max_abs_diff_over_max_abs\":{:.3e},\"relative_l2\":{:.3e}}}",
            max_diff / max_h,
            norm(&diff) / norm(&h32)
        );

        let flop = 2.0
            * shapes
                .iter()
                .map(|s| (s.o * s.c * 9 * s.ho() * s.wo()) as f64)
                .sum::<f64>()
            * b as f64;
        for threads in [1, rayon::current_num_threads()] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
            let times = |f: &(dyn Fn() + Sync)| -> f64 {
                let mut t: Vec<f64> = (0..repeats.max(1) + 1)
                    .map(|_| {
                        let start = Instant::now();
                        pool.install(f);
                        start.elapsed().as_secs_f64()
                    })
                    .skip(1) // the first call allocates
                    .collect();
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            };
            // Alternated, so that both see the same machine.
            let mut f32_s = Vec::new();
            let mut bf16_s = Vec::new();
            for _ in 0..3 {
                f32_s.push(times(&|| {
                    drop(encode_batch(kernel, &shapes, &weights, &obs, b, false, 0.0))
                }));
                bf16_s.push(times(&|| drop(encode_bf16_batch(&layers, &obs, b))));
            }
            let (a, c) = (
                f32_s.iter().copied().fold(f64::INFINITY, f64::min),
                bf16_s.iter().copied().fold(f64::INFINITY, f64::min),
            );
            println!(
                "{{\"batch\":{b},\"threads\":{threads},\"f32_seconds\":{a:.4},\"bf16_seconds\":{c:.4},\"f32_gflops\":{:.1},\"bf16_gflops\":{:.1},\"bf16_over_f32\":{:.3}}}",
                flop / a / 1e9,
                flop / c / 1e9,
                c / a
            );
        }
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    lfs::alloc::keep_freed_memory();
    #[cfg(target_arch = "x86_64")]
    return x86::run();
    #[cfg(not(target_arch = "x86_64"))]
    anyhow::bail!("bf16 dot products are an x86-64 AVX512_BF16 experiment");
}
