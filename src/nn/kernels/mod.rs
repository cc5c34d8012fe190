//! CPU kernels behind the encoder, apart from the paper's modules: register-tiled channels-last
//! 3×3 convolutions (`conv_nhwc`), per-layer candle ops over them (`conv_ops`), the whole
//! encoder's forward and hand-written backward over raw buffers (`tape`), the same as one candle
//! op (`encoder_op`), long narrow products split by rows (`row_split`), and the checked f32
//! slices behind candle's CPU storages (`cpu_storage`).
//! Nothing here knows parameter names; `crate::nn::Encoder` owns those.

pub mod conv_nhwc;
pub mod conv_ops;
pub(crate) mod cpu_storage;
pub mod encoder_op;
pub(crate) mod row_split;
pub mod tape;

/// Sample groups of the weight gradient's partial sums (fixed, so results are reproducible).
pub(crate) const GROUPS: usize = 16;

/// Σ of equal-length vectors, in the given order.
pub(crate) fn sum_in_order(parts: Vec<Vec<f32>>, len: usize) -> Vec<f32> {
    parts.into_iter().fold(vec![0f32; len], |mut acc, p| {
        acc.iter_mut().zip(&p).for_each(|(a, p)| *a += p);
        acc
    })
}
