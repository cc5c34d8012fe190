//! What the loop logs: a row of `eval.csv` per evaluation, a line of `train.jsonl` per training
//! episode (means of its updates' metrics), a line of `aux.jsonl` per auxiliary update.

use serde::Serialize;

use super::step_times::StepTimes;
use crate::objectives::UpdateMetrics;

/// `eval.csv`'s columns (DrQ-v2's).
pub const EVAL_HEADER: &str = "frame,step,episode,episode_reward,total_time";

/// The prefix of an evaluation's TensorBoard tags (`eval/episode_reward`, as DrQ-v2's).
pub const EVAL_TAG: &str = "eval/";

/// The field of `train.jsonl` and `aux.jsonl` lines that TensorBoard plots them against.
pub const FRAME_FIELD: &str = "train/frame";

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

/// One training episode, as the loop reports it and as `train.jsonl`'s line begins.
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
    /// The particle-based entropy estimate of the episode's proprioceptive states
    /// ([`super::state_entropy`]), when the loop records states (`lfs explore`).
    #[serde(rename = "train/state_entropy", skip_serializing_if = "Option::is_none")]
    pub state_entropy: Option<f64>,
    /// Where the episode's wall-clock went (`time/<part>_s`).
    #[serde(flatten)]
    pub times: StepTimes,
}

/// `lfs train`: the auxiliary objective's mean loss and mean N (synthetic pairs in its batch)
/// over an episode's updates; absent without an objective.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AuxMeans {
    #[serde(rename = "train/aux_loss", skip_serializing_if = "Option::is_none")]
    pub aux_loss: Option<f64>,
    #[serde(rename = "train/aux_num_synthetic", skip_serializing_if = "Option::is_none")]
    pub aux_num_synthetic: Option<f64>,
}

impl AuxMeans {
    /// The means over `updates`; both None without any.
    pub fn of(updates: &[UpdateMetrics]) -> Self {
        let mean = |f: fn(&UpdateMetrics) -> f64| {
            (!updates.is_empty()).then(|| updates.iter().map(f).sum::<f64>() / updates.len() as f64)
        };
        Self {
            aux_loss: mean(|m| m.loss),
            aux_num_synthetic: mean(|m| m.num_synthetic as f64),
        }
    }
}

/// A line of `train.jsonl`: the episode, the means of the agent's update metrics over it, and
/// the auxiliary objective's.
#[derive(Debug, Serialize)]
pub struct TrainLine<'a, M: Serialize> {
    #[serde(flatten)]
    pub episode: &'a EpisodeLog,
    /// None in an episode without updates (the seed frames): no update, no numbers (not zeros
    /// that a plot would draw as losses).
    #[serde(flatten)]
    pub agent: Option<&'a M>,
    #[serde(flatten)]
    pub aux: &'a AuxMeans,
}

/// A line of `aux.jsonl`: one auxiliary update (`step` counts them) at training frame `frame`.
#[derive(Debug, Serialize)]
pub struct AuxLog<'a> {
    #[serde(flatten)]
    pub update: &'a UpdateMetrics,
    #[serde(rename = "train/frame")]
    pub frame: u64,
}

impl EvalRow {
    /// "eval at frame F: episode_reward R (T s)", for messages.
    pub fn line(&self) -> String {
        format!(
            "eval at frame {}: episode_reward {:.1} ({:.0} s)",
            self.frame, self.episode_reward, self.total_time
        )
    }

    /// The row's numbers as TensorBoard scalars (`eval/<column>`; the frame is their x).
    pub fn scalars(&self) -> Vec<(String, f64)> {
        [
            ("step", self.step as f64),
            ("episode", self.episode as f64),
            ("episode_reward", self.episode_reward),
            ("total_time", self.total_time),
        ]
        .into_iter()
        .map(|(column, value)| (format!("{EVAL_TAG}{column}"), value))
        .collect()
    }

    /// The row as `eval.csv` holds it.
    pub fn csv(&self) -> String {
        format!(
            "{},{},{},{},{}",
            self.frame, self.step, self.episode, self.episode_reward, self.total_time
        )
    }
}
