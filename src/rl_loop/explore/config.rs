//! `ExploreConfig`: what a `pipelines/explore/<method>/<scale>.toml` holds for `lfs explore`
//! (docs/design.md §15). The loop's sections are `lfs eval`'s, field for field, read per domain
//! (`run.num_train_frames` and `run.num_seed_frames` are each domain's); `[explore]` names the
//! method, the domains it explores and the encoder it trains.

use serde::{Deserialize, Serialize};

use super::apt::AptConfig;
use super::proto::ProtoConfig;
use crate::config::{self, StageConfig};
use crate::env::Task;
use crate::nn::EncoderConfig;
use crate::rl::AgentConfig;
use crate::rl_loop::config::{LoopConfig, LoopEnvConfig, LoopRunConfig, ReplayConfig};
use crate::{Error, Result};

/// The whole `lfs explore` config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ExploreConfig {
    /// Each domain's budget, seed frames and checkpoint cadence (evaluation fields are unused:
    /// exploration has no task to evaluate).
    pub run: LoopRunConfig,
    pub env: LoopEnvConfig,
    /// The exploring agent, one per domain: `sac` for Proto-RL, `drqv2` for APT.
    pub agent: AgentConfig,
    pub replay: ReplayConfig,
    pub explore: ExploreSection,
}

/// The exploring method, its domains and its encoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExploreSection {
    /// `proto` (Proto-RL, denisyarats/proto) or `apt` (URLB's `icm_apt`).
    pub method: ExploreMethod,
    /// The environments explored, in turn, one agent step each; their task rewards are
    /// ignored. Default: the paper's three seen tasks (docs/design.md §15).
    pub tasks: Vec<String>,
    /// What the agents learn from: only `intrinsic` (reward-free pre-training). A task reward
    /// belongs to `lfs eval` / `lfs train` on the exported encoder.
    pub reward: String,
    /// The conv encoder the method trains (Proto-RL: pixels / 255; APT: input_offset −0.5).
    pub encoder: EncoderConfig,
    pub proto: ProtoConfig,
    pub apt: AptConfig,
}

impl Default for ExploreSection {
    fn default() -> Self {
        Self {
            method: ExploreMethod::Proto,
            tasks: ["reach_duplo", "walker_run", "cartpole_swingup"]
                .map(String::from)
                .to_vec(),
            reward: INTRINSIC.to_string(),
            encoder: EncoderConfig::default(),
            proto: ProtoConfig::default(),
            apt: AptConfig::default(),
        }
    }
}

/// The only reward exploration learns from.
pub const INTRINSIC: &str = "intrinsic";

/// The exploring methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExploreMethod {
    /// Proto-RL: SAC with the prototypes' clustering loss and the queue kNN reward.
    Proto,
    /// APT as URLB's `icm_apt`: DrQ-v2's DDPG with ICM and the batch kNN (particle) reward.
    Apt,
}

impl ExploreMethod {
    pub fn name(self) -> &'static str {
        match self {
            ExploreMethod::Proto => "proto",
            ExploreMethod::Apt => "apt",
        }
    }

    /// The agent kind the method explores with, as its upstream does.
    pub fn agent_kind(self) -> &'static str {
        match self {
            ExploreMethod::Proto => "sac",
            ExploreMethod::Apt => "drqv2",
        }
    }
}

impl StageConfig for ExploreConfig {
    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        let section = &self.explore;
        if section.reward != INTRINSIC {
            return bad(format!(
                "explore.reward = {:?}: exploration is reward-free and learns from its intrinsic reward only \
                 (\"{INTRINSIC}\"); a task reward belongs to `lfs eval` or `lfs train` on the exported encoder",
                section.reward
            ));
        }
        let tasks = self.tasks()?;
        if tasks.is_empty() {
            return bad("explore.tasks is empty: name at least one environment to explore".into());
        }
        for (i, t) in tasks.iter().enumerate() {
            if tasks[..i].contains(t) {
                return bad(format!("explore.tasks names {} twice", t.name()));
            }
        }
        let kind = self.agent.kind().name();
        if kind != section.method.agent_kind() {
            return bad(format!(
                "explore.method = \"{}\" explores with agent.kind = \"{}\" (as its upstream does), not \"{kind}\"",
                section.method.name(),
                section.method.agent_kind()
            ));
        }
        if self.replay.feature_cache {
            return bad("replay.feature_cache must be false in lfs explore: the encoder changes every update".into());
        }
        self.rl().validate()?;
        match section.method {
            ExploreMethod::Proto => section.proto.validate(self.agent.settings().batch_size()),
            ExploreMethod::Apt => section.apt.validate("explore.apt"),
        }
    }
}

impl ExploreConfig {
    /// Reads `path` with `key.path=value` overrides (see [`crate::config`]).
    pub fn load(path: &std::path::Path, overrides: &[String]) -> Result<Self> {
        config::load(path, overrides)
    }

    pub fn from_toml_str(text: &str, overrides: &[String]) -> Result<Self> {
        config::from_toml_str(text, overrides)
    }

    pub fn to_toml(&self) -> Result<String> {
        config::to_toml(self)
    }

    /// `explore.tasks` parsed; an unknown name is an error naming it.
    pub fn tasks(&self) -> Result<Vec<Task>> {
        self.explore
            .tasks
            .iter()
            .map(|t| {
                t.parse::<Task>()
                    .map_err(|e| Error::Config(format!("explore.tasks: {e}")))
            })
            .collect()
    }

    /// One domain's loop sections: exactly what `lfs eval` would run there.
    pub fn rl(&self) -> LoopConfig {
        LoopConfig {
            run: self.run.clone(),
            env: self.env.clone(),
            agent: self.agent.clone(),
            replay: self.replay.clone(),
        }
    }

    /// What a resumed run must share with its checkpoint: everything but the budget and the
    /// checkpoint cadence.
    pub fn resume_key(&self) -> Result<String> {
        let mut c = self.clone();
        c.run = c.run.for_resume_key();
        c.to_toml()
    }
}
