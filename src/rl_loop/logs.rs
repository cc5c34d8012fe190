//! What the loop logs: a row of `eval.csv` per evaluation, a line of `train.jsonl` per training
//! episode (means of its updates' metrics), a line of `aux.jsonl` per auxiliary update.

use serde::Serialize;

use crate::objectives::UpdateMetrics;
use crate::rl::SacMetrics;

/// `eval.csv`'s columns (DrQ-v2's).
pub const EVAL_HEADER: &str = "frame,step,episode,episode_reward,total_time";

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
pub struct AuxLog<'a> {
    #[serde(flatten)]
    pub update: &'a UpdateMetrics,
    #[serde(rename = "train/frame")]
    pub frame: u64,
}

impl EvalRow {
    /// The row as `eval.csv` holds it.
    pub fn csv(&self) -> String {
        format!(
            "{},{},{},{},{}",
            self.frame, self.step, self.episode, self.episode_reward, self.total_time
        )
    }
}

/// Sums of an episode's update metrics, for their means.
#[derive(Debug, Default)]
pub struct MetricSums {
    pub count: u64,
    actor_count: u64,
    sum: SacMetrics,
    /// The auxiliary updates' metrics (`lfs train`).
    aux: Vec<UpdateMetrics>,
}

impl MetricSums {
    pub fn add(&mut self, m: &SacMetrics) {
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

    pub fn add_aux(&mut self, m: &UpdateMetrics) {
        self.aux.push(m.clone());
    }

    /// The mean of `f` over the episode's auxiliary updates; None without any.
    pub fn aux_mean(&self, f: impl Fn(&UpdateMetrics) -> f64) -> Option<f64> {
        (!self.aux.is_empty()).then(|| self.aux.iter().map(f).sum::<f64>() / self.aux.len() as f64)
    }

    pub fn mean(&self) -> SacMetrics {
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
