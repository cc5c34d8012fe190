//! DrQ-v2's exploration schedule (`utils.schedule`, facebookresearch/drqv2 @c0c650b): the
//! standard deviation of the actor's noise as a function of the agent step, written as an enum
//! rather than DrQ-v2's `'linear(1.0,0.1,100000)'` string.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// σ over agent steps (DrQ-v2's `global_step`, not frames).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum StddevSchedule {
    /// σ = value at every step.
    Const { value: f64 },
    /// σ from `start` to `end` linearly over the first `duration_steps` agent steps, then
    /// `end` (DrQ-v2's `linear(start, end, duration)`).
    Linear { start: f64, end: f64, duration_steps: u64 },
}

impl StddevSchedule {
    /// σ at agent step `step`: `(1 − mix)·start + mix·end` with `mix = clip(step / duration, 0, 1)`,
    /// as DrQ-v2 computes it.
    pub fn at(&self, step: u64) -> f64 {
        match *self {
            StddevSchedule::Const { value } => value,
            StddevSchedule::Linear {
                start,
                end,
                duration_steps,
            } => {
                let mix = (step as f64 / duration_steps as f64).clamp(0.0, 1.0);
                (1.0 - mix) * start + mix * end
            }
        }
    }

    /// Checks ranges; errors name `field`.
    pub fn validate(&self, field: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("{field}: {m}")));
        let positive = |v: f64| v.is_finite() && v > 0.0;
        match *self {
            StddevSchedule::Const { value } if !positive(value) => bad(format!("value = {value} must be > 0")),
            StddevSchedule::Linear { start, end, .. } if !(positive(start) && positive(end)) => {
                bad(format!("start = {start} and end = {end} must be > 0"))
            }
            StddevSchedule::Linear { duration_steps: 0, .. } => bad("duration_steps must be >= 1".into()),
            _ => Ok(()),
        }
    }
}
