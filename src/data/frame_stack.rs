//! Frame stacking (SPEC §1): `O_t = [F_{t-2}, F_{t-1}, F_t]`, oldest first in channels, and at
//! an episode start the first frame is repeated (dm_control frame-stack wrappers).

use crate::shards::Episode;

/// Frames per observation.
pub const FRAME_STACK: usize = 3;

/// The frame indices of one observation, oldest first.
pub type StackIndices = [usize; FRAME_STACK];

/// A (previous, current) pair of observations as frame indices into one episode. The previous
/// observation goes through the online branch, the current one through the target branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairFrames {
    pub prev: StackIndices,
    pub cur: StackIndices,
}

/// Frame indices of `O_t`, with indices before the episode start clamped to frame 0.
pub fn observation(t: usize) -> StackIndices {
    [t.saturating_sub(2), t.saturating_sub(1), t]
}

/// The real pair `(O_{t-1}, O_t)`; `None` for t = 0 (no previous observation).
pub fn real_pair(t: usize) -> Option<PairFrames> {
    (t >= 1).then(|| PairFrames {
        prev: observation(t - 1),
        cur: observation(t),
    })
}

/// Writes the stacked observation (9, h, w) uint8 for `frames` of `episode` into `out`.
pub fn stack_frames(episode: &Episode, frames: StackIndices, out: &mut [u8]) {
    let n = 3 * episode.height * episode.width;
    for (slot, &t) in frames.iter().enumerate() {
        out[slot * n..(slot + 1) * n].copy_from_slice(episode.frame(t));
    }
}
