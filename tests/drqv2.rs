//! DrQ-v2: its formulas against a float64 numpy transcription of facebookresearch/drqv2
//! (tests/fixtures/drqv2/reference.py, which names the commit and lines it follows and checks
//! its gradients by finite differences): the σ schedule, n-step returns from the replay,
//! DrQ-v2's truncated normal, the critic's and the actor's losses with every parameter's
//! gradient, the random shift; an update that moves what it should; `lfs train` and `lfs eval`
//! with `[agent] kind = "drqv2"`, a killed run resuming exactly, bad input refused.

use std::collections::BTreeMap;
use std::path::PathBuf;

use candle_core::{Device, Tensor, Var};
use lfs::data::RandomShift;
use lfs::rl::drqv2::{StddevSchedule, TruncatedNormal};
use lfs::rl::{Batch, DrQv2Agent, DrQv2Config, FeatureDtype, NStep, ReplayBuffer};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::values;

fn fixture() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/drqv2/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A nested JSON array of any depth as a flat f64 vector and its shape.
pub(crate) fn array(v: &Value) -> (Vec<f64>, Vec<usize>) {
    match v {
        Value::Array(items) => {
            let parts: Vec<(Vec<f64>, Vec<usize>)> = items.iter().map(array).collect();
            let mut shape = vec![items.len()];
            shape.extend(parts.first().map(|p| p.1.clone()).unwrap_or_default());
            (parts.into_iter().flat_map(|p| p.0).collect(), shape)
        }
        other => (vec![other.as_f64().unwrap()], vec![]),
    }
}

pub(crate) fn tensor(v: &Value) -> Tensor {
    let (data, shape) = array(v);
    let data: Vec<f32> = data.iter().map(|&x| x as f32).collect();
    Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
}

pub(crate) fn flat(v: &Value) -> Vec<f64> {
    array(v).0
}

/// max |a − b| / max(1, |b|) ≤ tol, elementwise; `Err` names the worst element.
fn close(ours: &[f64], expected: &[f64], tol: f64, what: &str) -> Result<(), String> {
    if ours.len() != expected.len() {
        return Err(format!("{what}: {} values, expected {}", ours.len(), expected.len()));
    }
    for (i, (a, b)) in ours.iter().zip(expected).enumerate() {
        if (a - b).abs() > tol * b.abs().max(1.0) {
            return Err(format!("{what}[{i}]: {a} vs {b}"));
        }
    }
    Ok(())
}

pub(crate) fn assert_close(ours: &[f64], expected: &[f64], tol: f64, what: &str) {
    if let Err(e) = close(ours, expected, tol, what) {
        panic!("{e}");
    }
}

#[test]
fn the_stddev_schedule_is_drqv2s() {
    for case in fixture()["schedule"].as_array().unwrap() {
        let schedule = StddevSchedule::Linear {
            start: case["start"].as_f64().unwrap(),
            end: case["end"].as_f64().unwrap(),
            duration_steps: case["duration_steps"].as_u64().unwrap(),
        };
        let ours: Vec<f64> = case["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| schedule.at(s.as_u64().unwrap()))
            .collect();
        assert_close(&ours, &flat(&case["std"]), 1e-12, "std");
    }
    assert_eq!(StddevSchedule::Const { value: 0.2 }.at(123_456), 0.2);
}

/// The n-step rows the replay samples from one episode: (t, reward, discount, next frame),
/// read off `locations` and the frames (byte F_k = k).
fn nstep_rows(replay: &mut ReplayBuffer, returns: NStep) -> BTreeMap<usize, (f64, f64, u8)> {
    let t = replay
        .sample(400, returns, &mut ChaCha8Rng::seed_from_u64(returns.n as u64))
        .unwrap();
    let obs_len = t.next_obs.len() / t.len;
    (0..t.len)
        .map(|i| {
            // The last frame of the stacked O_{t+n}.
            let next_frame = t.next_obs[(i + 1) * obs_len - 1];
            let (_, step) = t.locations[i];
            (step, (f64::from(t.reward[i]), f64::from(t.discount[i]), next_frame))
        })
        .collect()
}

/// Our rows against the reference's: every valid t drawn, each reward, discount and O_{t+n}.
fn check_nstep(rows: &BTreeMap<usize, (f64, f64, u8)>, case: &Value) -> Result<(), String> {
    let expected = case["rows"].as_array().unwrap();
    if rows.len() != expected.len() {
        return Err(format!("{} steps drawn, {} valid", rows.len(), expected.len()));
    }
    for row in expected {
        let t = row["t"].as_u64().unwrap() as usize;
        let &(reward, discount, next) = rows.get(&t).ok_or(format!("t = {t} never drawn"))?;
        close(
            &[reward],
            &[row["reward"].as_f64().unwrap()],
            1e-6,
            &format!("reward at t = {t}"),
        )?;
        close(
            &[discount],
            &[row["discount"].as_f64().unwrap()],
            1e-6,
            &format!("discount at t = {t}"),
        )?;
        if u64::from(next) != row["next"].as_u64().unwrap() {
            return Err(format!("t = {t}: next observation ends at frame {next}"));
        }
    }
    Ok(())
}

#[test]
fn n_step_returns_are_drqv2s_and_an_off_by_one_discount_is_caught() {
    let f = fixture();
    let rewards = flat(&f["nstep"]["rewards"]);
    let gamma = f["discount"].as_f64().unwrap();
    // One episode whose frame k is all k, and a second too short for 3-step returns.
    let frame = |k: u8| vec![k; 12];
    let mut replay = ReplayBuffer::new(100, 12, 1, 0, FeatureDtype::F32);
    replay.start_episode(&frame(0)).unwrap();
    for (k, r) in rewards.iter().enumerate() {
        replay.add(&[0.0], *r as f32, &frame(k as u8 + 1)).unwrap();
    }
    for case in f["nstep"]["cases"].as_array().unwrap() {
        let n = case["n"].as_u64().unwrap() as usize;
        let rows = nstep_rows(&mut replay, NStep { n, discount: gamma });
        check_nstep(&rows, case).unwrap();
        if n > 1 {
            // The same check catches a discount off by one step (γⁿ⁻¹ instead of γⁿ).
            let broken: BTreeMap<_, _> = rows
                .iter()
                .map(|(&t, &(r, d, next))| (t, (r, d / gamma, next)))
                .collect();
            let err = check_nstep(&broken, case).unwrap_err();
            assert!(err.contains("discount"), "{err}");
        }
    }
    // Episodes shorter than n give no sample; with none long enough the error says so.
    let mut short = ReplayBuffer::new(100, 12, 1, 0, FeatureDtype::F32);
    short.start_episode(&frame(0)).unwrap();
    short.add(&[0.0], 1.0, &frame(1)).unwrap();
    let err = short
        .sample(4, NStep { n: 3, discount: gamma }, &mut ChaCha8Rng::seed_from_u64(0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("no stored episode has 3 transitions"), "{err}");
}

#[test]
fn the_truncated_normal_is_drqv2s_with_a_straight_through_gradient() {
    let f = fixture();
    let g = &f["truncated_normal"];
    let mu = Var::from_tensor(&tensor(&g["mu"])).unwrap();
    let dist = TruncatedNormal {
        mu: mu.as_tensor().clone(),
        std: g["std"].as_f64().unwrap(),
    };
    let eps = tensor(&g["eps"]);
    let clipped = dist.sample(&eps, g["clip"].as_f64()).unwrap();
    assert_close(
        &values(&clipped),
        &flat(&g["sample_clip"]),
        1e-6,
        "sample, clipped noise",
    );
    let unclipped = dist.sample(&eps, None).unwrap();
    assert_close(&values(&unclipped), &flat(&g["sample_no_clip"]), 1e-6, "sample");
    assert!(
        values(&unclipped).iter().any(|v| v.abs() == 0.999999f32 as f64),
        "no sample clamped"
    );
    assert_close(
        &values(&dist.log_prob(&clipped).unwrap()),
        &flat(&g["log_prob_clip"]),
        1e-5,
        "log_prob",
    );
    assert_close(&[dist.entropy(2)], &[g["entropy"].as_f64().unwrap()], 1e-12, "entropy");
    // d Σ w·sample / d μ = w everywhere, the clamped entries included.
    let w = tensor(&g["weights"]);
    let grads = clipped.mul(&w).unwrap().sum_all().unwrap().backward().unwrap();
    assert_close(
        &values(grads.get(mu.as_tensor()).unwrap()),
        &flat(&g["weights"]),
        1e-6,
        "d sample / d mu",
    );
}

/// An agent at the fixture's toy sizes with its networks.
fn fixture_agent(f: &Value) -> DrQv2Agent {
    let n = &f["networks"];
    let sizes = &f["sizes"];
    let cfg = DrQv2Config {
        feature_dim: sizes["feature"].as_u64().unwrap() as usize,
        hidden_dim: sizes["hidden"].as_u64().unwrap() as usize,
        stddev_clip: f["stddev_clip"].as_f64().unwrap(),
        batch_size: sizes["batch"].as_u64().unwrap() as usize,
        ..DrQv2Config::default()
    };
    let repr = sizes["repr"].as_u64().unwrap() as usize;
    let action_dim = sizes["action"].as_u64().unwrap() as usize;
    let agent = DrQv2Agent::new(&cfg, repr, action_dim, &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(0)).unwrap();
    let mut tensors = BTreeMap::new();
    for (store, key) in [
        ("actor", "actor_params"),
        ("critic", "critic_params"),
        ("critic_target", "critic_target_params"),
    ] {
        for (name, v) in n[key].as_object().unwrap() {
            tensors.insert(format!("{store}.{name}"), tensor(v));
        }
    }
    agent.load_networks(&tensors).unwrap();
    agent
}

/// Every parameter's gradient in `grads` against the reference's, by name.
fn check_grads(store: &lfs::nn::Params, grads: &candle_core::backprop::GradStore, expected: &Value, what: &str) {
    let expected = expected.as_object().unwrap();
    assert_eq!(store.names().len(), expected.len(), "{what}: {:?}", store.names());
    for (name, var) in store.iter() {
        let ours = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("{what}: no gradient for {name}"));
        // f32 sums of up to 8 terms against float64: 1e-4 relative (to values of at least 1).
        assert_close(
            &values(ours),
            &flat(&expected[name]),
            1e-4,
            &format!("{what} d/d{name}"),
        );
    }
}

#[test]
fn the_critic_and_actor_losses_and_their_gradients_are_drqv2s() {
    let f = fixture();
    let n = &f["networks"];
    let agent = fixture_agent(&f);
    let std = n["std"].as_f64().unwrap();
    let obs = Var::from_tensor(&tensor(&n["obs"])).unwrap();
    let batch = Batch {
        obs: obs.as_tensor().clone(),
        action: tensor(&n["action"]),
        reward: tensor(&n["reward"]),
        discount: tensor(&n["discount"]),
        next_obs: tensor(&n["next_obs"]),
    };
    let critic = agent.critic_losses(&batch, std, &tensor(&n["eps_next"])).unwrap();
    let c = &n["critic"];
    assert_close(&values(&critic.q.q1), &flat(&c["q1"]), 1e-5, "Q1");
    assert_close(&values(&critic.q.q2), &flat(&c["q2"]), 1e-5, "Q2");
    assert_close(&values(&critic.target_q), &flat(&c["target_q"]), 1e-5, "n-step target");
    assert_close(
        &values(&critic.loss),
        &[c["loss"].as_f64().unwrap()],
        1e-5,
        "critic loss",
    );
    let grads = critic.loss.backward().unwrap();
    let [(_, actor), (_, critic_params), (_, target)] = agent.param_stores();
    check_grads(critic_params, &grads, &c["grads"], "critic loss");
    // The encoder's gradient: d loss / d obs features.
    assert_close(
        &values(grads.get(obs.as_tensor()).unwrap()),
        &flat(&c["grad_obs"]),
        1e-4,
        "d critic loss / d obs",
    );
    // The target critic and the actor take no gradient from the critic's loss.
    for (name, var) in target.iter().chain(actor.iter()) {
        assert!(
            grads.get(var.as_tensor()).is_none(),
            "{name} got a gradient from the critic loss"
        );
    }

    let a = &n["actor"];
    let actor_losses = agent
        .actor_losses(&batch.obs.detach(), std, &tensor(&n["eps_actor"]))
        .unwrap();
    assert_close(&values(&actor_losses.dist.mu), &flat(&a["mu"]), 1e-5, "mu");
    assert_close(
        &values(&actor_losses.action),
        &flat(&a["action"]),
        1e-5,
        "actor's action",
    );
    assert_close(
        &values(&actor_losses.loss),
        &[a["loss"].as_f64().unwrap()],
        1e-5,
        "actor loss",
    );
    let log_prob = actor_losses
        .dist
        .log_prob(&actor_losses.action)
        .unwrap()
        .mean_all()
        .unwrap();
    assert_close(
        &values(&log_prob),
        &[a["log_prob"].as_f64().unwrap()],
        1e-5,
        "actor log_prob",
    );
    let grads = actor_losses.loss.backward().unwrap();
    check_grads(actor, &grads, &a["grads"], "actor loss");
    for (name, var) in critic_params.iter() {
        assert!(
            grads.get(var.as_tensor()).is_none(),
            "{name} got a gradient from the actor loss"
        );
    }
}

#[test]
fn the_random_shift_is_drqv2s_grid_sample() {
    let f = fixture();
    let r = &f["random_shift"];
    let shift = RandomShift {
        pad: r["pad"].as_u64().unwrap() as usize,
    };
    let (image, shape) = array(&r["image"]);
    let image: Vec<u8> = image.iter().map(|&v| v as u8).collect();
    let dims = (shape[0], shape[1], shape[2]);
    for case in r["cases"].as_array().unwrap() {
        let (sx, sy) = (case["shift_x"].as_u64().unwrap(), case["shift_y"].as_u64().unwrap());
        let mut out = vec![0u8; image.len()];
        // grid_sample's x moves columns: our offset is (rows, columns) = (sy, sx).
        shift.shift_image(&image, dims, (sy as usize, sx as usize), &mut out);
        let ours: Vec<f64> = out.iter().map(|&v| f64::from(v)).collect();
        assert_close(&ours, &flat(&case["out"]), 1e-9, &format!("shift ({sx}, {sy})"));
    }
}

#[test]
fn an_update_trains_the_critic_actor_and_target_and_gives_the_encoder_a_gradient() {
    let f = fixture();
    let n = &f["networks"];
    let mut agent = fixture_agent(&f);
    let snapshot = |agent: &DrQv2Agent| -> BTreeMap<String, Vec<f64>> {
        let mut out = BTreeMap::new();
        for (store, params) in agent.param_stores() {
            for (name, t) in params.snapshot().unwrap() {
                out.insert(format!("{store}.{name}"), values(&t));
            }
        }
        out
    };
    let before = snapshot(&agent);
    let obs = Var::from_tensor(&tensor(&n["obs"])).unwrap();
    let batch = Batch {
        obs: obs.as_tensor().clone(),
        action: tensor(&n["action"]),
        reward: tensor(&n["reward"]),
        discount: tensor(&n["discount"]),
        next_obs: tensor(&n["next_obs"]),
    };
    let (metrics, obs_grad) = agent.update(&batch, 1000, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
    let after = snapshot(&agent);
    for (name, v) in &before {
        assert_ne!(&after[name], v, "{name} did not move");
    }
    // The target moved by τ = 0.01 of the gap to the updated critic: θ' ← 0.99 θ' + 0.01 θ.
    for (name, t0) in before.iter().filter(|(k, _)| k.starts_with("critic_target.")) {
        let online = &after[&name.replacen("critic_target.", "critic.", 1)];
        for ((t0, c1), t1) in t0.iter().zip(online).zip(&after[name]) {
            assert!((t1 - (0.99 * t0 + 0.01 * c1)).abs() < 1e-6, "{name}");
        }
    }
    assert_eq!(obs_grad.expect("no gradient for the observations").dims(), &[5, 6]);
    // σ at step 1000 of linear(1.0, 0.1, 100000); the metrics are finite.
    assert!((metrics.actor_stddev - 0.991).abs() < 1e-12);
    assert!(metrics.critic_loss.is_finite() && metrics.actor_loss.is_finite());
    assert!((metrics.critic_q1 - metrics.critic_q2).abs() > 0.0);
}

#[test]
fn a_killed_drqv2_run_resumes_to_the_same_results() {
    // DrQ-v2 end to end: the critic alone trains the encoder, an update every 2 agent steps.
    // The killed and resumed run makes its batches from the replay's frames on the device (a
    // GPU's way, src/rl/device_frames.rs, here on the CPU), the whole run on the host: the
    // same bytes, so the same results.
    crate::e2e::killed_run_resumes_to_the_same_results(crate::e2e::Resumed {
        config: "pipelines/drqv2/tiny.toml",
        extra: &[],
        encoder_id: "online:none+critic:init=random:1",
        objective: false,
        last_episode_updates: 50,
        another: &["--set", "agent.nstep=1"],
        resumed_env: &[("LFS_GPU_PATHS_ON_CPU", "replay-frames")],
        resumed_says: "replay frames on the device",
    });
}

#[test]
fn drqv2_runs_on_a_frozen_encoder_and_bad_input_is_refused_by_name() {
    use crate::common::{lfs_in_repo, output_text as text};
    let dir = tempfile::tempdir().unwrap();
    // `lfs eval` with DrQ-v2 as the agent: the SAC config's sections, DrQ-v2's [agent].
    let eval_config = dir.path().join("eval-drqv2.toml");
    let drqv2 = std::fs::read_to_string(crate::common::repo().join("pipelines/drqv2/tiny.toml")).unwrap();
    let without_aux = drqv2.split("\n[aux]").next().unwrap();
    std::fs::write(&eval_config, without_aux).unwrap();
    let out = dir.path().join("eval");
    let result = lfs_in_repo()
        .args(["eval", "--config"])
        .arg(&eval_config)
        .args(["--encoder", "random", "--task", "cartpole_swingup", "--out-dir"])
        .arg(&out)
        .args(["--set", "env.render_quality=\"fast\"", "--set", "agent.hidden_dim=32"])
        .args([
            "--set",
            "run.num_train_frames=1200",
            "--set",
            "run.eval_every_frames=1200",
        ])
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result));
    let (rows, episodes) = crate::common::run_results(&out);
    assert_eq!(rows.len(), 3, "{rows:?}"); // header + frames 0, 1200
    assert_eq!(episodes[0]["train/num_updates"], 0); // the seed frames (1000) end at step 500
                                                     // No update, no update metrics: absent, not zeros a plot would draw as losses.
    assert!(episodes[0].get("train/critic_loss").is_none(), "{}", episodes[0]);
    let config = std::fs::read_to_string(out.join("config.resolved.toml")).unwrap();
    assert!(config.contains("kind = \"drqv2\""), "{config}");

    // Bad input, refused by name with nothing written.
    let bad = dir.path().join("bad");
    let cases: [(&[&str], &str); 5] = [
        (
            &["--set", "agent.kind=\"td3\""],
            "unknown agent kind \"td3\": expected \"sac\", \"drqv2\"",
        ),
        (
            &["--set", "agent.init_temperature=0.1"],
            "[agent] with kind = \"drqv2\": unknown field `init_temperature`",
        ),
        (&["--set", "agent.nstep=0"], "agent.nstep must be >= 1"),
        (
            &["--set", "agent.stddev_schedule.duration_steps=0"],
            "agent.stddev_schedule: duration_steps must be >= 1",
        ),
        (
            &["--set", "aux.method=\"lfs\"", "--set", "aux.critic_gradient=false"],
            "agent.nstep = 3 makes the batch's next observation O_t+3",
        ),
    ];
    for (args, expected) in cases {
        let result = crate::e2e::train_command_with("pipelines/drqv2/tiny.toml", &bad, args)
            .output()
            .unwrap();
        let said = text(&result);
        assert_eq!(result.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(expected), "{args:?}: {said}");
        assert!(!bad.exists(), "{args:?} wrote {}", bad.display());
    }
}

#[test]
fn every_drqv2_pipeline_loads_with_drqv2s_settings() {
    use lfs::rl::AgentKind;
    use lfs::rl_loop::train::TrainConfig;
    for (name, nstep, batch, duration) in [
        ("tiny", 3, 16, 100_000),
        ("mini", 3, 256, 100_000),
        ("easy", 3, 256, 100_000),
        ("medium", 3, 256, 500_000),
        ("walker_easy", 1, 512, 100_000),
        ("walker_medium", 1, 512, 500_000),
    ] {
        let path = crate::common::repo().join(format!("pipelines/drqv2/{name}.toml"));
        let cfg = TrainConfig::load(&path, &[]).unwrap();
        assert_eq!(cfg.agent.kind(), AgentKind::DrQv2, "{name}");
        let agent = cfg.agent.get::<DrQv2Agent>().unwrap();
        assert_eq!((agent.nstep, agent.batch_size), (nstep, batch), "{name}");
        assert_eq!(
            agent.stddev_schedule,
            StddevSchedule::Linear {
                start: 1.0,
                end: 0.1,
                duration_steps: duration
            },
            "{name}"
        );
        assert!(
            cfg.aux.method.objective().is_none() && cfg.aux.critic_gradient,
            "{name}"
        );
        assert_eq!((agent.update_every_steps, agent.stddev_clip), (2, 0.3), "{name}");
        // Written back and read again, it is the same config (kind first, the schedule a table).
        assert_eq!(
            TrainConfig::from_toml_str(&cfg.to_toml().unwrap(), &[]).unwrap(),
            cfg,
            "{name}"
        );
    }
}

#[test]
fn a_suite_sets_drqv2s_walker_settings_per_task() {
    use lfs::env::Task;
    use lfs::suite::SuiteFile;
    let repo = crate::common::repo();
    let suite = SuiteFile::load(&repo.join("eval/suites/drqv2_mini.toml")).unwrap();
    let row = &suite.encoders[0];
    // (cargo runs the tests in the checkout, where the suite's config paths lead)
    let settings = |task: Task| {
        let cfg = suite.train_config(row, task).unwrap();
        let agent = cfg.agent.get::<DrQv2Agent>().unwrap().clone();
        (agent.nstep, agent.batch_size, cfg.run.num_train_frames.0)
    };
    assert_eq!(settings(Task::CartpoleSwingup), (3, 256, 20_000));
    assert_eq!(settings(Task::WalkerStand), (1, 512, 20_000));
    // A task_set for a task the suite does not run is refused by name.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(repo.join("eval/suites/drqv2_mini.toml"))
        .unwrap()
        .replace("walker_stand = [", "walker_walk = [");
    std::fs::write(&path, text).unwrap();
    let err = SuiteFile::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("bad.toml") && err.contains("task_set names walker_walk, which is not among the suite's tasks"),
        "{err}"
    );
}
