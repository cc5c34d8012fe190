//! Times SAC updates on encoder features (the agent of docs/design.md §6, 39200-d features,
//! 6 action dimensions as walker/cheetah), one JSON line per timed update, split into the
//! critic step and the actor + α step. `--pixels` adds the frozen encoder's two forward passes
//! over the shifted obs and next obs (the path without the feature cache).
//!
//!     cargo run --release --example bench_sac -- --batch 128 --updates 5 --warmup 2 [--pixels]

use std::time::Instant;

use candle_core::{Device, Tensor};
use lfs::data::RandomShift;
use lfs::nn::{Encoder, EncoderConfig, Params};
use lfs::rl::{Batch, GradientPath, SacAgent, SacConfig};
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
    let updates = arg(&args, "--updates", 5)?;
    let warmup = arg(&args, "--warmup", 2)?;
    let pixels = args.iter().any(|a| a == "--pixels");
    let action_dim = 6;
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let enc_cfg = EncoderConfig::default();
    let mut params = Params::new(&Device::Cpu);
    let encoder = Encoder::new(&enc_cfg, "encoder", &mut params, &mut rng)?;
    let repr = encoder.repr_dim();
    let cfg = SacConfig {
        batch_size: batch,
        ..SacConfig::default()
    };
    // The features are constants (no encoder tape), as lfs eval's.
    let path = GradientPath::for_features(&Device::Cpu, false);
    let mut agent = SacAgent::new(&cfg, repr, action_dim, path, &Device::Cpu, &mut rng)?;
    let shift = RandomShift { pad: 4 };
    let obs_len = 9 * 84 * 84;
    let raw_obs: Vec<u8> = (0..batch * obs_len).map(|_| rng.random()).collect();
    let features: Vec<f32> = (0..batch * repr).map(|_| rng.random_range(0.0f32..0.5)).collect();
    for i in 0..warmup + updates {
        let start = Instant::now();
        let (obs, next_obs) = if pixels {
            let (mut o, mut n) = (raw_obs.clone(), raw_obs.clone());
            shift.apply_batch(&mut o, (batch, 9, 84, 84), &mut rng);
            shift.apply_batch(&mut n, (batch, 9, 84, 84), &mut rng);
            (encoder.encode(&o, batch, false)?.h, encoder.encode(&n, batch, false)?.h)
        } else {
            let t = Tensor::from_slice(&features, (batch, repr), &Device::Cpu)?;
            (t.clone(), t)
        };
        let encoded = Instant::now();
        let sac_batch = Batch {
            obs,
            discount: Tensor::full(cfg.discount as f32, (batch, 1), &Device::Cpu)?,
            action: Tensor::from_vec(
                (0..batch * action_dim)
                    .map(|_| rng.random_range(-1.0f32..1.0))
                    .collect(),
                (batch, action_dim),
                &Device::Cpu,
            )?,
            reward: Tensor::from_vec(
                (0..batch).map(|_| rng.random::<f32>()).collect(),
                (batch, 1),
                &Device::Cpu,
            )?,
            next_obs,
        };
        // Every timed update is a full one: even steps update the actor, α and the target too
        // (actor_update_every_steps = 2), as eval/bench/sac_torch.py times it.
        let step = 2 * i as u64;
        agent.update(&sac_batch, step, &mut rng)?;
        let end = Instant::now();
        if i >= warmup {
            println!(
                "{{\"impl\":\"candle\",\"batch\":{batch},\"pixels\":{pixels},\"update_seconds\":{:.6},\"encode_seconds\":{:.6}}}",
                (end - start).as_secs_f64(),
                (encoded - start).as_secs_f64()
            );
        }
    }
    Ok(())
}
