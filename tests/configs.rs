//! Every config and suite file in the repository loads and validates: each `*.toml` under
//! `pipelines/` and `eval/suites/`, found by walking the folders, so a new file is checked without
//! editing this test (STYLE rule 4).
//!
//! Suites and the RL loop's configs go through the `lfs` binary. `lfs suite sbatch` loads a suite,
//! then every cell's config with its overrides (the suite's `set`, budget and `task_set`, the row's
//! `set`), and writes the job script; it runs nothing. A loop config of `lfs eval` or `lfs train`
//! is checked as the one row of a suite written for it. No command checks a pre-training config
//! without training, so those go through the library, `lfs::pretrain::PretrainConfig::load`.

use std::path::{Path, PathBuf};

use crate::common::{lfs_in_repo, output_text, repo};

/// Every `*.toml` under `dir` and its subfolders, sorted.
fn tomls(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(tomls(&path));
        } else if path.extension().is_some_and(|e| e == "toml") {
            found.push(path);
        }
    }
    found.sort();
    found
}

fn read_table(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap();
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `lfs suite sbatch SUITE --out OUT`, run in the checkout as a user would (the suite's config
/// paths are relative to it): the number of cells its job array has. A failure names `origin`, the
/// repository's file that `suite` was made from.
fn planned_cells(suite: &Path, out: &Path, origin: &Path) -> usize {
    let o = lfs_in_repo()
        .args(["suite", "sbatch"])
        .arg(suite)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let said = output_text(&o);
    assert!(
        o.status.success(),
        "{}: lfs suite sbatch said: {said}",
        origin.display()
    );
    let name = read_table(suite)["name"].as_str().unwrap().to_string();
    let script = std::fs::read_to_string(out.join("slurm").join(format!("{name}.sbatch"))).unwrap();
    let array = script
        .lines()
        .find_map(|l| l.strip_prefix("#SBATCH --array=0-"))
        .unwrap_or_else(|| panic!("{}: no job array in\n{script}", origin.display()));
    let last: usize = array.split('%').next().unwrap().parse().unwrap();
    last + 1
}

fn len(table: &toml::Table, key: &str) -> usize {
    table[key].as_array().map_or(0, Vec::len)
}

#[test]
fn every_suite_file_plans_all_its_cells() {
    let dir = tempfile::tempdir().unwrap();
    let suites = tomls(&repo().join("eval/suites"));
    assert!(!suites.is_empty());
    for path in &suites {
        let mut suite = read_table(path);
        // Encoder files come from pre-training runs (runs/…), which a checkout does not have: each
        // row's source becomes `random`, and the rest of the file is checked as written.
        for row in suite["encoders"].as_array_mut().unwrap() {
            row.as_table_mut().unwrap().insert("source".into(), "random".into());
        }
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let copy = dir.path().join(format!("{stem}.toml"));
        std::fs::write(&copy, toml::to_string(&suite).unwrap()).unwrap();
        let cells = planned_cells(&copy, &dir.path().join(format!("{stem}-out")), path);
        let expected = len(&suite, "encoders") * len(&suite, "tasks") * len(&suite, "seeds");
        assert_eq!(cells, expected, "{}: encoders × tasks × seeds", path.display());
    }
}

/// Which command reads a `pipelines/` file, from its tables.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reader {
    /// `lfs pretrain` (`[data]`).
    Pretrain,
    /// `lfs eval`: SAC on a frozen encoder (`[agent]`, no `[aux]`).
    Eval,
    /// `lfs train`: end to end (`[agent]` and `[aux]`).
    Train,
    /// `lfs explore` (`[explore]`).
    Explore,
}

fn reader(path: &Path, table: &toml::Table) -> Reader {
    if table.contains_key("explore") {
        return Reader::Explore;
    }
    match (
        table.contains_key("data"),
        table.contains_key("agent"),
        table.contains_key("aux"),
    ) {
        (true, false, false) => Reader::Pretrain,
        (false, true, false) => Reader::Eval,
        (false, true, true) => Reader::Train,
        _ => panic!(
            "{}: which command reads it? [data] is lfs pretrain's, [agent] lfs eval's, [agent] and [aux] \
             lfs train's",
            path.display()
        ),
    }
}

#[test]
fn every_pipeline_config_loads_as_its_command_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    for path in tomls(&repo().join("pipelines")) {
        let table = read_table(&path);
        let reader = reader(&path, &table);
        seen.push(reader);
        if reader == Reader::Pretrain {
            lfs::pretrain::PretrainConfig::load(&path, &[]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        if reader == Reader::Explore {
            lfs::rl_loop::explore::ExploreConfig::load(&path, &[])
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        // One random-encoder row on one task, at the file's own frame budget (the suite sets
        // `run.num_train_frames` to its own; here that is the file's value, unchanged).
        let frames = table
            .get("run")
            .and_then(|run| run.get("num_train_frames"))
            .and_then(toml::Value::as_integer)
            .unwrap_or_else(|| panic!("{}: sets no run.num_train_frames", path.display()));
        let (sac, train, command) = match reader {
            Reader::Eval => (path.clone(), None, "eval"),
            _ => (repo().join("pipelines/sac/tiny.toml"), Some(path.clone()), "train"),
        };
        let mut suite = toml::Table::new();
        suite.insert("name".into(), "check".into());
        suite.insert("scale".into(), "tiny".into());
        suite.insert("sac_config".into(), sac.to_str().unwrap().into());
        if let Some(train) = train {
            suite.insert("train_config".into(), train.to_str().unwrap().into());
        }
        suite.insert("num_train_frames".into(), frames.into());
        suite.insert("tasks".into(), vec!["cartpole_swingup"].into());
        suite.insert("seeds".into(), vec![1].into());
        let mut row = toml::Table::new();
        row.insert("name".into(), "check".into());
        row.insert("source".into(), "random".into());
        row.insert("command".into(), command.into());
        suite.insert("encoders".into(), vec![toml::Value::Table(row)].into());
        let stem = path.strip_prefix(repo()).unwrap().to_str().unwrap().replace('/', "-");
        let file = dir.path().join(&stem);
        std::fs::write(&file, toml::to_string(&suite).unwrap()).unwrap();
        let out = dir.path().join(format!("{stem}-out"));
        assert_eq!(planned_cells(&file, &out, &path), 1, "{}", path.display());
    }
    // Each command has shipped configs; a folder that stopped being read would show here.
    for reader in [Reader::Pretrain, Reader::Eval, Reader::Train, Reader::Explore] {
        assert!(seen.contains(&reader), "no {reader:?} config under pipelines/");
    }
}
