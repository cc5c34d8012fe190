//! `lfs probe` and the online probe of `lfs pretrain`, on real DMControl episodes: a probe set
//! recorded by `lfs collect` (cartpole_swingup, fast renders, 14 short episodes), the shipped
//! tiny videos (no recorded state) and a 0-update encoder pre-trained on them (default renders).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::{fixture_dir, lfs_in_repo, output_text, repo, temp_dir};

/// Runs `lfs` with `args` in the checkout; the output, and whether it succeeded.
fn lfs(args: &[&str]) -> (bool, String) {
    let out = lfs_in_repo().args(args).output().expect("run lfs");
    (out.status.success(), output_text(&out))
}

fn ok(args: &[&str]) -> String {
    let (success, text) = lfs(args);
    assert!(success, "lfs {}:\n{text}", args.join(" "));
    text
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// The probe set: 14 cartpole_swingup episodes of 12 frames (3 rows each at stride 4).
fn probe_set() -> &'static PathBuf {
    static SET: OnceLock<PathBuf> = OnceLock::new();
    SET.get_or_init(|| {
        let dir = fixture_dir("probe-set");
        let videos = dir.join("videos");
        ok(&[
            "collect",
            "--tasks",
            "cartpole_swingup",
            "--episodes",
            "14",
            "--video-frames",
            "12",
            "--render-quality",
            "fast",
            "--seed",
            "1000000",
            "--out",
            s(&videos),
        ]);
        let dataset = dir.join("dataset");
        ok(&["ingest", s(&videos), "--out", s(&dataset)]);
        dataset
    })
}

/// The shipped tiny videos ingested (sidecars without state) and an encoder exported from a
/// 0-update pre-training on them (render quality `default`).
fn tiny() -> &'static (PathBuf, PathBuf) {
    static TINY: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    TINY.get_or_init(|| {
        let dir = fixture_dir("probe-tiny");
        let dataset = dir.join("dataset");
        ok(&["ingest", s(&repo().join("datasets/tiny/videos")), "--out", s(&dataset)]);
        let run = dir.join("run");
        ok(&[
            "pretrain",
            "--config",
            "pipelines/tiny.toml",
            "--set",
            &format!("data.datasets=[{:?}]", s(&dataset)),
            "--set",
            "run.num_updates=0",
            "--out-dir",
            s(&run),
        ]);
        let encoder = run.join("encoder.safetensors");
        ok(&["export", s(&run.join("checkpoint.safetensors")), "--out", s(&encoder)]);
        (dataset, encoder)
    })
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read json")).expect("json")
}

#[test]
fn probe_reports_held_out_r2_per_task() {
    let out_dir = temp_dir("probe-out");
    let out = out_dir.join("probe.json");
    let table = ok(&[
        "probe",
        "--encoder",
        "random",
        "--dataset",
        s(probe_set()),
        "--out",
        s(&out),
    ]);
    assert!(table.contains("| cartpole_swingup | 10 / 4 | 30 / 12 |"), "{table}");
    let report = json(&out);
    assert_eq!(report["encoder"]["id"], "random:1", "{report}");
    assert_eq!(report["dataset"]["render_quality"], "fast");
    let task = &report["tasks"][0];
    assert_eq!(task["task"], "cartpole_swingup");
    let names: Vec<&str> = task["state"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    // cartpole's observation: position (cart x, cos and sin of the pole angle) and velocity.
    assert_eq!(
        names,
        [
            "position[0]",
            "position[1]",
            "position[2]",
            "velocity[0]",
            "velocity[1]"
        ]
    );
    for target in ["state", "reward"] {
        let held_out = &task[target]["held_out"];
        let mean = &held_out["mean"];
        let (point, low, high) = (
            mean["point"].as_f64().unwrap(),
            mean["low"].as_f64().unwrap(),
            mean["high"].as_f64().unwrap(),
        );
        assert!(
            point.is_finite() && low <= point + 1e-12 && point <= high + 1e-12,
            "{target}: {mean}"
        );
        assert_eq!(
            held_out["num_groups"], 4,
            "{target}: the held-out episodes are the bootstrap's units"
        );
        assert_eq!(held_out["num_rows"], 12);
        assert_eq!(
            held_out["per_dim"].as_array().unwrap().len(),
            task[target]["names"].as_array().unwrap().len()
        );
    }
    // The same probe again gives the same numbers (the report's seconds aside).
    let again_dir = temp_dir("probe-again");
    let again = again_dir.join("probe.json");
    ok(&[
        "probe",
        "--encoder",
        "random",
        "--dataset",
        s(probe_set()),
        "--out",
        s(&again),
    ]);
    assert_eq!(json(&again)["tasks"][0]["state"]["held_out"], task["state"]["held_out"]);
}

#[test]
fn probe_refuses_what_it_cannot_measure() {
    let (tiny_dataset, tiny_encoder) = tiny();
    let out_dir = temp_dir("probe-refused");
    let out = out_dir.join("probe.json");
    let refused = |args: &[&str], expected: &str| {
        let (success, text) = lfs(args);
        assert!(!success, "lfs {} succeeded:\n{text}", args.join(" "));
        assert!(
            text.contains(expected),
            "lfs {}: expected {expected:?} in\n{text}",
            args.join(" ")
        );
        assert!(!out.exists(), "a refused probe writes no report");
    };
    // Videos without recorded state.
    refused(
        &[
            "probe",
            "--encoder",
            "random",
            "--dataset",
            s(tiny_dataset),
            "--out",
            s(&out),
        ],
        "has no recorded state",
    );
    // Too few episodes: half of 14 held out leaves 7 to fit on, the probe needs 10.
    refused(
        &[
            "probe",
            "--encoder",
            "random",
            "--dataset",
            s(probe_set()),
            "--test-fraction",
            "0.5",
            "--out",
            s(&out),
        ],
        "task cartpole_swingup has 14 episodes; the probe needs at least 10 fitted-on and 4 held-out",
    );
    // A task the dataset does not have.
    refused(
        &[
            "probe",
            "--encoder",
            "random",
            "--dataset",
            s(probe_set()),
            "--tasks",
            "walker_run",
            "--out",
            s(&out),
        ],
        "has no task \"walker_run\"",
    );
    // An encoder pre-trained on default renders, probed on fast ones.
    refused(
        &[
            "probe",
            "--encoder",
            s(tiny_encoder),
            "--dataset",
            s(probe_set()),
            "--out",
            s(&out),
        ],
        "--allow-render-quality-mismatch",
    );
    ok(&[
        "probe",
        "--encoder",
        s(tiny_encoder),
        "--dataset",
        s(probe_set()),
        "--out",
        s(&out),
        "--allow-render-quality-mismatch",
    ]);
    assert_eq!(json(&out)["encoder"]["render_quality"], "default");
}

/// The update lines of a pre-training log without their timings.
fn update_lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("pretrain/loss").is_some())
        .map(|mut v| {
            let m = v.as_object_mut().unwrap();
            m.retain(|k, _| !k.contains("seconds") && !k.contains("per_s"));
            v
        })
        .collect()
}

#[test]
fn online_probe_is_logged_and_leaves_training_unchanged() {
    let (tiny_dataset, _) = tiny();
    let dir = temp_dir("online-probe");
    let pretrain = |out: &Path, extra: &[&str]| {
        let datasets = format!("data.datasets=[{:?}]", s(tiny_dataset));
        let mut args = vec![
            "pretrain",
            "--config",
            "pipelines/tiny.toml",
            "--set",
            &datasets,
            "--set",
            "run.num_updates=4",
            "--set",
            "run.batch_size=8",
            "--out-dir",
            s(out),
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let (plain, probed) = (dir.join("plain"), dir.join("probed"));
    pretrain(&plain, &[]);
    let probe_dataset = format!("probe.dataset={:?}", s(probe_set()));
    let text = pretrain(
        &probed,
        &[
            "--set",
            "probe.every_updates=2",
            "--set",
            &probe_dataset,
            "--set",
            "probe.frame_stride=4",
        ],
    );
    assert!(text.contains("probe at update 4: held-out R² state"), "{text}");
    let log = probed.join("metrics.jsonl");
    let probes: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("probe/state_r2").is_some())
        .collect();
    let steps: Vec<u64> = probes.iter().map(|p| p["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [0, 2, 4], "the initial encoder, then every 2 updates");
    for p in &probes {
        assert!(p["probe/state_r2"].as_f64().unwrap().is_finite(), "{p}");
        assert!(
            p["probe/tasks"]["cartpole_swingup"]["reward_r2"].as_f64().is_some(),
            "{p}"
        );
    }
    // The probe reads the encoder and draws no random numbers: the same updates either way.
    let (a, b) = (update_lines(&plain.join("metrics.jsonl")), update_lines(&log));
    assert_eq!(a.len(), 4);
    assert_eq!(a, b, "the online probe changed training");
}
