//! The online probe during pre-training: `lfs pretrain` with `[probe] every_updates` probes its
//! encoder before the first update and every so many updates after, and logs the held-out R² of
//! the state and of the reward (means over the probe set's tasks) to `metrics.jsonl`, on lines
//! of their own: `{"step", "probe/state_r2", "probe/reward_r2", "probe/tasks", "probe/seconds"}`,
//! no `pretrain/*` key. For every pre-training run whose log [`super::pretraining`] finds, the
//! report tabulates them and draws them over updates beside the pre-training loss.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::cells::for_each_json_line;
use super::update_bins::update_bins;

/// The key that marks a probe's line.
pub const STATE_R2: &str = "probe/state_r2";
pub const REWARD_R2: &str = "probe/reward_r2";
/// Rows of a run's table at most (evenly spaced probes, the first and the last among them).
pub const MAX_TABLE_ROWS: usize = 21;

/// One probe of the encoder during pre-training; NaN where the log has `null` (an undefined R²:
/// serde writes NaN so).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbePoint {
    /// The updates done before it (0: the initial encoder).
    pub step: u64,
    pub state_r2: f64,
    pub reward_r2: f64,
}

/// What a log holds of the online probe, and the loss to read it against.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeLog {
    /// By update; a resumed run logs the probes after its checkpoint twice: the last line counts.
    pub points: Vec<ProbePoint>,
    /// `pretrain/loss` averaged over bins of updates (as the N table bins them): (last update
    /// of the bin, mean loss).
    pub loss: Vec<(u64, f64)>,
}

/// One method's online probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeCurve {
    /// Index into the report's methods (its colour).
    pub method: usize,
    pub log: PathBuf,
    pub probes: ProbeLog,
}

impl ProbeCurve {
    /// The probes the report's table shows: all of them, or [`MAX_TABLE_ROWS`] evenly spaced.
    pub fn table_rows(&self) -> Vec<&ProbePoint> {
        let points = &self.probes.points;
        if points.len() <= MAX_TABLE_ROWS {
            return points.iter().collect();
        }
        let last = points.len() - 1;
        let mut picked: Vec<usize> = (0..MAX_TABLE_ROWS)
            .map(|k| (k * last + (MAX_TABLE_ROWS - 1) / 2) / (MAX_TABLE_ROWS - 1))
            .collect();
        picked.dedup();
        picked.into_iter().map(|i| &points[i]).collect()
    }
}

/// The online probe of one pre-training log; `None` when it has no probe line. Update lines
/// give the loss; lines of other kinds are skipped.
pub fn read_log(path: &Path) -> Result<Option<ProbeLog>, String> {
    let mut points: BTreeMap<u64, ProbePoint> = BTreeMap::new();
    let mut losses: BTreeMap<u64, f64> = BTreeMap::new();
    for_each_json_line(path, |v| {
        let Some(step) = v.get("step").and_then(Value::as_u64) else {
            return Ok(());
        };
        if let Some(loss) = v.get("pretrain/loss").and_then(Value::as_f64) {
            losses.insert(step, loss);
        }
        if v.get(STATE_R2).is_none() {
            return Ok(()); // an update's line
        }
        let r2 = |key: &str| match v.get(key) {
            Some(Value::Null) => Ok(f64::NAN),
            Some(x) => x.as_f64().ok_or_else(|| format!("`{key}` is not a number")),
            None => Err(format!("no `{key}`")),
        };
        points.insert(
            step,
            ProbePoint {
                step,
                state_r2: r2(STATE_R2)?,
                reward_r2: r2(REWARD_R2)?,
            },
        );
        Ok(())
    })?;
    if points.is_empty() {
        return Ok(None);
    }
    Ok(Some(ProbeLog {
        points: points.into_values().collect(),
        loss: binned_means(&losses),
    }))
}

/// Means over the [`update_bins`] of updates 1..=last; empty bins left out.
fn binned_means(by_step: &BTreeMap<u64, f64>) -> Vec<(u64, f64)> {
    let Some(&last) = by_step.keys().next_back() else {
        return Vec::new();
    };
    update_bins(last)
        .filter_map(|(first, end)| {
            let xs: Vec<f64> = by_step.range(first..=end).map(|(_, x)| *x).collect();
            (!xs.is_empty()).then(|| (end, xs.iter().sum::<f64>() / xs.len() as f64))
        })
        .collect()
}
