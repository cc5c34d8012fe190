//! `lfs eval` end to end on DMControl (needs `make setup`): bad input is refused by name with
//! exit 2 and nothing written, and a run killed with SIGKILL resumes from its checkpoint and
//! ends with the same evaluations and episode logs as an uninterrupted run; `--save-video`
//! writes playable H.264 videos of the evaluation episodes.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{lfs_in_repo, output_text as text, run_results as results, wait_for};

/// pipelines/sac/tiny.toml at toy network sizes and budgets: 3 cartpole episodes of 500 agent
/// steps (the tests that do not count on whole episodes cut them at 250 frames), updates from
/// step 200, evaluations of one episode at frames 0, 1500 and 3000.
const SMALL: [&str; 10] = [
    "env.render_quality=fast",
    "agent.hidden_dim=32",
    "agent.feature_dim=8",
    "agent.batch_size=16",
    "run.num_train_frames=3000",
    "run.num_seed_frames=400",
    "run.eval_every_frames=1500",
    "run.num_eval_episodes=1",
    "run.checkpoint_every_frames=1000",
    "replay.capacity=5000",
];

fn eval_command(out: &Path, extra: &[&str]) -> Command {
    let mut cmd = lfs_in_repo();
    cmd.args(["eval", "--config", "pipelines/sac/tiny.toml", "--out-dir"])
        .arg(out);
    for s in SMALL {
        cmd.args(["--set", s]);
    }
    cmd.args(extra);
    cmd
}

#[test]
fn bad_input_is_refused_by_name_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let garbage = dir.path().join("encoder.safetensors");
    std::fs::write(&garbage, b"not a safetensors file").unwrap();
    let garbage = garbage.to_str().unwrap().to_string();
    let cases: [(&[&str], &str); 6] = [
        (
            &["--encoder", "random", "--task", "walker_fly"],
            "unknown task \"walker_fly\"",
        ),
        (
            &[
                "--encoder",
                "random",
                "--task",
                "cartpole_swingup",
                "--set",
                "run.num_train_frames=300",
            ],
            "is not more than run.num_seed_frames",
        ),
        (
            &["--encoder", &garbage, "--task", "cartpole_swingup"],
            "encoder.safetensors",
        ),
        (
            &[
                "--encoder",
                "random",
                "--task",
                "cartpole_swingup",
                "--set",
                "agent.batch_size=0",
            ],
            "agent.batch_size must be >= 1",
        ),
        (
            &[
                "--encoder",
                "random",
                "--task",
                "cartpole_swingup",
                "--set",
                "replay.feature_cache_dtype=\"bf16\"",
            ],
            "unknown variant `bf16`, expected `f32` or `f16`",
        ),
        (
            &[
                "--encoder",
                "random",
                "--task",
                "cartpole_swingup",
                "--set",
                "env.episode_frames=251",
            ],
            "env.episode_frames = 251 must be a positive multiple of env.action_repeat = 2",
        ),
    ];
    for (args, expected) in cases {
        let result = eval_command(&out, args).output().unwrap();
        let said = text(&result);
        assert_eq!(result.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(expected), "{args:?}: {said}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}

#[test]
fn a_killed_run_resumes_to_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    // Episodes cut at 250 frames (12 of them; the evaluations' were whole 1000-frame episodes,
    // most of this test's time).
    let args = [
        "--encoder",
        "random",
        "--task",
        "cartpole_swingup",
        "--set",
        "env.episode_frames=250",
    ];
    // Uninterrupted, with the first episode of each evaluation as a video.
    let whole = dir.path().join("whole");
    let result = eval_command(&whole, &[&args[..], &["--save-video"]].concat())
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result));
    for frame in [0, 1500, 3000] {
        // An 84×84 H.264 MP4 of the whole episode: its first frame and 125 agent steps.
        let video = whole.join(format!("eval_video/{frame}.mp4"));
        let probe = Command::new("ffprobe")
            .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
            .args([
                "-show_entries",
                "stream=codec_name,width,height,nb_read_frames",
                "-of",
                "csv=p=0",
            ])
            .arg(&video)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&probe.stdout).trim(),
            "h264,84,84,126",
            "{}",
            video.display()
        );
    }
    // Killed after its first evaluation but before any checkpoint: it starts over, and
    // evaluates frame 0 once.
    let killed = dir.path().join("killed");
    let mut child = spawn_quiet(&mut eval_command(&killed, &args));
    wait_for(&mut child, 300, "the first evaluation", || {
        std::fs::read_to_string(killed.join("eval.csv")).is_ok_and(|t| t.lines().count() >= 2)
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!killed.join("checkpoint.safetensors").exists());
    // Then killed once its first checkpoint (frame 1000) is on disk, and run again.
    let mut child = spawn_quiet(&mut eval_command(&killed, &args));
    wait_for(&mut child, 300, "the first checkpoint", || {
        killed.join("checkpoint.safetensors").exists()
    });
    // A second run into the folder while the first writes it (between frames 1000 and 3000) is refused by name.
    let second = eval_command(&killed, &args).output().unwrap();
    assert_eq!(second.status.code(), Some(2), "{}", text(&second));
    assert!(
        text(&second).contains("another `lfs eval` is writing this folder"),
        "{}",
        text(&second)
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = results(&killed);
    let result = eval_command(&killed, &args).output().unwrap();
    let said = text(&result);
    assert!(result.status.success(), "{said}");
    assert!(said.contains("resuming at frame"), "{said}");
    assert_eq!(results(&killed), results(&whole), "killed after {before:?}");
    // TensorBoard's copy of each: every evaluation and episode once, after two kills too.
    crate::common::check_tensorboard(&whole);
    crate::common::check_tensorboard(&killed);
    let (rows, episodes) = results(&whole);
    assert_eq!(rows.len(), 4, "{rows:?}"); // header + frames 0, 1500, 3000
    assert_eq!(episodes.len(), 12);
    // Running a finished run again evaluates nothing twice.
    let eval_csv = std::fs::read(killed.join("eval.csv")).unwrap();
    let result = eval_command(&killed, &args).output().unwrap();
    assert!(result.status.success(), "{}", text(&result));
    assert_eq!(std::fs::read(killed.join("eval.csv")).unwrap(), eval_csv);
    // A different config does not resume the checkpoint, and the run's files stay as they are.
    let result = eval_command(&killed, &[&args[..], &["--set", "agent.hidden_dim=64"]].concat())
        .output()
        .unwrap();
    let said = text(&result);
    assert_eq!(result.status.code(), Some(2), "{said}");
    assert!(said.contains("different config"), "{said}");
    assert!(said.contains("agent.hidden_dim: 32 vs 64"), "{said}");
    assert_eq!(std::fs::read(killed.join("eval.csv")).unwrap(), eval_csv);
    // Nor does one whose feature cache stores another type: a run never mixes f32 and f16.
    let result = eval_command(
        &killed,
        &[&args[..], &["--set", "replay.feature_cache_dtype=\"f16\""]].concat(),
    )
    .output()
    .unwrap();
    let said = text(&result);
    assert_eq!(result.status.code(), Some(2), "{said}");
    assert!(
        said.contains("replay.feature_cache_dtype: \"f32\" vs \"f16\""),
        "{said}"
    );
    assert_eq!(std::fs::read(killed.join("eval.csv")).unwrap(), eval_csv);
}

#[test]
fn a_killed_run_sampling_as_drqv2s_loader_resumes_to_the_same_results() {
    // `replay.sampling = "drqv2"`: the loader's counts are part of the checkpoint. With 250 seed
    // steps and an update every step, the checkpoint (step 500 or 1000) falls at batch 250 or
    // 750: mid-way through the shards' turns and between their refreshes (at batches 4j + w
    // for j = 0, 62, 125, 187, 250, 312, the shard's sample 1000·j/62.5). Episode 1 (shard 1)
    // ends at step 1000 and reaches its shard at batch 1001 (step 1251): a run resumed without
    // the counts refreshes at other batches, its shard 1 holds episode 1 from step 1001, and
    // its draws, losses and returns differ.
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--encoder",
        "random",
        "--task",
        "cartpole_swingup",
        "--set",
        "replay.sampling=\"drqv2\"",
        "--set",
        "run.num_seed_frames=500",
    ];
    let whole = dir.path().join("whole");
    let result = eval_command(&whole, &args).output().unwrap();
    assert!(result.status.success(), "{}", text(&result));
    let config = std::fs::read_to_string(whole.join("config.resolved.toml")).unwrap();
    assert!(config.contains("sampling = \"drqv2\""), "{config}");
    let killed = dir.path().join("killed");
    let mut child = spawn_quiet(&mut eval_command(&killed, &args));
    wait_for(&mut child, 300, "the first checkpoint", || {
        killed.join("checkpoint.safetensors").exists()
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = results(&killed);
    let result = eval_command(&killed, &args).output().unwrap();
    let said = text(&result);
    assert!(result.status.success(), "{said}");
    assert!(said.contains("resuming at frame"), "{said}");
    assert_eq!(results(&killed), results(&whole), "killed after {before:?}");
    // The same run sampled uniformly is another run: it does not resume this checkpoint.
    let uniform = [&args[..4], &args[6..]].concat();
    let result = eval_command(&killed, &uniform).output().unwrap();
    assert_eq!(result.status.code(), Some(2), "{}", text(&result));
    assert!(text(&result).contains("replay.sampling"), "{}", text(&result));
}

#[test]
fn the_feature_cache_on_the_device_resumes_to_the_host_caches_results() {
    // LFS_GPU_PATHS_ON_CPU=feature-cache runs a GPU's cache (src/rl/device_feature_cache.rs) on the CPU:
    // f16 rows, the rows computed again on restore. 700 transitions, 7 first observations and
    // 1001 rows of room, the random encoder's 39200 features each.
    let args = ["--set", "replay.feature_cache_dtype=\"f16\""];
    let (rows, _) = on_the_device_as_on_the_host(
        "feature-cache",
        &args,
        "feature cache on the device: 1708 rows of 39200 f16",
    );
    assert_eq!(rows.len(), 4, "{rows:?}");
}

#[test]
fn replay_frames_on_the_device_resume_to_the_host_replays_results() {
    // LFS_GPU_PATHS_ON_CPU=replay-frames runs a GPU's pixel batches (src/rl/device_frames.rs: the
    // replay's frames copied to the device, each batch stacked and shifted there) on the CPU:
    // pixel SAC without the feature cache, the frames uploaded again on restore. 700
    // transitions, 7 first frames and 1001 frames of room, 21168 bytes each.
    let args = [
        "--set",
        "replay.feature_cache=false",
        "--set",
        "run.num_train_frames=2000",
        "--set",
        "run.eval_every_frames=2000",
    ];
    let (rows, episodes) = on_the_device_as_on_the_host(
        "replay-frames",
        &args,
        "replay frames on the device: 1708 frames (0.04 GB)",
    );
    assert_eq!((rows.len(), episodes.len()), (3, 8), "{rows:?}");
    assert!(episodes[1]["train/num_updates"].as_u64().unwrap() > 0);
}

/// `lfs eval` (random encoder, cartpole_swingup, episodes cut at 250 frames, a replay of 700
/// transitions that drops its oldest episodes, `extra`) the CPU's way uninterrupted, and with
/// `LFS_GPU_PATHS_ON_CPU=path` (the GPU's way) killed once its first checkpoint is on disk and
/// resumed, saying `says`: both end with the same evaluations and episode logs, which are
/// returned.
fn on_the_device_as_on_the_host(path: &str, extra: &[&str], says: &str) -> (Vec<String>, Vec<serde_json::Value>) {
    let var = "LFS_GPU_PATHS_ON_CPU";
    let dir = tempfile::tempdir().unwrap();
    let common = [
        "--encoder",
        "random",
        "--task",
        "cartpole_swingup",
        "--set",
        "env.episode_frames=250",
        "--set",
        "replay.capacity=700",
    ];
    let args = [&common[..], extra].concat();
    let host = dir.path().join("host");
    let result = eval_command(&host, &args).env_remove(var).output().unwrap();
    assert!(result.status.success(), "{}", text(&result));
    assert!(!text(&result).contains("on the device"), "{}", text(&result));
    let device = dir.path().join("device");
    let mut child = spawn_quiet(eval_command(&device, &args).env(var, path));
    wait_for(&mut child, 300, "the first checkpoint", || {
        device.join("checkpoint.safetensors").exists()
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = results(&device);
    let result = eval_command(&device, &args).env(var, path).output().unwrap();
    let said = text(&result);
    assert!(result.status.success(), "{said}");
    assert!(said.contains("resuming at frame"), "{said}");
    assert!(said.contains(says), "{said}");
    let whole = results(&host);
    assert_eq!(results(&device), whole, "killed after {before:?}");
    whole
}

/// Starts `cmd` with its output discarded.
fn spawn_quiet(cmd: &mut Command) -> std::process::Child {
    cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}
