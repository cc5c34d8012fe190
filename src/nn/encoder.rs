//! The conv encoder f (docs/design.md §4): Conv(9→32, 3×3, stride 2) ReLU, then 3 × [Conv(32→32,
//! 3×3, stride 1) ReLU], no padding: 84→41→39→37→35, flattened (C, H, W) → 39200.
//!
//! Input convention: raw pixel values 0..=255 as f32, 3 RGB frames stacked oldest first
//! (9, 84, 84); the encoder divides by 255 itself (Proto-RL's `Encoder.encode`), so the
//! exported PyTorch module takes the same input, and adds `input_offset` (0, or DrQ-v2's and
//! TACO's −0.5 for their end-to-end runs). Names `convnet.{0,2,4,6}.*` mirror a PyTorch
//! `nn.Sequential` whose odd indices are the ReLUs.
//!
//! One encoder, two ways to run it:
//! - [`Encoder::forward`] on a candle tensor, differentiable under candle's autograd (export,
//!   tests, any caller that wants a graph). On the CPU it is one op over our kernels.
//! - [`Encoder::encode`] on uint8 pixels, with what its backward needs kept for
//!   [`Encoder::backward`]: the pre-trainer's and the RL loop's path. With
//!   [`Compute::Kernels`] (the CPU) it keeps the activations and computes the parameters'
//!   gradients by hand (`kernels::tape`); with [`Compute::Candle`] (a GPU, or the CPU in the
//!   device tests) it runs candle's ops (cuDNN's convolutions in the CUDA build) outside any
//!   graph and keeps every layer's activations, and the backward gathers the rows it needs and
//!   runs each layer's gradients (`super::conv_layer::conv2d_bias_relu_grads`), as the tape does
//!   (a backward through candle's graph took 1.18× its time on an H200, BENCHMARKS.md "GPU").
//!
//! The encoder holds its parameters as tensors: views of a [`Params`] store's `Var`s when it is
//! trained (an optimiser step on the store is seen here), or plain tensors when it is frozen
//! ([`Encoder::from_tensors`]), which no optimiser can reach.

use std::collections::BTreeMap;

use candle_core::{DType, Device, Tensor};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::conv_layer;
use super::init::orthogonal;
use super::kernels::conv_nhwc::{Kernel, Shape, OB};
use super::kernels::conv_ops::conv2d_3x3_bias_relu;
use super::kernels::cpu_storage::host_f32;
use super::kernels::encoder_op::{encoder_op, ConvTensors};
use super::kernels::tape::{self, LayerWeights, Tape};
use super::params::expect_stored;
use super::Params;
use crate::device::{Backend, Compute};
use crate::{Error, Result};

/// Architecture of the conv encoder (the paper's table: channels (32,32,32,32), strides
/// (2,1,1,1), 3×3 filters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncoderConfig {
    /// Input channels: 3 RGB frames × frame stack 3 = 9.
    pub in_channels: usize,
    /// Square input size in pixels (84).
    pub image_size: usize,
    /// Filters in every conv layer (32; a multiple of 16 for the CPU kernels).
    pub num_filters: usize,
    /// Number of conv layers; the first has stride 2, the rest stride 1 (4).
    pub num_layers: usize,
    /// Orthogonal-init gain of the conv weights (√2, PyTorch's `calculate_gain('relu')`).
    pub conv_gain: f64,
    /// Added to `pixels / 255` before the first conv: 0 (Proto-RL's, the paper's encoder) or
    /// −0.5 (DrQ-v2's and TACO's `obs / 255.0 - 0.5`).
    pub input_offset: f64,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        Self {
            in_channels: 9,
            image_size: 84,
            num_filters: 32,
            num_layers: 4,
            conv_gain: std::f64::consts::SQRT_2,
            input_offset: 0.0,
        }
    }
}

impl EncoderConfig {
    /// Spatial size after the convs: (84 − 3)/2 + 1 = 41, then −2 per stride-1 layer → 35.
    pub fn output_size(&self) -> Result<usize> {
        let shapes = self.layer_shapes()?;
        Ok(shapes[shapes.len() - 1].ho())
    }

    /// Flattened conv output dimension (32·35·35 = 39200 for the paper's encoder).
    pub fn repr_dim(&self) -> Result<usize> {
        let shapes = self.layer_shapes()?;
        Ok(shapes[shapes.len() - 1].out_len())
    }

    /// Input channels of layer `layer`.
    fn layer_in_channels(&self, layer: usize) -> usize {
        if layer == 0 {
            self.in_channels
        } else {
            self.num_filters
        }
    }

    /// Every layer's per-sample shape for a square `image_size` input.
    fn layer_shapes(&self) -> Result<Vec<Shape>> {
        let layers: Vec<(usize, usize)> = (0..self.num_layers).map(|l| (self.num_filters, stride(l))).collect();
        let size = self.image_size;
        match tape::layer_shapes((self.in_channels, size, size), &layers) {
            Some(shapes) if !shapes.is_empty() => Ok(shapes),
            _ => Err(Error::Config(format!(
                "encoder: image_size {size} too small for {} layers",
                self.num_layers
            ))),
        }
    }
}

/// Stride 2 for the first layer, 1 after; no padding.
fn stride(layer: usize) -> usize {
    if layer == 0 {
        2
    } else {
        1
    }
}

/// The PyTorch name of conv layer `layer` under `prefix`: `{prefix}.convnet.{2·layer}` (the odd
/// `Sequential` indices are the ReLUs).
fn layer_name(prefix: &str, layer: usize) -> String {
    format!("{prefix}.convnet.{}", 2 * layer)
}

/// One conv layer: its name (without `.weight` / `.bias`), tensors and stride.
#[derive(Debug, Clone)]
struct ConvLayer {
    name: String,
    /// (o, c, 3, 3), PyTorch's layout.
    weight: Tensor,
    /// (o).
    bias: Tensor,
    stride: usize,
}

#[derive(Debug, Clone)]
pub struct Encoder {
    layers: Vec<ConvLayer>,
    /// Every layer's per-sample shape (for the kernels).
    shapes: Vec<Shape>,
    /// [`EncoderConfig::input_offset`].
    input_offset: f32,
    /// Our CPU kernels or candle's ops ([`Encoder::encode`], [`Encoder::forward`]).
    compute: Compute,
}

/// What [`Encoder::encode`] produced: h and, when asked for, what its backward needs.
pub struct Encoded {
    /// Flattened conv features (b, repr_dim), outside any graph.
    pub h: Tensor,
    tape: Option<Kept>,
}

/// What a kept [`Encoder::encode`] holds for [`Encoder::backward`].
pub(crate) enum Kept {
    /// The kernels' activations (host memory).
    Tape(Tape),
    /// Candle's ops without a graph, every layer's input and output kept: the scaled pixels
    /// (b, 9, 84, 84), then each layer's ReLU output (b, o, s, s). The backward gathers the
    /// rows it needs from them ([`Encoder::backward_kept`]), as the kernels' tape does on the CPU.
    Activations(Vec<Tensor>),
}

impl Encoded {
    /// Features computed without a tape (a candle forward); they have no hand-written backward.
    pub fn without_tape(h: Tensor) -> Self {
        Self { h, tape: None }
    }

    /// A copy on `device` of a forward that kept its activations ([`Kept::Activations`], candle's
    /// path): another device's encoder can run its backward on the same activations, and so the
    /// same ReLU masks (`examples/device_check.rs` holds a GPU's backward to the CPU's so; a
    /// forward that differs by rounding flips a few masks at a training batch, and with them the
    /// gradients by ~1e-3: `examples/relu_kink.rs`). An error for any other forward.
    pub fn to_device(&self, device: &Device) -> Result<Encoded> {
        match &self.tape {
            Some(Kept::Activations(activations)) => Ok(Encoded {
                h: self.h.to_device(device)?,
                tape: Some(Kept::Activations(
                    activations
                        .iter()
                        .map(|a| a.to_device(device))
                        .collect::<candle_core::Result<_>>()?,
                )),
            }),
            _ => Err(Error::Shape(
                "encoder: only a forward that kept its activations moves to another device".into(),
            )),
        }
    }

    /// What the forward kept, or an error if it did not keep anything.
    pub(crate) fn tape(&self) -> Result<&Kept> {
        self.tape
            .as_ref()
            .ok_or_else(|| Error::Shape("encoder: backward needs a forward with keep = true".into()))
    }
}

/// Gradients keyed by parameter name.
pub type NamedGrads = Vec<(String, Tensor)>;

impl Encoder {
    /// Registers `{prefix}.convnet.{2i}.weight/bias` in `params`: orthogonal weights, zero
    /// biases, on the store's device.
    pub fn new<R: Rng + ?Sized>(cfg: &EncoderConfig, prefix: &str, params: &mut Params, rng: &mut R) -> Result<Self> {
        cfg.layer_shapes()?;
        let device = params.device().clone();
        for layer in 0..cfg.num_layers {
            let (c_in, c_out) = (cfg.layer_in_channels(layer), cfg.num_filters);
            let name = layer_name(prefix, layer);
            // (out, in·3·3) orthogonal, reshaped to PyTorch's (out, in, kh, kw).
            let w = orthogonal(c_out, c_in * 9, cfg.conv_gain, rng)?;
            params.insert(
                &format!("{name}.weight"),
                Tensor::from_vec(w, (c_out, c_in, 3, 3), &device)?,
            )?;
            params.insert(&format!("{name}.bias"), Tensor::zeros(c_out, DType::F32, &device)?)?;
        }
        Self::from_params(cfg, prefix, params)
    }

    /// The encoder over parameters already in `params` (`{prefix}.convnet.{2i}.*`), e.g. a
    /// checkpoint's: it trains with them. Errors name a missing or mis-shaped tensor.
    pub fn from_params(cfg: &EncoderConfig, prefix: &str, params: &Params) -> Result<Self> {
        Self::build(cfg, prefix, params.backend().compute, |name, dims| {
            params.tensor(name, dims)
        })
    }

    /// The encoder over plain tensors (`{prefix}.convnet.{2i}.*` of `tensors`; other keys are
    /// ignored): constants that no optimiser can reach (a frozen encoder), computing as their
    /// device's default ([`Encoder::to_backend`] moves them).
    pub fn from_tensors(cfg: &EncoderConfig, prefix: &str, tensors: &BTreeMap<String, Tensor>) -> Result<Self> {
        let device = tensors.values().next().map_or(Device::Cpu, |t| t.device().clone());
        Self::build(cfg, prefix, Compute::for_device(&device), |name, dims| {
            Ok(expect_stored(name, dims, tensors.get(name), "")?.detach())
        })
    }

    /// A frozen copy of this encoder on `backend`: its tensors copied to the device, detached.
    pub fn to_backend(&self, backend: &Backend) -> Result<Self> {
        let mut moved = self.clone();
        for layer in &mut moved.layers {
            layer.weight = layer.weight.to_device(&backend.device)?.detach();
            layer.bias = layer.bias.to_device(&backend.device)?.detach();
        }
        moved.compute = backend.compute;
        Ok(moved)
    }

    /// How this encoder computes.
    pub fn compute(&self) -> Compute {
        self.compute
    }

    fn build(
        cfg: &EncoderConfig,
        prefix: &str,
        compute: Compute,
        get: impl Fn(&str, &[usize]) -> Result<Tensor>,
    ) -> Result<Self> {
        let shapes = cfg.layer_shapes()?;
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for layer in 0..cfg.num_layers {
            let (c_in, c_out) = (cfg.layer_in_channels(layer), cfg.num_filters);
            let name = layer_name(prefix, layer);
            layers.push(ConvLayer {
                weight: get(&format!("{name}.weight"), &[c_out, c_in, 3, 3])?,
                bias: get(&format!("{name}.bias"), &[c_out])?,
                stride: stride(layer),
                name,
            });
        }
        Ok(Self {
            layers,
            shapes,
            input_offset: cfg.input_offset as f32,
            compute,
        })
    }

    /// Every parameter name, in layer order (weight, bias).
    pub fn param_names(&self) -> Vec<String> {
        self.layers
            .iter()
            .flat_map(|l| [format!("{}.weight", l.name), format!("{}.bias", l.name)])
            .collect()
    }

    /// Every parameter tensor, in the order of [`Encoder::param_names`].
    pub fn param_tensors(&self) -> Vec<&Tensor> {
        self.layers.iter().flat_map(|l| [&l.weight, &l.bias]).collect()
    }

    /// Flattened output dimension (39200 for the paper's encoder).
    pub fn repr_dim(&self) -> usize {
        self.shapes[self.shapes.len() - 1].out_len()
    }

    /// Shapes: obs (b, 9, 84, 84) f32 in 0..=255 -> h (b, 39200), flattened (C, H, W).
    /// Differentiable in the parameters (and in `obs` when it tracks a gradient). With
    /// [`Compute::Kernels`] on the CPU the whole encoder is one op over channels-last kernels
    /// (`kernels::encoder_op`), per-layer conv ops when `obs` tracks a gradient; otherwise
    /// candle's conv2d.
    pub fn forward(&self, obs: &Tensor) -> Result<Tensor> {
        let kernels = self.compute == Compute::Kernels && obs.device().is_cpu();
        if !kernels {
            return self.forward_candle(obs);
        }
        let tiled = self.layers.iter().all(|l| l.weight.dim(0).is_ok_and(|o| o % OB == 0));
        if !obs.track_op() && tiled {
            // The whole encoder as one op over the tape's kernels (docs/design.md §10).
            let layers: Vec<ConvTensors> = self
                .layers
                .iter()
                .map(|l| ConvTensors {
                    weight: &l.weight,
                    bias: &l.bias,
                    stride: l.stride,
                })
                .collect();
            return encoder_op(obs, &layers, self.input_offset);
        }
        let mut h = scale_pixels(obs, self.input_offset)?;
        for layer in &self.layers {
            // Our per-layer conv ops (docs/design.md §10).
            h = conv2d_3x3_bias_relu(&h, &layer.weight, &layer.bias, layer.stride)?;
            // (b, 32, s, s)
        }
        let b = h.dim(0)?;
        Ok(h.reshape((b, ()))?) // (b, 32·35·35)
    }

    /// [`Encoder::forward`] through candle's conv2d, on any device ([`conv_layer`]).
    fn forward_candle(&self, obs: &Tensor) -> Result<Tensor> {
        let mut h = scale_pixels(obs, self.input_offset)?; // (b, 9, 84, 84)
        for layer in &self.layers {
            h = conv_layer::conv2d_bias_relu(&h, &layer.weight, &layer.bias, layer.stride)?;
            // (b, 32, s, s)
        }
        let b = h.dim(0)?;
        Ok(h.reshape((b, ()))?) // (b, 32·35·35)
    }

    /// [`EncoderConfig::input_offset`], added to pixels / 255.
    pub fn input_offset(&self) -> f32 {
        self.input_offset
    }

    /// [`Encoder::encode`] of pixels already in a tensor: obs (b, 9, 84, 84) u8 -> h (b, 39200),
    /// outside any graph, with what the backward needs when `keep`. candle's path takes them
    /// where they are (the replay's frames on the GPU); the kernels' path (the CPU) reads them to
    /// host memory first. The same `Encoded` as `encode` of the same bytes.
    pub fn encode_tensor(&self, obs: &Tensor, keep: bool) -> Result<Encoded> {
        if self.compute == Compute::Candle {
            let x = obs.to_device(self.layers[0].weight.device())?.to_dtype(DType::F32)?; // (b, 9, 84, 84)
            return self.encode_input(&scale_pixels(&x, self.input_offset)?, keep);
        }
        let b = obs.dim(0)?;
        self.encode(&obs.flatten_all()?.to_vec1::<u8>()?, b, keep)
    }

    /// [`Encoder::encode_tensor`] on candle's path from the input already scaled: x (b, 9, 84, 84)
    /// f32 = [`scale_pixels`] of the pixels (as `FrameStacks::gather_input` makes it on a GPU).
    /// The CPU's kernels take pixels: with [`Compute::Kernels`] an error.
    pub fn encode_input(&self, x: &Tensor, keep: bool) -> Result<Encoded> {
        if self.compute != Compute::Candle {
            return Err(Error::Shape(
                "encoder: the CPU's kernels take pixels, not a scaled input".into(),
            ));
        }
        // No graph: the activations are kept for the backward, or dropped here.
        let x = &x.to_device(self.layers[0].weight.device())?; // (b, 9, 84, 84)
        let activations = self.forward_kept(x)?;
        let last = activations.last().expect("the input at least");
        Ok(Encoded {
            h: last.reshape((x.dim(0)?, ()))?, // (b, repr)
            tape: keep.then_some(Kept::Activations(activations)),
        })
    }

    /// Shapes: obs (b, 9, 84, 84) u8 pixels (host memory) -> h (b, 39200) on the encoder's
    /// device, outside any graph. With `keep`, what [`Encoder::backward`] needs is kept.
    /// [`Compute::Kernels`]: the kernels, without candle's autograd; [`Compute::Candle`]:
    /// candle's conv2d, its graph kept.
    pub fn encode(&self, obs: &[u8], b: usize, keep: bool) -> Result<Encoded> {
        let in_len = self.shapes[0].in_len();
        if obs.len() != b * in_len {
            return Err(Error::Shape(format!(
                "encoder: {} bytes of observations for {b} samples of {in_len}",
                obs.len()
            )));
        }
        if self.compute == Compute::Candle {
            let first = &self.shapes[0];
            let x = Tensor::from_slice(obs, (b, first.c, first.h, first.w), self.layers[0].weight.device())?;
            return self.encode_tensor(&x, keep);
        }
        self.check_tiled()?;
        let weights = self.layer_weights()?;
        let encoded = tape::encode_batch(
            Kernel::detect(),
            &self.shapes,
            &weights,
            obs,
            b,
            keep,
            self.input_offset,
        );
        // The kernels run in host memory: h is a CPU tensor.
        let h = Tensor::from_vec(encoded.h, (b, self.repr_dim()), &Device::Cpu)?; // (b, o·ho·wo)
        Ok(Encoded {
            h,
            tape: encoded.tape.map(Kept::Tape),
        })
    }

    /// The gradients of the conv parameters for the loss gradient `dh` (rows.len(), repr) of
    /// the samples `rows` of a kept [`Encoder::encode`] (`dh` row i belongs to sample rows[i]; a
    /// sample may appear more than once).
    pub fn backward(&self, encoded: &Encoded, rows: &[usize], dh: &Tensor) -> Result<NamedGrads> {
        let kept = encoded.tape()?;
        check_rows(rows, encoded.h.dim(0)?)?;
        let repr = self.repr_dim();
        if dh.dims() != [rows.len(), repr] {
            return Err(Error::Shape(format!(
                "encoder: dh {:?} for {} rows of {repr} features",
                dh.dims(),
                rows.len()
            )));
        }
        let tape = match kept {
            Kept::Tape(tape) => tape,
            Kept::Activations(activations) => return self.backward_kept(activations, rows, dh),
        };
        // Read in place, not copied out (a copy was 20 MB of serial memcpy and page faults per
        // LFS update at B = 128: BENCHMARKS.md, "The LFS update's parts", its serial work).
        let dh = dh.contiguous()?;
        let (dh_storage, dh_layout) = dh.storage_and_layout();
        let dh = host_f32("encoder backward", &dh_storage, dh_layout, "dh", rows.len() * repr)?; // rows.len() × repr, (C, H, W) order
        let weights = self.layer_weights()?;
        let grads = tape::backward_batch(Kernel::detect(), &self.shapes, &weights, tape, rows, dh);
        let mut out = NamedGrads::new();
        for (layer, grad) in self.layers.iter().zip(grads) {
            let n_bias = grad.bias.len();
            let w_shape = layer.weight.shape().clone();
            out.push((
                format!("{}.weight", layer.name),
                Tensor::from_vec(grad.weight, w_shape, &Device::Cpu)?,
            ));
            out.push((
                format!("{}.bias", layer.name),
                Tensor::from_vec(grad.bias, n_bias, &Device::Cpu)?,
            ));
        }
        Ok(out)
    }

    /// [`Encoder::forward_candle`]'s layers outside any graph, keeping every layer's input and output:
    /// [the scaled input x (b, 9, 84, 84), layer 1's output (b, o, 41, 41), …, the last's
    /// (b, o, 35, 35)].
    fn forward_kept(&self, x: &Tensor) -> Result<Vec<Tensor>> {
        let mut activations = vec![x.clone()];
        for layer in &self.layers {
            let input = activations.last().expect("the input at least");
            let (w, b) = (layer.weight.detach(), layer.bias.detach());
            activations.push(conv_layer::conv2d_bias_relu(input, &w, &b, layer.stride)?);
            // (b, o, s, s)
        }
        Ok(activations)
    }

    /// [`Encoder::backward`] from [`Kept::Activations`]: each layer's input and output rows
    /// `rows` gathered (none when the rows are every sample in order), then the layers'
    /// gradients from the last to the first ([`conv_layer::conv2d_bias_relu_grads`]), the input
    /// gradient carried down to layer 1 and not computed for the pixels: the work of a backward
    /// of rows.len() samples (an LFS update's M of the 2M it encoded for LNC).
    fn backward_kept(&self, activations: &[Tensor], rows: &[usize], dh: &Tensor) -> Result<NamedGrads> {
        let first = &activations[0];
        let (device, b) = (first.device(), first.dim(0)?);
        let every = rows.len() == b && rows.iter().enumerate().all(|(i, &r)| i == r);
        let idx = match every {
            true => None,
            false => Some(row_index(rows, b, device)?),
        };
        let pick = |t: &Tensor| -> Result<Tensor> {
            Ok(match &idx {
                Some(idx) => t.index_select(idx, 0)?, // (rows, …)
                None => t.clone(),
            })
        };
        let mut output = pick(activations.last().expect("the input at least"))?; // (rows, o, s, s)
        let mut g = dh.detach().to_device(device)?.reshape(output.shape())?; // (rows, o, s, s)
        let mut per_layer = Vec::with_capacity(self.layers.len());
        for (l, layer) in self.layers.iter().enumerate().rev() {
            let input = pick(&activations[l])?; // (rows, c, h, w)
            let grads =
                conv_layer::conv2d_bias_relu_grads(&input, &layer.weight.detach(), &output, &g, layer.stride, l > 0)?;
            per_layer.push((layer, grads.weight, grads.bias));
            if let Some(dx) = grads.input {
                g = dx;
            }
            output = input;
        }
        let mut out = NamedGrads::new();
        for (layer, weight, bias) in per_layer.into_iter().rev() {
            out.push((format!("{}.weight", layer.name), weight));
            out.push((format!("{}.bias", layer.name), bias));
        }
        Ok(out)
    }

    /// The kernels tile output channels by 16.
    fn check_tiled(&self) -> Result<()> {
        match self.shapes.iter().find(|s| s.o % OB != 0) {
            Some(s) => Err(Error::Config(format!(
                "model.encoder.num_filters = {}: the pre-trainer's CPU conv kernels need a multiple of {OB}",
                s.o
            ))),
            None => Ok(()),
        }
    }

    /// Host copies of the conv weights (o·c·9) and biases (o): 40 KB each, read once per call,
    /// so updates of the parameters are always seen.
    fn layer_weights(&self) -> Result<Vec<LayerWeights>> {
        self.layers
            .iter()
            .map(|l| {
                Ok(LayerWeights {
                    weight: l.weight.flatten_all()?.to_vec1::<f32>()?,
                    bias: l.bias.to_vec1::<f32>()?,
                })
            })
            .collect()
    }
}

/// The encoder's input from pixels x (any shape, f32 values 0..=255): x / 255 + offset, as
/// candle's two affine ops (one when the offset is 0). `FrameStacks::gather_input`'s CUDA kernel
/// computes the same floats.
pub fn scale_pixels(x: &Tensor, offset: f32) -> Result<Tensor> {
    let h = (x / 255.0)?;
    Ok(match offset {
        0.0 => h,
        offset => (h + f64::from(offset))?,
    })
}

/// Errors unless every row is < b.
fn check_rows(rows: &[usize], b: usize) -> Result<()> {
    match rows.iter().find(|&&r| r >= b) {
        Some(bad) => Err(Error::Shape(format!("encoder: row {bad} of a {b}-sample forward"))),
        None => Ok(()),
    }
}

/// `rows` as an index tensor on `device`, each checked < b.
pub(crate) fn row_index(rows: &[usize], b: usize, device: &Device) -> Result<Tensor> {
    check_rows(rows, b)?;
    let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
    Ok(Tensor::from_vec(idx, rows.len(), device)?)
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::device::Backend;
    use crate::rl::written_out::test_support::worst_relative as rel_err;

    /// Sets every bias in `params` to uniform draws in [−0.3, 0.3).
    fn randomize_biases(params: &Params, rng: &mut ChaCha8Rng) {
        for (name, var) in params.iter() {
            if name.ends_with("bias") {
                let b: Vec<f32> = (0..var.elem_count()).map(|_| rng.random_range(-0.3..0.3)).collect();
                var.set(&Tensor::from_vec(b, var.shape(), &Device::Cpu).unwrap())
                    .unwrap();
            }
        }
    }

    /// Candle's autograd of Σ h[rows] ⊙ dh through the forward that gave `h_graph` (b, repr):
    /// each layer's weight and bias gradients, named and in order.
    fn graph_gradients(encoder: &Encoder, h_graph: &Tensor, rows: &[usize], dh: &Tensor) -> Vec<(String, Tensor)> {
        let idx = row_index(rows, h_graph.dim(0).unwrap(), &Device::Cpu).unwrap();
        let grads = h_graph
            .index_select(&idx, 0)
            .unwrap()
            .mul(dh)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        encoder
            .layers
            .iter()
            .flat_map(|l| {
                [
                    (format!("{}.weight", l.name), &l.weight),
                    (format!("{}.bias", l.name), &l.bias),
                ]
            })
            .map(|(name, p)| (name, grads.get(p).expect("a parameter's gradient").clone()))
            .collect()
    }

    #[test]
    fn the_kept_activations_give_the_graphs_gradients() {
        // candle's path on the CPU (the GPU's code): the backward from kept activations against
        // candle's autograd through the encoder's forward (the gradient of Σ h[rows] ⊙ dh), for
        // rows that are a few samples with one twice, every sample out of order, and every
        // sample in order (no gather).
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let cfg = EncoderConfig {
            image_size: 21,
            num_filters: 16,
            ..EncoderConfig::default()
        };
        let mut params = Params::new(Backend::candle(&Device::Cpu));
        let encoder = Encoder::new(&cfg, "encoder", &mut params, &mut rng).unwrap();
        randomize_biases(&params, &mut rng);
        let b = 6;
        let pixels: Vec<u8> = (0..b * 9 * 21 * 21).map(|_| rng.random()).collect();
        let x = Tensor::from_vec(pixels, (b, 9, 21, 21), &Device::Cpu)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap();
        let h_graph = encoder.forward_candle(&x).unwrap(); // (b, repr), with its graph
        let x = scale_pixels(&x, encoder.input_offset).unwrap();
        let activations = encoder.forward_kept(&x).unwrap();
        assert_eq!(activations.len(), cfg.num_layers + 1);
        let h_kept = activations.last().unwrap().reshape((b, ())).unwrap();
        assert_eq!(rel_err(&h_kept, &h_graph.detach()), 0.0);
        // Another device's encoder (here the kernels' on the CPU) runs the backward of a moved
        // copy: the same gradients. A forward without kept activations does not move.
        let encoded = encoder.encode_input(&x, true).unwrap().to_device(&Device::Cpu).unwrap();
        let kernels = Encoder::from_tensors(&cfg, "encoder", &params.snapshot().unwrap()).unwrap();
        assert_eq!(kernels.compute(), Compute::Kernels);
        let dh = Tensor::ones((2, encoder.repr_dim()), DType::F32, &Device::Cpu).unwrap();
        let moved = kernels.backward(&encoded, &[1, 3], &dh).unwrap();
        let here = encoder.backward_kept(&activations, &[1, 3], &dh).unwrap();
        for ((name, a), (_, b)) in moved.iter().zip(&here) {
            assert_eq!(rel_err(a, b), 0.0, "{name}");
        }
        let plain = Encoded::without_tape(h_kept.clone());
        assert!(plain.to_device(&Device::Cpu).is_err());
        for rows in [&[4usize, 1, 4][..], &[5, 4, 3, 2, 1, 0], &[0, 1, 2, 3, 4, 5]] {
            let dh: Vec<f32> = (0..rows.len() * encoder.repr_dim())
                .map(|_| rng.random_range(-1.0..1.0))
                .collect();
            let dh = Tensor::from_vec(dh, (rows.len(), encoder.repr_dim()), &Device::Cpu).unwrap();
            let kept = encoder.backward_kept(&activations, rows, &dh).unwrap();
            let graph = graph_gradients(&encoder, &h_graph, rows, &dh);
            assert_eq!(kept.len(), 2 * cfg.num_layers);
            for ((name, ours), (ref_name, expected)) in kept.iter().zip(&graph) {
                assert_eq!(name, ref_name);
                assert_eq!(ours.dims(), expected.dims(), "{name}");
                let err = rel_err(ours, expected);
                assert!(err < 1e-5, "rows {rows:?}, {name}: relative error {err}");
            }
        }
    }
}
