//! Proto-RL's and APT's exploration updates as `lfs explore` runs them (docs/design.md §15), on
//! the fixed replay of eval/bench/dump_frames.py, for the training-dynamics check against the
//! PyTorch transcriptions of their upstreams (eval/bench/explore_torch.py, whose flags and JSON
//! this takes and writes; eval/bench/explore_dynamics.sh runs both sides and
//! eval/bench/explore_dynamics.py compares them). One domain: the replay's.
//!
//! An update is the loop's (src/rl_loop/workspace.rs): Proto-RL's representation step on the
//! batch (every second update), the batch shifted and encoded (O_t with its tape for APT), the
//! intrinsic reward in place of the task's, the agent's update. Proto-RL updates at every agent
//! step from `--first-step`, APT at every second one (URLB's `update_every_steps`).
//!
//!     target/release/examples/bench_explore --method proto --frames DIR --seed 1 --batch 64 \
//!         --updates 300 --protos 64 --queue 256 --out FILE

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use candle_core::Device;
use lfs::config::StageConfig;
use lfs::data::RandomShift;
use lfs::device::Backend;
use lfs::observation::{FRAME_SIZE, FRAME_STACK};
use lfs::rl::{Agent, Batch, DrQv2Agent, GradientPath, SacAgent};
use lfs::rl_loop::explore::apt::Apt;
use lfs::rl_loop::explore::proto::Proto;
use lfs::rl_loop::explore::{ExploreConfig, ExploreMethod, Explorer};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

#[global_allocator]
static GLOBAL: lfs::alloc::Allocator = lfs::alloc::Allocator {};

#[path = "common/args.rs"]
mod args;
#[path = "common/frames.rs"]
mod frames;
use args::arg;

fn main() -> anyhow::Result<()> {
    lfs::alloc::keep_freed_memory();
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let method = value("--method").context("--method proto|apt")?.clone();
    let frames = PathBuf::from(value("--frames").context("--frames DIR")?);
    let out = PathBuf::from(value("--out").context("--out FILE")?);
    let (batch, updates, seed) = (
        arg(&args, "--batch", 64)?,
        arg(&args, "--updates", 300)?,
        arg(&args, "--seed", 1)?,
    );
    let first_step = arg(&args, "--first-step", 2000)? as u64;
    let (protos, queue) = (arg(&args, "--protos", 512)?, arg(&args, "--queue", 2048)?);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("pipelines/explore/{method}/mini.toml"));
    let cfg = ExploreConfig::load(
        &path,
        &[
            format!("agent.batch_size={batch}"),
            format!("run.seed={seed}"),
            format!("explore.proto.num_prototypes={protos}"),
            format!("explore.proto.queue_size={queue}"),
            "explore.tasks=[\"cartpole_swingup\"]".to_string(),
        ],
    )?;
    cfg.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed as u64);
    let mut replay = frames::replay(&frames, cfg.replay.capacity)?;
    let action_dim = replay.action_dim();
    let backend = Backend::new(&Device::Cpu);
    let start = Instant::now();
    let Updates {
        metrics,
        update_seconds,
    } = match cfg.explore.method {
        ExploreMethod::Proto => {
            let explorer = Proto::new(
                &cfg.explore.proto,
                &cfg.explore.encoder,
                seed as u64,
                batch,
                cfg.replay.random_shift_pad,
                1,
                &backend,
            )?;
            // Constant features, as lfs explore's domains give them.
            let agent = SacAgent::new(
                cfg.agent.get::<SacAgent>()?,
                explorer.encoder().repr_dim(),
                action_dim,
                GradientPath::for_features(&Device::Cpu, false),
                &Device::Cpu,
                &mut rng,
            )?;
            run(
                &cfg,
                Box::new(explorer),
                agent,
                &mut replay,
                updates,
                |i| first_step + i,
                &mut rng,
            )?
        }
        ExploreMethod::Apt => {
            let explorer = Apt::new(
                &cfg.explore.apt,
                &cfg.explore.encoder,
                &[action_dim],
                &backend,
                &mut rng,
            )?;
            let agent = DrQv2Agent::new(
                cfg.agent.get::<DrQv2Agent>()?,
                explorer.encoder().repr_dim(),
                action_dim,
                &Device::Cpu,
                &mut rng,
            )?;
            run(
                &cfg,
                Box::new(explorer),
                agent,
                &mut replay,
                updates,
                |i| first_step + 2 * i,
                &mut rng,
            )?
        }
    };
    let mut json = serde_json::json!({
        "method": method, "seed": seed, "batch": batch, "nstep": cfg.agent.returns().n, "updates": updates,
        "first_step": first_step, "seconds": start.elapsed().as_secs_f64(), "metrics": metrics,
        "impl": "candle", "update_seconds": update_seconds,
    });
    if cfg.explore.method == ExploreMethod::Proto {
        json["protos"] = protos.into();
        json["queue"] = queue.into();
    }
    std::fs::write(&out, serde_json::to_string(&json)?).with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}

/// What [`run`] measured.
struct Updates {
    /// Each metric's values over the updates that produced it, under explore_torch.py's names.
    metrics: serde_json::Map<String, serde_json::Value>,
    /// Each update's wall-clock, sample to agent step.
    update_seconds: Vec<f64>,
}

/// `updates` updates of `explorer` and `agent` on `replay`, update i at agent step `step(i)`.
fn run<A: Agent>(
    cfg: &ExploreConfig,
    mut explorer: Box<dyn Explorer>,
    mut agent: A,
    replay: &mut lfs::rl::ReplayBuffer,
    updates: usize,
    step: impl Fn(u64) -> u64,
    rng: &mut ChaCha8Rng,
) -> anyhow::Result<Updates> {
    let shift = RandomShift {
        pad: cfg.replay.random_shift_pad,
    };
    let mut metrics = serde_json::Map::new();
    let mut seconds = Vec::with_capacity(updates);
    let mut record = |name: &str, v: f64| {
        let column = metrics.entry(name).or_insert_with(|| serde_json::Value::Array(vec![]));
        if let serde_json::Value::Array(values) = column {
            values.push(v.into());
        }
    };
    for i in 0..updates as u64 {
        let started = Instant::now();
        let mut t = replay.sample(agent.batch_size(), cfg.agent.returns(), rng)?;
        for (name, v) in explorer.update_before_encoding(0, &t, replay)? {
            record(name, v);
        }
        let n = t.len;
        let dims = (n, 3 * FRAME_STACK, FRAME_SIZE, FRAME_SIZE);
        shift.apply_batch(&mut t.obs, dims, rng);
        shift.apply_batch(&mut t.next_obs, dims, rng);
        let encoder = explorer.encoder();
        let tape = encoder.encode(&t.obs, n, explorer.wants_obs_tape())?;
        let next = encoder.encode(&t.next_obs, n, false)?.h;
        let mut batch = Batch::of(&t, tape.h.clone(), next)?;
        let kept = explorer.wants_obs_tape().then_some(&tape);
        let reward = explorer.intrinsic_reward(0, &batch, kept, &t.obs, &t.next_obs)?;
        for (name, v) in &reward.terms {
            record(name, *v);
        }
        batch.reward = reward.reward;
        let update = agent.update(&batch, step(i), rng)?;
        let value = serde_json::to_value(&update.metrics)?;
        for (key, v) in value.as_object().context("agent metrics")? {
            if let Some(v) = v.as_f64() {
                record(key.trim_start_matches("train/"), v);
            }
        }
        seconds.push(started.elapsed().as_secs_f64());
    }
    // explore_torch.py's name for the reward's batch mean.
    if let Some(v) = metrics.remove("intrinsic_reward") {
        metrics.insert("intr_reward".into(), v);
    }
    if metrics.is_empty() {
        bail!("no update ran");
    }
    Ok(Updates {
        metrics,
        update_seconds: seconds,
    })
}
