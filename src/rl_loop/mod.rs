//! The RL loop `lfs eval` ([`eval`]) and `lfs train` ([`train`]) share (docs/design.md §6–§8,
//! §13): an agent ([`crate::rl::Agent`]) on one DMControl task on top of a [`Representation`]. Evaluations (deterministic tanh μ, their own environment
//! and seeds) run at frame 0, every `eval_every_frames` and at the end, one row each in
//! `eval.csv`; every training episode adds a line to `train.jsonl`, every auxiliary update one
//! to `aux.jsonl`. Checkpoints (agent, optimisers, replay, representation, RNG, counters) are
//! written atomically at episode ends, so a killed run resumes at its last one and continues
//! exactly as an uninterrupted run would have from there. Nothing here prints: progress goes
//! to the caller's callback.
//!
//! What differs between runs comes in through three seams: the [`Stage`] (the command's name,
//! its whole config for provenance and resume, the value comparison), the [`Representation`]
//! (constants for `lfs eval`, an encoder trained online for `lfs train`) and the agent its
//! config names ([`crate::rl::AgentConfig::visit`]). A new agent or way to make features is a new implementation, not new arms
//! here.

mod checkpoint;
pub mod config;
pub mod eval;
pub mod explore;
mod logs;
mod representation;
mod stage;
pub mod state_entropy;
mod step_times;
pub mod train;
pub mod value_comparison;
mod workspace;

use std::path::Path;
use std::time::Instant;

pub use config::{Frames, LoopConfig, RenderQualitySetting, RenderQualitySource};
pub use logs::{AuxLog, AuxMeans, EpisodeLog, EvalRow, TrainLine, EVAL_HEADER, EVAL_TAG, FRAME_FIELD};
pub use representation::{
    CriticFeatures, EncoderChoice, EncoderProvenance, FrozenFeatures, Representation, RepresentationState,
};
pub use stage::{resolve_render_quality, LoopEvent, LoopSpec, LoopStart, LoopSummary, Stage};
pub use step_times::StepTimes;
pub use value_comparison::ValueComparison;

use crate::env::RenderQuality;
use crate::fsutil::write_bytes_atomic;
use crate::log_files::{CsvLog, MetricsLog, Mirror};
use crate::nn::checkpoint as safetensors_file;
use crate::rl::{Agent, AgentVisitor, Registered};
use crate::run_dir::{
    AUX_LOG, CHECKPOINT_FILE, CONFIG_FILE, EVAL_CSV, RUN_FILE, TRAIN_LOG, VALUE_COMPARISON_FILE, VIDEO_DIR,
};
use crate::tensorboard::{EventFile, SharedEventFile};
use crate::{Error, Result};
use workspace::{EpisodeState, StepOutcome, Workspace};

/// Trains the agent `stage.rl.agent` names into `out_dir` (see [`run_agent`]).
pub fn run(
    stage: Stage,
    spec: &LoopSpec,
    representation: Box<dyn Representation>,
    render_source: RenderQualitySource,
    out_dir: &Path,
    on_event: &mut dyn FnMut(LoopEvent),
) -> Result<LoopSummary> {
    let agent = stage.rl.agent.clone();
    agent.visit(RunAgent {
        stage,
        spec,
        representation,
        render_source,
        out_dir,
        on_event,
    })
}

/// [`run_agent`] with the agent a config names.
struct RunAgent<'a> {
    stage: Stage,
    spec: &'a LoopSpec,
    representation: Box<dyn Representation>,
    render_source: RenderQualitySource,
    out_dir: &'a Path,
    on_event: &'a mut dyn FnMut(LoopEvent),
}

impl AgentVisitor for RunAgent<'_> {
    type Output = Result<LoopSummary>;

    fn visit<A: Registered>(self) -> Self::Output {
        let RunAgent {
            stage,
            spec,
            representation,
            render_source,
            out_dir,
            on_event,
        } = self;
        run_agent::<A>(stage, spec, representation, render_source, out_dir, on_event)
    }
}

/// Trains agent `A` into `out_dir`, resuming a checkpoint there; `stage.rl` has been
/// validated and its render quality resolved (see [`resolve_render_quality`]).
pub fn run_agent<A: Registered>(
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
    on_event(LoopEvent::Started(loop_start(
        &ws,
        num_train_frames,
        resumed_from_frame.is_some(),
    )));

    // ---- the loop
    let start = Instant::now();
    let mut last_checkpoint_step = ws.step;
    let mut last_eval = None;
    let mut episode: Option<EpisodeState<A>> = None;
    loop {
        if eval_due(&ws, eval_every, total_steps) {
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

/// Where the run starts, and what it keeps on its device (or why not), for its first line.
fn loop_start<A: Agent>(ws: &Workspace<A>, num_train_frames: u64, resumed: bool) -> LoopStart<'_> {
    LoopStart {
        start_frame: ws.frame(),
        num_train_frames,
        resumed,
        encoder: ws.representation.id(),
        device_cache: ws
            .device_cache
            .as_ref()
            .map(|cache| cache.describe())
            .or_else(|| ws.device_frames.as_ref().map(|frames| frames.describe()))
            .or_else(|| ws.device_note.clone()),
    }
}

/// Whether an evaluation is due: at step 0, at every multiple of `eval_every` after the last
/// evaluation (mid-episode too: evaluation has its own environment), and once at the end of
/// the budget.
fn eval_due<A: Agent>(ws: &Workspace<A>, eval_every: u64, total_steps: u64) -> bool {
    let due = ws
        .last_eval_step
        .is_none_or(|last| ws.step >= (last / eval_every + 1) * eval_every);
    let at_end = ws.step >= total_steps && ws.last_eval_step != Some(ws.step);
    due || at_end
}

/// The loop's state: fresh, or restored from the checkpoint at `checkpoint` (with the frame it
/// resumes at) after checking it is this run's. Bad input fails here, before anything is written.
fn workspace<A: Registered>(
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
