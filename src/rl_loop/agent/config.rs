//! `[agent]`: which agent the loop trains (`kind`, "sac" when omitted, as every config before
//! DrQ-v2 was) and that agent's own settings beside it, each kind with its own fields (an
//! other kind's field is refused by name).

use serde::{Deserialize, Serialize};

use crate::nn::AdamConfig;
use crate::rl::{DrQv2Config, NStep, SacConfig, TacoSettings};
use crate::{Error, Result};

/// The agents `[agent] kind` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// Soft Actor-Critic, the paper's (docs/design.md §6).
    Sac,
    /// DrQ-v2, the paper's expert (docs/design.md §13).
    DrQv2,
    /// TACO: DrQ-v2 with latent actions and its temporal contrastive loss (§14).
    Taco,
}

impl AgentKind {
    pub const ALL: [AgentKind; 3] = [AgentKind::Sac, AgentKind::DrQv2, AgentKind::Taco];

    /// Its `kind` in configs, `cell.json` and the report.
    pub fn name(self) -> &'static str {
        match self {
            AgentKind::Sac => "sac",
            AgentKind::DrQv2 => "drqv2",
            AgentKind::Taco => "taco",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// `"sac", "drqv2", "taco"`, for messages.
    pub fn names() -> String {
        Self::ALL.map(|k| format!("{:?}", k.name())).join(", ")
    }
}

/// The `[agent]` section: the agent's kind and its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentConfig {
    Sac(SacConfig),
    DrQv2(DrQv2Config),
    /// DrQ-v2's settings, and TACO's own in `[agent.taco]`.
    Taco {
        agent: DrQv2Config,
        taco: TacoSettings,
    },
}

/// The `[agent.taco]` table of a TACO config.
const TACO_TABLE: &str = "taco";

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig::Sac(SacConfig::default())
    }
}

impl AgentConfig {
    pub fn kind(&self) -> AgentKind {
        match self {
            AgentConfig::Sac(_) => AgentKind::Sac,
            AgentConfig::DrQv2(_) => AgentKind::DrQv2,
            AgentConfig::Taco { .. } => AgentKind::Taco,
        }
    }

    /// Transitions per update.
    pub fn batch_size(&self) -> usize {
        match self {
            AgentConfig::Sac(c) => c.batch_size,
            AgentConfig::DrQv2(c) | AgentConfig::Taco { agent: c, .. } => c.batch_size,
        }
    }

    /// The agent's Adam settings: what an encoder the critic trains steps with, as SAC from
    /// pixels, CURL and DrQ-v2 give it the agent's learning rate.
    pub fn optimizer(&self) -> &AdamConfig {
        match self {
            AgentConfig::Sac(c) => &c.optimizer,
            AgentConfig::DrQv2(c) | AgentConfig::Taco { agent: c, .. } => &c.optimizer,
        }
    }

    /// The returns its batches carry.
    pub fn returns(&self) -> NStep {
        match self {
            AgentConfig::Sac(c) => NStep {
                n: 1,
                discount: c.discount,
            },
            AgentConfig::DrQv2(c) | AgentConfig::Taco { agent: c, .. } => NStep {
                n: c.nstep,
                discount: c.discount,
            },
        }
    }

    /// K of the action sequences its batches carry (TACO's multistep), 0 for none.
    pub fn action_sequence(&self) -> usize {
        match self {
            AgentConfig::Taco { taco, .. } => taco.multistep,
            _ => 0,
        }
    }

    /// Checks ranges; errors name the field under `section`.
    pub fn validate(&self, section: &str) -> Result<()> {
        match self {
            AgentConfig::Sac(c) => c.validate(section),
            AgentConfig::DrQv2(c) => c.validate(section),
            AgentConfig::Taco { agent, taco } => {
                agent.validate(section)?;
                taco.validate(&format!("{section}.{TACO_TABLE}"))
            }
        }
    }

    /// SAC's settings, or an error saying which agent the config names.
    pub fn sac(&self) -> Result<&SacConfig> {
        match self {
            AgentConfig::Sac(c) => Ok(c),
            other => Err(other.not(AgentKind::Sac)),
        }
    }

    /// DrQ-v2's settings, or an error saying which agent the config names.
    pub fn drqv2(&self) -> Result<&DrQv2Config> {
        match self {
            AgentConfig::DrQv2(c) => Ok(c),
            other => Err(other.not(AgentKind::DrQv2)),
        }
    }

    /// TACO's settings (DrQ-v2's and its own), or an error saying which agent the config names.
    pub fn taco(&self) -> Result<(&DrQv2Config, &TacoSettings)> {
        match self {
            AgentConfig::Taco { agent, taco } => Ok((agent, taco)),
            other => Err(other.not(AgentKind::Taco)),
        }
    }

    fn not(&self, wanted: AgentKind) -> Error {
        Error::Config(format!(
            "[agent] is kind = {:?}, not {:?}",
            self.kind().name(),
            wanted.name()
        ))
    }
}

/// What serialises: `kind` first, then the agent's own fields.
#[derive(Serialize)]
#[serde(tag = "kind")]
enum Tagged<'a> {
    #[serde(rename = "sac")]
    Sac(&'a SacConfig),
    #[serde(rename = "drqv2")]
    DrQv2(&'a DrQv2Config),
    #[serde(rename = "taco")]
    Taco(TacoTables<'a>),
}

/// A TACO config: DrQ-v2's fields, then the `[agent.taco]` table.
#[derive(Serialize)]
struct TacoTables<'a> {
    #[serde(flatten)]
    agent: &'a DrQv2Config,
    taco: &'a TacoSettings,
}

impl Serialize for AgentConfig {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            AgentConfig::Sac(c) => Tagged::Sac(c),
            AgentConfig::DrQv2(c) => Tagged::DrQv2(c),
            AgentConfig::Taco { agent, taco } => Tagged::Taco(TacoTables { agent, taco }),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for AgentConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut table = toml::Table::deserialize(deserializer)?;
        let kind = match table.remove("kind") {
            None => AgentKind::Sac,
            Some(toml::Value::String(name)) => AgentKind::parse(&name).ok_or_else(|| {
                D::Error::custom(format!("unknown agent kind {name:?}: expected {}", AgentKind::names()))
            })?,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "agent kind {other} is not a name: expected {}",
                    AgentKind::names()
                )))
            }
        };
        // The agent's own fields; another agent's field is named in the error with the kind.
        let in_kind = |e: toml::de::Error| {
            D::Error::custom(format!(
                "[agent] with kind = {:?}: {}",
                kind.name(),
                e.to_string().trim_end()
            ))
        };
        let taco = table.remove(TACO_TABLE);
        if taco.is_some() && kind != AgentKind::Taco {
            return Err(D::Error::custom(format!(
                "[agent.{TACO_TABLE}] is TACO's; [agent] is kind = {:?}",
                kind.name()
            )));
        }
        let value = toml::Value::Table(table);
        Ok(match kind {
            AgentKind::Sac => AgentConfig::Sac(value.try_into().map_err(in_kind)?),
            AgentKind::DrQv2 => AgentConfig::DrQv2(value.try_into().map_err(in_kind)?),
            AgentKind::Taco => AgentConfig::Taco {
                agent: value.try_into().map_err(in_kind)?,
                taco: taco
                    .unwrap_or_else(|| toml::Value::Table(toml::Table::new()))
                    .try_into()
                    .map_err(|e: toml::de::Error| {
                        D::Error::custom(format!("[agent.{TACO_TABLE}]: {}", e.to_string().trim_end()))
                    })?,
            },
        })
    }
}
