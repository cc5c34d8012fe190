//! Making a collapsed pre-training visible.
//!
//! The clustering objective has a trivial fixed point: every target projection points the same
//! way, Sinkhorn's equipartition then spreads each sample uniformly over the K prototypes, and
//! the loss sits at ln K (6.2383 for K = 512) while the encoder learns nothing. On single-task
//! batches of near-identical frames the trainer falls into it within a few hundred updates
//! (docs/design.md, "Multi-task batches"). Two numbers per update show it: the spread of the
//! target projections (their mean pairwise cosine tends to 1) and, for the clustering methods,
//! the loss and the per-sample assignment entropy (both tend to ln K). [`CollapseMonitor`]
//! watches them and reports once when they stay collapsed for a window of updates.
//!
//! Neither sign alone separates a stalled run from a slow start: on the embedded sample at
//! batch 64, a run on mixed batches (which learns) also has its loss and entropy within 0.01 of
//! ln K from update ~160 until it leaves the plateau, with target cosines up to 0.997; a
//! round-robin run (which stalls) passes cosine 0.999 by update 22 and stays above it
//! (BENCHMARKS.md, "Collapse and task batching"). So a clustering run counts as collapsed when
//! both hold; the other methods have no ln K and use the cosine alone.

/// The spread of the target projections, measured by the objective engine every update.
pub use crate::objectives::spread::{spread, Spread};
use serde::{Deserialize, Serialize};

/// When the run counts as collapsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CollapseConfig {
    /// Consecutive updates the signs must hold before a collapse is reported (100).
    pub window_updates: u64,
    /// Clustering methods: the loss and the mean assignment entropy both within this many nats
    /// of ln K (0.01; a learning run at batch 64 is ~0.1 below ln 512 after 400 updates).
    pub margin_nats: f64,
    /// Every method: mean pairwise cosine of the target projections at or above this (0.999;
    /// measured: stalled runs 0.9994–0.9999, learning ones at most 0.998).
    pub max_target_cosine: f64,
}

impl Default for CollapseConfig {
    fn default() -> Self {
        Self {
            window_updates: 100,
            margin_nats: 0.01,
            max_target_cosine: 0.999,
        }
    }
}

/// A collapse that held for the configured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Collapse {
    /// The first update of the window.
    pub since_step: u64,
    /// What held, in words (for the terminal and the run's summary).
    pub reason: String,
}

/// Watches every update's loss, entropy and spread; see the module docs.
#[derive(Debug, Clone)]
pub struct CollapseMonitor {
    cfg: CollapseConfig,
    /// ln K for the clustering methods, None for the others.
    ln_k: Option<f64>,
    /// First update of the current run of collapsed updates.
    since: Option<u64>,
    reported: bool,
}

/// One update's numbers the monitor reads.
#[derive(Debug, Clone, Copy)]
pub struct CollapseSigns {
    pub step: u64,
    pub loss: f64,
    pub sinkhorn_entropy: Option<f64>,
    pub target_cosine: f64,
}

impl CollapseSigns {
    /// What the monitor reads of one update.
    pub fn of(m: &crate::objectives::UpdateMetrics) -> Self {
        Self {
            step: m.step,
            loss: m.loss,
            sinkhorn_entropy: m.sinkhorn_entropy,
            target_cosine: m.target_cosine,
        }
    }
}

impl CollapseMonitor {
    /// `num_prototypes` = K for the clustering methods, None for the others.
    pub fn new(cfg: &CollapseConfig, num_prototypes: Option<usize>) -> Self {
        Self {
            cfg: cfg.clone(),
            ln_k: num_prototypes.map(|k| (k as f64).ln()),
            since: None,
            reported: false,
        }
    }

    /// Whether this update looks collapsed, and why.
    fn collapsed(&self, s: &CollapseSigns) -> Option<String> {
        let parallel = s.target_cosine >= self.cfg.max_target_cosine;
        let trivial = match (self.ln_k, s.sinkhorn_entropy) {
            (Some(ln_k), Some(h)) => {
                let m = self.cfg.margin_nats;
                ((s.loss - ln_k).abs() < m && (h - ln_k).abs() < m).then(|| {
                    format!(
                        "loss {:.4} and assignment entropy {h:.4} within {m} of ln K = {ln_k:.4}",
                        s.loss
                    )
                })
            }
            _ => None,
        };
        let parallel = parallel.then(|| format!("target projections parallel (mean cosine {:.5})", s.target_cosine));
        match (self.ln_k, trivial, parallel) {
            // Clustering: both signs.
            (Some(_), Some(t), Some(p)) => Some(format!("{t}; {p}")),
            (Some(_), _, _) => None,
            // Other methods: the spread alone.
            (None, _, p) => p,
        }
    }

    /// Feeds one update; returns the collapse the first time it has held for the window.
    pub fn observe(&mut self, signs: &CollapseSigns) -> Option<Collapse> {
        let Some(reason) = self.collapsed(signs) else {
            self.since = None;
            self.reported = false;
            return None;
        };
        let since = *self.since.get_or_insert(signs.step);
        if self.reported || signs.step + 1 < since + self.cfg.window_updates {
            return None;
        }
        self.reported = true;
        Some(Collapse {
            since_step: since,
            reason,
        })
    }

    /// The collapse in force at the last observed update, if it has held for the window.
    pub fn current(&self, last: &CollapseSigns) -> Option<Collapse> {
        let since = self.since?;
        let reason = self.collapsed(last)?;
        (last.step + 1 >= since + self.cfg.window_updates).then_some(Collapse {
            since_step: since,
            reason,
        })
    }
}
