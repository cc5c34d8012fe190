//! From episodes to training pairs (docs/design.md §1–2): real and frame-mask synthetic pairs (frame
//! stacking itself is [`crate::observation`]), random-shift augmentation, and the pair
//! sampler. Works on `&[Episode]` so tests can build episodes in memory.

pub mod device_stacks;
pub mod episode_lengths;
pub mod frame_mask;
pub mod moving_squares;
pub mod pair_frames;
pub mod pair_source;
pub mod random_shift;
pub mod sampler;

pub use device_stacks::{FrameStacks, FrameStore, Stacks};
pub use episode_lengths::{episode_lengths, TaskEpisodeLengths};
pub use frame_mask::frame_mask_pair;
pub use pair_frames::{real_pair, PairFrames};
pub use pair_source::{PairBatch, PairKind, PairSource};
pub use random_shift::RandomShift;
pub use sampler::{PairSampler, SamplerConfig, TaskBatching};
