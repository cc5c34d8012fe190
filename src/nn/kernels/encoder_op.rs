//! The whole encoder as one candle op over (obs, the parameters packed in one vector), so that
//! `Encoder::forward` gets the tape's speed under candle's autograd: the forward keeps the tape
//! inside the op, the backward returns the packed parameters' gradient (candle's `cat`
//! backward hands each parameter its slice). No gradient for the image: `Encoder::forward`
//! uses the per-layer ops of [`super::conv_ops`] when the image itself tracks one.

use std::sync::Mutex;

use candle_core::{CustomOp2, Tensor};

use super::conv_nhwc::{Kernel, Shape};
use super::cpu_storage::contiguous_f32;
use super::tape::{backward_batch, encode_batch, layer_shapes, LayerWeights, Tape};
use crate::{Error, Result};

/// One layer's tensors for [`encoder_op`]: weight (o, c, 3, 3), bias (o), stride.
#[derive(Debug, Clone, Copy)]
pub struct ConvTensors<'a> {
    pub weight: &'a Tensor,
    pub bias: &'a Tensor,
    pub stride: usize,
}

struct EncoderOp {
    strides: Vec<usize>,
    /// Output channels per layer.
    channels: Vec<usize>,
    kernel: Kernel,
    /// Added to `pixels / 255` ([`crate::nn::EncoderConfig::input_offset`]).
    offset: f32,
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

/// Per layer from the packed parameters: weight then bias, layer after layer.
fn unpack(shapes: &[Shape], packed: &[f32]) -> candle_core::Result<Vec<LayerWeights>> {
    let need: usize = shapes.iter().map(|s| s.o * s.c * 9 + s.o).sum();
    if packed.len() != need {
        candle_core::bail!("encoder: {} packed parameters, expected {need}", packed.len())
    }
    let mut at = 0;
    Ok(shapes
        .iter()
        .map(|s| {
            let weight = packed[at..at + s.o * s.c * 9].to_vec();
            at += weight.len();
            let bias = packed[at..at + s.o].to_vec();
            at += bias.len();
            LayerWeights { weight, bias }
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
        let encoded = encode_batch(self.kernel, &shapes, &weights, obs, b, self.keep, self.offset);
        let repr = shapes[shapes.len() - 1].out_len();
        if let Some(tape) = encoded.tape {
            *self
                .tape
                .lock()
                .map_err(|_| candle_core::Error::Msg("encoder: tape lock".into()))? = Some((shapes, tape));
        }
        Ok((
            candle_core::CpuStorage::F32(encoded.h),
            candle_core::Shape::from((b, repr)),
        ))
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
            .flat_map(|g| g.weight.into_iter().chain(g.bias))
            .collect();
        let n = flat.len();
        Ok((None, Some(Tensor::from_vec(flat, n, packed.device())?)))
    }
}

/// The encoder (conv layers with bias and ReLU) over obs (b, c, h, w) of pixel values 0..=255,
/// scaled to `pixels / 255 + offset`, as one op: -> (b, o·ho·wo) in (C, H, W) order. For the
/// CPU, output channels a multiple of 16, and an image that tracks no gradient.
pub fn encoder_op(obs: &Tensor, layers: &[ConvTensors], offset: f32) -> Result<Tensor> {
    let (_, c, _, _) = obs.dims4()?;
    let c_w = layers.first().map_or(Ok(c), |l| l.weight.dim(1))?;
    if c != c_w {
        return Err(Error::Shape(format!(
            "encoder: the input has {c} channels, the first conv takes {c_w}"
        )));
    }
    let mut parts = Vec::with_capacity(2 * layers.len());
    for layer in layers {
        parts.push(layer.weight.flatten_all()?);
        parts.push(layer.bias.clone());
    }
    let packed = Tensor::cat(&parts, 0)?; // Σ (o·c·9 + o)
    let op = EncoderOp {
        strides: layers.iter().map(|l| l.stride).collect(),
        channels: layers
            .iter()
            .map(|l| l.weight.dim(0))
            .collect::<candle_core::Result<_>>()?,
        kernel: Kernel::detect(),
        offset,
        keep: packed.track_op(),
        tape: Mutex::new(None),
    };
    Ok(obs.contiguous()?.apply_op2(&packed, op)?)
}
