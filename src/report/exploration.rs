//! The exploration run's picture, `exploration.{png,svg}` in its folder: each domain's intrinsic
//! reward and state entropy (its state coverage) per episode, read back from the domains'
//! `train.jsonl`. `lfs explore` redraws it with every checkpoint.

use std::path::{Path, PathBuf};

use super::plots::{exploration_curves, ExplorationPanel};
use crate::fsutil::write_bytes_atomic;
use crate::rl_loop::state_entropy::STATE_ENTROPY_K;
use crate::run_dir::TRAIN_LOG;
use crate::{Error, Result};

/// The picture's file stem in the run's folder.
pub const PICTURE: &str = "exploration";

/// One domain's points from its `train.jsonl`: (frame, value) of the episodes that have each.
fn panel(out_dir: &Path, task: &str) -> Result<ExplorationPanel> {
    let path = out_dir.join(task).join(TRAIN_LOG);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::checkpoint(&path, e.to_string()))?;
    let mut panel = ExplorationPanel {
        task: task.to_string(),
        intrinsic_reward: Vec::new(),
        state_entropy: Vec::new(),
    };
    for (i, line) in text.lines().enumerate() {
        let row: serde_json::Value =
            serde_json::from_str(line).map_err(|e| Error::checkpoint(&path, format!("line {}: {e}", i + 1)))?;
        let Some(frame) = row["train/frame"].as_f64() else {
            continue;
        };
        if let Some(r) = row["explore/intrinsic_reward"].as_f64() {
            panel.intrinsic_reward.push((frame, r));
        }
        if let Some(h) = row["train/state_entropy"].as_f64() {
            panel.state_entropy.push((frame, h));
        }
    }
    Ok(panel)
}

/// Draws the run's picture from its domains' logs; returns the SVG's path.
pub fn write(out_dir: &Path, tasks: &[&str], method: &str, seed: u64) -> Result<PathBuf> {
    let panels = tasks.iter().map(|t| panel(out_dir, t)).collect::<Result<Vec<_>>>()?;
    let subtitle = [
        format!("lfs explore, {method}, seed {seed}: one point per episode (intrinsic reward from its first update on)"),
        format!(
            "state entropy: mean over the episode's proprioceptive states of log(1 + distance to the {STATE_ENTROPY_K}th nearest), raw units"
        ),
    ];
    let run = format!("{method} (seed {seed})");
    let picture = exploration_curves(&panels, &run, &subtitle)?;
    let io = |p: &Path, e: std::io::Error| Error::checkpoint(p, e.to_string());
    let png = out_dir.join(format!("{PICTURE}.png"));
    write_bytes_atomic(&png, &picture.png).map_err(|e| io(&png, e))?;
    let svg = out_dir.join(format!("{PICTURE}.svg"));
    write_bytes_atomic(&svg, picture.svg.as_bytes()).map_err(|e| io(&svg, e))?;
    Ok(svg)
}
