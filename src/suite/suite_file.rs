//! `SuiteFile`: what an `eval/suites/<name>.toml` holds for `lfs suite` — which encoders, on
//! which tasks, with which seeds, under which SAC config and frame budget (docs/design.md §8).
//! Unknown fields are errors; every field is documented in `eval/suites/README.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::env::{RenderQuality, Task};
use crate::rl_loop::train::TrainConfig;
use crate::rl_loop::{EncoderChoice, Frames, LoopConfig, RenderQualitySetting};
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
    /// `key=value` overrides for the cells of one task, after `set` and before a row's own:
    /// settings a protocol fixes per task (DrQ-v2's walker tasks: `agent.nstep=1`,
    /// `agent.batch_size=512`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_set: BTreeMap<Task, Vec<String>>,
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
    /// The one comparison a pre-registered study decides on; `lfs report` prints its verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<PrimaryComparison>,
}

/// A pre-registered primary comparison (`[primary]`): method `a` against method `b` on the
/// difference of one aggregate of expert-normalised scores at the suite's frame budget, over
/// the tasks both have runs on. The decision rule is fixed here, before any number exists.
/// With `unit = "run"`: a stratified-bootstrap percentile interval at `confidence`; `a` is
/// better if the interval's lower end is above 0, `b` is better if its upper end is below 0,
/// otherwise no difference is detected. With `unit = "seed"`: an exact permutation test of the
/// seeds' method labels at level 1 − `confidence` (src/report/seed_units.rs). `b` may name
/// several methods (`b = ["random", "atc"]`, seeds as units only): `a` is then compared with
/// each, and Holm's step-down over their p-values holds the family-wise level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrimaryComparison {
    /// A method as the report names it: an encoder row's name (`name+agent` when the suite's
    /// rows run different agents).
    pub a: String,
    /// The method `a` is compared with, or the methods (a family of comparisons).
    #[serde(with = "one_or_many")]
    pub b: Vec<String>,
    /// `iqm`, `mean` (of the per-task means) or `median` (of the per-task means).
    pub aggregate: PrimaryAggregate,
    /// Coverage of the interval (0.95: a two-sided decision at level 0.05).
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    /// What the decision treats as independent: each `run` (the default), or each `seed` with
    /// its runs on every task together (when a seed's runs share a pre-trained encoder: a
    /// source with `{seed}`).
    #[serde(default, skip_serializing_if = "PrimaryUnit::is_run")]
    pub unit: PrimaryUnit,
}

/// The independent unit of a primary comparison.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrimaryUnit {
    /// Every run on its own, resampled within its task (rliable's stratified bootstrap).
    #[default]
    Run,
    /// A seed's runs on all tasks together: permuted between the methods and resampled as one.
    Seed,
}

impl PrimaryUnit {
    fn is_run(&self) -> bool {
        *self == PrimaryUnit::Run
    }
}

fn default_confidence() -> f64 {
    0.95
}

/// `b = "random"` or `b = ["random", "atc"]`; written back as it was read (one method as a
/// string, so that older suite folders' `suite.toml` round-trip unchanged).
mod one_or_many {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize, Serialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }

    pub fn serialize<S: Serializer>(methods: &[String], s: S) -> Result<S::Ok, S::Error> {
        match methods {
            [one] => OneOrMany::One(one.clone()).serialize(s),
            many => OneOrMany::Many(many.to_vec()).serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(match OneOrMany::deserialize(d)? {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        })
    }
}

/// The aggregates a primary comparison may use (rliable's, optimality gap left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrimaryAggregate {
    Iqm,
    Mean,
    Median,
}

/// One encoder row: a label, where the encoder comes from, and what its cells run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderRow {
    /// Label in cell names, tables and plots (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// `random`, an `lfs export` file, or a pre-training run directory holding
    /// `encoder.safetensors`. For `train` rows: the encoder's initialisation. `{seed}` in it
    /// is replaced by each cell's seed: one pre-trained encoder per seed.
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

/// What `{seed}` in a row's source stands for.
const SEED_PLACEHOLDER: &str = "{seed}";

impl EncoderRow {
    /// The row as the cells of `seed` run it: `{seed}` in its source replaced by the seed.
    pub fn for_seed(&self, seed: u64) -> EncoderRow {
        EncoderRow {
            source: self.source.replace(SEED_PLACEHOLDER, &seed.to_string()),
            ..self.clone()
        }
    }

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
        if let Some(p) = &self.primary {
            validate_primary(p, &names)?;
        }
        if let Some(task) = self.task_set.keys().find(|t| !self.tasks.contains(t)) {
            return bad(format!("task_set names {task}, which is not among the suite's tasks"));
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

    /// The SAC config of every cell but its seed: the suite's file, its overrides, its budget
    /// (and with `task`, that task's overrides). Under `env.render_quality = "encoder"` every
    /// row renders at the quality its pre-trained encoders agree on
    /// ([`SuiteFile::encoders_render_quality`]).
    pub fn sac_config(&self, task: Option<Task>) -> Result<LoopConfig> {
        let mut cfg = LoopConfig::load(&self.sac_config, &self.overrides(task))?;
        self.pin_render_quality(&mut cfg.env.render_quality)?;
        Ok(cfg)
    }

    /// The suite's overrides, its budget, and `task`'s overrides.
    fn overrides(&self, task: Option<Task>) -> Vec<String> {
        let mut overrides = self.set.clone();
        overrides.push(format!("run.num_train_frames={}", self.num_train_frames.0));
        if let Some(set) = task.and_then(|t| self.task_set.get(&t)) {
            overrides.extend(set.iter().cloned());
        }
        overrides
    }

    /// `"encoder"` becomes the quality the suite's pre-trained encoders agree on, so that its
    /// `random` rows (which record none) see the task as the others do; unchanged when they
    /// record none or disagree (each row then follows its own encoder).
    fn pin_render_quality(&self, setting: &mut RenderQualitySetting) -> Result<()> {
        if *setting == RenderQualitySetting::Encoder {
            if let Some(q) = self.encoders_render_quality()? {
                *setting = RenderQualitySetting::Pinned(q);
            }
        }
        Ok(())
    }

    /// The render quality the suite's pre-trained encoders were trained at, when they record
    /// one and all agree. Under `env.render_quality = "encoder"`, `random` rows render at it, so
    /// that every row of the suite sees the task alike (the random encoder records none).
    pub fn encoders_render_quality(&self) -> Result<Option<RenderQuality>> {
        let mut found = None;
        let rows = self
            .encoders
            .iter()
            .flat_map(|r| self.seeds.iter().map(|&s| r.for_seed(s)));
        for row in rows {
            if let EncoderChoice::Exported(path) = row.choice()? {
                match (found, crate::nn::encoder_file::recorded_render_quality(&path)?) {
                    (_, None) => {}
                    (None, Some(q)) => found = Some(q),
                    (Some(f), Some(q)) if f != q => return Ok(None),
                    (Some(_), Some(_)) => {}
                }
            }
        }
        Ok(found)
    }

    /// The `lfs train` config of `row`'s cells on `task` but their seed: `train_config`, the
    /// suite's overrides, the budget, the task's overrides, then the row's; its render quality
    /// as [`SuiteFile::sac_config`]'s.
    pub fn train_config(&self, row: &EncoderRow, task: Task) -> Result<TrainConfig> {
        let path = self
            .train_config
            .as_ref()
            .ok_or_else(|| Error::Config(format!("encoder {}: the suite has no train_config", row.name)))?;
        let mut overrides = self.overrides(Some(task));
        overrides.extend(row.set.iter().cloned());
        let mut cfg = TrainConfig::load(path, &overrides).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("encoder {}: {m}", row.name)),
            other => other,
        })?;
        self.pin_render_quality(&mut cfg.env.render_quality)?;
        Ok(cfg)
    }
}

/// Checks a `[primary]` comparison against the suite's encoder row `names`.
fn validate_primary(p: &PrimaryComparison, names: &[&str]) -> Result<()> {
    let bad = |m: String| Err(Error::Config(m));
    if p.b.is_empty() {
        return bad("primary: b names no method".to_string());
    }
    for method in std::iter::once(&p.a).chain(&p.b) {
        let row = method.split('+').next().unwrap_or_default();
        if !names.contains(&row) {
            return bad(format!(
                "primary: {method:?} is not an encoder row of this suite (rows: {})",
                names.join(", ")
            ));
        }
    }
    if p.b.contains(&p.a) {
        return bad(format!("primary: a and b are both {:?}", p.a));
    }
    if has_duplicate(&p.b) {
        return bad(format!("primary: b names a method twice: {:?}", p.b));
    }
    if p.b.len() > 1 && p.unit != PrimaryUnit::Seed {
        return bad(format!(
            "primary: b = {:?} is a family of comparisons, which Holm's step-down decides from \
             p-values: it needs unit = \"seed\"",
            p.b
        ));
    }
    if !(p.confidence > 0.0 && p.confidence < 1.0) {
        return bad(format!(
            "primary: confidence = {} must be between 0 and 1",
            p.confidence
        ));
    }
    Ok(())
}

fn has_duplicate<T: PartialEq>(items: &[T]) -> bool {
    items.iter().enumerate().any(|(i, a)| items[..i].contains(a))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use super::*;
    use crate::nn::checkpoint;

    /// An export-kind file whose `lfs.datasets` records `quality` (None: ingested videos).
    fn export_file(dir: &Path, name: &str, kind: &str, quality: Option<&str>) -> String {
        let path = dir.join(name);
        let mut meta = HashMap::new();
        meta.insert(crate::run_dir::kind::KEY.to_string(), kind.to_string());
        let datasets = match quality {
            Some(q) => serde_json::json!([{ "render_quality": q }]),
            None => serde_json::json!([{}]),
        };
        meta.insert("lfs.datasets".to_string(), datasets.to_string());
        let t = candle_core::Tensor::zeros(1, candle_core::DType::F32, &candle_core::Device::Cpu).unwrap();
        checkpoint::save_atomic(&path, &BTreeMap::from([("x".to_string(), t)]), &meta).unwrap();
        path.display().to_string()
    }

    fn suite(sources: &[String]) -> SuiteFile {
        let rows = sources
            .iter()
            .enumerate()
            .map(|(i, s)| format!("[[encoders]]\nname = \"e{i}\"\nsource = \"{s}\"\n"))
            .collect::<String>();
        let text = format!(
            "name = \"t\"\nscale = \"tiny\"\nsac_config = \"pipelines/sac/tiny.toml\"\nnum_train_frames = 4000\n\
             tasks = [\"walker_stand\"]\nseeds = [1]\n{rows}"
        );
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn random_rows_render_as_the_suites_encoders_were_trained() {
        let dir = tempfile::tempdir().unwrap();
        let fast = export_file(dir.path(), "fast.safetensors", "export", Some("fast"));
        let fast2 = export_file(dir.path(), "fast2.safetensors", "export", Some("fast"));
        let default = export_file(dir.path(), "default.safetensors", "export", Some("default"));
        let ingested = export_file(dir.path(), "ingested.safetensors", "export", None);
        let random = "random".to_string();
        let quality = |sources: &[String]| suite(sources).sac_config(None).unwrap().env.render_quality;
        let pinned = |q| RenderQualitySetting::Pinned(q);
        // pipelines/sac/tiny.toml follows the encoder; the encoders that record one agree.
        assert_eq!(
            quality(&[random.clone(), fast.clone(), fast2, ingested.clone()]),
            pinned(RenderQuality::Fast)
        );
        assert_eq!(
            quality(&[random.clone(), default.clone()]),
            pinned(RenderQuality::Default)
        );
        // They disagree, or none records one: each row follows its own encoder.
        assert_eq!(quality(&[random.clone(), fast, default]), RenderQualitySetting::Encoder);
        assert_eq!(quality(&[random.clone(), ingested]), RenderQualitySetting::Encoder);
        // A pin in the suite's `set` stays.
        let mut s = suite(std::slice::from_ref(&random));
        s.set.push("env.render_quality=fast".into());
        assert_eq!(
            s.sac_config(None).unwrap().env.render_quality,
            pinned(RenderQuality::Fast)
        );
        // A file that is not an export is named.
        let other = export_file(dir.path(), "checkpoint.safetensors", "checkpoint", Some("fast"));
        let err = suite(&[random, other]).sac_config(None).unwrap_err().to_string();
        assert!(
            err.contains("checkpoint.safetensors") && err.contains("not an encoder written by `lfs export`"),
            "{err}"
        );
    }
}
