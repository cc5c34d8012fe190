//! `SuiteFile`: what an `eval/suites/<name>.toml` holds for `lfs suite` — which encoders, on
//! which tasks, with which seeds, under which SAC config and frame budget (docs/design.md §8).
//! Unknown fields are errors; every field is documented in `eval/suites/README.md`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::e2e::TrainConfig;
use crate::env::Task;
use crate::eval::{EncoderChoice, EvalConfig, Frames};
use crate::{Error, Result};

/// The export file `lfs suite` looks for inside a pre-training run directory (what
/// `make pretrain` and `lfs export --out <run>/encoder.safetensors` write).
pub const RUN_DIR_ENCODER: &str = "encoder.safetensors";

/// A whole suite file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteFile {
    /// Short name, used in job names (`lfs-<name>`).
    pub name: String,
    /// `tiny`, `mini` or `paper`: the scale its numbers are at, printed beside every result.
    pub scale: String,
    /// The `lfs eval` config every cell runs (a `pipelines/sac/*.toml`), relative to the
    /// directory `lfs suite` runs in.
    pub sac_config: PathBuf,
    /// `key=value` overrides of that config, as `lfs eval --set`; they apply to the
    /// `train_config` of `command = "train"` rows too.
    #[serde(default)]
    pub set: Vec<String>,
    /// The `lfs train` config (a `pipelines/e2e/*.toml`) of the `command = "train"` rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_config: Option<PathBuf>,
    /// Frame budget of every cell (`run.num_train_frames`).
    pub num_train_frames: Frames,
    /// DMControl tasks.
    pub tasks: Vec<Task>,
    /// Run seeds.
    pub seeds: Vec<u64>,
    /// Threads of each cell (`RAYON_NUM_THREADS`); unset: the cores divided among the cells
    /// that run at once. Set it to make cells bit-identical wherever they run.
    #[serde(default)]
    pub threads_per_cell: Option<usize>,
    /// Evaluate encoders pre-trained on videos of another render quality than the cells
    /// render (`lfs eval --allow-render-quality-mismatch`); both qualities stay in each
    /// cell's `run.json`.
    #[serde(default)]
    pub allow_render_quality_mismatch: bool,
    /// The encoders to compare, one row of the table each.
    pub encoders: Vec<EncoderRow>,
}

/// One encoder row: a label, where the encoder comes from, and what its cells run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderRow {
    /// Label in cell names, tables and plots (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// `random`, an `lfs export` file, or a pre-training run directory holding
    /// `encoder.safetensors`. For `train` rows: the encoder's initialisation.
    pub source: String,
    /// `eval` (frozen-encoder SAC, `lfs eval`) or `train` (end-to-end, `lfs train` with the
    /// suite's `train_config`).
    #[serde(default, skip_serializing_if = "RowCommand::is_eval")]
    pub command: RowCommand,
    /// `key=value` overrides of this row's `lfs train` config, e.g. `aux.method=atc` (`train`
    /// rows only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<String>,
}

/// What a row's cells run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowCommand {
    #[default]
    Eval,
    Train,
}

impl RowCommand {
    fn is_eval(&self) -> bool {
        *self == RowCommand::Eval
    }
}

impl EncoderRow {
    /// The agent its cells record (`cell.json`'s `agent`): `sac` for frozen-encoder SAC,
    /// `train` for end-to-end runs.
    pub fn agent(&self) -> &'static str {
        match self.command {
            RowCommand::Eval => "sac",
            RowCommand::Train => "train",
        }
    }

    /// What `lfs eval` is given: `random` or the export file (a run directory resolved to its
    /// `encoder.safetensors`).
    pub fn choice(&self) -> Result<EncoderChoice> {
        if self.source == "random" {
            return Ok(EncoderChoice::Random);
        }
        let path = PathBuf::from(&self.source);
        if path.is_dir() {
            let file = path.join(RUN_DIR_ENCODER);
            if !file.is_file() {
                return Err(Error::Config(format!(
                    "encoder {}: {} is a directory without {RUN_DIR_ENCODER}; run `lfs export {}/checkpoint.safetensors --out {}` first",
                    self.name,
                    path.display(),
                    path.display(),
                    file.display()
                )));
            }
            return Ok(EncoderChoice::Exported(file));
        }
        if !path.is_file() {
            return Err(Error::Config(format!(
                "encoder {}: {} is neither `random`, an export file nor a run directory",
                self.name,
                path.display()
            )));
        }
        Ok(EncoderChoice::Exported(path))
    }
}

impl SuiteFile {
    /// Reads and checks a suite file; errors name the file.
    pub fn load(path: &Path) -> Result<Self> {
        let named = |m: String| Error::Config(format!("{}: {m}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| named(e.to_string()))?;
        let suite: SuiteFile = toml::from_str(&text).map_err(|e| named(e.to_string()))?;
        suite.validate().map_err(|e| match e {
            Error::Config(m) => named(m),
            other => other,
        })?;
        Ok(suite)
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.tasks.is_empty() || self.seeds.is_empty() || self.encoders.is_empty() {
            return bad("tasks, seeds and encoders must each name at least one".into());
        }
        if !["tiny", "mini", "paper"].contains(&self.scale.as_str()) {
            return bad(format!("scale = {:?}: expected tiny, mini or paper", self.scale));
        }
        if self.threads_per_cell == Some(0) {
            return bad("threads_per_cell must be >= 1".into());
        }
        let mut names: Vec<&str> = Vec::new();
        for row in &self.encoders {
            let ok = !row.name.is_empty()
                && row
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok {
                return bad(format!(
                    "encoder name {:?}: use letters, digits, '-', '_' and '.' only (it names folders)",
                    row.name
                ));
            }
            if names.contains(&row.name.as_str()) {
                return bad(format!("encoder name {:?} appears twice", row.name));
            }
            match row.command {
                RowCommand::Train if self.train_config.is_none() => {
                    return bad(format!(
                        "encoder {}: command = \"train\" needs the suite's train_config (a pipelines/e2e/*.toml)",
                        row.name
                    ))
                }
                RowCommand::Eval if !row.set.is_empty() => {
                    return bad(format!(
                        "encoder {}: `set` is for command = \"train\" rows; an eval row runs the suite's sac_config",
                        row.name
                    ))
                }
                _ => {}
            }
            names.push(&row.name);
        }
        for (what, dup) in [
            ("task", has_duplicate(&self.tasks)),
            ("seed", has_duplicate(&self.seeds)),
        ] {
            if dup {
                return bad(format!("a {what} appears twice"));
            }
        }
        Ok(())
    }

    /// The SAC config of every cell but its seed: the suite's file, its overrides, its budget.
    pub fn sac_config(&self) -> Result<EvalConfig> {
        let mut overrides = self.set.clone();
        overrides.push(format!("run.num_train_frames={}", self.num_train_frames.0));
        EvalConfig::load(&self.sac_config, &overrides)
    }

    /// The `lfs train` config of `row`'s cells but their seed: `train_config`, the suite's
    /// overrides, the budget, then the row's overrides.
    pub fn train_config(&self, row: &EncoderRow) -> Result<TrainConfig> {
        let path = self
            .train_config
            .as_ref()
            .ok_or_else(|| Error::Config(format!("encoder {}: the suite has no train_config", row.name)))?;
        let mut overrides = self.set.clone();
        overrides.push(format!("run.num_train_frames={}", self.num_train_frames.0));
        overrides.extend(row.set.iter().cloned());
        TrainConfig::load(path, &overrides).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("encoder {}: {m}", row.name)),
            other => other,
        })
    }
}

fn has_duplicate<T: PartialEq>(items: &[T]) -> bool {
    items.iter().enumerate().any(|(i, a)| items[..i].contains(a))
}
