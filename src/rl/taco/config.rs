//! TACO's `[agent]` section: DrQ-v2's fields, and TACO's own in the `[agent.taco]` table.

use serde::{Deserialize, Serialize};

use super::TacoSettings;
use crate::nn::AdamConfig;
use crate::rl::{AgentSettings, DrQv2Config, NStep};
use crate::Result;

/// The `[agent.taco]` table of a TACO config.
pub const TACO_TABLE: &str = "taco";

/// DrQ-v2's settings, and TACO's own in `[agent.taco]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TacoConfig {
    #[serde(flatten)]
    pub agent: DrQv2Config,
    pub taco: TacoSettings,
}

impl<'de> Deserialize<'de> for TacoConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut table = toml::Table::deserialize(deserializer)?;
        let taco = table.remove(TACO_TABLE);
        Ok(TacoConfig {
            agent: toml::Value::Table(table).try_into().map_err(D::Error::custom)?,
            taco: taco
                .unwrap_or_else(|| toml::Value::Table(toml::Table::new()))
                .try_into()
                .map_err(|e: toml::de::Error| {
                    D::Error::custom(format!("[agent.{TACO_TABLE}]: {}", e.to_string().trim_end()))
                })?,
        })
    }
}

impl AgentSettings for TacoConfig {
    fn batch_size(&self) -> usize {
        self.agent.batch_size
    }

    fn optimizer(&self) -> &AdamConfig {
        &self.agent.optimizer
    }

    fn returns(&self) -> NStep {
        self.agent.returns()
    }

    /// K: the action sequences of TACO's loss.
    fn action_sequence(&self) -> usize {
        self.taco.multistep
    }

    fn validate(&self, section: &str) -> Result<()> {
        self.agent.validate(section)?;
        self.taco.validate(&format!("{section}.{TACO_TABLE}"))
    }

    fn frozen_encoder_refusal(&self) -> Option<String> {
        Some(
            "[agent] kind = \"taco\": TACO trains the encoder with its own loss on the run's actions, so it runs \
             end to end (lfs train --config pipelines/taco/*.toml), not on a frozen encoder"
                .into(),
        )
    }

    fn end_to_end_refusal(&self, aux_method: &str, aux_objective: bool, critic_gradient: bool) -> Option<String> {
        (aux_objective || !critic_gradient).then(|| {
            format!(
                "[agent] kind = \"taco\" trains the encoder with the critic's loss and its own: set aux.method = \"none\" \
                 and aux.critic_gradient = true (as pipelines/taco/*.toml do), not aux.method = {aux_method} with \
                 critic_gradient = {critic_gradient}"
            )
        })
    }
}
