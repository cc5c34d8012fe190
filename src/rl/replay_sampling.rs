//! Which stored transitions a batch is drawn from (`[replay] sampling`, docs/design.md §6, §13).
//!
//! - `uniform` (the default, Proto-RL's replay): one uniform draw per sample over every stored
//!   transition whose window lies in its episode, the episode being recorded included.
//! - `drqv2`: DrQ-v2's replay loader (facebookresearch/drqv2 @c0c650b, `replay_buffer.py`:
//!   `ReplayBuffer._try_fetch`, `_sample` and `make_replay_loader`; TACO @84c38e3 uses the same
//!   file, its window max(nstep, multistep)) as a synchronous loop reproduces it:
//!   - only finished episodes are drawn (upstream's storage writes an episode when it ends);
//!   - four shards (the DataLoader's `num_workers = 4`): episode i belongs to shard i mod 4,
//!     and batch u comes whole from shard u mod 4 (each worker fills its own batches; the
//!     DataLoader hands them out in turn);
//!   - a shard refreshes what it holds before its first sample and then every 1000 of its own
//!     samples (`fetch_every = 1000`, the count starting at 1000), so a finished episode is drawn
//!     only from its shard's next refresh on, which may fall inside a batch;
//!   - each sample draws an episode uniformly among those its shard holds, then a step
//!     uniformly among the episode's valid ones (`_sample_episode`, `np.random.randint`).
//!
//!   What it leaves out, and why (docs/design.md §13): the workers' prefetching (each computes
//!   two batches ahead of the learner, at times the OS decides, so upstream's lag is not
//!   deterministic); each worker's own FIFO of capacity/4 transitions, trimmed at its refresh
//!   (the buffer's one FIFO keeps the newest episodes too, short of upstream's oldest by about
//!   one per shard, and drops an episode at once rather than at the shard's next refresh; of
//!   the DrQ-v2 and TACO pipelines only the medium groups' 3.1M-frame runs ever fill the
//!   buffer); the workers' random streams
//!   (numpy's and Python's, seeded per worker: not reproducible here). Upstream never meets a
//!   shard with no finished episode (its 4000 seed frames end four episodes, one per shard, before
//!   the first batch); shorter seed phases (the tiny configs) do: such a shard draws from every
//!   finished episode, and before any has finished from the episode being recorded.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::data::sampler::locate;
use crate::{Error, Result};

/// DrQ-v2's `replay_buffer_num_workers` (cfgs/config.yaml): the shards.
pub const DRQV2_SHARDS: usize = 4;
/// DrQ-v2's `fetch_every` (`make_replay_loader`): a shard's samples between refreshes.
pub const DRQV2_FETCH_EVERY: u64 = 1000;

/// `replay.sampling`: how a batch's transitions are drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplaySampling {
    /// Uniformly over every stored transition, the episode being recorded included.
    #[default]
    Uniform,
    /// DrQ-v2's loader: finished episodes, four shards in turn, each refreshed every 1000 of its
    /// samples.
    #[serde(rename = "drqv2")]
    DrQv2,
}

impl ReplaySampling {
    /// The name configs and messages use.
    pub fn name(self) -> &'static str {
        match self {
            ReplaySampling::Uniform => "uniform",
            ReplaySampling::DrQv2 => "drqv2",
        }
    }

    /// For `skip_serializing_if`: a config that does not choose writes nothing.
    pub fn is_uniform(&self) -> bool {
        *self == ReplaySampling::Uniform
    }
}

/// One shard of DrQ-v2's loader (one DataLoader worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderShard {
    /// Its samples since its last refresh (`_samples_since_last_fetch`).
    pub since_fetch: u64,
    /// Episodes finished at its last refresh: it holds those of its shard with a lower index.
    pub visible: u64,
}

/// DrQ-v2's loader: which shard draws the next batch, and what each shard holds. Its state is
/// counters only, so a checkpoint keeps it whole and a resumed run draws as an uninterrupted one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrQv2Loader {
    /// Batches drawn: the next comes from shard `batches mod 4`.
    pub batches: u64,
    pub shards: [LoaderShard; DRQV2_SHARDS],
}

impl Default for DrQv2Loader {
    fn default() -> Self {
        Self {
            batches: 0,
            // Upstream starts each count at fetch_every: a shard refreshes before its first sample.
            shards: [LoaderShard {
                since_fetch: DRQV2_FETCH_EVERY,
                visible: 0,
            }; DRQV2_SHARDS],
        }
    }
}

impl DrQv2Loader {
    /// Starts a batch: the shard it is drawn from.
    pub fn start_batch(&mut self) -> usize {
        let shard = (self.batches % DRQV2_SHARDS as u64) as usize;
        self.batches += 1;
        shard
    }

    /// One sample of `shard` when `finished` episodes have finished: the refresh first when 1000
    /// samples have passed since the last, then the count (`_sample`). The shard then holds its
    /// episodes (index ≡ shard mod 4) with an index below the bound returned.
    pub fn before_sample(&mut self, shard: usize, finished: u64) -> u64 {
        let s = &mut self.shards[shard];
        if s.since_fetch >= DRQV2_FETCH_EVERY {
            s.since_fetch = 0;
            s.visible = finished;
        }
        s.since_fetch += 1;
        s.visible
    }

    /// The stored episodes a sample of `shard` draws from when it holds those below `visible`:
    /// positions in the buffer, whose oldest stored episode has index `first` and whose newest is
    /// the one being recorded; `counts[e]` are episode e's valid steps (episodes without one are
    /// never drawn). A shard holding none falls back to every finished episode, and with none
    /// finished to the episode being recorded (see the module's notes).
    pub fn episodes(shard: usize, visible: u64, first: u64, counts: &[usize]) -> Vec<usize> {
        let finished = counts.len().saturating_sub(1);
        let drawable = |e: &usize| counts[*e] > 0;
        let held: Vec<usize> = (0..finished)
            .filter(|&e| {
                let index = first + e as u64;
                index < visible && index % DRQV2_SHARDS as u64 == shard as u64
            })
            .filter(drawable)
            .collect();
        if !held.is_empty() {
            return held;
        }
        let any_finished: Vec<usize> = (0..finished).filter(drawable).collect();
        if !any_finished.is_empty() {
            return any_finished;
        }
        (finished..counts.len()).filter(drawable).collect()
    }
}

/// The sampler a replay buffer draws with, and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sampler {
    Uniform,
    DrQv2(DrQv2Loader),
}

impl Sampler {
    pub fn new(sampling: ReplaySampling) -> Self {
        match sampling {
            ReplaySampling::Uniform => Sampler::Uniform,
            ReplaySampling::DrQv2 => Sampler::DrQv2(DrQv2Loader::default()),
        }
    }

    /// `n` draws (episode position, step) for one batch over stored episodes with `counts[e]`
    /// valid steps each, oldest first, the newest being recorded, the oldest of index `first`.
    /// `counts` sum to more than zero.
    pub fn draw<R: Rng + ?Sized>(
        &mut self,
        n: usize,
        counts: &[usize],
        first: u64,
        rng: &mut R,
    ) -> Result<Vec<(usize, usize)>> {
        let beyond = || Error::Shape("replay: transition index beyond the stored episodes".into());
        match self {
            Sampler::Uniform => {
                let total: usize = counts.iter().sum();
                // Invariant: each draw is < total, the sum of the counts.
                (0..n)
                    .map(|_| locate(counts, rng.random_range(0..total)).ok_or_else(beyond))
                    .collect()
            }
            Sampler::DrQv2(loader) => {
                let shard = loader.start_batch();
                let finished = first + counts.len().saturating_sub(1) as u64;
                let mut held: Option<(u64, Vec<usize>)> = None;
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    let visible = loader.before_sample(shard, finished);
                    if held.as_ref().is_none_or(|(v, _)| *v != visible) {
                        held = Some((visible, DrQv2Loader::episodes(shard, visible, first, counts)));
                    }
                    let episodes = held.as_ref().map(|(_, e)| e.as_slice()).unwrap_or_default();
                    // Invariant: the counts sum to more than zero, so some episode is drawable.
                    if episodes.is_empty() {
                        return Err(beyond());
                    }
                    let e = episodes[rng.random_range(0..episodes.len())];
                    out.push((e, rng.random_range(0..counts[e])));
                }
                Ok(out)
            }
        }
    }
}
