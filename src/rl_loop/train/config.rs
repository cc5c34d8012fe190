//! `TrainConfig`: what a `pipelines/e2e/<name>.toml` holds for `lfs train` (end-to-end SAC with
//! an auxiliary objective on the same encoder, docs/design.md §7). The SAC sections are
//! `lfs eval`'s, field for field; `[aux]` chooses the objective and holds the pre-trainer's
//! model, objective and optimizer sections for it.

use serde::{Deserialize, Serialize};

use crate::config::{self, StageConfig};
use crate::nn::AdamConfig;
use crate::objectives::{Method, ModelConfig, ObjectiveConfig, TrainerConfig};
use crate::rl::AgentConfig;
use crate::rl_loop::config::{LoopConfig, LoopEnvConfig, LoopRunConfig, ReplayConfig};
use crate::rl_loop::value_comparison::ValueComparisonConfig;
use crate::{Error, Result};

/// The whole `lfs train` config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    pub run: LoopRunConfig,
    pub env: LoopEnvConfig,
    /// The agent: `kind` ("sac", the default, or "drqv2") and its settings.
    pub agent: AgentConfig,
    pub replay: ReplayConfig,
    pub aux: AuxConfig,
}

/// The auxiliary objective trained online on the encoder, every agent step after the seed
/// frames, on the SAC batch's real pairs (and, for the LFS family, synthetic pairs from the
/// replay's frames).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuxConfig {
    /// `lfs` (the paper's Algorithm 1), `lfs-no-lnc`, `lfs-no-fm`, `lfs-cl`, `atc`, `curl`, or
    /// `none`. `aux.objective.method` follows it.
    pub method: AuxMethod,
    /// false (Algorithm 1): the encoder is detached from the SAC losses. true: the critic's
    /// gradient trains it as well, through its own Adam with the agent's settings: SAC from
    /// pixels (`sac-pixel`) with `method = none`, CURL end to end with `method = curl`. With
    /// `method = none` and false the encoder stays as initialised.
    pub critic_gradient: bool,
    /// Projector, predictor and prototypes, as `lfs pretrain`'s `[model]`.
    pub model: ModelConfig,
    /// The objective's settings, as `lfs pretrain`'s `[objective]`.
    pub objective: ObjectiveConfig,
    /// Adam of the encoder and the objective's heads, as `lfs pretrain`'s `[optimizer]`.
    pub optimizer: AdamConfig,
    /// The paper's value comparison of synthetic and real observations
    /// (`value_comparison.json`; LNC methods).
    pub value_comparison: ValueComparisonConfig,
}

impl Default for AuxConfig {
    fn default() -> Self {
        Self {
            method: AuxMethod(Some(Method::Lfs)),
            critic_gradient: false,
            model: ModelConfig::default(),
            objective: ObjectiveConfig::default(),
            optimizer: AdamConfig::default(),
            value_comparison: ValueComparisonConfig::default(),
        }
    }
}

/// `aux.method`: one of the pre-trainer's methods (by its name), or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxMethod(pub Option<Method>);

impl AuxMethod {
    pub const NONE: AuxMethod = AuxMethod(None);

    /// The pre-trainer's method, `None` for `none`.
    pub fn objective(self) -> Option<Method> {
        self.0
    }

    pub fn name(self) -> &'static str {
        self.0.map(Method::name).unwrap_or("none")
    }
}

impl Serialize for AuxMethod {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for AuxMethod {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name == "none" {
            return Ok(AuxMethod::NONE);
        }
        // The pre-trainer's own names, and its own error for an unknown one (plus `none`).
        Method::deserialize(serde::de::value::StrDeserializer::<D::Error>::new(&name))
            .map(|m| AuxMethod(Some(m)))
            .map_err(|e| serde::de::Error::custom(format!("{}, or `none`", e.to_string().trim_end())))
    }
}

impl StageConfig for TrainConfig {
    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        self.rl().validate()?;
        if self.encoder_changes() && self.replay.feature_cache {
            return bad(format!(
                "replay.feature_cache must be false with aux.method = {}{}: the encoder changes every step",
                self.aux.method.name(),
                if self.aux.critic_gradient {
                    " and aux.critic_gradient"
                } else {
                    ""
                }
            ));
        }
        let refusal = self.agent.settings().end_to_end_refusal(
            self.aux.method.name(),
            self.aux.method.objective().is_some(),
            self.aux.critic_gradient,
        );
        if let Some(why) = refusal {
            return bad(why);
        }
        if self.aux.value_comparison.from_frame.0 > 0 && self.aux.method.objective().is_none() {
            return bad("aux.value_comparison needs an objective with LNC (lfs, lfs-cl), not none".into());
        }
        if let Some(method) = self.aux.method.objective() {
            let nstep = self.agent.returns().n;
            if nstep > 1 {
                return bad(format!(
                    "aux.method = {} takes the batch's consecutive observations (O_t, O_t+1) as its real pairs, \
                     and agent.nstep = {nstep} makes the batch's next observation O_t+{nstep}; set agent.nstep = 1 \
                     or aux.method = \"none\"",
                    method.name()
                ));
            }
            if self.aux.objective.method != method && self.aux.objective.method != Method::Lfs {
                return bad(format!(
                    "aux.objective.method = {} disagrees with aux.method = {}; set aux.method alone",
                    self.aux.objective.method.name(),
                    method.name()
                ));
            }
            if self.aux.value_comparison.from_frame.0 > 0 && !method.uses_lnc() {
                return bad(format!(
                    "aux.value_comparison needs an objective with LNC (lfs, lfs-cl), not {}",
                    method.name()
                ));
            }
            self.trainer_config()?.validate().map_err(|e| match e {
                Error::Config(m) => Error::Config(format!("aux: {m}")),
                other => other,
            })?;
        }
        Ok(())
    }
}

impl TrainConfig {
    /// Whether anything trains the encoder (an objective, or the critic's gradient).
    pub fn encoder_changes(&self) -> bool {
        self.aux.method.objective().is_some() || self.aux.critic_gradient
    }

    /// Reads `path` with `key.path=value` overrides (see [`crate::config`]).
    pub fn load(path: &std::path::Path, overrides: &[String]) -> Result<Self> {
        config::load::<Self>(path, overrides).map(Self::synced)
    }

    pub fn from_toml_str(text: &str, overrides: &[String]) -> Result<Self> {
        config::from_toml_str::<Self>(text, overrides).map(Self::synced)
    }

    /// `aux.objective.method` set to `aux.method`, so the resolved config says one thing.
    fn synced(mut self) -> Self {
        if let Some(method) = self.aux.method.objective() {
            self.aux.objective.method = method;
        }
        self
    }

    pub fn to_toml(&self) -> Result<String> {
        config::to_toml(self)
    }

    /// The RL loop's half: exactly what `lfs eval` would run.
    pub fn rl(&self) -> LoopConfig {
        LoopConfig {
            run: self.run.clone(),
            env: self.env.clone(),
            agent: self.agent.clone(),
            replay: self.replay.clone(),
        }
    }

    /// The objective engine's config for `aux.method`: `[aux]`'s model, optimizer and objective,
    /// M = the SAC batch size (Algorithm 1 draws one batch of M real transitions for both), the
    /// run's seed and the replay's shift padding. Errors for `aux.method = none`.
    pub fn trainer_config(&self) -> Result<TrainerConfig> {
        let method = self
            .aux
            .method
            .objective()
            .ok_or_else(|| Error::Config("aux.method = none has no objective".into()))?;
        Ok(TrainerConfig {
            seed: self.run.seed,
            batch_size: self.agent.batch_size(),
            random_shift_pad: self.replay.random_shift_pad,
            model: self.aux.model.clone(),
            optimizer: self.aux.optimizer.clone(),
            objective: ObjectiveConfig {
                method,
                ..self.aux.objective.clone()
            },
        })
    }

    /// What a resumed run must share with its checkpoint: everything but the budget and the
    /// checkpoint cadence.
    pub fn resume_key(&self) -> Result<String> {
        let mut c = self.clone();
        c.run = c.run.for_resume_key();
        c.to_toml()
    }
}
