//! Networks and their plumbing: the conv encoder, projector, predictor and prototypes of the
//! paper (docs/design.md §4), orthogonal init, the EMA target, Adam with savable moments, and
//! checkpoint io. The CPU kernels the encoder runs on live apart, in [`kernels`].
//!
//! Parameters live in a [`Params`] store (sorted names = PyTorch `state_dict` keys, one device);
//! modules hold views of the `Var`s, so an optimiser or EMA step on the store is seen by them.

pub mod adam;
pub(crate) mod adam_step;
pub mod checkpoint;
pub mod clip_grad;
pub mod conv_layer;
pub mod ema;
pub mod encoder;
pub mod encoder_file;
pub mod encoder_projector;
pub mod init;
pub mod kernels;
pub mod params;
pub mod predictor;
pub mod projector;
pub mod prototypes;

pub use adam::{Adam, AdamConfig};
pub use encoder::{Encoder, EncoderConfig};
pub use encoder_projector::EncoderProjector;
pub use params::Params;
pub use predictor::Predictor;
pub use projector::Projector;
pub use prototypes::Prototypes;
