//! DMControl through the worker protocol, against dm_control itself (no mock anywhere): parity
//! with dm_control driven directly in Python (eval/dmc_reference.py: frames, rewards and the
//! flattened state), seeds, frame stacking,
//! render quality, refused actions, PhysicsError, killed and hung workers and missing dependencies.
//!
//! Needs the project venv (`make setup`). Episodes are a few steps long (CI has 2 cores), but
//! for two whole episodes that run to the time limit.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::common::python;
use lfs::env::{DmcConfig, DmcEnv, Env, EnvCommand, EnvPool, PoolReply, RenderQuality, Task, TimeStep, FRAME_BYTES};
use lfs::observation::FrameStack;

fn config(task: Task, render_quality: RenderQuality) -> DmcConfig {
    DmcConfig {
        render_quality,
        python: python(),
        ..DmcConfig::new(task)
    }
}

/// A fixed action sequence that covers both ends of [-1, 1] and values in between.
fn actions(action_dim: usize, steps: usize, salt: usize) -> Vec<Vec<f32>> {
    (0..steps)
        .map(|t| {
            (0..action_dim)
                .map(|d| match (t + d + salt) % 5 {
                    0 => 1.0,
                    1 => -1.0,
                    _ => ((t * 7 + d * 3 + salt) as f32 * 0.37).sin(),
                })
                .collect()
        })
        .collect()
}

/// One episode as the reference script reports it.
#[derive(serde::Deserialize)]
struct Reference {
    rewards: Vec<f64>,
    discounts: Vec<f64>,
    lasts: Vec<bool>,
    /// Hex of (84, 84, 3) frames, reset frame first.
    frames: Vec<String>,
    /// Hex of little-endian f64 states (the non-image observations flattened with numpy),
    /// reset state first.
    states: Vec<String>,
    /// The observations the state is made of, in order.
    state_fields: Vec<StateField>,
}

/// One observation in the reference's state: its key and shape (`["height", []]`).
#[derive(serde::Deserialize)]
struct StateField(String, Vec<usize>);

impl Reference {
    /// The names the worker must give the state: a scalar is its key, an array of n values is
    /// `key[0]` .. `key[n-1]` (C order).
    fn state_names(&self) -> Vec<String> {
        self.state_fields
            .iter()
            .flat_map(|StateField(key, shape)| {
                if shape.is_empty() {
                    vec![key.clone()]
                } else {
                    (0..shape.iter().product()).map(|i| format!("{key}[{i}]")).collect()
                }
            })
            .collect()
    }
}

#[derive(serde::Serialize)]
struct ReferenceRequest {
    task: String,
    seed: u64,
    actions: Vec<Vec<f32>>,
    action_repeat: u32,
    render_quality: RenderQuality,
}

/// Runs eval/dmc_reference.py: a fresh dm_control environment per episode, driven directly.
fn reference(requests: &[ReferenceRequest]) -> Vec<Reference> {
    let mut child = Command::new(python())
        .arg("eval/dmc_reference.py")
        .env("MUJOCO_GL", std::env::var("MUJOCO_GL").unwrap_or_else(|_| "egl".into()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run eval/dmc_reference.py");
    let input = serde_json::to_vec(requests).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "dmc_reference.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Rust's side of one episode: the reset step followed by one step per action.
fn run_episode(env: &mut DmcEnv, seed: u64, actions: &[Vec<f32>]) -> Vec<TimeStep> {
    let mut steps = vec![env.reset(seed).unwrap()];
    for action in actions {
        let step = env.step(action).unwrap();
        let last = step.last;
        steps.push(step);
        if last {
            break;
        }
    }
    steps
}

/// Frames bit for bit, rewards and discounts to 1e-6, last flags, and states bit for bit (the
/// same f64 values as dm_control's own observation, flattened independently).
fn assert_same_episode(what: &str, ours: &[TimeStep], theirs: &Reference) {
    assert_eq!(ours.len(), theirs.frames.len(), "{what}: number of frames");
    assert_eq!(ours.len(), theirs.states.len(), "{what}: number of states");
    for (t, (step, frame_hex)) in ours.iter().zip(&theirs.frames).enumerate() {
        let frame = hex::decode(frame_hex).unwrap();
        assert_eq!(frame.len(), FRAME_BYTES);
        let differing = step.frame.iter().zip(&frame).filter(|(a, b)| a != b).count();
        assert_eq!(
            differing, 0,
            "{what}: frame {t} differs from dm_control's in {differing} bytes"
        );
        let state: Vec<f64> = hex::decode(&theirs.states[t])
            .unwrap()
            .chunks(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert!(!state.is_empty(), "{what}: dm_control's state is empty");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
        assert_eq!(
            bits(&step.state),
            bits(&state),
            "{what}: state {t} differs from dm_control's observation:\n ours   {:?}\n theirs {state:?}",
            step.state
        );
        if t > 0 {
            let (reward, discount, last) = (theirs.rewards[t - 1], theirs.discounts[t - 1], theirs.lasts[t - 1]);
            assert!(
                (step.reward - reward).abs() <= 1e-6,
                "{what}: step {t} reward {} vs {reward}",
                step.reward
            );
            assert!((step.discount - discount).abs() <= 1e-6, "{what}: step {t} discount");
            assert_eq!(step.last, last, "{what}: step {t} last flag");
        }
    }
}

/// Every task of the paper: a fixed seed and action sequence through the Rust pool give the
/// rewards (to 1e-6), frames and states (bit for bit) of dm_control driven directly in Python,
/// and the state's names are the reference's observations flattened. Each worker runs two
/// episodes, so re-seeding a used environment is checked against a fresh one.
#[test]
fn parity_with_dm_control_all_tasks() {
    let mut pool = EnvPool::new(Task::ALL.iter().map(|&t| config(t, RenderQuality::Default)).collect()).unwrap();
    // (seed, number of agent steps) per episode, run one after the other in the same worker.
    let episodes = [(11u64, 3usize), (12, 2)];
    let mut ours: Vec<Vec<Vec<TimeStep>>> = vec![Vec::new(); pool.len()];
    let mut requests = Vec::new();
    for (e, &(seed, steps)) in episodes.iter().enumerate() {
        let plans: Vec<Vec<Vec<f32>>> = (0..pool.len())
            .map(|i| actions(pool.spec(i).action_dim, steps, e))
            .collect();
        let resets: Vec<_> = (0..pool.len()).map(|_| Some(EnvCommand::Reset { seed })).collect();
        let mut episode: Vec<Vec<TimeStep>> = pool
            .execute(&resets)
            .unwrap()
            .into_iter()
            .map(|r| vec![ready(r)])
            .collect();
        for t in 0..steps {
            let commands: Vec<_> = plans
                .iter()
                .map(|p| Some(EnvCommand::Step { action: p[t].clone() }))
                .collect();
            for (i, reply) in pool.execute(&commands).unwrap().into_iter().enumerate() {
                episode[i].push(ready(reply));
            }
        }
        for (i, steps) in episode.into_iter().enumerate() {
            ours[i].push(steps);
            requests.push(ReferenceRequest {
                task: pool.spec(i).task.to_string(),
                seed,
                actions: plans[i].clone(),
                action_repeat: 2,
                render_quality: RenderQuality::Default,
            });
        }
    }
    let theirs = reference(&requests);
    let mut k = 0;
    for (e, &(seed, _)) in episodes.iter().enumerate() {
        for (i, task_episodes) in ours.iter().enumerate() {
            let what = format!("{} seed {seed}", pool.spec(i).task);
            assert_same_episode(&what, &task_episodes[e], &theirs[k]);
            let names = &pool.spec(i).state_names;
            assert!(!names.is_empty(), "{what}: no state names");
            assert!(
                task_episodes[e].iter().all(|s| s.state.len() == names.len()),
                "{what}: a state is not {} values wide",
                names.len()
            );
            assert_eq!(*names, theirs[k].state_names(), "{what}: state names");
            k += 1;
        }
    }
    // Guard against a vacuous comparison: the episodes must actually move.
    for task_episodes in &ours {
        let episode = &task_episodes[0];
        assert_ne!(
            episode[0].frame,
            episode[episode.len() - 1].frame,
            "the frames never changed"
        );
        assert_ne!(
            episode[0].state,
            episode[episode.len() - 1].state,
            "the state never changed"
        );
    }
}

fn ready(reply: PoolReply) -> TimeStep {
    match reply {
        PoolReply::Ready(step) => step,
        other => panic!("expected a time step, got {other:?}"),
    }
}

/// `fast` quality renders other pixels than `default` (no shadows, no multisampling), and
/// still matches dm_control configured the same way.
#[test]
fn fast_render_quality_differs_and_matches_reference() {
    let task = Task::CartpoleSwingup;
    let plan = actions(1, 2, 0);
    let mut fast = DmcEnv::spawn(config(task, RenderQuality::Fast)).unwrap();
    assert_eq!(fast.spec().render_quality, RenderQuality::Fast);
    let fast_steps = run_episode(&mut fast, 3, &plan);
    let request = |render_quality| ReferenceRequest {
        task: task.to_string(),
        seed: 3,
        actions: plan.clone(),
        action_repeat: 2,
        render_quality,
    };
    let theirs = reference(&[request(RenderQuality::Fast), request(RenderQuality::Default)]);
    assert_same_episode("cartpole_swingup fast", &fast_steps, &theirs[0]);
    let default_frame = hex::decode(&theirs[1].frames[0]).unwrap();
    let differing = fast_steps[0]
        .frame
        .iter()
        .zip(&default_frame)
        .filter(|(a, b)| a != b)
        .count();
    assert!(
        differing > 100,
        "fast and default frames differ in only {differing} bytes"
    );
}

/// Same seed and actions: the same episode; another seed: another episode. Action repeat 2
/// takes two env steps per agent step.
#[test]
fn seeds_are_honoured() {
    let mut env = DmcEnv::spawn(config(Task::WalkerRun, RenderQuality::Fast)).unwrap();
    let plan = actions(env.spec().action_dim, 3, 1);
    let a = run_episode(&mut env, 5, &plan);
    let b = run_episode(&mut env, 6, &plan);
    let c = run_episode(&mut env, 5, &plan);
    assert_eq!(a, c, "same seed and actions gave different episodes");
    // dm_control's seeds are 32-bit (numpy RandomState); a larger one is refused up front.
    let err = env.reset(lfs::env::MAX_SEED + 1).unwrap_err().to_string();
    assert!(err.contains("walker_run") && err.contains("out of range"), "{err}");
    assert_ne!(a[0].frame, b[0].frame, "seeds 5 and 6 start from the same frame");
    assert_ne!(a[0].state, b[0].state, "seeds 5 and 6 start from the same state");
    assert!(a[1..].iter().all(|s| s.env_steps == 2 && s.discount == 1.0 && !s.last));
}

/// docs/design.md §1: oldest first in channels, the first frame repeated at an episode start.
#[test]
fn frame_stack_is_oldest_first() {
    let mut env = DmcEnv::spawn(config(Task::CartpoleSwingup, RenderQuality::Fast)).unwrap();
    let chw = |hwc: &[u8]| -> Vec<u8> { (0..3).flat_map(|c| hwc.iter().skip(c).step_by(3).copied()).collect() };
    let f0 = env.reset(0).unwrap().frame;
    let mut stack = FrameStack::new();
    stack.reset(&f0);
    assert_eq!(stack.observation(), [chw(&f0), chw(&f0), chw(&f0)].concat());
    let f1 = env.step(&[1.0]).unwrap().frame;
    stack.push(&f1);
    assert_eq!(stack.observation(), [chw(&f0), chw(&f0), chw(&f1)].concat());
    let f2 = env.step(&[1.0]).unwrap().frame;
    stack.push(&f2);
    let f3 = env.step(&[-1.0]).unwrap().frame;
    stack.push(&f3);
    assert_eq!(stack.observation(), [chw(&f1), chw(&f2), chw(&f3)].concat());
    assert_ne!(f1, f3);
}

/// Out-of-range, non-finite and wrongly sized actions are refused with the task's name, and
/// the environment stays usable.
#[test]
fn bad_actions_are_refused() {
    let mut env = DmcEnv::spawn(config(Task::CartpoleSwingup, RenderQuality::Fast)).unwrap();
    env.reset(0).unwrap();
    for bad in [vec![1.5f32], vec![f32::NAN], vec![0.0, 0.0]] {
        let err = env.step(&bad).unwrap_err().to_string();
        assert!(err.contains("cartpole_swingup"), "{err}");
    }
    assert!(env.step(&[0.5]).is_ok());
}

/// A real dm_control PhysicsError (NaN state) loses the episode, not the worker.
#[test]
fn physics_error_loses_only_the_episode() {
    let mut pool = EnvPool::new(vec![config(Task::CartpoleSwingup, RenderQuality::Fast)]).unwrap();
    let first = ready(pool.execute(&[Some(EnvCommand::Reset { seed: 1 })]).unwrap().remove(0));
    pool.worker_mut(0).poison().unwrap();
    match pool
        .execute(&[Some(EnvCommand::Step { action: vec![0.0] })])
        .unwrap()
        .remove(0)
    {
        PoolReply::Broken(err) => {
            let err = err.to_string();
            assert!(
                err.contains("PhysicsError") && err.contains("cartpole_swingup"),
                "{err}"
            );
        }
        other => panic!("expected a broken episode, got {other:?}"),
    }
    assert_eq!(pool.restarts(), 0, "the worker was alive and should not be restarted");
    let again = ready(pool.execute(&[Some(EnvCommand::Reset { seed: 1 })]).unwrap().remove(0));
    assert_eq!(first, again);
}

/// A worker killed mid-episode (SIGKILL, then SIGSEGV): its slot reports the lost episode with
/// the signal, is restarted and replays the same seed exactly; the other slot is not disturbed.
#[test]
fn killed_worker_is_restarted() {
    let cfg = config(Task::CartpoleSwingup, RenderQuality::Fast);
    let mut pool = EnvPool::new(vec![cfg.clone(), cfg]).unwrap();
    let resets = [Some(EnvCommand::Reset { seed: 4 }), Some(EnvCommand::Reset { seed: 4 })];
    let first = ready(pool.execute(&resets).unwrap().remove(0));
    let pid = pool.worker_mut(0).pid();
    let status = Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(status.success());
    let steps = [Some(EnvCommand::Step { action: vec![0.2] })];
    let mut replies = pool.execute(&[steps[0].clone(), steps[0].clone()]).unwrap();
    match replies.remove(0) {
        PoolReply::Broken(err) => {
            let err = err.to_string();
            assert!(err.contains("cartpole_swingup") && err.contains("SIGKILL"), "{err}");
        }
        other => panic!("expected a broken episode, got {other:?}"),
    }
    assert!(
        matches!(replies.remove(0), PoolReply::Ready(_)),
        "the other worker was disturbed"
    );
    assert_eq!(pool.restarts(), 1);
    assert_ne!(pool.worker_mut(0).pid(), pid);
    let again = ready(pool.execute(&[resets[0].clone(), None]).unwrap().remove(0));
    assert_eq!(first, again);
    // A segfault (here: its signal, sent from outside) is handled the same way.
    let pid = pool.worker_mut(0).pid();
    assert!(Command::new("kill")
        .args(["-SEGV", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    match pool.execute(&[steps[0].clone(), None]).unwrap().remove(0) {
        PoolReply::Broken(err) => assert!(err.to_string().contains("SIGSEGV"), "{err}"),
        other => panic!("expected a broken episode, got {other:?}"),
    }
    assert_eq!(pool.restarts(), 2);
}

/// A Python without dm_control, or no Python at all: the error names the task, the cause and
/// the fix.
#[test]
fn missing_dependency_is_a_clear_error() {
    let no_deps = DmcConfig {
        python: PathBuf::from("/usr/bin/python3"),
        ..DmcConfig::new(Task::WalkerRun)
    };
    let err = DmcEnv::spawn(no_deps)
        .err()
        .expect("a Python without dm_control must fail")
        .to_string();
    assert!(
        err.contains("walker_run") && err.contains("ModuleNotFoundError") && err.contains("make setup"),
        "{err}"
    );
    let no_python = DmcConfig {
        python: PathBuf::from("/nonexistent/python"),
        ..DmcConfig::new(Task::FingerSpin)
    };
    let err = DmcEnv::spawn(no_python)
        .err()
        .expect("a missing interpreter must fail")
        .to_string();
    assert!(
        err.contains("finger_spin") && err.contains("/nonexistent/python") && err.contains("make setup"),
        "{err}"
    );
}

/// `make bench-env`: agent steps/s through the pool against dm_control in-process (the same
/// `DmcTask`, eval/bench_env.py), interleaved round by round in one run, plus 2 workers at
/// once. Settings: LFS_BENCH_TASK (walker_run), LFS_BENCH_STEPS per round (100),
/// LFS_BENCH_ROUNDS (5), LFS_BENCH_QUALITY (default). Prints medians over rounds.
#[test]
#[ignore = "benchmark: run with `make bench-env`"]
fn bench_env() {
    use std::io::{BufRead, BufReader};
    use std::time::Instant;

    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_string());
    let task: Task = var("LFS_BENCH_TASK", "walker_run").parse().unwrap();
    let steps: usize = var("LFS_BENCH_STEPS", "100").parse().unwrap();
    let rounds: usize = var("LFS_BENCH_ROUNDS", "5").parse().unwrap();
    let quality = match var("LFS_BENCH_QUALITY", "default").as_str() {
        "fast" => RenderQuality::Fast,
        _ => RenderQuality::Default,
    };

    let mut inproc = Command::new(python())
        .args(["eval/bench_env.py", task.name(), quality.name()])
        .env("MUJOCO_GL", std::env::var("MUJOCO_GL").unwrap_or_else(|_| "egl".into()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut inproc_in = inproc.stdin.take().unwrap();
    let mut inproc_out = BufReader::new(inproc.stdout.take().unwrap()).lines();
    assert_eq!(inproc_out.next().unwrap().unwrap(), "ready");
    let mut one = EnvPool::new(vec![config(task, quality)]).unwrap();
    let mut two = EnvPool::new(vec![config(task, quality), config(task, quality)]).unwrap();

    // Steps every slot of `pool` `steps` times with random actions: total steps/s and the
    // workers' CPU milliseconds per step (all their threads, from /proc).
    let mut seed = 1000u64;
    let mut run_pool = |pool: &mut EnvPool| -> (f64, f64) {
        let n = pool.len();
        let resets: Vec<_> = (0..n)
            .map(|i| Some(EnvCommand::Reset { seed: seed + i as u64 }))
            .collect();
        seed += n as u64;
        pool.execute(&resets).unwrap();
        let dim = pool.spec(0).action_dim;
        let pids: Vec<u32> = (0..n).map(|i| pool.worker_mut(i).pid()).collect();
        let cpu = |pids: &[u32]| pids.iter().map(|&p| process_cpu_seconds(p)).sum::<f64>();
        let mut state = seed;
        let cpu_start = cpu(&pids);
        let start = Instant::now();
        for _ in 0..steps {
            let commands: Vec<_> = (0..n)
                .map(|_| {
                    let action = (0..dim)
                        .map(|_| {
                            // xorshift: cheap uniform actions in [-1, 1]
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
                        })
                        .collect();
                    Some(EnvCommand::Step { action })
                })
                .collect();
            for (i, reply) in pool.execute(&commands).unwrap().into_iter().enumerate() {
                if ready(reply).last {
                    let mut reset = vec![None; n];
                    reset[i] = Some(EnvCommand::Reset { seed: state });
                    pool.execute(&reset).unwrap();
                }
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        (
            (n * steps) as f64 / seconds,
            1e3 * (cpu(&pids) - cpu_start) / (n * steps) as f64,
        )
    };
    let mut rows = Vec::new();
    for round in 0..rounds {
        let mut run_inproc = || {
            writeln!(inproc_in, "{steps}").unwrap();
            let line = inproc_out.next().unwrap().unwrap();
            let times: Vec<f64> = line.split_whitespace().map(|v| v.parse().unwrap()).collect();
            (steps as f64 / times[0], 1e3 * times[1] / steps as f64)
        };
        // Alternate which side goes first, so a drift in machine load favours neither.
        let ((pool_rate, pool_cpu_ms), (inproc_rate, inproc_cpu_ms)) = if round % 2 == 0 {
            let pool = run_pool(&mut one);
            (pool, run_inproc())
        } else {
            let inproc = run_inproc();
            (run_pool(&mut one), inproc)
        };
        let (two_rate, _) = run_pool(&mut two);
        println!(
            "round {round}: pool(1) {pool_rate:.1} steps/s ({pool_cpu_ms:.1} worker CPU ms/step), in-process \
             {inproc_rate:.1} steps/s ({inproc_cpu_ms:.1} CPU ms/step), ratio {:.3}; pool(2) {two_rate:.1} steps/s",
            pool_rate / inproc_rate
        );
        rows.push([
            pool_rate,
            inproc_rate,
            pool_rate / inproc_rate,
            two_rate,
            pool_cpu_ms,
            inproc_cpu_ms,
        ]);
    }
    drop(inproc_in);
    let _ = inproc.wait();
    let median = |k: usize| {
        let mut v: Vec<f64> = rows.iter().map(|r| r[k]).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    println!(
        "| {task} | {quality} | {steps} x {rounds} | {:.1} | {:.1} | {:.3} | {:.1} | {:.2}x | {:.1} / {:.1} |",
        median(0),
        median(1),
        median(2),
        median(3),
        median(3) / median(0),
        median(4),
        median(5)
    );
}

/// CPU seconds (user + system, all threads) a process has used so far, from /proc/<pid>/stat.
fn process_cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // USER_HZ is 100 on Linux for every architecture lfs runs on.
    ticks / 100.0
}

/// A worker that does not answer within `reply_timeout` is killed and reported, instead of
/// hanging `lfs` (here the limit, 1 ms, is shorter than any reset).
#[test]
fn unresponsive_worker_times_out() {
    let cfg = DmcConfig {
        reply_timeout: std::time::Duration::from_millis(1),
        ..config(Task::CartpoleSwingup, RenderQuality::Default)
    };
    let mut env = DmcEnv::spawn(cfg).unwrap();
    let err = env.reset(0).unwrap_err().to_string();
    assert!(
        err.contains("cartpole_swingup") && err.contains("no reply within 0.001 s"),
        "{err}"
    );
    assert!(env.is_dead());
}

/// Whole episodes, to the time limit, on two tasks: every frame (bit for bit), reward and
/// discount (to 1e-6) and the last flag of the Rust pool against dm_control driven directly
/// (eval/dmc_reference.py resolves task names with dm_control's own lists, not the worker's
/// table). Issue 15: the all-task check above is a few steps long, so it never reaches an
/// episode's end.
#[test]
fn whole_episodes_match_dm_control_to_the_time_limit() {
    // 1000 physics steps at action repeat 2: 500 agent steps, then `last`.
    const AGENT_STEPS: usize = 500;
    for (task, seed) in [(Task::WalkerStand, 21u64), (Task::CartpoleSwingup, 22)] {
        let mut env = DmcEnv::spawn(config(task, RenderQuality::Fast)).unwrap();
        // More actions than the episode takes: the episode must end by itself.
        let plan = actions(env.spec().action_dim, AGENT_STEPS + 20, 3);
        let ours = run_episode(&mut env, seed, &plan);
        assert_eq!(ours.len(), AGENT_STEPS + 1, "{task}: reset + {AGENT_STEPS} steps");
        assert!(ours[AGENT_STEPS].last && ours[1..AGENT_STEPS].iter().all(|s| !s.last));
        let theirs = reference(&[ReferenceRequest {
            task: task.to_string(),
            seed,
            actions: plan.clone(),
            action_repeat: 2,
            render_quality: RenderQuality::Fast,
        }]);
        assert_same_episode(&format!("{task} seed {seed}, whole episode"), &ours, &theirs[0]);
        let total: f64 = ours.iter().skip(1).map(|s| s.reward).sum();
        assert!(total > 0.0, "{task}: no reward in a whole episode");
    }
}

/// `env.episode_frames`: an episode cut short ends where asked, the way dm_control's time limit
/// ends one (`last`, the discount kept), with every step before the cut the uncut episode's;
/// a cut inside an agent step's action repeat ends it after the env steps taken; the next reset
/// starts a whole new episode.
#[test]
fn episodes_cut_short_end_where_asked_as_a_time_limit_does() {
    let task = Task::CartpoleSwingup;
    let mut uncut = DmcEnv::spawn(config(task, RenderQuality::Fast)).unwrap();
    let plan = actions(uncut.spec().action_dim, 8, 2);
    let whole = run_episode(&mut uncut, 31, &plan);
    assert_eq!(whole.len(), 9, "the task's own episode does not end in 8 agent steps");
    for (episode_frames, agent_steps, last_env_steps) in [(10u32, 5usize, 2u32), (9, 5, 1)] {
        let mut cut = DmcEnv::spawn(DmcConfig {
            episode_frames: Some(episode_frames),
            ..config(task, RenderQuality::Fast)
        })
        .unwrap();
        assert_eq!(cut.spec().episode_frames, Some(episode_frames));
        let ours = run_episode(&mut cut, 31, &plan);
        assert_eq!(
            ours.len(),
            agent_steps + 1,
            "cut at {episode_frames}: reset + {agent_steps} steps"
        );
        for t in 0..agent_steps {
            assert_eq!(ours[t], whole[t], "cut at {episode_frames}, step {t}");
        }
        let end = &ours[agent_steps];
        assert!(end.last && end.discount == 1.0, "cut at {episode_frames}: {end:?}");
        assert_eq!(end.env_steps, last_env_steps, "cut at {episode_frames}");
        if last_env_steps == 2 {
            // The whole agent step: the uncut one's, but for `last`.
            let uncut_step = TimeStep {
                last: true,
                ..whole[agent_steps].clone()
            };
            assert_eq!(*end, uncut_step, "cut at {episode_frames}");
        } else {
            assert_ne!(
                end.frame, whole[agent_steps].frame,
                "cut at {episode_frames}: one env step, not two"
            );
        }
        // Stepping past the cut is refused; a reset starts a whole new one.
        assert!(cut.step(&plan[0]).is_err(), "a step after the cut was taken");
        assert_eq!(run_episode(&mut cut, 31, &plan), ours, "the next episode, same seed");
    }
}

/// URLB's four Jaco reach tasks: the first a whole episode (125 agent steps to the 10 s time
/// limit), the other three their first 12 agent steps (they differ from it in the brick's place
/// alone, which the reset frame and the first rewards show; a whole Jaco episode at default
/// rendering is ~70 s of this test on 2 cores): every frame, reward (bit for bit: a reward this
/// far from the brick is tiny, so a tolerance would say nothing) and state of the Rust pool
/// against eval/dmc_reference.py, which builds each task from dm_control's own pieces with its
/// own table of brick positions. The bricks sit in four different places, so the four reset
/// frames differ.
#[test]
fn jaco_reach_tasks_match_dm_control_for_a_whole_episode() {
    const AGENT_STEPS: usize = 125;
    const PREFIX_STEPS: usize = 12;
    let mut pool = EnvPool::new(Task::JACO.iter().map(|&t| config(t, RenderQuality::Default)).collect()).unwrap();
    let seed = 31u64;
    let plans: Vec<Vec<Vec<f32>>> = (0..pool.len())
        .map(|i| {
            assert_eq!(
                pool.spec(i).action_dim,
                9,
                "{}: the Jaco arm and hand",
                pool.spec(i).task
            );
            actions(9, AGENT_STEPS + 5, i)
        })
        .collect();
    // Task 0 runs to its time limit; the others stop after PREFIX_STEPS.
    let steps_of = |i: usize| if i == 0 { AGENT_STEPS } else { PREFIX_STEPS };
    let resets: Vec<_> = (0..pool.len()).map(|_| Some(EnvCommand::Reset { seed })).collect();
    let mut ours: Vec<Vec<TimeStep>> = pool
        .execute(&resets)
        .unwrap()
        .into_iter()
        .map(|r| vec![ready(r)])
        .collect();
    for t in 0..AGENT_STEPS {
        let commands: Vec<_> = plans
            .iter()
            .enumerate()
            .map(|(i, p)| (t < steps_of(i)).then(|| EnvCommand::Step { action: p[t].clone() }))
            .collect();
        for (i, reply) in pool.execute(&commands).unwrap().into_iter().enumerate() {
            if t < steps_of(i) {
                ours[i].push(ready(reply));
            }
        }
    }
    let requests: Vec<ReferenceRequest> = (0..pool.len())
        .map(|i| ReferenceRequest {
            task: pool.spec(i).task.to_string(),
            seed,
            // The whole episode's plan runs past its end (dm_control stops at `last`).
            actions: match i {
                0 => plans[i].clone(),
                _ => plans[i][..PREFIX_STEPS].to_vec(),
            },
            action_repeat: 2,
            render_quality: RenderQuality::Default,
        })
        .collect();
    let theirs = reference(&requests);
    for (i, episode) in ours.iter().enumerate() {
        let n = steps_of(i);
        let what = format!("{} seed {seed}, {n} agent steps", pool.spec(i).task);
        assert_eq!(episode.len(), n + 1, "{what}");
        assert!(
            episode[1..n].iter().all(|s| !s.last) && episode[n].last == (n == AGENT_STEPS),
            "{what}: ends at step {AGENT_STEPS}"
        );
        assert_same_episode(&what, episode, &theirs[i]);
        for (t, step) in episode.iter().enumerate().skip(1) {
            assert_eq!(
                step.reward.to_bits(),
                theirs[i].rewards[t - 1].to_bits(),
                "{what}: step {t} reward"
            );
        }
        let total: f64 = episode.iter().skip(1).map(|s| s.reward).sum();
        assert!(total > 0.0 && total <= 250.0, "{what}: return {total}");
        assert_eq!(
            *pool.spec(i).state_names,
            theirs[i].state_names(),
            "{what}: state names"
        );
    }
    for i in 1..ours.len() {
        assert_ne!(
            ours[0][0].frame,
            ours[i][0].frame,
            "{}: the same first frame as {}",
            pool.spec(i).task,
            pool.spec(0).task
        );
    }
}
