//! Where a training episode's wall-clock went, by part of the agent step (issue 30's profile):
//! each `train.jsonl` line carries the episode's seconds per part as `time/<part>_s`. The parts
//! are timed around the calls that do them, so together with the episode's length and
//! `train/fps` they say what a run spends its time on without a profiler attached.
//! Evaluation is not in them (`eval.csv`'s `total_time` counts it).

use std::time::Instant;

use serde::Serialize;

/// Seconds of one episode's agent steps, per part, summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepTimes {
    /// Choosing the action: the actor on the newest features (or a uniform draw).
    #[serde(rename = "time/act_s")]
    pub act: f64,
    /// Sampling the batch from the replay: gathering cached features, or stacking frames.
    #[serde(rename = "time/sample_s")]
    pub sample: f64,
    /// The auxiliary objective's update (`lfs train`).
    #[serde(rename = "time/aux_s")]
    pub aux: f64,
    /// Shifting and encoding the batch's pixels (without the feature cache).
    #[serde(rename = "time/encode_batch_s")]
    pub encode_batch: f64,
    /// The agent's update, and the critic's step into an online encoder.
    #[serde(rename = "time/update_s")]
    pub update: f64,
    /// Waiting for the environment's reply. The step is sent before the update, so the worker
    /// simulates and renders while the agent learns; this is what remains after it.
    #[serde(rename = "time/env_wait_s")]
    pub env_wait: f64,
    /// Storing the transition, and encoding the new observation once for the feature cache.
    #[serde(rename = "time/store_s")]
    pub store: f64,
    /// Whole agent steps (the parts above, logging and what falls between them).
    #[serde(rename = "time/step_s")]
    pub step: f64,
}

impl StepTimes {
    /// Adds the seconds since `since` to `part`, and returns now (the next part's start).
    pub fn lap(part: &mut f64, since: Instant) -> Instant {
        let now = Instant::now();
        *part += (now - since).as_secs_f64();
        now
    }
}
