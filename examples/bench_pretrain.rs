//! Times LFS updates (pipelines/paper.toml, batch size from the command line) on procedural
//! episodes, one JSON line per timed update. Driven by eval/bench/compare.py
//! (`make bench-pretrain`), which interleaves it with eval/bench/pretrain_torch.py.
//!
//!     cargo run --release --example bench_pretrain -- --batch 32 --updates 3 --warmup 1

use std::path::PathBuf;
use std::time::Instant;

use lfs::data::moving_squares::moving_square_episodes;
use lfs::pretrain::{video_pair_sampler, PretrainConfig, Trainer};

/// As the `lfs` binary (src/alloc.rs).
#[global_allocator]
static GLOBAL: lfs::alloc::Allocator = lfs::alloc::Allocator {};

#[path = "common/args.rs"]
mod args;
use args::arg;

fn main() -> anyhow::Result<()> {
    lfs::alloc::keep_freed_memory();
    let args: Vec<String> = std::env::args().collect();
    let batch = arg(&args, "--batch", 32)?;
    let updates = arg(&args, "--updates", 3)?;
    let warmup = arg(&args, "--warmup", 1)?;
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("pipelines/paper.toml");
    let cfg = PretrainConfig::load(&config, &[format!("run.batch_size={batch}")])?;
    // Three tasks as in the paper's seen set; 4 episodes × 60 frames each.
    let mut episodes = Vec::new();
    for (k, task) in ["cartpole_swingup", "reach_duplo", "walker_run"].iter().enumerate() {
        episodes.extend(moving_square_episodes(task, k as u32, 4, 60, None));
    }
    let device = cfg.device()?;
    let mut sampler = video_pair_sampler(&cfg, &episodes, &device)?;
    let mut trainer = Trainer::new(&cfg.trainer_config(), &device)?;
    for i in 0..warmup + updates {
        let start = Instant::now();
        let m = trainer.update(&mut sampler)?;
        let secs = start.elapsed().as_secs_f64();
        if i >= warmup {
            println!(
                "{{\"impl\":\"candle\",\"batch\":{batch},\"update_seconds\":{secs:.6},\"loss\":{:.6},\"num_synthetic\":{},\
                 \"seconds_data\":{:.3},\"seconds_forward\":{:.3},\"seconds_backward\":{:.3},\"seconds_optimizer\":{:.3}}}",
                m.loss, m.num_synthetic, m.seconds_data, m.seconds_forward, m.seconds_backward, m.seconds_optimizer
            );
        }
    }
    Ok(())
}
