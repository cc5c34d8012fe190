//! Procedural episodes (a bright square moving over a textured background, 84×84) for
//! benchmarks and tests that need pixels but no dataset on disk. Deterministic: episode e of
//! task index k moves at speed 2 + e + 3k pixels per frame.

use crate::env::RenderQuality;
use crate::shards::Episode;

/// `num_episodes` episodes of `num_frames` frames for `task`.
pub fn moving_square_episodes(
    task: &str,
    task_index: u32,
    num_episodes: usize,
    num_frames: usize,
    render_quality: Option<RenderQuality>,
) -> Vec<Episode> {
    let (h, w) = (84usize, 84usize);
    (0..num_episodes)
        .map(|e| {
            let speed = 2 + e + 3 * task_index as usize;
            let mut frames = vec![0u8; num_frames * 3 * h * w];
            for t in 0..num_frames {
                let x0 = (5 + t * speed) % (w - 12);
                let y0 = (10 + t * (speed / 2 + 1)) % (h - 12);
                for c in 0..3 {
                    for y in 0..h {
                        for x in 0..w {
                            let inside = (y0..y0 + 12).contains(&y) && (x0..x0 + 12).contains(&x);
                            let v = if inside {
                                200 + 20 * c
                            } else {
                                (x + 2 * y + 17 * c + 5 * task_index as usize) % 40
                            };
                            frames[((t * 3 + c) * h + y) * w + x] = v as u8;
                        }
                    }
                }
            }
            Episode {
                episode_index: e as u64,
                task: task.to_string(),
                task_index,
                render_quality,
                num_frames,
                height: h,
                width: w,
                frames,
                state: None,
                rewards: None,
            }
        })
        .collect()
}
