//! The pair sampler: real pairs `(O_{t-1}, O_t)` and frame-mask synthetic pairs, uniformly with
//! replacement, never across an episode boundary (every pair's frames come from one episode).
//! Multi-task data is batched round-robin by task (one task per update, the author's protocol)
//! or mixed (uniform over all pairs of all tasks).

use std::collections::BTreeMap;

use candle_core::{DType, Device, Tensor};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::episode_lengths::{MIN_FRAMES_FOR_REAL_PAIR, MIN_FRAMES_FOR_SYNTHETIC_PAIR};
use super::frame_mask::frame_mask_pair;
use super::pair_frames::{real_pair, PairFrames};
use super::pair_source::PairSource;
use super::random_shift::RandomShift;
use crate::observation::{stack_frames, StoredFrames, FRAME_STACK};
use crate::shards::Episode;
use crate::{Error, Result};

/// How multi-task batches are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskBatching {
    /// Update u draws every pair from task u mod T (tasks sorted by name).
    RoundRobin,
    /// Every pair is drawn uniformly from the pairs of all tasks.
    Mixed,
}

/// Which pairs to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairKind {
    /// (O_{t-1}, O_t), t >= 1 (O_0 repeats frame 0).
    Real,
    /// Frame-mask pairs, t >= 4.
    Synthetic,
}

/// Sampler settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    pub task_batching: TaskBatching,
}

/// A pair's location: episode (index into the slice) and the frame t it ends at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PairIndex {
    episode: u32,
    t: u32,
}

#[derive(Debug, Clone)]
struct TaskPairs {
    name: String,
    real: Vec<PairIndex>,
    synthetic: Vec<PairIndex>,
}

/// A batch of pairs as uint8 stacks, (len, 9, h, w) each, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct PairBatch {
    /// Previous observations (online branch).
    pub prev: Vec<u8>,
    /// Current observations (target branch).
    pub cur: Vec<u8>,
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
        let gather = |src: &[u8]| {
            let mut out = Vec::with_capacity(indices.len() * n);
            for &i in indices {
                out.extend_from_slice(&src[i * n..(i + 1) * n]);
            }
            out
        };
        PairBatch {
            prev: gather(&self.prev),
            cur: gather(&self.cur),
            len: indices.len(),
            obs_shape: self.obs_shape,
        }
    }

    /// `self` followed by `other` (same observation shape).
    pub fn concat(mut self, other: &PairBatch) -> Result<PairBatch> {
        if self.obs_shape != other.obs_shape {
            return Err(Error::Shape(format!(
                "pair batches of shapes {:?} and {:?}",
                self.obs_shape, other.obs_shape
            )));
        }
        self.prev.extend_from_slice(&other.prev);
        self.cur.extend_from_slice(&other.cur);
        self.len += other.len;
        Ok(self)
    }

    /// `n` pairs stacked from stored frames (`obs_shape` each); pair i is the episode and frame
    /// indices of the i-th call of `pick`.
    pub fn stack<'e, E: StoredFrames + 'e>(
        n: usize,
        obs_shape: (usize, usize, usize),
        mut pick: impl FnMut() -> Result<(&'e E, PairFrames)>,
    ) -> Result<PairBatch> {
        let obs_len = obs_shape.0 * obs_shape.1 * obs_shape.2;
        let mut batch = PairBatch {
            prev: vec![0; n * obs_len],
            cur: vec![0; n * obs_len],
            len: n,
            obs_shape,
        };
        for i in 0..n {
            let (episode, frames) = pick()?;
            stack_frames(episode, frames.prev, &mut batch.prev[i * obs_len..(i + 1) * obs_len]);
            stack_frames(episode, frames.cur, &mut batch.cur[i * obs_len..(i + 1) * obs_len]);
        }
        Ok(batch)
    }

    /// Random shift on every previous and every current observation, independently.
    pub fn augment<R: Rng + ?Sized>(&mut self, shift: &RandomShift, rng: &mut R) {
        let (c, h, w) = self.obs_shape;
        shift.apply_batch(&mut self.prev, (self.len, c, h, w), rng);
        shift.apply_batch(&mut self.cur, (self.len, c, h, w), rng);
    }

    /// Shapes: -> (len, 9, h, w) f32 pixel values 0..=255, on `device`.
    pub fn prev_tensor(&self, device: &Device) -> Result<Tensor> {
        to_tensor(&self.prev, self.len, self.obs_shape, device)
    }

    /// Shapes: -> (len, 9, h, w) f32 pixel values 0..=255, on `device`.
    pub fn cur_tensor(&self, device: &Device) -> Result<Tensor> {
        to_tensor(&self.cur, self.len, self.obs_shape, device)
    }
}

/// uint8 stacks (n, c, h, w) -> f32 tensor of the same shape on `device`, values unchanged.
pub fn to_tensor(data: &[u8], n: usize, (c, h, w): (usize, usize, usize), device: &Device) -> Result<Tensor> {
    Ok(Tensor::from_slice(data, (n, c, h, w), device)?.to_dtype(DType::F32)?)
}

/// Draws pair batches from in-memory episodes.
#[derive(Debug, Clone)]
pub struct PairSampler<'a> {
    episodes: &'a [Episode],
    tasks: Vec<TaskPairs>,
    cfg: SamplerConfig,
    /// (channels, height, width) of one stacked observation.
    obs_shape: (usize, usize, usize),
}

impl<'a> PairSampler<'a> {
    /// Indexes every real and synthetic pair of `episodes`, grouped by task name.
    pub fn new(episodes: &'a [Episode], cfg: SamplerConfig) -> Result<Self> {
        let first = episodes
            .first()
            .ok_or_else(|| Error::Shape("no episodes to sample from".to_string()))?;
        let (h, w) = (first.height, first.width);
        let mut by_task: BTreeMap<String, TaskPairs> = BTreeMap::new();
        for (e, ep) in episodes.iter().enumerate() {
            // Datasets of different frame sizes: the user's `data.datasets` do not fit together.
            if (ep.height, ep.width) != (h, w) {
                return Err(Error::Config(format!(
                    "episode {} of task {} is {}x{}, episode {} of task {} is {h}x{w}",
                    ep.episode_index, ep.task, ep.height, ep.width, first.episode_index, first.task
                )));
            }
            if ep.frames.len() != ep.num_frames * 3 * h * w {
                return Err(Error::Shape(format!(
                    "episode {} of task {}: {} bytes of frames for {} frames of 3x{h}x{w}",
                    ep.episode_index,
                    ep.task,
                    ep.frames.len(),
                    ep.num_frames
                )));
            }
            let entry = by_task.entry(ep.task.clone()).or_insert_with(|| TaskPairs {
                name: ep.task.clone(),
                real: vec![],
                synthetic: vec![],
            });
            for t in 0..ep.num_frames {
                let at = PairIndex {
                    episode: e as u32,
                    t: t as u32,
                };
                if real_pair(t).is_some() {
                    entry.real.push(at);
                }
                if frame_mask_pair(t).is_some() {
                    entry.synthetic.push(at);
                }
            }
        }
        let tasks: Vec<TaskPairs> = by_task.into_values().collect();
        Ok(Self {
            episodes,
            tasks,
            cfg,
            obs_shape: (3 * FRAME_STACK, h, w),
        })
    }

    /// Task names, sorted (the round-robin order).
    pub fn task_names(&self) -> Vec<String> {
        self.tasks.iter().map(|t| t.name.clone()).collect()
    }

    /// (channels, height, width) of one observation.
    pub fn obs_shape(&self) -> (usize, usize, usize) {
        self.obs_shape
    }

    /// Number of (real, synthetic) pairs over all tasks.
    pub fn num_pairs(&self) -> (usize, usize) {
        self.tasks
            .iter()
            .fold((0, 0), |(r, s), t| (r + t.real.len(), s + t.synthetic.len()))
    }

    /// The task update `step` draws from: `Some(index)` round-robin, `None` when mixed.
    pub fn task_for_update(&self, step: u64) -> Option<usize> {
        match self.cfg.task_batching {
            TaskBatching::RoundRobin => Some((step % self.tasks.len() as u64) as usize),
            TaskBatching::Mixed => None,
        }
    }

    /// Draws `n` pairs of `kind` uniformly with replacement from `task` (or from all tasks).
    pub fn sample<R: Rng + ?Sized>(
        &self,
        kind: PairKind,
        task: Option<usize>,
        n: usize,
        rng: &mut R,
    ) -> Result<PairBatch> {
        let pool: Vec<&[PairIndex]> = match task {
            Some(i) => {
                let t = self
                    .tasks
                    .get(i)
                    .ok_or_else(|| Error::Shape(format!("task index {i} out of range")))?;
                vec![pick(t, kind)]
            }
            None => self.tasks.iter().map(|t| pick(t, kind)).collect(),
        };
        let total: usize = pool.iter().map(|p| p.len()).sum();
        if total == 0 {
            let which = task
                .map(|i| self.tasks[i].name.clone())
                .unwrap_or_else(|| "any task".to_string());
            let need = match kind {
                PairKind::Real => MIN_FRAMES_FOR_REAL_PAIR,
                PairKind::Synthetic => MIN_FRAMES_FOR_SYNTHETIC_PAIR,
            };
            // The user's datasets are too short for the configured objective.
            return Err(Error::Config(format!(
                "no {kind:?} pairs in {which}: episodes need at least {need} frames"
            )));
        }
        let lengths: Vec<usize> = pool.iter().map(|p| p.len()).collect();
        PairBatch::stack(n, self.obs_shape, || {
            // Invariant: the draw is < total = the sum of the lengths, so some slice holds it.
            let (part, j) = locate(&lengths, rng.random_range(0..total))
                .ok_or_else(|| Error::Shape("pair sampler index out of range".to_string()))?;
            let at = pool[part][j];
            Ok((&self.episodes[at.episode as usize], pair_frames(kind, at.t as usize)?))
        })
    }
}

/// Index `k` of the concatenation of parts of `lengths`, as (part, index within it); `None`
/// past the end.
pub fn locate(lengths: &[usize], mut k: usize) -> Option<(usize, usize)> {
    for (part, &len) in lengths.iter().enumerate() {
        if k < len {
            return Some((part, k));
        }
        k -= len;
    }
    None
}

impl PairSource for PairSampler<'_> {
    fn sample_pairs(
        &mut self,
        kind: PairKind,
        task: Option<usize>,
        n: usize,
        rng: &mut ChaCha8Rng,
    ) -> Result<PairBatch> {
        self.sample(kind, task, n, rng)
    }

    fn task_for_update(&self, step: u64) -> Option<usize> {
        PairSampler::task_for_update(self, step)
    }

    fn task_names(&self) -> Vec<String> {
        PairSampler::task_names(self)
    }
}

fn pick(t: &TaskPairs, kind: PairKind) -> &[PairIndex] {
    match kind {
        PairKind::Real => &t.real,
        PairKind::Synthetic => &t.synthetic,
    }
}

fn pair_frames(kind: PairKind, t: usize) -> Result<PairFrames> {
    let frames = match kind {
        PairKind::Real => real_pair(t),
        PairKind::Synthetic => frame_mask_pair(t),
    };
    frames.ok_or_else(|| Error::Shape(format!("no {kind:?} pair ends at frame {t}")))
}
