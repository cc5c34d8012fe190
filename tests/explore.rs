//! `lfs explore` (docs/design.md §15): Proto-RL's representation step and intrinsic reward
//! against the float64 transcription of denisyarats/proto (eval/reference/proto_reference.py,
//! which names the commit and lines), the loop end to end on DMControl with an exact resume,
//! and bad input refused with nothing written. The SAC update Proto-RL explores with is §6's,
//! checked against the same upstream in tests/sac.rs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use lfs::device::Backend;
use lfs::nn::checkpoint::rng_to_string;
use lfs::nn::EncoderConfig;
use lfs::rl::{Batch, FeatureDtype, ReplayBuffer, Transitions};
use lfs::rl_loop::explore::proto::queue::KnnQueue;
use lfs::rl_loop::explore::proto::{Proto, ProtoConfig};
use lfs::rl_loop::explore::Explorer;
use lfs::rl_loop::RepresentationState;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::{lfs, output_text, repo, temp_dir, values};
use crate::drqv2::{assert_close, flat, tensor};

fn fixture() -> Value {
    let path = repo().join("eval/reference/proto_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn pixels(v: &Value) -> Vec<u8> {
    flat(v).into_iter().map(|x| x as u8).collect()
}

/// Proto-RL at the fixture's toy sizes, its state set to the fixture's `params_before`.
fn fixture_proto(f: &Value) -> Proto {
    let sizes = &f["sizes"];
    let size = |k: &str| sizes[k].as_u64().unwrap() as usize;
    let encoder = EncoderConfig {
        in_channels: size("in_channels"),
        image_size: size("image"),
        num_filters: size("num_filters"),
        num_layers: size("num_layers"),
        ..EncoderConfig::default()
    };
    let cfg = ProtoConfig {
        latent_dim: size("latent"),
        predictor_hidden_dim: size("predictor_hidden"),
        num_prototypes: size("num_protos"),
        queue_size: size("queue"),
        topk: size("topk"),
        ..ProtoConfig::default()
    };
    let mut proto = Proto::new(&cfg, &encoder, 1, size("batch"), 0, 1, &Backend::new(&Device::Cpu)).unwrap();
    let before = &f["params_before"];
    let mut tensors = BTreeMap::new();
    let mut online = BTreeMap::new();
    for group in ["encoder", "proto"] {
        for (name, v) in before[group].as_object().unwrap() {
            online.insert(name.clone(), tensor(v));
        }
    }
    for (name, t) in &online {
        tensors.insert(format!("trainer.online.{name}"), t.clone());
        for kind in ["exp_avg", "exp_avg_sq"] {
            tensors.insert(format!("trainer.adam.{kind}.{name}"), t.zeros_like().unwrap());
        }
    }
    for (name, v) in before["encoder_target"].as_object().unwrap() {
        tensors.insert(format!("trainer.target.{name}"), tensor(v));
    }
    tensors.insert("queue.0".into(), tensor(&f["inputs"]["queue"]));
    let rng = rng_to_string(&ChaCha8Rng::seed_from_u64(7));
    let counters = BTreeMap::from([
        ("trainer.step".to_string(), "0".to_string()),
        ("trainer.adam_step".to_string(), "0".to_string()),
        ("trainer.rng".to_string(), rng.clone()),
        ("queue_ptr.0".to_string(), f["inputs"]["queue_ptr"].to_string()),
        ("calls.0".to_string(), "0".to_string()),
        ("proto_rng".to_string(), rng),
    ]);
    proto
        .load_state(&RepresentationState { tensors, counters }, Path::new("fixture"))
        .unwrap();
    proto
}

/// One exploration update of Proto-RL on the fixture's batch: the clustering step of the
/// encoder, projector, predictor and prototypes (loss, every parameter after Adam, the EMA
/// target), the features SAC then reads, the reward's projections and its kNN over the queue.
#[test]
fn one_proto_rl_update_matches_a_float64_transcription_of_upstream() {
    let f = fixture();
    let b = f["sizes"]["batch"].as_u64().unwrap() as usize;
    let mut proto = fixture_proto(&f);
    let (obs, next_obs) = (pixels(&f["augmented"]["obs"]), pixels(&f["augmented"]["next_obs"]));
    let t = Transitions {
        len: b,
        obs: obs.clone(),
        next_obs: next_obs.clone(),
        obs_features: vec![],
        next_obs_features: vec![],
        action: flat(&f["inputs"]["action"]).into_iter().map(|x| x as f32).collect(),
        reward: vec![0.0; b],
        discount: vec![0.99; b],
        nstep: 1,
        action_seq: vec![],
        seq_obs: vec![],
        locations: vec![],
    };
    let replay = ReplayBuffer::new(100, obs.len() / b, 2, 0, FeatureDtype::F32);
    let terms = proto.update_before_encoding(0, &t, &replay).unwrap();
    assert_close(
        &[terms["repr_loss"]],
        &[f["repr"]["loss"].as_f64().unwrap()],
        1e-5,
        "repr loss",
    );
    // The reward's in-place normalisation of the stepped prototypes, as upstream's.
    let protos = proto.normalized_prototypes().unwrap();
    let after = &f["params_after"];
    let online = proto.trainer().online_params().snapshot().unwrap();
    for group in ["encoder", "proto"] {
        for (name, v) in after[group].as_object().unwrap() {
            let ours = match name.as_str() {
                "protos.weight" => protos.iter().map(|x| f64::from(*x)).collect(),
                _ => values(&online[name]),
            };
            assert_close(&ours, &flat(v), 1e-5, &format!("{name} after the update"));
        }
    }
    let target = proto.trainer().target_params().snapshot().unwrap();
    for (name, v) in after["encoder_target"].as_object().unwrap() {
        assert_close(&values(&target[name]), &flat(v), 1e-5, &format!("target {name}"));
    }
    // Features of the updated encoder (SAC's h and h'), then the reward's z = normalize(g(h')).
    let encode = |px: &[u8]| proto.encoder().encode(px, b, false).unwrap().h;
    let (h, h_next) = (encode(&obs), encode(&next_obs));
    assert_close(&values(&h), &flat(&f["critic"]["obs_h"]), 1e-5, "h");
    assert_close(&values(&h_next), &flat(&f["critic"]["next_h"]), 1e-5, "h'");
    let z = proto.projections(&h_next).unwrap();
    let z64: Vec<f64> = z.iter().map(|x| f64::from(*x)).collect();
    assert_close(&z64, &flat(&f["reward"]["z"]), 1e-5, "z");
    // The kNN over the queue with upstream's draw of candidates, on our z.
    let candidates: Vec<usize> = flat(&f["inputs"]["candidates"])
        .into_iter()
        .map(|c| c as usize)
        .collect();
    let mut queue = proto.queue(0).clone();
    let out = queue.push_and_reward(&z, &candidates, 3).unwrap();
    let reward: Vec<f64> = out.reward.iter().map(|x| f64::from(*x)).collect();
    assert_close(&reward, &flat(&f["reward"]["reward"]), 1e-5, "reward");
    let rows: Vec<f64> = queue.rows.iter().map(|x| f64::from(*x)).collect();
    assert_close(&rows, &flat(&f["reward"]["queue_after"]), 1e-5, "queue after");
    assert_eq!(queue.ptr as u64, f["reward"]["queue_ptr_after"].as_u64().unwrap());
    // And through the explorer: the same queue update with its own draw.
    let batch = Batch {
        obs: h,
        action: Tensor::zeros((b, 2), candle_core::DType::F32, &Device::Cpu).unwrap(),
        reward: Tensor::zeros((b, 1), candle_core::DType::F32, &Device::Cpu).unwrap(),
        discount: Tensor::ones((b, 1), candle_core::DType::F32, &Device::Cpu).unwrap(),
        next_obs: h_next,
    };
    let r = proto.intrinsic_reward(0, &batch, None, &obs, &next_obs).unwrap();
    assert_eq!(r.reward.dims(), [b, 1]);
    assert!(values(&r.reward).iter().all(|x| x.is_finite() && *x >= 0.0));
}

/// A zero queue at ptr 0 (upstream's first call): the k-th nearest row is a never-written
/// zero row for most samples, exactly as upstream computes it.
#[test]
fn the_knn_reward_on_a_fresh_queue_is_upstreams() {
    let f = fixture();
    let fresh = &f["reward_fresh_queue"];
    let (size, dim) = (
        f["sizes"]["queue"].as_u64().unwrap() as usize,
        f["sizes"]["latent"].as_u64().unwrap() as usize,
    );
    let mut queue = KnnQueue::new(size, dim);
    let z: Vec<f32> = flat(&f["reward"]["z"]).into_iter().map(|x| x as f32).collect();
    let candidates: Vec<usize> = flat(&fresh["candidates"]).into_iter().map(|c| c as usize).collect();
    let out = queue.push_and_reward(&z, &candidates, 3).unwrap();
    let reward: Vec<f64> = out.reward.iter().map(|x| f64::from(*x)).collect();
    assert_close(&reward, &flat(&fresh["reward"]), 1e-6, "fresh reward");
    assert_eq!(queue.ptr as u64, fresh["queue_ptr_after"].as_u64().unwrap());
}

/// Each prototype's candidate is drawn from its softmax over the batch (upstream's
/// Categorical): draw frequencies against the fixture's p over many draws.
#[test]
fn candidates_follow_each_prototypes_softmax_over_the_batch() {
    let f = fixture();
    let dim = f["sizes"]["latent"].as_u64().unwrap() as usize;
    let z: Vec<f32> = flat(&f["reward"]["z"]).into_iter().map(|x| x as f32).collect();
    let protos: Vec<f32> = flat(&f["reward"]["protos_normalized"])
        .into_iter()
        .map(|x| x as f32)
        .collect();
    let p = &f["reward"]["p"]; // (K, B)
    let (k, b) = (p.as_array().unwrap().len(), p[0].as_array().unwrap().len());
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let draws = 20_000;
    let mut counts = vec![vec![0usize; b]; k];
    for _ in 0..draws {
        for (j, row) in KnnQueue::draw_candidates(&z, &protos, dim, &mut rng)
            .into_iter()
            .enumerate()
        {
            counts[j][row] += 1;
        }
    }
    for j in 0..k {
        for i in 0..b {
            let expected = p[j][i].as_f64().unwrap();
            let seen = counts[j][i] as f64 / draws as f64;
            // 5 standard errors of a binomial proportion.
            let se = (expected * (1.0 - expected) / draws as f64).sqrt();
            assert!(
                (seen - expected).abs() <= 5.0 * se + 1e-9,
                "prototype {j}, row {i}: {seen} vs {expected}"
            );
        }
    }
}

const TINY: &str = "pipelines/explore/proto/tiny.toml";

/// A short tiny run's overrides: `frames` per domain with updates after 200, in two domains
/// whose episodes are 125 agent steps long (250 frames), so every episode end is a checkpoint;
/// rendered fast (no shadow map, no multisampling: ~4x cheaper on a CPU's software renderer),
/// which the export then records; a small SAC beside the encoder (its trunk's 39200 × 50
/// product and 1024-unit MLPs were a third of an update's time).
fn short(frames: u64) -> Vec<String> {
    vec![
        "--set".into(),
        "env.render_quality=fast".into(),
        "--set".into(),
        "agent.hidden_dim=32".into(),
        "--set".into(),
        "agent.feature_dim=8".into(),
        "--set".into(),
        format!("run.num_train_frames={frames}"),
        "--set".into(),
        "run.num_seed_frames=200".into(),
        "--set".into(),
        "run.checkpoint_every_frames=250".into(),
        "--set".into(),
        "explore.tasks=[\"reach_duplo\", \"jaco_reach_top_left\"]".into(),
    ]
}

fn explore(out: &Path, frames: u64, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<String> = vec!["explore".into(), "--config".into(), TINY.into()];
    args.extend(short(frames));
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--out-dir".into(), out.display().to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    lfs(&refs)
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The loop on DMControl: two domains explored in turn leave an encoder `lfs probe` and
/// `lfs eval` read (the export format), per-domain logs with the intrinsic reward and the state
/// entropy, the run's picture of both, and a run
/// stopped at a checkpoint and resumed ends exactly as an uninterrupted one (logs, encoder).
#[test]
fn an_exploration_run_resumes_exactly_and_leaves_an_export() {
    let (whole, parts) = (temp_dir("explore-whole"), temp_dir("explore-parts"));
    let out = explore(&whole, 500, &[]);
    assert!(out.status.success(), "{}", output_text(&out));
    let out = explore(&parts, 250, &[]);
    assert!(out.status.success(), "{}", output_text(&out));
    let out = explore(&parts, 500, &[]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("resuming at frame 250"),
        "{}",
        output_text(&out)
    );
    for task in ["reach_duplo", "jaco_reach_top_left"] {
        let (a, b) = (
            read(whole.join(task).join("train.jsonl")),
            read(parts.join(task).join("train.jsonl")),
        );
        let strip = |s: &str| -> Vec<Value> {
            s.lines()
                .map(|l| {
                    let mut v: Value = serde_json::from_str(l).unwrap();
                    let m = v.as_object_mut().unwrap();
                    m.retain(|k, _| !k.starts_with("time/") && k != "train/fps");
                    v
                })
                .collect()
        };
        assert_eq!(strip(&a), strip(&b), "{task}: train.jsonl");
        assert!(a.contains("explore/intrinsic_reward"), "{a}");
        assert!(a.contains("train/state_entropy"), "{a}");
    }
    // The run's picture: each domain's intrinsic reward and state entropy.
    for dir in [&whole, &parts] {
        let svg = read(dir.join("exploration.svg"));
        assert!(svg.contains("reach_duplo: state entropy"), "{svg}");
        assert!(dir.join("exploration.png").is_file());
    }
    let (ea, eb) = (whole.join("encoder.safetensors"), parts.join("encoder.safetensors"));
    let load = |p: &Path| lfs::nn::checkpoint::load(p).unwrap().tensors;
    let (ta, tb) = (load(&ea), load(&eb));
    assert_eq!(ta.keys().collect::<Vec<_>>(), tb.keys().collect::<Vec<_>>());
    for (k, v) in &ta {
        assert_eq!(values(v), values(&tb[k]), "{k}");
    }
    // The export reads back as every other encoder does.
    let frozen = lfs::nn::encoder_file::load_frozen_encoder(&ea).unwrap();
    assert_eq!(frozen.encoder.repr_dim(), 39200);
    assert_eq!(frozen.metadata["lfs.method"], "proto");
    // The render quality it explored at, for `env.render_quality = "encoder"` downstream.
    let export = lfs::nn::encoder_file::ExportFile::read(&ea).unwrap();
    assert_eq!(export.training_render_quality(), Some(lfs::env::RenderQuality::Fast));
}

/// Bad input: a task reward, a mismatched agent, an unknown domain, a resume with a changed
/// intrinsic-reward setting, and `lfs export` on an exploration run: each a clear error, and
/// nothing written (or the run's files untouched).
#[test]
fn bad_exploration_input_is_refused_with_nothing_written() {
    let dir = temp_dir("explore-bad");
    let refused = |extra: &[&str], needle: &str| {
        let out_dir = dir.join("never");
        let out = explore(&out_dir, 500, extra);
        let text = output_text(&out);
        assert!(!out.status.success() && text.contains(needle), "{extra:?}: {text}");
        assert!(!out_dir.exists(), "{extra:?} wrote {}", out_dir.display());
    };
    refused(&["--set", "explore.reward=\"task\""], "reward-free");
    refused(&["--set", "agent.kind=\"drqv2\""], "explores with agent.kind = \"sac\"");
    refused(&["--set", "explore.tasks=[\"walker_sprint\"]"], "unknown task");
    refused(
        &["--set", "explore.proto.queue_size=20"],
        "multiple of explore.proto.num_prototypes",
    );
    let run = dir.join("run");
    let out = explore(&run, 250, &[]);
    assert!(out.status.success(), "{}", output_text(&out));
    let before = read(run.join("reach_duplo").join("train.jsonl"));
    let out = explore(&run, 500, &["--set", "explore.proto.topk=2"]);
    let text = output_text(&out);
    assert!(!out.status.success() && text.contains("topk"), "{text}");
    assert_eq!(read(run.join("reach_duplo").join("train.jsonl")), before);
    let ckpt = run.join("checkpoint").join("reach_duplo.safetensors");
    let out = lfs(&[
        "export",
        ckpt.to_str().unwrap(),
        "--out",
        dir.join("e.safetensors").to_str().unwrap(),
    ]);
    let text = output_text(&out);
    assert!(!out.status.success() && text.contains("encoder.safetensors"), "{text}");
    assert!(!dir.join("e.safetensors").exists());
}
