//! The encoder f and projector g of the pre-trainer with a hand-written backward on the CPU
//! (issue #5). candle's autograd allocates a zero tensor and adds into it for every gradient it
//! passes (4 conv activations, the flattened features, and the projector's 5M-element weight
//! twice): at batch 32 those zero-fills and adds were ~40% of the update's serial time
//! (BENCHMARKS.md). Here the forward keeps
//! each sample's activations (the "tape", channels-last for the kernels of
//! [`super::conv_nhwc`]), and the backward runs each sample through all layers while its data
//! are in cache, accumulating the weight gradients of fixed groups of samples that are then
//! added in order (bit-reproducible whatever rayon's scheduling).
//!
//! The result equals [`super::Encoder::forward`] followed by [`super::Projector::forward`] (the
//! same image scaling, the same features in the same (C, H, W) order, up to float rounding),
//! and the backward is checked against candle's autograd through that path (`tests/nn.rs`).

use std::sync::Mutex;

use candle_core::{CustomOp2, Device, Tensor};
use rayon::prelude::*;

use super::conv_cpu::{sum_in_order, GROUPS};
use super::conv_nhwc::{self, Kernel, Shape, OB};
use super::cpu_storage::contiguous_f32;
use super::{EncoderConfig, Params};
use crate::{Error, Result};

/// One conv layer's parameter names and stride.
#[derive(Debug, Clone)]
struct ConvLayer {
    weight: String,
    bias: String,
    stride: usize,
}

/// f and g over parameters held in a [`Params`] store (read at each call, so Adam and EMA
/// updates are seen).
#[derive(Debug, Clone)]
pub struct FeatureNet {
    layers: Vec<ConvLayer>,
    proj_weight: String,
    proj_bias: String,
    in_channels: usize,
    image_size: usize,
    kernel: Kernel,
}

/// What the encoder produced: h and, when asked for, the activations its backward needs.
pub struct Encoded {
    /// Flattened conv features (b, repr_dim).
    pub h: Tensor,
    tape: Option<Tape>,
}

impl Encoded {
    /// The kept activations, or an error if the forward did not keep them.
    fn tape(&self) -> Result<&Tape> {
        self.tape
            .as_ref()
            .ok_or_else(|| Error::Config("feature net: backward needs a forward with keep = true".into()))
    }
}

/// What one forward of f and g produced.
pub struct Features {
    pub encoded: Encoded,
    /// Projector output (b, latent_dim).
    pub z: Tensor,
}

impl Features {
    /// Rows `rows` of z, in that order: (rows.len(), latent_dim).
    pub fn z_rows(&self, rows: &[usize]) -> Result<Tensor> {
        Ok(self.z.index_select(&row_index(rows, self.z.dim(0)?)?, 0)?)
    }
}

/// Activations of a forward, channels-last: the scaled image (b, h, w, c) and every layer's
/// post-ReLU output (b, ho, wo, o).
struct Tape {
    x0: Vec<f32>,
    acts: Vec<Vec<f32>>,
}

/// Gradients of f and g, keyed by parameter name.
pub type NamedGrads = Vec<(String, Tensor)>;

impl FeatureNet {
    /// f = `{encoder}.convnet.{2i}.*` and g = `{projector}.*`, checked present in `params`.
    pub fn new(cfg: &EncoderConfig, encoder: &str, projector: &str, params: &Params) -> Result<Self> {
        cfg.output_size()?;
        if cfg.num_filters % OB != 0 {
            return Err(Error::Config(format!(
                "model.encoder.num_filters = {}: the pre-trainer's CPU conv kernels need a multiple of {OB}",
                cfg.num_filters
            )));
        }
        let layers: Vec<ConvLayer> = (0..cfg.num_layers)
            .map(|l| ConvLayer {
                weight: format!("{encoder}.convnet.{}.weight", 2 * l),
                bias: format!("{encoder}.convnet.{}.bias", 2 * l),
                stride: if l == 0 { 2 } else { 1 },
            })
            .collect();
        let net = Self {
            layers,
            proj_weight: format!("{projector}.weight"),
            proj_bias: format!("{projector}.bias"),
            in_channels: cfg.in_channels,
            image_size: cfg.image_size,
            kernel: Kernel::detect(),
        };
        for name in net.param_names() {
            if params.get(&name).is_none() {
                return Err(Error::Config(format!("feature net: no parameter {name}")));
            }
        }
        Ok(net)
    }

    fn param_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .layers
            .iter()
            .flat_map(|l| [l.weight.clone(), l.bias.clone()])
            .collect();
        names.extend([self.proj_weight.clone(), self.proj_bias.clone()]);
        names
    }

    /// Every layer's per-sample shape.
    fn shapes(&self, params: &Params) -> Result<Vec<Shape>> {
        let mut c = self.in_channels;
        let mut layers = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let weight = param(params, &layer.weight)?;
            let (o, c_w) = (weight.dim(0)?, weight.dim(1)?);
            if c_w != c {
                return Err(Error::Config(format!(
                    "{}: {c_w} input channels, expected {c}",
                    layer.weight
                )));
            }
            layers.push((o, layer.stride));
            c = o;
        }
        let size = self.image_size;
        layer_shapes((self.in_channels, size, size), &layers)
            .ok_or_else(|| Error::Config(format!("feature net: a {size}×{size} image is too small")))
    }

    /// Shapes: obs (b, 9, 84, 84) u8 pixels -> h (b, 39200), z (b, latent). With `keep`, the
    /// activations are kept for [`FeatureNet::backward`].
    pub fn forward(&self, params: &Params, obs: &[u8], b: usize, keep: bool) -> Result<Features> {
        let encoded = self.encode(params, obs, b, keep)?;
        // g as candle's Linear: h · Wᵀ + bias, on detached parameters (no graph is built).
        let w = param(params, &self.proj_weight)?.detach(); // (latent, repr)
        let bias = param(params, &self.proj_bias)?.detach(); // (latent)
        let z = encoded.h.matmul(&w.t()?)?.broadcast_add(&bias)?; // (b, latent)
        Ok(Features { encoded, z })
    }

    /// The gradients of every parameter of f and g for the loss gradient `dz` (rows.len(),
    /// latent) of the samples `rows` of a kept forward (`dz` row i belongs to sample rows[i];
    /// a sample may appear more than once).
    pub fn backward(&self, params: &Params, features: &Features, rows: &[usize], dz: &Tensor) -> Result<NamedGrads> {
        features.encoded.tape()?; // before the projector's work
        let b = features.encoded.h.dim(0)?;
        let idx = row_index(rows, b)?;
        // g: dW = dzᵀ · h_rows, db = Σ dz, dh = dz · W.
        let h_rows = features.encoded.h.index_select(&idx, 0)?; // (n_rows, repr)
        let d_proj_w = dz.t()?.matmul(&h_rows)?; // (latent, repr)
        let d_proj_b = dz.sum(0)?; // (latent)
        let w = param(params, &self.proj_weight)?.detach(); // (latent, repr)
        let dh = dz.matmul(&w)?; // (n_rows, repr)
        let mut grads = self.encoder_backward(params, &features.encoded, rows, &dh)?;
        grads.push((self.proj_weight.clone(), d_proj_w));
        grads.push((self.proj_bias.clone(), d_proj_b));
        Ok(grads)
    }

    /// Shapes: obs (b, 9, 84, 84) u8 pixels -> h (b, 39200), the encoder f alone. With `keep`,
    /// the activations are kept for [`FeatureNet::encoder_backward`].
    pub fn encode(&self, params: &Params, obs: &[u8], b: usize, keep: bool) -> Result<Encoded> {
        let shapes = self.shapes(params)?;
        let in_len = shapes[0].in_len();
        if obs.len() != b * in_len {
            return Err(Error::Config(format!(
                "feature net: {} bytes of observations for {b} samples of {in_len}",
                obs.len()
            )));
        }
        let weights = self.conv_weights(params)?;
        let (h, tape) = encode_batch(self.kernel, &shapes, &weights, obs, b, keep);
        let repr = shapes[shapes.len() - 1].out_len();
        let h = Tensor::from_vec(h, (b, repr), &Device::Cpu)?; // (b, o·ho·wo)
        Ok(Encoded { h, tape })
    }

    /// The gradients of the conv parameters for the loss gradient `dh` (rows.len(), repr) of
    /// the samples `rows` of a kept [`FeatureNet::encode`].
    pub fn encoder_backward(
        &self,
        params: &Params,
        encoded: &Encoded,
        rows: &[usize],
        dh: &Tensor,
    ) -> Result<NamedGrads> {
        let tape = encoded.tape()?;
        let b = encoded.h.dim(0)?;
        row_index(rows, b)?;
        let n_rows = rows.len();
        let shapes = self.shapes(params)?;
        let weights = self.conv_weights(params)?;
        let repr = shapes[shapes.len() - 1].out_len();
        if dh.dims() != [n_rows, repr] {
            return Err(Error::Config(format!(
                "feature net: dh {:?} for {n_rows} rows of {repr} features",
                dh.dims()
            )));
        }
        let dh = dh.flatten_all()?.to_vec1::<f32>()?; // n_rows × repr, (C, H, W) order
        let grads = backward_batch(self.kernel, &shapes, &weights, tape, rows, &dh);
        let mut out = NamedGrads::new();
        for ((layer, (dw, db)), (w, _)) in self.layers.iter().zip(grads).zip(&weights) {
            let w_shape = param(params, &layer.weight)?.shape().clone();
            debug_assert_eq!(w.len(), dw.len());
            let b_len = db.len();
            out.push((layer.weight.clone(), Tensor::from_vec(dw, w_shape, &Device::Cpu)?));
            out.push((layer.bias.clone(), Tensor::from_vec(db, b_len, &Device::Cpu)?));
        }
        Ok(out)
    }

    /// Copies of the conv weights (o·c·9) and biases (o): 40 KB each, read once per call.
    fn conv_weights(&self, params: &Params) -> Result<Vec<(Vec<f32>, Vec<f32>)>> {
        self.layers
            .iter()
            .map(|l| {
                let w = param(params, &l.weight)?.flatten_all()?.to_vec1::<f32>()?;
                let b = param(params, &l.bias)?.to_vec1::<f32>()?;
                Ok((w, b))
            })
            .collect()
    }
}

/// The conv layers over a batch of images (b, c, h, w) of pixel values 0..=255 (u8 from the
/// sampler, f32 from a candle tensor): h (b, repr) in (C, H, W) order and, with `keep`, the
/// tape. `weights` are PyTorch's (o, c, 3, 3) and (o) per layer.
fn encode_batch<T: Copy + Into<f32> + Sync>(
    kernel: Kernel,
    shapes: &[Shape],
    weights: &[(Vec<f32>, Vec<f32>)],
    obs: &[T],
    b: usize,
    keep: bool,
) -> (Vec<f32>, Option<Tape>) {
    let wf: Vec<Vec<f32>> = weights
        .iter()
        .zip(shapes)
        .map(|((w, _), s)| conv_nhwc::weights_forward(w, s.o, s.c, s.o))
        .collect();
    let in_len = shapes[0].in_len();
    let last = shapes.len() - 1;
    let repr = shapes[last].out_len();
    let mut h = vec![0f32; b * repr]; // (b, o, ho, wo)

    // Per sample: the image scaled as candle's `obs / 255.0` (x · (1/255) in f32) and made
    // channels-last, every layer, and the last output back to (C, H, W) order.
    let run = |obs: &[T], x0: &mut [f32], acts: &mut [&mut [f32]], h_row: &mut [f32]| {
        let scale = (1.0f64 / 255.0) as f32;
        let (c, hw) = (shapes[0].c, shapes[0].h * shapes[0].w);
        for (ch, plane) in obs.chunks_exact(hw).enumerate() {
            for (p, &v) in plane.iter().enumerate() {
                x0[p * c + ch] = v.into() * scale;
            }
        }
        for (l, s) in shapes.iter().enumerate() {
            let (done, rest) = acts.split_at_mut(l);
            let input: &[f32] = if l == 0 { x0 } else { done[l - 1] };
            conv_nhwc::forward(kernel, s, input, &wf[l], Some(&weights[l].1), true, rest[0]);
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
    (h, tape)
}

/// Per layer, PyTorch-shaped (dw (o·c·9), db (o)) for the gradient `dh` (rows.len() × repr,
/// (C, H, W) order) of the samples `rows` of `tape`.
fn backward_batch(
    kernel: Kernel,
    shapes: &[Shape],
    weights: &[(Vec<f32>, Vec<f32>)],
    tape: &Tape,
    rows: &[usize],
    dh: &[f32],
) -> Vec<(Vec<f32>, Vec<f32>)> {
    let wg: Vec<Vec<f32>> = weights
        .iter()
        .zip(shapes)
        .map(|((w, _), s)| conv_nhwc::weights_input_grad(w, s.o, s.c, s.c))
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
                .map(|(w, b)| (vec![0f32; w.len()], vec![0f32; b.len()]))
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
            let (w_len, b_len) = (weights[l].0.len(), weights[l].1.len());
            let dw_kkco = sum_in_order(partials.iter().map(|p| p[l].0.clone()).collect(), w_len);
            let mut dw = vec![0f32; w_len]; // (o, c, 3, 3)
            conv_nhwc::add_weight_grad_to_torch(&dw_kkco, s.o, s.c, s.o, &mut dw);
            let db = sum_in_order(partials.iter().map(|p| p[l].1.clone()).collect(), b_len);
            (dw, db)
        })
        .collect()
}

/// The whole encoder as one candle op over (obs, the parameters packed in one vector), so that
/// `Encoder::forward` gets the tape's speed under candle's autograd: the forward keeps the tape
/// inside the op, the backward returns the packed parameters' gradient (candle's `cat`
/// backward hands each parameter its slice). No gradient for the image: `Encoder::forward`
/// uses the per-layer ops when the image itself tracks one.
struct EncoderOp {
    strides: Vec<usize>,
    /// Output channels per layer.
    channels: Vec<usize>,
    kernel: Kernel,
    /// Keep the tape for a backward (the parameters track a gradient).
    keep: bool,
    tape: Mutex<Option<(Vec<Shape>, Tape)>>,
}

impl EncoderOp {
    /// Per-layer shapes for a (b, c, h, w) input.
    fn shapes(&self, dims: &[usize]) -> candle_core::Result<Vec<Shape>> {
        let &[_, c, h, w] = dims else {
            candle_core::bail!("encoder: input must be (b, c, h, w), got {dims:?}")
        };
        let layers: Vec<(usize, usize)> = self
            .channels
            .iter()
            .copied()
            .zip(self.strides.iter().copied())
            .collect();
        match layer_shapes((c, h, w), &layers) {
            Some(shapes) => Ok(shapes),
            None => candle_core::bail!("encoder: input {dims:?} too small for {} layers", layers.len()),
        }
    }
}

/// The per-sample shapes of 3×3 conv layers `layers` = (output channels, stride) applied in
/// turn to an input (c, h, w); None when some layer's input is smaller than 3×3.
fn layer_shapes((mut c, mut h, mut w): (usize, usize, usize), layers: &[(usize, usize)]) -> Option<Vec<Shape>> {
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

/// (o·c·9, o) per layer from the packed parameters: weight then bias, layer after layer.
fn unpack(shapes: &[Shape], packed: &[f32]) -> candle_core::Result<Vec<(Vec<f32>, Vec<f32>)>> {
    let need: usize = shapes.iter().map(|s| s.o * s.c * 9 + s.o).sum();
    if packed.len() != need {
        candle_core::bail!("encoder: {} packed parameters, expected {need}", packed.len())
    }
    let mut at = 0;
    Ok(shapes
        .iter()
        .map(|s| {
            let w = packed[at..at + s.o * s.c * 9].to_vec();
            at += w.len();
            let b = packed[at..at + s.o].to_vec();
            at += b.len();
            (w, b)
        })
        .collect())
}

impl CustomOp2 for EncoderOp {
    fn name(&self) -> &'static str {
        "encoder-cpu"
    }

    fn cpu_fwd(
        &self,
        s1: &candle_core::CpuStorage,
        l1: &candle_core::Layout,
        s2: &candle_core::CpuStorage,
        l2: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        let (obs, packed) = (
            contiguous_f32(s1, l1, self.name())?,
            contiguous_f32(s2, l2, self.name())?,
        );
        let shapes = self.shapes(l1.dims())?;
        let weights = unpack(&shapes, packed)?;
        let b = l1.dims()[0];
        let (h, tape) = encode_batch(self.kernel, &shapes, &weights, obs, b, self.keep);
        let repr = shapes[shapes.len() - 1].out_len();
        if let Some(tape) = tape {
            *self
                .tape
                .lock()
                .map_err(|_| candle_core::Error::Msg("encoder: tape lock".into()))? = Some((shapes, tape));
        }
        Ok((candle_core::CpuStorage::F32(h), candle_core::Shape::from((b, repr))))
    }

    fn bwd(
        &self,
        obs: &Tensor,
        packed: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let guard = self
            .tape
            .lock()
            .map_err(|_| candle_core::Error::Msg("encoder: tape lock".into()))?;
        let Some((shapes, tape)) = guard.as_ref() else {
            candle_core::bail!("encoder: backward without a kept forward")
        };
        let weights = unpack(shapes, &packed.flatten_all()?.to_vec1::<f32>()?)?;
        let dh = grad.flatten_all()?.to_vec1::<f32>()?; // (b, repr)
        let rows: Vec<usize> = (0..obs.dim(0)?).collect();
        let grads = backward_batch(self.kernel, shapes, &weights, tape, &rows, &dh);
        let flat: Vec<f32> = grads
            .into_iter()
            .flat_map(|(dw, db)| dw.into_iter().chain(db))
            .collect();
        let n = flat.len();
        Ok((None, Some(Tensor::from_vec(flat, n, packed.device())?)))
    }
}

/// The encoder (conv layers with bias and ReLU; `layers` = (weight (o, c, 3, 3), bias (o),
/// stride)) over obs (b, c, h, w) of pixel values 0..=255 as one op: -> (b, o·ho·wo) in
/// (C, H, W) order. For the CPU, output channels a multiple of 16, and an image that tracks no
/// gradient.
pub(crate) fn encoder_op(obs: &Tensor, layers: &[(&Tensor, &Tensor, usize)]) -> Result<Tensor> {
    let (_, c, _, _) = obs.dims4()?;
    let c_w = layers.first().map_or(Ok(c), |l| l.0.dim(1))?;
    if c != c_w {
        return Err(Error::Config(format!(
            "encoder: the input has {c} channels, the first conv takes {c_w}"
        )));
    }
    let mut parts = Vec::with_capacity(2 * layers.len());
    for (w, b, _) in layers {
        parts.push(w.flatten_all()?);
        parts.push((*b).clone());
    }
    let packed = Tensor::cat(&parts, 0)?; // Σ (o·c·9 + o)
    let op = EncoderOp {
        strides: layers.iter().map(|l| l.2).collect(),
        channels: layers.iter().map(|l| l.0.dim(0)).collect::<candle_core::Result<_>>()?,
        kernel: Kernel::detect(),
        keep: packed.track_op(),
        tape: Mutex::new(None),
    };
    Ok(obs.contiguous()?.apply_op2(&packed, op)?)
}

/// `rows` as an index tensor, each checked < b.
fn row_index(rows: &[usize], b: usize) -> Result<Tensor> {
    if let Some(&bad) = rows.iter().find(|&&r| r >= b) {
        return Err(Error::Config(format!("feature net: row {bad} of a {b}-sample forward")));
    }
    let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
    Ok(Tensor::from_vec(idx, rows.len(), &Device::Cpu)?)
}

fn param<'a>(params: &'a Params, name: &str) -> Result<&'a Tensor> {
    params
        .get(name)
        .map(|v| v.as_tensor())
        .ok_or_else(|| Error::Config(format!("feature net: no parameter {name}")))
}
