//! Where a pre-training update draws its pairs from: the frames of ingested videos
//! ([`super::PairSampler`], `lfs pretrain`), or the replay buffer of an RL run whose encoder
//! is trained online (`lfs train`, docs/design.md §7), as batches of stacked observations. The
//! trainer shifts what it is given.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::device_stacks::{FrameStacks, FrameStore, Stacks};
use super::pair_frames::PairFrames;
use super::random_shift::RandomShift;
use crate::observation::{stack_frames, StoredFrames};
use crate::{Error, Result};

/// Which pairs to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairKind {
    /// (O_{t-1}, O_t), t >= 1 (O_0 repeats frame 0).
    Real,
    /// Frame-mask pairs, t >= 4.
    Synthetic,
}

/// A batch of pairs as uint8 stacks, (len, 9, h, w) each, row-major: bytes in host memory, or
/// frames on the device ([`Stacks`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PairBatch {
    /// Previous observations (online branch).
    pub prev: Stacks,
    /// Current observations (target branch).
    pub cur: Stacks,
    pub len: usize,
    /// (channels, height, width) of one observation.
    pub obs_shape: (usize, usize, usize),
}

impl PairBatch {
    fn obs_len(&self) -> usize {
        self.obs_shape.0 * self.obs_shape.1 * self.obs_shape.2
    }

    /// The pairs at `indices`, in that order.
    pub fn select(&self, indices: &[usize]) -> PairBatch {
        let n = self.obs_len();
        PairBatch {
            prev: self.prev.select(indices, n),
            cur: self.cur.select(indices, n),
            len: indices.len(),
            obs_shape: self.obs_shape,
        }
    }

    /// `self` followed by `other` (same observation shape).
    pub fn concat(self, other: &PairBatch) -> Result<PairBatch> {
        if self.obs_shape != other.obs_shape {
            return Err(Error::Shape(format!(
                "pair batches of shapes {:?} and {:?}",
                self.obs_shape, other.obs_shape
            )));
        }
        Ok(PairBatch {
            prev: self.prev.concat(&other.prev)?,
            cur: self.cur.concat(&other.cur)?,
            len: self.len + other.len,
            obs_shape: self.obs_shape,
        })
    }

    /// Pairs stacked from stored frames (`obs_shape` each); pair i is the episode and frame
    /// indices of the i-th of `picks`. The picks are made in order (they may draw from an RNG),
    /// then the pairs are stacked over rayon's threads (LFS at M = 512 stacks 4 × 512
    /// observations, 130 MB, per update; the same bytes as one after another).
    pub fn stack<'e, E: StoredFrames + Sync + 'e>(
        obs_shape: (usize, usize, usize),
        picks: impl IntoIterator<Item = Result<(&'e E, PairFrames)>>,
    ) -> Result<PairBatch> {
        let obs_len = obs_shape.0 * obs_shape.1 * obs_shape.2;
        let picks = picks.into_iter().collect::<Result<Vec<_>>>()?;
        let n = picks.len();
        let (mut prev, mut cur) = (vec![0; n * obs_len], vec![0; n * obs_len]);
        prev.par_chunks_mut(obs_len)
            .zip(cur.par_chunks_mut(obs_len))
            .zip(picks.par_iter())
            .for_each(|((prev, cur), (episode, frames))| {
                stack_frames(*episode, frames.prev, prev);
                stack_frames(*episode, frames.cur, cur);
            });
        Ok(PairBatch {
            prev: Stacks::Host(prev),
            cur: Stacks::Host(cur),
            len: n,
            obs_shape,
        })
    }

    /// Pairs of frames kept in `store`: pair i is the i-th of `picks`, its frames as rows of the
    /// store. Nothing is stacked until the encoder reads them.
    pub fn of_frames(
        obs_shape: (usize, usize, usize),
        store: &FrameStore,
        picks: impl IntoIterator<Item = Result<PairFrames>>,
    ) -> Result<PairBatch> {
        let picks = picks.into_iter().collect::<Result<Vec<_>>>()?;
        let n = picks.len();
        Ok(PairBatch {
            prev: Stacks::Frames(FrameStacks::new(store, picks.iter().map(|p| p.prev).collect())),
            cur: Stacks::Frames(FrameStacks::new(store, picks.iter().map(|p| p.cur).collect())),
            len: n,
            obs_shape,
        })
    }

    /// Random shift on every previous and every current observation, independently.
    pub fn augment<R: Rng + ?Sized>(&mut self, shift: &RandomShift, rng: &mut R) -> Result<()> {
        let (c, h, w) = self.obs_shape;
        self.prev.shift(shift, (self.len, c, h, w), rng)?;
        self.cur.shift(shift, (self.len, c, h, w), rng)
    }
}

/// Where an update's pairs come from.
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
