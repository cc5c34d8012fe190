//! One `lfs eval` run: SAC on one DMControl task on top of a frozen encoder (docs/design.md §6,
//! §8). Per agent step, as Proto-RL's train loop: choose the action (uniformly random during
//! the seed frames), run one update on a sampled batch, step the environment, store the
//! transition. Evaluations (deterministic tanh μ, their own environment and seeds) run at frame
//! 0, every `eval_every_frames` and at the end, one row each in `eval.csv`; every training
//! episode adds a line to `train.jsonl`. Checkpoints (agent, optimisers, replay, RNG, counters)
//! are written atomically at episode ends, so a killed run resumes at its last one and
//! continues exactly as an uninterrupted run would have from there. Nothing here prints:
//! progress goes to the caller's callback.
//!
//! `lfs train` ([`train`], docs/design.md §7) is this loop with one difference: the features
//! come from an encoder its auxiliary objective trains online, one update per agent step on the
//! SAC batch's transitions before the SAC update reads them (Algorithm 1), logged per update in
//! `aux.jsonl` and checkpointed with the agent.

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
use crate::e2e::online_encoder::CriticFeatures;
use crate::e2e::value_comparison::ValueComparison;
use crate::e2e::{OnlineEncoder, TrainConfig};
use crate::env::{DmcConfig, EnvCommand, EnvPool, PoolReply, RenderQuality, Task, TimeStep, FRAME_BYTES};
use crate::export::load_frozen_encoder;
use crate::fsutil::write_bytes_atomic;
use crate::metrics::{CsvLog, MetricsLog};
use crate::nn::checkpoint::{self, rng_from_string, rng_to_string};
use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::{Encoder, EncoderConfig, Params};
use crate::observation::{env_frame_to_chw, FRAME_SIZE, FRAME_STACK};
use crate::pretrain::UpdateMetrics;
use crate::rl::{ReplayBuffer, SacAgent, SacBatch, SacMetrics, Transitions};
use crate::{Error, Result};

/// File names inside an eval run directory.
pub const EVAL_CSV: &str = "eval.csv";
pub const TRAIN_LOG: &str = "train.jsonl";
pub const CHECKPOINT_FILE: &str = "checkpoint.safetensors";
pub const CONFIG_FILE: &str = "config.resolved.toml";
pub const RUN_FILE: &str = "run.json";
/// One line per auxiliary update (`lfs train`): the pre-trainer's metrics and the frame.
pub const AUX_LOG: &str = "aux.jsonl";
/// The paper's value comparison of synthetic and real observations (`lfs train`,
/// `aux.value_comparison`).
pub const VALUE_COMPARISON_FILE: &str = "value_comparison.json";
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
    /// `lfs train`: the auxiliary objective's mean loss and mean N (synthetic pairs in its
    /// batch) over the episode's updates.
    #[serde(rename = "train/aux_loss", skip_serializing_if = "Option::is_none")]
    pub aux_loss: Option<f64>,
    #[serde(rename = "train/aux_num_synthetic", skip_serializing_if = "Option::is_none")]
    pub aux_num_synthetic: Option<f64>,
}

/// A line of `aux.jsonl`: one auxiliary update (`step` counts them) at training frame `frame`.
#[derive(Debug, Serialize)]
struct AuxLog<'a> {
    #[serde(flatten)]
    update: &'a UpdateMetrics,
    #[serde(rename = "train/frame")]
    frame: u64,
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

/// Where the agent's features come from.
enum Representation {
    /// `lfs eval`, and `lfs train` with `aux.method = none`: constants.
    Frozen(FrozenFeatures),
    /// `lfs train`: the encoder the auxiliary objective trains every step. `id` names its
    /// initialisation and objective; `render_quality` is that of the videos an exported
    /// initialisation was pre-trained on.
    Online {
        encoder: Box<OnlineEncoder>,
        id: String,
        render_quality: Option<RenderQuality>,
    },
}

impl Representation {
    fn id(&self) -> &str {
        match self {
            Representation::Frozen(f) => &f.id,
            Representation::Online { id, .. } => id,
        }
    }

    fn repr_dim(&self) -> usize {
        match self {
            Representation::Frozen(f) => f.encoder.repr_dim(),
            Representation::Online { encoder, .. } => encoder.repr_dim(),
        }
    }

    /// The render quality of the videos the encoder was pre-trained on, when known.
    fn training_render_quality(&self) -> Option<RenderQuality> {
        match self {
            Representation::Frozen(f) => f.render_quality,
            Representation::Online { render_quality, .. } => *render_quality,
        }
    }

    /// Shapes: obs (n, 9, 84, 84) u8 -> h (n, repr) constants.
    fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor> {
        match self {
            Representation::Frozen(f) => Ok(f.encoder.encode(obs, n, false)?.h),
            Representation::Online { encoder, .. } => encoder.encode(obs, n),
        }
    }
}

/// Which command a run belongs to: the config its checkpoint records and resumes by.
#[derive(Clone, Copy)]
enum Stage<'a> {
    Eval(&'a EvalConfig),
    Train(&'a TrainConfig),
}

impl Stage<'_> {
    /// The `lfs.kind` of its checkpoints.
    fn checkpoint_kind(self) -> &'static str {
        match self {
            Stage::Eval(_) => "eval-checkpoint",
            Stage::Train(_) => "train-checkpoint",
        }
    }

    fn command(self) -> &'static str {
        match self {
            Stage::Eval(_) => "eval",
            Stage::Train(_) => "train",
        }
    }

    fn to_toml(self) -> Result<String> {
        match self {
            Stage::Eval(c) => c.to_toml(),
            Stage::Train(c) => c.to_toml(),
        }
    }

    fn resume_key(self) -> Result<String> {
        match self {
            Stage::Eval(c) => c.resume_key(),
            Stage::Train(c) => c.resume_key(),
        }
    }

    /// The resume key of a config a checkpoint recorded.
    fn saved_resume_key(self, saved: &str) -> Result<String> {
        match self {
            Stage::Eval(_) => EvalConfig::from_toml_str(saved, &[])?.resume_key(),
            Stage::Train(_) => TrainConfig::from_toml_str(saved, &[])?.resume_key(),
        }
    }
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
    /// The SAC half of the config (all of it for `lfs eval`).
    cfg: EvalConfig,
    /// The whole config as TOML, its checkpoint kind and its command, for checkpoints and
    /// provenance.
    stage_toml: String,
    checkpoint_kind: &'static str,
    command: &'static str,
    spec: EvalSpec,
    representation: Representation,
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
    /// The value comparison window, when asked for (`lfs train`).
    value_comparison: Option<ValueComparison>,
}

/// `lfs eval`: validates everything, then trains into `out_dir` (resuming a checkpoint there).
pub fn run(
    cfg: &EvalConfig,
    spec: &EvalSpec,
    out_dir: &Path,
    on_event: &mut dyn FnMut(EvalEvent),
) -> Result<EvalSummary> {
    cfg.validate()?;
    let features = frozen_encoder(&spec.encoder, cfg.run.seed)?;
    run_stage(
        Stage::Eval(cfg),
        spec,
        Representation::Frozen(features),
        out_dir,
        on_event,
    )
}

/// `lfs train` (docs/design.md §7): as [`run`], with the encoder trained online by
/// `aux.method`; `spec.encoder` is its initialisation (`Random`: the run's seed, as `lfs
/// pretrain` initialises it; `Exported`: an `lfs export` file, to fine-tune a pre-trained
/// encoder). With `aux.method = none` the encoder stays as initialised.
pub fn train(
    cfg: &TrainConfig,
    spec: &EvalSpec,
    out_dir: &Path,
    on_event: &mut dyn FnMut(EvalEvent),
) -> Result<EvalSummary> {
    cfg.validate()?;
    let representation = if !cfg.encoder_changes() {
        Representation::Frozen(frozen_encoder(&spec.encoder, cfg.run.seed)?)
    } else {
        let mut encoder = OnlineEncoder::new(cfg)?;
        let mut render_quality = None;
        let init = match &spec.encoder {
            EncoderChoice::Random => format!("random:{}", cfg.run.seed),
            EncoderChoice::Exported(path) => {
                let file = checkpoint::load(path)?;
                if file.meta("lfs.kind")? != "export" {
                    return Err(Error::checkpoint(
                        path,
                        format!(
                            "is an `lfs {}` file, not an encoder written by `lfs export`",
                            file.meta("lfs.kind")?
                        ),
                    ));
                }
                encoder.load_encoder(&file.tensors, path)?;
                render_quality = training_render_quality(&file.metadata);
                let bytes = std::fs::read(path).map_err(|e| Error::checkpoint(path, format!("reading: {e}")))?;
                hex::encode(Sha256::digest(&bytes))
            }
        };
        let critic = if cfg.aux.critic_gradient { "+critic" } else { "" };
        Representation::Online {
            encoder: Box::new(encoder),
            id: format!("online:{}{critic}:init={init}", cfg.aux.method.name()),
            render_quality,
        }
    };
    run_stage(Stage::Train(cfg), spec, representation, out_dir, on_event)
}

/// The loop both commands share; `stage` has been validated.
fn run_stage(
    stage: Stage,
    spec: &EvalSpec,
    representation: Representation,
    out_dir: &Path,
    on_event: &mut dyn FnMut(EvalEvent),
) -> Result<EvalSummary> {
    let sac = match stage {
        Stage::Eval(c) => c.clone(),
        Stage::Train(c) => c.sac(),
    };
    let cfg = &sac;
    // ---- bad input first: nothing is written before these pass
    if let Some(trained) = representation.training_render_quality() {
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
        check_resumable(file, stage, spec, representation.id())?;
    }

    // ---- set up
    let mut ws = Workspace::new(stage, cfg, spec, representation)?;
    let resumed_from_frame = match &saved {
        Some(file) => {
            ws.restore(file)?;
            Some(ws.frame())
        }
        None => None,
    };
    std::fs::create_dir_all(out_dir).map_err(|e| Error::checkpoint(out_dir, e.to_string()))?;
    let _claim = crate::fsutil::claim_dir(out_dir, stage.command())?;
    write_provenance(out_dir, &ws)?;
    // The evaluations the checkpoint knows of stay; a row written after it (or any row, when
    // there is no checkpoint) is evaluated again.
    let evaluated_through = ws
        .last_eval_step
        .map(|step| Frames::from_steps(step, cfg.env.action_repeat).0);
    let mut eval_log = CsvLog::open(&out_dir.join(EVAL_CSV), EVAL_HEADER, evaluated_through)?;
    let mut train_log = MetricsLog::open(&out_dir.join(TRAIN_LOG), ws.step)?;
    let mut aux_log = match &ws.representation {
        Representation::Online { encoder, .. } if encoder.trainer().is_some() => {
            Some(MetricsLog::open(&out_dir.join(AUX_LOG), encoder.objective_step())?)
        }
        _ => None,
    };
    on_event(EvalEvent::Started {
        start_frame: ws.frame(),
        num_train_frames: cfg.run.num_train_frames.0,
        resumed: resumed_from_frame.is_some(),
        encoder: ws.representation.id(),
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
        match ws.agent_step(state, aux_log.as_mut())? {
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
        if let Some(window) = ws.value_comparison.as_ref().filter(|w| w.is_complete()) {
            let path = out_dir.join(VALUE_COMPARISON_FILE);
            if !path.exists() {
                let text = serde_json::to_string_pretty(&window.result())?;
                write_bytes_atomic(&path, text.as_bytes()).map_err(|e| Error::checkpoint(&path, e.to_string()))?;
            }
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
fn check_resumable(file: &checkpoint::SafetensorsFile, stage: Stage, spec: &EvalSpec, encoder_id: &str) -> Result<()> {
    let err = |reason: String| {
        Error::checkpoint(
            &file.path,
            format!("{reason}; use a new --out-dir or delete the checkpoint"),
        )
    };
    if file.meta("lfs.kind")? != stage.checkpoint_kind() {
        return Err(err(format!(
            "is an `lfs {}` file, not an `lfs {}` checkpoint",
            file.meta("lfs.kind")?,
            stage.command()
        )));
    }
    checkpoint::check_same_version(file)?;
    let saved = stage
        .saved_resume_key(file.meta("lfs.config")?)
        .map_err(|e| err(format!("its config: {e}")))?;
    if saved != stage.resume_key()? {
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
    write(CONFIG_FILE, ws.stage_toml.clone())?;
    let info = serde_json::json!({
        "command": ws.command,
        "task": ws.spec.task.name(),
        "encoder": match &ws.spec.encoder {
            EncoderChoice::Exported(p) => p.display().to_string(),
            EncoderChoice::Random => "random".to_string(),
        },
        "encoder_sha256": ws.representation.id(),
        "encoder_render_quality": ws.representation.training_render_quality().map(RenderQuality::name),
        "render_quality": ws.cfg.env.render_quality.name(),
        "feature_cache": ws.cfg.replay.feature_cache,
        "seed": ws.cfg.run.seed,
        "version": env!("CARGO_PKG_VERSION"),
    });
    write(RUN_FILE, serde_json::to_string_pretty(&info)?)
}

/// What one agent step trains on.
struct TrainingBatch {
    sac: SacBatch,
    /// The auxiliary objective's update on these transitions (`lfs train`).
    aux: Option<UpdateMetrics>,
    /// The observations' encoding with its tape, when the critic trains the encoder.
    critic: Option<CriticFeatures>,
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
    fn new(stage: Stage, cfg: &EvalConfig, spec: &EvalSpec, representation: Representation) -> Result<Self> {
        let env_cfg = DmcConfig {
            action_repeat: cfg.env.action_repeat,
            render_quality: cfg.env.render_quality,
            ..DmcConfig::new(spec.task)
        };
        let pool = EnvPool::new(vec![env_cfg.clone(), env_cfg])?;
        let action_dim = pool.spec(TRAIN).action_dim;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.run.seed);
        let repr = representation.repr_dim();
        let agent = SacAgent::new(&cfg.agent, repr, action_dim, &Device::Cpu, &mut rng)?;
        let feature_dim = if cfg.replay.feature_cache { repr } else { 0 };
        Ok(Self {
            replay: ReplayBuffer::new(cfg.replay.capacity, FRAME_BYTES, action_dim, feature_dim),
            shift: RandomShift {
                pad: cfg.replay.random_shift_pad,
            },
            cfg: cfg.clone(),
            stage_toml: stage.to_toml()?,
            checkpoint_kind: stage.checkpoint_kind(),
            command: stage.command(),
            spec: spec.clone(),
            representation,
            pool,
            agent,
            rng,
            step: 0,
            episode: 0,
            evaluations: 0,
            last_eval_step: None,
            action_dim,
            value_comparison: match stage {
                Stage::Train(c) => ValueComparison::new(&c.aux.value_comparison),
                Stage::Eval(_) => None,
            },
        })
    }

    fn frame(&self) -> u64 {
        Frames::from_steps(self.step, self.cfg.env.action_repeat).0
    }

    /// Shapes: obs (n, 9, 84, 84) u8 -> h (n, repr), through the frozen encoder's kernels.
    fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor> {
        self.representation.encode(obs, n)
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
                let repr = self.representation.repr_dim();
                let h = &episode.features[episode.features.len() - repr..];
                return Ok(Tensor::from_slice(h, (1, repr), &Device::Cpu)?);
            }
        }
        self.encode(&self.latest_observation()?, 1)
    }

    /// Choose, update (the auxiliary objective first, for `lfs train`), step, store.
    fn agent_step(&mut self, mut state: EpisodeState, aux_log: Option<&mut MetricsLog>) -> Result<StepOutcome> {
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
            let TrainingBatch {
                sac: batch,
                aux,
                critic,
            } = self.batch()?;
            if let Some(aux) = &aux {
                state.sums.add_aux(aux);
                if let Some(log) = aux_log {
                    log.write(&AuxLog {
                        update: aux,
                        frame: self.frame(),
                    })?;
                }
            }
            self.observe_values(&batch)?;
            let (metrics, obs_grad) = self.agent.update_with_obs_grad(&batch, self.step, &mut self.rng)?;
            if let (Some(features), Representation::Online { encoder, .. }) = (critic, &mut self.representation) {
                let dh = obs_grad.ok_or_else(|| Error::Training("the critic gave the encoder no gradient".into()))?;
                encoder.critic_step(&features, &dh)?;
            }
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
            aux_loss: state.sums.aux_mean(|m| m.loss),
            aux_num_synthetic: state.sums.aux_mean(|m| m.num_synthetic as f64),
        }))
    }

    /// A training batch: shifted and encoded pixels, or cached features. With an online
    /// encoder, its objective first takes one update on the batch's transitions (Algorithm 1),
    /// and the batch is encoded by the updated encoder.
    fn batch(&mut self) -> Result<TrainingBatch> {
        let n = self.cfg.agent.batch_size;
        let mut t = self.replay.sample(n, &mut self.rng)?;
        let aux = self.aux_update(&t)?;
        let mut critic = None;
        let (obs, next_obs) = if self.cfg.replay.feature_cache {
            let repr = self.representation.repr_dim();
            (
                Tensor::from_vec(std::mem::take(&mut t.obs_features), (n, repr), &Device::Cpu)?,
                Tensor::from_vec(std::mem::take(&mut t.next_obs_features), (n, repr), &Device::Cpu)?,
            )
        } else {
            let dims = (n, 3 * FRAME_STACK, FRAME_SIZE, FRAME_SIZE);
            self.shift.apply_batch(&mut t.obs, dims, &mut self.rng);
            self.shift.apply_batch(&mut t.next_obs, dims, &mut self.rng);
            let obs = match &self.representation {
                Representation::Online { encoder, .. } if encoder.critic_trains_encoder() => {
                    // The critic's gradient reaches the encoder through h: a leaf whose
                    // gradient the encoder's own backward takes from there.
                    let features = encoder.encode_for_critic(&t.obs, n)?;
                    let h = candle_core::Var::from_tensor(&features.encoded.h)?.as_tensor().clone();
                    critic = Some(features);
                    h
                }
                _ => self.encode(&t.obs, n)?,
            };
            (obs, self.encode(&t.next_obs, n)?)
        };
        let sac = SacBatch {
            obs,
            action: Tensor::from_vec(t.action, (n, self.action_dim), &Device::Cpu)?,
            reward: Tensor::from_vec(t.reward, (n, 1), &Device::Cpu)?,
            next_obs,
        };
        Ok(TrainingBatch { sac, aux, critic })
    }

    /// The value comparison's step, when the window is open: the critic's values of the SAC
    /// batch's observations and of the synthetic ones LNC just selected.
    fn observe_values(&mut self, batch: &SacBatch) -> Result<()> {
        let frame = self.frame();
        if !self.value_comparison.as_ref().is_some_and(|w| w.wants(frame)) {
            return Ok(());
        }
        let uniform = |n: usize, rng: &mut ChaCha8Rng| -> Result<Tensor> {
            let a: Vec<f32> = (0..n * self.action_dim)
                .map(|_| rng.random_range(-1.0f32..=1.0))
                .collect();
            Ok(Tensor::from_vec(a, (n, self.action_dim), &Device::Cpu)?)
        };
        let n = batch.obs.dim(0)?;
        let real = self.agent.min_q(&batch.obs, &uniform(n, &mut self.rng)?)?;
        let selected = match &self.representation {
            Representation::Online { encoder, .. } => encoder.trainer().and_then(|t| t.last_selected_synthetic()),
            Representation::Frozen(_) => None,
        };
        let synthetic = match selected {
            Some(pairs) if pairs.len > 0 => {
                let h = self.representation.encode(&pairs.prev, pairs.len)?;
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
        match &mut self.representation {
            Representation::Online { encoder, .. } => encoder.update(t, &self.replay),
            Representation::Frozen(_) => Ok(None),
        }
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
        meta.insert("lfs.kind".into(), self.checkpoint_kind.into());
        meta.insert("lfs.config".into(), self.stage_toml.clone());
        if let Representation::Online { encoder, .. } = &self.representation {
            let (aux_tensors, counters) = encoder.state()?;
            tensors.extend(aux_tensors.into_iter().map(|(k, v)| (format!("aux.{k}"), v)));
            meta.extend(counters.into_iter().map(|(k, v)| (format!("lfs.aux_{k}"), v)));
        }
        meta.insert("lfs.task".into(), self.spec.task.name().into());
        meta.insert("lfs.encoder".into(), self.representation.id().to_string());
        meta.insert("lfs.step".into(), self.step.to_string());
        meta.insert("lfs.episode".into(), self.episode.to_string());
        meta.insert("lfs.evaluations".into(), self.evaluations.to_string());
        if let Some(step) = self.last_eval_step {
            meta.insert("lfs.last_eval_step".into(), step.to_string());
        }
        meta.insert("lfs.rng".into(), rng_to_string(&self.rng));
        if let Some(window) = &self.value_comparison {
            meta.insert("lfs.value_comparison".into(), serde_json::to_string(window)?);
        }
        meta.insert(checkpoint::VERSION_KEY.into(), checkpoint::THIS_VERSION.into());
        checkpoint::save_atomic(path, &tensors, &meta)
    }

    fn restore(&mut self, file: &checkpoint::SafetensorsFile) -> Result<()> {
        let err = |reason: String| Error::checkpoint(&file.path, reason);
        let number = |key: &str| -> Result<u64> { file.meta(key)?.parse().map_err(|e| err(format!("`{key}`: {e}"))) };
        self.agent.load_state(&file.tensors, &file.metadata)?;
        if let Representation::Online { encoder, .. } = &mut self.representation {
            let counters: BTreeMap<String, String> = file
                .metadata
                .iter()
                .filter_map(|(k, v)| k.strip_prefix("lfs.aux_").map(|k| (k.to_string(), v.clone())))
                .collect();
            let tensors = checkpoint::strip_prefix(&file.tensors, "aux.");
            encoder.load_state(&tensors, &counters, &file.path)?;
        }
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
        if self.value_comparison.is_some() {
            self.value_comparison = Some(
                serde_json::from_str(file.meta("lfs.value_comparison")?)
                    .map_err(|e| err(format!("`lfs.value_comparison`: {e}")))?,
            );
        }
        Ok(())
    }
}

/// Sums of an episode's update metrics, for their means.
#[derive(Debug, Default)]
struct MetricSums {
    count: u64,
    actor_count: u64,
    sum: SacMetrics,
    /// The auxiliary updates' metrics (`lfs train`).
    aux: Vec<UpdateMetrics>,
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

    fn add_aux(&mut self, m: &UpdateMetrics) {
        self.aux.push(m.clone());
    }

    /// The mean of `f` over the episode's auxiliary updates; None without any.
    fn aux_mean(&self, f: impl Fn(&UpdateMetrics) -> f64) -> Option<f64> {
        (!self.aux.is_empty()).then(|| self.aux.iter().map(f).sum::<f64>() / self.aux.len() as f64)
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
