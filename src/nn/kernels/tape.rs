//! The encoder's forward and backward over raw buffers, one sample at a time through all
//! layers while its data are in cache (issue #5). candle's autograd allocates a zero tensor and
//! adds into it for every gradient it passes; at batch 32 those zero-fills and adds were ~40%
//! of an update's serial time (BENCHMARKS.md). The forward here keeps every sample's
//! activations, channels-last for the kernels of [`super::conv_nhwc`] (the "tape"); the backward
//! accumulates the weight gradients of fixed groups of samples and adds the groups in order, so
//! results are bit-reproducible whatever rayon's scheduling.
//!
//! Nothing here knows parameter names: layers are (weight, bias) buffers in PyTorch's layout
//! with their [`Shape`]s; `crate::nn::Encoder` owns the names and the tensors.

use rayon::prelude::*;

use super::conv_nhwc::{self, Kernel, Shape};
use super::{sum_in_order, GROUPS};

/// One conv layer's parameters as PyTorch lays them out: weight (o·c·3·3), bias (o).
#[derive(Debug, Clone)]
pub struct LayerWeights {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

/// Activations of a forward, channels-last: the scaled image (b, h, w, c) and every layer's
/// post-ReLU output (b, ho, wo, o).
#[derive(Debug)]
pub struct Tape {
    x0: Vec<f32>,
    acts: Vec<Vec<f32>>,
}

/// The output of [`encode_batch`]: h (b, repr) in (C, H, W) order and, when kept, the tape.
pub struct EncodedBatch {
    pub h: Vec<f32>,
    pub tape: Option<Tape>,
}

/// The per-sample shapes of 3×3 conv layers `layers` = (output channels, stride) applied in
/// turn to an input (c, h, w); None when some layer's input is smaller than 3×3.
pub fn layer_shapes((mut c, mut h, mut w): (usize, usize, usize), layers: &[(usize, usize)]) -> Option<Vec<Shape>> {
    let mut shapes = Vec::with_capacity(layers.len());
    for &(o, stride) in layers {
        if h < 3 || w < 3 {
            return None;
        }
        let s = Shape { h, w, c, o, stride };
        (h, w, c) = (s.ho(), s.wo(), o);
        shapes.push(s);
    }
    Some(shapes)
}

/// The conv layers (bias and ReLU each) over a batch of images (b, c, h, w) of pixel values
/// 0..=255 (u8 from the sampler, f32 from a candle tensor), scaled to `pixels / 255 + offset`:
/// h (b, repr) in (C, H, W) order and, with `keep`, the tape.
pub fn encode_batch<T: Copy + Into<f32> + Sync>(
    kernel: Kernel,
    shapes: &[Shape],
    weights: &[LayerWeights],
    obs: &[T],
    b: usize,
    keep: bool,
    offset: f32,
) -> EncodedBatch {
    let wf: Vec<Vec<f32>> = weights
        .iter()
        .zip(shapes)
        .map(|(w, s)| conv_nhwc::weights_forward(&w.weight, s.o, s.c, s.o))
        .collect();
    let in_len = shapes[0].in_len();
    let last = shapes.len() - 1;
    let repr = shapes[last].out_len();
    let mut h = vec![0f32; b * repr]; // (b, o, ho, wo)

    // Per sample: the image scaled as candle's `obs / 255.0 (+ offset)` (x · (1/255) in f32,
    // then the offset) and made channels-last, every layer, and the last output back to
    // (C, H, W) order.
    let run = |obs: &[T], x0: &mut [f32], acts: &mut [&mut [f32]], h_row: &mut [f32]| {
        let scale = (1.0f64 / 255.0) as f32;
        let (c, hw) = (shapes[0].c, shapes[0].h * shapes[0].w);
        for (ch, plane) in obs.chunks_exact(hw).enumerate() {
            for (p, &v) in plane.iter().enumerate() {
                x0[p * c + ch] = v.into() * scale + offset;
            }
        }
        for (l, s) in shapes.iter().enumerate() {
            let (done, rest) = acts.split_at_mut(l);
            let input: &[f32] = if l == 0 { x0 } else { done[l - 1] };
            conv_nhwc::forward(kernel, s, input, &wf[l], Some(&weights[l].bias), true, rest[0]);
        }
        let s = &shapes[last];
        conv_nhwc::hwc_to_chw(acts[last], s.o, s.ho() * s.wo(), s.o, h_row);
    };
    let tape = if keep {
        let mut x0 = vec![0f32; b * in_len];
        let mut acts: Vec<Vec<f32>> = shapes.iter().map(|s| vec![0f32; b * s.out_len()]).collect();
        let mut per_sample: Vec<Vec<&mut [f32]>> = (0..b).map(|_| Vec::with_capacity(shapes.len())).collect();
        for (act, s) in acts.iter_mut().zip(shapes) {
            for (slots, chunk) in per_sample.iter_mut().zip(act.chunks_mut(s.out_len())) {
                slots.push(chunk);
            }
        }
        per_sample
            .into_par_iter()
            .zip(x0.par_chunks_mut(in_len))
            .zip(h.par_chunks_mut(repr))
            .zip(obs.par_chunks(in_len))
            .for_each(|(((mut slots, x0), h_row), obs)| run(obs, x0, &mut slots, h_row));
        Some(Tape { x0, acts })
    } else {
        h.par_chunks_mut(repr).zip(obs.par_chunks(in_len)).for_each_init(
            || {
                let acts: Vec<Vec<f32>> = shapes.iter().map(|s| vec![0f32; s.out_len()]).collect();
                (vec![0f32; in_len], acts)
            },
            |(x0, acts), (h_row, obs)| {
                let mut slots: Vec<&mut [f32]> = acts.iter_mut().map(|a| a.as_mut_slice()).collect();
                run(obs, x0, &mut slots, h_row)
            },
        );
        None
    };
    EncodedBatch { h, tape }
}

/// Per layer, the gradients of the weight and the bias in PyTorch's layout for the gradient
/// `dh` (rows.len() × repr, (C, H, W) order) of the samples `rows` of `tape` (a sample may
/// appear more than once).
pub fn backward_batch(
    kernel: Kernel,
    shapes: &[Shape],
    weights: &[LayerWeights],
    tape: &Tape,
    rows: &[usize],
    dh: &[f32],
) -> Vec<LayerWeights> {
    let wg: Vec<Vec<f32>> = weights
        .iter()
        .zip(shapes)
        .map(|(w, s)| conv_nhwc::weights_input_grad(&w.weight, s.o, s.c, s.c))
        .collect();
    let last = shapes.len() - 1;
    let repr = shapes[last].out_len();

    // Per sample from the last layer down: mask by the ReLU, add the bias and weight
    // gradients ([ky][kx][c][o] here), and pass the input gradient on (not for the image).
    let per = rows.len().div_ceil(GROUPS).max(1);
    let partials: Vec<Vec<(Vec<f32>, Vec<f32>)>> = dh
        .par_chunks(per * repr)
        .zip(rows.par_chunks(per))
        .map(|(dh_rows, sample_ids)| {
            let mut grads: Vec<(Vec<f32>, Vec<f32>)> = weights
                .iter()
                .map(|w| (vec![0f32; w.weight.len()], vec![0f32; w.bias.len()]))
                .collect();
            let (mut dy, mut dx, mut pad) = (Vec::new(), Vec::new(), Vec::new());
            for (dh_row, &sample) in dh_rows.chunks_exact(repr).zip(sample_ids) {
                let s = &shapes[last];
                dy.clear();
                dy.resize(repr, 0.0);
                conv_nhwc::chw_to_hwc(dh_row, s.o, s.ho() * s.wo(), s.o, &mut dy);
                for (l, s) in shapes.iter().enumerate().rev() {
                    let out_len = s.out_len();
                    let act = &tape.acts[l][sample * out_len..(sample + 1) * out_len];
                    dy.iter_mut().zip(act).for_each(|(d, a)| {
                        if *a <= 0.0 {
                            *d = 0.0
                        }
                    });
                    let (dw, db) = &mut grads[l];
                    for px in dy.chunks_exact(s.o) {
                        db.iter_mut().zip(px).for_each(|(d, v)| *d += v);
                    }
                    let in_len = s.in_len();
                    let inputs = if l == 0 { &tape.x0 } else { &tape.acts[l - 1] };
                    let input = &inputs[sample * in_len..(sample + 1) * in_len];
                    conv_nhwc::weight_grad(kernel, s, input, &dy, dw);
                    if l > 0 {
                        dx.clear();
                        dx.resize(in_len, 0.0);
                        conv_nhwc::input_grad(kernel, s, s.c, &dy, &wg[l], &mut pad, &mut dx);
                        std::mem::swap(&mut dy, &mut dx);
                    }
                }
            }
            grads
        })
        .collect();

    shapes
        .iter()
        .enumerate()
        .map(|(l, s)| {
            let (w_len, b_len) = (weights[l].weight.len(), weights[l].bias.len());
            let dw_kkco = sum_in_order(partials.iter().map(|p| p[l].0.clone()).collect(), w_len);
            let mut dw = vec![0f32; w_len]; // (o, c, 3, 3)
            conv_nhwc::add_weight_grad_to_torch(&dw_kkco, s.o, s.c, s.o, &mut dw);
            let db = sum_in_order(partials.iter().map(|p| p[l].1.clone()).collect(), b_len);
            LayerWeights { weight: dw, bias: db }
        })
        .collect()
}
