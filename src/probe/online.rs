//! The probe `lfs pretrain` runs while it trains: every `probe.every_updates` updates, the online
//! encoder is probed on a small fixed probe set (the first episodes of each task of a dataset
//! recorded by `lfs collect`), and the held-out R² goes to `metrics.jsonl`. It reads the encoder
//! and draws nothing from the trainer's random generator, so training is the same with it or
//! without it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::split::{load_episodes, split_episodes};
use super::{probe_split, Features, GroupBootstrapConfig, ProbeConfig, ProbeSplit, RidgeConfig, SplitConfig};
use crate::shards::{Dataset, EpisodeRecord};
use crate::{Error, Result};

/// `[probe]` of a pre-training config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OnlineProbeConfig {
    /// Probe every this many updates (and the initial encoder); 0: never.
    pub every_updates: u64,
    /// The probe set: a dataset recorded by `lfs collect` (`make probe-set`); needed when
    /// `every_updates` > 0.
    pub dataset: Option<PathBuf>,
    /// Episodes of each task taken from it (the first ones by episode index).
    pub episodes_per_task: usize,
    /// Share of those held out (the last ones).
    pub test_fraction: f64,
    /// A row every this many frames of an episode.
    pub frame_stride: usize,
    /// Cross-validation folds over the fitted-on episodes.
    pub folds: usize,
}

impl Default for OnlineProbeConfig {
    fn default() -> Self {
        Self {
            every_updates: 0,
            dataset: None,
            episodes_per_task: 16,
            test_fraction: 0.25,
            frame_stride: 8,
            folds: 3,
        }
    }
}

impl OnlineProbeConfig {
    /// True when the run probes.
    pub fn enabled(&self) -> bool {
        self.every_updates > 0
    }

    /// The probe's settings (a curve needs the point estimates only: few resamples).
    pub fn probe_config(&self) -> ProbeConfig {
        ProbeConfig {
            split: SplitConfig {
                test_fraction: self.test_fraction,
                frame_stride: self.frame_stride,
                min_test_episodes: 2,
                min_train_episodes: 2 * self.folds,
            },
            ridge: RidgeConfig {
                num_folds: self.folds,
                ..RidgeConfig::default()
            },
            bootstrap: GroupBootstrapConfig {
                num_resamples: 100,
                ..GroupBootstrapConfig::default()
            },
        }
    }

    /// Errors for settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<()> {
        if !self.enabled() {
            return Ok(());
        }
        if self.dataset.is_none() {
            return Err(Error::Config(
                "probe.every_updates > 0 needs probe.dataset: a dataset recorded by `lfs collect` (make probe-set)"
                    .into(),
            ));
        }
        if self.episodes_per_task == 0 || self.frame_stride == 0 {
            return Err(Error::Config(
                "probe.episodes_per_task and probe.frame_stride must be >= 1".into(),
            ));
        }
        self.probe_config().validate()
    }
}

/// One probe's line in `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeLine {
    /// The update the encoder was probed after (0: the initial encoder).
    pub step: u64,
    /// Held-out R² of the state, mean over the tasks.
    #[serde(rename = "probe/state_r2")]
    pub state_r2: f64,
    /// Held-out R² of the reward, mean over the tasks.
    #[serde(rename = "probe/reward_r2")]
    pub reward_r2: f64,
    /// Per task: `{"state_r2": …, "reward_r2": …}`.
    #[serde(rename = "probe/tasks")]
    pub tasks: BTreeMap<String, TaskR2>,
    #[serde(rename = "probe/seconds")]
    pub seconds: f64,
}

/// One task's held-out R².
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TaskR2 {
    pub state_r2: f64,
    pub reward_r2: f64,
}

/// The probe set, decoded and split once.
pub struct OnlineProbe {
    config: ProbeConfig,
    splits: Vec<ProbeSplit>,
}

impl OnlineProbe {
    /// Loads the probe set `cfg` names; None when the run does not probe.
    pub fn new(cfg: &OnlineProbeConfig) -> Result<Option<Self>> {
        let Some(path) = cfg.dataset.as_deref().filter(|_| cfg.enabled()) else {
            return Ok(None);
        };
        let config = cfg.probe_config();
        let dataset = Dataset::open(path)?;
        if !dataset.has_state_columns() {
            return Err(Error::shard(
                path,
                "probe.dataset has no recorded state: use a dataset recorded by `lfs collect` (make probe-set)",
            ));
        }
        let what = path.display().to_string();
        let mut splits = Vec::new();
        for task in &dataset.tasks {
            let mut records: Vec<EpisodeRecord> =
                dataset.episodes.iter().filter(|r| &r.task == task).cloned().collect();
            records.sort_by_key(|r| r.episode_index);
            records.truncate(cfg.episodes_per_task);
            let split = split_episodes(&records, task, &config.split, &what)?;
            splits.push(ProbeSplit::new(
                task,
                &load_episodes(&dataset, &split.train)?,
                &load_episodes(&dataset, &split.test)?,
                config.split.frame_stride,
                &what,
            )?);
        }
        Ok(Some(Self { config, splits }))
    }

    /// Probes `features` on every task of the set.
    pub fn probe<F: Features + ?Sized>(&self, features: &F, step: u64) -> Result<ProbeLine> {
        let start = Instant::now();
        let mut tasks = BTreeMap::new();
        for split in &self.splits {
            let p = probe_split(features, split, &self.config, &mut |_| {})?;
            tasks.insert(
                p.task.clone(),
                TaskR2 {
                    state_r2: p.state.held_out.mean.point,
                    reward_r2: p.reward.held_out.mean.point,
                },
            );
        }
        let n = tasks.len().max(1) as f64;
        Ok(ProbeLine {
            step,
            state_r2: tasks.values().map(|t| t.state_r2).sum::<f64>() / n,
            reward_r2: tasks.values().map(|t| t.reward_r2).sum::<f64>() / n,
            tasks,
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}
