//! A batch's observations through the encoder and projector wherever the batch is: bytes in
//! host memory, or frames on the device gathered there (`crate::data::Stacks`). The objectives
//! own this step, so that `nn` knows nothing of `data`.

use crate::data::Stacks;
use crate::device::Compute;
use crate::nn::encoder_projector::{EncoderProjector, Features};
use crate::{Error, Result};

/// [`EncoderProjector::forward_pixels`] of `obs`, b samples, the activations kept for the
/// backward when `keep`.
pub fn forward_stacks(net: &EncoderProjector, obs: &Stacks, b: usize, keep: bool) -> Result<Features> {
    match obs {
        Stacks::Host(bytes) => net.forward_pixels(bytes, b, keep),
        // candle's path takes the input scaled by the gather itself (one pass on a GPU)
        Stacks::Frames(frames) if frames.len() == b && net.encoder.compute() == Compute::Candle => {
            let x = frames.gather_input(net.encoder.input_offset())?; // (b, 9, 84, 84) f32
            net.project(net.encoder.encode_input(&x, keep)?)
        }
        Stacks::Frames(frames) if frames.len() == b => net.project(net.encoder.encode_tensor(&frames.gather()?, keep)?),
        Stacks::Frames(frames) => Err(Error::Shape(format!(
            "encoder: {} observations on the device for {b} samples",
            frames.len()
        ))),
    }
}
