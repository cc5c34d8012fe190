//! The pair sampler: real pairs `(O_{t-1}, O_t)` and frame-mask synthetic pairs, uniformly with
//! replacement, never across an episode boundary (every pair's frames come from one episode).
//! Multi-task data is batched round-robin by task (one task per update, the author's protocol)
//! or mixed (uniform over all pairs of all tasks).

use std::collections::BTreeMap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use candle_core::Device;

use super::device_stacks::FrameStore;
use super::episode_lengths::{MIN_FRAMES_FOR_REAL_PAIR, MIN_FRAMES_FOR_SYNTHETIC_PAIR};
use super::frame_mask::frame_mask_pair;
use super::pair_frames::{real_pair, PairFrames};
use super::pair_source::{PairBatch, PairKind, PairSource};
use crate::observation::FRAME_STACK;
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

/// Draws pair batches from in-memory episodes.
#[derive(Debug, Clone)]
pub struct PairSampler<'a> {
    episodes: &'a [Episode],
    tasks: Vec<TaskPairs>,
    cfg: SamplerConfig,
    /// (channels, height, width) of one stacked observation.
    obs_shape: (usize, usize, usize),
    /// The episodes' frames on a device, and each episode's first row there
    /// ([`PairSampler::keep_frames_on`]).
    on_device: Option<(FrameStore, Vec<usize>)>,
    /// Why the frames stayed on the host when a device was asked to keep them.
    refused: Option<String>,
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
            on_device: None,
            refused: None,
        })
    }

    /// Copies every episode's frames to `device` (once), so that a batch is made there by one
    /// gather when the encoder reads it, not stacked and shifted on the host and uploaded
    /// (issue 52). The draws, and so the batches' bytes, stay the same. Returns the bytes now
    /// held there.
    /// A device that cannot hold them (its memory) leaves the host's way in force, and
    /// [`PairSampler::describe_frames`] says why.
    pub fn keep_frames_on(&mut self, device: &Device) -> Result<usize> {
        let (_, h, w) = self.obs_shape;
        let parts: Vec<&[u8]> = self.episodes.iter().map(|e| &e.frames[..]).collect();
        match FrameStore::upload(&parts, (3, h, w), device) {
            Ok((store, firsts)) => {
                let bytes = store.bytes();
                self.on_device = Some((store, firsts));
                self.refused = None;
                Ok(bytes)
            }
            Err(e) => {
                let bytes: usize = parts.iter().map(|p| p.len()).sum();
                self.refused = Some(format!(
                    "{:.2} GB of frames refused by the device: {e}",
                    bytes as f64 / 1e9
                ));
                Err(e)
            }
        }
    }

    /// Keeps the host's way, for the reason `why` (a run's first message says it).
    pub fn keep_frames_on_host(&mut self, why: String) {
        self.on_device = None;
        self.refused = Some(why);
    }

    /// Where batches are made, for a run's first message.
    pub fn describe_frames(&self) -> String {
        match (&self.on_device, &self.refused) {
            (Some((store, _)), _) => format!("frames on the device: {}", size_text(store.bytes())),
            (None, Some(why)) => format!("frames on the host ({why})"),
            (None, None) => "frames on the host".to_string(),
        }
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
        let mut draw = || -> Result<PairIndex> {
            // Invariant: the draw is < total = the sum of the lengths, so some slice holds it.
            let (part, j) = locate(&lengths, rng.random_range(0..total))
                .ok_or_else(|| Error::Shape("pair sampler index out of range".to_string()))?;
            Ok(pool[part][j])
        };
        if let Some((store, firsts)) = &self.on_device {
            let picks = (0..n).map(|_| {
                let at = draw()?;
                let first = firsts[at.episode as usize];
                let frames = pair_frames(kind, at.t as usize)?;
                Ok(PairFrames {
                    prev: frames.prev.map(|f| first + f),
                    cur: frames.cur.map(|f| first + f),
                })
            });
            return PairBatch::of_frames(self.obs_shape, store, picks);
        }
        let picks = (0..n).map(|_| {
            let at = draw()?;
            Ok((&self.episodes[at.episode as usize], pair_frames(kind, at.t as usize)?))
        });
        PairBatch::stack(self.obs_shape, picks)
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

/// "1.23 GB", or "4.5 MB" under a gigabyte.
fn size_text(bytes: usize) -> String {
    match bytes as f64 {
        b if b >= 1e9 => format!("{:.2} GB", b / 1e9),
        b => format!("{:.1} MB", b / 1e6),
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
