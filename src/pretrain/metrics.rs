//! Per-update metrics and their JSONL log (`metrics.jsonl`, one object per update, keys
//! `pretrain/<name>`). On resume the log is cut back to the checkpoint's step so that a
//! resumed run's log equals an uninterrupted one.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{Error, Result};

/// What one update reports (STYLE: updates return metrics; the loop logs them).
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

/// Appends metrics to a JSONL file.
pub struct MetricsLog {
    path: PathBuf,
    file: std::fs::File,
}

impl MetricsLog {
    /// Opens `path` for appending, first dropping any lines with `step > keep_through_step`
    /// (a run killed after its last checkpoint logged updates that will be redone).
    pub fn open(path: &Path, keep_through_step: u64) -> Result<Self> {
        let err = |e: std::io::Error| Error::Shard {
            path: path.to_path_buf(),
            reason: format!("metrics log: {e}"),
        };
        if path.exists() {
            let reader = std::io::BufReader::new(std::fs::File::open(path).map_err(err)?);
            let mut kept = String::new();
            for line in reader.lines() {
                let line = line.map_err(err)?;
                let step = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v.get("step").and_then(|s| s.as_u64()));
                if matches!(step, Some(s) if s <= keep_through_step) {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
            std::fs::write(path, kept).map_err(err)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn write(&mut self, m: &UpdateMetrics) -> Result<()> {
        let line = serde_json::to_string(m)?;
        writeln!(self.file, "{line}").map_err(|e| Error::Shard {
            path: self.path.clone(),
            reason: format!("metrics log: {e}"),
        })
    }
}
