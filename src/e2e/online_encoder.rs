//! The encoder of `lfs train` (docs/design.md §7, the paper's Algorithm 1): trained online, one
//! update per agent step, by an auxiliary objective — the pre-trainer's [`Trainer`], reused as
//! it is — and read by SAC through detached features, so the SAC losses never reach it.
//!
//! The objective draws its pairs from the RL run itself ([`ReplayPairs`]):
//! - real pairs are the SAC batch's M transitions (O_t, O_{t+1}), as Algorithm 1 shares them;
//! - synthetic pairs are the frame-mask pairs of the replay's episodes: at every frame t ≥ 4 of
//!   a stored episode, the pair the 5-observation queue of Algorithm 1 yields at t
//!   ([`crate::data::ObservationQueue`]; tests/data.rs checks the two agree). Kept as positions
//!   in the replay's frames rather than a second copy (40000 pairs of two 9×84×84 stacks would
//!   take ~5 GB), so the auxiliary buffer holds the pairs of the episodes the replay holds,
//!   the seed frames included.

use candle_core::Tensor;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::data::{frame_mask_pair, PairBatch, PairKind, PairSource};
use crate::observation::{stack_frames, FRAME_SIZE, FRAME_STACK};
use crate::pretrain::{PretrainConfig, Trainer, UpdateMetrics};
use crate::rl::{ReplayBuffer, Transitions};
use crate::{Error, Result};

/// The online encoder and the objective that trains it.
pub struct OnlineEncoder {
    trainer: Trainer,
}

impl OnlineEncoder {
    /// Fresh networks from `cfg.run.seed`, as `lfs pretrain` would initialise them.
    pub fn new(cfg: &PretrainConfig) -> Result<Self> {
        let trainer = Trainer::new(cfg)?;
        Ok(Self { trainer })
    }

    /// Shapes: obs (n, 9, 84, 84) uint8 -> (n, repr) constants.
    pub fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor> {
        self.trainer.encode(obs, n)
    }

    pub fn repr_dim(&self) -> usize {
        self.trainer.repr_dim()
    }

    /// One update of the objective on the SAC batch `real` (unshifted: the objective shifts its
    /// own copy, as the pre-trainer does) and synthetic pairs from `replay`.
    pub fn update(&mut self, real: &Transitions, replay: &ReplayBuffer) -> Result<UpdateMetrics> {
        let obs_shape = (3 * FRAME_STACK, FRAME_SIZE, FRAME_SIZE);
        let mut source = ReplayPairs {
            real: PairBatch {
                prev: real.obs.clone(),
                cur: real.next_obs.clone(),
                len: real.len,
                obs_shape,
            },
            replay,
        };
        self.trainer.update(&mut source)
    }

    pub fn trainer(&self) -> &Trainer {
        &self.trainer
    }

    pub fn trainer_mut(&mut self) -> &mut Trainer {
        &mut self.trainer
    }
}

/// The pairs of one `lfs train` update: the SAC batch's real pairs and the replay's synthetic
/// ones.
struct ReplayPairs<'r> {
    /// The SAC batch as (O_t, O_{t+1}) pairs, unshifted.
    real: PairBatch,
    replay: &'r ReplayBuffer,
}

impl PairSource for ReplayPairs<'_> {
    fn sample_pairs(
        &mut self,
        kind: PairKind,
        _task: Option<usize>,
        n: usize,
        rng: &mut ChaCha8Rng,
    ) -> Result<PairBatch> {
        match kind {
            // The batch is a uniform draw already: its first n rows are one too.
            PairKind::Real if n <= self.real.len => Ok(self.real.select(&(0..n).collect::<Vec<_>>())),
            PairKind::Real => Err(Error::Shape(format!(
                "the objective asked for {n} real pairs, the SAC batch has {}",
                self.real.len
            ))),
            PairKind::Synthetic => synthetic_pairs(self.replay, n, rng, self.real.obs_shape),
        }
    }

    fn task_for_update(&self, _step: u64) -> Option<usize> {
        None
    }

    fn task_names(&self) -> Vec<String> {
        vec![]
    }
}

/// `n` frame-mask pairs drawn uniformly, with replacement, over every frame t ≥ 4 of every
/// episode in `replay` (the one being recorded included).
pub fn synthetic_pairs<R: Rng + ?Sized>(
    replay: &ReplayBuffer,
    n: usize,
    rng: &mut R,
    obs_shape: (usize, usize, usize),
) -> Result<PairBatch> {
    // Pairs per episode: frames 4 … num_frames − 1.
    let counts: Vec<usize> = replay
        .episodes()
        .iter()
        .map(|e| e.num_frames().saturating_sub(4))
        .collect();
    let total: usize = counts.iter().sum();
    if total == 0 {
        return Err(Error::Shape(
            "no synthetic pairs yet: no stored episode has 5 frames".to_string(),
        ));
    }
    let obs_len = obs_shape.0 * obs_shape.1 * obs_shape.2;
    let mut batch = PairBatch {
        prev: vec![0; n * obs_len],
        cur: vec![0; n * obs_len],
        len: n,
        obs_shape,
    };
    for i in 0..n {
        let mut k = rng.random_range(0..total);
        let e = counts
            .iter()
            .position(|&c| {
                let here = k < c;
                if !here {
                    k -= c;
                }
                here
            })
            .ok_or_else(|| Error::Shape("synthetic pair index out of range".to_string()))?;
        let episode = &replay.episodes()[e];
        let t = 4 + k;
        let frames = frame_mask_pair(t).ok_or_else(|| Error::Shape(format!("no synthetic pair ends at {t}")))?;
        stack_frames(episode, frames.prev, &mut batch.prev[i * obs_len..(i + 1) * obs_len]);
        stack_frames(episode, frames.cur, &mut batch.cur[i * obs_len..(i + 1) * obs_len]);
    }
    Ok(batch)
}
