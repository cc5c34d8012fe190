//! `lfs collect`: lossless videos that replay exactly from their sidecars, resuming, and the
//! shipped tiny set (datasets/tiny/videos, checked without MuJoCo).
//!
//! The recording tests run real dm_control (`make setup`), a handful of frames each.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common::{output_text, python};
use lfs::collect::{self, episode_paths, read_sidecar, CollectConfig, CollectEvent, CollectFormat};
use lfs::env::{DmcConfig, DmcEnv, Env, RenderQuality, Task, FRAME_BYTES};
use lfs::shards::Dataset;

/// Decodes a video to (n, 84, 84, 3) RGB with the ffmpeg command line, independently of lfs.
fn decode_rgb(video: &Path) -> Vec<Vec<u8>> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(video)
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("run ffmpeg");
    assert!(
        out.status.success(),
        "ffmpeg failed on {}: {}",
        video.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len() % FRAME_BYTES, 0);
    out.stdout.chunks(FRAME_BYTES).map(<[u8]>::to_vec).collect()
}

fn config(out_dir: &Path, episodes: usize, max_frames: usize) -> CollectConfig {
    CollectConfig {
        tasks: vec![Task::CartpoleSwingup],
        episodes,
        max_frames,
        out_dir: out_dir.to_path_buf(),
        format: CollectFormat::Videos,
        workers: 2,
        seed: 7,
        action_repeat: 2,
        render_quality: RenderQuality::Fast,
        python: python(),
    }
}

/// The video decodes bit for bit to the frames dm_control renders when the sidecar's seed and
/// actions are replayed, and the sidecar's rewards and per-frame states are the replay's.
#[test]
fn collected_episode_is_lossless_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), 1, 6);
    let mut events = Vec::new();
    let summary = collect::collect(&cfg, &mut |e| events.push(e)).unwrap();
    assert_eq!((summary.episodes_written, summary.frames_written), (1, 6));
    assert!(events
        .iter()
        .any(|e| matches!(e, CollectEvent::EpisodeDone { num_frames: 6, .. })));

    let (video, sidecar_path) = episode_paths(dir.path(), Task::CartpoleSwingup, 0);
    assert_eq!(video, dir.path().join("cartpole_swingup/00000.mkv"));
    let sidecar = read_sidecar(&sidecar_path).unwrap();
    assert_eq!(sidecar.task, Task::CartpoleSwingup);
    assert_eq!(sidecar.render_quality, RenderQuality::Fast);
    assert_eq!((sidecar.seed, sidecar.action_repeat, sidecar.num_frames), (7, 2, 6));
    assert_eq!((sidecar.actions.len(), sidecar.rewards.len()), (5, 5));
    // One state row per frame, as wide as its names: cartpole's position (3) and velocity (2).
    assert_eq!(sidecar.states.len(), sidecar.num_frames);
    assert_eq!(sidecar.state_names.len(), 5, "{:?}", sidecar.state_names);
    assert!(sidecar.states.iter().all(|row| row.len() == sidecar.state_names.len()));
    assert!(sidecar.has_states());
    assert_eq!((sidecar.source.as_str(), sidecar.camera.as_str()), ("lfs collect", "0"));
    // The versions python/requirements.txt pins (dm_control has no __version__ to read).
    assert_eq!(
        (sidecar.mujoco.as_str(), sidecar.dm_control.as_str()),
        ("3.17.0", "1.0.50")
    );
    // The sidecar's field names are what `lfs ingest` reads.
    let raw: serde_json::Value = serde_json::from_slice(&fs::read(&sidecar_path).unwrap()).unwrap();
    for key in [
        "task",
        "seed",
        "action_repeat",
        "render_quality",
        "camera",
        "num_frames",
        "actions",
        "rewards",
        "source",
        "lfs_version",
        "state_names",
        "states",
    ] {
        assert!(raw.get(key).is_some(), "sidecar lacks {key}");
    }
    assert_eq!(raw["render_quality"], "fast");

    let decoded = decode_rgb(&video);
    let mut env = DmcEnv::spawn(DmcConfig {
        render_quality: RenderQuality::Fast,
        python: python(),
        ..DmcConfig::new(Task::CartpoleSwingup)
    })
    .unwrap();
    assert_eq!(env.spec().state_names, sidecar.state_names);
    // States go through JSON (serde_json reads floats to within an ulp): 1e-12 is far tighter
    // than any change of state between two frames.
    let assert_state = |t: usize, state: &[f64]| {
        let row = &sidecar.states[t];
        assert!(
            row.len() == state.len() && row.iter().zip(state).all(|(a, b)| (a - b).abs() <= 1e-12),
            "state {t}: sidecar {row:?}, replay {state:?}"
        );
    };
    let reset = env.reset(sidecar.seed).unwrap();
    assert_state(0, &reset.state);
    let mut replay = vec![reset.frame];
    for (t, action) in sidecar.actions.iter().enumerate() {
        let step = env.step(action).unwrap();
        assert!((step.reward - sidecar.rewards[t]).abs() <= 1e-12, "reward {t}");
        assert_state(t + 1, &step.state);
        replay.push(step.frame);
    }
    assert_eq!(decoded.len(), replay.len());
    for (t, (a, b)) in decoded.iter().zip(&replay).enumerate() {
        assert!(a == b, "frame {t} of the video is not the frame dm_control rendered");
    }
    assert_ne!(decoded[0], decoded[5], "the episode never moved");
}

/// A second run keeps complete episodes, redoes one whose sidecar is missing (an interrupted
/// write), and refuses to mix render qualities in one folder. Runs the `lfs` binary.
#[test]
fn collect_resumes_and_refuses_to_mix() {
    let dir = tempfile::tempdir().unwrap();
    let run = |quality: &str| {
        Command::new(env!("CARGO_BIN_EXE_lfs"))
            .args([
                "collect",
                "--tasks",
                "cartpole_swingup",
                "--episodes",
                "2",
                "--frames",
                "4",
                "--workers",
                "2",
            ])
            .args(["--render-quality", quality, "--python"])
            .arg(python())
            .arg("--out")
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let first = run("fast");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let (video0, sidecar0) = episode_paths(dir.path(), Task::CartpoleSwingup, 0);
    let (video1, sidecar1) = episode_paths(dir.path(), Task::CartpoleSwingup, 1);
    let kept_mtime = fs::metadata(&video0).unwrap().modified().unwrap();
    let kept_sidecar = fs::read(&sidecar0).unwrap();
    let redone_video = fs::read(&video1).unwrap();
    // An interrupted episode: the video was renamed into place, the sidecar never was, and a
    // stale temporary file is left behind.
    fs::remove_file(&sidecar1).unwrap();
    fs::write(&video1, b"torn").unwrap();
    fs::write(dir.path().join("cartpole_swingup/.00001.mkv.tmp"), b"torn").unwrap();

    let second = run("fast");
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert!(
        stdout.contains("wrote 1 episode(s)") && stdout.contains("kept 1 complete"),
        "{stdout}"
    );
    assert_eq!(
        fs::metadata(&video0).unwrap().modified().unwrap(),
        kept_mtime,
        "a complete episode was rewritten"
    );
    assert!(
        fs::read(&sidecar0).unwrap() == kept_sidecar,
        "a complete episode's sidecar was rewritten"
    );
    assert!(
        fs::read(&video1).unwrap() == redone_video,
        "the redone episode's video differs from the first recording"
    );
    assert!(sidecar1.exists());
    assert!(
        !dir.path().join("cartpole_swingup/.00001.mkv.tmp").exists(),
        "the temporary file was left behind"
    );

    let mixed = run("default");
    let stderr = String::from_utf8_lossy(&mixed.stderr);
    assert!(!mixed.status.success());
    assert!(
        stderr.contains("00000.json") && stderr.contains("render quality fast") && stderr.contains("another --out"),
        "{stderr}"
    );
}

/// The shipped tiny set (datasets/tiny/videos, made by `lfs collect`): 3 seen tasks × 3
/// episodes, every video decodes to the frame count its sidecar states. No MuJoCo needed.
#[test]
fn tiny_dataset_is_complete() {
    let root = Path::new("datasets/tiny/videos");
    for task in Task::SEEN {
        for episode in 0..3 {
            let (video, sidecar_path) = episode_paths(root, task, episode);
            let sidecar = read_sidecar(&sidecar_path).unwrap();
            assert_eq!(sidecar.task, task);
            assert_eq!(sidecar.render_quality, RenderQuality::Default);
            assert_eq!(sidecar.action_repeat, 2);
            assert_eq!(sidecar.actions.len(), sidecar.num_frames - 1);
            assert_eq!(sidecar.rewards.len(), sidecar.num_frames - 1);
            assert!(sidecar.actions.iter().flatten().all(|a| (-1.0..=1.0).contains(a)));
            assert_eq!(decode_rgb(&video).len(), sidecar.num_frames, "{}", video.display());
        }
    }
}

/// A worker killed while `lfs collect` runs: the episode in flight is redone on a restarted
/// worker and the run completes with every episode (the pool's crash handling, end to end).
#[test]
fn collect_survives_a_killed_worker() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lfs"))
        .args([
            "collect",
            "--tasks",
            "cartpole_swingup",
            "--episodes",
            "3",
            "--frames",
            "40",
            "--workers",
            "1",
        ])
        .args(["--render-quality", "fast", "--python"])
        .arg(python())
        .arg("--out")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    // Wait for the first finished episode (one log line per episode when not on a terminal),
    // then kill the only worker: it is recording the next episode or about to.
    let mut log = Vec::new();
    for line in stderr.by_ref() {
        let line = line.unwrap();
        log.push(line.clone());
        if line.starts_with("[1/3]") {
            break;
        }
    }
    let children = fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id())).unwrap();
    let worker = children
        .split_whitespace()
        .next()
        .expect("lfs collect has a worker process");
    assert!(Command::new("kill").args(["-9", worker]).status().unwrap().success());
    log.extend(stderr.map(Result::unwrap));
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", log.join("\n"));
    assert!(
        log.iter()
            .any(|l| l.contains("lost cartpole_swingup episode") && l.contains("SIGKILL")),
        "{log:?}"
    );
    assert!(
        stdout.contains("wrote 3 episode(s)") && stdout.contains("1 worker restart(s)"),
        "{stdout}"
    );
    for episode in 0..3 {
        let (video, sidecar) = episode_paths(dir.path(), Task::CartpoleSwingup, episode);
        let sidecar = read_sidecar(&sidecar).unwrap();
        assert_eq!(decode_rgb(&video).len(), sidecar.num_frames);
        assert!(sidecar.has_states(), "episode {episode} lacks a state row per frame");
    }
}

/// Issue 15: a second `lfs collect` into a folder another one is writing is refused by name
/// (exit 2), and the first carries on. Both are real `lfs` processes.
#[test]
fn a_second_collect_into_the_same_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let collect = || {
        let mut cmd = crate::common::lfs_in_repo();
        cmd.args(["collect", "--tasks", "cartpole_swingup", "--episodes", "4"])
            .args([
                "--frames",
                "200",
                "--workers",
                "1",
                "--render-quality",
                "fast",
                "--python",
            ])
            .arg(python())
            .arg("--out")
            .arg(dir.path());
        cmd
    };
    let mut first = collect()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lock = dir.path().join(".lfs-collect.lock");
    crate::common::wait_for(&mut first, 120, "the first collect's lock", || {
        lfs::fsutil::FileLock::is_held(&lock)
    });
    let second = collect().output().unwrap();
    let said = crate::common::output_text(&second);
    assert_eq!(second.status.code(), Some(2), "{said}");
    assert!(said.contains("another `lfs collect` is writing this folder"), "{said}");
    assert!(first.try_wait().unwrap().is_none(), "the first collect died");
    first.kill().unwrap();
    first.wait().unwrap();
}

/// `lfs collect --dataset` makes what `lfs collect --out` then `lfs ingest` make (issue 75): per
/// (task, episode) the same frames (the video path is lossless), state rows, rewards, render
/// quality and sidecar (but its `codec`: no video), the same tasks and state names. A second run
/// with more episodes records only the new ones; one at another render quality is refused by
/// name and leaves the dataset as it was. Runs the `lfs` binary, as a user does.
#[test]
fn collect_straight_to_a_dataset_equals_collect_then_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let (videos, ingested, direct) = (
        dir.path().join("videos"),
        dir.path().join("ingested"),
        dir.path().join("direct"),
    );
    // `lfs collect` of two tasks into `out` (`--out` or `--dataset`, and its folder): whether it
    // succeeded, and all it printed.
    let collect = |out: (&str, &Path), episodes: &str, quality: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_lfs"))
            .arg("collect")
            .args([
                "--tasks",
                "cartpole_swingup,walker_run",
                "--frames",
                "5",
                "--seed",
                "11",
            ])
            .args(["--episodes", episodes, "--render-quality", quality, "--workers", "2"])
            .arg("--python")
            .arg(python())
            .arg(out.0)
            .arg(out.1)
            .output()
            .unwrap();
        (output.status.success(), output_text(&output))
    };
    // `collect` into the dataset `into` refused: it named the dataset and said each of `why`,
    // and the dataset still holds `episodes` episodes.
    let refused = |into: &Path, episodes: &str, quality: &str, why: &[&str], held: usize| {
        let (ok, said) = collect(("--dataset", into), episodes, quality);
        assert!(!ok, "{said}");
        assert!(said.contains(&into.display().to_string()), "{said}");
        for needle in why {
            assert!(said.contains(needle), "{needle}: {said}");
        }
        assert_eq!(Dataset::open(into).unwrap().episodes.len(), held);
    };
    let (ok, said) = collect(("--out", &videos), "2", "fast");
    assert!(ok, "{said}");
    let out = Command::new(env!("CARGO_BIN_EXE_lfs"))
        .arg("ingest")
        .arg(&videos)
        .arg("--out")
        .arg(&ingested)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let (ok, said) = collect(("--dataset", &direct), "2", "fast");
    assert!(ok, "{said}");
    assert!(said.contains("wrote 4 episode(s)"), "{said}");

    // Each dataset's episodes by (task, episode): the record's sidecar and the loaded episode.
    let by_episode = |root: &Path| {
        let ds = Dataset::open(root).unwrap();
        let mut episodes = BTreeMap::new();
        for record in &ds.episodes {
            let mut sidecar: serde_json::Value = serde_json::from_str(record.sidecar.as_deref().unwrap()).unwrap();
            let codec = sidecar.as_object_mut().unwrap().remove("codec").unwrap();
            let key = (
                sidecar["task"].as_str().unwrap().to_string(),
                sidecar["episode"].as_u64().unwrap(),
            );
            let episode = ds.load_episode(record).unwrap();
            episodes.insert(key, (sidecar, codec, episode, record.length));
        }
        (ds, episodes)
    };
    let (a, from_videos) = by_episode(&ingested);
    let (b, straight) = by_episode(&direct);
    assert_eq!(from_videos.len(), 4);
    assert_eq!(
        from_videos.keys().collect::<Vec<_>>(),
        straight.keys().collect::<Vec<_>>()
    );
    for (key, (sidecar, codec, episode, length)) in &from_videos {
        let (sidecar2, codec2, episode2, length2) = &straight[key];
        assert_eq!(sidecar, sidecar2, "{key:?}: sidecar");
        assert_eq!(
            (codec.as_str(), codec2.as_str()),
            (Some("ffv1"), Some(collect::NO_VIDEO))
        );
        assert_eq!((length, episode.num_frames), (length2, episode2.num_frames), "{key:?}");
        assert_eq!(episode.num_frames, 5, "{key:?}");
        assert!(episode.frames == episode2.frames, "{key:?}: frames differ");
        assert_eq!(episode.task, episode2.task);
        assert_eq!(episode.render_quality, Some(RenderQuality::Fast));
        assert_eq!(episode.render_quality, episode2.render_quality);
        let (s, s2) = (episode.state.as_ref().unwrap(), episode2.state.as_ref().unwrap());
        assert_eq!((&s.names, &s.values), (&s2.names, &s2.values), "{key:?}: state");
        let bits = |r: &Option<Vec<f32>>| r.as_ref().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&episode.rewards), bits(&episode2.rewards), "{key:?}: rewards");
    }
    let mut tasks = (a.tasks.clone(), b.tasks.clone());
    tasks.0.sort();
    tasks.1.sort();
    assert_eq!(tasks.0, tasks.1);
    for task in ["cartpole_swingup", "walker_run"] {
        assert_eq!(a.state_names(task), b.state_names(task), "{task}");
        assert!(b.state_names(task).is_some_and(|n| !n.is_empty()), "{task}");
    }

    // A second run with a third episode per task records only those two.
    let (ok, said) = collect(("--dataset", &direct), "3", "fast");
    assert!(ok, "{said}");
    assert!(
        said.contains("wrote 2 episode(s)") && said.contains("kept 4 complete"),
        "{said}"
    );
    assert_eq!(Dataset::open(&direct).unwrap().episodes.len(), 6);
    // Another render quality into the same dataset: refused by name, nothing added.
    refused(
        &direct,
        "4",
        "default",
        &["render quality fast", "another --dataset"],
        6,
    );

    // A dataset holding an episode lfs collect did not record (a video without its sidecar,
    // ingested): refused by name, nothing added.
    let own = dir.path().join("own/cartpole_swingup");
    fs::create_dir_all(&own).unwrap();
    fs::copy(
        crate::common::repo().join("datasets/tiny/videos/cartpole_swingup/00000.mkv"),
        own.join("clip.mkv"),
    )
    .unwrap();
    let theirs = dir.path().join("theirs");
    let out = Command::new(env!("CARGO_BIN_EXE_lfs"))
        .arg("ingest")
        .arg(dir.path().join("own"))
        .arg("--out")
        .arg(&theirs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    refused(
        &theirs,
        "1",
        "fast",
        &["clip.mkv", "was not recorded by lfs collect"],
        1,
    );
}
