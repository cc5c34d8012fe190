//! `lfs report`: rliable's statistics against rliable itself, the report of a synthetic suite
//! (files, paper numbers with their scale, cells not counted, pictures that decode), refused
//! mismatches with nothing written, `results.csv` read back by us and by pandas, the encoders'
//! pre-training logs and linear probes beside the returns, and study 4's committed verdicts
//! written again from its committed cells.

use std::path::{Path, PathBuf};
use std::process::Command;

use lfs::report::aggregate::{self, Aggregate, BootstrapConfig, ScoreTable};
use lfs::report::{cells, results_csv};

use crate::common::{lfs, repo, temp_dir, text};

// ---------------------------------------------------------------------------------------------
// rliable's statistics

/// tests/fixtures/report/rliable_reference.json, written by rliable_reference.py beside it.
fn rliable_fixture() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/rliable_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn key(agg: Aggregate) -> &'static str {
    match agg {
        Aggregate::Iqm => "iqm",
        Aggregate::Median => "median",
        Aggregate::Mean => "mean",
        Aggregate::OptimalityGap => "optimality_gap",
    }
}

/// Point estimates equal rliable's (rliable 1.2.0, NumPy 2.4.6, SciPy 1.17.1) to rounding; the
/// 95% stratified-bootstrap percentile intervals (50000 replications) agree within 0.01
/// normalised score. The bootstraps draw from different generators, so the bounds can only
/// agree up to Monte Carlo error: rliable's own bounds move by up to 0.0026 between NumPy seeds
/// on this table (`interval_spread_over_5_seeds`), and the tolerance is about four times that.
#[test]
fn aggregates_match_rliable() {
    const INTERVAL_TOLERANCE: f64 = 0.01;
    let fx = rliable_fixture();
    let rows: Vec<Vec<f64>> = serde_json::from_value(fx["scores"].clone()).unwrap();
    let table = ScoreTable::from_runs_by_task(&rows);
    assert_eq!(table.tasks.len(), 5);
    assert_eq!(table.num_runs(), 50);
    let cfg = BootstrapConfig {
        reps: fx["reps"].as_u64().unwrap() as usize,
        confidence: fx["confidence_interval_size"].as_f64().unwrap(),
        seed: 0,
    };
    let estimates = aggregate::interval_estimates(&table, &Aggregate::ALL, &cfg);
    for (agg, est) in Aggregate::ALL.iter().zip(&estimates) {
        let k = key(*agg);
        let point = fx["point_estimates"][k].as_f64().unwrap();
        assert!(
            (est.point - point).abs() < 1e-12,
            "{k}: {} vs rliable {point}",
            est.point
        );
        let spread = &fx["interval_spread_over_5_seeds"][k];
        for (bound, ours, i) in [("lower", est.lower, 0), ("upper", est.upper, 1)] {
            let theirs = fx["intervals_seed0"][k][i].as_f64().unwrap();
            assert!(
                spread[i].as_f64().unwrap() < INTERVAL_TOLERANCE / 2.0,
                "{k} {bound}: rliable's own spread {spread} is not small against the tolerance"
            );
            assert!(
                (ours - theirs).abs() < INTERVAL_TOLERANCE,
                "{k} {bound}: {ours} vs rliable {theirs}"
            );
        }
        assert!(est.lower <= est.point && est.point <= est.upper, "{k}: {est:?}");
    }
}

/// rliable's probability of improvement of one table over another (8 and 10 runs × 5 tasks,
/// with ties), point and interval, from the same fixture: the point to rounding, the bounds
/// within 0.01 (rliable's own move by up to 0.0025 between NumPy seeds).
#[test]
fn probability_of_improvement_matches_rliable() {
    let fx = &rliable_fixture()["probability_of_improvement"];
    let table = |key: &str| {
        let rows: Vec<Vec<f64>> = serde_json::from_value(fx[key].clone()).unwrap();
        ScoreTable::from_runs_by_task(&rows)
    };
    let (x, y) = (table("x"), table("y"));
    assert_eq!((x.num_runs(), y.num_runs()), (40, 50));
    let est = aggregate::improvement_estimate(&x, &y, &BootstrapConfig::default());
    let point = fx["point"].as_f64().unwrap();
    assert!((est.point - point).abs() < 1e-12, "{} vs rliable {point}", est.point);
    for (i, ours) in [est.lower, est.upper].into_iter().enumerate() {
        let theirs = fx["interval_seed0"][i].as_f64().unwrap();
        assert!(fx["interval_spread_over_5_seeds"][i].as_f64().unwrap() < 0.005);
        assert!((ours - theirs).abs() < 0.01, "bound {i}: {ours} vs rliable {theirs}");
    }
    // By hand: runs 1, 2 against 2, 3 is (0 + 0 + ½ + 0) / 4; a task only one side has is left out.
    let one = |tasks: Vec<Vec<f64>>| ScoreTable { tasks };
    let p = aggregate::probability_of_improvement(
        &one(vec![vec![1.0, 2.0], vec![5.0]]),
        &one(vec![vec![2.0, 3.0], vec![]]),
    );
    assert_eq!(p, 0.125);
    assert_eq!(
        aggregate::probability_of_improvement(&one(vec![vec![2.0, 3.0]]), &one(vec![vec![1.0, 2.0]])),
        0.875
    );
}

/// scipy's `trim_mean` docstring example, its rounding down of the cut, NumPy's linear
/// percentile, and the per-task means of a ragged table (a partly finished suite).
#[test]
fn aggregates_small_cases() {
    let one_task = |xs: &[f64]| ScoreTable {
        tasks: vec![xs.to_vec()],
    };
    // stats.trim_mean([1, 2, 3, 5], 0.25) == 2.5
    assert_eq!(aggregate::iqm(&one_task(&[1.0, 2.0, 3.0, 5.0])), 2.5);
    // 5 values: int(1.25) = 1 cut from each end
    assert_eq!(aggregate::iqm(&one_task(&[9.0, 1.0, 2.0, 3.0, 4.0])), 3.0);
    // np.percentile([1, 2, 3, 4], [2.5, 97.5]) == [1.075, 3.925]
    let sorted = [1.0, 2.0, 3.0, 4.0];
    assert!((aggregate::percentile(&sorted, 2.5) - 1.075).abs() < 1e-12);
    assert!((aggregate::percentile(&sorted, 97.5) - 3.925).abs() < 1e-12);
    let ragged = ScoreTable {
        tasks: vec![vec![1.0], vec![0.0, 0.5, 1.0], vec![2.0, 2.0]],
    };
    assert!((aggregate::aggregate_mean(&ragged) - (1.0 + 0.5 + 2.0) / 3.0).abs() < 1e-12);
    assert_eq!(aggregate::aggregate_median(&ragged), 1.0);
    assert!((aggregate::optimality_gap(&ragged, 1.0) - (1.0 - 4.5 / 6.0)).abs() < 1e-12);
    // one run per task: every replicate is the table itself
    let cfg = BootstrapConfig {
        reps: 100,
        ..BootstrapConfig::default()
    };
    let fixed = ScoreTable {
        tasks: vec![vec![0.3], vec![0.7]],
    };
    let est = aggregate::interval_estimates(&fixed, &[Aggregate::Mean], &cfg)[0];
    assert!(
        (est.lower - 0.5).abs() < 1e-12 && (est.upper - 0.5).abs() < 1e-12,
        "{est:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// A synthetic suite, laid out as the suite runner writes it

#[derive(Clone)]
struct CellSpec {
    encoder: &'static str,
    task: &'static str,
    seed: u64,
    state: &'static str,
    num_train_frames: u64,
    render_quality: &'static str,
    feature_cache: bool,
    /// `replay.feature_cache_dtype`; None: a config that predates it.
    feature_cache_dtype: Option<&'static str>,
    /// `[agent] kind`; None: a config that predates it (SAC).
    agent_kind: Option<&'static str>,
    /// `[env] episode_frames`; None: the task's own episodes.
    episode_frames: Option<u64>,
}

impl CellSpec {
    /// A done cell at the suites' common settings: 10K frames, fast rendering, the f32 feature
    /// cache of a config that predates `feature_cache_dtype`.
    fn done(encoder: &'static str, task: &'static str, seed: u64) -> Self {
        CellSpec {
            encoder,
            task,
            seed,
            state: "done",
            num_train_frames: 10_000,
            render_quality: "fast",
            feature_cache: true,
            feature_cache_dtype: None,
            agent_kind: None,
            episode_frames: None,
        }
    }

    fn name(&self) -> String {
        format!("{}-{}-s{}", self.encoder, self.task, self.seed)
    }
}

const EVAL_EVERY: u64 = 2000;

/// A made-up but deterministic learning curve: rises towards a level set by encoder and task.
fn reward(spec: &CellSpec, frame: u64) -> f64 {
    let level = match spec.encoder {
        "random" => 200.0,
        "atc" => 350.0,
        _ => 500.0,
    } + 37.0 * spec.task.len() as f64;
    let noise = ((spec.seed * 7919 + frame / 10) % 97) as f64;
    level * (1.0 - (-(frame as f64) / 4000.0).exp()) + noise
}

/// A 64-hex-digit id per encoder label, standing for its export's sha256.
fn fake_sha256(encoder: &str) -> String {
    let hex: String = encoder.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{hex:0<64}")
}

fn write_cell(suite: &Path, index: usize, spec: &CellSpec) -> PathBuf {
    let dir = suite.join("cells").join(spec.name());
    std::fs::create_dir_all(&dir).unwrap();
    let done = spec.state == "done";
    let frames_done = if done { spec.num_train_frames } else { 0 };
    let cell = serde_json::json!({
        "index": index,
        "encoder": spec.encoder,
        "encoder_source": if spec.encoder == "random" { "random".to_string() } else { format!("/runs/{}/encoder.safetensors", spec.encoder) },
        "agent": "sac",
        "task": spec.task,
        "seed": spec.seed,
        "state": spec.state,
        "error": if spec.state == "failed" { Some("environment walker_stand: worker died (signal 9)") } else { None },
        "attempts": if spec.state == "failed" { 2 } else { 1 },
        "frames_done": frames_done,
        "num_train_frames": spec.num_train_frames,
        "wall_clock_s": if done { 120.0 + spec.seed as f64 } else { 0.0 },
        "frames_per_s": if done { spec.num_train_frames as f64 / (120.0 + spec.seed as f64) } else { 0.0 },
    });
    std::fs::write(dir.join("cell.json"), serde_json::to_string_pretty(&cell).unwrap()).unwrap();
    if !done {
        return dir;
    }
    let mut csv = String::from("frame,step,episode,episode_reward,total_time\n");
    let mut frame = 0;
    while frame <= spec.num_train_frames {
        csv += &format!(
            "{frame},{},{},{},{}\n",
            frame / 2,
            frame / 1000,
            reward(spec, frame),
            0.03 * frame as f64
        );
        frame += EVAL_EVERY;
    }
    std::fs::write(dir.join("eval.csv"), csv).unwrap();
    let run = serde_json::json!({
        "encoder": spec.encoder, "encoder_render_quality": null,
        "encoder_sha256": if spec.encoder == "random" { format!("random:{}", spec.seed) } else { fake_sha256(spec.encoder) },
        "feature_cache": spec.feature_cache, "render_quality": spec.render_quality,
        "seed": spec.seed, "task": spec.task, "version": "0.1.0",
    });
    std::fs::write(dir.join("run.json"), serde_json::to_string_pretty(&run).unwrap()).unwrap();
    let config = format!(
        "[run]\nseed = {}\nnum_train_frames = {}\nnum_seed_frames = 1000\neval_every_frames = {EVAL_EVERY}\n\
         num_eval_episodes = 1\ncheckpoint_every_frames = 2000\n\n[env]\naction_repeat = 2\nrender_quality = \"{}\"\n{}\n\
         [agent]\n{}batch_size = 64\nhidden_dim = 1024\n\n[replay]\ncapacity = 10000\nrandom_shift_pad = 4\nfeature_cache = {}\n{}",
        spec.seed,
        spec.num_train_frames,
        spec.render_quality,
        spec.episode_frames.map(|f| format!("episode_frames = {f}\n")).unwrap_or_default(),
        spec.agent_kind.map(|k| format!("kind = \"{k}\"\n")).unwrap_or_default(),
        spec.feature_cache,
        spec.feature_cache_dtype
            .map(|d| format!("feature_cache_dtype = \"{d}\"\n"))
            .unwrap_or_default()
    );
    std::fs::write(dir.join("config.resolved.toml"), config).unwrap();
    std::fs::write(dir.join("train.jsonl"), "").unwrap();
    dir
}

/// 2 encoders × 3 tasks (one seen) × 3 seeds, all done, plus a failed and a pending cell.
fn suite_specs() -> Vec<CellSpec> {
    let mut specs = Vec::new();
    for encoder in ["random", "lfs"] {
        for task in ["cartpole_swingup", "walker_stand", "finger_spin"] {
            for seed in 1..=3 {
                specs.push(CellSpec::done(encoder, task, seed));
            }
        }
    }
    let base = specs[0].clone();
    specs.push(CellSpec {
        task: "walker_stand",
        seed: 4,
        state: "failed",
        ..base.clone()
    });
    specs.push(CellSpec {
        encoder: "lfs",
        task: "finger_spin",
        seed: 4,
        state: "pending",
        ..base
    });
    specs
}

fn write_suite(name: &str, specs: &[CellSpec]) -> crate::common::TestDir {
    let suite = temp_dir(name);
    for (i, spec) in specs.iter().enumerate() {
        write_cell(&suite, i, spec);
    }
    suite
}

fn run_report(suite: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "report",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--reps",
        "2000",
    ];
    args.extend_from_slice(extra);
    lfs(&args)
}

const PICTURES: [&str; 3] = ["learning_curves", "iqm_curve", "aggregates"];

/// The whole report of a suite: every file, the paper's numbers with their scale beside ours,
/// the cells not counted with their errors, numbers computed independently here.
#[test]
fn report_of_a_suite() {
    let specs = suite_specs();
    let suite = write_suite("report-suite", &specs);
    let out = suite.join("report");
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "lfs report failed: {}", text(&res.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected = vec!["report.md".to_string(), "results.csv".to_string()];
    for p in PICTURES {
        expected.push(format!("{p}.png"));
        expected.push(format!("{p}.svg"));
    }
    expected.sort();
    assert_eq!(names, expected, "no temporary files left, nothing missing");

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    // our scale and the paper's, never mixed up
    assert!(
        md.contains("| ours (this suite) | 10000 (action repeat 2) | 3 |"),
        "{md}"
    );
    assert!(
        md.contains("| the paper (Table 3) | 500000 (action repeat 2) | 5 |"),
        "{md}"
    );
    assert!(md.contains("**Reduced scale.**"), "{md}");
    assert!(md.contains("lfs (ours, 10K, 3 seeds)"), "{md}");
    assert!(md.contains("paper LFS (videos, 500K, 5 seeds)"), "{md}");
    assert!(md.contains("paper Proto-RL (URL 240K, 500K, 5 seeds)"), "{md}");
    assert!(md.contains("paper DrQ-v2 (end to end, 500K, 5 seeds)"), "{md}");
    // Table 3's six columns (docs/design.md §9): walker_stand LFS, ATC, CURL, Proto-RL, APT,
    // DrQ-v2; the paper's mean rows, DrQ-v2's derived (the paper prints none)
    assert!(
        md.contains("| 941 ± 32 | 933 ± 12 | 939 ± 16 | 553 ± 372 | 915 ± 14 | 957 ± 37 |"),
        "{md}"
    );
    assert!(md.contains("| 659 (9 tasks) | 501 (9 tasks) | 459 (9 tasks) | 494 (9 tasks) | 470 (9 tasks) | 632.8 (derived here, 9 tasks) |"), "{md}");
    assert!(md.contains("0.997 (9 tasks; the paper prints 0.982)"), "{md}");
    // expert scores (docs/design.md §8) and their source
    assert!(md.contains("| walker_stand | unseen | 957 |"), "{md}");
    assert!(md.contains("| cartpole_swingup | seen | 846 |"), "{md}");
    assert!(md.contains("DrQ-v2's score at 500K frames"), "{md}");
    // lfs's curves sit above random's by more than the noise on every task: P(lfs > random) = 1
    assert!(
        md.contains("### Probability of improvement over `random` (rliable)"),
        "{md}"
    );
    assert!(md.contains("| lfs | all (3) | 1.000 [1.000, 1.000] |"), "{md}");
    assert!(md.contains("| lfs | seen (1) | 1.000 [1.000, 1.000] |"), "{md}");
    // mean ± std (ddof 0) of lfs on walker_stand at 10K, computed here
    let finals: Vec<f64> = (1..=3)
        .map(|seed| {
            let spec = specs
                .iter()
                .find(|s| s.encoder == "lfs" && s.task == "walker_stand" && s.seed == seed)
                .unwrap();
            reward(spec, 10_000)
        })
        .collect();
    let mean = finals.iter().sum::<f64>() / 3.0;
    let std = (finals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
    let cell = format!("{mean:.1} ± {std:.1} (3)");
    assert!(md.contains(&cell), "no {cell} in {md}");
    let normalised = format!("{:.3} ± {:.3} (3)", mean / 957.0, std / 957.0);
    assert!(md.contains(&normalised), "no {normalised} in {md}");
    // seen vs unseen, rliable's aggregates, pictures, compute cost
    assert!(md.contains("### Seen vs unseen tasks"), "{md}");
    assert!(md.contains("| lfs | seen (1) | 3 |"), "{md}");
    assert!(md.contains("| lfs | unseen (2) | 6 |"), "{md}");
    assert!(md.contains("| random | all (3) | 9 |"), "{md}");
    assert!(md.contains("2000 replications, seed 0"), "{md}");
    for p in PICTURES {
        assert!(md.contains(&format!("]({p}.png)")), "{md}");
    }
    assert!(md.contains("## Compute cost"), "{md}");
    // cells not counted, with their state and error
    assert!(md.contains("| random-walker_stand-s4 | random | walker_stand | 4 | failed | 0 / 10000 | 2 | environment walker_stand: worker died (signal 9) |"), "{md}");
    assert!(
        md.contains("| lfs-finger_spin-s4 | lfs | finger_spin | 4 | pending |"),
        "{md}"
    );
    assert!(
        md.contains("20 cells: 18 done, 0 running, 1 failed, 0 interrupted, 1 pending"),
        "{md}"
    );

    // pictures: PNGs decode at their size with the methods' colours and dark text in them;
    // SVGs hold the text
    for p in PICTURES {
        let img = image::open(out.join(format!("{p}.png"))).unwrap().to_rgb8();
        assert!(img.width() >= 800 && img.height() >= 250, "{p}: {:?}", img.dimensions());
        // a method's colour, drawn solid (lines) or at 75% over white (the bars)
        let has = |rgb: [u8; 3]| {
            let bar = rgb.map(|c| (0.75 * c as f64 + 0.25 * 255.0) as u8);
            img.pixels()
                .any(|px| px.0 == rgb || px.0.iter().zip(bar).all(|(a, b)| a.abs_diff(b) <= 2))
        };
        assert!(
            has([31, 119, 180]) && has([255, 127, 14]),
            "{p}: the two methods' colours"
        );
        let dark = img.pixels().filter(|px| px.0.iter().all(|c| *c < 60)).count();
        assert!(dark > 500, "{p}: {dark} dark pixels: no text drawn?");
        let svg = std::fs::read_to_string(out.join(format!("{p}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("lfs") && svg.contains("random"),
            "{p}.svg"
        );
    }
    let svg = std::fs::read_to_string(out.join("learning_curves.svg")).unwrap();
    assert!(svg.contains("walker_stand (unseen)") && svg.contains("cartpole_swingup (seen)"));
    // The band says what it is (issue 33: ±1 std read like an interval).
    assert!(
        svg.contains("band: 95% bootstrap interval of the mean"),
        "learning_curves.svg"
    );
    // Three tasks: the median panel is the median's; lower is better for the gap.
    let svg = std::fs::read_to_string(out.join("aggregates.svg")).unwrap();
    assert!(svg.contains(">\nmedian\n<"), "aggregates.svg");
    assert!(svg.contains("optimality gap (lower is better)"), "aggregates.svg");

    // --budget scores every run at its last evaluation at or before each budget
    let out = suite.join("report-budgets");
    let res = run_report(&suite, &out, &["--budget", "5000", "--budget", "10000"]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Scores at 5K frames (5000 frames)"), "{md}");
    assert!(md.contains("## Scores at 10K frames (10000 frames)"), "{md}");
    let at_4000: Vec<f64> = (1..=3)
        .map(|seed| {
            let spec = specs
                .iter()
                .find(|s| s.encoder == "lfs" && s.task == "walker_stand" && s.seed == seed)
                .unwrap();
            reward(spec, 4000)
        })
        .collect();
    let mean = at_4000.iter().sum::<f64>() / 3.0;
    assert!(md.contains(&format!("{mean:.1} ± ")), "no {mean:.1} in {md}");
}

/// `results.csv` holds every evaluation of every done cell and reads back to the same rows,
/// here and (when the project venv has it) in pandas.
#[test]
fn results_csv_round_trip() {
    let specs = suite_specs();
    let suite = write_suite("report-csv", &specs);
    let out = suite.join("report");
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let written = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let rows = results_csv::rows(&cells::read_suite(&suite).unwrap());
    assert_eq!(rows.len(), 18 * 6, "18 done cells, 6 evaluations each");
    assert_eq!(written, results_csv::to_csv(&rows));
    assert_eq!(results_csv::from_csv(&written).unwrap(), rows);
    assert!(written.starts_with("agent,encoder,task,seed,frame,episode_reward,hour\n"));

    // labels that need quoting, floats that need every digit
    let mut odd = rows[0].clone();
    odd.encoder = "lfs, \"60K\" updates".to_string();
    odd.episode_reward = 0.1 + 0.2;
    odd.hour = 1.0 / 3.0;
    let odd_rows = vec![odd, rows[1].clone()];
    assert_eq!(
        results_csv::from_csv(&results_csv::to_csv(&odd_rows)).unwrap(),
        odd_rows
    );

    pandas_reads(&out.join("results.csv"), &rows);
}

fn pandas_reads(path: &Path, rows: &[results_csv::ResultRow]) {
    let python = lfs::env::default_python();
    let has_pandas = python.exists()
        && Command::new(&python)
            .args(["-c", "import pandas"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !has_pandas {
        return crate::common::missing(
            &format!("pandas in {}", python.display()),
            "`make setup` installs it (python/requirements-data.txt)",
        );
    }
    let script = "import sys, pandas as pd\n\
                  df = pd.read_csv(sys.argv[1])\n\
                  assert list(df.columns) == ['agent','encoder','task','seed','frame','episode_reward','hour'], df.columns\n\
                  assert str(df['seed'].dtype).startswith('int') and str(df['frame'].dtype).startswith('int')\n\
                  print(len(df), repr(float(df['episode_reward'].sum())), df['task'].nunique(), df['encoder'].nunique())\n";
    let out = Command::new(&python).args(["-c", script]).arg(path).output().unwrap();
    assert!(out.status.success(), "pandas: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(fields[0].parse::<usize>().unwrap(), rows.len());
    let sum: f64 = rows.iter().map(|r| r.episode_reward).sum();
    assert!(
        (fields[1].parse::<f64>().unwrap() - sum).abs() < 1e-6 * sum.abs(),
        "{stdout}"
    );
    assert_eq!(fields[2..], ["3", "2"]);
}

/// Cells that differ in render quality, feature cache, budget or episode length are refused,
/// with the field and the cell named, exit code 2 and nothing written; `--allow-mismatch`
/// reports them and says so (with the episode lengths in the scale table).
#[test]
fn mismatched_cells_are_refused() {
    type Change = fn(&mut CellSpec);
    let cases: [(&str, Change); 5] = [
        ("env.render_quality", |s| s.render_quality = "default"),
        ("replay.feature_cache", |s| s.feature_cache = false),
        // f16 against configs without the field (f32)
        ("replay.feature_cache", |s| s.feature_cache_dtype = Some("f16")),
        ("run.num_train_frames", |s| s.num_train_frames = 6000),
        ("env.episode_frames", |s| s.episode_frames = Some(250)),
    ];
    for (field, change) in cases {
        let mut specs = suite_specs();
        change(&mut specs[4]);
        let odd = specs[4].name();
        let suite = write_suite("report-mismatch", &specs);
        let out = suite.join("report");
        let res = run_report(&suite, &out, &[]);
        let stderr = text(&res.stderr);
        assert_eq!(res.status.code(), Some(2), "{field}: {stderr}");
        assert!(stderr.contains("cells differ in a setting that matters"), "{stderr}");
        assert!(
            stderr.contains(field) && stderr.contains(&odd),
            "{field}, {odd}: {stderr}"
        );
        assert!(stderr.contains("--allow-mismatch"), "{stderr}");
        assert!(!out.exists(), "{field}: something was written");

        let res = run_report(&suite, &out, &["--allow-mismatch"]);
        assert!(res.status.success(), "{field}: {}", text(&res.stderr));
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("## Settings that differ between cells"), "{md}");
        assert!(md.contains(&format!("- {field}: ")) && md.contains(&odd), "{md}");
        if field == "env.episode_frames" {
            assert!(
                md.contains("(action repeat 2; episode length cut at 250 frames / the task's own)"),
                "{md}"
            );
        }
    }
    // budgets that differ are each scored: a 6K cell counts at 6K, not at 10K
    let suite = write_suite("report-budgets", &{
        let mut specs = suite_specs();
        specs[4].num_train_frames = 6000;
        specs
    });
    let res = run_report(&suite, &suite.join("report"), &["--allow-mismatch"]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(suite.join("report/report.md")).unwrap();
    assert!(md.contains("## Scores at 6K frames (6000 frames)"), "{md}");
    assert!(md.contains("## Scores at 10K frames (10000 frames)"), "{md}");
    assert!(
        md.contains("| random | all (3) | 9 |") && md.contains("| random | all (3) | 8 |"),
        "{md}"
    );
}

/// A suite with nothing done yet still gets a report (the cells and their states), without
/// pictures; a done cell with a missing eval.csv is an error naming the file.
#[test]
fn partial_and_broken_suites() {
    let mut specs = suite_specs();
    for s in &mut specs {
        s.state = "running";
    }
    let suite = write_suite("report-none-done", &specs);
    let out = suite.join("report");
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("No cell is done yet"), "{md}");
    // No process holds these cells, so they are shown as interrupted, as `lfs suite status` does.
    assert!(
        md.contains("20 cells: 0 done, 0 running, 0 failed, 20 interrupted, 0 pending"),
        "{md}"
    );
    assert!(!out.join("learning_curves.png").exists());
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).unwrap(),
        "agent,encoder,task,seed,frame,episode_reward,hour\n"
    );

    let specs = suite_specs();
    let suite = write_suite("report-broken", &specs);
    let broken = suite.join("cells").join(specs[2].name()).join("eval.csv");
    std::fs::remove_file(&broken).unwrap();
    let out = suite.join("report");
    let res = run_report(&suite, &out, &[]);
    assert_eq!(res.status.code(), Some(2));
    assert!(
        text(&res.stderr).contains(broken.to_str().unwrap()),
        "{}",
        text(&res.stderr)
    );
    assert!(!out.exists());

    let res = run_report(&suite.join("nowhere"), &out, &[]);
    assert_eq!(res.status.code(), Some(2));
    assert!(
        text(&res.stderr).contains("not a benchmark-suite cells folder"),
        "{}",
        text(&res.stderr)
    );
}

/// With the suite's plan beside the cells (`suite.toml`, as `lfs suite run` writes it), cells
/// not started yet count as pending, and a `running` cell is running only while a process
/// holds its lock: the counts `lfs suite status` gives.
#[test]
fn progress_follows_the_suites_plan_and_the_cells_locks() {
    let suite = temp_dir("report-plan");
    std::fs::write(
        suite.join("suite.toml"),
        "name = \"plan\"\nscale = \"tiny\"\nsac_config = \"pipelines/sac/tiny.toml\"\n\
         num_train_frames = 10000\ntasks = [\"walker_stand\"]\nseeds = [1, 2, 3]\n\n\
         [[encoders]]\nname = \"random\"\nsource = \"random\"\n",
    )
    .unwrap();
    // Cells 0 and 1 have started (the names `lfs suite run` gives them); cell 2 has not.
    let spec = |seed| CellSpec {
        state: "running",
        ..CellSpec::done("random", "walker_stand", seed)
    };
    let held = write_cell(&suite, 0, &spec(1));
    let held = rename(&held, "000-random-walker_stand-s1");
    let orphan = write_cell(&suite, 1, &spec(2));
    rename(&orphan, "001-random-walker_stand-s2");
    let _lock = lfs::suite::cell::CellLock::acquire(&held)
        .unwrap()
        .expect("a free lock");
    let out = suite.join("report");
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("3 cells: 0 done, 1 running, 0 failed, 1 interrupted, 1 pending"),
        "{md}"
    );
    assert!(
        md.contains("| 000-random-walker_stand-s1 | random | walker_stand | 1 | running |"),
        "{md}"
    );
    assert!(
        md.contains("| 001-random-walker_stand-s2 | random | walker_stand | 2 | interrupted |"),
        "{md}"
    );
}

fn rename(dir: &Path, name: &str) -> PathBuf {
    let to = dir.parent().unwrap().join(name);
    std::fs::rename(dir, &to).unwrap();
    to
}

#[test]
fn n_per_update_is_averaged_between_evaluations() {
    use lfs::rl_loop::EvalRow;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aux.jsonl");
    // Updates at frames 600..=1400 step 200 with N = 0, 2, 4, 6, 8.
    let lines: Vec<String> = (0..5)
        .map(|i| {
            format!(
                "{{\"step\":{},\"train/frame\":{},\"pretrain/num_synthetic\":{}}}",
                i + 1,
                600 + 200 * i,
                2 * i
            )
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let row = |frame: u64| EvalRow {
        frame,
        step: frame / 2,
        episode: 0,
        episode_reward: 0.0,
        total_time: 0.0,
    };
    let evals = [row(0), row(700), row(1400)];
    // (0, 700]: frame 600 (N 0); (700, 1400]: 800, 1000, 1200, 1400 (N 2, 4, 6, 8); frame 0: none.
    let got = lfs::report::cells::read_selected(&path, &evals).unwrap();
    assert_eq!(got, vec![(700, 0.0), (1400, 5.0)]);
    // A line without N is named.
    std::fs::write(&path, "{\"step\":1,\"train/frame\":2}\n").unwrap();
    let err = lfs::report::cells::read_selected(&path, &evals)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("aux.jsonl") && err.contains("pretrain/num_synthetic"),
        "{err}"
    );
}

/// A pre-training log of 40 LNC updates with N = step mod 5 out of M = 64, D = 1 + step/100 and
/// the window 0.55·D–0.65·D; updates 31–34 appear twice, as a resumed run logs them, first with
/// N = 99 (the last line of an update counts).
///
/// With `probes`, the online probe's lines too, as `lfs pretrain` with `[probe] every_updates =
/// 10` writes them: after updates 0 (the initial encoder), 10, 20, 30 and, after the resume, 40;
/// state R² = 0.1 + update/100, reward R² = update/200, null (NaN) at update 0.
fn write_pretraining_log(dir: &Path, probes: bool) {
    let line = |step: u64, n: u64| {
        let d = 1.0 + step as f64 / 100.0;
        format!(
            "{{\"step\":{step},\"pretrain/task\":\"mixed\",\"pretrain/loss\":6.0,\"pretrain/num_synthetic\":{n},\
             \"pretrain/num_real\":{},\"pretrain/lnc_d\":{d},\"pretrain/clip_low\":{},\"pretrain/clip_high\":{}}}\n",
            64 - n,
            0.55 * d,
            0.65 * d
        )
    };
    let probe = |step: u64| {
        let state = 0.1 + step as f64 / 100.0;
        let reward = if step == 0 {
            serde_json::Value::Null
        } else {
            (step as f64 / 200.0).into()
        };
        let line = serde_json::json!({
            "step": step, "probe/state_r2": state, "probe/reward_r2": reward, "probe/seconds": 4.2,
            "probe/tasks": {"cartpole_swingup": {"state_r2": state, "reward_r2": reward}},
        });
        if probes && step.is_multiple_of(10) {
            format!("{line}\n")
        } else {
            String::new()
        }
    };
    let mut log = probe(0);
    for step in 1..=34 {
        log += &line(step, if step > 30 { 99 } else { step % 5 });
        log += &probe(step);
    }
    for step in 31..=40 {
        log += &line(step, step % 5);
        log += &probe(step);
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("metrics.jsonl"), log).unwrap();
}

/// N during pre-training: read from the log of the run an encoder row names, binned (numbers by
/// hand from the log above), tabulated and drawn; a row without a log (`random`) gets neither.
#[test]
fn lnc_during_pretraining_is_read_from_the_encoders_log() {
    let specs: Vec<CellSpec> = suite_specs().into_iter().filter(|s| s.state == "done").collect();
    let suite = write_suite("report-pretraining", &specs);
    let run_dir = suite.join("pretrain-run");
    write_pretraining_log(&run_dir, false);
    set_encoder_source(&suite, "lfs", &run_dir.join("encoder.safetensors"));

    let (batch, bins) = lfs::report::pretraining::read_log(&run_dir.join("metrics.jsonl"))
        .unwrap()
        .unwrap();
    assert_eq!(batch, 64);
    assert_eq!(bins.len(), 20, "40 updates in 20 bins of 2");
    // Updates 1–2: N = 1, 2; updates 31–32 (rewritten after the resume): N = 1, 2 again.
    for b in [&bins[0], &bins[15]] {
        assert_eq!((b.last - b.first), 1);
        assert!(
            (b.num_synthetic - 1.5).abs() < 1e-12 && (b.num_synthetic_std - 0.5).abs() < 1e-12,
            "{b:?}"
        );
    }
    assert_eq!((bins[15].first, bins[15].last), (31, 32));
    assert!((bins[15].lnc_d - 1.315).abs() < 1e-12, "{:?}", bins[15]);
    assert!((bins[15].clip_low - 0.55 * 1.315).abs() < 1e-12);

    let out = suite.join("report");
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## LNC during pre-training"), "{md}");
    assert!(md.contains("### lfs ("), "{md}");
    assert!(!md.contains("### random"), "{md}");
    // Updates 5–6: N = 0, 1; N / M = 0.5 / 64; D = 1.055.
    assert!(
        md.contains("| 5–6 | 0.50 ± 0.50 | 0.008 | 1.0550 | 0.5803–0.6858 | 6.0000 |"),
        "{md}"
    );
    assert!(md.contains("![N per pre-training update"), "{md}");
    for ext in ["png", "svg"] {
        assert!(out.join(format!("pretrain_selected.{ext}")).is_file());
    }
    // Its legend names only the encoders with a curve: lfs, not random.
    let svg = std::fs::read_to_string(out.join("pretrain_selected.svg")).unwrap();
    assert!(
        svg.contains(">\nlfs\n<") && !svg.contains(">\nrandom\n<"),
        "pretrain_selected.svg"
    );

    // One pre-training run per seed (a source with `{seed}`): every run's table, the picture
    // drawing the mean over the runs and saying so.
    let second = suite.join("pretrain-run-s2");
    write_pretraining_log(&second, false);
    for entry in std::fs::read_dir(suite.join("cells")).unwrap() {
        let path = entry.unwrap().path().join("cell.json");
        let mut cell: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if cell["encoder"] == "lfs" && cell["seed"] == 2 {
            cell["encoder_source"] = second.join("encoder.safetensors").to_str().unwrap().into();
            std::fs::write(&path, cell.to_string()).unwrap();
        }
    }
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let lnc = section(&md, "## LNC during pre-training");
    assert_eq!(lnc.matches("### lfs (").count(), 2, "{lnc}");
    let first = lnc.find(&run_dir.join("metrics.jsonl").display().to_string()).unwrap();
    let then = lnc.find(&second.join("metrics.jsonl").display().to_string()).unwrap();
    assert!(first < then, "{lnc}");
    let svg = std::fs::read_to_string(out.join("pretrain_selected.svg")).unwrap();
    assert!(
        svg.contains("the mean over its runs") && !svg.contains("one pre-training run:"),
        "pretrain_selected.svg"
    );
    std::fs::remove_dir_all(&second).unwrap();

    // A log that cannot be parsed is a note in the report, not a failed report.
    std::fs::write(run_dir.join("metrics.jsonl"), "{\"step\":1,\"pretrain/lnc_d\":1.0}\n").unwrap();
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("could not be read: line 1: no number `pretrain/num_synthetic`"),
        "{md}"
    );
    assert!(!md.contains("![N per pre-training update"), "{md}");
}

/// Points the cells of `encoder` at `source`, as `lfs suite` records an exported encoder.
fn set_encoder_source(suite: &Path, encoder: &str, source: &Path) {
    for entry in std::fs::read_dir(suite.join("cells")).unwrap() {
        let path = entry.unwrap().path().join("cell.json");
        let mut cell: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if cell["encoder"] == encoder {
            cell["encoder_source"] = source.to_str().unwrap().into();
            std::fs::write(&path, cell.to_string()).unwrap();
        }
    }
}

/// The text of report.md's section `title` (a heading: `## …`, `### …`), up to the next heading
/// of the same level.
fn section<'a>(md: &'a str, title: &str) -> &'a str {
    let marker = &title[..title.find(' ').map_or(0, |i| i + 1)];
    let start = md.find(title).unwrap_or_else(|| panic!("no {title} in {md}"));
    let rest = &md[start + title.len()..];
    let end = rest.find(&format!("\n{marker}")).unwrap_or(rest.len());
    &md[start..start + title.len() + end]
}

/// The online probe's lines in a pre-training log: tabulated and drawn beside the loss, while
/// N, its table and its picture stay exactly what they are without those lines; a probe line
/// that cannot be read is a note.
#[test]
fn online_probe_during_pretraining() {
    let specs: Vec<CellSpec> = suite_specs().into_iter().filter(|s| s.state == "done").collect();
    let suite = write_suite("report-online-probe", &specs);
    let run_dir = suite.join("pretrain-run");
    set_encoder_source(&suite, "lfs", &run_dir.join("encoder.safetensors"));
    let log = run_dir.join("metrics.jsonl");

    // without the probe's lines, then with them
    write_pretraining_log(&run_dir, false);
    let plain = lfs::report::pretraining::read_log(&log).unwrap();
    assert_eq!(lfs::report::pretrain_probe::read_log(&log).unwrap(), None);
    let out_plain = suite.join("report-plain");
    let res = run_report(&suite, &out_plain, &[]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    write_pretraining_log(&run_dir, true);
    assert_eq!(lfs::report::pretraining::read_log(&log).unwrap(), plain);
    let out = suite.join("report");
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "{}", text(&res.stderr));

    let probes = lfs::report::pretrain_probe::read_log(&log).unwrap().unwrap();
    let steps: Vec<u64> = probes.points.iter().map(|p| p.step).collect();
    assert_eq!(steps, [0, 10, 20, 30, 40]);
    assert!(probes.points[0].reward_r2.is_nan(), "null is an undefined R²");
    assert!((probes.points[4].state_r2 - 0.5).abs() < 1e-12);
    // the loss of the 40 updates in 20 bins of 2, the probe lines not among them
    assert_eq!(probes.loss.len(), 20);
    assert_eq!(probes.loss[0], (2, 6.0));

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let md_plain = std::fs::read_to_string(out_plain.join("report.md")).unwrap();
    let title = "## LNC during pre-training";
    assert_eq!(section(&md, title), section(&md_plain, title));
    for ext in ["png", "svg"] {
        let name = format!("pretrain_selected.{ext}");
        assert_eq!(
            std::fs::read(out.join(&name)).unwrap(),
            std::fs::read(out_plain.join(&name)).unwrap(),
            "{name}"
        );
    }
    assert!(!md_plain.contains("## Online probe during pre-training"), "{md_plain}");
    assert!(!out_plain.join("pretrain_probe.png").exists());

    let online = section(&md, "## Online probe during pre-training");
    assert!(online.contains("### lfs ("), "{online}");
    assert!(!online.contains("### random"), "{online}");
    assert!(online.contains("| update | state R² | reward R² |"), "{online}");
    assert!(online.contains("| 0 | 0.100 | – |"), "{online}");
    assert!(online.contains("| 30 | 0.400 | 0.150 |"), "{online}");
    assert!(online.contains("| 40 | 0.500 | 0.200 |"), "{online}");
    assert!(md.contains("](pretrain_probe.png)"), "{md}");
    let img = image::open(out.join("pretrain_probe.png")).unwrap().to_rgb8();
    assert!(img.pixels().any(|px| px.0 == [255, 127, 14]), "lfs's colour");
    let svg = std::fs::read_to_string(out.join("pretrain_probe.svg")).unwrap();
    assert!(svg.contains("state: held-out R²") && svg.contains("pre-training loss"));

    // a probe line without a number is a note; N is still reported
    let mut text_log = std::fs::read_to_string(&log).unwrap();
    let bad_line = text_log.lines().count() + 1;
    text_log += "{\"step\":50,\"probe/state_r2\":\"high\",\"probe/reward_r2\":0.1}\n";
    std::fs::write(&log, text_log).unwrap();
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("The online probe in the pre-training log of lfs")
            && md.contains(&format!(
                "could not be read: line {bad_line}: `probe/state_r2` is not a number"
            )),
        "{md}"
    );
    assert!(md.contains("![N per pre-training update"), "{md}");
    assert!(!md.contains("](pretrain_probe.png)"), "{md}");
}

/// A table of many probes shows 21 of them, evenly spaced, the first and the last among them.
#[test]
fn online_probe_table_is_thinned() {
    use lfs::report::pretrain_probe::{ProbeCurve, ProbeLog, ProbePoint, MAX_TABLE_ROWS};
    let points = (0..=100)
        .map(|k| ProbePoint {
            step: 500 * k,
            state_r2: 0.0,
            reward_r2: 0.0,
        })
        .collect();
    let curve = ProbeCurve {
        method: 0,
        log: PathBuf::from("metrics.jsonl"),
        probes: ProbeLog {
            points,
            loss: Vec::new(),
        },
    };
    let steps: Vec<u64> = curve.table_rows().iter().map(|p| p.step).collect();
    assert_eq!(steps.len(), MAX_TABLE_ROWS);
    assert_eq!((steps[0], steps[1], steps[20]), (0, 2500, 50_000));
}

/// See: a log of fewer updates than bins asked `BTreeMap::range` for bins past its last update,
/// which panics (start > end); such a log now gives one bin per update.
#[test]
fn pretraining_log_shorter_than_the_bins() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for step in 1..=3 {
        log += &format!(
            "{{\"step\":{step},\"pretrain/loss\":6.0,\"pretrain/num_synthetic\":{step},\"pretrain/num_real\":8,\
             \"pretrain/lnc_d\":1.0,\"pretrain/clip_low\":0.5,\"pretrain/clip_high\":0.7}}\n"
        );
    }
    log += "{\"step\":3,\"probe/state_r2\":0.5,\"probe/reward_r2\":0.25}\n";
    let path = dir.path().join("metrics.jsonl");
    std::fs::write(&path, log).unwrap();
    let (_, bins) = lfs::report::pretraining::read_log(&path).unwrap().unwrap();
    assert_eq!(bins.iter().map(|b| b.last).collect::<Vec<_>>(), [1, 2, 3]);
    let probes = lfs::report::pretrain_probe::read_log(&path).unwrap().unwrap();
    assert_eq!(probes.loss, [(1, 6.0), (2, 6.0), (3, 6.0)]);
}

/// Spearman's ρ and average ranks as scipy computes them (scipy 1.17.1):
///   rankdata([0.3, 0.1, 0.3, 0.2, 0.3])            -> [4, 1, 4, 2, 4]
///   spearmanr([0.3, 0.3, 0.9], [1, 2, 3])          -> 0.8660254037844387
///   spearmanr([1, 2, 2, 3, 5], [2, 1, 4, 4, 9])    -> 0.7631578947368421
/// to 1e-12; all ties on one side leave ρ undefined (scipy: nan).
#[test]
fn spearman_matches_scipy() {
    use lfs::report::probes::{average_ranks, spearman};
    assert_eq!(average_ranks(&[0.3, 0.1, 0.3, 0.2, 0.3]), [4.0, 1.0, 4.0, 2.0, 4.0]);
    assert!((spearman(&[0.3, 0.3, 0.9], &[1.0, 2.0, 3.0]) - 0.8660254037844387).abs() < 1e-12);
    assert!((spearman(&[1.0, 2.0, 2.0, 3.0, 5.0], &[2.0, 1.0, 4.0, 4.0, 9.0]) - 0.7631578947368421).abs() < 1e-12);
    assert_eq!(spearman(&[0.2, 0.5, 0.8], &[10.0, 20.0, 30.0]), 1.0);
    assert_eq!(spearman(&[0.6, 0.4, 0.2], &[10.0, 20.0, 30.0]), -1.0);
    assert!(spearman(&[0.5, 0.5, 0.5], &[1.0, 2.0, 3.0]).is_nan());
}

/// One task of a hand-written probe.json: state R² and reward R² as [point, low, high], `None`
/// for a null (NaN) reward R².
struct TaskProbe {
    task: &'static str,
    state: [f64; 3],
    reward: Option<[f64; 3]>,
}

fn probed(task: &'static str, state: [f64; 3], reward: Option<[f64; 3]>) -> TaskProbe {
    TaskProbe { task, state, reward }
}

/// A probe.json as `lfs probe` writes it, with fields the report does not read.
fn probe_json(source: &str, id: &str, tasks: &[TaskProbe]) -> String {
    let r2 = |v: Option<[f64; 3]>| {
        let mean = match v {
            Some([point, low, high]) => serde_json::json!({"point": point, "low": low, "high": high}),
            None => serde_json::json!({"point": null, "low": null, "high": null}),
        };
        serde_json::json!({"names": ["x"], "held_out": {"mean": mean, "per_dim": [mean], "num_rows": 90},
                           "fit": {"lambda": 1.0}})
    };
    let tasks: Vec<serde_json::Value> = tasks
        .iter()
        .map(|t| {
            serde_json::json!({"task": t.task, "train_episodes": 30, "test_episodes": 10,
                               "state": r2(Some(t.state)), "reward": r2(t.reward)})
        })
        .collect();
    serde_json::json!({
        "encoder": {"source": source, "id": id, "render_quality": "fast", "method": null, "step": null},
        "dataset": {"path": "runs/probe-set", "id": "d1", "render_quality": "fast"},
        "config": {}, "tasks": tasks, "lfs_version": "0.1.0", "seconds": 12.5,
    })
    .to_string()
}

/// Probes beside SAC returns: lfs's probe.json found beside its export, atc's and random's
/// named, each matched to its row by sha256 (random: by source, whatever the seed); returns
/// order random < atc < lfs on every task, and the probes are chosen so that ρ is known:
/// cartpole_swingup state R² in the same order (ρ = 1), reward R² reversed (ρ = −1);
/// walker_stand state R² 0.3, 0.3, 0.9 (a tie: ρ = √3/2 = 0.866), reward R² 0.1, 0.5, 0.3
/// (ρ = 0.5); finger_spin has only two probed rows (no ρ). Files that cannot be read, or
/// that probe no encoder of the suite, are notes.
#[test]
fn probes_beside_sac_returns() {
    let mut specs = Vec::new();
    for encoder in ["random", "atc", "lfs"] {
        for task in ["cartpole_swingup", "walker_stand", "finger_spin"] {
            for seed in 1..=2 {
                specs.push(CellSpec::done(encoder, task, seed));
            }
        }
    }
    let suite = write_suite("report-probes", &specs);
    let lfs_run = suite.join("lfs-run");
    std::fs::create_dir_all(&lfs_run).unwrap();
    set_encoder_source(&suite, "lfs", &lfs_run.join("encoder.safetensors"));
    let lfs_probe = lfs_run.join("probe.json");
    std::fs::write(
        &lfs_probe,
        probe_json(
            lfs_run.join("encoder.safetensors").to_str().unwrap(),
            &fake_sha256("lfs"),
            &[
                probed("cartpole_swingup", [0.8, 0.75, 0.85], Some([0.2, 0.1, 0.3])),
                probed("walker_stand", [0.9, 0.85, 0.95], Some([0.3, 0.2, 0.4])),
                probed("finger_spin", [0.5, 0.4, 0.6], Some([0.5, 0.4, 0.6])),
                probed("cheetah_run", [0.1, 0.0, 0.2], Some([0.1, 0.0, 0.2])), // not the suite's
                probed("not_a_task", [0.1, 0.0, 0.2], None),                   // nobody's
            ],
        ),
    )
    .unwrap();
    let probes = suite.join("probes");
    std::fs::create_dir_all(&probes).unwrap();
    let write = |name: &str, text: String| {
        let path = probes.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let atc = write(
        "atc.json",
        probe_json(
            "runs/atc/encoder.safetensors",
            &fake_sha256("atc"),
            &[
                probed("cartpole_swingup", [0.5, 0.45, 0.55], Some([0.4, 0.3, 0.5])),
                probed("walker_stand", [0.3, 0.25, 0.35], Some([0.5, 0.4, 0.6])),
                probed("finger_spin", [0.4, 0.35, 0.45], None),
            ],
        ),
    );
    let random = write(
        "random-7.json",
        probe_json(
            "random",
            "random:7",
            &[
                probed("cartpole_swingup", [0.2, 0.15, 0.25], Some([0.6, 0.5, 0.7])),
                probed("walker_stand", [0.3, 0.25, 0.35], Some([0.1, 0.0, 0.2])),
            ],
        ),
    );
    let broken = write("broken.json", "{not json".to_string());
    let no_tasks = write(
        "no-tasks.json",
        "{\"encoder\": {\"source\": \"random\", \"id\": \"random:1\"}}".into(),
    );
    let other = write(
        "other.json",
        probe_json("runs/other/encoder.safetensors", &"ff".repeat(32), &[]),
    );
    let out = suite.join("report");
    let named: [&str; 6] = [&atc, &random, &broken, &no_tasks, &other, lfs_probe.to_str().unwrap()];
    let args: Vec<&str> = named.iter().flat_map(|p| ["--probe", *p]).collect();
    let res = run_report(&suite, &out, &args);
    assert!(res.status.success(), "{}", text(&res.stderr));

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let probed = section(&md, "## Linear probes beside SAC returns");
    assert!(
        probed.contains("| encoder | task | SAC return at 10K | state R² [low, high] | reward R² [low, high] |"),
        "{probed}"
    );
    // the return is the one the table of returns shows: mean ± std over the 2 seeds at 10K
    let sac = |encoder: &str, task: &str| {
        let finals: Vec<f64> = specs
            .iter()
            .filter(|s| s.encoder == encoder && s.task == task)
            .map(|s| reward(s, 10_000))
            .collect();
        let mean = finals.iter().sum::<f64>() / 2.0;
        let std = (finals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        (mean, format!("{mean:.1} ± {std:.1} (2)"))
    };
    for row in [
        format!(
            "| lfs | cartpole_swingup | {} | 0.800 [0.750, 0.850] | 0.200 [0.100, 0.300] |",
            sac("lfs", "cartpole_swingup").1
        ),
        format!(
            "| atc | walker_stand | {} | 0.300 [0.250, 0.350] | 0.500 [0.400, 0.600] |",
            sac("atc", "walker_stand").1
        ),
        format!(
            "| atc | finger_spin | {} | 0.400 [0.350, 0.450] | – |",
            sac("atc", "finger_spin").1
        ),
        format!(
            "| random | cartpole_swingup | {} | 0.200 [0.150, 0.250] | 0.600 [0.500, 0.700] |",
            sac("random", "cartpole_swingup").1
        ),
    ] {
        assert!(probed.contains(&row), "no {row} in {probed}");
    }
    let returns = section(&md, "### Returns per task");
    assert!(returns.contains(&sac("lfs", "cartpole_swingup").1), "{returns}");
    assert!(
        !probed.contains("cheetah_run") && !probed.contains("not_a_task"),
        "{probed}"
    );
    assert!(!probed.contains("| random | finger_spin |"), "{probed}");
    assert!(probed.contains("the random encoder of seed 7 (`random:7`"), "{probed}");
    assert!(
        probed.contains(&format!("- lfs: `{}`", lfs_probe.display())),
        "{probed}"
    );
    // ρ per task, over the 3 encoders, with the caveat
    assert!(
        probed.contains("| cartpole_swingup | 1.000 (3 encoders) | -1.000 (3 encoders) |"),
        "{probed}"
    );
    assert!(
        probed.contains("| walker_stand | 0.866 (3 encoders) | 0.500 (3 encoders) |"),
        "{probed}"
    );
    assert!(
        !probed.contains("\n| finger_spin | "),
        "no ρ from two encoders: {probed}"
    );
    assert!(
        probed.contains("Each ρ is over only 3 encoders") && probed.contains("1/6 at n = 3"),
        "{probed}"
    );
    // the files not used, each named with why
    assert!(
        probed.contains(&format!("`{broken}` was not used: key must be a string")),
        "{probed}"
    );
    assert!(
        probed.contains(&format!("`{no_tasks}` was not used: no list `tasks`")),
        "{probed}"
    );
    assert!(
        probed.contains(&format!("`{other}` was not used: its encoder"))
            && probed.contains("none of the suite's encoder rows"),
        "{probed}"
    );

    // probe.csv: one line per row (lfs's file read once, though named and found), results.csv as ever
    let csv = std::fs::read_to_string(out.join("probe.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], lfs::report::probes::HEADER.join(","));
    assert_eq!(lines.len(), 1 + 3 + 3 + 2, "{csv}");
    let fields = |prefix: &str| -> Vec<String> {
        let line = lines
            .iter()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} in {csv}"));
        line.split(',').map(str::to_string).collect()
    };
    let f = fields("sac,lfs,cartpole_swingup,");
    assert_eq!(f[3], "10000");
    assert!(
        (f[4].parse::<f64>().unwrap() - sac("lfs", "cartpole_swingup").0).abs() < 1e-9,
        "{f:?}"
    );
    assert_eq!(f[6..13], ["2", "0.8", "0.75", "0.85", "0.2", "0.1", "0.3"]);
    assert_eq!(f[13], fake_sha256("lfs"));
    assert_eq!(f[14], lfs_probe.to_str().unwrap());
    let f = fields("sac,atc,finger_spin,");
    assert_eq!(f[10..13], ["", "", ""], "an undefined R² is empty");
    assert_eq!(fields("sac,random,walker_stand,")[13], "random:7");
    let rows = results_csv::rows(&cells::read_suite(&suite).unwrap());
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).unwrap(),
        results_csv::to_csv(&rows)
    );
}

/// A probe of an encoder regenerated elsewhere (same weights, another export's sha256) is not
/// taken for the row by id; `--probe ROW=FILE` binds it, and the report says so.
#[test]
fn probe_bound_to_a_row_by_name() {
    let mut specs = Vec::new();
    for encoder in ["random", "lfs"] {
        for seed in 1..=2 {
            specs.push(CellSpec::done(encoder, "cartpole_swingup", seed));
        }
    }
    let suite = write_suite("report-probe-bound", &specs);
    let file = suite.join("lfs-regenerated.json");
    std::fs::write(
        &file,
        probe_json(
            "runs/elsewhere/lfs/encoder.safetensors",
            &"ab".repeat(32),
            &[probed("cartpole_swingup", [0.7, 0.6, 0.8], Some([0.2, 0.1, 0.3]))],
        ),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    // by id: not the row's export, so a note and no row
    let out = suite.join("report-by-id");
    let res = run_report(&suite, &out, &["--probe", path]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let probes = section(&md, "## Linear probes beside SAC returns");
    assert!(probes.contains("is none of the suite's encoder rows"), "{probes}");
    assert!(!probes.contains("| lfs | cartpole_swingup |"), "{probes}");
    // bound by name: the row, and what the binding means
    let out = suite.join("report-bound");
    let bound = format!("lfs={path}");
    let res = run_report(&suite, &out, &["--probe", &bound]);
    assert!(res.status.success(), "{}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let probes = section(&md, "## Linear probes beside SAC returns");
    assert!(probes.contains("| lfs | cartpole_swingup |"), "{probes}");
    assert!(probes.contains("0.700 [0.600, 0.800]"), "{probes}");
    assert!(
        probes.contains("bound to the row `lfs` by `--probe lfs=FILE`"),
        "{probes}"
    );
    assert!(!probes.contains("none of the suite's encoder rows"), "{probes}");
}

/// Issue 33: with two tasks the median of the two task means is their mean, and the median
/// panel says so instead of leaving a reader to wonder why two panels are the same.
#[test]
fn with_two_tasks_the_median_panel_says_it_is_the_mean() {
    use lfs::report::aggregate::Estimate;
    use lfs::report::scores::{AggregateRow, TaskSet};
    let estimate = Estimate {
        point: 0.5,
        lower: 0.4,
        upper: 0.6,
    };
    let row = |method: &str, num_tasks| AggregateRow {
        method: method.into(),
        set: TaskSet::All,
        estimates: vec![estimate; 4],
        num_runs: 3 * num_tasks,
        num_tasks,
    };
    let methods = vec!["random".to_string(), "lfs".to_string()];
    let svg = |n| {
        lfs::report::plots::aggregate_bars(&[row("random", n), row("lfs", n)], &methods, &[])
            .unwrap()
            .svg
    };
    assert!(svg(2).contains("median (= mean: 2 tasks)"));
    assert!(svg(1).contains("median (= mean: 1 task)"));
    assert!(svg(3).contains(">\nmedian\n<") && !svg(3).contains("= mean"));
}

/// A suite with DrQ-v2 cells: the report sets DrQ-v2's published curves (the shipped rows of
/// facebookresearch/drqv2's curves, read here independently) beside them, up to the frames the
/// suite reached, in a table and in the learning curves; a suite without DrQ-v2 shows none.
#[test]
fn drqv2_cells_are_drawn_beside_drqv2s_published_curves() {
    let mut specs = Vec::new();
    for seed in 1..=2 {
        specs.push(CellSpec {
            num_train_frames: 40_000,
            feature_cache: false,
            agent_kind: Some("drqv2"),
            ..CellSpec::done("drqv2", "cartpole_swingup", seed)
        });
    }
    let suite = write_suite("report-drqv2", &specs);
    let out = suite.join("report");
    let res = run_report(&suite, &out, &[]);
    assert!(res.status.success(), "lfs report failed: {}", text(&res.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let table = section(&md, "## DrQ-v2 beside its published curves");
    // The simulator difference is stated beside the comparison, the replay sampling in the scale.
    assert!(
        table.contains("MuJoCo 2.0") && table.contains("mujoco 3.17.0"),
        "{table}"
    );
    assert!(md.contains("(sampling uniform)"), "{md}");
    // The published rows of cartpole_swingup, by frame, from the shipped file.
    let csv = std::fs::read_to_string(crate::common::repo().join("eval/reference/drqv2_published.csv")).unwrap();
    let mut published: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
    for line in csv.lines().skip(1).filter(|l| l.starts_with("cartpole_swingup,")) {
        let f: Vec<&str> = line.split(',').collect();
        published
            .entry(f[2].parse().unwrap())
            .or_default()
            .push(f[3].parse().unwrap());
    }
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| cartpole_swingup |"))
        .collect();
    assert_eq!(rows.len(), 3, "frames 0, 20K, 40K only (the suite's reach): {table}");
    for (row, frame) in rows.iter().zip([0u64, 20_000, 40_000]) {
        let xs = &published[&frame];
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let ours: Vec<f64> = specs.iter().map(|s| reward(s, frame)).collect();
        let ours_mean = ours.iter().sum::<f64>() / 2.0;
        assert!(row.contains(&format!("{mean:.1} [")), "{row}: published mean {mean:.1}");
        assert!(row.contains(&format!("({})", xs.len())), "{row}");
        assert!(row.contains(&format!("{ours_mean:.1} [")), "{row}: ours {ours_mean:.1}");
    }
    let svg = std::fs::read_to_string(out.join("learning_curves.svg")).unwrap();
    assert!(
        svg.contains("DrQ-v2, published"),
        "no published curve in the learning curves"
    );
    // A suite of SAC cells has neither.
    let suite = write_suite("report-no-drqv2", &[CellSpec::done("random", "cartpole_swingup", 1)]);
    let out = suite.join("report");
    assert!(run_report(&suite, &out, &[]).status.success());
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(!md.contains("DrQ-v2 beside its published curves"));
    assert!(!std::fs::read_to_string(out.join("learning_curves.svg"))
        .unwrap()
        .contains("DrQ-v2, published"));
}

/// The difference of two methods' IQMs and means with its interval, against rliable's pair
/// bootstrap with `func = lambda x, y: agg(x) - agg(y)` (the fixture): the point to rounding,
/// the bounds within 0.01 (rliable's own move by less than 0.005 between NumPy seeds).
#[test]
fn difference_of_aggregates_matches_rliable() {
    let fx = &rliable_fixture()["difference"];
    let table = |key: &str| {
        let rows: Vec<Vec<f64>> = serde_json::from_value(fx[key].clone()).unwrap();
        ScoreTable::from_runs_by_task(&rows)
    };
    let (x, y) = (table("x"), table("y"));
    for (name, agg) in [("iqm", aggregate::Aggregate::Iqm), ("mean", aggregate::Aggregate::Mean)] {
        let est = aggregate::difference_estimate(&x, &y, agg, &BootstrapConfig::default());
        let point = fx[name]["point"].as_f64().unwrap();
        assert!(
            (est.point - point).abs() < 1e-12,
            "{name}: {} vs rliable {point}",
            est.point
        );
        for (i, ours) in [est.lower, est.upper].into_iter().enumerate() {
            let theirs = fx[name]["interval_seed0"][i].as_f64().unwrap();
            assert!(fx[name]["interval_spread_over_5_seeds"][i].as_f64().unwrap() < 0.005);
            assert!(
                (ours - theirs).abs() < 0.01,
                "{name} bound {i}: {ours} vs rliable {theirs}"
            );
        }
    }
}

/// `lfs report`'s "Pre-registered primary comparison" section for a suite of done cells
/// (`encoders` × `tasks` × seeds 1..=`seeds`, but `skip`) declaring `[primary]` as `primary`;
/// the error it printed when it refused.
fn primary_section(
    label: &str,
    encoders: &[&'static str],
    tasks: &[&'static str],
    seeds: u64,
    primary: &str,
    skip: Option<(&str, &str, u64)>,
) -> String {
    let suite = temp_dir(&format!("report-primary-{label}"));
    let rows: String = encoders
        .iter()
        .map(|e| format!("[[encoders]]\nname = \"{e}\"\nsource = \"random\"\n\n"))
        .collect();
    let seed_list: Vec<u64> = (1..=seeds).collect();
    std::fs::write(
        suite.join("suite.toml"),
        format!(
            "name = \"primary\"\nscale = \"tiny\"\nsac_config = \"pipelines/sac/tiny.toml\"\n\
             num_train_frames = 10000\ntasks = {tasks:?}\nseeds = {seed_list:?}\n\n{rows}[primary]\n{primary}\n"
        ),
    )
    .unwrap();
    let mut index = 0;
    for &encoder in encoders {
        for &task in tasks {
            for &seed in &seed_list {
                if skip == Some((encoder, task, seed)) {
                    continue;
                }
                let dir = write_cell(&suite, index, &CellSpec::done(encoder, task, seed));
                rename(&dir, &format!("{index:03}-{encoder}-{task}-s{seed}"));
                index += 1;
            }
        }
    }
    let out = suite.join("report");
    let res = run_report(&suite, &out, &[]);
    if !res.status.success() {
        return text(&res.stderr);
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    section(&md, "## Pre-registered primary comparison").to_string()
}

/// A suite file's `[primary]` declaration is decided by `lfs report` itself, at the suite's
/// budget, by the declared rule: clear wins either way, an exact tie is no difference, and a
/// declaration naming a method the suite does not have is refused with the file named.
#[test]
fn the_declared_primary_comparison_is_decided_in_the_report() {
    let tasks = ["cartpole_swingup", "walker_stand", "finger_spin"];
    // `reward` above: random at 200, atc at 350, lfs and curl at 500 with the same noise.
    let encoders = ["random", "atc", "lfs", "curl"];
    let verdict = |a: &str, b: &str, aggregate: &str| -> String {
        let primary = format!("a = \"{a}\"\nb = \"{b}\"\naggregate = \"{aggregate}\"");
        primary_section(&format!("{a}-{b}-{aggregate}"), &encoders, &tasks, 3, &primary, None)
    };
    let lfs_random = verdict("lfs", "random", "iqm");
    assert!(
        lfs_random.contains("**Verdict: lfs is better than random at this scale.**"),
        "{lfs_random}"
    );
    assert!(
        lfs_random.contains("(9 and 9 runs; tasks: cartpole_swingup, walker_stand, finger_spin)"),
        "{lfs_random}"
    );
    let random_atc = verdict("random", "atc", "mean");
    assert!(
        random_atc.contains("**Verdict: atc is better than random at this scale.**"),
        "{random_atc}"
    );
    assert!(
        random_atc.contains("the difference of the mean of expert-normalised scores at 10000 frames"),
        "{random_atc}"
    );
    let tie = verdict("lfs", "curl", "median");
    assert!(tie.contains("lfs − curl = +0.000 ["), "{tie}");
    assert!(
        tie.contains("**Verdict: no difference between lfs and curl detected at this scale.**"),
        "{tie}"
    );
    let unknown = verdict("lfs", "byol", "iqm");
    assert!(
        unknown.contains("suite.toml") && unknown.contains("primary: \"byol\" is not an encoder row"),
        "{unknown}"
    );
}

fn seed_fixture() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/seed_permutation_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The primary comparison with seeds as units against an independent NumPy/itertools
/// transcription (tests/fixtures/report/seed_permutation_reference.py): the difference to
/// rounding, the exact permutation p-value and its number of splits exactly, the unit
/// bootstrap's interval to within its Monte Carlo error; the sampled test (more splits than it
/// enumerates) near the exact p.
#[test]
fn seed_unit_comparison_matches_the_reference() {
    use lfs::report::seed_units::{self, SeedUnit};
    let fx = seed_fixture();
    let units = |case: &serde_json::Value, key: &str| -> Vec<SeedUnit> {
        let rows: Vec<Vec<f64>> = serde_json::from_value(case[key].clone()).unwrap();
        rows.into_iter()
            .enumerate()
            .map(|(i, scores)| SeedUnit {
                seed: i as u64 + 1,
                scores,
            })
            .collect()
    };
    for case in ["six_by_two", "clear_five_by_two", "four_vs_three_by_three"] {
        let (a, b) = (units(&fx[case], "a"), units(&fx[case], "b"));
        for (name, agg) in [("iqm", Aggregate::Iqm), ("mean", Aggregate::Mean)] {
            let reference = &fx[case][name];
            let point = reference["point"].as_f64().unwrap();
            let d = seed_units::difference(&a, &b, agg);
            assert!((d - point).abs() < 1e-12, "{case} {name}: {d} vs {point}");
            let test = seed_units::permutation_test(&a, &b, agg, seed_units::MAX_EXACT_SPLITS, 0);
            assert!(test.exact);
            assert_eq!(test.splits, reference["splits"].as_u64().unwrap(), "{case} {name}");
            let p = reference["p_value"].as_f64().unwrap();
            let smallest = reference["smallest_p"].as_f64().unwrap();
            assert!(
                (test.smallest_p.unwrap() - smallest).abs() < 1e-12 && smallest <= p,
                "{case} {name}: smallest p {:?} vs {smallest}",
                test.smallest_p
            );
            assert!(
                (test.p_value - p).abs() < 1e-12,
                "{case} {name}: p {} vs {p}",
                test.p_value
            );
            let est = seed_units::unit_bootstrap(&a, &b, agg, &BootstrapConfig::default());
            assert!((est.point - point).abs() < 1e-12);
            for (i, ours) in [est.lower, est.upper].into_iter().enumerate() {
                let theirs = reference["interval_seed0"][i].as_f64().unwrap();
                // A handful of units make a lumpy bootstrap: its bounds move up to ~0.005.
                assert!(reference["interval_spread_over_5_seeds"][i].as_f64().unwrap() < 0.006);
                assert!(
                    (ours - theirs).abs() < 0.01,
                    "{case} {name} bound {i}: {ours} vs {theirs}"
                );
            }
            // Sampled instead of enumerated: 200,000 splits put p within ~0.001 of the exact one.
            let sampled = seed_units::permutation_test(&a, &b, agg, 10, 3);
            assert!(!sampled.exact && sampled.smallest_p.is_none());
            assert!(
                (sampled.p_value - p).abs() < 0.005,
                "{case} {name}: sampled p {} vs {p}",
                sampled.p_value
            );
        }
    }
    // The clear case is decided at 0.05, the others are not: the test can fail both ways.
    let clear = seed_fixture()["clear_five_by_two"]["iqm"]["p_value"].as_f64().unwrap();
    assert!(clear <= 0.05 && fx["six_by_two"]["iqm"]["p_value"].as_f64().unwrap() > 0.05);
}

/// `[primary] unit = "seed"` end to end: with 3 seeds per method even a complete separation
/// cannot reach p ≤ 0.05 (2 of the 20 splits are as extreme), with 4 it does (2 of 70); a seed
/// that misses a task is left out and named; a declaration with a confidence outside (0, 1), an
/// unknown unit or a = b is refused, naming the file.
#[test]
fn the_primary_comparison_with_seeds_as_units() {
    let tasks = ["cartpole_swingup", "walker_stand"];
    let encoders = ["random", "lfs"];
    let report = |label: &str, seeds: u64, primary: &str, skip: Option<(&str, &str, u64)>| -> String {
        primary_section(&format!("seeds-{label}"), &encoders, &tasks, seeds, primary, skip)
    };
    let declared = "a = \"lfs\"\nb = \"random\"\naggregate = \"iqm\"\nunit = \"seed\"";
    let three = report("three", 3, declared, None);
    assert!(
        three.contains("p = 0.1000 (all 20 splits of the 3 + 3 seeds"),
        "{three}"
    );
    assert!(
        three.contains("**Verdict: no difference between lfs and random detected at this scale.**"),
        "{three}"
    );
    // The two arms are wholly apart already: no order of these scores gives less than 2 / 20.
    assert!(
        three.contains(
            "These seeds could not have decided it: however their scores had fallen between the two \
             methods, the p would be at least 0.1000, above 0.05."
        ),
        "{three}"
    );
    let four = report("four", 4, declared, None);
    assert!(four.contains("p = 0.0286 (all 70 splits of the 4 + 4 seeds"), "{four}");
    assert!(four.contains("exact two-sided permutation test"), "{four}");
    assert!(
        four.contains("**Verdict: lfs is better than random at this scale.**")
            && !four.contains("could not have decided"),
        "{four}"
    );
    let gap = report("gap", 4, declared, Some(("lfs", "walker_stand", 2)));
    assert!(gap.contains("lfs: seeds 1, 3, 4; random: seeds 1, 2, 3, 4"), "{gap}");
    assert!(gap.contains("Left out of lfs: seeds 2"), "{gap}");
    assert!(
        gap.contains("(6 and 8 runs; tasks: cartpole_swingup, walker_stand)"),
        "{gap}"
    );
    assert!(
        gap.contains("splits of the 3 + 4 seeds") && gap.contains("(all 35 splits"),
        "{gap}"
    );
    let level = report("level", 4, &format!("{declared}\nconfidence = 1.5"), None);
    assert!(
        level.contains("suite.toml") && level.contains("primary: confidence = 1.5 must be between 0 and 1"),
        "{level}"
    );
    let unit = report(
        "unit",
        4,
        "a = \"lfs\"\nb = \"random\"\naggregate = \"iqm\"\nunit = \"cell\"",
        None,
    );
    assert!(
        unit.contains("suite.toml") && unit.contains("unknown variant `cell`"),
        "{unit}"
    );
    let same = report("same", 4, "a = \"lfs\"\nb = \"lfs\"\naggregate = \"iqm\"", None);
    assert!(
        same.contains("suite.toml") && same.contains("primary: a and b are both \"lfs\""),
        "{same}"
    );
}

/// `[primary] b = [...]`: `a` against each method, one family decided on Holm's step-down
/// p-values. Rewards: random 200, atc 350, lfs and curl 500 with the same noise. With 4 seeds
/// a complete separation has p = 2/70 = 0.0286 on its own, decided alone, but Holm's smallest
/// multiplier (3) makes it 0.0857 in a family of three: nothing is decided. With 5 seeds, p =
/// 2/252 = 0.0079, adjusted 0.0238 (×3, then ×2 made non-decreasing) for both separated
/// methods, while the tie with curl stays p = 1. A family needs seeds as units.
#[test]
fn a_family_of_primary_comparisons_is_decided_by_holms_step_down() {
    let tasks = ["cartpole_swingup", "walker_stand"];
    let encoders = ["random", "atc", "lfs", "curl"];
    let family = "a = \"lfs\"\nb = [\"random\", \"curl\", \"atc\"]\naggregate = \"iqm\"\nunit = \"seed\"";
    let four = primary_section("family-four", &encoders, &tasks, 4, family, None);
    assert!(
        four.contains("**lfs − random** and **lfs − curl** and **lfs − atc**") && four.contains("Holm step-down"),
        "{four}"
    );
    assert!(four.contains("### lfs − random\n\np = 0.0286 (all 70 splits"), "{four}");
    assert_eq!(four.matches("Holm-adjusted p = 0.0857.").count(), 2, "{four}");
    assert!(four.contains("Holm-adjusted p = 1.0000."), "{four}");
    assert_eq!(
        four.matches("**Verdict: no difference between lfs and").count(),
        3,
        "{four}"
    );
    // Holm's first step multiplies the family's smallest p (at best 2 / 70) by 3: whatever the
    // scores' order, nothing in this family could have been decided, the tie with curl included.
    assert_eq!(
        four.matches("the Holm-adjusted p would be at least 0.0857, above 0.05.")
            .count(),
        3,
        "{four}"
    );
    let alone = primary_section(
        "family-alone",
        &encoders,
        &tasks,
        4,
        "a = \"lfs\"\nb = [\"random\"]\naggregate = \"iqm\"\nunit = \"seed\"",
        None,
    );
    assert!(
        alone.contains("**Verdict: lfs is better than random at this scale.**") && !alone.contains("Holm"),
        "{alone}"
    );
    let five = primary_section("family-five", &encoders, &tasks, 5, family, None);
    assert!(
        five.contains("p = 0.0079 (all 252 splits") && !five.contains("could not have decided"),
        "{five}"
    );
    assert_eq!(five.matches("Holm-adjusted p = 0.0238.").count(), 2, "{five}");
    assert!(
        five.contains("**Verdict: lfs is better than random at this scale.**"),
        "{five}"
    );
    assert!(
        five.contains("**Verdict: lfs is better than atc at this scale.**"),
        "{five}"
    );
    assert!(
        five.contains("**Verdict: no difference between lfs and curl detected at this scale.**"),
        "{five}"
    );
    let runs = primary_section(
        "family-runs",
        &encoders,
        &tasks,
        4,
        "a = \"lfs\"\nb = [\"random\", \"atc\"]\naggregate = \"iqm\"",
        None,
    );
    assert!(
        runs.contains("suite.toml") && runs.contains("it needs unit = \"seed\""),
        "{runs}"
    );
}

/// Study 4's committed verdicts follow from its committed cells: `lfs report` on a suite folder
/// made of `eval/suites/study-4.toml` and `results/study-4/cells/` (all of them, and without lfs's
/// seed 6, the plan's other reading) writes the primary section committed in `report/` and
/// `report-lfs-seeds-1-5/`, and each exact p equals one counted here, independently, from the
/// cells' `eval.csv` (the IQM as rliable's `trim_mean(x, 0.25)`: the mean of the middle scores
/// once ⌊n/4⌋ are cut from each end; the normalisation divides both arms alike, so p is the
/// same on returns). A change of `lfs report`'s wording here means rewriting both folders
/// (`eval/study/study4_report.sh`) and saying so in `results/study-4/README.md`.
#[test]
fn study_4s_committed_verdicts_follow_from_its_committed_cells() {
    let root = repo();
    let committed = root.join("results/study-4/cells");
    // A cell's score: its evaluation return at 100,000 frames (its last `eval.csv` row there).
    let score = |cell: &str| -> f64 {
        let csv = std::fs::read_to_string(committed.join(cell).join("eval.csv")).unwrap();
        let row = csv
            .lines()
            .rev()
            .find(|l| l.starts_with("100000,"))
            .unwrap_or_else(|| panic!("{cell}: no 100000 row"));
        row.split(',').nth(3).unwrap().parse().unwrap()
    };
    let iqm = |xs: &[f64]| -> f64 {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let cut = v.len() / 4;
        let middle = &v[cut..v.len() - cut];
        middle.iter().sum::<f64>() / middle.len() as f64
    };
    // Exact two-sided permutation p of the IQM difference: every split of the pooled scores into
    // arms of the observed sizes, counted when at least as extreme as the observed difference.
    let permutation_p = |a: &[f64], b: &[f64]| -> (f64, usize) {
        let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
        let observed = (iqm(a) - iqm(b)).abs();
        let (mut extreme, mut splits) = (0usize, 0usize);
        for mask in 0u32..(1 << pooled.len()) {
            if mask.count_ones() as usize != a.len() {
                continue;
            }
            let (mut x, mut y) = (Vec::new(), Vec::new());
            for (i, &s) in pooled.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    x.push(s)
                } else {
                    y.push(s)
                }
            }
            splits += 1;
            if (iqm(&x) - iqm(&y)).abs() >= observed - 1e-9 {
                extreme += 1;
            }
        }
        (extreme as f64 / splits as f64, splits)
    };

    let mut names: Vec<String> = std::fs::read_dir(&committed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 16, "study 4 ended with 16 cells: {names:?}");
    for (label, left_out, folder) in [
        ("all", None, "report"),
        (
            "lfs-seeds-1-5",
            Some("005-lfs-cartpole_swingup-s6"),
            "report-lfs-seeds-1-5",
        ),
    ] {
        let suite = temp_dir(&format!("report-study-4-{label}"));
        std::fs::copy(root.join("eval/suites/study-4.toml"), suite.join("suite.toml")).unwrap();
        let kept: Vec<&String> = names.iter().filter(|n| Some(n.as_str()) != left_out).collect();
        for name in &kept {
            let to = suite.join("cells").join(name);
            std::fs::create_dir_all(&to).unwrap();
            for file in std::fs::read_dir(committed.join(name)).unwrap() {
                let file = file.unwrap().path();
                std::fs::copy(&file, to.join(file.file_name().unwrap())).unwrap();
            }
        }
        // The default bootstrap (50000 replications, as the driver ran it), not run_report's 2000.
        let out = suite.join("report");
        let res = lfs(&["report", suite.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert!(res.status.success(), "{}", text(&res.stderr));
        let ours = std::fs::read_to_string(out.join("report.md")).unwrap();
        let theirs = std::fs::read_to_string(root.join("results/study-4").join(folder).join("report.md")).unwrap();
        let primary = section(&ours, "## Pre-registered primary comparison");
        assert_eq!(
            primary,
            section(&theirs, "## Pre-registered primary comparison"),
            "{folder}"
        );

        let arm = |method: &str| -> Vec<f64> {
            kept.iter()
                .filter(|n| n.contains(&format!("-{method}-")))
                .map(|n| score(n))
                .collect()
        };
        let lfs_scores = arm("lfs");
        for other in ["random", "atc"] {
            let other_scores = arm(other);
            let (p, splits) = permutation_p(&lfs_scores, &other_scores);
            let line = format!(
                "p = {p:.4} (all {splits} splits of the {} + {} seeds",
                lfs_scores.len(),
                other_scores.len()
            );
            let comparison = section(primary, &format!("### lfs − {other}"));
            assert!(comparison.contains(&line), "{folder}: want {line:?} in\n{comparison}");
        }
    }
}

/// `eval/study/study4_report.sh` refuses, with the reason and exit 2, before it writes anything:
/// too few arguments, a cell to leave out that is not committed, and an OUT that exists but holds
/// no report.md (it would be replaced: `results/study-4` itself, say), which stays as it was.
#[test]
fn study4_report_script_refuses_bad_arguments() {
    let run = |args: &[&str]| -> (Option<i32>, String) {
        let out = Command::new("bash")
            .arg("eval/study/study4_report.sh")
            .args(args)
            .current_dir(repo())
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    };
    let lfs_bin = env!("CARGO_BIN_EXE_lfs");
    let dir = temp_dir("study4-report-script");
    let new_out = dir.join("report");
    let new_out = new_out.to_str().unwrap();

    let (code, err) = run(&[lfs_bin]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("usage:"), "{err}");

    let (code, err) = run(&[lfs_bin, new_out, "999-lfs-cartpole_swingup-s9"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("results/study-4/cells/999-lfs-cartpole_swingup-s9 is no committed cell"),
        "{err}"
    );
    assert!(!dir.join("report").exists());

    let kept = dir.join("not-a-report");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::write(kept.join("notes.txt"), "mine").unwrap();
    let (code, err) = run(&[lfs_bin, kept.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("{} exists and holds no report.md", kept.display())),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(kept.join("notes.txt")).unwrap(), "mine");
}

/// Study 2's secondary comparisons (eval/study/probe_runs.py) against the report's permutation
/// test: on probe reports of made-up scores, each comparison's exact p equals
/// `seed_units::permutation_test` on the same runs (one unit per run, its nine-task mean as
/// its one score, the mean as the aggregate), and the decisions follow Holm's step-down.
#[test]
fn probe_runs_script_agrees_with_the_permutation_test() {
    use lfs::report::seed_units::{self, SeedUnit};
    let dir = tempfile::tempdir().unwrap();
    let tasks = ["cartpole_swingup", "walker_walk"];
    // Per method, per run: the state R² of each task. lfs is clearly above random, near atc.
    let methods: [(&str, &[[f64; 2]]); 3] = [
        (
            "lfs",
            &[[0.50, 0.56], [0.52, 0.55], [0.49, 0.58], [0.51, 0.57], [0.50, 0.57]],
        ),
        (
            "random",
            &[[0.36, 0.47], [0.35, 0.48], [0.37, 0.46], [0.34, 0.47], [0.36, 0.46]],
        ),
        ("atc", &[[0.55, 0.55], [0.50, 0.56]]),
    ];
    let mut units = std::collections::BTreeMap::new();
    for (method, runs) in methods {
        for (i, r2) in runs.iter().enumerate() {
            let report = serde_json::json!({
                "tasks": tasks.iter().zip(r2).map(|(t, x)| serde_json::json!({
                    "task": t, "state": {"held_out": {"mean": {"point": x}}}
                })).collect::<Vec<_>>()
            });
            std::fs::write(dir.path().join(format!("{method}-s{}.json", i + 1)), report.to_string()).unwrap();
            let unit = SeedUnit {
                seed: i as u64 + 1,
                scores: vec![(r2[0] + r2[1]) / 2.0],
            };
            units.entry(method).or_insert_with(Vec::new).push(unit);
        }
    }
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/study/probe_runs.py"))
        .arg(dir.path())
        .output()
        .unwrap();
    let md = text(&out.stdout);
    assert!(out.status.success(), "{md}{}", text(&out.stderr));
    let p = |other: &str| seed_units::permutation_test(&units["lfs"], &units[other], Aggregate::Mean, u64::MAX, 0);
    let (random, atc) = (p("random"), p("atc"));
    // 5 + 5 runs: 252 splits, complete separation is 2 of them; 5 + 2 runs: 21 splits.
    assert_eq!((random.splits, atc.splits), (252, 21));
    assert!((random.p_value - 2.0 / 252.0).abs() < 1e-12, "{}", random.p_value);
    // Holm over two: the smaller p doubled, the larger kept (but never below the first).
    let holm_random = (2.0 * random.p_value).min(1.0);
    let holm_atc = atc.p_value.max(holm_random);
    let row = |other: &str, p: f64, splits: u64, adjusted: f64, decision: &str| {
        let line = md
            .lines()
            .find(|l| l.starts_with(&format!("| lfs − {other} |")))
            .unwrap();
        assert!(
            line.contains(&format!("| {p:.4} | {splits} | {adjusted:.4} | **{decision}** |")),
            "{line}\n{md}"
        );
    };
    row("random", random.p_value, 252, holm_random, "lfs better");
    row("atc", atc.p_value, 21, holm_atc, "no difference detected");
    assert!(md.contains("| random | 5 (1, 2, 3, 4, 5) |"), "{md}");
}

/// Study 2's descriptive table (eval/study/probe_vs_sac.py): on made-up probes and returns, with
/// ties on both sides, its Spearman's ρ per task equal the report's `spearman` on the same runs,
/// with the probe score (the nine-task mean) and with the task's own R²; a seed with SAC cells
/// but no probe, or with a probe but not every task's return, is refused by name.
#[test]
fn probe_vs_sac_script_agrees_with_the_reports_spearman() {
    use lfs::report::probes::spearman;
    let dir = tempfile::tempdir().unwrap();
    let probes = dir.path().join("probe");
    std::fs::create_dir(&probes).unwrap();
    let tasks = ["ball_in_cup_catch", "cartpole_swingup", "walker_walk"];
    // Per seed: the state R² of each probe task, and the return on the two SAC tasks. The R²
    // are binary fractions, so that the scores' ties are ties in both languages' arithmetic.
    let runs: [([f64; 3], [f64; 2]); 5] = [
        ([0.75, 0.5, 0.25], [0.0, 250.0]),
        ([0.5, 0.625, 0.375], [200.0, 90.0]),
        ([0.625, 0.375, 0.25], [0.0, 150.0]),
        ([0.5, 0.5, 0.5], [197.4, 150.0]),
        ([0.875, 0.25, 0.125], [0.0, 170.0]),
    ];
    let mut csv = String::from("agent,encoder,task,seed,frame,episode_reward,hour\n");
    for (i, (r2, ret)) in runs.iter().enumerate() {
        let seed = i + 1;
        let report = serde_json::json!({
            "tasks": tasks.iter().zip(r2).map(|(t, x)| serde_json::json!({
                "task": t, "state": {"held_out": {"mean": {"point": x}}}
            })).collect::<Vec<_>>()
        });
        std::fs::write(probes.join(format!("lfs-s{seed}.json")), report.to_string()).unwrap();
        for (t, r) in tasks[..2].iter().zip(ret) {
            // An earlier evaluation, which the script must not read, and the last one.
            csv += &format!(
                "sac,lfs,{t},{seed},0,{},0.0\nsac,lfs,{t},{seed},20000,{r},0.5\n",
                r + 1000.0
            );
            csv += &format!("sac,random,{t},{seed},20000,{},0.5\n", 999.0 - r);
        }
    }
    let results = dir.path().join("results.csv");
    std::fs::write(&results, &csv).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/study/probe_vs_sac.py");
    let run = || {
        Command::new("python3")
            .arg(&script)
            .arg(&probes)
            .arg(&results)
            .output()
            .unwrap()
    };
    let out = run();
    let md = text(&out.stdout);
    assert!(out.status.success(), "{md}{}", text(&out.stderr));
    let score: Vec<f64> = runs.iter().map(|(r2, _)| r2.iter().sum::<f64>() / 3.0).collect();
    for (k, task) in tasks[..2].iter().enumerate() {
        let ret: Vec<f64> = runs.iter().map(|(_, ret)| ret[k]).collect();
        let own: Vec<f64> = runs.iter().map(|(r2, _)| r2[k]).collect();
        let row = format!(
            "| {task} | {:+.2} | {:+.2} |",
            spearman(&score, &ret),
            spearman(&own, &ret)
        );
        assert!(md.contains(&row), "{row}\n{md}");
    }
    assert!(md.contains("| lfs-s5 | 0.417 | 0.875, 0.0 | 0.250, 170.0 |"), "{md}");

    // A seed with a probe but one SAC task's return missing is refused, naming both.
    let partial: String = csv
        .lines()
        .filter(|l| !l.starts_with("sac,lfs,cartpole_swingup,2,"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&results, partial).unwrap();
    let out = run();
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no lfs return for cartpole_swingup seed 2"),
        "{err}"
    );

    std::fs::write(&results, &csv).unwrap();
    std::fs::remove_file(probes.join("lfs-s3.json")).unwrap();
    let out = run();
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("seeds [3]"), "{err}");
}
