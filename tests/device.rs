//! The device seam (issue 29) on a machine without a GPU: candle's ops (the code a CUDA run
//! takes) against our CPU kernels through `examples/device_check.rs`, `run.device` in configs
//! and resume keys, and `--device cuda` refused by a build without CUDA before anything is
//! written.

use std::path::{Path, PathBuf};
use std::process::Command;

use lfs::pretrain::PretrainConfig;
use lfs::rl_loop::LoopConfig;

use crate::common::{lfs_in_repo, output_text, repo, temp_dir};

/// The example binary `cargo test` built beside `lfs`.
fn device_check() -> PathBuf {
    let lfs = PathBuf::from(env!("CARGO_BIN_EXE_lfs"));
    lfs.parent().unwrap().join("examples").join("device_check")
}

/// `device_check --device cpu ARGS`, which must succeed: its JSON lines, and all it printed.
fn device_check_on_the_cpu(args: &[&str]) -> (Vec<serde_json::Value>, String) {
    let out = Command::new(device_check())
        .args(["--device", "cpu"])
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run examples/device_check (cargo test builds it)");
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    let lines = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, text)
}

#[test]
fn candles_ops_match_the_cpu_kernels_in_every_check() {
    let (lines, text) = device_check_on_the_cpu(&[]);
    let checks: Vec<&str> = lines.iter().map(|l| l["check"].as_str().unwrap()).collect();
    assert_eq!(
        checks,
        [
            "encoder offset=0",
            "encoder offset=-0.5",
            "pretrain lfs",
            "pretrain atc",
            "pretrain curl",
            "pretrain lfs, resumed across",
            "sac from pixels",
            "sac from pixels, resumed across",
            "replay rows on the device",
            "drqv2 from pixels",
            "taco from pixels",
            "encoder at a training batch"
        ],
        "{text}"
    );
    for line in &lines {
        let err = line["rel_err"].as_f64().unwrap();
        assert!(line["ok"].as_bool().unwrap() && err <= 1e-4, "{line}");
    }
    // The two sides are different code (candle's conv2d and autograd against our tiled kernels
    // and hand-written backward): their sums round differently, so an exact match would mean
    // both sides ran the same path and the checks compared nothing.
    // The replay's rows are copies and gathers: on the CPU as on a GPU, exactly the host's.
    assert_eq!(lines[8]["rel_err"].as_f64(), Some(0.0), "{}", lines[8]);
    let encoder_err = lines[0]["rel_err"].as_f64().unwrap();
    assert!(
        encoder_err > 0.0,
        "the candle path and the kernels agree exactly: {text}"
    );
}

/// `device_check --long`'s plumbing on the CPU at batch 8 (a GPU runs it at the real batch
/// sizes, `eval/gpu/gpu-session.sh`'s `long` stage): three training steps, both loss series of
/// every update, and a band decision; `--memory` says the CPU has no device memory to read.
#[test]
fn the_long_parity_check_reports_every_updates_losses_on_both_sides() {
    let (lines, _) = device_check_on_the_cpu(&["--long", "3", "--long-batch", "8"]);
    let names: Vec<&str> = lines.iter().map(|l| l["long"].as_str().unwrap()).collect();
    assert_eq!(names, ["lfs", "sac on cached features", "drqv2 from pixels"]);
    for line in &lines {
        assert_eq!(line["updates"], 3, "{line}");
        let (a, r) = (
            line["tested"].as_array().unwrap(),
            line["reference"].as_array().unwrap(),
        );
        assert_eq!((a.len(), r.len()), (3, 3), "{line}");
        assert!(a.iter().chain(r).all(|v| v.as_f64().unwrap().is_finite()), "{line}");
        assert!(
            line["ok"].as_bool().unwrap() && line["max_rel_gap"].as_f64().unwrap() <= 0.05,
            "{line}"
        );
    }
    // Losses move from update to update (the series are the training's, not one number thrice).
    let lfs = lines[0]["reference"].as_array().unwrap();
    assert_ne!(lfs[0], lfs[2]);
    let (memory, _) = device_check_on_the_cpu(&["--memory", "5"]);
    assert_eq!(memory[0]["note"], "no memory to read on the CPU");
}

#[test]
fn run_device_is_written_only_off_the_cpu_and_never_joins_the_resume_key() {
    let tiny = repo().join("pipelines/tiny.toml");
    let cpu = PretrainConfig::load(&tiny, &[]).unwrap();
    let cuda = PretrainConfig::load(&tiny, &["run.device=\"cuda\"".to_string()]).unwrap();
    assert_eq!(cuda.run.device.to_string(), "cuda:0");
    assert!(!cpu.to_toml().unwrap().contains("device"));
    assert!(cuda.to_toml().unwrap().contains("device = \"cuda:0\""));
    assert_eq!(cpu.resume_key().unwrap(), cuda.resume_key().unwrap());
    let sac = repo().join("pipelines/sac/tiny.toml");
    let cpu = LoopConfig::load(&sac, &[]).unwrap();
    let cuda = LoopConfig::load(&sac, &["run.device=\"cuda:2\"".to_string()]).unwrap();
    assert_eq!(cpu.resume_key().unwrap(), cuda.resume_key().unwrap());
    let err = PretrainConfig::load(&tiny, &["run.device=\"gpu\"".to_string()]).unwrap_err();
    assert!(err.to_string().contains("expected cpu, cuda or cuda:N"), "{err}");
}

/// The three commands that train, each with the arguments of a tiny run (all but `--out-dir`).
fn training_commands() -> [(&'static str, Vec<&'static str>); 3] {
    [
        ("pretrain", vec!["--config", "pipelines/tiny.toml"]),
        (
            "eval",
            vec![
                "--config",
                "pipelines/sac/tiny.toml",
                "--encoder",
                "random",
                "--task",
                "cartpole_swingup",
            ],
        ),
        (
            "train",
            vec!["--config", "pipelines/e2e/tiny.toml", "--task", "cartpole_swingup"],
        ),
    ]
}

/// Runs each training command with `extra` arguments into its own folder under `dir`; each must
/// fail with output that `refused` accepts, and write nothing.
fn refused_before_writing(dir: &Path, extra: impl Fn(&str) -> Vec<String>, refused: impl Fn(&str, &str) -> bool) {
    for (command, args) in training_commands() {
        let out_dir = dir.join(command);
        let out = lfs_in_repo()
            .arg(command)
            .args(&args)
            .args(extra(command))
            .arg("--out-dir")
            .arg(&out_dir)
            .output()
            .unwrap();
        let text = output_text(&out);
        assert!(!out.status.success(), "{command}: {text}");
        assert!(refused(command, &text), "{command}: {text}");
        assert!(!out_dir.exists(), "{command} wrote {}", out_dir.display());
    }
}

#[cfg(not(feature = "cuda"))]
#[test]
fn device_cuda_on_a_cpu_build_is_refused_before_anything_is_written() {
    let dir = temp_dir("device-refused");
    // eval names a GPU other than the first
    let device = |command: &str| if command == "eval" { "cuda:1" } else { "cuda" };
    refused_before_writing(
        &dir,
        |command| vec!["--device".into(), device(command).into()],
        |command, text| {
            let choice: lfs::device::DeviceChoice = device(command).parse().unwrap();
            text.contains(&format!("run.device = \"{choice}\"")) && text.contains("make build-cuda")
        },
    );
    let out = lfs_in_repo()
        .args([
            "pretrain",
            "--config",
            "pipelines/tiny.toml",
            "--device",
            "gpu",
            "--out-dir",
        ])
        .arg(dir.join("gpu"))
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(
        !out.status.success() && text.contains("device \"gpu\": expected cpu, cuda or cuda:N"),
        "{text}"
    );
}

/// A switch's value outside its list (src/switches.rs) stops a command before it writes
/// anything, with the switch, the value and the list named; a removed switch is named on stderr
/// and the command goes on.
#[test]
fn a_bad_switch_value_is_refused_and_a_removed_switch_is_named() {
    let dir = temp_dir("switches");
    let ingest = |out: &str, env: (&str, &str)| {
        let out_dir = dir.join(out);
        let out = lfs_in_repo()
            .args(["ingest", "datasets/tiny/videos", "--out"])
            .arg(&out_dir)
            .env(env.0, env.1)
            .output()
            .unwrap();
        (out.status.code(), output_text(&out), out_dir.exists())
    };
    let (code, text, wrote) = ingest("bad", ("LFS_GPU_PATHS_ON_CPU", "video-frames,statistics"));
    assert_eq!(code, Some(2), "{text}");
    for part in ["LFS_GPU_PATHS_ON_CPU", "\"statistics\"", "update-statistics"] {
        assert!(text.contains(part), "{text} lacks {part}");
    }
    assert!(!wrote, "a refused command wrote its folder");
    let (code, text, wrote) = ingest("removed", ("LFS_FUSED_STEP", "0"));
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("LFS_FUSED_STEP was removed") && wrote, "{text}");
}

/// `run.precision = "tf32"` is for a CUDA device: on the CPU every command refuses it by name
/// before it writes anything, and a precision that does not exist is refused by the config.
#[test]
fn tf32_on_the_cpu_is_refused_before_anything_is_written() {
    let dir = temp_dir("precision-refused");
    refused_before_writing(
        &dir,
        |_| vec!["--set".into(), "run.precision=tf32".into()],
        |_, text| text.contains("run.precision = \"tf32\" needs a CUDA device"),
    );
    let out = lfs_in_repo()
        .args([
            "pretrain",
            "--config",
            "pipelines/tiny.toml",
            "--set",
            "run.precision=tf16",
            "--out-dir",
        ])
        .arg(dir.join("tf16"))
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(!out.status.success() && text.contains("tf16"), "{text}");
    assert!(!dir.join("tf16").exists());
}
