//! Times agent steps of `lfs train` after the seed frames (docs/design.md §7, the paper's
//! Algorithm 1) on pipelines/e2e/paper.toml with `agent.batch_size = --batch` (so M = B): draw B
//! transitions from a replay of procedural episodes, one update of the auxiliary objective (LFS)
//! on the encoder with the B real pairs and B frame-mask candidates from the replay's frames,
//! then one SAC update on the shifted obs and next obs encoded by the updated encoder, exactly
//! as `lfs train` does it (src/rl_loop/workspace.rs, `Workspace::batch`). The environment step and the
//! acting are left out. One JSON line per timed step: the whole step, the objective's update
//! (`aux_seconds`) and the SAC half (`sac_seconds`: shift, two encoder passes, the update).
//! Step i is agent step i, so the actor, α and the target critic update on even steps only
//! (`actor_update`), as in the run. Driven by eval/bench/compare.py (`make bench-e2e`), which
//! interleaves it with eval/bench/e2e_torch.py.
//!
//!     cargo run --release --example bench_e2e -- --batch 128 --updates 3 --warmup 2

use std::path::PathBuf;
use std::time::Instant;

use candle_core::Device;
use lfs::config::StageConfig;
use lfs::data::moving_squares::moving_square_episodes;
use lfs::data::RandomShift;
use lfs::observation::{FRAME_BYTES, FRAME_SIZE, FRAME_STACK};
use lfs::rl::{Batch, FeatureDtype, GradientPath, ReplayBuffer, SacAgent};
use lfs::rl_loop::train::{OnlineEncoder, TrainConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// As the `lfs` binary (src/alloc.rs).
#[global_allocator]
static GLOBAL: lfs::alloc::Allocator = lfs::alloc::Allocator {};

#[path = "common/args.rs"]
mod args;
use args::arg;

fn main() -> anyhow::Result<()> {
    lfs::alloc::keep_freed_memory();
    let args: Vec<String> = std::env::args().collect();
    let batch = arg(&args, "--batch", 128)?;
    let updates = arg(&args, "--updates", 3)?;
    let warmup = arg(&args, "--warmup", 2)?;
    // walker/cheetah
    let action_dim = 6;
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("pipelines/e2e/paper.toml");
    let cfg = TrainConfig::load(&config, &[format!("agent.batch_size={batch}")])?;
    cfg.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.run.seed);
    let mut online = OnlineEncoder::new(&cfg, &Default::default())?;
    let mut agent = SacAgent::new(
        cfg.agent.get::<SacAgent>()?,
        online.repr_dim(),
        action_dim,
        GradientPath::for_features(&Device::Cpu, online.critic_trains_encoder()),
        &Device::Cpu,
        &mut rng,
    )?;
    let shift = RandomShift {
        pad: cfg.replay.random_shift_pad,
    };

    // The replay: 4 procedural episodes of 250 frames (1000 transitions), random actions and
    // rewards, as `lfs train` stores them (docs/design.md §6).
    let mut replay = ReplayBuffer::new(cfg.replay.capacity, FRAME_BYTES, action_dim, 0, FeatureDtype::F32);
    for episode in moving_square_episodes("walker_run", 0, 4, 250, None) {
        replay.start_episode(episode.frame(0))?;
        for t in 1..episode.num_frames {
            let action: Vec<f32> = (0..action_dim).map(|_| rng.random_range(-1.0f32..=1.0)).collect();
            replay.add(&action, rng.random(), episode.frame(t))?;
        }
    }

    let dims = (batch, 3 * FRAME_STACK, FRAME_SIZE, FRAME_SIZE);
    for i in 0..warmup + updates {
        let step = i as u64;
        let start = Instant::now();
        let mut t = replay.sample(batch, cfg.agent.returns(), &mut rng)?;
        let sampled = Instant::now();
        // Algorithm 1: the objective's update on the (unshifted) batch first ...
        let aux = online
            .update(&t, &replay, None)?
            .ok_or_else(|| anyhow::anyhow!("paper.toml's aux.method has no objective"))?;
        let aux_done = Instant::now();
        // ... then SAC on the batch encoded by the updated encoder, without gradient.
        shift.apply_batch(&mut t.obs, dims, &mut rng);
        shift.apply_batch(&mut t.next_obs, dims, &mut rng);
        let sac_batch = Batch::of(&t, online.encode(&t.obs, batch)?, online.encode(&t.next_obs, batch)?)?;
        let encoded = Instant::now();
        agent.update(&sac_batch, step, &mut rng)?;
        let end = Instant::now();
        if i >= warmup {
            let actor_update = step.is_multiple_of(cfg.agent.get::<SacAgent>()?.actor_update_every_steps);
            println!(
                "{{\"impl\":\"candle\",\"batch\":{batch},\"step\":{step},\"actor_update\":{actor_update},\
                 \"update_seconds\":{:.6},\"sample_seconds\":{:.6},\"aux_seconds\":{:.6},\"sac_seconds\":{:.6},\
                 \"encode_seconds\":{:.6},\"aux_loss\":{:.6},\"num_synthetic\":{}}}",
                (end - start).as_secs_f64(),
                (sampled - start).as_secs_f64(),
                (aux_done - sampled).as_secs_f64(),
                (end - aux_done).as_secs_f64(),
                (encoded - aux_done).as_secs_f64(),
                aux.loss,
                aux.num_synthetic,
            );
        }
    }
    Ok(())
}
