//! `[agent]`: which agent the loop trains (`kind`, the registry's default when omitted: "sac",
//! as every config before DrQ-v2 was) and that agent's own settings beside it, each kind with
//! its own fields (another kind's field is refused by name). The kinds are the agents
//! [`agents!`](crate::agents) registers in `rl/mod.rs`; nothing here names one.

/// Registers the agents: one line per agent, `Variant = "kind" => path::ToAgent`, the default
/// kind first. Makes [`AgentKind`](crate::rl::AgentKind), the `[agent]` section
/// [`AgentConfig`](crate::rl::AgentConfig) (TOML: `kind` first, then the agent's own fields),
/// [`Registered`](crate::rl::Registered) for each agent, and
/// [`AgentConfig::visit`](crate::rl::AgentConfig::visit), which runs generic code with the
/// agent a config names.
#[macro_export]
macro_rules! agents {
    ($( $(#[$doc:meta])* $variant:ident => $agent:ty ),+ $(,)?) => {
        /// The agents `[agent] kind` names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum AgentKind {
            $( $(#[$doc])* $variant, )+
        }

        impl AgentKind {
            pub const ALL: &'static [AgentKind] = &[$(AgentKind::$variant),+];

            /// Its `kind` in configs, `cell.json` and the report.
            pub fn name(self) -> &'static str {
                match self {
                    $( AgentKind::$variant => <$agent as $crate::rl::Agent>::KIND, )+
                }
            }

            /// Its name in messages.
            fn title(self) -> &'static str {
                match self {
                    $( AgentKind::$variant => <$agent as $crate::rl::Agent>::TITLE, )+
                }
            }

            /// The tables of `[agent]` that are its own.
            fn own_tables(self) -> &'static [&'static str] {
                match self {
                    $( AgentKind::$variant => <$agent as $crate::rl::Agent>::OWN_TABLES, )+
                }
            }

            fn parse(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|k| k.name() == name)
            }

            /// `"sac", "drqv2", "taco"`, for messages.
            pub fn names() -> String {
                Self::ALL.iter().map(|k| format!("{:?}", k.name())).collect::<Vec<_>>().join(", ")
            }
        }

        /// The `[agent]` section: the agent's kind and its settings.
        #[derive(Debug, Clone, PartialEq)]
        pub enum AgentConfig {
            $( $variant(<$agent as $crate::rl::Agent>::Config), )+
        }

        impl Default for AgentConfig {
            fn default() -> Self {
                $crate::agents!(@first_default $($variant)+)
            }
        }

        impl AgentConfig {
            pub fn kind(&self) -> AgentKind {
                match self {
                    $( AgentConfig::$variant(_) => AgentKind::$variant, )+
                }
            }

            /// What the loop reads of the section, whichever agent it is.
            pub fn settings(&self) -> &dyn $crate::rl::AgentSettings {
                match self {
                    $( AgentConfig::$variant(c) => c, )+
                }
            }

            /// Agent `A`'s settings, or an error saying which agent the config names.
            pub fn get<A: Registered>(&self) -> $crate::Result<&A::Config> {
                A::pick(self).ok_or_else(|| {
                    $crate::Error::Config(format!(
                        "[agent] is kind = {:?}, not {:?}",
                        self.kind().name(),
                        A::KIND
                    ))
                })
            }

            /// `visitor` run with the agent this section names.
            pub fn visit<V: AgentVisitor>(&self, visitor: V) -> V::Output {
                match self {
                    $( AgentConfig::$variant(_) => visitor.visit::<$agent>(), )+
                }
            }
        }

        $(
            impl Registered for $agent {
                fn pick(cfg: &AgentConfig) -> Option<&Self::Config> {
                    match cfg {
                        AgentConfig::$variant(c) => Some(c),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
            }
        )+

        impl serde::Serialize for AgentConfig {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
                match self {
                    $( AgentConfig::$variant(c) => $crate::rl::agent_config::Tagged {
                        kind: <$agent as $crate::rl::Agent>::KIND,
                        config: c,
                    }.serialize(serializer), )+
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for AgentConfig {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
                use serde::de::Error as _;
                let table = <toml::Table as serde::Deserialize>::deserialize(deserializer)?;
                let (kind, value) = $crate::rl::agent_config::split_kind(
                    table,
                    AgentKind::ALL,
                    AgentKind::parse,
                    |k| (k.name(), k.title(), k.own_tables()),
                    &AgentKind::names(),
                ).map_err(D::Error::custom)?;
                // The agent's own fields; another agent's field is named in the error with the kind.
                let in_kind = |e: toml::de::Error| {
                    D::Error::custom(format!("[agent] with kind = {:?}: {}", kind.name(), e.to_string().trim_end()))
                };
                Ok(match kind {
                    $( AgentKind::$variant => AgentConfig::$variant(value.try_into().map_err(in_kind)?), )+
                })
            }
        }
    };
    (@first_default $first:ident $($rest:ident)*) => {
        AgentConfig::$first(Default::default())
    };
}

use serde::Serialize;

/// An agent the registry knows: how to find its settings in an [`AgentConfig`](crate::rl::AgentConfig).
pub trait Registered: crate::rl::Agent {
    fn pick(cfg: &crate::rl::AgentConfig) -> Option<&Self::Config>;
}

/// Generic code run with the agent a config names ([`AgentConfig::visit`](crate::rl::AgentConfig::visit)).
pub trait AgentVisitor {
    type Output;
    fn visit<A: Registered>(self) -> Self::Output;
}

/// What serialises: `kind` first, then the agent's own fields.
#[derive(Serialize)]
#[doc(hidden)]
pub struct Tagged<'a, C: Serialize> {
    pub kind: &'static str,
    #[serde(flatten)]
    pub config: &'a C,
}

/// `kind` out of an `[agent]` table (the first of `all` when absent), refusing a table that
/// another kind owns; `describe` gives a kind's name, title and own tables.
#[doc(hidden)]
pub fn split_kind<K: Copy + PartialEq>(
    mut table: toml::Table,
    all: &[K],
    parse: fn(&str) -> Option<K>,
    describe: fn(K) -> (&'static str, &'static str, &'static [&'static str]),
    names: &str,
) -> Result<(K, toml::Value), String> {
    let kind = match table.remove("kind") {
        None => all[0],
        Some(toml::Value::String(name)) => {
            parse(&name).ok_or_else(|| format!("unknown agent kind {name:?}: expected {names}"))?
        }
        Some(other) => return Err(format!("agent kind {other} is not a name: expected {names}")),
    };
    for &owner in all.iter().filter(|&&k| k != kind) {
        let (_, title, tables) = describe(owner);
        if let Some(t) = tables.iter().find(|t| table.contains_key(**t)) {
            return Err(format!(
                "[agent.{t}] is {title}'s; [agent] is kind = {:?}",
                describe(kind).0
            ));
        }
    }
    Ok((kind, toml::Value::Table(table)))
}

/// The section's [`AgentSettings`](crate::rl::AgentSettings), whichever agent it is.
impl crate::rl::AgentConfig {
    /// Transitions per update.
    pub fn batch_size(&self) -> usize {
        self.settings().batch_size()
    }

    /// The agent's Adam settings (see [`AgentSettings::optimizer`](crate::rl::AgentSettings::optimizer)).
    pub fn optimizer(&self) -> &crate::nn::AdamConfig {
        self.settings().optimizer()
    }

    /// The returns its batches carry.
    pub fn returns(&self) -> crate::rl::NStep {
        self.settings().returns()
    }

    /// K of the action sequences its batches carry, 0 for none.
    pub fn action_sequence(&self) -> usize {
        self.settings().action_sequence()
    }

    /// Checks ranges; errors name the field under `section`.
    pub fn validate(&self, section: &str) -> crate::Result<()> {
        self.settings().validate(section)
    }
}
