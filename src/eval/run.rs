//! One `lfs eval` run: SAC on one DMControl task on top of a frozen encoder (docs/design.md §6,
//! §8). Per agent step, as Proto-RL's train loop: choose the action (uniformly random during
//! the seed frames), run one update on a sampled batch, step the environment, store the
//! transition. Evaluations (deterministic tanh μ, their own environment and seeds) run at frame
//! 0, every `eval_every_frames` and at the end, one row each in `eval.csv`; every training
//! episode adds a line to `train.jsonl`. Checkpoints (agent, optimisers, replay, RNG, counters)
//! are written atomically at episode ends, so a killed run resumes at its last one and
//! continues exactly as an uninterrupted run would have from there. Nothing here prints:
//! progress goes to the caller's callback.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::config::{EvalConfig, Frames};
use crate::config::StageConfig;
use crate::data::RandomShift;
use crate::env::{DmcConfig, EnvCommand, EnvPool, PoolReply, RenderQuality, Task, TimeStep, FRAME_BYTES};
use crate::export::load_frozen_encoder;
use crate::fsutil::write_bytes_atomic;
use crate::metrics::{CsvLog, MetricsLog};
use crate::nn::checkpoint::{self, rng_from_string, rng_to_string};
use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::{Encoder, EncoderConfig, Params};
use crate::observation::{env_frame_to_chw, FRAME_SIZE, FRAME_STACK};
use crate::rl::{ReplayBuffer, SacAgent, SacBatch, SacMetrics};
use crate::{Error, Result};

/// File names inside an eval run directory.
pub const EVAL_CSV: &str = "eval.csv";
pub const TRAIN_LOG: &str = "train.jsonl";
pub const CHECKPOINT_FILE: &str = "checkpoint.safetensors";
pub const CONFIG_FILE: &str = "config.resolved.toml";
pub const RUN_FILE: &str = "run.json";
/// Folder of the evaluation videos (`--save-video`), as DrQ-v2's `eval_video/`.
pub const VIDEO_DIR: &str = "eval_video";

/// `eval.csv`'s columns (DrQ-v2's).
const EVAL_HEADER: &str = "frame,step,episode,episode_reward,total_time";

/// Which encoder the agent sees the task through.
#[derive(Debug, Clone, PartialEq)]
pub enum EncoderChoice {
    /// An `lfs export` file.
    Exported(PathBuf),
    /// A randomly initialised encoder, seeded by the run's seed: the floor every method must
    /// beat.
    Random,
}

/// What a run is, beyond its config.
#[derive(Debug, Clone)]
pub struct EvalSpec {
    pub task: Task,
    pub encoder: EncoderChoice,
    /// Evaluate on a render quality other than the encoder's training videos'.
    pub allow_render_quality_mismatch: bool,
    /// Write the first episode of every evaluation as `eval_video/<frame>.mp4`.
    pub save_video: bool,
}

/// One evaluation: a row of `eval.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalRow {
    pub frame: u64,
    pub step: u64,
    /// Training episodes started so far.
    pub episode: u64,
    /// Mean return of the evaluation episodes.
    pub episode_reward: f64,
    /// Wall-clock seconds since the run (this invocation's first start) began.
    pub total_time: f64,
}

/// One training episode: a line of `train.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodeLog {
    /// Agent steps done at its end.
    pub step: u64,
    #[serde(rename = "train/frame")]
    pub frame: u64,
    #[serde(rename = "train/episode")]
    pub episode: u64,
    #[serde(rename = "train/episode_reward")]
    pub episode_reward: f64,
    #[serde(rename = "train/episode_length")]
    pub episode_length: u64,
    /// Frames per second over the episode (environment, updates, logging).
    #[serde(rename = "train/fps")]
    pub fps: f64,
    /// Updates in the episode (0 during the seed frames).
    #[serde(rename = "train/num_updates")]
    pub num_updates: u64,
    /// Means over the episode's updates.
    #[serde(flatten)]
    pub sac: SacMetrics,
}

/// What the loop reports to its caller.
#[derive(Debug)]
pub enum EvalEvent<'a> {
    Started {
        start_frame: u64,
        num_train_frames: u64,
        resumed: bool,
        encoder: &'a str,
    },
    /// After every agent step: frames done.
    Progress {
        frame: u64,
    },
    Episode(&'a EpisodeLog),
    Evaluation(&'a EvalRow),
    Checkpoint {
        frame: u64,
    },
    /// An episode was lost (a worker died or dm_control raised); the run goes on.
    EpisodeLost {
        error: String,
    },
}

/// Where the run ended.
#[derive(Debug, Clone)]
pub struct EvalSummary {
    pub frames_done: u64,
    pub resumed_from_frame: Option<u64>,
    pub last_eval: Option<EvalRow>,
}

/// The encoder as constants, its identity, and the render quality of its training videos.
struct FrozenFeatures {
    encoder: Encoder,
    /// sha256 of the export file, or `random:<seed>`.
    id: String,
    /// The render quality of the videos the encoder was trained on, when they were collected.
    render_quality: Option<RenderQuality>,
}

fn frozen_encoder(choice: &EncoderChoice, seed: u64) -> Result<FrozenFeatures> {
    match choice {
        EncoderChoice::Random => {
            // The paper's encoder, orthogonally initialised from the run's seed, as constants.
            let cfg = EncoderConfig::default();
            let mut params = Params::new(&Device::Cpu);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            Encoder::new(&cfg, ENCODER_PREFIX, &mut params, &mut rng)?;
            Ok(FrozenFeatures {
                encoder: Encoder::from_tensors(&cfg, ENCODER_PREFIX, &params.snapshot()?)?,
                id: format!("random:{seed}"),
                render_quality: None,
            })
        }
        EncoderChoice::Exported(path) => {
            let frozen = load_frozen_encoder(path)?;
            let bytes = std::fs::read(path).map_err(|e| Error::checkpoint(path, format!("reading: {e}")))?;
            Ok(FrozenFeatures {
                render_quality: training_render_quality(&frozen.metadata),
                encoder: frozen.encoder,
                id: hex::encode(Sha256::digest(&bytes)),
            })
        }
    }
}

/// The render quality recorded in an export's `lfs.datasets` (None for ingested videos).
fn training_render_quality(metadata: &HashMap<String, String>) -> Option<RenderQuality> {
    let datasets: serde_json::Value = serde_json::from_str(metadata.get("lfs.datasets")?).ok()?;
    datasets
        .as_array()?
        .iter()
        .find_map(|d| d.get("render_quality")?.as_str()?.parse().ok())
}

/// The environment seeds (dm_control takes 0..2³²): training episode `e`, and evaluation
/// episode `k` of evaluation `i`, in disjoint halves of the range for a run seed.
fn train_seed(run_seed: u64, episode: u64) -> u64 {
    run_seed.wrapping_mul(1_000_003).wrapping_add(episode) % (1 << 31)
}

fn eval_seed(run_seed: u64, evaluation: u64, k: u64) -> u64 {
    (1 << 31) + run_seed.wrapping_mul(1_000_003).wrapping_add(evaluation * 1000 + k) % (1 << 31)
}

/// The pool slots: one environment trains, the other evaluates.
const TRAIN: usize = 0;
const EVAL: usize = 1;

/// The training state a checkpoint holds, and what the loop works with.
struct Workspace {
    cfg: EvalConfig,
    spec: EvalSpec,
    features: FrozenFeatures,
    pool: EnvPool,
    agent: SacAgent,
    replay: ReplayBuffer,
    shift: RandomShift,
    rng: ChaCha8Rng,
    /// Agent steps done.
    step: u64,
    /// Training episodes started.
    episode: u64,
    /// Evaluations done, and the agent step of the last one.
    evaluations: u64,
    last_eval_step: Option<u64>,
    action_dim: usize,
}

/// Validates everything, then trains into `out_dir` (resuming a checkpoint there).
pub fn run(
    cfg: &EvalConfig,
    spec: &EvalSpec,
    out_dir: &Path,
    on_event: &mut dyn FnMut(EvalEvent),
) -> Result<EvalSummary> {
    // ---- bad input first: nothing is written before these pass
    cfg.validate()?;
    let features = frozen_encoder(&spec.encoder, cfg.run.seed)?;
    if let Some(trained) = features.render_quality {
        if trained != cfg.env.render_quality && !spec.allow_render_quality_mismatch {
            return Err(Error::Config(format!(
                "the encoder was pre-trained on videos rendered at quality {trained:?}, this run renders {:?}; \
                 pass --allow-render-quality-mismatch to evaluate anyway (env.render_quality sets this run's)",
                cfg.env.render_quality.name()
            )));
        }
    }
    let checkpoint = out_dir.join(CHECKPOINT_FILE);
    let saved = if checkpoint.exists() {
        Some(checkpoint::load(&checkpoint)?)
    } else {
        None
    };
    if let Some(file) = &saved {
        check_resumable(file, cfg, spec, &features.id)?;
    }

    // ---- set up
    let mut ws = Workspace::new(cfg, spec, features)?;
    let resumed_from_frame = match &saved {
        Some(file) => {
            ws.restore(file)?;
            Some(ws.frame())
        }
        None => None,
    };
    std::fs::create_dir_all(out_dir).map_err(|e| Error::checkpoint(out_dir, e.to_string()))?;
    let _claim = crate::fsutil::claim_dir(out_dir, "eval")?;
    write_provenance(out_dir, &ws)?;
    // The evaluations the checkpoint knows of stay; a row written after it (or any row, when
    // there is no checkpoint) is evaluated again.
    let evaluated_through = ws
        .last_eval_step
        .map(|step| Frames::from_steps(step, cfg.env.action_repeat).0);
    let mut eval_log = CsvLog::open(&out_dir.join(EVAL_CSV), EVAL_HEADER, evaluated_through)?;
    let mut train_log = MetricsLog::open(&out_dir.join(TRAIN_LOG), ws.step)?;
    on_event(EvalEvent::Started {
        start_frame: ws.frame(),
        num_train_frames: cfg.run.num_train_frames.0,
        resumed: resumed_from_frame.is_some(),
        encoder: &ws.features.id,
    });

    // ---- the loop
    let start = Instant::now();
    let repeat = cfg.env.action_repeat;
    let total_steps = cfg.run.num_train_frames.to_steps(repeat);
    let eval_every = cfg.run.eval_every_frames.to_steps(repeat);
    let checkpoint_every = cfg.run.checkpoint_every_frames.to_steps(repeat);
    let mut last_checkpoint_step = ws.step;
    let mut last_eval = None;
    let mut episode: Option<EpisodeState> = None;
    loop {
        // At step 0, at every multiple of eval_every after the last evaluation (mid-episode
        // too: evaluation has its own environment), and once at the end of the budget.
        let due = ws
            .last_eval_step
            .is_none_or(|last| ws.step >= (last / eval_every + 1) * eval_every);
        let at_end = ws.step >= total_steps && ws.last_eval_step != Some(ws.step);
        if due || at_end {
            let video_dir = spec.save_video.then(|| out_dir.join(VIDEO_DIR));
            let row = ws.evaluate(start, video_dir.as_deref())?;
            eval_log.append(&format!(
                "{},{},{},{},{}",
                row.frame, row.step, row.episode, row.episode_reward, row.total_time
            ))?;
            on_event(EvalEvent::Evaluation(&row));
            last_eval = Some(row);
        }
        if ws.step >= total_steps {
            break;
        }
        let state = match episode.take() {
            Some(state) => state,
            None => ws.start_episode()?,
        };
        match ws.agent_step(state)? {
            StepOutcome::Continue(state) => episode = Some(state),
            StepOutcome::Finished(log) => {
                train_log.write(&log)?;
                on_event(EvalEvent::Episode(&log));
                if ws.step - last_checkpoint_step >= checkpoint_every && ws.step < total_steps {
                    ws.save_checkpoint(&checkpoint)?;
                    last_checkpoint_step = ws.step;
                    on_event(EvalEvent::Checkpoint { frame: ws.frame() });
                }
            }
            StepOutcome::Lost(error) => on_event(EvalEvent::EpisodeLost { error }),
        }
        on_event(EvalEvent::Progress { frame: ws.frame() });
    }
    ws.save_checkpoint(&checkpoint)?;
    on_event(EvalEvent::Checkpoint { frame: ws.frame() });
    Ok(EvalSummary {
        frames_done: ws.frame(),
        resumed_from_frame,
        last_eval,
    })
}

/// A resumed run must be the same run: same kind of file, config (but budget and checkpoint
/// cadence), task and encoder.
fn check_resumable(
    file: &checkpoint::SafetensorsFile,
    cfg: &EvalConfig,
    spec: &EvalSpec,
    encoder_id: &str,
) -> Result<()> {
    let err = |reason: String| {
        Error::checkpoint(
            &file.path,
            format!("{reason}; use a new --out-dir or delete the checkpoint"),
        )
    };
    if file.meta("lfs.kind")? != "eval-checkpoint" {
        return Err(err(format!(
            "is an `lfs {}` file, not an `lfs eval` checkpoint",
            file.meta("lfs.kind")?
        )));
    }
    checkpoint::check_same_version(file)?;
    let saved =
        EvalConfig::from_toml_str(file.meta("lfs.config")?, &[]).map_err(|e| err(format!("its config: {e}")))?;
    if saved.resume_key()? != cfg.resume_key()? {
        return Err(err(
            "was written with a different config (only run.num_train_frames and run.checkpoint_every_frames may change on resume)"
                .to_string(),
        ));
    }
    if file.meta("lfs.task")? != spec.task.name() {
        return Err(err(format!(
            "was trained on task {}, not {}",
            file.meta("lfs.task")?,
            spec.task
        )));
    }
    if file.meta("lfs.encoder")? != encoder_id {
        return Err(err(format!(
            "was trained with encoder {}, not {encoder_id}",
            file.meta("lfs.encoder")?
        )));
    }
    Ok(())
}

/// `config.resolved.toml` and `run.json` (task, encoder, render quality, feature cache).
fn write_provenance(out_dir: &Path, ws: &Workspace) -> Result<()> {
    let write = |name: &str, text: String| {
        let path = out_dir.join(name);
        write_bytes_atomic(&path, text.as_bytes()).map_err(|e| Error::checkpoint(&path, e.to_string()))
    };
    write(CONFIG_FILE, ws.cfg.to_toml()?)?;
    let info = serde_json::json!({
        "task": ws.spec.task.name(),
        "encoder": match &ws.spec.encoder {
            EncoderChoice::Exported(p) => p.display().to_string(),
            EncoderChoice::Random => "random".to_string(),
        },
        "encoder_sha256": ws.features.id,
        "encoder_render_quality": ws.features.render_quality.map(RenderQuality::name),
        "render_quality": ws.cfg.env.render_quality.name(),
        "feature_cache": ws.cfg.replay.feature_cache,
        "seed": ws.cfg.run.seed,
        "version": env!("CARGO_PKG_VERSION"),
    });
    write(RUN_FILE, serde_json::to_string_pretty(&info)?)
}

/// The episode being played.
struct EpisodeState {
    reward: f64,
    length: u64,
    start: Instant,
    sums: MetricSums,
}

enum StepOutcome {
    Continue(EpisodeState),
    Finished(EpisodeLog),
    Lost(String),
}

impl Workspace {
    fn new(cfg: &EvalConfig, spec: &EvalSpec, features: FrozenFeatures) -> Result<Self> {
        let env_cfg = DmcConfig {
            action_repeat: cfg.env.action_repeat,
            render_quality: cfg.env.render_quality,
            ..DmcConfig::new(spec.task)
        };
        let pool = EnvPool::new(vec![env_cfg.clone(), env_cfg])?;
        let action_dim = pool.spec(TRAIN).action_dim;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.run.seed);
        let repr = features.encoder.repr_dim();
        let agent = SacAgent::new(&cfg.agent, repr, action_dim, &Device::Cpu, &mut rng)?;
        let feature_dim = if cfg.replay.feature_cache { repr } else { 0 };
        Ok(Self {
            replay: ReplayBuffer::new(cfg.replay.capacity, FRAME_BYTES, action_dim, feature_dim),
            shift: RandomShift {
                pad: cfg.replay.random_shift_pad,
            },
            cfg: cfg.clone(),
            spec: spec.clone(),
            features,
            pool,
            agent,
            rng,
            step: 0,
            episode: 0,
            evaluations: 0,
            last_eval_step: None,
            action_dim,
        })
    }

    fn frame(&self) -> u64 {
        Frames::from_steps(self.step, self.cfg.env.action_repeat).0
    }

    /// Shapes: obs (n, 9, 84, 84) u8 -> h (n, repr), through the frozen encoder's kernels.
    fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor> {
        Ok(self.features.encoder.encode(obs, n, false)?.h)
    }

    fn reset(&mut self, slot: usize, seed: u64) -> Result<std::result::Result<TimeStep, String>> {
        self.command(slot, EnvCommand::Reset { seed })
    }

    fn command(&mut self, slot: usize, command: EnvCommand) -> Result<std::result::Result<TimeStep, String>> {
        let mut commands = vec![None, None];
        commands[slot] = Some(command);
        let mut replies = self.pool.execute(&commands)?;
        match replies.swap_remove(slot) {
            PoolReply::Ready(step) => Ok(Ok(step)),
            PoolReply::Broken(error) => Ok(Err(error.to_string())),
            PoolReply::Idle => Err(Error::Shape("eval: the environment pool skipped a command".into())),
        }
    }

    /// Resets the training environment (retrying a lost reset) and starts an episode in the
    /// replay buffer.
    fn start_episode(&mut self) -> Result<EpisodeState> {
        let first = loop {
            let seed = train_seed(self.cfg.run.seed, self.episode);
            self.episode += 1;
            match self.reset(TRAIN, seed)? {
                Ok(step) => break step,
                Err(_) => continue, // the pool gives up after repeated failures
            }
        };
        self.replay.start_episode(&env_frame_to_chw(&first.frame))?;
        self.cache_latest_features()?;
        Ok(EpisodeState {
            reward: 0.0,
            length: 0,
            start: Instant::now(),
            sums: MetricSums::default(),
        })
    }

    /// Feature cache: encode the newest observation once, when it is stored.
    fn cache_latest_features(&mut self) -> Result<()> {
        if !self.cfg.replay.feature_cache {
            return Ok(());
        }
        let obs = self.latest_observation()?;
        let h = self.encode(&obs, 1)?.flatten_all()?.to_vec1::<f32>()?;
        self.replay.set_features(&h)
    }

    fn latest_observation(&self) -> Result<Vec<u8>> {
        self.replay
            .latest_observation()
            .ok_or_else(|| Error::Shape("eval: no episode started".into()))
    }

    /// The features the agent acts on: (1, repr).
    fn latest_features(&self) -> Result<Tensor> {
        if self.cfg.replay.feature_cache {
            if let Some(episode) = self.replay.episodes().back() {
                let repr = self.features.encoder.repr_dim();
                let h = &episode.features[episode.features.len() - repr..];
                return Ok(Tensor::from_slice(h, (1, repr), &Device::Cpu)?);
            }
        }
        self.encode(&self.latest_observation()?, 1)
    }

    /// Choose, update, step, store.
    fn agent_step(&mut self, mut state: EpisodeState) -> Result<StepOutcome> {
        let seed_steps = self.cfg.run.num_seed_frames.to_steps(self.cfg.env.action_repeat);
        let action: Vec<f32> = if self.step < seed_steps {
            (0..self.action_dim)
                .map(|_| self.rng.random_range(-1.0f32..=1.0))
                .collect()
        } else {
            let h = self.latest_features()?;
            self.agent.act(&h, true, &mut self.rng)?
        };
        if self.step >= seed_steps {
            let batch = self.batch()?;
            let metrics = self.agent.update(&batch, self.step, &mut self.rng)?;
            state.sums.add(&metrics);
        }
        let step = match self.command(TRAIN, EnvCommand::Step { action: action.clone() })? {
            Ok(step) => step,
            Err(error) => return Ok(StepOutcome::Lost(error)),
        };
        self.replay
            .add(&action, step.reward as f32, &env_frame_to_chw(&step.frame))?;
        self.cache_latest_features()?;
        self.step += 1;
        state.reward += step.reward;
        state.length += 1;
        if !step.last {
            return Ok(StepOutcome::Continue(state));
        }
        let seconds = state.start.elapsed().as_secs_f64().max(1e-9);
        Ok(StepOutcome::Finished(EpisodeLog {
            step: self.step,
            frame: self.frame(),
            episode: self.episode,
            episode_reward: state.reward,
            episode_length: state.length,
            fps: Frames::from_steps(state.length, self.cfg.env.action_repeat).0 as f64 / seconds,
            num_updates: state.sums.count,
            sac: state.sums.mean(),
        }))
    }

    /// A training batch: shifted and encoded pixels, or cached features.
    fn batch(&mut self) -> Result<SacBatch> {
        let n = self.cfg.agent.batch_size;
        let mut t = self.replay.sample(n, &mut self.rng)?;
        let (obs, next_obs) = if self.cfg.replay.feature_cache {
            let repr = self.features.encoder.repr_dim();
            (
                Tensor::from_vec(std::mem::take(&mut t.obs_features), (n, repr), &Device::Cpu)?,
                Tensor::from_vec(std::mem::take(&mut t.next_obs_features), (n, repr), &Device::Cpu)?,
            )
        } else {
            let dims = (n, 3 * FRAME_STACK, FRAME_SIZE, FRAME_SIZE);
            self.shift.apply_batch(&mut t.obs, dims, &mut self.rng);
            self.shift.apply_batch(&mut t.next_obs, dims, &mut self.rng);
            (self.encode(&t.obs, n)?, self.encode(&t.next_obs, n)?)
        };
        Ok(SacBatch {
            obs,
            action: Tensor::from_vec(t.action, (n, self.action_dim), &Device::Cpu)?,
            reward: Tensor::from_vec(t.reward, (n, 1), &Device::Cpu)?,
            next_obs,
        })
    }

    /// `num_eval_episodes` deterministic episodes on the evaluation environment; with
    /// `video_dir`, the first one is also written there as `<frame>.mp4`.
    fn evaluate(&mut self, start: Instant, video_dir: Option<&Path>) -> Result<EvalRow> {
        let mut returns = Vec::new();
        let mut k = 0;
        while returns.len() < self.cfg.run.num_eval_episodes {
            let seed = eval_seed(self.cfg.run.seed, self.evaluations, k);
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
        crate::collect::write_preview_video(&tmp, frames, seconds)?;
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
            let action = self.agent.act(&h, false, &mut self.rng)?;
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

    // ---- checkpoints

    fn save_checkpoint(&self, path: &Path) -> Result<()> {
        let (mut tensors, mut meta) = self.agent.state()?;
        for (i, episode) in self.replay.episodes().iter().enumerate() {
            let n = episode.num_transitions();
            tensors.insert(
                format!("replay.{i:06}.frames"),
                Tensor::from_slice(&episode.frames, episode.frames.len(), &Device::Cpu)?,
            );
            tensors.insert(
                format!("replay.{i:06}.actions"),
                Tensor::from_slice(&episode.actions, (n, self.action_dim), &Device::Cpu)?,
            );
            tensors.insert(
                format!("replay.{i:06}.rewards"),
                Tensor::from_slice(&episode.rewards, n, &Device::Cpu)?,
            );
        }
        meta.insert("lfs.kind".into(), "eval-checkpoint".into());
        meta.insert("lfs.config".into(), self.cfg.to_toml()?);
        meta.insert("lfs.task".into(), self.spec.task.name().into());
        meta.insert("lfs.encoder".into(), self.features.id.clone());
        meta.insert("lfs.step".into(), self.step.to_string());
        meta.insert("lfs.episode".into(), self.episode.to_string());
        meta.insert("lfs.evaluations".into(), self.evaluations.to_string());
        if let Some(step) = self.last_eval_step {
            meta.insert("lfs.last_eval_step".into(), step.to_string());
        }
        meta.insert("lfs.rng".into(), rng_to_string(&self.rng));
        meta.insert(checkpoint::VERSION_KEY.into(), checkpoint::THIS_VERSION.into());
        checkpoint::save_atomic(path, &tensors, &meta)
    }

    fn restore(&mut self, file: &checkpoint::SafetensorsFile) -> Result<()> {
        let err = |reason: String| Error::checkpoint(&file.path, reason);
        let number = |key: &str| -> Result<u64> { file.meta(key)?.parse().map_err(|e| err(format!("`{key}`: {e}"))) };
        self.agent.load_state(&file.tensors, &file.metadata)?;
        let mut episodes = BTreeMap::<String, (Vec<u8>, Vec<f32>, Vec<f32>)>::new();
        for (key, t) in &file.tensors {
            let Some(rest) = key.strip_prefix("replay.") else {
                continue;
            };
            let Some((index, field)) = rest.split_once('.') else {
                continue;
            };
            let entry = episodes.entry(index.to_string()).or_default();
            match field {
                "frames" => entry.0 = t.to_dtype(DType::U8)?.to_vec1::<u8>()?,
                "actions" => entry.1 = t.flatten_all()?.to_vec1::<f32>()?,
                "rewards" => entry.2 = t.to_vec1::<f32>()?,
                other => return Err(err(format!("unknown replay field {other}"))),
            }
        }
        self.replay.restore(episodes.into_values().collect())?;
        if self.cfg.replay.feature_cache {
            // The cache is not stored: the frozen encoder recomputes it exactly.
            for e in 0..self.replay.episodes().len() {
                let obs = self.replay.observations_without_features(e);
                let flat: Vec<u8> = obs.concat();
                let h = self.encode(&flat, obs.len())?.flatten_all()?.to_vec1::<f32>()?;
                self.replay.fill_features(e, &h);
            }
        }
        self.step = number("lfs.step")?;
        self.episode = number("lfs.episode")?;
        self.evaluations = number("lfs.evaluations")?;
        self.last_eval_step = match file.metadata.contains_key("lfs.last_eval_step") {
            true => Some(number("lfs.last_eval_step")?),
            false => None,
        };
        self.rng = rng_from_string(file.meta("lfs.rng")?).map_err(|e| err(format!("`lfs.rng`: {e}")))?;
        Ok(())
    }
}

/// Sums of an episode's update metrics, for their means.
#[derive(Debug, Default)]
struct MetricSums {
    count: u64,
    actor_count: u64,
    sum: SacMetrics,
}

impl MetricSums {
    fn add(&mut self, m: &SacMetrics) {
        self.count += 1;
        self.sum.critic_loss += m.critic_loss;
        self.sum.critic_q1 += m.critic_q1;
        self.sum.critic_target_q += m.critic_target_q;
        self.sum.alpha = m.alpha; // the latest, not a mean
        if let (Some(a), Some(e), Some(l)) = (m.actor_loss, m.actor_entropy, m.alpha_loss) {
            self.actor_count += 1;
            let add = |s: &mut Option<f64>, v: f64| *s = Some(s.unwrap_or(0.0) + v);
            add(&mut self.sum.actor_loss, a);
            add(&mut self.sum.actor_entropy, e);
            add(&mut self.sum.alpha_loss, l);
        }
    }

    fn mean(&self) -> SacMetrics {
        let n = self.count.max(1) as f64;
        let na = self.actor_count.max(1) as f64;
        SacMetrics {
            critic_loss: self.sum.critic_loss / n,
            critic_q1: self.sum.critic_q1 / n,
            critic_target_q: self.sum.critic_target_q / n,
            actor_loss: self.sum.actor_loss.map(|v| v / na),
            actor_entropy: self.sum.actor_entropy.map(|v| v / na),
            alpha_loss: self.sum.alpha_loss.map(|v| v / na),
            alpha: self.sum.alpha,
        }
    }
}
