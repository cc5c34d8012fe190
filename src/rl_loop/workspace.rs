//! The loop's state and one agent step of it (docs/design.md §6, §7): the two environments
//! (one trains, one evaluates), the agent, the replay buffer, the representation, the RNG and
//! the counters a checkpoint holds. Per agent step, as Proto-RL's and DrQ-v2's train loops:
//! choose the action (uniformly random during the seed frames), update on a sampled batch when
//! the agent updates at this step (the representation's auxiliary objective first, for `lfs
//! train`), step the environment, store the transition.

use std::path::Path;
use std::time::Instant;

use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::{Frames, LoopConfig};
use super::logs::{AuxLog, AuxMeans, EpisodeLog, EvalRow};
use super::representation::{CriticFeatures, Representation};
use super::stage::{LoopSpec, Stage};
use super::state_entropy::{state_entropy, STATE_ENTROPY_K};
use super::step_times::StepTimes;
use super::value_comparison::ValueComparison;
use crate::data::RandomShift;
use crate::env::{DmcConfig, EnvCommand, EnvPool, PoolReply, RenderQuality, TimeStep, FRAME_BYTES};
use crate::log_files::MetricsLog;
use crate::objectives::UpdateMetrics;
use crate::observation::{env_frame_to_chw, FRAME_SIZE, FRAME_STACK};
use crate::rl::{Agent, AgentUpdate, EpisodeSums, Registered};
use crate::rl::{Batch, DeviceFeatureCache, DeviceFrames, Features, ReplayBuffer, SequenceViews, Transitions};
use crate::{Error, Result};

/// The environment seeds (dm_control takes 0..2³²): training episode `e`, and evaluation
/// episode `k` of evaluation `i`, in disjoint halves of the range for a run seed.
fn train_seed(run_seed: u64, episode: u64) -> u64 {
    run_seed.wrapping_mul(1_000_003).wrapping_add(episode) % (1 << 31)
}

fn eval_seed(run_seed: u64, evaluation: u64, k: u64) -> u64 {
    (1 << 31) + run_seed.wrapping_mul(1_000_003).wrapping_add(evaluation * 1000 + k) % (1 << 31)
}

/// h, a leaf of the critic's features, which are kept in `critic`: the critic's gradient
/// reaches the encoder through h.
fn keep_for_critic(features: CriticFeatures, critic: &mut Option<CriticFeatures>) -> Result<Tensor> {
    let h = features.leaf()?;
    *critic = Some(features);
    Ok(h)
}

/// The pool slots: one environment trains, the other evaluates.
const TRAIN: usize = 0;
const EVAL: usize = 1;

/// The training state a checkpoint holds, and what the loop works with.
pub(super) struct Workspace<A: Agent> {
    /// The command's stage: its RL loop sections (`stage.rl`, the render quality resolved), and its
    /// whole config as TOML, checkpoint kind and name, for checkpoints and provenance.
    pub(super) stage: Stage,
    pub(super) spec: LoopSpec,
    pub(super) representation: Box<dyn Representation>,
    /// The quality the environments render at.
    pub(super) render_quality: RenderQuality,
    pool: EnvPool,
    pub(super) agent: A,
    pub(super) replay: ReplayBuffer,
    /// The feature cache's rows on the run's device, when it is on and lives there (a GPU's
    /// default, `device::feature_cache_on_host`); the replay then keeps no features.
    pub(super) device_cache: Option<DeviceFeatureCache>,
    /// A copy of the replay's frames on the run's device, when nothing but the encoder and an
    /// auxiliary objective's pairs read a batch's pixels (a frozen encoder, one the critic
    /// trains, Algorithm 1's LFS; without the cache; `Representation::encodes_batches_only`),
    /// a GPU runs them (`device::frames_on_host`) and they leave it room (`device::room_for`):
    /// batches and pairs are then stacked and shifted there.
    pub(super) device_frames: Option<DeviceFrames>,
    /// Why the cache's rows or the frames stay on the host though the GPU's way was asked for
    /// (too little of its memory free), for the run's first line.
    pub(super) device_note: Option<String>,
    shift: RandomShift,
    pub(super) rng: ChaCha8Rng,
    /// Where the agent's tensors live.
    device: Device,
    /// Agent steps done.
    pub(super) step: u64,
    /// Training episodes started.
    pub(super) episode: u64,
    /// Evaluations done, and the agent step of the last one.
    pub(super) evaluations: u64,
    pub(super) last_eval_step: Option<u64>,
    pub(super) action_dim: usize,
    /// The value comparison window, when asked for (`lfs train`).
    pub(super) value_comparison: Option<ValueComparison>,
    /// Keep each episode's proprioceptive states and log their entropy (`lfs explore`).
    pub(super) record_states: bool,
}

/// What one agent step trains on.
struct TrainingBatch {
    batch: Batch,
    /// The unshifted pixels of TACO's views, when the agent asks for action sequences.
    sequence: Option<SequenceInputs>,
    /// The auxiliary objective's update on these transitions (`lfs train`).
    aux: Option<UpdateMetrics>,
    /// The observations' encoding with its tape, when the critic trains the encoder.
    critic: Option<CriticFeatures>,
}

/// A batch's O_t and O_{t+K} (n, 9, 84, 84) unshifted, and its actions a_t … a_{t+K−1}.
struct SequenceInputs {
    obs: Vec<u8>,
    future: Vec<u8>,
    action_seq: Vec<f32>,
    k: usize,
}

/// The episode being played.
pub(super) struct EpisodeState<A: Agent> {
    reward: f64,
    length: u64,
    start: Instant,
    /// The agent's update metrics, summed.
    sums: A::Sums,
    /// The auxiliary updates' metrics (`lfs train`).
    aux: Vec<UpdateMetrics>,
    /// Where its steps' time went.
    times: StepTimes,
    /// The proprioceptive state after the reset and after every step, when recorded.
    states: Vec<Vec<f64>>,
}

pub(super) enum StepOutcome<A: Agent> {
    Continue(EpisodeState<A>),
    /// The episode, and the means of its updates' metrics.
    Finished(EpisodeLog, A::Metrics, AuxMeans),
    Lost(String),
}

impl<A: Registered> Workspace<A> {
    pub(super) fn new(mut stage: Stage, spec: &LoopSpec, representation: Box<dyn Representation>) -> Result<Self> {
        let value_comparison = stage.value_comparison.take();
        let cfg = &stage.rl;
        let render_quality = cfg
            .env
            .render_quality
            .pinned()
            .ok_or_else(|| Error::Config("env.render_quality was not resolved before the run".into()))?;
        let env_cfg = DmcConfig {
            action_repeat: cfg.env.action_repeat,
            render_quality,
            episode_frames: cfg.env.worker_episode_frames(),
            ..DmcConfig::new(spec.task)
        };
        let pool = EnvPool::new(vec![env_cfg.clone(), env_cfg])?;
        let action_dim = pool.spec(TRAIN).action_dim;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.run.seed);
        let repr = representation.repr_dim();
        // The run's device (opened once, by the command: `Stage::backend`): the agent and every
        // batch it trains on live there. The replay and the environments' frames stay in host
        // memory.
        let device = stage.backend.device.clone();
        let features = Features {
            repr_dim: repr,
            encoder_tape: representation.critic_trains_encoder(),
        };
        let agent = A::new(cfg.agent.get::<A>()?, features, action_dim, &device, &mut rng)?;
        let placement = Placement::of(cfg, representation.as_ref(), &device);
        let replay = placement.replay(cfg, action_dim, repr);
        let device_cache = placement
            .cache_on_device
            .then(|| DeviceFeatureCache::new(placement.rows, repr, cfg.replay.feature_cache_dtype, &device))
            .transpose()?;
        let device_frames = placement
            .frames_on_device
            .then(|| DeviceFrames::new(placement.rows, (3, FRAME_SIZE, FRAME_SIZE), &device))
            .transpose()?;
        Ok(Self {
            replay,
            device_cache,
            device_frames,
            device_note: placement.note,
            shift: RandomShift {
                pad: cfg.replay.random_shift_pad,
            },
            value_comparison,
            record_states: false,
            stage,
            spec: spec.clone(),
            representation,
            render_quality,
            pool,
            agent,
            device,
            rng,
            step: 0,
            episode: 0,
            evaluations: 0,
            last_eval_step: None,
            action_dim,
        })
    }
}

/// Where the feature cache's rows and the replay's frames are kept: the run's device or the host.
struct Placement {
    /// Rows for the transitions the replay can hold, their episodes' first observations and
    /// an episode beyond the capacity: DMC's episodes (≤ 1000 steps) never grow them.
    rows: usize,
    cache_on_device: bool,
    frames_on_device: bool,
    /// Why one of them stays on the host though the GPU's way was asked for.
    note: Option<String>,
}

impl Placement {
    /// Each kept on a GPU only where it leaves the GPU room to train (else the host's way).
    fn of(cfg: &LoopConfig, representation: &dyn Representation, device: &Device) -> Self {
        let repr = representation.repr_dim();
        let steps = cfg.run.num_train_frames.to_steps(cfg.env.action_repeat) as usize;
        let held = cfg.replay.capacity.min(steps + 1);
        let rows = held + held / 100 + 1001;
        let mut note = None;
        let mut room = |bytes: usize, what: &str| match crate::device::room_for(device, bytes as u64) {
            Ok(()) => true,
            Err(why) => {
                note = Some(format!("{what} on the host: {why}"));
                false
            }
        };
        let cache_on_device = cfg.replay.feature_cache
            && !crate::device::feature_cache_on_host(device)
            && room(
                rows * repr * cfg.replay.feature_cache_dtype.bytes_per_value(),
                "the feature cache's rows",
            );
        let frames_on_device = !cfg.replay.feature_cache
            && representation.encodes_batches_only()
            && cfg.agent.action_sequence() == 0
            && !crate::device::frames_on_host(device)
            && room(rows * FRAME_BYTES, "the replay's frames");
        Self {
            rows,
            cache_on_device,
            frames_on_device,
            note,
        }
    }

    /// The replay buffer: features only when the cache's rows stay on the host, pixels only
    /// when neither the rows nor the frames are on the device.
    fn replay(&self, cfg: &LoopConfig, action_dim: usize, repr: usize) -> ReplayBuffer {
        let feature_dim = if cfg.replay.feature_cache && !self.cache_on_device {
            repr
        } else {
            0
        };
        let replay = ReplayBuffer::new(
            cfg.replay.capacity,
            FRAME_BYTES,
            action_dim,
            feature_dim,
            cfg.replay.feature_cache_dtype,
        )
        .with_sampling(cfg.replay.sampling);
        if self.cache_on_device || self.frames_on_device {
            replay.without_pixels()
        } else {
            replay
        }
    }
}

impl<A: Agent> Workspace<A> {
    pub(super) fn frame(&self) -> u64 {
        Frames::from_steps(self.step, self.stage.rl.env.action_repeat).0
    }

    /// Shapes: obs (n, 9, 84, 84) u8 -> h (n, repr), through the representation.
    pub(super) fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor> {
        self.representation.encode(obs, n)
    }

    fn reset(&mut self, slot: usize, seed: u64) -> Result<std::result::Result<TimeStep, String>> {
        self.command(slot, EnvCommand::Reset { seed })
    }

    fn command(&mut self, slot: usize, command: EnvCommand) -> Result<std::result::Result<TimeStep, String>> {
        let mut commands = vec![None, None];
        commands[slot] = Some(command);
        let reply = self.pool.execute(&commands)?.swap_remove(slot);
        self.reply(reply)
    }

    /// A slot's reply: its time step, or why the episode was lost.
    fn reply(&self, reply: PoolReply) -> Result<std::result::Result<TimeStep, String>> {
        match reply {
            PoolReply::Ready(step) => Ok(Ok(step)),
            PoolReply::Broken(error) => Ok(Err(error.to_string())),
            PoolReply::Idle => Err(Error::Env {
                task: self.spec.task.name().to_string(),
                reason: "the environment pool left a command unanswered".into(),
            }),
        }
    }

    /// Resets the training environment (retrying a lost reset) and starts an episode in the
    /// replay buffer.
    pub(super) fn start_episode(&mut self) -> Result<EpisodeState<A>> {
        let first = loop {
            let seed = train_seed(self.stage.rl.run.seed, self.episode);
            self.episode += 1;
            match self.reset(TRAIN, seed)? {
                Ok(step) => break step,
                Err(_) => continue, // the pool gives up after repeated failures
            }
        };
        let frame = env_frame_to_chw(&first.frame);
        self.replay.start_episode(&frame)?;
        if let Some(frames) = &mut self.device_frames {
            frames.start_episode(self.replay.first_episode());
            frames.push(&frame)?;
        }
        if let Some(cache) = &mut self.device_cache {
            // One read per episode: whether the f16 rows held what the last episode stored.
            cache.check()?;
            cache.start_episode(self.replay.first_episode());
        }
        self.cache_latest_features()?;
        Ok(EpisodeState {
            reward: 0.0,
            length: 0,
            start: Instant::now(),
            sums: A::Sums::default(),
            aux: Vec::new(),
            times: StepTimes::default(),
            states: match self.record_states {
                true => vec![first.state],
                false => Vec::new(),
            },
        })
    }

    /// Feature cache: encode the newest observation once, when it is stored.
    fn cache_latest_features(&mut self) -> Result<()> {
        if !self.stage.rl.replay.feature_cache {
            return Ok(());
        }
        let obs = self.latest_observation()?;
        // h (1, repr)
        let h = self.encode(&obs, 1)?;
        match &mut self.device_cache {
            Some(cache) => {
                // The replay may have dropped episodes when it stored this frame.
                cache.drop_before(self.replay.first_episode());
                cache.push(&h)
            }
            None => self.replay.set_features(&h.flatten_all()?.to_vec1::<f32>()?),
        }
    }

    fn latest_observation(&self) -> Result<Vec<u8>> {
        self.replay
            .latest_observation()
            .ok_or_else(|| Error::Shape("the RL loop: no episode started".into()))
    }

    /// The features the agent acts on: (1, repr).
    fn latest_features(&self) -> Result<Tensor> {
        if let Some(cache) = &self.device_cache {
            return cache.latest();
        }
        if let Some(h) = self.replay.latest_features() {
            return Ok(Tensor::from_vec(h, (1, self.representation.repr_dim()), &self.device)?);
        }
        self.encode(&self.latest_observation()?, 1)
    }

    /// Choose, send the step, update (the auxiliary objective first, for `lfs train`), read
    /// the step's reply, store.
    pub(super) fn agent_step(
        &mut self,
        mut state: EpisodeState<A>,
        aux_log: Option<&mut MetricsLog>,
    ) -> Result<StepOutcome<A>> {
        let step_start = Instant::now();
        let seed_steps = self
            .stage
            .rl
            .run
            .num_seed_frames
            .to_steps(self.stage.rl.env.action_repeat);
        let action = self.choose_action(seed_steps)?;
        let mut lap = StepTimes::lap(&mut state.times.act, step_start);
        let mut commands = vec![None, None];
        commands[TRAIN] = Some(EnvCommand::Step { action: action.clone() });
        let in_flight = self.pool.submit(&commands)?;
        if self.step >= seed_steps && self.agent.updates_at(self.step) {
            lap = self.update_on_batch(&mut state, aux_log)?;
        }
        let reply = self.pool.collect(in_flight)?.swap_remove(TRAIN);
        lap = StepTimes::lap(&mut state.times.env_wait, lap);
        let step = match self.reply(reply)? {
            Ok(step) => step,
            Err(error) => return Ok(StepOutcome::Lost(error)),
        };
        let frame = env_frame_to_chw(&step.frame);
        self.replay.add(&action, step.reward as f32, &frame)?;
        if let Some(frames) = &mut self.device_frames {
            // The replay may have dropped episodes when it stored this frame.
            frames.drop_before(self.replay.first_episode());
            frames.push(&frame)?;
        }
        self.cache_latest_features()?;
        StepTimes::lap(&mut state.times.store, lap);
        self.step += 1;
        state.reward += step.reward;
        state.length += 1;
        if self.record_states {
            state.states.push(step.state);
        }
        StepTimes::lap(&mut state.times.step, step_start);
        if !step.last {
            return Ok(StepOutcome::Continue(state));
        }
        let seconds = state.start.elapsed().as_secs_f64().max(1e-9);
        let log = EpisodeLog {
            step: self.step,
            frame: self.frame(),
            episode: self.episode,
            episode_reward: state.reward,
            episode_length: state.length,
            fps: Frames::from_steps(state.length, self.stage.rl.env.action_repeat).0 as f64 / seconds,
            num_updates: state.sums.count(),
            state_entropy: state_entropy(&state.states, STATE_ENTROPY_K),
            times: state.times,
        };
        Ok(StepOutcome::Finished(log, state.sums.mean(), AuxMeans::of(&state.aux)))
    }

    /// The action: uniformly random during the seed steps, else the agent's (exploring).
    fn choose_action(&mut self, seed_steps: u64) -> Result<Vec<f32>> {
        if self.step < seed_steps {
            return Ok((0..self.action_dim)
                .map(|_| self.rng.random_range(-1.0f32..=1.0))
                .collect());
        }
        let h = self.latest_features()?;
        self.agent.act(&h, self.step, true, &mut self.rng)
    }

    /// One update on a sampled batch (auxiliary objective, agent, encoder's critic step, agent's
    /// own objective); returns when it ended, the time after the batch's counted as the update's.
    fn update_on_batch(&mut self, state: &mut EpisodeState<A>, aux_log: Option<&mut MetricsLog>) -> Result<Instant> {
        let TrainingBatch {
            batch,
            sequence,
            aux,
            critic,
        } = self.batch(&mut state.times)?;
        let lap = Instant::now();
        if let Some(aux) = &aux {
            state.aux.push(aux.clone());
            if let Some(log) = aux_log {
                log.write(&AuxLog {
                    update: aux,
                    frame: self.frame(),
                })?;
            }
        }
        self.observe_values(&batch)?;
        let AgentUpdate { mut metrics, obs_grad } = self.agent.update(&batch, self.step, &mut self.rng)?;
        if let Some(features) = critic {
            let dh = obs_grad.ok_or_else(|| Error::Training("the critic gave the encoder no gradient".into()))?;
            self.representation.critic_step(&features, &dh)?;
        }
        if let Some(inputs) = sequence {
            self.agent_objective_step(inputs, &batch.reward, &mut metrics)?;
        }
        state.sums.add(&metrics);
        Ok(StepTimes::lap(&mut state.times.update, lap))
    }

    /// A training batch: shifted and encoded pixels, or cached features. With an online
    /// encoder, its objective first takes one update on the batch's transitions (Algorithm 1),
    /// and the batch is encoded by the updated encoder.
    fn batch(&mut self, times: &mut StepTimes) -> Result<TrainingBatch> {
        let n = self.agent.batch_size();
        let start = Instant::now();
        let (returns, k) = (self.stage.rl.agent.returns(), self.stage.rl.agent.action_sequence());
        let mut t = self.replay.sample_with_sequence(n, returns, k, &mut self.rng)?;
        let sequence = (k > 0).then(|| SequenceInputs {
            obs: t.obs.clone(),
            future: std::mem::take(&mut t.seq_obs),
            action_seq: std::mem::take(&mut t.action_seq),
            k,
        });
        let lap = StepTimes::lap(&mut times.sample, start);
        let aux = self.aux_update(&t)?;
        let lap = StepTimes::lap(&mut times.aux, lap);
        let mut critic = None;
        // O_t's tape for an intrinsic reward that trains the encoder through it (APT).
        let mut obs_tape = None;
        let (obs, next_obs) = if let Some(cache) = &self.device_cache {
            cache.gather(&t.locations, t.nstep)?
        } else if let Some(frames) = &self.device_frames {
            // O_t's crop offsets, then O_{t+n}'s, as the host path's two shifts draw them.
            let offsets = [
                self.shift.draw_offsets(n, &mut self.rng),
                self.shift.draw_offsets(n, &mut self.rng),
            ]
            .concat();
            // (n, 9, 84, 84) u8 each, on the device
            let (obs, next_obs) = frames.gather_shifted(&t.locations, t.nstep, &offsets, &self.shift)?;
            let obs = match self.representation.encode_tensor_for_critic(&obs)? {
                Some(features) => keep_for_critic(features, &mut critic)?,
                None => self.representation.encode_tensor(&obs)?,
            };
            (obs, self.representation.encode_tensor(&next_obs)?)
        } else if self.stage.rl.replay.feature_cache {
            let repr = self.representation.repr_dim();
            (
                Tensor::from_vec(std::mem::take(&mut t.obs_features), (n, repr), &self.device)?,
                Tensor::from_vec(std::mem::take(&mut t.next_obs_features), (n, repr), &self.device)?,
            )
        } else {
            let dims = (n, 3 * FRAME_STACK, FRAME_SIZE, FRAME_SIZE);
            self.shift.apply_batch(&mut t.obs, dims, &mut self.rng);
            self.shift.apply_batch(&mut t.next_obs, dims, &mut self.rng);
            let obs = match self.representation.encode_for_critic(&t.obs, n)? {
                Some(features) => keep_for_critic(features, &mut critic)?,
                None => match self.representation.encode_with_tape(&t.obs, n)? {
                    Some(encoded) => {
                        let h = encoded.h.clone();
                        obs_tape = Some(encoded);
                        h
                    }
                    None => self.encode(&t.obs, n)?,
                },
            };
            (obs, self.encode(&t.next_obs, n)?)
        };
        let mut batch = Batch::of(&t, obs, next_obs)?;
        // `lfs explore`: the method's intrinsic reward replaces the task's (the pixels are the
        // shifted ones the features came from; feature-cached runs have no explorer).
        if let Some(reward) = self
            .representation
            .intrinsic_reward(&batch, obs_tape.as_ref(), &t.obs, &t.next_obs)?
        {
            batch.reward = reward;
        }
        StepTimes::lap(&mut times.encode_batch, lap);
        Ok(TrainingBatch {
            batch,
            sequence,
            aux,
            critic,
        })
    }

    /// The agent's own objective (TACO's) after its update and the encoder's critic step: its
    /// views of the batch, shifted and encoded by the encoder as it now is (the anchor with its
    /// tape: two shifts of O_t, one of O_{t+K}, as TACO's `update_taco` draws them), its update,
    /// and the encoder's step on its gradient.
    fn agent_objective_step(
        &mut self,
        inputs: SequenceInputs,
        reward: &Tensor,
        metrics: &mut A::Metrics,
    ) -> Result<()> {
        let SequenceInputs {
            obs,
            mut future,
            action_seq,
            k,
        } = inputs;
        let n = action_seq.len() / (k * self.action_dim);
        let dims = (n, 3 * FRAME_STACK, FRAME_SIZE, FRAME_SIZE);
        let (mut anchor, mut positive) = (obs.clone(), obs);
        for pixels in [&mut anchor, &mut positive, &mut future] {
            self.shift.apply_batch(pixels, dims, &mut self.rng);
        }
        let features = self.representation.encode_for_critic(&anchor, n)?.ok_or_else(|| {
            Error::Training("the agent's objective trains the encoder: it needs aux.critic_gradient".into())
        })?;
        let views = SequenceViews {
            anchor: features.leaf()?,
            positive: self.encode(&positive, n)?,
            future: self.encode(&future, n)?,
            action_seq: Tensor::from_vec(action_seq, (n, k, self.action_dim), &self.device)?,
        };
        if let Some(dh) = self.agent.update_objective(&views, reward, metrics)? {
            self.representation.agent_objective_step(&features, &dh)?;
        }
        Ok(())
    }

    /// The value comparison's step, when the window is open: the critic's values of the SAC
    /// batch's observations and of the synthetic ones LNC just selected.
    fn observe_values(&mut self, batch: &Batch) -> Result<()> {
        let frame = self.frame();
        if !self.value_comparison.as_ref().is_some_and(|w| w.wants(frame)) {
            return Ok(());
        }
        let uniform = |n: usize, rng: &mut ChaCha8Rng| -> Result<Tensor> {
            let a: Vec<f32> = (0..n * self.action_dim)
                .map(|_| rng.random_range(-1.0f32..=1.0))
                .collect();
            Ok(Tensor::from_vec(a, (n, self.action_dim), &self.device)?)
        };
        let n = batch.obs.dim(0)?;
        let real = self.agent.min_q(&batch.obs, &uniform(n, &mut self.rng)?)?;
        let selected = self.representation.last_selected_synthetic();
        let synthetic = match selected {
            Some(pairs) if pairs.len > 0 => {
                let h = self.representation.encode(&pairs.prev.to_host()?, pairs.len)?;
                self.agent.min_q(&h, &uniform(pairs.len, &mut self.rng)?)?
            }
            _ => vec![],
        };
        if let Some(window) = self.value_comparison.as_mut() {
            window.observe(&real, &synthetic);
        }
        Ok(())
    }

    /// The online encoder's objective, one update on the (unshifted) transitions `t`.
    fn aux_update(&mut self, t: &Transitions) -> Result<Option<UpdateMetrics>> {
        self.representation
            .aux_update(t, &self.replay, self.device_frames.as_ref())
    }

    /// `num_eval_episodes` deterministic episodes on the evaluation environment; with
    /// `video_dir`, the first one is also written there as `<frame>.mp4`.
    pub(super) fn evaluate(&mut self, start: Instant, video_dir: Option<&Path>) -> Result<EvalRow> {
        let mut returns = Vec::new();
        let mut k = 0;
        while returns.len() < self.stage.rl.run.num_eval_episodes {
            let seed = eval_seed(self.stage.rl.run.seed, self.evaluations, k);
            k += 1;
            let mut frames = (returns.is_empty() && video_dir.is_some()).then(Vec::new);
            if let Some(ret) = self.eval_episode(seed, frames.as_mut())? {
                returns.push(ret);
                if let (Some(dir), Some(frames)) = (video_dir, frames) {
                    self.write_video(dir, &frames)?;
                }
            }
        }
        self.evaluations += 1;
        self.last_eval_step = Some(self.step);
        Ok(EvalRow {
            frame: self.frame(),
            step: self.step,
            episode: self.episode,
            episode_reward: returns.iter().sum::<f64>() / returns.len() as f64,
            total_time: start.elapsed().as_secs_f64(),
        })
    }

    /// `eval_video/<frame>.mp4`, written atomically.
    fn write_video(&self, dir: &Path, frames: &[Vec<u8>]) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::checkpoint(dir, e.to_string()))?;
        let path = dir.join(format!("{}.mp4", self.frame()));
        let tmp = crate::fsutil::temp_path(&path);
        let seconds = self.pool.spec(EVAL).agent_timestep();
        crate::video::write_preview_video(&tmp, frames, seconds)?;
        crate::fsutil::commit_temp(&tmp, &path).map_err(|e| Error::checkpoint(&path, e.to_string()))
    }

    /// One evaluation episode's return, or None if it was lost; its (84, 84, 3) frames go to
    /// `frames` when given.
    fn eval_episode(&mut self, seed: u64, mut frames: Option<&mut Vec<Vec<u8>>>) -> Result<Option<f64>> {
        let mut stack = crate::observation::FrameStack::new();
        let first = match self.reset(EVAL, seed)? {
            Ok(step) => step,
            Err(_) => return Ok(None),
        };
        stack.reset(&first.frame);
        if let Some(frames) = frames.as_mut() {
            frames.push(first.frame.clone());
        }
        let mut ret = 0.0;
        loop {
            let h = self.encode(&stack.observation(), 1)?;
            let action = self.agent.act(&h, self.step, false, &mut self.rng)?;
            let step = match self.command(EVAL, EnvCommand::Step { action })? {
                Ok(step) => step,
                Err(_) => return Ok(None),
            };
            ret += step.reward;
            if let Some(frames) = frames.as_mut() {
                frames.push(step.frame.clone());
            }
            if step.last {
                return Ok(Some(ret));
            }
            stack.push(&step.frame);
        }
    }
}
