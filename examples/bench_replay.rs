//! Times the replay's pixel sampling alone (`ReplayBuffer::sample`: the draw, the n-step
//! returns and the stacking of O_t and O_{t+n}), the host's share of a pixel agent's step
//! (issue 52: 16 ms of sac/paper's 66 ms per step at B = 512 on an H200's machine). The
//! stacking runs over rayon's threads: RAYON_NUM_THREADS=1 gives the one-thread figure in a
//! process of its own. One JSON line per batch size: the median of `--repeats` samples.
//!
//!     cargo run --release --example bench_replay -- --batch 128,512 --repeats 20

use std::time::Instant;

use anyhow::Context;
use lfs::data::moving_squares::moving_square_episodes;
use lfs::observation::FRAME_BYTES;
use lfs::rl::{FeatureDtype, NStep, ReplayBuffer};
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
    let repeats = arg(&args, "--repeats", 20)?;
    let batches: Vec<usize> = args
        .iter()
        .position(|a| a == "--batch")
        .and_then(|i| args.get(i + 1))
        .map_or("128,512", |s| s.as_str())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("--batch")?;
    let action_dim = 6;
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    // 20 procedural episodes of 500 frames (10,000 transitions: 630 MB of frames would be
    // 100,000; the copies' cost does not depend on the buffer's size once it outgrows the caches).
    let mut replay = ReplayBuffer::new(100_000, FRAME_BYTES, action_dim, 0, FeatureDtype::F32);
    for episode in moving_square_episodes("walker_run", 0, 20, 500, None) {
        replay.start_episode(episode.frame(0))?;
        for t in 1..episode.num_frames {
            let action: Vec<f32> = (0..action_dim).map(|_| rng.random_range(-1.0f32..=1.0)).collect();
            replay.add(&action, rng.random(), episode.frame(t))?;
        }
    }
    // DrQ-v2's returns (3 steps); SAC's are 1.
    let returns = NStep { n: 3, discount: 0.99 };
    for &batch in &batches {
        let mut seconds = Vec::with_capacity(repeats);
        for _ in 0..repeats + 2 {
            let start = Instant::now();
            let t = replay.sample(batch, returns, &mut rng)?;
            seconds.push(start.elapsed().as_secs_f64());
            anyhow::ensure!(t.len == batch, "sampled {} of {batch}", t.len);
        }
        let mut timed = seconds.split_off(2); // 2 warm-ups
        timed.sort_by(f64::total_cmp);
        println!(
            "{{\"bench\":\"replay sample\",\"batch\":{batch},\"seconds\":{:.6},\"repeats\":{repeats},\"threads\":{}}}",
            timed[timed.len() / 2],
            rayon::current_num_threads()
        );
    }
    Ok(())
}
