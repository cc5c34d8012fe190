//! The conv encoder f (SPEC §4): Conv(9→32, 3×3, stride 2) ReLU, then 3 × [Conv(32→32, 3×3,
//! stride 1) ReLU], no padding: 84→41→39→37→35, flattened (C, H, W) → 39200.
//!
//! Input convention: raw pixel values 0..=255 as f32, 3 RGB frames stacked oldest first
//! (9, 84, 84); the encoder divides by 255 itself (Proto-RL's `Encoder.encode`), so the
//! exported PyTorch module takes the same input. Names `convnet.{0,2,4,6}.*` mirror a PyTorch
//! `nn.Sequential` whose odd indices are the ReLUs.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Conv2d, Conv2dConfig};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::conv_cpu::{conv2d_3x3, conv2d_3x3_bias_relu};
use super::conv_nhwc::OB;
use super::init::orthogonal;
use super::tape::encoder_op;
use super::Params;
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
    /// Filters in every conv layer (32).
    pub num_filters: usize,
    /// Number of conv layers; the first has stride 2, the rest stride 1 (4).
    pub num_layers: usize,
    /// Orthogonal-init gain of the conv weights (√2, PyTorch's `calculate_gain('relu')`).
    pub conv_gain: f64,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        Self {
            in_channels: 9,
            image_size: 84,
            num_filters: 32,
            num_layers: 4,
            conv_gain: std::f64::consts::SQRT_2,
        }
    }
}

impl EncoderConfig {
    /// Spatial size after the convs: (84 − 3)/2 + 1 = 41, then −2 per stride-1 layer → 35.
    pub fn output_size(&self) -> Result<usize> {
        if self.image_size < 3 || self.num_layers == 0 {
            return Err(Error::Config(format!(
                "encoder: image_size {} / num_layers {} too small",
                self.image_size, self.num_layers
            )));
        }
        let mut s = (self.image_size - 3) / 2 + 1;
        for _ in 1..self.num_layers {
            if s < 3 {
                return Err(Error::Config(format!(
                    "encoder: image_size {} too small for {} layers",
                    self.image_size, self.num_layers
                )));
            }
            s -= 2;
        }
        Ok(s)
    }

    /// Flattened conv output dimension (32·35·35 = 39200 for the paper's encoder).
    pub fn repr_dim(&self) -> Result<usize> {
        let s = self.output_size()?;
        Ok(self.num_filters * s * s)
    }
}

#[derive(Debug, Clone)]
pub struct Encoder {
    convnet: Vec<Conv2d>,
}

/// Stride 2 for the first layer, 1 after; no padding.
fn conv_config(layer: usize) -> Conv2dConfig {
    Conv2dConfig {
        padding: 0,
        stride: if layer == 0 { 2 } else { 1 },
        dilation: 1,
        groups: 1,
        cudnn_fwd_algo: None,
    }
}

impl Encoder {
    /// Registers `{prefix}.convnet.{2i}.weight/bias` in `params`, orthogonal weights, zero biases.
    pub fn new<R: Rng + ?Sized>(cfg: &EncoderConfig, prefix: &str, params: &mut Params, rng: &mut R) -> Result<Self> {
        cfg.output_size()?;
        let device = Device::Cpu;
        let mut convnet = Vec::with_capacity(cfg.num_layers);
        for layer in 0..cfg.num_layers {
            let c_in = if layer == 0 { cfg.in_channels } else { cfg.num_filters };
            let c_out = cfg.num_filters;
            let name = format!("{prefix}.convnet.{}", 2 * layer);
            // (out, in·3·3) orthogonal, reshaped to PyTorch's (out, in, kh, kw).
            let w = orthogonal(c_out, c_in * 9, cfg.conv_gain, rng)?;
            let w = Tensor::from_vec(w, (c_out, c_in, 3, 3), &device)?;
            let w = params.insert(&format!("{name}.weight"), w)?;
            let b = params.insert(&format!("{name}.bias"), Tensor::zeros(c_out, DType::F32, &device)?)?;
            convnet.push(Conv2d::new(w, Some(b), conv_config(layer)));
        }
        Ok(Self { convnet })
    }

    /// The encoder over parameters already in `params` (`{prefix}.convnet.{2i}.*`), e.g. a
    /// checkpoint's; errors name a missing or mis-shaped tensor.
    pub fn from_params(cfg: &EncoderConfig, prefix: &str, params: &Params) -> Result<Self> {
        cfg.output_size()?;
        let mut convnet = Vec::with_capacity(cfg.num_layers);
        for layer in 0..cfg.num_layers {
            let c_in = if layer == 0 { cfg.in_channels } else { cfg.num_filters };
            let name = format!("{prefix}.convnet.{}", 2 * layer);
            let w = params.tensor(&format!("{name}.weight"), &[cfg.num_filters, c_in, 3, 3])?;
            let b = params.tensor(&format!("{name}.bias"), &[cfg.num_filters])?;
            convnet.push(Conv2d::new(w, Some(b), conv_config(layer)));
        }
        Ok(Self { convnet })
    }

    /// Shapes: obs (b, 9, 84, 84) f32 in 0..=255 -> h (b, 39200), flattened (C, H, W).
    /// Differentiable in the parameters (and in `obs` when it tracks a gradient). On the CPU the
    /// whole encoder is one op over channels-last kernels (`tape::encoder_op`); per-layer conv
    /// ops when `obs` tracks a gradient; candle's conv2d on other devices.
    pub fn forward(&self, obs: &Tensor) -> Result<Tensor> {
        let layers: Vec<(&Tensor, &Tensor, usize)> = self
            .convnet
            .iter()
            .filter_map(|conv| conv.bias().map(|b| (conv.weight(), b, conv.config().stride)))
            .collect();
        let tiled = layers.iter().all(|(w, _, _)| w.dim(0).is_ok_and(|o| o % OB == 0));
        if obs.device().is_cpu() && !obs.track_op() && tiled && layers.len() == self.convnet.len() {
            // The whole encoder as one op over the tape's kernels (SPEC §10).
            return encoder_op(obs, &layers);
        }
        let mut h = (obs / 255.0)?;
        for conv in &self.convnet {
            h = if h.device().is_cpu() {
                // Our per-layer conv ops (SPEC §10); other devices keep candle's conv2d.
                let (w, stride) = (conv.weight(), conv.config().stride); // w (32, c_in, 3, 3)
                match conv.bias() {
                    Some(bias) => conv2d_3x3_bias_relu(&h, w, bias, stride)?,
                    None => conv2d_3x3(&h, w, stride)?.relu()?,
                }
            } else {
                conv.forward(&h)?.relu()?
            }; // (b, 32, s, s)
        }
        let b = h.dim(0)?;
        Ok(h.reshape((b, ()))?) // (b, 32·35·35)
    }
}
