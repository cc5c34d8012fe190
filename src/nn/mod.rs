//! Networks and their plumbing: the conv encoder, projector, predictor and prototypes of the
//! paper (SPEC §4), orthogonal init, the EMA target, Adam with savable moments, and
//! checkpoint io.
//!
//! Parameters live in a [`Params`] store (sorted names = PyTorch `state_dict` keys); modules
//! hold clones of the `Var`s, so an optimiser or EMA step that calls `Var::set` is seen by them.

pub mod adam;
pub mod checkpoint;
pub mod conv_cpu;
pub mod conv_nhwc;
mod cpu_storage;
pub mod ema;
pub mod encoder;
pub mod init;
pub mod params;
pub mod predictor;
pub mod projector;
pub mod prototypes;
pub mod tape;

pub use adam::{Adam, AdamConfig};
pub use encoder::{Encoder, EncoderConfig};
pub use params::Params;
pub use predictor::Predictor;
pub use projector::Projector;
pub use prototypes::Prototypes;
