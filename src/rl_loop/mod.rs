//! The RL loop `lfs eval` and `lfs train` share (docs/design.md §6–§8, §13): an [`Agent`]
//! (SAC or DrQ-v2) on
//! one DMControl task on top of a [`Representation`]. Evaluations (deterministic tanh μ, their own environment
//! and seeds) run at frame 0, every `eval_every_frames` and at the end, one row each in
//! `eval.csv`; every training episode adds a line to `train.jsonl`, every auxiliary update one
//! to `aux.jsonl`. Checkpoints (agent, optimisers, replay, representation, RNG, counters) are
//! written atomically at episode ends, so a killed run resumes at its last one and continues
//! exactly as an uninterrupted run would have from there. Nothing here prints: progress goes
//! to the caller's callback.
//!
//! What differs between runs comes in through three seams: the [`Stage`] (the command's name,
//! its whole config for provenance and resume, the value comparison), the [`Representation`]
//! (constants for `lfs eval`, an encoder trained online for `lfs train`) and the [`Agent`] the
//! command chooses. A new agent or way to make features is a new implementation, not new arms
//! here.

pub mod agent;
mod checkpoint;
pub mod config;
mod logs;
mod representation;
mod step_times;
pub mod value_comparison;
mod workspace;

use std::path::Path;
use std::time::Instant;

pub use agent::{Agent, AgentConfig, AgentKind, AgentState, AgentUpdate, DrQv2Sums, EpisodeSums, SacSums, TacoSums};
pub use config::{EvalConfig, Frames, RenderQualitySetting, RenderQualitySource};
pub use logs::{AuxLog, AuxMeans, EpisodeLog, EvalRow, TrainLine, EVAL_HEADER, EVAL_TAG, FRAME_FIELD};
pub use representation::{
    CriticFeatures, EncoderChoice, EncoderProvenance, FrozenFeatures, Representation, RepresentationState,
};
pub use step_times::StepTimes;
pub use value_comparison::ValueComparison;

use crate::device::Backend;
use crate::env::{RenderQuality, Task};
use crate::fsutil::write_bytes_atomic;
use crate::metrics::{CsvLog, MetricsLog, Mirror};
use crate::nn::checkpoint as safetensors_file;
use crate::rl::{DrQv2Agent, SacAgent, TacoAgent};
use crate::run_dir::{
    AUX_LOG, CHECKPOINT_FILE, CONFIG_FILE, EVAL_CSV, RUN_FILE, TRAIN_LOG, VALUE_COMPARISON_FILE, VIDEO_DIR,
};
use crate::tensorboard::{EventFile, SharedEventFile};
use crate::{Error, Result};
use workspace::{EpisodeState, StepOutcome, Workspace};

/// What a run is, beyond its config.
#[derive(Debug, Clone)]
pub struct LoopSpec {
    pub task: Task,
    pub encoder: EncoderChoice,
    /// Evaluate on a render quality other than the encoder's training videos'.
    pub allow_render_quality_mismatch: bool,
    /// Write the first episode of every evaluation as `eval_video/<frame>.mp4`.
    pub save_video: bool,
}

/// Where a run starts: at frame 0, or resumed.
#[derive(Debug)]
pub struct LoopStart<'a> {
    pub start_frame: u64,
    pub num_train_frames: u64,
    pub resumed: bool,
    /// The representation's identity.
    pub encoder: &'a str,
}

impl LoopStart<'_> {
    /// "starting, N frames" or "resuming at frame F of N", for messages.
    pub fn how(&self) -> String {
        match self.resumed {
            true => format!("resuming at frame {} of {}", self.start_frame, self.num_train_frames),
            false => format!("starting, {} frames", self.num_train_frames),
        }
    }
}

/// What the loop reports to its caller.
#[derive(Debug)]
pub enum LoopEvent<'a> {
    Started(LoopStart<'a>),
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
pub struct LoopSummary {
    pub frames_done: u64,
    pub resumed_from_frame: Option<u64>,
    pub last_eval: Option<EvalRow>,
}

/// What the loop needs to know of the command it runs for, beyond the RL loop's sections.
pub struct Stage {
    /// `eval` or `train`: the command, in messages, `run.json` and the folder's claim.
    pub command: &'static str,
    /// The `lfs.kind` of its checkpoints.
    pub checkpoint_kind: &'static str,
    /// The RL loop's sections of the config (all of `lfs eval`'s: run, env, agent, replay), its
    /// render quality resolved.
    pub rl: EvalConfig,
    /// The whole config as TOML (`config.resolved.toml`, the checkpoint's `lfs.config`).
    pub toml: String,
    /// What a resumed run must share with its checkpoint.
    pub resume_key: String,
    /// The resume key of a config a checkpoint recorded (its TOML).
    pub saved_resume_key: fn(&str) -> Result<String>,
    /// The paper's value comparison window, when asked for (`lfs train`); the loop takes it
    /// over at the start.
    pub value_comparison: Option<ValueComparison>,
    /// `rl.run.device`, opened once (a CUDA device opened twice is two devices to candle): the
    /// agent, the representation and every batch live there.
    pub backend: Backend,
}

/// Pins `env.render_quality` (`"encoder"` resolved against `representation`) and says where the
/// quality came from; a pinned quality the encoder was not trained at is refused unless `spec`
/// allows it.
pub fn resolve_render_quality(
    env: &mut config::EvalEnvConfig,
    representation: &dyn Representation,
    spec: &LoopSpec,
) -> Result<RenderQualitySource> {
    let (quality, source) = env.render_quality.resolve(
        representation.training_render_quality(),
        spec.allow_render_quality_mismatch,
    )?;
    env.render_quality = RenderQualitySetting::Pinned(quality);
    Ok(source)
}

/// Trains the agent `stage.rl.agent` names into `out_dir` (see [`run_agent`]).
pub fn run(
    stage: Stage,
    spec: &LoopSpec,
    representation: Box<dyn Representation>,
    render_source: RenderQualitySource,
    out_dir: &Path,
    on_event: &mut dyn FnMut(LoopEvent),
) -> Result<LoopSummary> {
    match stage.rl.agent.kind() {
        AgentKind::Sac => run_agent::<SacAgent>(stage, spec, representation, render_source, out_dir, on_event),
        AgentKind::DrQv2 => run_agent::<DrQv2Agent>(stage, spec, representation, render_source, out_dir, on_event),
        AgentKind::Taco => run_agent::<TacoAgent>(stage, spec, representation, render_source, out_dir, on_event),
    }
}

/// Trains agent `A` into `out_dir`, resuming a checkpoint there; `stage.rl` has been
/// validated and its render quality resolved (see [`resolve_render_quality`]).
pub fn run_agent<A: Agent>(
    stage: Stage,
    spec: &LoopSpec,
    representation: Box<dyn Representation>,
    render_source: RenderQualitySource,
    out_dir: &Path,
    on_event: &mut dyn FnMut(LoopEvent),
) -> Result<LoopSummary> {
    let checkpoint = out_dir.join(CHECKPOINT_FILE);
    let (mut ws, resumed_from_frame) = workspace::<A>(stage, spec, representation, &checkpoint)?;
    // The budget and cadences, in agent steps.
    let (run_cfg, repeat) = (&ws.stage.rl.run, ws.stage.rl.env.action_repeat);
    let num_train_frames = run_cfg.num_train_frames.0;
    let total_steps = run_cfg.num_train_frames.to_steps(repeat);
    let eval_every = run_cfg.eval_every_frames.to_steps(repeat);
    let checkpoint_every = run_cfg.checkpoint_every_frames.to_steps(repeat);
    std::fs::create_dir_all(out_dir).map_err(|e| Error::checkpoint(out_dir, e.to_string()))?;
    let _claim = crate::fsutil::claim_dir(out_dir, ws.stage.command)?;
    write_provenance(out_dir, &ws, render_source)?;
    let mut logs = Logs::open(out_dir, &ws, resumed_from_frame.is_some())?;
    on_event(LoopEvent::Started(LoopStart {
        start_frame: ws.frame(),
        num_train_frames,
        resumed: resumed_from_frame.is_some(),
        encoder: ws.representation.id(),
    }));

    // ---- the loop
    let start = Instant::now();
    let mut last_checkpoint_step = ws.step;
    let mut last_eval = None;
    let mut episode: Option<EpisodeState<A>> = None;
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
            logs.evaluation(&row)?;
            on_event(LoopEvent::Evaluation(&row));
            last_eval = Some(row);
        }
        if ws.step >= total_steps {
            break;
        }
        let state = match episode.take() {
            Some(state) => state,
            None => ws.start_episode()?,
        };
        match ws.agent_step(state, logs.aux.as_mut())? {
            StepOutcome::Continue(state) => episode = Some(state),
            StepOutcome::Finished(log, agent, aux) => {
                logs.train.write(&TrainLine {
                    episode: &log,
                    agent: (log.num_updates > 0).then_some(&agent),
                    aux: &aux,
                })?;
                on_event(LoopEvent::Episode(&log));
                if ws.step - last_checkpoint_step >= checkpoint_every && ws.step < total_steps {
                    ws.save_checkpoint(&checkpoint)?;
                    last_checkpoint_step = ws.step;
                    on_event(LoopEvent::Checkpoint { frame: ws.frame() });
                }
            }
            StepOutcome::Lost(error) => on_event(LoopEvent::EpisodeLost { error }),
        }
        write_value_comparison(out_dir, ws.value_comparison.as_ref())?;
        on_event(LoopEvent::Progress { frame: ws.frame() });
    }
    ws.save_checkpoint(&checkpoint)?;
    on_event(LoopEvent::Checkpoint { frame: ws.frame() });
    Ok(LoopSummary {
        frames_done: ws.frame(),
        resumed_from_frame,
        last_eval,
    })
}

/// The loop's state: fresh, or restored from the checkpoint at `checkpoint` (with the frame it
/// resumes at) after checking it is this run's. Bad input fails here, before anything is written.
fn workspace<A: Agent>(
    stage: Stage,
    spec: &LoopSpec,
    representation: Box<dyn Representation>,
    checkpoint: &Path,
) -> Result<(Workspace<A>, Option<u64>)> {
    let saved = match checkpoint.exists() {
        true => Some(safetensors_file::load(checkpoint)?),
        false => None,
    };
    if let Some(file) = &saved {
        checkpoint::check_resumable(file, &stage, spec, representation.id())?;
    }
    let mut ws = Workspace::<A>::new(stage, spec, representation)?;
    let resumed_from_frame = match &saved {
        Some(file) => {
            ws.restore(file)?;
            Some(ws.frame())
        }
        None => None,
    };
    Ok((ws, resumed_from_frame))
}

/// The run's logs, opened for appending; on resume each is cut back to what the checkpoint
/// knows, so a resumed run's logs equal an uninterrupted one's. With `run.tensorboard` their
/// numbers also go to the run's TensorBoard event file, against frames (DrQ-v2's x).
struct Logs {
    eval: CsvLog,
    train: MetricsLog,
    /// `aux.jsonl`, when the representation has an objective.
    aux: Option<MetricsLog>,
    events: Option<SharedEventFile>,
}

impl Logs {
    fn open<A: Agent>(out_dir: &Path, ws: &Workspace<A>, resumed: bool) -> Result<Self> {
        // The evaluations the checkpoint knows of stay; a row written after it (or any row,
        // when there is no checkpoint) is evaluated again.
        let evaluated_through = ws
            .last_eval_step
            .map(|step| Frames::from_steps(step, ws.stage.rl.env.action_repeat).0);
        let frame = ws.frame();
        let events = match ws.stage.rl.run.tensorboard {
            true => Some(EventFile::open_shared(out_dir, |p| {
                match p.tags.iter().all(|t| t.starts_with(EVAL_TAG)) {
                    true => evaluated_through.is_some_and(|f| p.x <= f),
                    false => resumed && p.x <= frame,
                }
            })?),
            false => None,
        };
        let mirror = || events.clone().map(|events| Mirror { events, x: FRAME_FIELD });
        Ok(Self {
            eval: CsvLog::open(&out_dir.join(EVAL_CSV), EVAL_HEADER, evaluated_through)?,
            train: MetricsLog::open(&out_dir.join(TRAIN_LOG), ws.step)?.mirrored(mirror()),
            aux: match ws.representation.aux_step() {
                Some(step) => Some(MetricsLog::open(&out_dir.join(AUX_LOG), step)?.mirrored(mirror())),
                None => None,
            },
            events,
        })
    }

    /// Appends an evaluation to `eval.csv` (and TensorBoard's `eval/<column>` at its frame).
    fn evaluation(&mut self, row: &EvalRow) -> Result<()> {
        self.eval.append(&row.csv())?;
        if let Some(events) = &self.events {
            events.borrow_mut().write(row.frame, &row.scalars())?;
        }
        Ok(())
    }
}

/// `value_comparison.json`, once its window is complete.
fn write_value_comparison(out_dir: &Path, window: Option<&ValueComparison>) -> Result<()> {
    let Some(window) = window.filter(|w| w.is_complete()) else {
        return Ok(());
    };
    let path = out_dir.join(VALUE_COMPARISON_FILE);
    if !path.exists() {
        let text = serde_json::to_string_pretty(&window.result())?;
        write_bytes_atomic(&path, text.as_bytes()).map_err(|e| Error::checkpoint(&path, e.to_string()))?;
    }
    Ok(())
}

/// `config.resolved.toml` and `run.json` (task, encoder, render quality, feature cache).
fn write_provenance<A: Agent>(out_dir: &Path, ws: &Workspace<A>, render_source: RenderQualitySource) -> Result<()> {
    let write = |name: &str, text: String| {
        let path = out_dir.join(name);
        write_bytes_atomic(&path, text.as_bytes()).map_err(|e| Error::checkpoint(&path, e.to_string()))
    };
    write(CONFIG_FILE, ws.stage.toml.clone())?;
    let info = serde_json::json!({
        "command": ws.stage.command,
        "task": ws.spec.task.name(),
        "encoder": match &ws.spec.encoder {
            EncoderChoice::Exported(p) => p.display().to_string(),
            EncoderChoice::Random => "random".to_string(),
        },
        "encoder_sha256": ws.representation.id(),
        "encoder_render_quality": ws.representation.training_render_quality().map(RenderQuality::name),
        "render_quality": ws.render_quality.name(),
        "render_quality_from": render_source.name(),
        "feature_cache": ws.stage.rl.replay.feature_cache,
        "feature_cache_dtype": ws.stage.rl.replay.feature_cache.then_some(ws.stage.rl.replay.feature_cache_dtype.name()),
        "seed": ws.stage.rl.run.seed,
        "version": env!("CARGO_PKG_VERSION"),
    });
    write(RUN_FILE, serde_json::to_string_pretty(&info)?)
}
