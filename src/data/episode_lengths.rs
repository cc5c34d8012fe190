//! Episodes too short to give a training pair. A real pair needs 2 frames and a frame-mask
//! synthetic pair 5 (docs/design.md §1–2); shorter episodes add nothing of that kind. Counted
//! per task before training starts, so a dataset of short clips is reported by name up front
//! instead of failing at the first update that draws from it.

use std::collections::BTreeMap;

use super::frame_mask::frame_mask_pair;
use super::pair_frames::{real_pair, PairFrames};
use crate::shards::Episode;

/// The fewest frames an episode needs to give at least one pair built by `pair`.
fn min_frames(pair: fn(usize) -> Option<PairFrames>) -> usize {
    // Every pair kind exists from some small t on; 64 bounds the search.
    (0..64).find(|&t| pair(t).is_some()).map_or(usize::MAX, |t| t + 1)
}

/// Frames an episode needs to give a real pair (2).
pub fn min_frames_for_real_pair() -> usize {
    min_frames(real_pair)
}

/// Frames an episode needs to give a frame-mask synthetic pair (5).
pub fn min_frames_for_synthetic_pair() -> usize {
    min_frames(frame_mask_pair)
}

/// The episodes of one task, and how many of them are too short for each kind of pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEpisodeLengths {
    pub task: String,
    pub episodes: usize,
    /// Episodes under [`min_frames_for_real_pair`] frames.
    pub without_real_pair: usize,
    /// Episodes under [`min_frames_for_synthetic_pair`] frames.
    pub without_synthetic_pair: usize,
}

impl TaskEpisodeLengths {
    /// Whether some episode of the task gives no pair of some kind.
    pub fn has_short_episodes(&self) -> bool {
        self.without_synthetic_pair > 0 || self.without_real_pair > 0
    }
}

/// Per task (sorted by name), the episode count and the short ones.
pub fn episode_lengths(episodes: &[Episode]) -> Vec<TaskEpisodeLengths> {
    let (real, synthetic) = (min_frames_for_real_pair(), min_frames_for_synthetic_pair());
    let mut by_task: BTreeMap<&str, TaskEpisodeLengths> = BTreeMap::new();
    for ep in episodes {
        let entry = by_task.entry(&ep.task).or_insert_with(|| TaskEpisodeLengths {
            task: ep.task.clone(),
            episodes: 0,
            without_real_pair: 0,
            without_synthetic_pair: 0,
        });
        entry.episodes += 1;
        entry.without_real_pair += usize::from(ep.num_frames < real);
        entry.without_synthetic_pair += usize::from(ep.num_frames < synthetic);
    }
    by_task.into_values().collect()
}
