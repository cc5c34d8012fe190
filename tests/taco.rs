//! TACO: its loss, the latent actions of its critic and every gradient against a float64 numpy
//! transcription of FrankZheng2022/TACO (tests/fixtures/taco/reference.py, which names the commit
//! and lines it follows); action sequences from the replay; `lfs train` with `[agent] kind =
//! "taco"`, a killed run resuming exactly, and where TACO cannot go (action-free pre-training, a
//! frozen encoder) refused by name.

use std::path::PathBuf;

use candle_core::{Device, Tensor, Var};
use lfs::rl::{Batch, DrQv2Config, FeatureDtype, NStep, ReplayBuffer, SequenceViews, TacoAgent, TacoSettings};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::values;
use crate::drqv2::{assert_close, flat, tensor};

fn fixture() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/taco/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// An agent at the fixture's toy sizes, its action encoder, heads and critic the fixture's.
fn fixture_agent(f: &Value) -> TacoAgent {
    let size = |k: &str| f["sizes"][k].as_u64().unwrap() as usize;
    let cfg = DrQv2Config {
        feature_dim: size("feature"),
        hidden_dim: size("hidden"),
        batch_size: size("batch"),
        ..DrQv2Config::default()
    };
    let settings = TacoSettings {
        multistep: size("multistep"),
        hidden_dim: size("hidden"),
        ..TacoSettings::default()
    };
    assert_eq!(
        settings.latent_dim(size("action")),
        size("latent"),
        "TACO's int(1.25 A) + 1"
    );
    let agent = TacoAgent::new(
        &cfg,
        &settings,
        size("repr"),
        size("action"),
        &Device::Cpu,
        &mut ChaCha8Rng::seed_from_u64(0),
    )
    .unwrap();
    // The agent's own tensors (actor, target), the fixture's over them.
    let (mut tensors, _) = agent.state().unwrap();
    for (prefix, key) in [
        ("act_tok", "act_tok_params"),
        ("taco", "heads_params"),
        ("critic", "critic_params"),
    ] {
        for (name, v) in f[key].as_object().unwrap() {
            let name = format!("{prefix}.{name}");
            assert!(tensors.contains_key(&name), "{name} is not a parameter of ours");
            tensors.insert(name, tensor(v));
        }
    }
    agent.load_networks(&tensors).unwrap();
    agent
}

#[test]
fn the_taco_loss_and_its_gradients_are_tacos() {
    let f = fixture();
    let mut agent = fixture_agent(&f);
    let anchor = Var::from_tensor(&tensor(&f["anchor"])).unwrap();
    let views = SequenceViews {
        anchor: anchor.as_tensor().clone(),
        positive: tensor(&f["positive"]),
        future: tensor(&f["future"]),
        action_seq: tensor(&f["actions"]),
    };
    let reward = tensor(&f["reward"]);
    let latent = agent.core().latent_actions().unwrap();
    let actions = tensor(&f["actions"]);
    let first = actions.narrow(1, 0, 1).unwrap().squeeze(1).unwrap();
    assert_close(
        &values(&latent.encoding.encode(&first).unwrap()),
        &flat(&f["latent_action"]),
        1e-5,
        "u(a)",
    );
    assert_close(
        &values(&latent.encoding.encode_sequence(&actions).unwrap()),
        &flat(&f["latent_sequence"]),
        1e-5,
        "the sequence's latent",
    );
    let losses = agent.taco_losses(&views, &reward).unwrap();
    let l = &f["loss"];
    for (ours, name) in [
        (&losses.total, "total"),
        (&losses.taco, "taco"),
        (losses.curl.as_ref().unwrap(), "curl"),
        (losses.reward.as_ref().unwrap(), "reward"),
    ] {
        assert_close(&values(ours), &[l[name].as_f64().unwrap()], 1e-5, name);
    }
    let grads = losses.total.backward().unwrap();
    // Finite differences in float64 against f32 backprop: 1e-3 relative (values of at least 1).
    let check = |store: &lfs::nn::Params, expected: &Value, what: &str| {
        let expected = expected.as_object().unwrap();
        assert_eq!(store.names().len(), expected.len(), "{what}: {:?}", store.names());
        for (name, var) in store.iter() {
            let ours = grads
                .get(var.as_tensor())
                .unwrap_or_else(|| panic!("{what}: no gradient for {name}"));
            assert_close(
                &values(ours),
                &flat(&expected[name]),
                1e-3,
                &format!("{what} d/d{name}"),
            );
        }
    };
    let heads = agent.param_stores().into_iter().find(|(p, _)| *p == "taco").unwrap().1;
    check(heads, &f["grads"]["heads"], "taco loss");
    check(&latent.params, &f["grads"]["act_tok"], "taco loss");
    assert_close(
        &values(grads.get(anchor.as_tensor()).unwrap()),
        &flat(&f["grads"]["anchor"]),
        1e-3,
        "d taco loss / d anchor",
    );
    // The critic takes latent actions, and its loss trains the action encoder: with discount 0
    // the target is the batch's reward, the fixture's target.
    let c = &f["critic"];
    let b = c["target"].as_array().unwrap().len();
    let batch = Batch {
        obs: tensor(&c["obs"]),
        action: tensor(&c["action"]),
        reward: tensor(&c["target"]),
        discount: Tensor::zeros((b, 1), candle_core::DType::F32, &Device::Cpu).unwrap(),
        next_obs: tensor(&c["obs"]),
    };
    let eps = Tensor::zeros((b, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
    let critic = agent.core().critic_losses(&batch, 0.1, &eps).unwrap();
    assert_close(&values(&critic.q.q1), &flat(&c["q1"]), 1e-5, "Q1 of a latent action");
    assert_close(&values(&critic.q.q2), &flat(&c["q2"]), 1e-5, "Q2 of a latent action");
    assert_close(
        &values(&critic.loss),
        &[c["loss"].as_f64().unwrap()],
        1e-5,
        "critic loss",
    );
    let grads = critic.loss.backward().unwrap();
    let latent = agent.core().latent_actions().unwrap();
    for (name, var) in latent.params.iter() {
        let expected = flat(&c["grads_act_tok"][name]);
        match grads.get(var.as_tensor()) {
            Some(ours) => assert_close(&values(ours), &expected, 1e-3, &format!("critic d/d{name}")),
            // The sequence tokenizer is not in the critic's path: zero gradient.
            None => assert!(
                expected.iter().all(|g| g.abs() < 1e-9),
                "critic d/d{name}: {expected:?}"
            ),
        }
    }
    // An update of the loss moves the heads and the action encoder.
    let before: Vec<Vec<f64>> = latent.params.iter().map(|(_, v)| values(v.as_tensor())).collect();
    let mut metrics = lfs::rl::TacoMetrics::default();
    let dh = agent.update_taco(&views, &reward, &mut metrics).unwrap();
    assert_eq!(dh.expect("no gradient for the anchor").dims(), &[5, 6]);
    let after: Vec<Vec<f64>> = agent
        .core()
        .latent_actions()
        .unwrap()
        .params
        .iter()
        .map(|(_, v)| values(v.as_tensor()))
        .collect();
    assert!(
        before.iter().zip(&after).all(|(a, b)| a != b),
        "the action encoder did not move"
    );
    assert_close(
        &[metrics.taco_loss],
        &[l["taco"].as_f64().unwrap()],
        1e-5,
        "metrics' taco loss",
    );
}

#[test]
fn the_replay_samples_action_sequences_and_their_future_observation() {
    // Episodes of 7 and 3 transitions; frame k of episode e is all 10e + k, action k is k.
    let frame = |e: u8, k: u8| vec![10 * e + k; 12];
    let mut replay = ReplayBuffer::new(100, 12, 1, 0, FeatureDtype::F32);
    for (e, n) in [(0u8, 7u8), (1, 3)] {
        replay.start_episode(&frame(e, 0)).unwrap();
        for k in 0..n {
            replay.add(&[f32::from(k)], 1.0, &frame(e, k + 1)).unwrap();
        }
    }
    let returns = NStep { n: 1, discount: 0.99 };
    let t = replay
        .sample_with_sequence(300, returns, 3, &mut ChaCha8Rng::seed_from_u64(2))
        .unwrap();
    let obs_len = 36;
    let mut drawn = std::collections::BTreeSet::new();
    for i in 0..t.len {
        let (e, step) = t.locations[i];
        drawn.insert((e, step));
        // a_t, a_t+1, a_t+2, and O_t+3 (its newest frame is frame t + 3).
        let seq = &t.action_seq[i * 3..(i + 1) * 3];
        assert_eq!(seq, [step as f32, step as f32 + 1.0, step as f32 + 2.0]);
        assert_eq!(t.seq_obs[(i + 1) * obs_len - 1], 10 * e as u8 + step as u8 + 3);
        // The one-step target still bootstraps from O_t+1.
        assert_eq!(t.next_obs[(i + 1) * obs_len - 1], 10 * e as u8 + step as u8 + 1);
    }
    // Every t with t + 3 <= its episode's length, and no other: 5 in the first, 1 in the second.
    let expected: std::collections::BTreeSet<(usize, usize)> = (0..5).map(|t| (0, t)).chain([(1, 0)]).collect();
    assert_eq!(drawn, expected);
    // Without sequences the draws are one-step sampling's, the same for the same seed.
    let plain = replay.sample(50, returns, &mut ChaCha8Rng::seed_from_u64(4)).unwrap();
    let zero = replay
        .sample_with_sequence(50, returns, 0, &mut ChaCha8Rng::seed_from_u64(4))
        .unwrap();
    assert_eq!(plain.locations, zero.locations);
    assert!(zero.action_seq.is_empty() && zero.seq_obs.is_empty());
}

#[test]
fn a_killed_taco_run_resumes_to_the_same_results() {
    crate::e2e::killed_run_resumes_to_the_same_results(crate::e2e::Resumed {
        config: "pipelines/taco/tiny.toml",
        extra: &["--set", "agent.taco.hidden_dim=32"],
        encoder_id: "online:none+critic:init=random:1",
        objective: false,
        last_episode_updates: 50,
        another: &["--set", "agent.taco.curl=false"],
        resumed_env: &[],
        resumed_says: "",
    });
}

#[test]
fn taco_is_refused_where_it_cannot_run_by_name() {
    use crate::common::{lfs_in_repo, output_text as text};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let cases: [(&[&str], &str); 3] = [
        (
            &["--set", "aux.method=\"lfs\"", "--set", "agent.nstep=1"],
            "[agent] kind = \"taco\" trains the encoder with the critic's loss and its own",
        ),
        (
            &["--set", "aux.critic_gradient=false"],
            "set aux.method = \"none\" and aux.critic_gradient = true",
        ),
        (
            &["--set", "agent.taco.multistep=0"],
            "agent.taco: multistep and hidden_dim must be >= 1",
        ),
    ];
    for (args, expected) in cases {
        let result = crate::e2e::train_command_with("pipelines/taco/tiny.toml", &out, args)
            .output()
            .unwrap();
        let said = text(&result);
        assert_eq!(result.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(expected), "{args:?}: {said}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    // [agent.taco] belongs to TACO.
    let result = crate::e2e::train_command_with("pipelines/drqv2/tiny.toml", &out, &["--set", "agent.taco.curl=false"])
        .output()
        .unwrap();
    assert!(
        text(&result).contains("[agent.taco] is TACO's; [agent] is kind = \"drqv2\""),
        "{}",
        text(&result)
    );
    // Not on a frozen encoder.
    let eval_config = dir.path().join("eval-taco.toml");
    let taco = std::fs::read_to_string(crate::common::repo().join("pipelines/taco/tiny.toml")).unwrap();
    std::fs::write(&eval_config, taco.split("\n[aux]").next().unwrap()).unwrap();
    let result = lfs_in_repo()
        .args(["eval", "--config"])
        .arg(&eval_config)
        .args(["--encoder", "random", "--task", "cartpole_swingup", "--out-dir"])
        .arg(&out)
        .output()
        .unwrap();
    let said = text(&result);
    assert_eq!(result.status.code(), Some(2), "{said}");
    assert!(
        said.contains("so it runs end to end (lfs train --config pipelines/taco/*.toml)"),
        "{said}"
    );
    assert!(!out.exists());
    // Not as an objective of action-free pre-training, nor as aux.method.
    let result = lfs_in_repo()
        .args([
            "pretrain",
            "--config",
            "pipelines/tiny.toml",
            "--set",
            "objective.method=\"taco\"",
            "--out-dir",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let said = text(&result);
    assert_eq!(result.status.code(), Some(2), "{said}");
    assert!(
        said.contains("`taco` needs the actions of the run, so it is no objective for action-free videos"),
        "{said}"
    );
    let result = crate::e2e::train_command_with("pipelines/e2e/tiny.toml", &out, &["--set", "aux.method=\"taco\""])
        .output()
        .unwrap();
    assert!(
        text(&result).contains("[agent] kind = \"taco\" (pipelines/taco/*.toml)"),
        "{}",
        text(&result)
    );
}

#[test]
fn every_taco_pipeline_loads_with_tacos_settings() {
    use lfs::rl::AgentKind;
    use lfs::rl_loop::train::TrainConfig;
    for (name, nstep, batch, duration) in [
        ("tiny", 3, 16, 100_000),
        ("mini", 3, 256, 100_000),
        ("easy", 3, 1024, 100_000),
        ("medium", 3, 1024, 500_000),
        ("walker_easy", 1, 1024, 100_000),
        ("walker_medium", 1, 1024, 500_000),
    ] {
        let path = crate::common::repo().join(format!("pipelines/taco/{name}.toml"));
        let cfg = TrainConfig::load(&path, &[]).unwrap();
        assert_eq!(cfg.agent.kind(), AgentKind::Taco, "{name}");
        let lfs::rl::TacoConfig { agent, taco } = cfg.agent.get::<lfs::rl::TacoAgent>().unwrap();
        assert_eq!((agent.nstep, agent.batch_size), (nstep, batch), "{name}");
        assert!(
            matches!(agent.stddev_schedule, lfs::rl::drqv2::StddevSchedule::Linear { duration_steps, .. } if duration_steps == duration),
            "{name}"
        );
        assert_eq!(taco, &TacoSettings::default(), "{name}: TACO's own settings");
        assert!(
            cfg.aux.method.objective().is_none() && cfg.aux.critic_gradient,
            "{name}"
        );
        assert_eq!(
            TrainConfig::from_toml_str(&cfg.to_toml().unwrap(), &[]).unwrap(),
            cfg,
            "{name}"
        );
    }
}
