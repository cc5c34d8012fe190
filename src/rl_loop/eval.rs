//! `lfs eval`: does an encoder make downstream RL better? The agent `[agent] kind` names (SAC,
//! DrQ-v2) trained on one DMControl task on top of a frozen encoder (docs/design.md §6, §8,
//! §13): the RL loop ([`crate::rl_loop`]) with the encoder as constants. Its config is the
//! loop's own ([`LoopConfig`]).

use std::path::Path;

use crate::config::StageConfig;
use crate::device::Backend;
use crate::rl_loop::{self, FrozenFeatures, LoopConfig, LoopEvent, LoopSpec, LoopSummary, Stage};
use crate::run_dir::kind;
use crate::{Error, Result};

/// Validates everything, then trains into `out_dir` (resuming a checkpoint there).
pub fn run(
    cfg: &LoopConfig,
    spec: &LoopSpec,
    out_dir: &Path,
    on_event: &mut dyn FnMut(LoopEvent),
) -> Result<LoopSummary> {
    cfg.validate()?;
    if let Some(why) = cfg.agent.settings().frozen_encoder_refusal() {
        return Err(Error::Config(why));
    }
    let backend = Backend::new(&cfg.run.device.open(cfg.run.precision)?);
    let representation = FrozenFeatures::new(&spec.encoder, cfg.run.seed, &backend)?;
    let mut rl = cfg.clone();
    let render_source = rl_loop::resolve_render_quality(&mut rl.env, &representation, spec)?;
    let stage = Stage {
        command: "eval",
        checkpoint_kind: kind::EVAL_CHECKPOINT,
        toml: rl.to_toml()?,
        resume_key: rl.resume_key()?,
        saved_resume_key: |toml| LoopConfig::from_toml_str(toml, &[])?.resume_key(),
        value_comparison: None,
        backend,
        rl,
    };
    rl_loop::run(stage, spec, Box::new(representation), render_source, out_dir, on_event)
}
