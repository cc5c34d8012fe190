//! `lfs eval`: SAC (or DrQ-v2, `[agent] kind`) on one DMControl task on top of a frozen encoder
//! (docs/design.md §6, §8, §13): the RL loop ([`crate::rl_loop`]) with the encoder as constants.

use std::path::Path;

use crate::config::StageConfig;
use crate::device::Backend;
use crate::rl_loop::{self, AgentKind, EvalConfig, FrozenFeatures, LoopEvent, LoopSpec, LoopSummary, Stage};
use crate::run_dir::kind;
use crate::{Error, Result};

/// Validates everything, then trains into `out_dir` (resuming a checkpoint there).
pub fn run(
    cfg: &EvalConfig,
    spec: &LoopSpec,
    out_dir: &Path,
    on_event: &mut dyn FnMut(LoopEvent),
) -> Result<LoopSummary> {
    cfg.validate()?;
    if cfg.agent.kind() == AgentKind::Taco {
        return Err(Error::Config(
            "[agent] kind = \"taco\": TACO trains the encoder with its own loss on the run's actions, so it runs \
             end to end (lfs train --config pipelines/taco/*.toml), not on a frozen encoder"
                .into(),
        ));
    }
    let backend = Backend::new(&cfg.run.device.open()?);
    let representation = FrozenFeatures::new(&spec.encoder, cfg.run.seed, &backend)?;
    let mut rl = cfg.clone();
    let render_source = rl_loop::resolve_render_quality(&mut rl.env, &representation, spec)?;
    let stage = Stage {
        command: "eval",
        checkpoint_kind: kind::EVAL_CHECKPOINT,
        toml: rl.to_toml()?,
        resume_key: rl.resume_key()?,
        saved_resume_key: |toml| EvalConfig::from_toml_str(toml, &[])?.resume_key(),
        value_comparison: None,
        backend,
        rl,
    };
    rl_loop::run(stage, spec, Box::new(representation), render_source, out_dir, on_event)
}
