//! What one update of the objective engine reports: a line of `lfs pretrain`'s `metrics.jsonl`
//! and of `lfs train`'s `aux.jsonl` (keys `pretrain/<name>`, written by
//! [`crate::log_files::MetricsLog`]).

use serde::Serialize;

/// What one update reports (updates return metrics; the loop logs them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpdateMetrics {
    /// Updates done after this one (1-based).
    pub step: u64,
    /// The task the batch was drawn from, or `mixed`.
    #[serde(rename = "pretrain/task")]
    pub task: String,
    #[serde(rename = "pretrain/loss")]
    pub loss: f64,
    /// N: synthetic pairs in the training batch (LNC-selected for lfs / lfs-cl).
    #[serde(rename = "pretrain/num_synthetic")]
    pub num_synthetic: usize,
    /// M − N: real pairs in the training batch.
    #[serde(rename = "pretrain/num_real")]
    pub num_real: usize,
    /// D: the mean k-NN distance among the real latents (LNC methods only).
    #[serde(rename = "pretrain/lnc_d")]
    pub lnc_d: Option<f64>,
    /// The clip window (c − r/2)·D, (c + r/2)·D (LNC methods only).
    #[serde(rename = "pretrain/clip_low")]
    pub clip_low: Option<f64>,
    #[serde(rename = "pretrain/clip_high")]
    pub clip_high: Option<f64>,
    /// Mean Sinkhorn assignment entropy in nats (clustering methods only).
    #[serde(rename = "pretrain/sinkhorn_entropy")]
    pub sinkhorn_entropy: Option<f64>,
    /// Mean pairwise cosine of the target projections g'(f'(O_cur)) of the batch: near 1 when
    /// the representation has collapsed (src/pretrain/collapse.rs).
    #[serde(rename = "pretrain/target_cosine")]
    pub target_cosine: f64,
    /// Mean L2 norm of the target projections.
    #[serde(rename = "pretrain/target_norm")]
    pub target_norm: f64,
    /// The global gradient norm before clipping (only when the method clips).
    #[serde(rename = "pretrain/grad_norm")]
    pub grad_norm: Option<f64>,
    /// Seconds spent drawing, shifting and (LNC methods) screening the batch, including
    /// LNC's online forward over all 2M candidates (kept: the loss reuses its rows).
    #[serde(rename = "pretrain/seconds_data")]
    pub seconds_data: f64,
    /// Seconds of the target forward pass, the online one where LNC did not run it, and the
    /// loss.
    #[serde(rename = "pretrain/seconds_forward")]
    pub seconds_forward: f64,
    /// Seconds of backpropagation.
    #[serde(rename = "pretrain/seconds_backward")]
    pub seconds_backward: f64,
    /// Seconds of the Adam step and the EMA update.
    #[serde(rename = "pretrain/seconds_optimizer")]
    pub seconds_optimizer: f64,
    /// Wall-clock seconds of this update (sampling, augmentation, LNC, forward, backward,
    /// Adam, EMA).
    #[serde(rename = "pretrain/update_seconds")]
    pub update_seconds: f64,
    /// 1 / update_seconds.
    #[serde(rename = "pretrain/updates_per_s")]
    pub updates_per_s: f64,
}

impl UpdateMetrics {
    /// Update `step` (1-based) on `task`, every measurement still zero or absent.
    pub fn new(step: u64, task: String) -> Self {
        Self {
            step,
            task,
            loss: 0.0,
            num_synthetic: 0,
            num_real: 0,
            lnc_d: None,
            clip_low: None,
            clip_high: None,
            sinkhorn_entropy: None,
            target_cosine: 0.0,
            target_norm: 0.0,
            grad_norm: None,
            seconds_data: 0.0,
            seconds_forward: 0.0,
            seconds_backward: 0.0,
            seconds_optimizer: 0.0,
            update_seconds: 0.0,
            updates_per_s: 0.0,
        }
    }
}
