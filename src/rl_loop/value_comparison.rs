//! The paper's value comparison of synthetic and real observations (its table comparing the
//! values of the two, §4): from a chosen frame, for the next K agent steps, the critic scores
//! under a uniform policy — min(Q1, Q2)(s, a) with one a ~ U[−1, 1]^A per observation — the
//! synthetic observations LNC selected for the objective and the real observations of the SAC
//! batch. Each step gives a batch mean and a batch max for each kind; `value_comparison.json`
//! holds their averages over the K steps (steps where LNC selected nothing count for the real
//! side only).

use serde::{Deserialize, Serialize};

use super::config::Frames;

/// `aux.value_comparison`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ValueComparisonConfig {
    /// The training frame the window starts at; 0 turns the analysis off.
    pub from_frame: Frames,
    /// Agent steps (updates) in the window (the paper: 1000).
    pub updates: u64,
}

impl Default for ValueComparisonConfig {
    fn default() -> Self {
        Self {
            from_frame: Frames(0),
            updates: 1000,
        }
    }
}

/// Sums of batch means and batch maxima over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ValueSums {
    /// Steps that contributed.
    pub steps: u64,
    pub sum_of_means: f64,
    pub sum_of_maxima: f64,
}

impl ValueSums {
    fn add(&mut self, values: &[f32]) {
        if values.is_empty() {
            return;
        }
        self.steps += 1;
        self.sum_of_means += values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
        self.sum_of_maxima += values.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    }

    /// (mean of batch means, mean of batch maxima); None before any step.
    pub fn averages(&self) -> Option<(f64, f64)> {
        (self.steps > 0).then(|| {
            let n = self.steps as f64;
            (self.sum_of_means / n, self.sum_of_maxima / n)
        })
    }
}

/// The window's state (checkpointed with the run, so a resumed run continues it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ValueComparison {
    pub from_frame: u64,
    pub updates: u64,
    /// Steps observed so far.
    pub observed: u64,
    pub real: ValueSums,
    pub synthetic: ValueSums,
}

impl ValueComparison {
    /// None when the analysis is off.
    pub fn new(cfg: &ValueComparisonConfig) -> Option<Self> {
        (cfg.from_frame.0 > 0).then(|| Self {
            from_frame: cfg.from_frame.0,
            updates: cfg.updates,
            ..Self::default()
        })
    }

    /// Whether the step at training frame `frame` falls in the window.
    pub fn wants(&self, frame: u64) -> bool {
        frame >= self.from_frame && self.observed < self.updates
    }

    pub fn is_complete(&self) -> bool {
        self.observed >= self.updates
    }

    /// One step's values: the real observations', and the selected synthetic ones' (empty when
    /// LNC selected none).
    pub fn observe(&mut self, real: &[f32], synthetic: &[f32]) {
        self.observed += 1;
        self.real.add(real);
        self.synthetic.add(synthetic);
    }

    /// What `value_comparison.json` holds.
    pub fn result(&self) -> serde_json::Value {
        let side = |s: &ValueSums| match s.averages() {
            Some((mean, max)) => serde_json::json!({"mean": mean, "max": max, "steps": s.steps}),
            None => serde_json::json!({"mean": null, "max": null, "steps": 0}),
        };
        serde_json::json!({
            "from_frame": self.from_frame,
            "updates": self.observed,
            "real": side(&self.real),
            "synthetic": side(&self.synthetic),
            "definition": "min(Q1, Q2)(s, a) of the online critic, one a ~ U[-1, 1]^A per observation, \
                before each step's SAC update; mean and max over each batch (the SAC batch's shifted \
                observations; the synthetic observations LNC selected for the objective, as shifted \
                for it), averaged over the steps of the window",
        })
    }
}
