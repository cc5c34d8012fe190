//! DrQ-v2's and TACO's task groups as their own repositories file them, against ours: the
//! pipelines that name their tasks (`# Tasks:` in `pipelines/{drqv2,taco}/*.toml`), the table of
//! docs/design.md §13, and every suite cell that runs DrQ-v2 or TACO (its config resolved as
//! `lfs suite` resolves it: train_config, `set`, the budget, `task_set`, the row's `set`). A task
//! filed in another group than upstream's, or a cell on another σ schedule than its task's, fails
//! here by name. The files are read with the `toml` crate alone, not through lfs's config types.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{lfs_in_repo, output_text, repo, temp_dir};

/// A task group of DrQ-v2's `cfgs/task/`: `easy.yaml` and `medium.yaml` (the same in
/// facebookresearch/drqv2 @c0c650b and FrankZheng2022/TACO @84c38e3). `hard.yaml` (30.1M frames,
/// `linear(1.0,0.1,2000000)`) holds only the humanoid tasks, none of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Easy,
    Medium,
}

impl Group {
    fn name(self) -> &'static str {
        match self {
            Group::Easy => "easy",
            Group::Medium => "medium",
        }
    }

    /// `num_train_frames` of the group's yaml.
    fn num_train_frames(self) -> i64 {
        match self {
            Group::Easy => 1_100_000,
            Group::Medium => 3_100_000,
        }
    }

    /// `stddev_schedule` of the group's yaml, as upstream writes it.
    fn stddev_schedule(self) -> &'static str {
        match self {
            Group::Easy => "linear(1.0,0.1,100000)",
            Group::Medium => "linear(1.0,0.1,500000)",
        }
    }
}

/// One of the paper's nine tasks as upstream files it.
struct Upstream {
    /// Our name.
    task: &'static str,
    /// `cfgs/task/<file>.yaml`.
    file: &'static str,
    /// Its `defaults: [<group>]`.
    group: Group,
    /// `nstep` (config.yaml's 3 unless the task's yaml says 1).
    nstep: i64,
    /// DrQ-v2's `batch_size` (config.yaml's 256 unless the task's yaml says 512). TACO's is
    /// 1024 for every task: its `cfgs/agent/taco.yaml` comes after the task in the defaults list.
    batch_size: i64,
}

/// A row of [`UPSTREAM`]: our name, upstream's file, its group, nstep, DrQ-v2's batch.
const fn upstream_task(task: &'static str, file: &'static str, group: Group, nstep: i64, batch_size: i64) -> Upstream {
    Upstream {
        task,
        file,
        group,
        nstep,
        batch_size,
    }
}

/// facebookresearch/drqv2 @c0c650b76c6e5d22a7eb5f2edffd1440fe94f8ef `cfgs/task/*.yaml`;
/// FrankZheng2022/TACO @84c38e34f4f9dfd2b059fb6d1356757e8d40712e files these nine identically.
const UPSTREAM: [Upstream; 9] = [
    upstream_task("reach_duplo", "reach_duplo", Group::Medium, 3, 256),
    upstream_task("cartpole_swingup", "cartpole_swingup", Group::Easy, 3, 256),
    upstream_task("walker_run", "walker_run", Group::Medium, 1, 512),
    upstream_task("reacher_hard", "reacher_hard", Group::Medium, 3, 256),
    upstream_task("cheetah_run", "cheetah_run", Group::Medium, 3, 256),
    upstream_task("walker_stand", "walker_stand", Group::Easy, 1, 512),
    upstream_task("ball_in_cup_catch", "cup_catch", Group::Easy, 3, 256),
    upstream_task("walker_walk", "walker_walk", Group::Easy, 1, 512),
    upstream_task("finger_spin", "finger_spin", Group::Easy, 3, 256),
];

/// TACO's `batch_size` (FrankZheng2022/TACO @84c38e3 `cfgs/agent/taco.yaml`).
const TACO_BATCH_SIZE: i64 = 1024;

/// URLB's four Jaco reach tasks.
const JACO_TASKS: [&str; 4] = [
    "jaco_reach_bottom_left",
    "jaco_reach_bottom_right",
    "jaco_reach_top_left",
    "jaco_reach_top_right",
];

/// URLB's from-scratch pixel agent on them (rll-research/url_benchmark
/// @bb98f0c6d78b3c467fb5a9fa5bbba3b7c0250397): `agent/ddpg.yaml` is DrQ-v2 with
/// `stddev_schedule: 0.2`, `nstep: 3`, `batch_size: 1024 # 256 for pixels`; `finetune.yaml`
/// `num_seed_frames: 4000`.
const URLB_STDDEV_SCHEDULE: &str = "0.2";
const URLB_NSTEP: i64 = 3;
const URLB_PIXEL_BATCH_SIZE: i64 = 256;
const URLB_NUM_SEED_FRAMES: i64 = 4000;

fn upstream(task: &str) -> Option<&'static Upstream> {
    UPSTREAM.iter().find(|u| u.task == task)
}

fn read_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The value at a dotted path.
fn get<'a>(table: &'a toml::Table, dotted: &str) -> Option<&'a toml::Value> {
    let mut parts = dotted.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

fn int(table: &toml::Table, dotted: &str) -> Option<i64> {
    get(table, dotted).and_then(toml::Value::as_integer)
}

/// `[agent] kind`, "sac" when absent (as lfs reads it).
fn agent_kind(table: &toml::Table) -> String {
    get(table, "agent.kind")
        .and_then(toml::Value::as_str)
        .unwrap_or("sac")
        .to_string()
}

/// `[agent.stddev_schedule]` written as upstream writes a schedule: `linear(1.0,0.1,100000)`
/// or a constant's value.
fn stddev_schedule(table: &toml::Table) -> Option<String> {
    let float = |key: &str| get(table, &format!("agent.stddev_schedule.{key}")).and_then(toml::Value::as_float);
    match get(table, "agent.stddev_schedule.kind")?.as_str()? {
        "linear" => Some(format!(
            "linear({:?},{:?},{})",
            float("start")?,
            float("end")?,
            int(table, "agent.stddev_schedule.duration_steps")?
        )),
        "const" => Some(format!("{:?}", float("value")?)),
        other => Some(format!("unknown kind {other:?}")),
    }
}

/// `key.path=value` applied as lfs applies `--set` and a suite's overrides: the value parsed as
/// a TOML value, else taken as a string; missing tables made.
fn apply_override(table: &mut toml::Table, item: &str) {
    let (key, raw) = item
        .split_once('=')
        .unwrap_or_else(|| panic!("{item}: expected key=value"));
    let value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    };
    let parts: Vec<&str> = key.trim().split('.').collect();
    let mut node = table;
    for part in &parts[..parts.len() - 1] {
        node = node
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .unwrap_or_else(|| panic!("{item}: {part} is not a table"));
    }
    node.insert(parts[parts.len() - 1].to_string(), value);
}

fn strings(value: Option<&toml::Value>) -> Vec<String> {
    value
        .and_then(toml::Value::as_array)
        .map(|a| a.iter().map(|v| v.as_str().expect("a string").to_string()).collect())
        .unwrap_or_default()
}

/// The tasks a pipeline files itself under: its `# Tasks: a, b, c` comment line.
fn filed_tasks(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# Tasks:")).collect();
    assert_eq!(lines.len(), 1, "{}: expected one `# Tasks:` line", path.display());
    lines[0].split(',').map(|t| t.trim().to_string()).collect()
}

/// The DrQ-v2 and TACO pipelines of upstream's full protocol: each names its tasks, and each
/// task's group, n-step and batch must be the file's.
#[test]
fn pipelines_file_each_task_in_its_upstream_group() {
    let mut wrong = Vec::new();
    for (agent, batch_size) in [
        ("drqv2", (|u: &Upstream| u.batch_size) as fn(&Upstream) -> i64),
        ("taco", |_| TACO_BATCH_SIZE),
    ] {
        let mut filed: BTreeMap<String, String> = BTreeMap::new();
        for name in ["easy", "medium", "walker_easy", "walker_medium"] {
            let path = repo().join(format!("pipelines/{agent}/{name}.toml"));
            let cfg = read_toml(&path);
            let file = format!("pipelines/{agent}/{name}.toml");
            assert_eq!(agent_kind(&cfg), agent, "{file}");
            for task in filed_tasks(&path) {
                let Some(u) = upstream(&task) else {
                    wrong.push(format!("{file} files {task:?}, not one of the paper's nine tasks"));
                    continue;
                };
                if let Some(other) = filed.insert(task.clone(), file.clone()) {
                    wrong.push(format!("{task} is filed in both {other} and {file}"));
                }
                let ours = (
                    int(&cfg, "run.num_train_frames"),
                    stddev_schedule(&cfg),
                    int(&cfg, "agent.nstep"),
                    int(&cfg, "agent.batch_size"),
                );
                let theirs = (
                    Some(u.group.num_train_frames()),
                    Some(u.group.stddev_schedule().to_string()),
                    Some(u.nstep),
                    Some(batch_size(u)),
                );
                if ours != theirs {
                    wrong.push(format!(
                        "{file} files {task}, which upstream files as {} (cfgs/task/{}.yaml): \
                         (frames, sigma, nstep, batch) are {ours:?} here, {theirs:?} upstream",
                        u.group.name(),
                        u.file
                    ));
                }
            }
        }
        let missing: Vec<&str> = UPSTREAM
            .iter()
            .map(|u| u.task)
            .filter(|t| !filed.contains_key(*t))
            .collect();
        if !missing.is_empty() {
            wrong.push(format!("pipelines/{agent}/ files no pipeline for {missing:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// docs/design.md §13's table: each of the nine tasks once, in upstream's group.
#[test]
fn design_md_files_each_task_in_its_upstream_group() {
    let text = std::fs::read_to_string(repo().join("docs/design.md")).unwrap();
    let start = text.find("\n## §13 ").expect("docs/design.md has §13");
    let end = text[start + 1..].find("\n## ").map_or(text.len(), |e| start + 1 + e);
    let mut rows: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text[start..end].lines() {
        let cells: Vec<String> = line
            .split('|')
            .map(|c| c.trim().trim_matches('`').to_string())
            .collect();
        if cells.len() > 3 && upstream(&cells[1]).is_some() {
            rows.entry(cells[1].clone()).or_default().push(cells[2].clone());
        }
    }
    let mut wrong = Vec::new();
    for u in &UPSTREAM {
        match rows.get(u.task).map(Vec::as_slice) {
            Some([group]) if group == u.group.name() => {}
            Some([group]) => wrong.push(format!(
                "{}: design.md says {group}, upstream {}",
                u.task,
                u.group.name()
            )),
            Some(many) => wrong.push(format!("{}: {} rows in design.md §13", u.task, many.len())),
            None => wrong.push(format!("{}: no row in design.md §13's task-group table", u.task)),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One suite cell's config but its seed: what `lfs suite` gives `lfs train`.
struct Cell {
    suite: String,
    row: String,
    task: String,
    scale: String,
    config: toml::Table,
}

/// Every train cell of every suite file (one per row and task; seeds share the config).
fn train_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(repo().join("eval/suites"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    for path in paths {
        let suite = read_toml(&path);
        let Some(train_config) = get(&suite, "train_config").and_then(toml::Value::as_str) else {
            continue;
        };
        let base = read_toml(&repo().join(train_config));
        let set = strings(get(&suite, "set"));
        let frames = int(&suite, "num_train_frames").expect("num_train_frames");
        let scale = get(&suite, "scale").and_then(toml::Value::as_str).unwrap().to_string();
        let rows = get(&suite, "encoders")
            .and_then(toml::Value::as_array)
            .cloned()
            .unwrap_or_default();
        for row in rows {
            let row = row.as_table().unwrap();
            if row.get("command").and_then(toml::Value::as_str) != Some("train") {
                continue;
            }
            for task in strings(get(&suite, "tasks")) {
                let mut config = base.clone();
                let mut overrides = set.clone();
                overrides.push(format!("run.num_train_frames={frames}"));
                overrides.extend(strings(get(&suite, &format!("task_set.{task}"))));
                overrides.extend(strings(row.get("set")));
                for o in &overrides {
                    apply_override(&mut config, o);
                }
                cells.push(Cell {
                    suite: path.file_name().unwrap().to_string_lossy().into_owned(),
                    row: row["name"].as_str().unwrap().to_string(),
                    task,
                    scale: scale.clone(),
                    config,
                });
            }
        }
    }
    cells
}

/// Every suite cell that runs DrQ-v2 or TACO on one of the nine tasks runs it on upstream's σ
/// schedule and n-step for that task (DrQ-v2: and its batch; TACO: 1024 at the paper's scale,
/// a mini suite may cut it and says so), whatever group its train_config was written for; on a
/// Jaco task, DrQ-v2 runs with URLB's settings. Each of the nine tasks has a DrQ-v2 and a TACO
/// cell somewhere, and each Jaco task a DrQ-v2 cell, so the check is not empty.
#[test]
fn suites_run_each_drqv2_and_taco_task_on_its_upstream_schedule() {
    let mut wrong = Vec::new();
    let mut covered: BTreeMap<(String, String), usize> = BTreeMap::new();
    for cell in train_cells() {
        let kind = agent_kind(&cell.config);
        if kind != "drqv2" && kind != "taco" {
            continue;
        }
        let name = format!("{} row {} on {} ({kind})", cell.suite, cell.row, cell.task);
        let ours = (
            stddev_schedule(&cell.config),
            int(&cell.config, "agent.nstep"),
            int(&cell.config, "agent.batch_size"),
        );
        let theirs = if let Some(u) = upstream(&cell.task) {
            let batch = match kind.as_str() {
                "drqv2" => Some(u.batch_size),
                _ if cell.scale == "paper" => Some(TACO_BATCH_SIZE),
                _ => ours.2,
            };
            (Some(u.group.stddev_schedule().to_string()), Some(u.nstep), batch)
        } else if JACO_TASKS.contains(&cell.task.as_str()) && kind == "drqv2" {
            let seed_frames = int(&cell.config, "run.num_seed_frames");
            if seed_frames != Some(URLB_NUM_SEED_FRAMES) {
                wrong.push(format!(
                    "{name}: {seed_frames:?} seed frames, URLB's {URLB_NUM_SEED_FRAMES}"
                ));
            }
            (
                Some(URLB_STDDEV_SCHEDULE.to_string()),
                Some(URLB_NSTEP),
                Some(URLB_PIXEL_BATCH_SIZE),
            )
        } else {
            wrong.push(format!("{name}: no upstream setting known for this task"));
            continue;
        };
        *covered.entry((kind.clone(), cell.task.clone())).or_default() += 1;
        if ours != theirs {
            wrong.push(format!(
                "{name}: (sigma, nstep, batch) are {ours:?}, upstream's {theirs:?}"
            ));
        }
    }
    let needed = UPSTREAM
        .iter()
        .flat_map(|u| [("drqv2", u.task), ("taco", u.task)])
        .chain(JACO_TASKS.iter().map(|&t| ("drqv2", t)));
    for (kind, task) in needed {
        if !covered.contains_key(&(kind.to_string(), task.to_string())) {
            wrong.push(format!("no suite runs {kind} on {task}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The suites with DrQ-v2 or TACO cells load in lfs itself (every cell's config resolved and
/// validated; `lfs suite sbatch` runs nothing).
#[test]
fn suites_with_drqv2_or_taco_cells_load() {
    let mut suites: Vec<String> = train_cells()
        .into_iter()
        .filter(|c| matches!(agent_kind(&c.config).as_str(), "drqv2" | "taco"))
        .map(|c| c.suite)
        .collect();
    suites.dedup();
    assert!(!suites.is_empty());
    let dir = temp_dir("task_groups");
    for suite in suites {
        let out = dir.join(&suite);
        let result = lfs_in_repo()
            .args(["suite", "sbatch", &format!("eval/suites/{suite}")])
            .arg("--out")
            .arg(&out)
            .args(["--cpus-per-task", "1"])
            .output()
            .unwrap();
        assert!(result.status.success(), "{suite}: {}", output_text(&result));
    }
}
