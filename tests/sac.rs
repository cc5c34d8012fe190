//! The SAC agent: its formulas against a float64 numpy transcription of Proto-RL
//! (tests/fixtures/sac/reference.py, which names the commit and lines it follows), gradients
//! through the differentiable LayerNorm, and an update that moves what it should.

use std::path::PathBuf;

use candle_core::{Device, Tensor, Var};
use lfs::rl::critic::critic_loss;
use lfs::rl::sac::{actor_loss, alpha_loss, critic_target};
use lfs::rl::{GradientPath, SquashedGaussian};
use serde_json::Value;

use crate::common::values;

fn fixture() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sac/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A nested JSON array (b, n) as a tensor.
fn matrix(v: &Value) -> Tensor {
    let rows: Vec<Vec<f32>> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect();
    let (b, n) = (rows.len(), rows[0].len());
    Tensor::from_vec(rows.concat(), (b, n), &Device::Cpu).unwrap()
}

/// One-step returns, as SAC samples them.
const ONE_STEP: lfs::rl::NStep = lfs::rl::NStep { n: 1, discount: 0.99 };

fn scalar(t: &Tensor) -> f64 {
    values(t)[0]
}

/// max |a − b| / max(1, |b|) elementwise.
fn assert_close(ours: &[f64], expected: &[f64], tol: f64, what: &str) {
    assert_eq!(ours.len(), expected.len(), "{what}");
    for (i, (a, b)) in ours.iter().zip(expected).enumerate() {
        assert!((a - b).abs() <= tol * b.abs().max(1.0), "{what}[{i}]: {a} vs {b}");
    }
}

fn expected(v: &Value) -> Vec<f64> {
    values(&matrix(v))
}

#[test]
fn squashed_gaussian_matches_proto_rl() {
    // Tolerance: our f32 against the float64 reference, values up to ~25.
    let f = fixture();
    let g = &f["squashed_gaussian"];
    let (lo, hi) = (f["log_std_min"].as_f64().unwrap(), f["log_std_max"].as_f64().unwrap());
    let mu = Var::from_tensor(&matrix(&g["mu"])).unwrap();
    let raw = Var::from_tensor(&matrix(&g["log_std_raw"])).unwrap();
    let head = Tensor::cat(&[mu.as_tensor(), raw.as_tensor()], 1).unwrap(); // (b, 2A)
    let dist = SquashedGaussian::from_head(&head, lo, hi).unwrap();
    assert_close(&values(&dist.log_std), &expected(&g["log_std"]), 1e-5, "log_std");
    let sample = dist.rsample(&matrix(&g["eps"])).unwrap();
    assert_close(&values(&sample.action), &expected(&g["action"]), 1e-6, "action");
    assert_close(&values(&sample.log_prob), &expected(&g["log_prob"]), 1e-5, "log_prob");
    assert_close(
        &values(&dist.mean_action().unwrap()),
        &expected(&g["deterministic_action"]),
        1e-6,
        "deterministic action",
    );
    let grads = sample.log_prob.sum_all().unwrap().backward().unwrap();
    assert_close(
        &values(grads.get(mu.as_tensor()).unwrap()),
        &expected(&g["grad_log_prob_sum_wrt_mu"]),
        1e-4,
        "d log_prob / d mu",
    );
    assert_close(
        &values(grads.get(raw.as_tensor()).unwrap()),
        &expected(&g["grad_log_prob_sum_wrt_log_std_raw"]),
        1e-4,
        "d log_prob / d log_std_raw",
    );
}

#[test]
fn critic_actor_and_alpha_losses_match_proto_rl() {
    let f = fixture();
    let c = &f["critic"];
    let discount = f["discount"].as_f64().unwrap();
    let target = critic_target(
        &matrix(&c["reward"]),
        &matrix(&c["target_q1"]),
        &matrix(&c["target_q2"]),
        &matrix(&c["next_log_prob"]),
        c["alpha"].as_f64().unwrap(),
        &Tensor::full(discount as f32, (4, 1), &Device::Cpu).unwrap(),
    )
    .unwrap();
    assert_close(&values(&target), &expected(&c["target_q"]), 1e-6, "target_q");
    let loss = critic_loss(&matrix(&c["q1"]), &matrix(&c["q2"]), &target).unwrap();
    assert_close(
        &[scalar(&loss)],
        &[c["critic_loss"].as_f64().unwrap()],
        1e-5,
        "critic loss",
    );

    let a = &f["actor"];
    let loss = actor_loss(
        a["alpha"].as_f64().unwrap(),
        &matrix(&a["log_prob"]),
        &matrix(&a["q1"]),
        &matrix(&a["q2"]),
    )
    .unwrap();
    assert_close(
        &[scalar(&loss)],
        &[a["actor_loss"].as_f64().unwrap()],
        1e-5,
        "actor loss",
    );

    let al = &f["alpha"];
    let log_alpha =
        Var::from_tensor(&Tensor::new(&[al["log_alpha"].as_f64().unwrap() as f32], &Device::Cpu).unwrap()).unwrap();
    let loss = alpha_loss(
        log_alpha.as_tensor(),
        &matrix(&al["log_prob"]),
        al["target_entropy"].as_f64().unwrap(),
    )
    .unwrap();
    assert_close(
        &[scalar(&loss)],
        &[al["alpha_loss"].as_f64().unwrap()],
        1e-5,
        "alpha loss",
    );
    // The gradient reaches log α only through α (the bracket is a constant).
    let grads = loss.backward().unwrap();
    let d = scalar(grads.get(log_alpha.as_tensor()).unwrap());
    assert_close(
        &[d],
        &[al["grad_wrt_log_alpha"].as_f64().unwrap()],
        1e-5,
        "d alpha loss / d log alpha",
    );
}

/// A small agent (the paper's architecture at toy sizes) over `repr` features, 2 actions.
fn small_agent(repr: usize, seed: u64, path: GradientPath) -> (lfs::rl::SacAgent, rand_chacha::ChaCha8Rng) {
    use rand::SeedableRng;
    let cfg = lfs::rl::SacConfig {
        feature_dim: 8,
        hidden_dim: 32,
        batch_size: 16,
        ..lfs::rl::SacConfig::default()
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let agent = lfs::rl::SacAgent::new(&cfg, repr, 2, path, &Device::Cpu, &mut rng).unwrap();
    (agent, rng)
}

fn random_batch(repr: usize, n: usize, rng: &mut impl rand::Rng) -> lfs::rl::Batch {
    let mut t = |dims: (usize, usize), lo: f32, hi: f32| {
        let v: Vec<f32> = (0..dims.0 * dims.1).map(|_| rng.random_range(lo..hi)).collect();
        Tensor::from_vec(v, dims, &Device::Cpu).unwrap()
    };
    lfs::rl::Batch {
        obs: t((n, repr), 0.0, 1.0),
        discount: Tensor::full(0.99f32, (n, 1), &Device::Cpu).unwrap(),
        action: t((n, 2), -1.0, 1.0),
        reward: t((n, 1), 0.0, 1.0),
        next_obs: t((n, repr), 0.0, 1.0),
    }
}

/// Every tensor of every store, by `store.name`.
fn snapshot(agent: &lfs::rl::SacAgent) -> std::collections::BTreeMap<String, Vec<f32>> {
    let mut out = std::collections::BTreeMap::new();
    for (store, params) in agent.param_stores() {
        for (name, t) in params.snapshot().unwrap() {
            out.insert(format!("{store}.{name}"), t.flatten_all().unwrap().to_vec1().unwrap());
        }
    }
    out
}

fn changed(
    before: &std::collections::BTreeMap<String, Vec<f32>>,
    after: &std::collections::BTreeMap<String, Vec<f32>>,
    store: &str,
) -> Vec<String> {
    before
        .iter()
        .filter(|(k, v)| k.starts_with(&format!("{store}.")) && after[*k] != **v)
        .map(|(k, _)| k.clone())
        .collect()
}

#[test]
fn updates_on_constant_features_match_updates_through_candles_own_linear() {
    // On features that need no gradient (the frozen encoder's) the update is written out
    // (src/rl/sac/backward.rs): W's gradient alone, no (b, repr) input gradient, and from 4096
    // features on, the trunks' products split by rows across threads. An agent built for
    // features with a tape, fed them as a Var, goes through candle's autograd and its own
    // Linear instead; one built for a GPU (GradientPath::OnDevice, src/rl/sac/on_device.rs, run
    // here on the CPU) writes the same arithmetic out as tensor ops, features with a tape or not.
    // Two agents from one seed, one fed each way, must stay the same through four updates
    // (critic alone, then critic + actor + α + target, twice), metrics included.
    for (path, (repr, tolerance)) in [GradientPath::Autograd, GradientPath::OnDevice]
        .into_iter()
        .flat_map(|path| [(40, 1e-5), (5000, 1e-5)].map(|r| (path, r)))
    {
        let (mut plain, mut rng_a) = small_agent(repr, 5, GradientPath::WrittenOut);
        let (mut tracked, mut rng_b) = small_agent(repr, 5, path);
        let batch = random_batch(repr, 16, &mut rng_a);
        let _ = random_batch(repr, 16, &mut rng_b); // keep the two generators in step
        let as_var = |t: &Tensor| candle_core::Var::from_tensor(t).unwrap().as_tensor().clone();
        let tracked_batch = lfs::rl::Batch {
            obs: as_var(&batch.obs),
            next_obs: as_var(&batch.next_obs),
            ..batch.clone()
        };
        assert!(!batch.obs.track_op() && tracked_batch.obs.track_op());
        for step in 1..=4 {
            let a = plain.update(&batch, step, &mut rng_a).unwrap();
            let b = tracked.update(&tracked_batch, step, &mut rng_b).unwrap();
            let close = |x: f64, y: f64| (x - y).abs() < 1e-5 * x.abs().max(1.0);
            let same = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => close(x, y),
                (x, y) => x.is_none() && y.is_none(),
            };
            assert!(
                close(a.critic_loss, b.critic_loss)
                    && close(a.critic_q1, b.critic_q1)
                    && close(a.critic_target_q, b.critic_target_q)
                    && same(a.actor_loss, b.actor_loss)
                    && same(a.actor_entropy, b.actor_entropy)
                    && same(a.alpha_loss, b.alpha_loss)
                    && close(a.alpha, b.alpha),
                "{path:?}, repr {repr}, step {step}: {a:?} vs {b:?}"
            );
            assert_eq!(a.actor_loss.is_some(), step % 2 == 0);
        }
        let (a, b) = (snapshot(&plain), snapshot(&tracked));
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (name, x) in &a {
            let worst = x
                .iter()
                .zip(&b[name])
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max);
            assert!(worst < tolerance, "{path:?}, repr {repr}, {name}: differs by {worst}");
        }
    }
    use rand::SeedableRng;
    let batch = random_batch(40, 16, &mut rand_chacha::ChaCha8Rng::seed_from_u64(6));
    // The shortcut's point: no gradient is computed for the constant features.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let dims = lfs::rl::NetworkDims {
        repr_dim: 40,
        feature_dim: 8,
        hidden_dim: 32,
        action_dim: 2,
    };
    let mut params = lfs::nn::Params::new(&Device::Cpu);
    let critic = lfs::rl::Critic::new(dims, lfs::rl::TrunkOutput::LayerNorm, "", &mut params, &mut rng).unwrap();
    let loss = critic
        .forward(&batch.obs, &batch.action)
        .unwrap()
        .min()
        .unwrap()
        .sum_all()
        .unwrap();
    let grads = loss.backward().unwrap();
    assert!(
        grads.get(&batch.obs).is_none(),
        "an input gradient was computed for constant features"
    );
    let w = params.get("trunk.0.weight").unwrap().as_tensor();
    assert!(grads.get(w).is_some(), "the trunk's weight got no gradient");

    // The actor's loss goes through a detached critic: the gradient reaching the action is
    // the one candle's own layers give, and the critic's parameters get none.
    let action = candle_core::Var::from_tensor(&batch.action).unwrap();
    let q_of = |c: &lfs::rl::Critic| {
        let q = c.forward(&batch.obs, action.as_tensor()).unwrap().min().unwrap();
        q.sum_all().unwrap().backward().unwrap()
    };
    let (own, detached) = (q_of(&critic), q_of(&critic.detached()));
    let da = |g: &candle_core::backprop::GradStore| -> Vec<f32> {
        g.get(action.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap()
    };
    let (a, b) = (da(&own), da(&detached));
    assert!(a.iter().any(|v| *v != 0.0));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() < 1e-5, "dQ/da: {x} vs {y}");
    }
    for (name, var) in params.iter() {
        assert!(
            detached.get(var.as_tensor()).is_none(),
            "{name} got a gradient through the detached critic"
        );
    }
}

#[test]
fn gradients_reach_the_linear_before_each_layer_norm() {
    // candle's fused LayerNorm drops gradients (docs/design.md §10): with it the trunks'
    // Linear(repr -> 50) would never train. Every parameter of the critic (trunk.0 included)
    // must move in one critic update, and every actor parameter in one actor update.
    let (mut agent, mut rng) = small_agent(40, 3, GradientPath::WrittenOut);
    let batch = random_batch(40, 16, &mut rng);
    let before = snapshot(&agent);
    agent.update(&batch, 1, &mut rng).unwrap(); // odd step: the critic alone
    let after = snapshot(&agent);
    let critic: Vec<String> = before.keys().filter(|k| k.starts_with("critic.")).cloned().collect();
    assert!(critic.iter().any(|k| k == "critic.trunk.0.weight"), "{critic:?}");
    assert_eq!(changed(&before, &after, "critic"), critic);
    assert!(changed(&before, &after, "actor").is_empty());
    assert!(changed(&before, &after, "critic_target").is_empty());
    assert!(changed(&before, &after, "alpha").is_empty());

    let before = after;
    let metrics = agent.update(&batch, 2, &mut rng).unwrap(); // even: actor, α and the target too
    let after = snapshot(&agent);
    let actor: Vec<String> = before.keys().filter(|k| k.starts_with("actor.")).cloned().collect();
    assert!(actor.iter().any(|k| k == "actor.trunk.0.weight"));
    assert_eq!(changed(&before, &after, "actor"), actor);
    assert_eq!(changed(&before, &after, "alpha"), vec!["alpha.log_alpha".to_string()]);
    assert!(!changed(&before, &after, "critic_target").is_empty());
    assert!(metrics.actor_loss.is_some() && metrics.alpha_loss.is_some());
    // The target moved by τ = 0.01 of the gap: θ' ← 0.99 θ' + 0.01 θ.
    let k = "trunk.0.bias";
    let (t0, c1, t1) = (
        &before[&format!("critic_target.{k}")],
        &after[&format!("critic.{k}")],
        &after[&format!("critic_target.{k}")],
    );
    for ((t0, c1), t1) in t0.iter().zip(c1).zip(t1) {
        assert!((t1 - (0.99 * t0 + 0.01 * c1)).abs() < 1e-6);
    }
}

#[test]
fn a_frozen_encoder_is_unchanged_by_training_and_no_optimiser_holds_it() {
    // The encoder reaches the agent only as features: after updates on its features, its
    // tensors are bit-identical and every store the optimisers step holds only actor, critic
    // and α parameters.
    use lfs::nn::{Encoder, EncoderConfig, Params};
    use rand::{Rng, SeedableRng};
    let cfg = EncoderConfig {
        image_size: 21,
        num_filters: 16,
        ..EncoderConfig::default()
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let mut params = Params::new(&Device::Cpu);
    Encoder::new(&cfg, "encoder", &mut params, &mut rng).unwrap();
    let encoder = Encoder::from_tensors(&cfg, "encoder", &params.snapshot().unwrap()).unwrap();
    let bytes = |e: &Encoder| -> Vec<Vec<f32>> {
        e.param_tensors()
            .iter()
            .map(|t| t.flatten_all().unwrap().to_vec1().unwrap())
            .collect()
    };
    let before = bytes(&encoder);
    let repr = encoder.repr_dim();
    let (mut agent, _) = small_agent(repr, 4, GradientPath::WrittenOut);
    for step in 1..=4 {
        let obs: Vec<u8> = (0..16 * 9 * 21 * 21).map(|_| rng.random()).collect();
        let next: Vec<u8> = (0..16 * 9 * 21 * 21).map(|_| rng.random()).collect();
        let mut batch = random_batch(repr, 16, &mut rng);
        batch.obs = encoder.encode(&obs, 16, false).unwrap().h;
        batch.next_obs = encoder.encode(&next, 16, false).unwrap().h;
        agent.update(&batch, step, &mut rng).unwrap();
    }
    assert_eq!(bytes(&encoder), before);
    assert!(encoder.param_tensors().iter().all(|t| !t.is_variable()));
    for (store, params) in agent.param_stores() {
        for name in params.names() {
            assert!(!name.contains("encoder") && !name.contains("convnet"), "{store}.{name}");
        }
    }
}

#[test]
fn replay_stores_each_frame_once_and_never_samples_across_episodes() {
    use lfs::rl::{FeatureDtype, ReplayBuffer};
    use rand::SeedableRng;
    // Frames of 3×2×2 bytes whose every byte is 10·episode + t, so a stacked observation shows
    // where each of its frames came from.
    let frame = |e: u8, t: u8| vec![10 * e + t; 12];
    let mut replay = ReplayBuffer::new(12, 12, 1, 0, FeatureDtype::F32);
    let lengths = [5u8, 3, 6];
    for (e, &n) in lengths.iter().enumerate() {
        let e = e as u8;
        replay.start_episode(&frame(e, 0)).unwrap();
        for t in 0..n {
            replay
                .add(&[t as f32], f32::from(10 * e + t), &frame(e, t + 1))
                .unwrap();
        }
    }
    // 14 transitions > capacity 12: the oldest episode went, the other two stay whole.
    assert_eq!(replay.len(), 9);
    assert_eq!(replay.episodes().len(), 2);
    assert_eq!(replay.frame_bytes(), (4 + 7) * 12);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let batch = replay.sample(500, ONE_STEP, &mut rng).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..batch.len {
        let obs = &batch.obs[i * 36..(i + 1) * 36];
        let next = &batch.next_obs[i * 36..(i + 1) * 36];
        let (ep, t) = batch.locations[i];
        let e = [1u8, 2][ep];
        // O_t = [F_{t-2}, F_{t-1}, F_t] clamped at 0; O_{t+1} one frame later; same episode.
        let expect = |t: usize| -> Vec<u8> {
            [t.saturating_sub(2), t.saturating_sub(1), t]
                .iter()
                .flat_map(|&s| frame(e, s as u8))
                .collect()
        };
        assert_eq!(obs, expect(t).as_slice());
        assert_eq!(next, expect(t + 1).as_slice());
        assert_eq!(batch.reward[i], f32::from(10 * e) + t as f32);
        assert_eq!(batch.action[i], t as f32);
        seen.insert((ep, t));
    }
    assert_eq!(seen.len(), 9, "every stored transition is drawn");
    // Bad input is named.
    let err = replay.add(&[0.0, 1.0], 0.0, &frame(0, 0)).unwrap_err().to_string();
    assert!(err.contains("action of 2 values"), "{err}");
}

/// The f16 feature cache: values come back as the nearest half (a few checked by hand against
/// IEEE 754 binary16, and the relative error bound 2⁻¹¹ on many), the same transitions are
/// drawn as from an f32 cache with the same seed, and values f16 cannot hold are refused.
#[test]
fn the_f16_feature_cache_rounds_to_the_nearest_half_and_refuses_what_it_cannot_hold() {
    use lfs::rl::{CachedFeatures, FeatureDtype, ReplayBuffer};
    use rand::{Rng, SeedableRng};
    // binary16: 1 + 10 fraction bits. 0.1 = 0x2E66 = 1638/2¹⁴; 1/3 = 0x3555 = 1365/2¹²;
    // 2049 lies between 2048 and 2050 and ties to even (2048); 65504 is the largest.
    let mut store = CachedFeatures::new(FeatureDtype::F16);
    store.extend(&[0.1, 1.0 / 3.0, 2049.0, 65504.0, 0.0, 7.5]).unwrap();
    assert_eq!(
        store.last(6),
        vec![1638.0 / 16384.0, 1365.0 / 4096.0, 2048.0, 65504.0, 0.0, 7.5]
    );
    for bad in [65520.0f32, f32::INFINITY, f32::NAN, -1e6] {
        let err = store.extend(&[1.0, bad]).unwrap_err().to_string();
        assert!(err.contains("feature_cache_dtype = \"f32\""), "{bad}: {err}");
        assert_eq!(store.len(), 6, "{bad}: a refused row is not stored in part");
    }
    // Two buffers, same frames and features, same seed: the same draws, features within 2⁻¹¹.
    let (repr, frame_len) = (50, 12);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let buffers = [FeatureDtype::F32, FeatureDtype::F16].map(|d| ReplayBuffer::new(100, frame_len, 1, repr, d));
    let [mut full, mut half] = buffers;
    for e in 0..3u8 {
        let first = vec![e; frame_len];
        let h: Vec<f32> = (0..repr).map(|_| rng.random_range(0.0f32..30.0)).collect();
        for b in [&mut full, &mut half] {
            b.start_episode(&first).unwrap();
            b.set_features(&h).unwrap();
        }
        for t in 0..7u8 {
            let h: Vec<f32> = (0..repr).map(|_| rng.random_range(0.0f32..30.0)).collect();
            for b in [&mut full, &mut half] {
                b.add(&[0.5], f32::from(t), &vec![t; frame_len]).unwrap();
                b.set_features(&h).unwrap();
            }
        }
    }
    let draw = |b: &mut ReplayBuffer| {
        b.sample(64, ONE_STEP, &mut rand_chacha::ChaCha8Rng::seed_from_u64(9))
            .unwrap()
    };
    let (a, b) = (draw(&mut full), draw(&mut half));
    assert_eq!(a.locations, b.locations);
    assert_eq!(a.reward, b.reward);
    for (x, y) in a
        .obs_features
        .iter()
        .zip(&b.obs_features)
        .chain(a.next_obs_features.iter().zip(&b.next_obs_features))
    {
        assert!((x - y).abs() <= x.abs() * 2f32.powi(-11), "{x} vs {y}");
    }
    assert!(
        a.obs_features.iter().zip(&b.obs_features).any(|(x, y)| x != y),
        "f16 rounds"
    );
    assert_eq!(half.latest_features().unwrap().len(), repr);
}
