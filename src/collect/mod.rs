//! `lfs collect`: the paper's action-free demonstration videos (docs/design.md §8).
//!
//! A uniform random policy runs in parallel dm_control workers. Each finished episode goes to a
//! [`Sink`]: by default ([`CollectFormat::Videos`], `videos.rs`) one lossless video
//! `out/<task>/<episode>.mkv` (the first folder level names the task, which is how `lfs ingest`
//! labels them) and a sidecar `out/<task>/<episode>.json` with the seed, action repeat, render
//! quality, actions, rewards and the physical state of every frame, written to temporary names
//! and renamed, the sidecar last, so an episode with a sidecar is complete; with `--dataset`
//! ([`CollectFormat::Dataset`], `dataset.rs`) straight into a dataset of Parquet frame shards,
//! as `lfs ingest` makes of those videos, without FFmpeg. Either way a second run keeps the
//! complete episodes and redoes the rest.

mod dataset;
mod sidecar;
mod videos;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub use dataset::NO_VIDEO;
pub use sidecar::{
    parse_sidecar, read_sidecar, read_sidecar_beside, sidecar_path, EpisodeSidecar, FoundSidecar, SOURCE,
};
pub use videos::episode_paths;

use crate::env::{DmcConfig, EnvCommand, EnvPool, EnvSpec, PoolReply, RenderQuality, Task, TimeStep, MAX_SEED};
use crate::{Error, Result};

/// An episode is given up after this many lost attempts (worker crashes, PhysicsError).
const MAX_ATTEMPTS: u32 = 3;

/// What to record.
#[derive(Debug, Clone)]
pub struct CollectConfig {
    pub tasks: Vec<Task>,
    /// Episodes per task.
    pub episodes: usize,
    /// Frames per video at most, the reset frame included (an episode that ends sooner, like
    /// reach_duplo's 125 agent steps, gives a shorter video).
    pub max_frames: usize,
    /// The video folder, or the dataset (`format`).
    pub out_dir: PathBuf,
    pub format: CollectFormat,
    /// Worker processes running at once.
    pub workers: usize,
    /// Episode `i` is reset with seed `seed + i` (a redone episode: `seed + attempt * episodes +
    /// i`); its random actions come from the same seed.
    pub seed: u64,
    pub action_repeat: u32,
    pub render_quality: RenderQuality,
    /// Python interpreter with python/requirements.txt installed.
    pub python: PathBuf,
}

/// What `lfs collect` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectFormat {
    /// A lossless video and a sidecar per episode, for `lfs ingest` (`--out`).
    Videos,
    /// A dataset of Parquet frame shards, as `lfs ingest` makes of those videos (`--dataset`).
    Dataset,
}

/// Where finished episodes go: a video folder ([`videos::VideoFolder`]) or a dataset
/// ([`dataset::DatasetSink`]).
trait Sink {
    /// The episode was finished by an earlier run. One recorded with other settings (task,
    /// action repeat, render quality, --video-frames, states) is an error naming it: one
    /// folder or dataset must not mix them.
    fn is_complete(&self, task: Task, episode: usize) -> Result<bool>;
    /// The sidecar's `codec`: how the frames are stored.
    fn codec(&self) -> &'static str;
    /// Writes a finished episode, frames (84, 84, 3) RGB, the reset frame first; where to.
    fn write(&mut self, sidecar: EpisodeSidecar, frames: Vec<Vec<u8>>) -> Result<PathBuf>;
    /// Makes every written episode durable.
    fn finish(self: Box<Self>) -> Result<()>;
}

fn open_sink(config: &CollectConfig) -> Result<Box<dyn Sink>> {
    Ok(match config.format {
        CollectFormat::Videos => Box::new(videos::VideoFolder::open(config)?),
        CollectFormat::Dataset => Box::new(dataset::DatasetSink::open(config)?),
    })
}

/// The settings of `config` an episode of `task` is recorded with, and those `sidecar` was
/// recorded with, as words; an error naming `what` when they differ.
fn check_settings(config: &CollectConfig, task: Task, sidecar: &EpisodeSidecar, what: &str) -> Result<()> {
    let describe = |task: Task, repeat: u32, quality: RenderQuality, frames: usize, states: bool| {
        let states = if states {
            "per-frame states"
        } else {
            "no per-frame states"
        };
        format!("task {task}, action repeat {repeat}, render quality {quality}, --video-frames {frames}, {states}")
    };
    let ours = describe(
        task,
        config.action_repeat,
        config.render_quality,
        config.max_frames,
        true,
    );
    let theirs = describe(
        sidecar.task,
        sidecar.action_repeat,
        sidecar.render_quality,
        sidecar.max_frames,
        sidecar.has_states(),
    );
    if ours != theirs {
        let (noun, other) = match config.format {
            CollectFormat::Videos => ("folder", "--out folder"),
            CollectFormat::Dataset => ("dataset", "--dataset"),
        };
        return Err(Error::Config(format!(
            "{what} was recorded with {theirs}; this run asks for {ours}; one {noun} must not mix them: use \
             another {other}"
        )));
    }
    Ok(())
}

/// Progress reports, for a progress bar or a log.
#[derive(Debug, Clone)]
pub enum CollectEvent {
    /// Before any episode runs.
    Started {
        episodes: usize,
        already_done: usize,
        max_frames_to_record: usize,
    },
    /// New frames were recorded (all slots of one pool call).
    Frames(usize),
    /// An episode is written: its video and sidecar are in place, or it is handed to the
    /// dataset's writer (appended on its thread, committed within a minute and at the end).
    EpisodeDone {
        task: Task,
        episode: usize,
        num_frames: usize,
        written_to: PathBuf,
    },
    /// An episode was lost (the worker died or dm_control raised) and will be redone.
    EpisodeLost { task: Task, episode: usize, reason: String },
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct CollectSummary {
    pub episodes_written: usize,
    /// Complete episodes found from an earlier run and kept.
    pub episodes_kept: usize,
    pub frames_written: usize,
    pub episodes_lost: usize,
    pub worker_restarts: u32,
    pub seconds: f64,
}

/// One episode to record.
#[derive(Debug, Clone, Copy)]
struct Job {
    task: Task,
    episode: usize,
    attempt: u32,
}

impl Job {
    /// `base + attempt * episodes + episode`: distinct for every episode and attempt of a task
    /// (checked to fit dm_control's 32-bit seeds in [`validate`]).
    fn seed(&self, base: u64, episodes: usize) -> u64 {
        base + u64::from(self.attempt) * episodes as u64 + self.episode as u64
    }
}

/// An episode being recorded in one pool slot.
struct Recording {
    job: Job,
    seed: u64,
    /// The random policy, seeded with `seed`.
    policy: StdRng,
    /// (84, 84, 3) RGB frames, the reset frame first.
    frames: Vec<Vec<u8>>,
    /// The physical state at each frame (one row per entry of `frames`).
    states: Vec<Vec<f64>>,
    /// One action per agent step sent so far.
    actions: Vec<Vec<f32>>,
    /// One reward per agent step replied so far.
    rewards: Vec<f64>,
    /// dm_control ended the episode.
    ended: bool,
}

/// Records the videos `config` asks for, keeping complete ones from an earlier run.
pub fn collect(config: &CollectConfig, on_event: &mut dyn FnMut(CollectEvent)) -> Result<CollectSummary> {
    validate(config)?;
    let mut sink = open_sink(config)?;
    let start = Instant::now();
    let mut summary = CollectSummary::default();
    // Pending episodes per task; a slot keeps taking its own task's episodes.
    let mut queues: BTreeMap<Task, VecDeque<Job>> = BTreeMap::new();
    for &task in &config.tasks {
        for episode in 0..config.episodes {
            if sink.is_complete(task, episode)? {
                summary.episodes_kept += 1;
            } else {
                queues.entry(task).or_default().push_back(Job {
                    task,
                    episode,
                    attempt: 0,
                });
            }
        }
    }
    let pending: usize = queues.values().map(VecDeque::len).sum();
    on_event(CollectEvent::Started {
        episodes: config.tasks.len() * config.episodes,
        already_done: summary.episodes_kept,
        max_frames_to_record: pending * config.max_frames,
    });
    if pending > 0 {
        // Spread the first workers over the tasks that have work.
        let tasks: Vec<Task> = queues.keys().copied().collect();
        let configs = (0..config.workers.min(pending))
            .map(|i| worker_config(config, tasks[i % tasks.len()]))
            .collect();
        let pool = EnvPool::new(configs)?;
        let recordings = (0..pool.len()).map(|_| None).collect();
        let mut collector = Collector {
            config,
            pool,
            recordings,
            queues,
            summary,
            sink,
        };
        let ran = collector.run(on_event);
        summary = collector.summary;
        summary.worker_restarts = collector.pool.restarts();
        sink = collector.sink;
        if let Err(e) = ran {
            // Keep what was written (a dataset commits its finished episodes) for the next run.
            let _ = sink.finish();
            return Err(e);
        }
    }
    sink.finish()?;
    summary.seconds = start.elapsed().as_secs_f64();
    Ok(summary)
}

/// The pool, the episode each slot is recording, and the episodes still to do.
struct Collector<'a> {
    config: &'a CollectConfig,
    pool: EnvPool,
    recordings: Vec<Option<Recording>>,
    queues: BTreeMap<Task, VecDeque<Job>>,
    summary: CollectSummary,
    sink: Box<dyn Sink>,
}

impl Collector<'_> {
    /// Steps every slot until no episode is left.
    fn run(&mut self, on_event: &mut dyn FnMut(CollectEvent)) -> Result<()> {
        loop {
            let commands = (0..self.pool.len())
                .map(|slot| self.next_command(slot))
                .collect::<Result<Vec<_>>>()?;
            if commands.iter().all(Option::is_none) {
                return Ok(());
            }
            let replies = self.pool.execute(&commands)?;
            let mut new_frames = 0;
            for (slot, reply) in replies.into_iter().enumerate() {
                match reply {
                    PoolReply::Idle => {}
                    PoolReply::Ready(step) => {
                        new_frames += 1;
                        self.record(slot, step, on_event)?;
                    }
                    PoolReply::Broken(error) => self.lose(slot, &error, on_event)?,
                }
            }
            on_event(CollectEvent::Frames(new_frames));
        }
    }

    /// A random action for a slot that is recording, a reset for one that starts the next
    /// episode (after switching its worker to that episode's task if needed), else nothing.
    fn next_command(&mut self, slot: usize) -> Result<Option<EnvCommand>> {
        if let Some(rec) = self.recordings[slot].as_mut() {
            let action: Vec<f32> = (0..self.pool.spec(slot).action_dim)
                .map(|_| rec.policy.random_range(-1.0f32..=1.0))
                .collect();
            rec.actions.push(action.clone());
            return Ok(Some(EnvCommand::Step { action }));
        }
        let Some(job) = next_job(&mut self.queues, self.pool.config(slot).task) else {
            return Ok(None);
        };
        if self.pool.config(slot).task != job.task {
            self.pool.replace(slot, worker_config(self.config, job.task))?;
        }
        let seed = job.seed(self.config.seed, self.config.episodes);
        self.recordings[slot] = Some(Recording {
            job,
            seed,
            policy: StdRng::seed_from_u64(seed),
            frames: Vec::with_capacity(self.config.max_frames),
            states: Vec::with_capacity(self.config.max_frames),
            actions: Vec::new(),
            rewards: Vec::new(),
            ended: false,
        });
        Ok(Some(EnvCommand::Reset { seed }))
    }

    /// Adds a step's frame and state (and reward, after the reset) to the slot's recording and
    /// writes the episode out when it is complete.
    fn record(&mut self, slot: usize, step: TimeStep, on_event: &mut dyn FnMut(CollectEvent)) -> Result<()> {
        // Invariant: a slot only gets a command while it has a recording.
        let rec = self.recordings[slot].as_mut().expect("a reply without a recording");
        if !rec.frames.is_empty() {
            rec.rewards.push(step.reward);
        }
        rec.frames.push(step.frame);
        rec.states.push(step.state);
        rec.ended = step.last;
        if step.last || rec.frames.len() >= self.config.max_frames {
            let rec = self.recordings[slot].take().expect("checked above");
            let (task, episode) = (rec.job.task, rec.job.episode);
            let (sidecar, frames) = sidecar_of(self.config, self.pool.spec(slot), rec, self.sink.codec());
            let num_frames = sidecar.num_frames;
            let written_to = self.sink.write(sidecar, frames)?;
            on_event(CollectEvent::EpisodeDone {
                task,
                episode,
                num_frames,
                written_to,
            });
            self.summary.episodes_written += 1;
            self.summary.frames_written += num_frames;
        }
        Ok(())
    }

    /// Drops the slot's episode and queues it again (with the next attempt's seed), up to
    /// [`MAX_ATTEMPTS`].
    fn lose(&mut self, slot: usize, error: &Error, on_event: &mut dyn FnMut(CollectEvent)) -> Result<()> {
        let rec = self.recordings[slot].take().expect("a reply without a recording");
        self.summary.episodes_lost += 1;
        let job = Job {
            attempt: rec.job.attempt + 1,
            ..rec.job
        };
        if job.attempt >= MAX_ATTEMPTS {
            return Err(Error::Env {
                task: job.task.to_string(),
                reason: format!("episode {} lost {MAX_ATTEMPTS} times; last: {error}", job.episode),
            });
        }
        on_event(CollectEvent::EpisodeLost {
            task: job.task,
            episode: job.episode,
            reason: error.to_string(),
        });
        self.queues.entry(job.task).or_default().push_front(job);
        Ok(())
    }
}

fn validate(config: &CollectConfig) -> Result<()> {
    let problem = if config.tasks.is_empty() {
        Some("no tasks given".to_string())
    } else if config.max_frames < 2 {
        Some(format!("--video-frames must be at least 2, got {}", config.max_frames))
    } else if config.workers == 0 {
        Some("--workers must be at least 1".to_string())
    } else if config.action_repeat == 0 {
        Some("--action-repeat must be at least 1".to_string())
    } else if config
        .seed
        .saturating_add(u64::from(MAX_ATTEMPTS) * config.episodes as u64)
        > MAX_SEED
    {
        Some(format!(
            "--seed {} is too large: seeds up to --seed + {MAX_ATTEMPTS} x --episodes must fit dm_control's 32-bit seeds",
            config.seed
        ))
    } else {
        None
    };
    match problem {
        Some(p) => Err(Error::Config(p)),
        None => crate::env::check_python(&config.python),
    }
}

fn worker_config(config: &CollectConfig, task: Task) -> DmcConfig {
    DmcConfig {
        action_repeat: config.action_repeat,
        render_quality: config.render_quality,
        python: config.python.clone(),
        ..DmcConfig::new(task)
    }
}

/// The slot's own task first (no worker restart), else the task with the most work left.
fn next_job(queues: &mut BTreeMap<Task, VecDeque<Job>>, current: Task) -> Option<Job> {
    if let Some(job) = queues.get_mut(&current).and_then(VecDeque::pop_front) {
        return Some(job);
    }
    let busiest = queues
        .iter()
        .filter(|(_, q)| !q.is_empty())
        .max_by_key(|(_, q)| q.len())
        .map(|(t, _)| *t)?;
    queues.get_mut(&busiest).and_then(VecDeque::pop_front)
}

/// A finished recording as its sidecar and frames.
fn sidecar_of(config: &CollectConfig, spec: &EnvSpec, rec: Recording, codec: &str) -> (EpisodeSidecar, Vec<Vec<u8>>) {
    let sidecar = EpisodeSidecar {
        task: rec.job.task,
        seed: rec.seed,
        action_repeat: spec.action_repeat,
        render_quality: spec.render_quality,
        camera: spec.camera.clone(),
        num_frames: rec.frames.len(),
        actions: rec.actions,
        rewards: rec.rewards,
        source: SOURCE.to_string(),
        lfs_version: env!("CARGO_PKG_VERSION").to_string(),
        episode: rec.job.episode,
        max_frames: config.max_frames,
        episode_ended: rec.ended,
        frame_seconds: spec.agent_timestep(),
        codec: codec.to_string(),
        mujoco: spec.mujoco.clone(),
        dm_control: spec.dm_control.clone(),
        state_names: spec.state_names.clone(),
        states: rec.states,
    };
    (sidecar, rec.frames)
}
