//! Reading a benchmark-suite directory: `DIR/cells/<name>/` for every cell, as the suite runner
//! writes it. Each cell holds `cell.json` (what the cell is and how far it got), and once it has
//! run, `eval.csv`, `run.json` and `config.resolved.toml` from `lfs eval` or `lfs train` (src/rl_loop/).
//! Only a cell whose state is `done` is read beyond its `cell.json`; the others are reported as
//! missing or failed.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::rl::AgentKind;
use crate::rl_loop::EvalRow;
use crate::run_dir::{AUX_LOG, CONFIG_FILE, EVAL_CSV, RUN_FILE};
use crate::{Error, Result};

pub use crate::suite::cell::{CellRecord, CellState, CELLS_DIR, CELL_FILE};
use crate::suite::status::{self, Shown};

/// `run.json` of `lfs eval`: the provenance the report quotes.
#[derive(Debug, Clone, Deserialize)]
pub struct RunInfo {
    pub encoder: String,
    pub encoder_sha256: String,
    #[serde(default)]
    pub encoder_render_quality: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
}

/// The settings of a finished cell that decide whether its scores can stand beside another's,
/// and those that describe its scale, read from `config.resolved.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSettings {
    /// `[env] render_quality`.
    pub render_quality: String,
    /// `[replay] feature_cache`.
    pub feature_cache: bool,
    /// `[replay] feature_cache_dtype` ("f32" where the config predates it).
    pub feature_cache_dtype: String,
    /// `[run] num_train_frames`: the budget.
    pub num_train_frames: u64,
    /// `[env] action_repeat`: what a frame is worth in agent steps.
    pub action_repeat: u64,
    /// `[env] episode_frames`: episodes cut short of the task's time limit (absent: not cut).
    pub episode_frames: Option<u64>,
    /// `[run] eval_every_frames`.
    pub eval_every_frames: u64,
    /// `[run] num_eval_episodes`.
    pub num_eval_episodes: u64,
    /// `[agent] batch_size`.
    pub batch_size: u64,
    /// `[replay] capacity`.
    pub replay_capacity: u64,
    /// `[replay] sampling` ("uniform" where the config predates it or does not choose).
    pub replay_sampling: String,
    /// `[agent] kind` ("sac" where the config predates it).
    pub agent_kind: String,
}

/// One cell of the suite.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The folder name under `cells/`.
    pub name: String,
    pub dir: PathBuf,
    pub meta: CellRecord,
    /// Read for done cells only.
    pub finished: Option<FinishedCell>,
}

/// What a done cell produced.
#[derive(Debug, Clone)]
pub struct FinishedCell {
    pub run: RunInfo,
    pub settings: CellSettings,
    /// `eval.csv`, in file order (frames increasing).
    pub evals: Vec<EvalRow>,
    /// `lfs train` cells with an objective: the mean N (synthetic pairs in the objective's
    /// batch, `aux.jsonl`) over the updates up to each evaluation frame since the previous one,
    /// as (evaluation frame, mean N); empty for other cells.
    pub selected: Vec<(u64, f64)>,
}

impl Cell {
    pub fn is_done(&self) -> bool {
        self.finished.is_some()
    }

    /// Its state as `lfs suite status` shows it (a `running` cell that no process holds is
    /// `interrupted`).
    pub fn shown(&self) -> Shown {
        status::shown(Some(&self.meta), &self.dir)
    }

    /// The column the report compares: the encoder label, or `encoder+agent` when the suite
    /// mixes agents (then an encoder alone does not say what was run).
    pub fn method(&self, agents_differ: bool) -> String {
        if agents_differ {
            format!("{}+{}", self.meta.encoder, self.meta.agent)
        } else {
            self.meta.encoder.clone()
        }
    }
}

/// Every cell of the suite at `suite_dir`, ordered by index. A done cell whose files are
/// missing or malformed is an error; the files of other cells are not read.
pub fn read_suite(suite_dir: &Path) -> Result<Vec<Cell>> {
    let cells_dir = suite_dir.join(CELLS_DIR);
    let entries = std::fs::read_dir(&cells_dir)
        .map_err(|e| Error::cell(&cells_dir, format!("not a benchmark-suite cells folder: {e}")))?;
    let mut cells = Vec::new();
    for entry in entries {
        let dir = entry?.path();
        if !dir.join(CELL_FILE).is_file() {
            continue;
        }
        cells.push(read_cell(&dir)?);
    }
    if cells.is_empty() {
        return Err(Error::cell(&cells_dir, format!("no cell folder with a {CELL_FILE}")));
    }
    cells.sort_by(|a, b| (a.meta.index, &a.name).cmp(&(b.meta.index, &b.name)));
    Ok(cells)
}

/// One cell folder.
pub fn read_cell(dir: &Path) -> Result<Cell> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let meta: CellRecord = read_json(&dir.join(CELL_FILE))?;
    let finished = match meta.state {
        CellState::Done => {
            let evals = read_eval_csv(&dir.join(EVAL_CSV))?;
            let aux = dir.join(AUX_LOG);
            Some(FinishedCell {
                run: read_json(&dir.join(RUN_FILE))?,
                settings: read_settings(&dir.join(CONFIG_FILE))?,
                selected: match aux.is_file() {
                    true => read_selected(&aux, &evals)?,
                    false => Vec::new(),
                },
                evals,
            })
        }
        _ => None,
    };
    if let Some(f) = &finished {
        if f.evals.is_empty() {
            return Err(Error::cell(dir.join(EVAL_CSV), "a done cell with no evaluation"));
        }
    }
    Ok(Cell {
        name,
        dir: dir.to_path_buf(),
        meta,
        finished,
    })
}

/// `aux.jsonl`'s N (`pretrain/num_synthetic`) averaged over the updates in each interval
/// (previous evaluation frame, evaluation frame]; intervals without updates are left out.
pub fn read_selected(path: &Path, evals: &[EvalRow]) -> Result<Vec<(u64, f64)>> {
    let mut sums = vec![(0.0f64, 0u64); evals.len()];
    for_each_json_line(path, |v| {
        let field = |key: &str| {
            v.get(key)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| format!("no count `{key}`"))
        };
        let (frame, n) = (field("train/frame")?, field("pretrain/num_synthetic")?);
        // The first evaluation at or after the update's frame.
        if let Some(k) = evals.iter().position(|r| r.frame >= frame) {
            sums[k].0 += n as f64;
            sums[k].1 += 1;
        }
        Ok(())
    })
    .map_err(|e| Error::cell(path, e))?;
    Ok(evals
        .iter()
        .zip(sums)
        .filter(|(_, (_, count))| *count > 0)
        .map(|(r, (sum, count))| (r.frame, sum / count as f64))
        .collect())
}

/// Calls `each` on every non-blank line of the JSONL log at `path`, parsed, reading it line by
/// line (at the paper's scale a log holds 250K lines). The error is the I/O error, or the
/// parse error or `each`'s, after `line N: `.
pub fn for_each_json_line(
    path: &Path,
    mut each: impl FnMut(&serde_json::Value) -> std::result::Result<(), String>,
) -> std::result::Result<(), String> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| e.to_string())?;
        if line.trim().is_empty() {
            continue;
        }
        serde_json::from_str(&line)
            .map_err(|e| e.to_string())
            .and_then(|v| each(&v))
            .map_err(|e| format!("line {}: {e}", i + 1))?;
    }
    Ok(())
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::cell(path, e.to_string()))
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    serde_json::from_str(&read_text(path)?).map_err(|e| Error::cell(path, e.to_string()))
}

/// The settings of `config.resolved.toml`, read field by field rather than through
/// `LoopConfig` so that configs of other agents (end-to-end runs) are read the same way.
pub fn read_settings(path: &Path) -> Result<CellSettings> {
    let value: toml::Table = read_text(path)?
        .parse()
        .map_err(|e: toml::de::Error| Error::cell(path, e.to_string()))?;
    let get = |section: &str, key: &str| -> Result<&toml::Value> {
        value
            .get(section)
            .and_then(|s| s.get(key))
            .ok_or_else(|| Error::cell(path, format!("no [{section}] {key}")))
    };
    let int = |section: &str, key: &str| -> Result<u64> {
        get(section, key)?
            .as_integer()
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| Error::cell(path, format!("[{section}] {key} is not a count")))
    };
    Ok(CellSettings {
        render_quality: get("env", "render_quality")?
            .as_str()
            .ok_or_else(|| Error::cell(path, "[env] render_quality is not a string"))?
            .to_string(),
        feature_cache: get("replay", "feature_cache")?
            .as_bool()
            .ok_or_else(|| Error::cell(path, "[replay] feature_cache is not a boolean"))?,
        feature_cache_dtype: match get("replay", "feature_cache_dtype") {
            Ok(v) => v
                .as_str()
                .ok_or_else(|| Error::cell(path, "[replay] feature_cache_dtype is not a string"))?
                .to_string(),
            Err(_) => "f32".to_string(),
        },
        num_train_frames: int("run", "num_train_frames")?,
        action_repeat: int("env", "action_repeat")?,
        episode_frames: match get("env", "episode_frames") {
            Ok(_) => Some(int("env", "episode_frames")?),
            Err(_) => None,
        },
        eval_every_frames: int("run", "eval_every_frames")?,
        num_eval_episodes: int("run", "num_eval_episodes")?,
        batch_size: int("agent", "batch_size")?,
        replay_capacity: int("replay", "capacity")?,
        replay_sampling: match get("replay", "sampling") {
            Ok(v) => v
                .as_str()
                .ok_or_else(|| Error::cell(path, "[replay] sampling is not a string"))?
                .to_string(),
            Err(_) => crate::rl::ReplaySampling::Uniform.name().to_string(),
        },
        agent_kind: match get("agent", "kind") {
            Ok(v) => v
                .as_str()
                .ok_or_else(|| Error::cell(path, "[agent] kind is not a string"))?
                .to_string(),
            Err(_) => AgentKind::Sac.name().to_string(),
        },
    })
}

/// `eval.csv` (DrQ-v2's columns `frame,step,episode,episode_reward,total_time`, found by name).
pub fn read_eval_csv(path: &Path) -> Result<Vec<EvalRow>> {
    let text = read_text(path)?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').map(str::trim).collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| Error::cell(path, format!("no column {name:?} in {header:?}")))
    };
    let idx = [
        column("frame")?,
        column("step")?,
        column("episode")?,
        column("episode_reward")?,
        column("total_time")?,
    ];
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate() {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let field = |k: usize| {
            fields
                .get(idx[k])
                .copied()
                .ok_or_else(|| Error::cell(path, format!("row {}: too few fields", i + 1)))
        };
        let bad = |k: usize| Error::cell(path, format!("row {}: bad {}", i + 1, header[idx[k]]));
        let count = |k: usize| field(k)?.parse::<u64>().map_err(|_| bad(k));
        let real = |k: usize| field(k)?.parse::<f64>().map_err(|_| bad(k));
        rows.push(EvalRow {
            frame: count(0)?,
            step: count(1)?,
            episode: count(2)?,
            episode_reward: real(3)?,
            total_time: real(4)?,
        });
    }
    Ok(rows)
}
