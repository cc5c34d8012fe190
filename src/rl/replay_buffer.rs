//! The replay buffer (docs/design.md §6): each 84×84 frame is stored once, uint8, per episode,
//! and observations are stacked from it when sampled (docs/design.md §1), so 40000 transitions
//! take ~0.85 GB where storing both stacks per transition (Proto-RL) takes ~5 GB.
//!
//! An episode holds frames F_0 … F_n, actions a_0 … a_{n−1} and rewards r_0 … r_{n−1};
//! transition t is (O_t, a_t, r_t, O_{t+1}) with O_t = [F_{t−2}, F_{t−1}, F_t] clamped at the
//! episode start. A sample never crosses an episode boundary: both observations come from one
//! episode. Which transitions a batch draws is the buffer's [`ReplaySampling`]
//! (`replay.sampling`, src/rl/replay_sampling.rs): uniformly over every stored transition, the
//! episode being recorded included (the default), or as DrQ-v2's replay loader draws them.
//! With n-step returns ([`NStep`], DrQ-v2's `nstep`) a sample is (O_t, a_t, Σᵢ γⁱ r_{t+i},
//! γⁿ, O_{t+n}), drawn among the transitions whose n steps lie in their episode, as DrQ-v2's
//! replay draws them (replay_buffer.py `_sample`, facebookresearch/drqv2 @c0c650b);
//! n = 1 draws exactly what one-step sampling draws.
//! When the buffer holds more than `capacity` transitions, the oldest finished episodes go.
//! Episodes are numbered in the order they started, from 0, the dropped ones included.
//!
//! With the feature cache, each observation's encoder features are stored beside it when its
//! frame arrives (`set_features`), as f32 or f16 ([`FeatureDtype`]), and batches carry them
//! (as f32) instead of pixels.

use std::collections::VecDeque;

use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::feature_cache::{CachedFeatures, FeatureDtype};
use super::replay_sampling::{DrQv2Loader, ReplaySampling, Sampler};
use crate::observation::{stack_frames, stack_indices, StoredFrames, FRAME_STACK};
use crate::{Error, Result};

/// What a checkpoint keeps of one stored episode (features are recomputed).
#[derive(Debug, Clone, Default)]
pub struct StoredEpisode {
    /// F_0 … F_n, (3, h, w) each.
    pub frames: Vec<u8>,
    /// a_0 … a_{n−1}, A each.
    pub actions: Vec<f32>,
    /// r_0 … r_{n−1}.
    pub rewards: Vec<f32>,
}

/// One episode's frames, actions, rewards and (with the cache) observation features.
#[derive(Debug, Clone)]
pub struct EpisodeRecord {
    /// F_0 … F_n, (3, h, w) each.
    pub frames: Vec<u8>,
    /// a_0 … a_{n−1}, A each.
    pub actions: Vec<f32>,
    /// r_0 … r_{n−1}.
    pub rewards: Vec<f32>,
    /// Features of O_0 … O_n, repr each (feature cache only).
    pub features: CachedFeatures,
    frame_len: usize,
}

impl EpisodeRecord {
    /// Stored transitions: one per action.
    pub fn num_transitions(&self) -> usize {
        self.rewards.len()
    }

    pub fn num_frames(&self) -> usize {
        self.frames.len() / self.frame_len
    }
}

impl StoredFrames for EpisodeRecord {
    fn frame(&self, t: usize) -> &[u8] {
        &self.frames[t * self.frame_len..(t + 1) * self.frame_len]
    }
}

/// How a sample's target bootstraps: from O_{t+n}, after n rewards discounted by γ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NStep {
    /// Steps summed before bootstrapping (1: the one-step target).
    pub n: usize,
    /// γ.
    pub discount: f64,
}

/// A sampled batch: stacked observations (or their cached features), actions, n-step rewards
/// and discounts.
#[derive(Debug, Clone)]
pub struct Transitions {
    pub len: usize,
    /// O_t (len, 9, h, w) uint8; empty when features are cached (or kept by the caller).
    pub obs: Vec<u8>,
    /// O_{t+n}, what the target bootstraps from (O_{t+1} for one-step returns).
    pub next_obs: Vec<u8>,
    /// (len, repr) f32; empty without the cache.
    pub obs_features: Vec<f32>,
    pub next_obs_features: Vec<f32>,
    /// a_t (len, A).
    pub action: Vec<f32>,
    /// Σ_{i<n} γⁱ r_{t+i} (len): r_t for one-step returns.
    pub reward: Vec<f32>,
    /// γⁿ (len).
    pub discount: Vec<f32>,
    /// The n of the returns: `next_obs` is O_{t+n}.
    pub nstep: usize,
    /// a_t … a_{t+k−1} (len, k, A), and O_{t+k} (len, 9, h, w), for action sequences of k
    /// ([`ReplayBuffer::sample_with_sequence`]); empty otherwise.
    pub action_seq: Vec<f32>,
    pub seq_obs: Vec<u8>,
    /// (episode position in the buffer, t) of each transition, for tests and diagnostics (the
    /// episode's number is [`ReplayBuffer::first_episode`] + its position).
    pub locations: Vec<(usize, usize)>,
}

/// Σ_{i<n} γⁱ r_{t+i} of `rewards` (r_t … r_{t+n−1}) with `weights` γⁱ, in f64 then rounded
/// once; r_t itself for one-step returns.
fn nstep_reward(rewards: &[f32], weights: &[f64]) -> f32 {
    match rewards {
        [r] => *r,
        _ => rewards.iter().zip(weights).map(|(&r, w)| f64::from(r) * w).sum::<f64>() as f32,
    }
}

/// What a checkpoint keeps of the replay's sampling beside its episodes (`drqv2` sampling
/// only): the number of the oldest stored episode, and the loader's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplingState {
    pub first_episode: u64,
    pub loader: DrQv2Loader,
}

/// Stored episodes, oldest first.
#[derive(Debug, Clone)]
pub struct ReplayBuffer {
    capacity: usize,
    frame_len: usize,
    action_dim: usize,
    /// Features per observation with the cache, 0 without.
    feature_dim: usize,
    /// How the cache stores them.
    feature_dtype: FeatureDtype,
    episodes: VecDeque<EpisodeRecord>,
    num_transitions: usize,
    /// The number of the oldest stored episode: episodes dropped so far.
    first_episode: u64,
    /// How batches are drawn, and the sampler's state.
    sampler: Sampler,
    /// Whether batches without the cache carry stacked pixels (false: the caller keeps the
    /// observations on its device, as cached features or as frames, and gathers them at
    /// `locations`).
    pixels: bool,
}

impl ReplayBuffer {
    /// Holds about `capacity` transitions of (3·h·w)-byte frames and `action_dim` actions;
    /// `feature_dim` > 0 keeps that many features per observation (the feature cache) as
    /// `feature_dtype`.
    pub fn new(
        capacity: usize,
        frame_len: usize,
        action_dim: usize,
        feature_dim: usize,
        feature_dtype: FeatureDtype,
    ) -> Self {
        Self {
            capacity,
            frame_len,
            action_dim,
            feature_dim,
            feature_dtype,
            episodes: VecDeque::new(),
            num_transitions: 0,
            first_episode: 0,
            sampler: Sampler::Uniform,
            pixels: true,
        }
    }

    /// The buffer drawing batches without pixels: their `locations`, actions, rewards and
    /// discounts only, for a caller that keeps the observations itself (the feature cache on
    /// the device, [`DeviceFeatureCache`](super::DeviceFeatureCache), or the frames,
    /// [`DeviceFrames`](super::DeviceFrames)).
    pub fn without_pixels(mut self) -> Self {
        self.pixels = false;
        self
    }

    /// The buffer drawing batches as `sampling` says (uniformly without this).
    pub fn with_sampling(mut self, sampling: ReplaySampling) -> Self {
        self.sampler = Sampler::new(sampling);
        self
    }

    /// The number of the oldest stored episode (episodes dropped so far).
    pub fn first_episode(&self) -> u64 {
        self.first_episode
    }

    /// The sampler's state for a checkpoint; None with uniform sampling, which has none.
    pub fn sampling_state(&self) -> Option<SamplingState> {
        match &self.sampler {
            Sampler::Uniform => None,
            Sampler::DrQv2(loader) => Some(SamplingState {
                first_episode: self.first_episode,
                loader: loader.clone(),
            }),
        }
    }

    /// Restores a checkpoint's sampler state (after [`ReplayBuffer::restore`]).
    pub fn restore_sampling(&mut self, state: SamplingState) -> Result<()> {
        match &mut self.sampler {
            Sampler::Uniform => Err(Error::Shape(
                "replay: a sampler state for a buffer that samples uniformly".into(),
            )),
            Sampler::DrQv2(loader) => {
                *loader = state.loader;
                self.first_episode = state.first_episode;
                Ok(())
            }
        }
    }

    /// Transitions stored.
    /// The size of every stored action.
    pub fn action_dim(&self) -> usize {
        self.action_dim
    }

    pub fn len(&self) -> usize {
        self.num_transitions
    }

    pub fn is_empty(&self) -> bool {
        self.num_transitions == 0
    }

    pub fn episodes(&self) -> &VecDeque<EpisodeRecord> {
        &self.episodes
    }

    /// Bytes of frames held (what the capacity bounds).
    pub fn frame_bytes(&self) -> usize {
        self.episodes.iter().map(|e| e.frames.len()).sum()
    }

    /// Starts an episode with its first frame F_0 (3, h, w).
    pub fn start_episode(&mut self, first_frame: &[u8]) -> Result<()> {
        self.check_frame(first_frame)?;
        self.episodes.push_back(EpisodeRecord {
            frames: first_frame.to_vec(),
            actions: Vec::new(),
            rewards: Vec::new(),
            features: CachedFeatures::new(self.feature_dtype),
            frame_len: self.frame_len,
        });
        Ok(())
    }

    /// Adds the transition (a_t, r_t) of the current episode and its next frame F_{t+1}.
    pub fn add(&mut self, action: &[f32], reward: f32, next_frame: &[u8]) -> Result<()> {
        self.check_frame(next_frame)?;
        if action.len() != self.action_dim {
            return Err(Error::Shape(format!(
                "replay: an action of {} values, expected {}",
                action.len(),
                self.action_dim
            )));
        }
        let episode = self
            .episodes
            .back_mut()
            .ok_or_else(|| Error::Shape("replay: add before start_episode".into()))?;
        episode.frames.extend_from_slice(next_frame);
        episode.actions.extend_from_slice(action);
        episode.rewards.push(reward);
        self.num_transitions += 1;
        self.evict();
        Ok(())
    }

    /// Features of the current episode's newest observation (feature cache).
    pub fn set_features(&mut self, features: &[f32]) -> Result<()> {
        let dim = self.feature_dim;
        let episode = self
            .episodes
            .back_mut()
            .ok_or_else(|| Error::Shape("replay: features before start_episode".into()))?;
        if features.len() != dim || episode.features.len() != (episode.num_frames() - 1) * dim {
            return Err(Error::Shape(format!(
                "replay: {} features for observation {} (feature_dim {dim}, {} stored)",
                features.len(),
                episode.num_frames() - 1,
                episode.features.len() / dim.max(1)
            )));
        }
        episode.features.extend(features)
    }

    /// Features of the current episode's newest observation (feature cache), as f32.
    pub fn latest_features(&self) -> Option<Vec<f32>> {
        let episode = self.episodes.back()?;
        (self.feature_dim > 0 && !episode.features.is_empty()).then(|| episode.features.last(self.feature_dim))
    }

    /// The stacked observation O_t of the current episode's newest frame (9, h, w): what the
    /// agent acts on and what the cache encodes.
    pub fn latest_observation(&self) -> Option<Vec<u8>> {
        let episode = self.episodes.back()?;
        let t = episode.num_frames() - 1;
        let mut obs = vec![0u8; FRAME_STACK * self.frame_len];
        stack_frames(episode, stack_indices(t), &mut obs);
        Some(obs)
    }

    /// Drops the oldest finished episodes while more than `capacity` transitions are held.
    fn evict(&mut self) {
        while self.num_transitions > self.capacity && self.episodes.len() > 1 {
            if let Some(old) = self.episodes.pop_front() {
                self.num_transitions -= old.num_transitions();
                self.first_episode += 1;
            }
        }
    }

    fn check_frame(&self, frame: &[u8]) -> Result<()> {
        if frame.len() == self.frame_len {
            Ok(())
        } else {
            Err(Error::Shape(format!(
                "replay: a frame of {} bytes, expected {}",
                frame.len(),
                self.frame_len
            )))
        }
    }

    /// `n` transitions with replacement among the stored transitions whose `returns.n` steps
    /// lie in their episode, with their n-step rewards and discounts: uniformly over all of them,
    /// or as DrQ-v2's loader draws (the buffer's [`ReplaySampling`]; its newest episode is the
    /// one being recorded, as whenever the loop samples).
    pub fn sample<R: Rng + ?Sized>(&mut self, n: usize, returns: NStep, rng: &mut R) -> Result<Transitions> {
        self.sample_with_sequence(n, returns, 0, rng)
    }

    /// [`ReplayBuffer::sample`], each transition also with the `k` actions a_t … a_{t+k−1} and
    /// the observation O_{t+k} (TACO's action sequence and its future observation; pixels
    /// only), drawn over the transitions whose max(n, k) steps lie in their episode (TACO's
    /// replay). `k` = 0 is [`ReplayBuffer::sample`].
    pub fn sample_with_sequence<R: Rng + ?Sized>(
        &mut self,
        n: usize,
        returns: NStep,
        k: usize,
        rng: &mut R,
    ) -> Result<Transitions> {
        if returns.n == 0 {
            return Err(Error::Shape("replay: n-step returns need n >= 1".into()));
        }
        let cached = self.feature_dim > 0;
        let pixels = self.pixels && !cached;
        if !pixels && k > 0 {
            return Err(Error::Shape(
                "replay: action sequences are sampled with pixels, not with the feature cache".into(),
            ));
        }
        let counts = self.window_counts(returns.n.max(k))?;
        let obs_len = FRAME_STACK * self.frame_len;
        let a = self.action_dim;
        let mut out = Transitions {
            len: n,
            obs: if pixels { vec![0u8; n * obs_len] } else { Vec::new() },
            next_obs: if pixels { vec![0u8; n * obs_len] } else { Vec::new() },
            obs_features: Vec::with_capacity(if cached { n * self.feature_dim } else { 0 }),
            next_obs_features: Vec::with_capacity(if cached { n * self.feature_dim } else { 0 }),
            action: Vec::with_capacity(n * a),
            reward: Vec::with_capacity(n),
            discount: Vec::with_capacity(n),
            nstep: returns.n,
            action_seq: Vec::with_capacity(n * k * a),
            seq_obs: vec![0u8; if k > 0 { n * obs_len } else { 0 }],
            locations: Vec::with_capacity(n),
        };
        // γⁿ, and the weights γⁱ of the rewards, in f64 then rounded once.
        let weights: Vec<f64> = (0..returns.n).map(|i| returns.discount.powi(i as i32)).collect();
        let bootstrap_discount = returns.discount.powi(returns.n as i32) as f32;
        let drawn = self.sampler.draw(n, &counts, self.first_episode, rng)?;
        if pixels {
            self.stack_observations(&drawn, returns.n, k, &mut out);
        }
        for (e, t) in drawn {
            let episode = &self.episodes[e];
            let next = t + returns.n;
            if cached {
                let dim = self.feature_dim;
                if episode.features.len() < (next + 1) * dim {
                    return Err(Error::Shape(format!(
                        "replay: observation {next} of an episode has no features"
                    )));
                }
                episode
                    .features
                    .read_into(t * dim..(t + 1) * dim, &mut out.obs_features);
                episode
                    .features
                    .read_into(next * dim..(next + 1) * dim, &mut out.next_obs_features);
            }
            if k > 0 {
                out.action_seq.extend_from_slice(&episode.actions[t * a..(t + k) * a]);
            }
            out.action.extend_from_slice(&episode.actions[t * a..(t + 1) * a]);
            out.reward.push(nstep_reward(&episode.rewards[t..next], &weights));
            out.discount.push(bootstrap_discount);
            out.locations.push((e, t));
        }
        Ok(out)
    }

    /// Per stored episode, its transitions t with t + `window` <= its length (one per action
    /// for a window of 1); an error when no episode has any.
    fn window_counts(&self, window: usize) -> Result<Vec<usize>> {
        let counts: Vec<usize> = self
            .episodes
            .iter()
            .map(|e| (e.num_transitions() + 1).saturating_sub(window))
            .collect();
        let total: usize = counts.iter().sum();
        if total == 0 {
            return Err(Error::Shape(match self.num_transitions {
                0 => "replay: sampling from an empty buffer".to_string(),
                _ => format!("replay: no stored episode has {window} transitions for {window}-step samples"),
            }));
        }
        Ok(counts)
    }

    /// The pixels of the drawn transitions (episode, t): O_t, O_{t+n} and, for k > 0, O_{t+k},
    /// stacked into `out`'s buffers in parallel over samples (at B = 512, 2 × 32 MB of copies;
    /// sac/paper's step spent 16 ms sampling on an H200's host; same bytes as one after another).
    fn stack_observations(&self, drawn: &[(usize, usize)], n: usize, k: usize, out: &mut Transitions) {
        let obs_len = FRAME_STACK * self.frame_len;
        let episodes = &self.episodes;
        out.obs
            .par_chunks_mut(obs_len)
            .zip(out.next_obs.par_chunks_mut(obs_len))
            .zip(drawn.par_iter())
            .for_each(|((obs, next_obs), &(e, t))| {
                stack_frames(&episodes[e], stack_indices(t), obs);
                stack_frames(&episodes[e], stack_indices(t + n), next_obs);
            });
        if k > 0 {
            out.seq_obs
                .par_chunks_mut(obs_len)
                .zip(drawn.par_iter())
                .for_each(|(seq_obs, &(e, t))| stack_frames(&episodes[e], stack_indices(t + k), seq_obs));
        }
    }

    /// Replaces the contents with `episodes` (a checkpoint's), features recomputed by the
    /// caller when the cache is on.
    pub fn restore(&mut self, episodes: Vec<StoredEpisode>) -> Result<()> {
        self.episodes.clear();
        self.num_transitions = 0;
        self.first_episode = 0;
        for StoredEpisode {
            frames,
            actions,
            rewards,
        } in episodes
        {
            let record = EpisodeRecord {
                frames,
                actions,
                rewards,
                features: CachedFeatures::new(self.feature_dtype),
                frame_len: self.frame_len,
            };
            if !record.frames.len().is_multiple_of(self.frame_len)
                || record.num_frames() != record.num_transitions() + 1
                || record.actions.len() != record.num_transitions() * self.action_dim
            {
                return Err(Error::Shape(
                    "replay: a stored episode's frames, actions and rewards disagree".into(),
                ));
            }
            self.num_transitions += record.num_transitions();
            self.episodes.push_back(record);
        }
        Ok(())
    }

    /// With the cache: the stored observations of episode `e` that have no features yet, as
    /// stacked pixels (for the caller to encode and hand to [`ReplayBuffer::fill_features`]).
    pub fn observations_without_features(&self, e: usize) -> Vec<Vec<u8>> {
        let episode = &self.episodes[e];
        let have = episode.features.len() / self.feature_dim.max(1);
        (have..episode.num_frames())
            .map(|t| {
                let mut obs = vec![0u8; FRAME_STACK * self.frame_len];
                stack_frames(episode, stack_indices(t), &mut obs);
                obs
            })
            .collect()
    }

    /// Appends features to episode `e` (after [`ReplayBuffer::observations_without_features`]).
    pub fn fill_features(&mut self, e: usize, features: &[f32]) -> Result<()> {
        self.episodes[e].features.extend(features)
    }
}
