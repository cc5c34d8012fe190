//! Config files for every stage: TOML, unknown fields refused, omitted fields at their defaults,
//! and `--set key.path=value` overrides applied to the TOML tree before it is deserialised (so
//! an override is type-checked like the file). A stage's config type implements [`StageConfig`].

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Error, Result};

/// A stage's config: (de)serialisable, with its own range and coupling checks.
pub trait StageConfig: Serialize + DeserializeOwned {
    /// Checks ranges and the couplings between fields.
    fn validate(&self) -> Result<()>;
}

/// Reads `path`, applies `key.path=value` overrides, deserialises and validates; errors name
/// the file.
pub fn load<T: StageConfig>(path: &Path, overrides: &[String]) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
    from_toml_str(&text, overrides).map_err(|e| match e {
        Error::Config(m) => Error::Config(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// Parses TOML text with overrides (see [`load`]).
pub fn from_toml_str<T: StageConfig>(text: &str, overrides: &[String]) -> Result<T> {
    let mut table: toml::Table = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
    for o in overrides {
        apply_override(&mut table, o)?;
    }
    let cfg: T = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| Error::Config(e.to_string()))?;
    cfg.validate()?;
    Ok(cfg)
}

/// The resolved config as TOML (written beside checkpoints and into them).
pub fn to_toml<T: Serialize>(cfg: &T) -> Result<String> {
    toml::to_string(cfg).map_err(|e| Error::Config(format!("serialising config: {e}")))
}

/// The dotted fields whose values differ between two TOML texts (one missing counts), each as
/// "field: A vs B", sorted; empty when they agree or when either does not parse.
pub fn differing_fields(a: &str, b: &str) -> Vec<String> {
    fn flatten(prefix: &str, table: &toml::Table, out: &mut std::collections::BTreeMap<String, String>) {
        for (key, value) in table {
            let name = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            match value {
                toml::Value::Table(t) => flatten(&name, t, out),
                v => {
                    out.insert(name, v.to_string());
                }
            }
        }
    }
    let parse = |text: &str| {
        let table: toml::Table = toml::from_str(text).ok()?;
        let mut fields = std::collections::BTreeMap::new();
        flatten("", &table, &mut fields);
        Some(fields)
    };
    let (Some(a), Some(b)) = (parse(a), parse(b)) else {
        return Vec::new();
    };
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let show = |m: &std::collections::BTreeMap<String, String>| m.get(k).cloned().unwrap_or("(absent)".into());
            format!("{k}: {} vs {}", show(&a), show(&b))
        })
        .collect()
}

/// What a resume refusal says of a checkpoint's resume key against the present one: "checkpoint
/// vs now: field: A vs B, …", or "its settings differ" when no field can be named.
pub fn checkpoint_vs_now(saved: &str, now: &str) -> String {
    let fields = differing_fields(saved, now);
    match fields.is_empty() {
        true => "its settings differ".to_string(),
        false => format!("checkpoint vs now: {}", fields.join(", ")),
    }
}

/// `a.b.c=value`: value parsed as a TOML value, else taken as a string.
fn apply_override(table: &mut toml::Table, item: &str) -> Result<()> {
    let (key, raw) = item
        .split_once('=')
        .ok_or_else(|| Error::Config(format!("--set {item}: expected key=value")))?;
    let value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    };
    let parts: Vec<&str> = key.trim().split('.').collect();
    let mut node = table;
    for part in &parts[..parts.len() - 1] {
        let entry = node
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        node = entry
            .as_table_mut()
            .ok_or_else(|| Error::Config(format!("--set {key}: {part} is not a table")))?;
    }
    node.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}
