//! From episodes to training pairs (SPEC §1–2): frame stacks, frame-mask synthetic pairs,
//! random-shift augmentation, and the pair sampler. Works on `&[Episode]` so tests can build
//! episodes in memory.

pub mod frame_mask;
pub mod frame_stack;
pub mod moving_squares;
pub mod random_shift;
pub mod sampler;

pub use frame_mask::frame_mask_pair;
pub use frame_stack::{real_pair, stack_frames, PairFrames, FRAME_STACK};
pub use random_shift::RandomShift;
pub use sampler::{PairBatch, PairKind, PairSampler, SamplerConfig, TaskBatching};
