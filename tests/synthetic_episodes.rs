//! In-memory episodes for the pre-training tests: the library's moving squares (84×84, a
//! different speed per task and episode) and a counting episode for index checks.

use lfs::shards::Episode;

pub use lfs::data::moving_squares::moving_square_episodes;

/// An episode whose frame t is filled with the value t (for index checks), 3×h×w frames.
pub fn counting_episode(num_frames: usize, h: usize, w: usize) -> Episode {
    let mut frames = Vec::with_capacity(num_frames * 3 * h * w);
    for t in 0..num_frames {
        frames.extend(std::iter::repeat_n(t as u8, 3 * h * w));
    }
    Episode {
        episode_index: 0,
        task: "count".into(),
        task_index: 0,
        render_quality: None,
        num_frames,
        height: h,
        width: w,
        frames,
        state: None,
        rewards: None,
    }
}
