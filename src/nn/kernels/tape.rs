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
/// post-ReLU output (b, ho, wo, o). Its buffers go back to [`SPARE`] when it is dropped.
#[derive(Debug)]
pub struct Tape {
    x0: Vec<f32>,
    acts: Vec<Vec<f32>>,
}

impl Drop for Tape {
    fn drop(&mut self) {
        let mut spare = SPARE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for buffer in std::iter::once(std::mem::take(&mut self.x0)).chain(self.acts.drain(..)) {
            if spare.len() < MAX_SPARE && buffer.capacity() > 0 {
                spare.push(buffer);
            }
        }
    }
}

/// The buffers of dropped tapes, for the next forward that keeps one. A tape is ~1 MB per
/// sample (254 MB for an LFS update's 256 online rows at batch 128) and the forward writes
/// every element of it before anything reads it, so a reused buffer needs no zero-fill, which
/// for fresh ones was a serial memset over all of them (BENCHMARKS.md, "The LFS update's
/// parts"). A buffer keeps its length, so taking it again for as many floats writes nothing.
/// The process keeps up to [`MAX_SPARE`] of them for its life, as the `lfs` binary's allocator
/// keeps what it frees (`crate::alloc`).
static SPARE: std::sync::Mutex<Vec<Vec<f32>>> = std::sync::Mutex::new(Vec::new());

/// Most buffers [`SPARE`] keeps: five per tape (the image and four layers), for the two tapes
/// `lfs train` holds at once (its LFS update's and its SAC update's), and some slack.
const MAX_SPARE: usize = 16;

/// A buffer of `len` floats for a tape, whose contents are unspecified (zeros, or a dropped
/// tape's values): the caller writes every element. The smallest spare buffer that holds `len`
/// floats without growing, brought to `len` (zeros are written only past its last length); a
/// new zeroed one when there is none.
fn tape_buffer(len: usize) -> Vec<f32> {
    let mut spare = SPARE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let smallest = (0..spare.len())
        .filter(|&i| spare[i].capacity() >= len)
        .min_by_key(|&i| spare[i].capacity());
    match smallest {
        Some(i) => {
            let mut buffer = spare.swap_remove(i);
            drop(spare);
            buffer.resize(len, 0.0);
            buffer
        }
        None => vec![0f32; len],
    }
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
        // Pixel by pixel, so that the writes are contiguous (12 µs per 9 × 84 × 84 image
        // instead of 38 plane by plane: `bench_conv --layers`).
        for (p, px) in x0.chunks_exact_mut(c).enumerate().take(hw) {
            for (ch, x) in px.iter_mut().enumerate() {
                *x = obs[ch * hw + p].into() * scale + offset;
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
        // Every element of these is written below: the scaled image by `run`'s first loop, each
        // layer's output by `conv_nhwc::forward`.
        let mut x0 = tape_buffer(b * in_len);
        let mut acts: Vec<Vec<f32>> = shapes.iter().map(|s| tape_buffer(b * s.out_len())).collect();
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
                // `dy` and `dx` keep what their last use left: `chw_to_hwc` (no padding
                // channels here) and `input_grad` write every element.
                dy.resize(repr, 0.0);
                conv_nhwc::chw_to_hwc(dh_row, s.o, s.ho() * s.wo(), s.o, &mut dy);
                for (l, s) in shapes.iter().enumerate().rev() {
                    let out_len = s.out_len();
                    let act = &tape.acts[l][sample * out_len..(sample + 1) * out_len];
                    // The ReLU's mask as a select written every time, not a store behind a
                    // branch, so that it vectorises.
                    dy.iter_mut().zip(act).for_each(|(d, a)| {
                        *d = if *a <= 0.0 { 0.0 } else { *d };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A forward that keeps its tape writes every element of it: with spare buffers full of NaN
    /// (as a dropped tape's stale values would be, but impossible to miss), the tape holds no
    /// NaN and h is the same as without a tape.
    #[test]
    fn a_reused_tape_buffer_is_overwritten_everywhere() {
        // An odd small shape (c 3, 13×13; two layers), so that no other test's buffer has
        // these lengths.
        let shapes = layer_shapes((3, 13, 13), &[(16, 2), (16, 1)]).expect("shapes");
        let weights: Vec<LayerWeights> = shapes
            .iter()
            .enumerate()
            .map(|(l, s)| LayerWeights {
                weight: (0..s.o * s.c * 9)
                    .map(|i| ((i * 37 + l) % 17) as f32 / 17.0 - 0.4)
                    .collect(),
                bias: (0..s.o).map(|i| (i % 5) as f32 / 10.0 - 0.2).collect(),
            })
            .collect();
        let b = 3;
        let obs: Vec<u8> = (0..b * shapes[0].in_len()).map(|i| (i * 31 % 256) as u8).collect();
        let lens: Vec<usize> = std::iter::once(b * shapes[0].in_len())
            .chain(shapes.iter().map(|s| b * s.out_len()))
            .collect();
        SPARE
            .lock()
            .unwrap()
            .extend(lens.iter().map(|&len| vec![f32::NAN; len]));
        let kept = encode_batch(Kernel::detect(), &shapes, &weights, &obs, b, true, 0.0);
        let tape = kept.tape.as_ref().expect("a tape");
        assert!(
            tape.x0.iter().all(|v| !v.is_nan()),
            "the scaled image left a stale value"
        );
        for (l, act) in tape.acts.iter().enumerate() {
            assert!(act.iter().all(|v| !v.is_nan()), "layer {l} left a stale value");
        }
        let plain = encode_batch(Kernel::detect(), &shapes, &weights, &obs, b, false, 0.0);
        assert_eq!(kept.h, plain.h);
    }
}
