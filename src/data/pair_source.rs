//! Where a pre-training update draws its pairs from: the frames of ingested videos
//! ([`super::PairSampler`], `lfs pretrain`), or the replay buffer of an RL run whose encoder
//! is trained online (`lfs train`, docs/design.md §7). The trainer shifts what it is given.

use rand_chacha::ChaCha8Rng;

use super::sampler::{PairBatch, PairKind};
use crate::Result;

pub trait PairSource {
    /// `n` unshifted pairs of `kind`, from task `task` when updates are batched by task.
    fn sample_pairs(
        &mut self,
        kind: PairKind,
        task: Option<usize>,
        n: usize,
        rng: &mut ChaCha8Rng,
    ) -> Result<PairBatch>;

    /// The task update `step` draws from; `None` draws from everything the source holds.
    fn task_for_update(&self, step: u64) -> Option<usize>;

    /// Task names, in the order [`PairSource::task_for_update`] indexes them.
    fn task_names(&self) -> Vec<String>;
}
