//! Linear probes beside SAC returns. `lfs probe` fits ridge probes from a frozen encoder's
//! features to each task's state and reward and writes their held-out R² to `probe.json`; the
//! report sets them beside the SAC return of the same encoder row, per task, and where at least
//! [`MIN_ENCODERS`] rows have both on a task, gives Spearman's rank correlation across them: does
//! the cheap probe order the encoders as SAC does?
//!
//! A probe comes from `--probe FILE`, or from the `probe.json` beside the export an encoder row
//! names (its folder, as [`super::pretraining`] finds a run's log; a relative source is taken from
//! the directory `lfs report` runs in). It belongs to a row when its encoder id, the export's
//! sha256, is the one the row's runs record (`run.json`'s `encoder_sha256`), or when both are the
//! random encoder, of any seed: the report says which seed was probed. `probe.json` is read as
//! untyped JSON through the few paths below, so that `lfs probe` may add fields. A file that
//! cannot be read is a note in the report, not an error: the suite's scores do not depend on it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::cells::Cell;
use super::results_csv::field;
use super::scores::{BudgetScores, MethodCells, SeedStats};
use super::Report;
use crate::env::Task;

/// What `lfs probe` writes beside the export it probed.
pub const PROBE_FILE: &str = "probe.json";
/// The report's table of probes beside returns.
pub const PROBE_CSV: &str = "probe.csv";
/// Encoder rows a task needs, each with a probe and a SAC return, for a rank correlation.
pub const MIN_ENCODERS: usize = 3;

/// A held-out R² (the mean over a target's dimensions) with its interval; NaN where probe.json
/// has `null` (an undefined R², or no interval computed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct R2 {
    pub point: f64,
    pub low: f64,
    pub high: f64,
}

/// One task's probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskR2 {
    pub state: R2,
    pub reward: R2,
}

/// What the report reads of one `probe.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFile {
    pub path: PathBuf,
    /// `encoder.source`: the export's path, or `random`.
    pub encoder_source: String,
    /// `encoder.id`: the export's sha256, or `random:<seed>`.
    pub encoder_id: String,
    /// `dataset.path` and `dataset.render_quality`: the probe set.
    pub dataset: String,
    pub dataset_render_quality: Option<String>,
    /// By task; tasks the report does not know are left out (no suite has them).
    pub tasks: BTreeMap<Task, TaskR2>,
    /// The encoder row it was bound to by `--probe ROW=FILE`, whatever its encoder id (an
    /// encoder regenerated elsewhere: the same weights, another export's bytes).
    pub bound_to: Option<String>,
}

impl ProbeFile {
    pub fn is_random(&self) -> bool {
        self.encoder_source == "random"
    }
}

/// One encoder row on one task: its SAC return and its probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRow {
    /// Index into the report's methods.
    pub method: usize,
    pub task: Task,
    /// At the report's largest budget, as its table of returns shows it.
    pub sac: SeedStats,
    pub r2: TaskR2,
    /// Index into [`Probes::files`].
    pub file: usize,
}

/// Spearman's ρ between a probe's R² and the SAC return, across encoder rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankAgreement {
    /// NaN when either side is all ties.
    pub rho: f64,
    pub num_encoders: usize,
}

/// One task's rank correlations; a side with fewer than [`MIN_ENCODERS`] rows has none.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRanks {
    pub task: Task,
    pub state: Option<RankAgreement>,
    pub reward: Option<RankAgreement>,
}

/// A probe file the report could not use, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeNote {
    pub path: PathBuf,
    pub reason: String,
}

/// What the report shows of the probes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probes {
    /// The budget whose SAC returns stand beside the probes: the report's largest.
    pub budget: Option<u64>,
    /// Every file read: those named first, in order, then those beside the exports.
    pub files: Vec<ProbeFile>,
    /// Methods in the report's order, tasks in the paper's.
    pub rows: Vec<ProbeRow>,
    pub ranks: Vec<TaskRanks>,
    pub notes: Vec<ProbeNote>,
}

/// The `probe.json` beside an exported encoder (or inside the run directory a source names).
pub fn probe_beside_source(source: &str) -> Option<PathBuf> {
    if source == "random" {
        return None;
    }
    let path = Path::new(source);
    let dir = if path.is_dir() { path } else { path.parent()? };
    let probe = dir.join(PROBE_FILE);
    probe.is_file().then_some(probe)
}

/// One `probe.json`; the error says what is missing or malformed.
pub fn read_probe_file(path: &Path) -> Result<ProbeFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let text_at = |pointer: &str| {
        v.pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("no text `{}`", pointer[1..].replace('/', ".")))
    };
    let list = v.get("tasks").and_then(Value::as_array).ok_or("no list `tasks`")?;
    let mut tasks = BTreeMap::new();
    for (i, t) in list.iter().enumerate() {
        let name = t
            .get("task")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("no text `tasks[{i}].task`"))?;
        let Ok(task) = name.parse::<Task>() else {
            continue; // not one of the paper's tasks, so not the suite's
        };
        let r2 = |target: &str| read_r2(t, target).map_err(|e| format!("tasks[{i}] ({name}): {e}"));
        let probe = TaskR2 {
            state: r2("state")?,
            reward: r2("reward")?,
        };
        tasks.entry(task).or_insert(probe);
    }
    Ok(ProbeFile {
        path: path.to_path_buf(),
        encoder_source: text_at("/encoder/source")?,
        encoder_id: text_at("/encoder/id")?,
        dataset: text_at("/dataset/path")?,
        dataset_render_quality: v
            .pointer("/dataset/render_quality")
            .and_then(Value::as_str)
            .map(str::to_string),
        tasks,
        bound_to: None,
    })
}

/// `<target>.held_out.mean`: point, low, high (`null` read as NaN: serde writes NaN so).
fn read_r2(task: &Value, target: &str) -> Result<R2, String> {
    let mean = task
        .get(target)
        .and_then(|t| t.pointer("/held_out/mean"))
        .ok_or_else(|| format!("no `{target}.held_out.mean`"))?;
    let num = |key: &str| match mean.get(key) {
        Some(Value::Null) => Ok(f64::NAN),
        Some(x) => x
            .as_f64()
            .ok_or_else(|| format!("`{target}.held_out.mean.{key}` is not a number")),
        None => Err(format!("no `{target}.held_out.mean.{key}`")),
    };
    Ok(R2 {
        point: num("point")?,
        low: num("low")?,
        high: num("high")?,
    })
}

/// Which probes belong to an encoder row.
enum Identity {
    Random,
    /// The sha256s its runs record (one, unless the export changed under the suite).
    Export(BTreeSet<String>),
}

impl Identity {
    fn of(cells: &[Cell], method: &MethodCells) -> Self {
        let cells: Vec<&Cell> = method.by_task.values().flatten().map(|&i| &cells[i]).collect();
        if cells.first().is_some_and(|c| c.meta.encoder_source == "random") {
            return Identity::Random;
        }
        let ids = cells
            .iter()
            .filter_map(|c| c.finished.as_ref().map(|f| f.run.encoder_sha256.clone()))
            .collect();
        Identity::Export(ids)
    }

    /// Whether `probe` belongs to the row `row` of this identity: the row it was bound to, else
    /// by id.
    fn matches(&self, row: &str, probe: &ProbeFile) -> bool {
        if let Some(bound) = &probe.bound_to {
            return bound == row;
        }
        match self {
            Identity::Random => probe.is_random(),
            Identity::Export(ids) => !probe.is_random() && ids.contains(&probe.encoder_id),
        }
    }
}

/// The probes of the encoder rows: the files `named` and those beside the rows' exports, set
/// beside the SAC returns at the budget of `scores` (the report's largest). For each row and
/// task the first file that has the task counts.
pub fn read(cells: &[Cell], methods: &[MethodCells], scores: Option<&BudgetScores>, named: &[PathBuf]) -> Probes {
    let mut out = Probes {
        budget: scores.map(|s| s.budget),
        ..Probes::default()
    };
    let beside = methods
        .iter()
        .filter_map(|m| m.by_task.values().flatten().next())
        .filter_map(|&i| probe_beside_source(&cells[i].meta.encoder_source));
    let mut seen = BTreeSet::new();
    let mut was_named = Vec::new();
    // `ROW=FILE` binds a file to the encoder row ROW.
    let bind = |p: &PathBuf| -> (PathBuf, Option<String>) {
        let text = p.to_string_lossy();
        match text.split_once('=') {
            Some((row, file)) if methods.iter().any(|m| m.method == row) => {
                (PathBuf::from(file), Some(row.to_string()))
            }
            _ => (p.clone(), None),
        }
    };
    for (path, bound_to, by_name) in named
        .iter()
        .map(|p| {
            let (path, row) = bind(p);
            (path, row, true)
        })
        .chain(beside.map(|p| (p, None, false)))
    {
        // a file named and also found beside its export is read once
        if !seen.insert(std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone())) {
            continue;
        }
        match read_probe_file(&path) {
            Ok(file) => {
                out.files.push(ProbeFile { bound_to, ..file });
                was_named.push(by_name);
            }
            Err(reason) => out.notes.push(ProbeNote { path, reason }),
        }
    }
    let identities: Vec<Identity> = methods.iter().map(|m| Identity::of(cells, m)).collect();
    for (file, _) in out.files.iter().zip(&was_named).filter(|(_, named)| **named) {
        if !identities
            .iter()
            .zip(methods)
            .any(|(id, m)| id.matches(&m.method, file))
        {
            out.notes.push(ProbeNote {
                path: file.path.clone(),
                reason: format!(
                    "its encoder (`{}`, id `{}`) is none of the suite's encoder rows",
                    file.encoder_source, file.encoder_id
                ),
            });
        }
    }
    let Some(scores) = scores else {
        return out;
    };
    out.rows = probe_rows(scores, &identities, methods, &out.files);
    out.ranks = rank_agreement(&out.rows);
    out
}

/// Each encoder row's SAC return on each task beside the first of `files` that belongs to the
/// row and has the task (`identities` one per row of `methods`).
fn probe_rows(
    scores: &BudgetScores,
    identities: &[Identity],
    methods: &[MethodCells],
    files: &[ProbeFile],
) -> Vec<ProbeRow> {
    let mut rows = Vec::new();
    // scores.methods is in the report's method order
    for (i, ((m, id), row)) in scores.methods.iter().zip(identities).zip(methods).enumerate() {
        for task in Task::ALL {
            let Some(sac) = m.stats(task) else {
                continue;
            };
            let found = files
                .iter()
                .enumerate()
                .filter(|(_, f)| id.matches(&row.method, f))
                .find_map(|(k, f)| f.tasks.get(&task).map(|r2| (k, *r2)));
            if let Some((file, r2)) = found {
                rows.push(ProbeRow {
                    method: i,
                    task,
                    sac,
                    r2,
                    file,
                });
            }
        }
    }
    rows
}

/// Per task, ρ between each probe's R² and the mean SAC return over the rows that have both
/// (an undefined R² leaves its row out of that side).
fn rank_agreement(rows: &[ProbeRow]) -> Vec<TaskRanks> {
    Task::ALL
        .into_iter()
        .filter_map(|task| {
            let rows: Vec<&ProbeRow> = rows.iter().filter(|r| r.task == task).collect();
            let agreement = |r2: fn(&TaskR2) -> f64| {
                let (x, y): (Vec<f64>, Vec<f64>) = rows
                    .iter()
                    .map(|r| (r2(&r.r2), r.sac.mean))
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .unzip();
                (x.len() >= MIN_ENCODERS).then(|| RankAgreement {
                    rho: spearman(&x, &y),
                    num_encoders: x.len(),
                })
            };
            let state = agreement(|r| r.state.point);
            let reward = agreement(|r| r.reward.point);
            (state.is_some() || reward.is_some()).then_some(TaskRanks { task, state, reward })
        })
        .collect()
}

/// Ranks from 1, tied values sharing the mean of the ranks they span (scipy's `rankdata`,
/// `method="average"`).
pub fn average_ranks(xs: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut ranks = vec![0.0; xs.len()];
    let mut start = 0;
    while start < order.len() {
        let end = start
            + order[start..]
                .iter()
                .take_while(|&&i| xs[i] == xs[order[start]])
                .count();
        // sorted positions start..end hold ranks start + 1 ..= end
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}

/// Spearman's rank correlation (scipy's `spearmanr`): Pearson's correlation of the average
/// ranks; NaN when either side is all ties.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    let (rx, ry) = (average_ranks(x), average_ranks(y));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (mx, my) = (mean(&rx), mean(&ry));
    let dot = |a: &[f64], ma: f64, b: &[f64], mb: f64| a.iter().zip(b).map(|(a, b)| (a - ma) * (b - mb)).sum::<f64>();
    let (sxy, sxx, syy) = (dot(&rx, mx, &ry, my), dot(&rx, mx, &rx, mx), dot(&ry, my, &ry, my));
    // ranks are multiples of ½, so all ties give exactly 0
    if sxx == 0.0 || syy == 0.0 {
        return f64::NAN;
    }
    sxy / (sxx * syy).sqrt()
}

/// `probe.csv`'s columns.
pub const HEADER: [&str; 15] = [
    "agent",
    "encoder",
    "task",
    "frames",
    "return_mean",
    "return_std",
    "runs",
    "state_r2",
    "state_r2_low",
    "state_r2_high",
    "reward_r2",
    "reward_r2_low",
    "reward_r2_high",
    "probe_encoder_id",
    "probe_file",
];

/// `probe.csv`: one line per row of the report's table; an undefined R² is an empty field.
pub fn to_csv(report: &Report) -> String {
    let probes = &report.probes;
    let num = |x: f64| if x.is_finite() { x.to_string() } else { String::new() };
    let mut out = HEADER.join(",");
    out.push('\n');
    for r in &probes.rows {
        let Some(cell) = report.methods[r.method]
            .by_task
            .values()
            .flatten()
            .next()
            .map(|&i| &report.cells[i])
        else {
            continue; // a row comes from a method with done cells
        };
        let file = &probes.files[r.file];
        let line = [
            field(&cell.meta.agent),
            field(&cell.meta.encoder),
            r.task.name().to_string(),
            probes.budget.map_or(String::new(), |b| b.to_string()),
            num(r.sac.mean),
            num(r.sac.std),
            r.sac.n.to_string(),
            num(r.r2.state.point),
            num(r.r2.state.low),
            num(r.r2.state.high),
            num(r.r2.reward.point),
            num(r.r2.reward.low),
            num(r.r2.reward.high),
            field(&file.encoder_id),
            field(&file.path.display().to_string()),
        ];
        let _ = writeln!(out, "{}", line.join(","));
    }
    out
}
