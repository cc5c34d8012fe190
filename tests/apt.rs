//! APT (URLB's `icm_apt`, docs/design.md §15) against the float64 PyTorch transcription of one
//! update, eval/reference/apt_reference.py (rll-research/url_benchmark @bb98f0c; its gradients
//! checked there by finite differences), at its toy sizes: the random shift, the encoder's
//! features, the ICM's loss with its parts and every gradient, both Adams' steps, the intrinsic
//! reward, PBE in all four kNN settings with the running mean carried over two calls, and the
//! DDPG critic and actor (DrQ-v2's agent) on that reward with the fixture's noise. Then the
//! export's folded input offset and the explorer's state round trip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use lfs::data::RandomShift;
use lfs::device::Backend;
use lfs::nn::{Encoder, EncoderConfig, Params};
use lfs::rl::{Batch, DrQv2Agent, DrQv2Config};
use lfs::rl_loop::explore::apt::pbe::{knn, pairwise_distances, pbe_reward, PbeSettings, RunningMeanStd};
use lfs::rl_loop::explore::apt::{Apt, AptConfig};
use lfs::rl_loop::explore::Explorer;
use lfs::rl_loop::RepresentationState;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::values;
use crate::drqv2::{array, assert_close, flat, tensor};

fn fixture() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("eval/reference/apt_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn size(f: &Value, key: &str) -> usize {
    f["sizes"][key].as_u64().unwrap() as usize
}

/// The fixture's toy encoder: 10×10 images, 16 filters, 2 layers, `obs / 255 − 0.5`.
fn encoder_config(f: &Value) -> EncoderConfig {
    EncoderConfig {
        in_channels: size(f, "in_channels"),
        image_size: size(f, "image"),
        num_filters: size(f, "num_filters"),
        num_layers: size(f, "num_layers"),
        input_offset: f["hyper"]["input_offset"].as_f64().unwrap(),
        ..EncoderConfig::default()
    }
}

fn apt_config(f: &Value) -> AptConfig {
    let h = &f["hyper"];
    AptConfig {
        icm_rep_dim: size(f, "icm_rep"),
        icm_hidden_dim: size(f, "icm_hidden"),
        knn_k: size(f, "knn_k"),
        knn_avg: h["knn_avg"].as_bool().unwrap(),
        knn_rms: h["knn_rms"].as_bool().unwrap(),
        knn_clip: h["knn_clip"].as_f64().unwrap(),
        ..AptConfig::default()
    }
}

/// A group of named tensors of the fixture (`params_before.encoder`, ...).
fn tensors(group: &Value) -> BTreeMap<String, Tensor> {
    group
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, v)| (name.clone(), tensor(v)))
        .collect()
}

/// An explorer of one domain at the fixture's sizes, with its `params_before` (the Adams fresh).
fn fixture_apt(f: &Value, seed: u64) -> Apt {
    fixture_apt_on(f, seed, &Backend::new(&Device::Cpu))
}

/// [`fixture_apt`] on `backend`.
fn fixture_apt_on(f: &Value, seed: u64, backend: &Backend) -> Apt {
    let apt = Apt::new(
        &apt_config(f),
        &encoder_config(f),
        &[size(f, "action")],
        backend,
        &mut ChaCha8Rng::seed_from_u64(seed),
    )
    .unwrap();
    apt.encoder_params()
        .load_from(&tensors(&f["params_before"]["encoder"]))
        .unwrap();
    apt.icm_params(0)
        .unwrap()
        .load_from(&tensors(&f["params_before"]["icm"]))
        .unwrap();
    apt
}

/// The fixture's pixels `inputs.{key}` (B, 9, 10, 10), shifted by `inputs.{key}_shift` with
/// our random shift; checked against the fixture's `augmented.{key}`.
fn shifted(f: &Value, key: &str) -> Vec<u8> {
    let (pixels, shape) = array(&f["inputs"][key]);
    let pixels: Vec<u8> = pixels.iter().map(|&v| v as u8).collect();
    let (b, dims) = (shape[0], (shape[1], shape[2], shape[3]));
    let len = dims.0 * dims.1 * dims.2;
    let shift = RandomShift {
        pad: f["hyper"]["pad"].as_u64().unwrap() as usize,
    };
    let shifts = f["inputs"][format!("{key}_shift")].as_array().unwrap();
    let mut out = vec![0u8; pixels.len()];
    for i in 0..b {
        let s = shifts[i].as_array().unwrap();
        // The fixture's shift is [x (column), y (row)]; ours is (rows, columns).
        let (sx, sy) = (s[0].as_u64().unwrap() as usize, s[1].as_u64().unwrap() as usize);
        shift.shift_image(
            &pixels[i * len..(i + 1) * len],
            dims,
            (sy, sx),
            &mut out[i * len..(i + 1) * len],
        );
    }
    let ours: Vec<f64> = out.iter().map(|&v| f64::from(v)).collect();
    assert_close(&ours, &flat(&f["augmented"][key]), 0.0, &format!("shifted {key}"));
    out
}

/// Every tensor of `params` against the fixture's group `expected`, by name.
fn check_params(params: &Params, expected: &Value, tol: f64, what: &str) -> f64 {
    let expected = expected.as_object().unwrap();
    assert_eq!(params.names().len(), expected.len(), "{what}: {:?}", params.names());
    let mut worst = 0f64;
    for (name, var) in params.iter() {
        let ours = values(var.as_tensor());
        let want = flat(&expected[name]);
        assert_close(&ours, &want, tol, &format!("{what} {name}"));
        worst = worst.max(max_error(&ours, &want));
    }
    worst
}

/// max |a − b| / max(1, |b|).
fn max_error(ours: &[f64], expected: &[f64]) -> f64 {
    ours.iter()
        .zip(expected)
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0.0, f64::max)
}

#[test]
fn one_icm_update_is_urlbs() {
    let f = fixture();
    let b = size(&f, "batch");
    let mut apt = fixture_apt(&f, 0);
    let obs = shifted(&f, "obs");
    let next_obs = shifted(&f, "next_obs");
    // h and h' of the encoder before its step, on obs / 255 − 0.5.
    let h = apt.encoder().encode(&obs, b, false).unwrap().h;
    let next_h = apt.encoder().encode(&next_obs, b, false).unwrap().h;
    let icm = &f["icm"];
    assert_close(&values(&h), &flat(&icm["h"]), 1e-5, "h");
    assert_close(&values(&next_h), &flat(&icm["next_h"]), 1e-5, "h'");

    let action = tensor(&f["inputs"]["action"]);
    let update = apt.update(0, &obs, &next_h, &action).unwrap();
    assert_close(&[update.loss], &[icm["loss"].as_f64().unwrap()], 1e-5, "ICM loss");
    assert_close(
        &values(&update.forward_error),
        &flat(&icm["forward_error"]),
        1e-5,
        "forward error",
    );
    assert_close(
        &values(&update.backward_error),
        &flat(&icm["backward_error"]),
        1e-5,
        "backward error",
    );
    // f32 sums against float64: 1e-4 relative (to values of at least 1), as tests/drqv2.rs.
    let expected_grads = icm["grads"].as_object().unwrap();
    assert_eq!(
        update.grads.keys().collect::<Vec<_>>(),
        expected_grads.keys().collect::<Vec<_>>()
    );
    let mut worst_grad = 0f64;
    for (name, g) in &update.grads {
        let (ours, want) = (values(g), flat(&expected_grads[name]));
        assert_close(&ours, &want, 1e-4, &format!("d loss / d {name}"));
        worst_grad = worst_grad.max(max_error(&ours, &want));
    }
    assert_close(&values(&update.grad_h), &flat(&icm["grad_h"]), 1e-4, "d loss / d h");
    // One step of each Adam.
    let after = &f["params_after"];
    let worst_encoder = check_params(apt.encoder_params(), &after["encoder"], 1e-5, "encoder after");
    let worst_icm = check_params(apt.icm_params(0).unwrap(), &after["icm"], 1e-5, "icm after");
    // The reward: the stepped trunk on the pre-step h.
    let reward = values(&update.reward);
    assert_close(&reward, &flat(&f["reward"]["reward"]), 1e-5, "intrinsic reward");
    eprintln!(
        "apt: loss {:.2e}, grads {worst_grad:.2e}, encoder after {worst_encoder:.2e}, icm after \
         {worst_icm:.2e}, reward {:.2e}",
        (update.loss - icm["loss"].as_f64().unwrap()).abs(),
        max_error(&reward, &flat(&f["reward"]["reward"]))
    );
    assert_eq!(apt.updates(), 1);
}

/// The seam: `intrinsic_reward` on a batch whose features are the encoder's, its reward on the
/// batch's device and its terms, the same update as [`one_icm_update_is_urlbs`].
#[test]
fn the_explorer_seam_gives_the_reward_and_terms() {
    let f = fixture();
    let b = size(&f, "batch");
    let mut apt = fixture_apt(&f, 1);
    let (obs, next_obs) = (shifted(&f, "obs"), shifted(&f, "next_obs"));
    let batch = Batch {
        obs: apt.encoder().encode(&obs, b, false).unwrap().h,
        action: tensor(&f["inputs"]["action"]),
        reward: tensor(&f["inputs"]["extr_reward"]),
        discount: tensor(&f["inputs"]["discount"]),
        next_obs: apt.encoder().encode(&next_obs, b, false).unwrap().h,
    };
    // As the loop calls it: O_t encoded once, with its tape (`wants_obs_tape`).
    assert!(apt.wants_obs_tape());
    let encoded = apt.encoder().encode(&obs, b, true).unwrap();
    let out = apt
        .intrinsic_reward(0, &batch, Some(&encoded), &obs, &next_obs)
        .unwrap();
    assert_eq!(out.reward.dims(), [b, 1]);
    assert_close(&values(&out.reward), &flat(&f["reward"]["reward"]), 1e-5, "reward");
    let icm = &f["icm"];
    let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
    let expected = [
        ("icm_loss", icm["loss"].as_f64().unwrap()),
        ("forward_error", mean(flat(&icm["forward_error"]))),
        ("backward_error", mean(flat(&icm["backward_error"]))),
        ("intrinsic_reward", mean(flat(&f["reward"]["reward"]))),
    ];
    assert_eq!(out.terms.len(), expected.len(), "{:?}", out.terms);
    for (name, value) in expected {
        assert_close(&[out.terms[name]], &[value], 1e-5, name);
    }
    check_params(
        apt.encoder_params(),
        &f["params_after"]["encoder"],
        1e-5,
        "encoder after",
    );
    check_params(apt.icm_params(0).unwrap(), &f["params_after"]["icm"], 1e-5, "icm after");
}

/// The GPU's code path (candle's conv2d and autograd through the encoder, `Compute::Candle`), run
/// on the CPU: the same update as the kernels' against the reference.
#[test]
fn the_candle_path_gives_the_same_update() {
    let f = fixture();
    let b = size(&f, "batch");
    let mut apt = fixture_apt_on(&f, 0, &Backend::candle(&Device::Cpu));
    let (obs, next_obs) = (shifted(&f, "obs"), shifted(&f, "next_obs"));
    let next_h = apt.encoder().encode(&next_obs, b, false).unwrap().h;
    let update = apt.update(0, &obs, &next_h, &tensor(&f["inputs"]["action"])).unwrap();
    assert_close(&[update.loss], &[f["icm"]["loss"].as_f64().unwrap()], 1e-5, "ICM loss");
    let grads = f["icm"]["grads"].as_object().unwrap();
    for (name, g) in &update.grads {
        assert_close(&values(g), &flat(&grads[name]), 1e-4, &format!("d loss / d {name}"));
    }
    check_params(
        apt.encoder_params(),
        &f["params_after"]["encoder"],
        1e-5,
        "encoder after",
    );
    check_params(apt.icm_params(0).unwrap(), &f["params_after"]["icm"], 1e-5, "icm after");
    assert_close(&values(&update.reward), &flat(&f["reward"]["reward"]), 1e-5, "reward");
}

/// `utils.PBE` in its four settings (knn_avg × knn_rms, clip 1e-4 with the running mean), two
/// calls each so the running mean carries; and the distances and kNN of the update's reward.
#[test]
fn pbe_is_urlbs_in_every_setting() {
    let f = fixture();
    let k = size(&f, "knn_k");
    let r = &f["reward"];
    let (rep, shape) = array(&r["rep"]);
    let (b, dim) = (shape[0], shape[1]);
    let d = pairwise_distances(&rep, b, dim).unwrap();
    assert_close(&d, &flat(&r["distances"]), 1e-12, "distances");
    assert_close(&knn(&d, b, k).unwrap(), &flat(&r["knn"]), 1e-12, "knn");
    for case in f["pbe_cases"].as_array().unwrap() {
        let settings = PbeSettings {
            knn_k: k,
            knn_avg: case["knn_avg"].as_bool().unwrap(),
            knn_rms: case["knn_rms"].as_bool().unwrap(),
            knn_clip: case["knn_clip"].as_f64().unwrap(),
        };
        let mut rms = RunningMeanStd::default();
        for (i, call) in case["calls"].as_array().unwrap().iter().enumerate() {
            let what = format!("{settings:?} call {i}");
            let (rep, shape) = array(&call["rep"]);
            let reward = pbe_reward(&rep, shape[0], shape[1], &settings, &mut rms).unwrap();
            assert_close(&reward, &flat(&call["reward"]), 1e-12, &what);
            if let Some(after) = call["rms_after"].as_object() {
                let ours = [rms.mean, rms.var, rms.count];
                let want = ["M", "S", "n"].map(|key| after[key].as_f64().unwrap());
                assert_close(&ours, &want, 1e-12, &format!("{what} running mean"));
            }
        }
    }
}

/// DDPG on the intrinsic reward is DrQ-v2's agent (docs/design.md §15): its critic and actor
/// losses and gradients against the fixture's, with the fixture's noise, on the detached h, h'.
#[test]
fn the_ddpg_part_is_drqv2s_agent_on_the_intrinsic_reward() {
    let f = fixture();
    let h = &f["hyper"];
    let cfg = DrQv2Config {
        feature_dim: size(&f, "feature"),
        hidden_dim: size(&f, "hidden"),
        stddev_clip: h["stddev_clip"].as_f64().unwrap(),
        critic_target_tau: h["critic_target_tau"].as_f64().unwrap(),
        batch_size: size(&f, "batch"),
        ..DrQv2Config::default()
    };
    let std = h["stddev"].as_f64().unwrap();
    let agent = DrQv2Agent::new(
        &cfg,
        size(&f, "repr"),
        size(&f, "action"),
        &Device::Cpu,
        &mut ChaCha8Rng::seed_from_u64(0),
    )
    .unwrap();
    // The fixture's names are the stores' names with the network's prefix (`actor.trunk.0…`).
    let load = |agent: &DrQv2Agent, group: &str| {
        let mut all = BTreeMap::new();
        for (store, key) in [
            ("actor", "actor"),
            ("critic", "critic"),
            ("critic_target", "critic_target"),
        ] {
            for (name, v) in f[group][key].as_object().unwrap() {
                let local = name.split_once('.').unwrap().1;
                all.insert(format!("{store}.{local}"), tensor(v));
            }
        }
        agent.load_networks(&all).unwrap();
    };
    load(&agent, "params_before");
    let obs = tensor(&f["icm"]["h"]);
    let batch = Batch {
        obs: obs.clone(),
        action: tensor(&f["inputs"]["action"]),
        reward: tensor(&f["reward"]["reward"]),
        discount: tensor(&f["inputs"]["discount"]),
        next_obs: tensor(&f["icm"]["next_h"]),
    };
    let c = &f["critic"];
    let critic = agent
        .critic_losses(&batch, std, &tensor(&f["inputs"]["eps_next"]))
        .unwrap();
    assert_close(&values(&critic.q.q1), &flat(&c["q1"]), 1e-5, "Q1");
    assert_close(&values(&critic.q.q2), &flat(&c["q2"]), 1e-5, "Q2");
    assert_close(&values(&critic.target_q), &flat(&c["target_q"]), 1e-5, "target Q");
    assert_close(
        &values(&critic.loss),
        &[c["loss"].as_f64().unwrap()],
        1e-5,
        "critic loss",
    );
    let grads = critic.loss.backward().unwrap();
    let [(_, actor_params), (_, critic_params), _] = agent.param_stores();
    let check = |store: &Params, grads: &candle_core::backprop::GradStore, expected: &Value, net: &str| {
        for (name, var) in store.iter() {
            let g = grads
                .get(var.as_tensor())
                .unwrap_or_else(|| panic!("no gradient for {name}"));
            assert_close(
                &values(g),
                &flat(&expected[format!("{net}.{name}")]),
                1e-4,
                &format!("d {net} loss / d {name}"),
            );
        }
    };
    check(critic_params, &grads, &c["grads"], "critic");

    // The actor's loss: the actor before its step through the critic after its step.
    let mut networks = BTreeMap::new();
    for (store, group) in [
        ("actor", "params_before"),
        ("critic", "params_after"),
        ("critic_target", "params_after"),
    ] {
        for (name, v) in f[group][store].as_object().unwrap() {
            networks.insert(format!("{store}.{}", name.split_once('.').unwrap().1), tensor(v));
        }
    }
    agent.load_networks(&networks).unwrap();
    let a = &f["actor"];
    let actor = agent
        .actor_losses(&obs, std, &tensor(&f["inputs"]["eps_actor"]))
        .unwrap();
    assert_close(&values(&actor.dist.mu), &flat(&a["mu"]), 1e-5, "mu");
    assert_close(&values(&actor.action), &flat(&a["action"]), 1e-5, "actor's action");
    assert_close(&values(&actor.loss), &[a["loss"].as_f64().unwrap()], 1e-5, "actor loss");
    let grads = actor.loss.backward().unwrap();
    check(actor_params, &grads, &a["grads"], "actor");
}

/// The export takes `pixels / 255`: its first bias b − 0.5·Σ W gives, on pixels / 255, the
/// features the explorer's encoder gives on pixels / 255 − 0.5.
#[test]
fn the_export_folds_the_input_offset_into_the_first_bias() {
    let f = fixture();
    let b = size(&f, "batch");
    let apt = fixture_apt(&f, 2);
    let exported = apt.export_tensors().unwrap();
    let before = tensors(&f["params_before"]["encoder"]);
    assert_eq!(exported.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>());
    for name in [
        "encoder.convnet.0.weight",
        "encoder.convnet.2.weight",
        "encoder.convnet.2.bias",
    ] {
        assert_eq!(values(&exported[name]), values(&before[name]), "{name}");
    }
    let unshifted = EncoderConfig {
        input_offset: 0.0,
        ..encoder_config(&f)
    };
    let export_encoder = Encoder::from_tensors(&unshifted, "encoder", &exported).unwrap();
    let obs = shifted(&f, "obs");
    let ours = values(&export_encoder.encode(&obs, b, false).unwrap().h);
    let explorer = values(&apt.encoder().encode(&obs, b, false).unwrap().h);
    assert_close(&ours, &explorer, 1e-5, "exported features");
    assert_close(&ours, &flat(&f["icm"]["h"]), 1e-5, "exported features vs reference h");
    // Not the same encoder without the fold: the offset matters at these weights.
    let unfolded = Encoder::from_tensors(&unshifted, "encoder", &before).unwrap();
    let plain = values(&unfolded.encode(&obs, b, false).unwrap().h);
    assert!(max_error(&plain, &explorer) > 1e-2);
}

/// `state` holds every tensor, Adam moment and count: a fresh explorer loaded from it continues
/// exactly; a missing tensor is an error naming the file and the tensor.
#[test]
fn the_state_resumes_exactly_and_a_missing_tensor_is_named() {
    let f = fixture();
    let b = size(&f, "batch");
    let (obs, next_obs) = (shifted(&f, "obs"), shifted(&f, "next_obs"));
    let action = tensor(&f["inputs"]["action"]);
    let settings = AptConfig {
        knn_rms: true,
        knn_clip: 1e-4,
        ..apt_config(&f)
    };
    let make = |seed: u64| {
        Apt::new(
            &settings,
            &encoder_config(&f),
            &[size(&f, "action"), 1],
            &Backend::new(&Device::Cpu),
            &mut ChaCha8Rng::seed_from_u64(seed),
        )
        .unwrap()
    };
    let step = |apt: &mut Apt, domain: usize| {
        let next_h = apt.encoder().encode(&next_obs, b, false).unwrap().h;
        let action = if domain == 0 {
            action.clone()
        } else {
            action.narrow(1, 0, 1).unwrap()
        };
        values(&apt.update(domain, &obs, &next_h, &action).unwrap().reward)
    };
    let mut first = make(3);
    step(&mut first, 0);
    step(&mut first, 1);
    let state = first.state().unwrap();
    assert!(state
        .tensors
        .contains_key("domain1.adam.exp_avg_sq.icm.backward_net.2.weight"));
    assert!(state.tensors.contains_key("adam.exp_avg.encoder.convnet.0.weight"));
    assert_eq!(state.counters["updates"], "2");
    let mut resumed = make(4);
    resumed.load_state(&state, Path::new("ckpt.safetensors")).unwrap();
    let again = resumed.state().unwrap();
    assert_eq!(again.counters, state.counters);
    for (name, t) in &state.tensors {
        assert_eq!(values(&again.tensors[name]), values(t), "{name}");
    }
    for domain in [0, 1, 0] {
        assert_eq!(step(&mut first, domain), step(&mut resumed, domain), "domain {domain}");
    }
    assert_eq!(
        values(&first.export_tensors().unwrap()["encoder.convnet.0.bias"]),
        values(&resumed.export_tensors().unwrap()["encoder.convnet.0.bias"])
    );

    let mut broken = RepresentationState {
        tensors: state.tensors.clone(),
        counters: state.counters.clone(),
    };
    broken.tensors.remove("domain1.icm.trunk.1.weight");
    let err = make(5)
        .load_state(&broken, Path::new("ckpt.safetensors"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("ckpt.safetensors") && err.contains("icm.trunk.1.weight"),
        "{err}"
    );
    let mut other = make(6);
    let one_domain = Apt::new(
        &settings,
        &encoder_config(&f),
        &[size(&f, "action")],
        &Backend::new(&Device::Cpu),
        &mut ChaCha8Rng::seed_from_u64(7),
    )
    .unwrap();
    let err = other
        .load_state(&one_domain.state().unwrap(), Path::new("one.safetensors"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("one.safetensors") && err.contains("domains"), "{err}");
}
