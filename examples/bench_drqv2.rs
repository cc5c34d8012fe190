//! DrQ-v2's update as `lfs train` runs it with `[agent] kind = "drqv2"` (docs/design.md §13):
//! random shift of obs and next obs, the encoder's pass over obs with its tape and over next
//! obs without, the agent's update (critic, actor on detached features, target), then the
//! encoder's step on the critic's gradient. pipelines/drqv2/mini.toml with `agent.batch_size =
//! --batch` and `agent.nstep = --nstep`; with `--taco`, TACO's (pipelines/taco/mini.toml, §14):
//! after the encoder's critic step, TACO's views (two shifts of O_t, one of O_t+3) encoded,
//! its loss's update and the encoder's second step, as the loop runs them
//! (src/rl_loop/workspace.rs). Two uses, as eval/bench/drqv2_torch.py:
//!
//! - default: seconds per update on random pixels, one JSON line per timed update (each a
//!   full one); eval/bench/compare.py --suite drqv2 interleaves it with the PyTorch
//!   transcription (`make bench-drqv2`).
//! - `--frames DIR`: updates on the episodes eval/bench/dump_frames.py wrote (frames.npy and
//!   episodes.json with actions and rewards), the run's seed `--seed`, one JSON file of metrics
//!   per update at `--out`; eval/bench/drqv2_dynamics.sh runs both sides and
//!   eval/bench/drqv2_dynamics.py compares them (`make bench-dynamics-drqv2`).
//!
//! Update i is agent step `first step + 2i` (an update every 2 steps after the 2000 seed steps).
//!
//!     cargo run --release --example bench_drqv2 -- --batch 256 --updates 3 --warmup 2
//!     target/release/examples/bench_drqv2 --frames DIR --seed 1 --batch 64 --updates 300 --out FILE

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use candle_core::{Device, Var};
use lfs::config::StageConfig;
use lfs::data::RandomShift;
use lfs::observation::{FRAME_BYTES, FRAME_SIZE, FRAME_STACK};
use lfs::rl::{
    Batch, DrQv2Agent, DrQv2Metrics, FeatureDtype, ReplayBuffer, SequenceViews, TacoAgent, TacoMetrics, Transitions,
};
use lfs::rl_loop::train::{OnlineEncoder, TrainConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// As the `lfs` binary (src/alloc.rs).
#[global_allocator]
static GLOBAL: lfs::alloc::Allocator = lfs::alloc::Allocator {};

#[path = "common/args.rs"]
mod args;
#[path = "common/frames.rs"]
mod frames;
use args::arg;

/// The agent step of the first update: DrQ-v2's 4000 seed frames at action repeat 2.
const FIRST_STEP: u64 = 2000;

/// The agent of one run.
enum Agent {
    DrQv2(Box<DrQv2Agent>),
    Taco(Box<TacoAgent>),
}

/// The encoder, the agent and the shift of one run.
struct Learner {
    encoder: OnlineEncoder,
    agent: Agent,
    shift: RandomShift,
}

/// One update's metrics: DrQ-v2's, and TACO's (its loss's terms too) for TACO.
type Metrics = (DrQv2Metrics, Option<TacoMetrics>);

impl Learner {
    fn new(cfg: &TrainConfig, action_dim: usize, rng: &mut ChaCha8Rng) -> anyhow::Result<Self> {
        let encoder = OnlineEncoder::new(cfg, &Default::default())?;
        let (repr, cpu) = (encoder.repr_dim(), Device::Cpu);
        let agent = match cfg.agent.get::<TacoAgent>() {
            Ok(c) => Agent::Taco(Box::new(TacoAgent::new(
                &c.agent, &c.taco, repr, action_dim, &cpu, rng,
            )?)),
            Err(_) => Agent::DrQv2(Box::new(DrQv2Agent::new(
                cfg.agent.get::<DrQv2Agent>()?,
                repr,
                action_dim,
                &cpu,
                rng,
            )?)),
        };
        let shift = RandomShift {
            pad: cfg.replay.random_shift_pad,
        };
        Ok(Self { encoder, agent, shift })
    }

    /// One update on the sampled transitions `t`, as the loop runs it (src/rl_loop/workspace.rs).
    fn update(&mut self, mut t: Transitions, step: u64, rng: &mut ChaCha8Rng) -> anyhow::Result<Metrics> {
        let n = t.len;
        let dims = (n, 3 * FRAME_STACK, FRAME_SIZE, FRAME_SIZE);
        let unshifted = t.obs.clone();
        self.shift.apply_batch(&mut t.obs, dims, rng);
        self.shift.apply_batch(&mut t.next_obs, dims, rng);
        let features = self.encoder.encode_for_critic(&t.obs, n)?;
        let obs = Var::from_tensor(&features.encoded.h)?.as_tensor().clone();
        let next_obs = self.encoder.encode(&t.next_obs, n)?;
        let batch = Batch::of(&t, obs, next_obs)?;
        let (drqv2, mut taco, dh) = match &mut self.agent {
            Agent::DrQv2(a) => {
                let (m, dh) = a.update(&batch, step, rng)?;
                (m, None, dh)
            }
            Agent::Taco(a) => {
                let (m, dh) = a.update(&batch, step, rng)?;
                (m.agent.clone(), Some(m), dh)
            }
        };
        let dh = dh.context("the critic gave the encoder no gradient")?;
        self.encoder.critic_step(&features, &dh)?;
        if let (Agent::Taco(a), Some(m)) = (&mut self.agent, taco.as_mut()) {
            // TACO's views with the encoder after its critic step: two shifts of O_t, one of O_t+K.
            let (mut anchor, mut positive, mut future) = (unshifted.clone(), unshifted, t.seq_obs.clone());
            for pixels in [&mut anchor, &mut positive, &mut future] {
                self.shift.apply_batch(pixels, dims, rng);
            }
            let anchor_features = self.encoder.encode_for_critic(&anchor, n)?;
            let (k, action_dim) = (a.settings().multistep, t.action.len() / n);
            let views = SequenceViews {
                anchor: Var::from_tensor(&anchor_features.encoded.h)?.as_tensor().clone(),
                positive: self.encoder.encode(&positive, n)?,
                future: self.encoder.encode(&future, n)?,
                action_seq: candle_core::Tensor::from_slice(&t.action_seq, (n, k, action_dim), &Device::Cpu)?,
            };
            let dh = a
                .update_taco(&views, &batch.reward, m)?
                .context("no gradient for TACO's anchor")?;
            self.encoder.agent_objective_step(&anchor_features, &dh)?;
        }
        Ok((drqv2, taco))
    }
}

fn config(batch: usize, nstep: usize, seed: u64, taco: bool) -> anyhow::Result<TrainConfig> {
    let name = if taco { "taco" } else { "drqv2" };
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("pipelines/{name}/mini.toml"));
    let cfg = TrainConfig::load(
        &path,
        &[
            format!("agent.batch_size={batch}"),
            format!("agent.nstep={nstep}"),
            format!("run.seed={seed}"),
        ],
    )?;
    cfg.validate()?;
    Ok(cfg)
}

fn main() -> anyhow::Result<()> {
    lfs::alloc::keep_freed_memory();
    let args: Vec<String> = std::env::args().collect();
    let batch = arg(&args, "--batch", 256)?;
    let updates = arg(&args, "--updates", 3)?;
    let nstep = arg(&args, "--nstep", 3)?;
    let seed = arg(&args, "--seed", 1)? as u64;
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let cfg = config(batch, nstep, seed, args.iter().any(|a| a == "--taco"))?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    if let Some(frames) = value("--frames") {
        let out = value("--out").context("--frames needs --out FILE")?;
        return dynamics(&cfg, Path::new(frames), updates, Path::new(out), &mut rng);
    }
    let warmup = arg(&args, "--warmup", 2)?;
    let action_dim = 6; // walker/cheetah
    let mut learner = Learner::new(&cfg, action_dim, &mut rng)?;
    let (returns, k) = (cfg.agent.returns(), cfg.agent.action_sequence());
    // Random pixels in a replay of one long episode: every sample's frames differ.
    let mut replay = ReplayBuffer::new(cfg.replay.capacity, FRAME_BYTES, action_dim, 0, FeatureDtype::F32);
    let frame = |rng: &mut ChaCha8Rng| -> Vec<u8> { (0..FRAME_BYTES).map(|_| rng.random()).collect() };
    replay.start_episode(&frame(&mut rng))?;
    for _ in 0..2 * batch {
        let action: Vec<f32> = (0..action_dim).map(|_| rng.random_range(-1.0f32..=1.0)).collect();
        replay.add(&action, rng.random(), &frame(&mut rng))?;
    }
    for i in 0..warmup + updates {
        let t = replay.sample_with_sequence(batch, returns, k, &mut rng)?;
        let start = Instant::now();
        learner.update(t, FIRST_STEP + 2 * i as u64, &mut rng)?;
        let seconds = start.elapsed().as_secs_f64();
        if i >= warmup {
            println!("{{\"impl\":\"candle\",\"batch\":{batch},\"update_seconds\":{seconds:.6}}}");
        }
    }
    Ok(())
}

/// `updates` updates on the episodes of `frames` (dump_frames.py's), metrics written to `out`.
fn dynamics(cfg: &TrainConfig, frames: &Path, updates: usize, out: &Path, rng: &mut ChaCha8Rng) -> anyhow::Result<()> {
    let mut replay = frames::replay(frames, cfg.replay.capacity)?;
    let action_dim = replay.action_dim();
    let mut learner = Learner::new(cfg, action_dim, rng)?;
    let mut rows = Vec::with_capacity(updates);
    for i in 0..updates {
        let k = cfg.agent.action_sequence();
        let t = replay.sample_with_sequence(cfg.agent.batch_size(), cfg.agent.returns(), k, rng)?;
        rows.push(learner.update(t, FIRST_STEP + 2 * i as u64, rng)?);
    }
    let column = |f: fn(&DrQv2Metrics) -> f64| rows.iter().map(|(m, _)| f(m)).collect::<Vec<f64>>();
    let taco = |f: fn(&TacoMetrics) -> Option<f64>| {
        rows.iter()
            .map(|(_, t)| t.as_ref().and_then(f))
            .collect::<Option<Vec<f64>>>()
    };
    let mut json = serde_json::json!({
        "seed": cfg.run.seed,
        "batch": cfg.agent.batch_size(),
        "nstep": cfg.agent.returns().n,
        "updates": updates,
        "metrics": {
            "critic_loss": column(|m| m.critic_loss),
            "critic_q1": column(|m| m.critic_q1),
            "critic_q2": column(|m| m.critic_q2),
            "critic_target_q": column(|m| m.critic_target_q),
            "actor_loss": column(|m| m.actor_loss),
            "batch_reward": column(|m| m.batch_reward),
        },
    });
    if let Some(taco_loss) = taco(|t| Some(t.taco_loss)) {
        json["agent"] = "taco".into();
        json["metrics"]["taco_loss"] = taco_loss.into();
        json["metrics"]["curl_loss"] = taco(|t| t.curl_loss).into();
        json["metrics"]["reward_loss"] = taco(|t| t.reward_loss).into();
    }
    std::fs::write(out, serde_json::to_string(&json)?).with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}
