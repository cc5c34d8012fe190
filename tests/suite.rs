//! `lfs suite` on DMControl (needs `make setup`): suite files and job indices are checked
//! before anything is written; a suite killed mid-run (SIGKILL of one cell's process, then of
//! the pool) resumes to the same results (every cell's logs, and `lfs report`'s results.csv
//! but for its wall-clock column) as an uninterrupted `-j 2` run; and the same suite run as a
//! job array on a real one-node SLURM cluster (eval/slurm/run_suite.sh) gives them again.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use lfs::pretrain::export::{export, ExportContents};
use lfs::pretrain::run::CHECKPOINT_FILE;

use crate::common::{lfs_in_repo, output_text as text, repo, run_results, wait_for};
use crate::pretrain::{one_update_run, two_task_data};

fn lfs_command(args: &[&str]) -> Command {
    let mut cmd = lfs_in_repo();
    cmd.args(args);
    cmd
}

/// `lfs suite run SUITE --out OUT -j 2`, which must succeed; what it said.
fn run_pool(suite: &str, out: &str) -> String {
    run_ok(&mut lfs_command(&["suite", "run", suite, "--out", out, "-j", "2"]))
}

/// Runs `cmd`, which must be refused (exit 2) with `expected` in what it says; what it said.
fn refused(cmd: &mut Command, expected: &str) -> String {
    let out = cmd.output().unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains(expected), "expected {expected:?} in: {said}");
    said
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    said
}

/// eval/suites/tiny.toml with its `lfs-tiny` row pointing at `encoder` instead of the
/// make-pretrain run (an export of a one-update LFS run made here).
fn tiny_suite(dir: &Path, encoder: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("eval/suites/tiny.toml")).unwrap();
    assert!(text.contains("source = \"runs/tiny\""), "{text}");
    let text = text.replace(
        "source = \"runs/tiny\"",
        &format!("source = {:?}", encoder.display().to_string()),
    );
    let path = dir.join("tiny.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn exported_encoder(dir: &Path) -> (tempfile::TempDir, PathBuf) {
    let (eps, info) = two_task_data();
    let run = one_update_run(&eps, &info);
    let out = dir.join("encoder.safetensors");
    export(
        &run.path().join(CHECKPOINT_FILE),
        &out,
        ExportContents::EncoderAndProjector,
    )
    .unwrap();
    (run, out)
}

/// Every cell's results but for wall-clock ([`run_results`]), by cell folder name.
type CellResults = (String, Vec<String>, Vec<serde_json::Value>);

fn results(out: &Path) -> Vec<CellResults> {
    let mut cells: Vec<_> = std::fs::read_dir(out.join("cells"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cells.sort();
    cells
        .iter()
        .map(|dir| {
            let (rows, train) = run_results(dir);
            (dir.file_name().unwrap().to_string_lossy().into_owned(), rows, train)
        })
        .collect()
}

/// Cell by cell, naming the first cell and line that differ.
fn assert_same_results(got: &[CellResults], expected: &[CellResults], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}: cell count");
    for ((name, rows, eps), (name_e, rows_e, eps_e)) in got.iter().zip(expected) {
        assert_eq!(name, name_e, "{what}");
        assert_eq!(rows, rows_e, "{what}: eval.csv of {name}");
        assert_eq!(eps.len(), eps_e.len(), "{what}: train.jsonl lines of {name}");
        for (i, (a, b)) in eps.iter().zip(eps_e).enumerate() {
            assert_eq!(a, b, "{what}: train.jsonl line {} of {name}", i + 1);
        }
    }
}

/// `lfs report`'s results.csv of a suite folder, without its wall-clock column (`hour`).
fn results_csv(out: &Path) -> Vec<String> {
    let report = out.join("report");
    run_ok(&mut lfs_command(&[
        "report",
        out.to_str().unwrap(),
        "--out",
        report.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(report.join("results.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("agent,encoder,task,seed,frame,episode_reward,hour"));
    lines.map(|l| l.rsplit_once(',').unwrap().0.to_string()).collect()
}

fn record(out: &Path, cell: &str) -> serde_json::Value {
    let path = out.join("cells").join(cell).join("cell.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// `{seed}` in a row's source gives each seed its own encoder (one pre-training run per SAC
/// seed, docs/study-2.md): every cell of seed s runs the file of seed s, and a suite whose
/// file is missing for one of its seeds is refused before anything is written, naming it.
#[test]
fn a_source_with_the_seed_in_it_gives_each_seed_its_own_encoder() {
    let dir = tempfile::tempdir().unwrap();
    let (_run, encoder) = exported_encoder(dir.path());
    for seed in [1, 2] {
        std::fs::copy(&encoder, dir.path().join(format!("enc-s{seed}.safetensors"))).unwrap();
    }
    let suite = tiny_suite(dir.path(), &dir.path().join("enc-s{seed}.safetensors"));
    let file = lfs::suite::SuiteFile::load(&suite).unwrap();
    let sources: Vec<(String, u64, String)> = lfs::suite::Cell::all(&file)
        .into_iter()
        .map(|c| (c.encoder.name.clone(), c.seed, c.encoder.source.clone()))
        .collect();
    let of_seed = |seed: u64| {
        dir.path()
            .join(format!("enc-s{seed}.safetensors"))
            .display()
            .to_string()
    };
    assert_eq!(sources.len(), 8, "{sources:?}");
    for (name, seed, source) in &sources {
        match name.as_str() {
            "random" => assert_eq!(source, "random"),
            _ => assert_eq!(source, &of_seed(*seed), "{name} s{seed}"),
        }
    }
    std::fs::remove_file(dir.path().join("enc-s2.safetensors")).unwrap();
    let out = dir.path().join("out");
    let said = refused(
        &mut lfs_command(&["suite", "run", suite.to_str().unwrap(), "--out", out.to_str().unwrap()]),
        &format!("{} is neither `random`, an export file nor a run directory", of_seed(2)),
    );
    assert!(!out.exists(), "{said}");
}

#[test]
fn bad_suites_and_job_indices_are_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out_s = out.to_str().unwrap();
    let tiny = std::fs::read_to_string(repo().join("eval/suites/tiny.toml")).unwrap();
    let cases = [
        ("unknown = 1\n", "unknown field `unknown`"),
        (
            "",
            "runs/nowhere is neither `random`, an export file nor a run directory",
        ),
    ];
    for (i, (extra, expected)) in cases.iter().enumerate() {
        let body = format!("{extra}{}", tiny.replace("runs/tiny", "runs/nowhere"));
        let suite = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&suite, body).unwrap();
        let said = refused(
            &mut lfs_command(&["suite", "run", suite.to_str().unwrap(), "--out", out_s]),
            expected,
        );
        if i == 0 {
            assert!(
                said.contains(suite.to_str().unwrap()),
                "the error names the file: {said}"
            );
        }
        assert!(!out.exists(), "{said}");
    }
    // Cells on a GPU this build cannot open (a build without the cargo feature `cuda`).
    if !cfg!(feature = "cuda") {
        let suite = dir.path().join("cuda.toml");
        let body = tiny.replace("runs/tiny", "random").replace(
            "\"env.render_quality=fast\",",
            "\"env.render_quality=fast\",\n    \"run.device=cuda\",",
        );
        assert!(body.contains("run.device=cuda"), "{body}");
        std::fs::write(&suite, body).unwrap();
        refused(
            &mut lfs_command(&["suite", "run", suite.to_str().unwrap(), "--out", out_s]),
            "run.device = \"cuda:0\": this lfs was built without CUDA",
        );
        assert!(!out.exists());
    }
    // -j fixes the number of cells; a GPU footprint beside it would be ignored, so it is refused.
    refused(
        &mut lfs_command(&[
            "suite",
            "run",
            "eval/suites/tiny.toml",
            "--out",
            out_s,
            "-j",
            "2",
            "--gpu-memory-per-cell",
            "4096",
        ]),
        "cannot be used with",
    );
    // Zero cells at once, or cells of no memory, are refused before anything is written.
    for (flag, expected) in [
        ("-j", "-j must be >= 1"),
        ("--gpu-memory-per-cell", "--gpu-memory-per-cell must be >= 1 (MiB)"),
    ] {
        refused(
            &mut lfs_command(&["suite", "run", "eval/suites/tiny.toml", "--out", out_s, flag, "0"]),
            expected,
        );
    }
    assert!(!out.exists());
    // Duplicate encoder labels.
    let dup = tiny
        .replace("name = \"lfs-tiny\"", "name = \"random\"")
        .replace("runs/tiny", "random");
    let suite = dir.path().join("dup.toml");
    std::fs::write(&suite, dup).unwrap();
    refused(
        &mut lfs_command(&["suite", "run", suite.to_str().unwrap(), "--out", out_s]),
        "encoder name \"random\" appears twice",
    );

    // A job index beyond the 8 cells, given or taken from SLURM's variable.
    let random_only = dir.path().join("random.toml");
    std::fs::write(&random_only, tiny.replace("runs/tiny", "random")).unwrap();
    let suite_s = random_only.to_str().unwrap();
    refused(
        &mut lfs_command(&["suite", "run", suite_s, "--out", out_s, "--job-index", "8"]),
        "job index 8 is out of range: the suite has 8 cells (0..=7)",
    );
    refused(
        lfs_command(&["suite", "run", suite_s, "--out", out_s]).env("SLURM_ARRAY_TASK_ID", "x1"),
        "SLURM_ARRAY_TASK_ID=\"x1\" is not a job index",
    );
    assert!(!out.exists());

    // status of a folder that is not a suite's.
    refused(
        &mut lfs_command(&["suite", "status", dir.path().to_str().unwrap()]),
        "is not a suite directory",
    );

    // The array script: one task per cell, absolute paths, the thread count of the suite file.
    let said = run_ok(&mut lfs_command(&[
        "suite",
        "sbatch",
        suite_s,
        "--out",
        out_s,
        "--cpus-per-task",
        "1",
        "--time",
        "01:00:00",
        "--partition",
        "cpu",
    ]));
    let script_path = out.join("slurm/tiny.sbatch");
    assert_eq!(
        said.lines().find(|l| l.starts_with("sbatch ")),
        Some(format!("sbatch {}", script_path.display()).as_str())
    );
    let script = std::fs::read_to_string(&script_path).unwrap();
    for line in [
        "#SBATCH --array=0-7",
        "#SBATCH --cpus-per-task=1",
        "#SBATCH --time=01:00:00",
        "#SBATCH --partition=cpu",
        "export RAYON_NUM_THREADS=1",
        &format!("#SBATCH --chdir={}", repo().display()),
        &format!(
            "exec {} suite run {} --out {}",
            env!("CARGO_BIN_EXE_lfs"),
            suite_s,
            out_s
        ),
    ] {
        assert!(script.lines().any(|l| l == line), "no line {line:?} in\n{script}");
    }
    let syntax = Command::new("bash").arg("-n").arg(&script_path).output().unwrap();
    assert!(syntax.status.success(), "{}", text(&syntax));
    // A larger budget is the same suite, extended (its cells resume); the folder records it.
    let longer = dir.path().join("longer.toml");
    std::fs::write(
        &longer,
        tiny.replace("runs/tiny", "random")
            .replace("num_train_frames = 1000", "num_train_frames = 3000"),
    )
    .unwrap();
    run_ok(&mut lfs_command(&[
        "suite",
        "sbatch",
        longer.to_str().unwrap(),
        "--out",
        out_s,
    ]));
    assert!(std::fs::read_to_string(out.join("suite.toml"))
        .unwrap()
        .contains("num_train_frames = 3000"));
    // Another suite into the same folder is refused.
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        tiny.replace("runs/tiny", "random")
            .replace("seeds = [1, 2]", "seeds = [1, 3]"),
    )
    .unwrap();
    refused(
        &mut lfs_command(&["suite", "run", other.to_str().unwrap(), "--out", out_s]),
        "holds another suite",
    );
}

#[test]
fn a_killed_suite_and_a_slurm_array_end_as_an_uninterrupted_pool() {
    let dir = tempfile::tempdir().unwrap();
    let (_run, encoder) = exported_encoder(dir.path());
    // The tiny suite at one seed: 4 cells (two encoders x two tasks), each with a checkpoint
    // mid-run, are what the comparisons need; the second seed would double the three pools.
    let suite = tiny_suite(dir.path(), &encoder);
    let toml = std::fs::read_to_string(&suite).unwrap();
    assert!(toml.contains("seeds = [1, 2]"), "{toml}");
    std::fs::write(&suite, toml.replace("seeds = [1, 2]", "seeds = [1]")).unwrap();
    let suite_s = suite.to_str().unwrap();

    // Uninterrupted: 4 cells, 2 at a time.
    let whole = dir.path().join("whole");
    let said = run_pool(suite_s, whole.to_str().unwrap());
    assert!(said.contains("4 done, 0 failed"), "{said}");
    let expected = results(&whole);
    let expected_csv = results_csv(&whole);
    assert_eq!(expected_csv.len(), 4 * 3, "3 evaluations per cell");
    assert_eq!(expected.len(), 4);
    for (name, rows, episodes) in &expected {
        assert_eq!(rows.len(), 4, "{name}: header + frames 0, 500, 1000: {rows:?}");
        // 1000 frames: four episodes of 250 frames (reach_duplo's own, walker_stand's cut).
        assert_eq!(episodes.len(), 4, "{name}");
    }
    // Run again: every cell is skipped.
    let said = run_pool(suite_s, whole.to_str().unwrap());
    assert!(said.contains("4 done, 0 to run"), "{said}");

    // Killed: SIGKILL one cell's process once its checkpoint is on disk, then the pool itself.
    let killed = dir.path().join("killed");
    let killed_s = killed.to_str().unwrap();
    let mut pool = lfs_command(&["suite", "run", suite_s, "--out", killed_s, "-j", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = "000-random-reach_duplo-s1";
    let checkpoint = killed.join("cells").join(first).join("checkpoint.safetensors");
    wait_for(&mut pool, 300, "cell 0's first checkpoint (frame 500)", || {
        checkpoint.exists()
    });
    let pid = record(&killed, first)["pid"].as_u64().unwrap();
    assert!(Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    wait_for(&mut pool, 60, "cell 0 recorded as failed", || {
        record(&killed, first)["state"] == "failed"
    });
    let error = record(&killed, first)["error"].as_str().unwrap().to_string();
    assert!(error.contains("was killed by signal 9"), "{error}");
    // The pool goes on with the other cells; kill it once a later cell is half-way.
    let later = killed.join("cells/002-lfs-tiny-reach_duplo-s1/checkpoint.safetensors");
    wait_for(&mut pool, 600, "cell 2's first checkpoint", || later.exists());
    pool.kill().unwrap();
    pool.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500)); // the cells die with the pool
    let status = run_ok(&mut lfs_command(&["suite", "status", killed_s]));
    assert!(status.contains("0 running"), "no cell outlives its pool:\n{status}");
    let row = status.lines().find(|l| l.trim_start().starts_with("0 ")).unwrap();
    assert!(
        row.contains("failed") && row.contains("was killed by signal 9"),
        "{status}"
    );
    assert!(!status.contains("4 done"), "{status}");
    // Run again: everything resumes and ends as the uninterrupted pool did.
    let said = run_pool(suite_s, killed_s);
    assert!(said.contains("0 failed"), "{said}");
    assert_same_results(&results(&killed), &expected, "killed and resumed");
    assert_eq!(
        results_csv(&killed),
        expected_csv,
        "results.csv of the killed and resumed suite"
    );
    assert_eq!(record(&killed, first)["attempts"], 2);
    assert_eq!(record(&killed, first)["state"], "done");

    // A job array on a one-node SLURM cluster started for the purpose.
    // It needs root (munged, slurmctld and slurmd run as root) and slurm-wlm + munge (make deps);
    // CI has both. Without them, or with LFS_SKIP_SLURM set, its SLURM half is skipped loudly, and
    // under CI=true it fails.
    if std::env::var_os("LFS_SKIP_SLURM").is_some() {
        return crate::common::missing("its SLURM half", "LFS_SKIP_SLURM is set: unset it to run that half");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return crate::common::missing(
            "root for its SLURM half (the one-node cluster's daemons run as root)",
            "run the tests as root after `make deps` (slurm-wlm, munge)",
        );
    }
    let slurm = dir.path().join("slurm");
    let out = Command::new(repo().join("eval/slurm/run_suite.sh"))
        .current_dir(repo())
        .args([suite_s, slurm.to_str().unwrap(), env!("CARGO_BIN_EXE_lfs")])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(
        out.status.success(),
        "eval/slurm/run_suite.sh failed (it needs root and `apt-get install slurm-wlm munge`; \
         set LFS_SKIP_SLURM=1 to skip this half): {said}"
    );
    assert!(said.contains("4 cells: 4 done"), "{said}");
    assert_same_results(&results(&slurm), &expected, "SLURM array");
    assert_eq!(results_csv(&slurm), expected_csv, "results.csv of the SLURM array");
    // Each array task wrote its scheduler log.
    let logs = std::fs::read_dir(slurm.join("slurm"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "out"))
        .count();
    assert_eq!(logs, 4);
}

/// A suite mixing a frozen-encoder row with two `lfs train` rows (LFS end to end, SAC from
/// pixels), one short reach_duplo cell each.
const MIXED_SUITE: &str = r#"
name = "mixed"
scale = "tiny"
sac_config = "pipelines/sac/tiny.toml"
train_config = "pipelines/e2e/tiny.toml"
set = [
    "agent.hidden_dim=32",
    "agent.feature_dim=8",
    "agent.batch_size=16",
    "run.num_seed_frames=500",
    "run.eval_every_frames=500",
    "run.num_eval_episodes=1",
    "run.checkpoint_every_frames=500",
    "replay.capacity=2000",
    "replay.feature_cache=false",
    "env.render_quality=fast",
]
num_train_frames = 800
tasks = ["reach_duplo"]
seeds = [1]
threads_per_cell = 1

[[encoders]]
name = "random"
source = "random"

[[encoders]]
name = "lfs-e2e"
source = "random"
command = "train"
set = ["aux.model.num_prototypes=32", "aux.model.predictor_hidden_dim=64"]

[[encoders]]
name = "sac-pixel"
source = "random"
command = "train"
set = ["aux.method=none", "aux.critic_gradient=true"]
"#;

#[test]
fn train_rows_run_lfs_train_and_reach_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    // A train row needs the suite's train_config; `set` belongs to train rows.
    let no_config = write(
        "no_config.toml",
        &MIXED_SUITE.replace("train_config = \"pipelines/e2e/tiny.toml\"\n", ""),
    );
    refused(
        &mut lfs_command(&["suite", "run", &no_config, "--out", out.to_str().unwrap()]),
        "encoder lfs-e2e: command = \"train\" needs the suite's train_config",
    );
    let eval_set = write(
        "eval_set.toml",
        &MIXED_SUITE.replace(
            "name = \"random\"\nsource = \"random\"\n",
            "name = \"random\"\nsource = \"random\"\nset = [\"aux.method=atc\"]\n",
        ),
    );
    refused(
        &mut lfs_command(&["suite", "run", &eval_set, "--out", out.to_str().unwrap()]),
        "encoder random: `set` is for command = \"train\" rows",
    );
    let bad_row = write(
        "bad_row.toml",
        &MIXED_SUITE.replace("aux.method=none", "aux.method=byol"),
    );
    refused(
        &mut lfs_command(&["suite", "run", &bad_row, "--out", out.to_str().unwrap()]),
        "encoder sac-pixel:",
    );
    assert!(!out.exists());

    let suite = write("mixed.toml", MIXED_SUITE);
    run_pool(&suite, out.to_str().unwrap());
    let agents: Vec<(String, String)> = [
        "000-random-reach_duplo-s1",
        "001-lfs-e2e-reach_duplo-s1",
        "002-sac-pixel-reach_duplo-s1",
    ]
    .iter()
    .map(|cell| {
        let r = record(&out, cell);
        assert_eq!(r["state"], "done", "{cell}: {r}");
        (
            r["encoder"].as_str().unwrap().to_string(),
            r["agent"].as_str().unwrap().to_string(),
        )
    })
    .collect();
    assert_eq!(
        agents,
        [("random", "sac"), ("lfs-e2e", "train"), ("sac-pixel", "train")].map(|(e, a)| (e.to_string(), a.to_string()))
    );
    // The train cells ran `lfs train` with their rows' objectives.
    let run = |cell: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(out.join("cells").join(cell).join("run.json")).unwrap()).unwrap()
    };
    assert_eq!(
        run("001-lfs-e2e-reach_duplo-s1")["encoder_sha256"],
        "online:lfs:init=random:1"
    );
    assert_eq!(
        run("002-sac-pixel-reach_duplo-s1")["encoder_sha256"],
        "online:none+critic:init=random:1"
    );
    assert!(out.join("cells/001-lfs-e2e-reach_duplo-s1/aux.jsonl").is_file());
    // The report compares encoder+agent columns.
    let rows = results_csv(&out);
    for method in ["sac,random", "train,lfs-e2e", "train,sac-pixel"] {
        assert!(rows.iter().any(|r| r.starts_with(method)), "{method} not in {rows:?}");
    }
    // And draws N per update of the run with an objective.
    let md = std::fs::read_to_string(out.join("report/report.md")).unwrap();
    assert!(md.contains("](synthetic_selected.png)"), "{md}");
    assert!(out.join("report/synthetic_selected.svg").is_file());
}

/// URLB's Jaco reach tasks (issue 32): a tiny `lfs train` on each of the four through a suite
/// (the 9-dim action comes from the worker), and `lfs report` sets their raw returns beside
/// the paper's Table 2, with no expert-normalised section (they have no expert score). The
/// committed Jaco suites plan (as SLURM arrays) without running.
#[test]
fn jaco_tasks_train_through_a_suite_and_reach_table_2() {
    let dir = tempfile::tempdir().unwrap();
    for (suite, cells) in [("eval/suites/jaco_paper.toml", 40), ("eval/suites/jaco_mini.toml", 6)] {
        let out = dir.path().join(suite.replace('/', "-"));
        run_ok(&mut lfs_command(&[
            "suite",
            "sbatch",
            suite,
            "--out",
            out.to_str().unwrap(),
        ]));
        let name = suite.trim_start_matches("eval/suites/").trim_end_matches(".toml");
        let script = std::fs::read_to_string(out.join("slurm").join(format!("{name}.sbatch"))).unwrap();
        assert!(
            script.contains(&format!("#SBATCH --array=0-{}\n", cells - 1)),
            "{suite}: {script}"
        );
    }
    let suite = dir.path().join("jaco.toml");
    std::fs::write(&suite, JACO_SUITE).unwrap();
    let out = dir.path().join("out");
    run_pool(suite.to_str().unwrap(), out.to_str().unwrap());
    let tasks = [
        "jaco_reach_bottom_left",
        "jaco_reach_bottom_right",
        "jaco_reach_top_left",
        "jaco_reach_top_right",
    ];
    for (i, task) in tasks.iter().enumerate() {
        let cell = format!("{i:03}-lfs-{task}-s1");
        assert_eq!(record(&out, &cell)["state"], "done", "{cell}");
        let run: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("cells").join(&cell).join("run.json")).unwrap()).unwrap();
        assert_eq!(run["task"], *task, "{cell}: {run}");
    }
    let rows = results_csv(&out);
    for task in tasks {
        let returns: Vec<f64> = rows
            .iter()
            .filter(|r| r.split(',').nth(2) == Some(task))
            .map(|r| r.split(',').nth(5).unwrap().parse().unwrap())
            .collect();
        assert_eq!(returns.len(), 2, "{task}: evaluations at frames 0 and 500 in {rows:?}");
        assert!(returns.iter().all(|r| (0.0..=250.0).contains(r)), "{task}: {returns:?}");
    }
    let md = std::fs::read_to_string(out.join("report/report.md")).unwrap();
    assert!(md.contains("### URLB Jaco reach tasks (the paper's Table 2)"), "{md}");
    // The paper's LFS and ICM on bottom right, and the unsupervised columns marked as quoted.
    let row = md
        .lines()
        .find(|l| l.starts_with("| jaco_reach_bottom_right |"))
        .unwrap();
    assert!(row.contains("| 142 ± 46 |") && row.contains("| 88 ± 23 |"), "{row}");
    assert!(
        md.contains("paper ICM (100K, quoted)") && md.contains("paper LFS (100K)"),
        "{md}"
    );
    assert!(!md.contains("Expert-normalised"), "{md}");
}

const JACO_SUITE: &str = r#"
name = "jaco"
scale = "tiny"
sac_config = "pipelines/sac/tiny.toml"
train_config = "pipelines/e2e/tiny.toml"
set = [
    "agent.hidden_dim=32",
    "agent.feature_dim=8",
    "agent.batch_size=16",
    "run.num_seed_frames=400",
    "run.eval_every_frames=500",
    "run.num_eval_episodes=1",
    "run.checkpoint_every_frames=500",
    "replay.capacity=2000",
    "env.render_quality=fast",
]
num_train_frames = 500
tasks = ["jaco_reach_bottom_left", "jaco_reach_bottom_right", "jaco_reach_top_left", "jaco_reach_top_right"]
seeds = [1]
threads_per_cell = 1

[[encoders]]
name = "lfs"
source = "random"
command = "train"
set = ["aux.objective.lnc.r=0.2", "aux.model.num_prototypes=32", "aux.model.predictor_hidden_dim=64"]
"#;
