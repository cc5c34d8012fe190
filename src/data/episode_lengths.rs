//! Episodes too short to give a training pair. A real pair needs 2 frames and a frame-mask
//! synthetic pair 5 (docs/design.md §1–2); shorter episodes add nothing of that kind. Counted
//! per task before training starts, so a dataset of short clips is reported by name up front
//! instead of failing at the first update that draws from it.

use std::collections::BTreeMap;

use crate::shards::Episode;

/// Frames an episode needs to give a real pair `(O_{t-1}, O_t)`: t ≥ 1.
pub const MIN_FRAMES_FOR_REAL_PAIR: usize = 2;

/// Frames an episode needs to give a frame-mask synthetic pair: t ≥ 4 (it stacks F_{t-4}…F_t).
pub const MIN_FRAMES_FOR_SYNTHETIC_PAIR: usize = 5;

/// The episodes of one task, and how many of them are too short for each kind of pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEpisodeLengths {
    pub task: String,
    pub episodes: usize,
    /// Episodes under [`MIN_FRAMES_FOR_REAL_PAIR`] frames.
    pub without_real_pair: usize,
    /// Episodes under [`MIN_FRAMES_FOR_SYNTHETIC_PAIR`] frames.
    pub without_synthetic_pair: usize,
}

/// Per task (sorted by name), the episode count and the short ones.
pub fn episode_lengths(episodes: &[Episode]) -> Vec<TaskEpisodeLengths> {
    let (real, synthetic) = (MIN_FRAMES_FOR_REAL_PAIR, MIN_FRAMES_FOR_SYNTHETIC_PAIR);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{frame_mask_pair, real_pair};

    #[test]
    fn the_minimum_lengths_are_where_each_pair_starts() {
        let first = |pair: fn(usize) -> Option<crate::data::PairFrames>| (0..64).find(|&t| pair(t).is_some()).unwrap();
        assert_eq!(MIN_FRAMES_FOR_REAL_PAIR, first(real_pair) + 1);
        assert_eq!(MIN_FRAMES_FOR_SYNTHETIC_PAIR, first(frame_mask_pair) + 1);
    }
}
