//! `lfs train` (docs/design.md §7, the paper's Algorithm 1): the auxiliary objective moves the
//! encoder and the SAC losses do not; its synthetic pairs are the 5-observation queue's pairs
//! of the replay's episodes; and on DMControl (needs `make setup`) a run logs N per update, a
//! killed run resumes to the same results, and bad input is refused by name.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::observation_queue::ObservationQueue;
use candle_core::Device;
use lfs::data::moving_squares::moving_square_episodes;
use lfs::observation::{stack_frames, stack_indices, FRAME_BYTES};
use lfs::rl::{Batch, FeatureDtype, GradientPath, ReplayBuffer, SacAgent};
use lfs::rl_loop::train::online_encoder::synthetic_pairs;
use lfs::rl_loop::train::{OnlineEncoder, TrainConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::common::{lfs_in_repo, output_text as text, repo, run_results, wait_for};

/// pipelines/e2e/tiny.toml at toy agent sizes with `overrides`, on a replay of two 40-frame
/// moving-square episodes (2 actions, reward 0.5).
fn small_setup(overrides: &[&str]) -> (TrainConfig, OnlineEncoder, ReplayBuffer) {
    let mut all = vec!["agent.hidden_dim=32".to_string(), "agent.feature_dim=8".to_string()];
    all.extend(overrides.iter().map(|s| s.to_string()));
    let cfg = TrainConfig::load(&repo().join("pipelines/e2e/tiny.toml"), &all).unwrap();
    let encoder = OnlineEncoder::new(&cfg, &Default::default()).unwrap();
    let mut replay = ReplayBuffer::new(1000, FRAME_BYTES, 2, 0, FeatureDtype::F32);
    for ep in moving_square_episodes("squares", 0, 2, 40, None) {
        replay.start_episode(ep.frame(0)).unwrap();
        for t in 1..ep.num_frames {
            replay.add(&[0.1, -0.2], 0.5, ep.frame(t)).unwrap();
        }
    }
    (cfg, encoder, replay)
}

/// The online encoder's conv parameters, by name.
fn encoder_weights(encoder: &OnlineEncoder) -> BTreeMap<String, Vec<f32>> {
    encoder
        .encoder_tensors()
        .unwrap()
        .into_iter()
        .map(|(name, t)| (name, t.flatten_all().unwrap().to_vec1().unwrap()))
        .collect()
}

#[test]
fn the_objective_moves_the_encoder_and_the_sac_losses_do_not() {
    let (cfg, mut encoder, mut replay) = small_setup(&[]);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let n = cfg.agent.batch_size();
    let t = replay.sample(n, cfg.agent.returns(), &mut rng).unwrap();
    let before = encoder_weights(&encoder);
    assert!(before.len() >= 8, "{:?}", before.keys()); // 4 convs: weight and bias

    // A full SAC update (critic, actor, α, target) on the encoder's features.
    let mut agent = SacAgent::new(
        cfg.agent.get::<SacAgent>().unwrap(),
        encoder.repr_dim(),
        2,
        GradientPath::for_features(&Device::Cpu, false),
        &Device::Cpu,
        &mut rng,
    )
    .unwrap();
    let (obs, next_obs) = (
        encoder.encode(&t.obs, n).unwrap(),
        encoder.encode(&t.next_obs, n).unwrap(),
    );
    let batch = Batch::of(&t, obs, next_obs).unwrap();
    agent.update(&batch, 2, &mut rng).unwrap();
    assert_eq!(encoder_weights(&encoder), before, "the SAC update moved the encoder");
    for (store, params) in agent.param_stores() {
        assert!(
            params.names().iter().all(|name| !name.starts_with("encoder.")),
            "the agent's {store} store holds encoder tensors"
        );
    }

    // One update of the objective moves every encoder tensor.
    let metrics = encoder.update(&t, &replay, None).unwrap().unwrap();
    let after = encoder_weights(&encoder);
    for (name, w) in &before {
        assert_ne!(&after[name], w, "{name} did not move");
    }
    assert_eq!(metrics.num_synthetic + metrics.num_real, n);
    assert!(metrics.loss.is_finite());
}

#[test]
fn with_the_critic_gradient_the_critic_update_moves_the_encoder() {
    // sac-pixel: no objective, the critic's gradient trains the encoder.
    let (cfg, mut encoder, mut replay) = small_setup(&["aux.method=none", "aux.critic_gradient=true"]);
    assert!(encoder.trainer().is_none() && encoder.critic_trains_encoder());
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let n = cfg.agent.batch_size();
    let t = replay.sample(n, cfg.agent.returns(), &mut rng).unwrap();
    assert!(encoder.update(&t, &replay, None).unwrap().is_none()); // no objective to update
    let before = encoder_weights(&encoder);
    let mut agent = SacAgent::new(
        cfg.agent.get::<SacAgent>().unwrap(),
        encoder.repr_dim(),
        2,
        GradientPath::for_features(&Device::Cpu, encoder.critic_trains_encoder()),
        &Device::Cpu,
        &mut rng,
    )
    .unwrap();
    let features = encoder.encode_for_critic(&t.obs, n).unwrap();
    let obs = candle_core::Var::from_tensor(&features.encoded.h).unwrap();
    let batch = Batch::of(&t, obs.as_tensor().clone(), encoder.encode(&t.next_obs, n).unwrap()).unwrap();
    let (_, dh) = agent.update_with_obs_grad(&batch, 1, &mut rng).unwrap();
    let dh = dh.expect("the critic gave no gradient for the observations");
    assert_eq!(dh.dims(), &[n, encoder.repr_dim()]);
    encoder.critic_step(&features, &dh).unwrap();
    let after = encoder_weights(&encoder);
    for (name, w) in &before {
        assert_ne!(&after[name], w, "{name} did not move");
    }
    // Without the switch there is nothing to step.
    let (_, mut detached, _) = small_setup(&[]);
    let err = detached.critic_step(&features, &dh).unwrap_err().to_string();
    assert!(err.contains("critic_gradient"), "{err}");
}

#[test]
fn the_value_comparison_averages_batch_means_and_maxima() {
    use lfs::rl_loop::value_comparison::{ValueComparison, ValueComparisonConfig};
    let cfg = ValueComparisonConfig {
        from_frame: lfs::rl_loop::Frames(100),
        updates: 2,
    };
    let mut w = ValueComparison::new(&cfg).unwrap();
    assert!(!w.wants(98) && w.wants(100));
    w.observe(&[1.0, 3.0], &[2.0]);
    w.observe(&[5.0, 7.0], &[]); // LNC selected nothing: the real side only
    assert!(w.is_complete() && !w.wants(200));
    let r = w.result();
    // Real: means 2 and 6, maxima 3 and 7. Synthetic: one step, 2.
    assert_eq!(
        (r["real"]["mean"].as_f64(), r["real"]["max"].as_f64()),
        (Some(4.0), Some(5.0))
    );
    assert_eq!(
        (r["synthetic"]["mean"].as_f64(), r["synthetic"]["steps"].as_u64()),
        (Some(2.0), Some(1))
    );
    assert!(ValueComparison::new(&ValueComparisonConfig::default()).is_none()); // off by default
}

#[test]
fn every_e2e_pipeline_loads() {
    for name in ["tiny", "mini", "paper"] {
        let cfg = TrainConfig::load(&repo().join(format!("pipelines/e2e/{name}.toml")), &[]).unwrap();
        assert_eq!(cfg.aux.method.objective(), Some(lfs::pretrain::Method::Lfs), "{name}");
        assert!(!cfg.replay.feature_cache && !cfg.aux.critic_gradient, "{name}");
        assert_eq!(
            cfg.trainer_config().unwrap().batch_size,
            cfg.agent.batch_size(),
            "{name}"
        );
    }
}

#[test]
fn synthetic_pairs_are_the_queues_pairs_of_the_stored_episodes() {
    let (_, _, replay) = small_setup(&[]);
    // Every pair Algorithm 1's queue yields over the stored episodes, as (prev, cur) bytes.
    let mut expected = std::collections::HashSet::new();
    for episode in replay.episodes() {
        let mut queue = ObservationQueue::new(FRAME_BYTES);
        for t in 0..episode.num_frames() {
            let mut obs = vec![0u8; 3 * FRAME_BYTES];
            stack_frames(episode, stack_indices(t), &mut obs);
            if let Some(pair) = queue.push(&obs).unwrap() {
                expected.insert((pair.prev, pair.cur));
            }
        }
    }
    assert_eq!(expected.len(), 2 * (40 - 4)); // frames 4..39 of two episodes
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let batch = synthetic_pairs(&replay, 200, &mut rng, (9, 84, 84)).unwrap();
    let obs_len = 9 * 84 * 84;
    let (prev, cur) = (batch.prev.to_host().unwrap(), batch.cur.to_host().unwrap());
    let mut seen = std::collections::HashSet::new();
    for i in 0..batch.len {
        let pair = (
            prev[i * obs_len..(i + 1) * obs_len].to_vec(),
            cur[i * obs_len..(i + 1) * obs_len].to_vec(),
        );
        assert!(expected.contains(&pair), "pair {i} is not one the queue yields");
        seen.insert(pair);
    }
    // 200 uniform draws over 72 pairs reach most of them (a sampler stuck on one episode, or
    // on early frames, would not).
    assert!(seen.len() > 50, "only {} distinct pairs", seen.len());
    // And none before an episode has 5 frames.
    let empty = ReplayBuffer::new(100, FRAME_BYTES, 2, 0, FeatureDtype::F32);
    let err = synthetic_pairs(&empty, 1, &mut rng, (9, 84, 84))
        .unwrap_err()
        .to_string();
    assert!(err.contains("no synthetic pairs yet"), "{err}");
}

/// pipelines/e2e/tiny.toml at toy sizes: cartpole episodes cut at 250 frames (the task's own
/// are 1000, and whole evaluation episodes were most of these runs' time), 1200 frames (four
/// episodes and a bit), updates from frame 800 (200 agent steps of LFS + SAC), evaluations at
/// frames 0 and 1200 (one before the kill of the resume tests, one after), a checkpoint at the
/// first episode end from frame 1000 (frame 1000).
const SMALL: [&str; 12] = [
    "env.render_quality=fast",
    "env.episode_frames=250",
    "agent.hidden_dim=32",
    "agent.feature_dim=8",
    "aux.model.predictor_hidden_dim=64",
    "aux.model.num_prototypes=32",
    "run.num_train_frames=1200",
    "run.num_seed_frames=800",
    "run.eval_every_frames=1200",
    "run.num_eval_episodes=1",
    "run.checkpoint_every_frames=1000",
    "replay.capacity=5000",
];

fn train_command(out: &Path, extra: &[&str]) -> Command {
    train_command_with("pipelines/e2e/tiny.toml", out, extra)
}

/// `lfs train --config <config>` on cartpole_swingup at the tests' small settings.
pub(crate) fn train_command_with(config: &str, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = lfs_in_repo();
    cmd.args(["train", "--config", config, "--task", "cartpole_swingup", "--out-dir"])
        .arg(out);
    for s in SMALL {
        cmd.args(["--set", s]);
    }
    cmd.args(extra);
    cmd
}

/// `aux.jsonl` without its timings.
fn aux_lines(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("aux.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut()
                .unwrap()
                .retain(|k, _| !k.contains("seconds") && !k.contains("per_s"));
            v
        })
        .collect()
}

#[test]
fn a_killed_lfs_train_run_logs_n_per_update_and_resumes_to_the_same_results() {
    // With the value comparison's window (frames 800–1200) across the checkpoint at 1000.
    let args = [
        "--set",
        "aux.value_comparison.from_frame=800",
        "--set",
        "aux.value_comparison.updates=200",
    ];
    killed_run_resumes_to_the_same_results(Resumed {
        config: "pipelines/e2e/tiny.toml",
        extra: &args,
        encoder_id: "online:lfs:init=random:1",
        objective: true,
        last_episode_updates: 100,
        another: &["--set", "aux.method=lfs-cl"],
        // The killed and resumed run makes its batches and the objective's pairs as a GPU does,
        // from the replay's frames on the device (src/rl/device_frames.rs): the same results.
        resumed_env: &[("LFS_GPU_PATHS_ON_CPU", "replay-frames")],
        resumed_says: "replay frames on the device",
    });
}

#[test]
fn a_killed_sac_pixel_run_resumes_to_the_same_results() {
    // SAC from pixels: no objective, the critic's gradient trains the encoder.
    let args = ["--set", "aux.method=none", "--set", "aux.critic_gradient=true"];
    killed_run_resumes_to_the_same_results(Resumed {
        config: "pipelines/e2e/tiny.toml",
        extra: &args,
        encoder_id: "online:none+critic:init=random:1",
        objective: false,
        last_episode_updates: 100,
        another: &["--set", "aux.method=lfs-cl"],
        resumed_env: &[],
        resumed_says: "",
    });
}

/// A run of [`killed_run_resumes_to_the_same_results`].
pub(crate) struct Resumed<'a> {
    /// The `lfs train` config.
    pub config: &'a str,
    /// Arguments after the tests' small settings.
    pub extra: &'a [&'a str],
    /// The encoder's provenance id the run prints.
    pub encoder_id: &'a str,
    /// Whether it has an auxiliary objective (`aux.jsonl`).
    pub objective: bool,
    /// Agent updates in the last whole episode (frames 750–1000: 125 agent steps, the last 100
    /// after the seed frames).
    pub last_episode_updates: u64,
    /// Arguments that make another config, which must not resume the checkpoint.
    pub another: &'a [&'a str],
    /// Environment variables of the killed and resumed run only (the whole run's are unset):
    /// a way of computing that must give the same results.
    pub resumed_env: &'a [(&'a str, &'a str)],
    /// What the resumed run says it does differently ("" when nothing).
    pub resumed_says: &'a str,
}

/// Runs `lfs train` whole, and again killed after its checkpoint and resumed: both end with
/// the same evaluations, episode logs and (with an objective) `aux.jsonl`.
pub(crate) fn killed_run_resumes_to_the_same_results(run: Resumed) {
    let Resumed {
        config,
        extra,
        encoder_id,
        objective,
        last_episode_updates,
        another,
        resumed_env,
        resumed_says,
    } = run;
    let train_command = |out: &Path, extra: &[&str]| train_command_with(config, out, extra);
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    let result = train_command(&whole, extra).output().unwrap();
    assert!(result.status.success(), "{}", text(&result));
    let said = text(&result);
    assert!(said.contains(&format!("encoder {encoder_id}")), "{said}");
    let (rows, episodes) = run_results(&whole);
    // The header and the evaluations at frames 0 and 1200.
    assert_eq!(rows.len(), 3, "{rows:?}");
    // Four whole episodes; the last (frames 750–1000) is 125 agent steps, its last 100 after
    // the seed frames.
    assert_eq!(episodes.len(), 4, "{episodes:?}");
    assert_eq!(episodes[3]["train/num_updates"], last_episode_updates);
    // An episode with updates logs the agent's means (one without has none: tests/drqv2.rs).
    assert!(
        episodes[3]["train/critic_loss"].as_f64().is_some_and(f64::is_finite),
        "{}",
        episodes[3]
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(whole.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["command"], "train");
    if objective {
        // One line per update: 200 agent steps after the seed frames, each with N and the frame.
        let aux = aux_lines(&whole);
        assert_eq!(aux.len(), 200);
        for (i, line) in aux.iter().enumerate() {
            assert_eq!(line["step"], i as u64 + 1);
            assert_eq!(line["train/frame"], 800 + 2 * i as u64);
            let n = line["pretrain/num_synthetic"].as_u64().unwrap();
            assert!(
                n <= 16 && n + line["pretrain/num_real"].as_u64().unwrap() == 16,
                "{line}"
            );
        }
        assert!(episodes[3]["train/aux_loss"].as_f64().is_some_and(f64::is_finite));
        assert!(episodes[3]["train/aux_num_synthetic"].as_f64().is_some());
    } else {
        assert!(!whole.join("aux.jsonl").exists());
        assert!(episodes[3].get("train/aux_loss").is_none());
    }

    // Killed once its checkpoint (frame 1000) is on disk, then run again.
    let killed = dir.path().join("killed");
    let mut child = train_command(&killed, extra)
        .envs(resumed_env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&mut child, 600, "the first checkpoint", || {
        killed.join("checkpoint.safetensors").exists()
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let result = train_command(&killed, extra)
        .envs(resumed_env.iter().copied())
        .output()
        .unwrap();
    let said = text(&result);
    assert!(result.status.success(), "{said}");
    assert!(said.contains("resuming at frame 1000"), "{said}");
    assert!(said.contains(resumed_says), "{said}");
    assert_eq!(run_results(&killed), run_results(&whole));
    // TensorBoard's copy of each (with aux.jsonl's updates): every point once.
    crate::common::check_tensorboard(&whole);
    crate::common::check_tensorboard(&killed);
    if objective {
        assert_eq!(aux_lines(&killed), aux_lines(&whole));
        let values = |dir: &Path| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(dir.join("value_comparison.json")).unwrap()).unwrap()
        };
        let v = values(&whole);
        assert_eq!(v["updates"], 200);
        assert_eq!(v["real"]["steps"], 200);
        assert!(v["real"]["max"].as_f64().unwrap() >= v["real"]["mean"].as_f64().unwrap());
        assert_eq!(values(&killed), v);
    }

    // Another config does not resume this checkpoint.
    let other = [extra, another].concat();
    let result = train_command(&killed, &other).output().unwrap();
    assert_eq!(result.status.code(), Some(2), "{}", text(&result));
    assert!(text(&result).contains("different config"), "{}", text(&result));
}

#[test]
fn bad_train_input_is_refused_by_name_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let not_export = dir.path().join("encoder.safetensors");
    std::fs::write(&not_export, b"not a safetensors file").unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--set", "aux.method=byol"], "unknown variant `byol`"),
        (
            &["--set", "replay.feature_cache=true"],
            "replay.feature_cache must be false with aux.method = lfs",
        ),
        (
            &["--set", "aux.objective.lnc.k=16"],
            "aux: objective.lnc.k = 16 must be < the batch size M = 16",
        ),
        (&["--init-encoder", not_export.to_str().unwrap()], "encoder.safetensors"),
    ];
    for (args, expected) in cases {
        let result = train_command(&out, args).output().unwrap();
        let said = text(&result);
        assert_eq!(result.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(expected), "{args:?}: {said}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}
