//! The probe's rows for one task: frame stacks of a task's episodes with the state and reward of
//! their last frame, split by episode into the episodes the probe is fitted on and the held-out
//! ones it is scored on.

use rayon::prelude::*;

use crate::observation::{stack_frames, stack_indices, FRAME_STACK};
use crate::shards::{Dataset, Episode, EpisodeRecord};
use crate::{Error, Result};

/// The first frame a row is taken at: its stack holds three distinct frames and a reward led to
/// it.
pub const FIRST_FRAME: usize = FRAME_STACK - 1;

/// Rows of one side of the split.
#[derive(Debug, Clone, Default)]
pub struct ProbeRows {
    /// (n, 9, h, w) uint8 observations `O_t = [F_{t-2}, F_{t-1}, F_t]`.
    pub obs: Vec<u8>,
    /// (n, state_dim) the state of frame `t`, as recorded.
    pub state: Vec<f64>,
    /// (n,) the reward of the agent step that led to frame `t`.
    pub reward: Vec<f64>,
    /// (n,) the dataset episode index each row comes from: the probe's groups.
    pub episodes: Vec<u32>,
}

impl ProbeRows {
    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    /// Distinct episodes among the rows.
    pub fn num_episodes(&self) -> usize {
        let mut e = self.episodes.clone();
        e.dedup();
        e.len()
    }

    /// Appends every `stride`-th frame of `episode` from [`FIRST_FRAME`] on.
    fn push_episode(&mut self, episode: &Episode, stride: usize, obs_len: usize) -> Result<()> {
        let (state, rewards) = episode_labels(episode)?;
        let dim = state.names.len();
        for t in (FIRST_FRAME..episode.num_frames).step_by(stride) {
            let at = self.obs.len();
            self.obs.resize(at + obs_len, 0);
            stack_frames(episode, stack_indices(t), &mut self.obs[at..]);
            self.state
                .extend(state.values[t * dim..(t + 1) * dim].iter().map(|&v| f64::from(v)));
            self.reward.push(f64::from(rewards[t]));
            self.episodes.push(episode.episode_index as u32);
        }
        Ok(())
    }
}

/// A task's rows, fitted-on and held-out.
#[derive(Debug, Clone)]
pub struct ProbeSplit {
    pub task: String,
    /// Names of the state's dimensions (`position[0]`, …), as `lfs collect` recorded them.
    pub state_names: Vec<String>,
    pub train: ProbeRows,
    pub test: ProbeRows,
}

/// How a task's episodes become rows.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SplitConfig {
    /// Share of each task's episodes held out: the last ones by episode index.
    pub test_fraction: f64,
    /// A row every this many frames of an episode (consecutive frames are nearly the same).
    pub frame_stride: usize,
    /// Held-out episodes a task needs at least (the bootstrap resamples them).
    pub min_test_episodes: usize,
    /// Fitted-on episodes a task needs at least (cross-validation folds are made of them).
    pub min_train_episodes: usize,
}

/// Which of a task's episodes (by record) are fitted on and which held out.
#[derive(Debug, Clone)]
pub struct EpisodeSplit<'a> {
    pub train: Vec<&'a EpisodeRecord>,
    pub test: Vec<&'a EpisodeRecord>,
}

/// Splits the records of `task` (sorted by episode index): the last `test_fraction` held out.
/// `what` names the dataset in errors.
pub fn split_episodes<'a>(
    records: &'a [EpisodeRecord],
    task: &str,
    cfg: &SplitConfig,
    what: &str,
) -> Result<EpisodeSplit<'a>> {
    let mut mine: Vec<&EpisodeRecord> = records.iter().filter(|r| r.task == task).collect();
    mine.sort_by_key(|r| r.episode_index);
    let n = mine.len();
    let n_test = ((n as f64) * cfg.test_fraction).ceil() as usize;
    let n_train = n.saturating_sub(n_test);
    if n_test < cfg.min_test_episodes || n_train < cfg.min_train_episodes {
        return Err(Error::Config(format!(
            "{what}: task {task} has {n} episodes; the probe needs at least {} fitted-on and {} held-out \
             episodes (a share of {} held out), so at least {}: record more (make probe-set records 40 per task)",
            cfg.min_train_episodes,
            cfg.min_test_episodes,
            cfg.test_fraction,
            min_episodes(cfg)
        )));
    }
    let test = mine.split_off(n_train);
    Ok(EpisodeSplit { train: mine, test })
}

/// Decodes the episodes of `records` (in parallel), in their order.
pub fn load_episodes(dataset: &Dataset, records: &[&EpisodeRecord]) -> Result<Vec<Episode>> {
    records.par_iter().map(|r| dataset.load_episode(r)).collect()
}

/// The fewest episodes a task can have for `cfg`.
fn min_episodes(cfg: &SplitConfig) -> usize {
    (cfg.min_train_episodes + cfg.min_test_episodes..)
        .find(|&n| {
            let n_test = ((n as f64) * cfg.test_fraction).ceil() as usize;
            n_test >= cfg.min_test_episodes && n - n_test.min(n) >= cfg.min_train_episodes
        })
        .unwrap_or(usize::MAX)
}

impl ProbeSplit {
    /// The rows of `task` from its decoded episodes, fitted-on and held-out; every episode must
    /// carry state and rewards with the same state names.
    pub fn new(task: &str, train: &[Episode], test: &[Episode], stride: usize, what: &str) -> Result<Self> {
        let first = train
            .first()
            .ok_or_else(|| Error::Config(format!("{what}: task {task} has no episodes to fit on")))?;
        let state_names = episode_labels(first)?.0.names.clone();
        let obs_len = FRAME_STACK * first.frame(0).len();
        let mut split = ProbeSplit {
            task: task.to_string(),
            state_names,
            train: ProbeRows::default(),
            test: ProbeRows::default(),
        };
        for (episodes, rows) in [(train, &mut split.train), (test, &mut split.test)] {
            for episode in episodes {
                let names = &episode_labels(episode)?.0.names;
                if *names != split.state_names {
                    return Err(Error::Config(format!(
                        "{what}: episode {} of task {task} records state {:?}, episode {} records {:?}",
                        episode.episode_index, names, first.episode_index, split.state_names
                    )));
                }
                rows.push_episode(episode, stride.max(1), obs_len)?;
            }
        }
        Ok(split)
    }
}

/// The episode's state and per-frame rewards; an error for an episode without them.
fn episode_labels(episode: &Episode) -> Result<(&crate::shards::EpisodeState, &[f32])> {
    match (&episode.state, &episode.rewards) {
        (Some(state), Some(rewards)) => Ok((state, rewards)),
        _ => Err(Error::Config(format!(
            "episode {} (task {}) has no recorded state: probe datasets must be recorded by `lfs collect`",
            episode.episode_index, episode.task
        ))),
    }
}
