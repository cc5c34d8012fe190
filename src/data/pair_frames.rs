//! Pairs of observations as frame indices into one episode. The real pair is two consecutive
//! observations (docs/design.md §1); the synthetic pair of [`super::frame_mask`] has the same shape.

use crate::observation::{stack_indices, StackIndices};

/// A (previous, current) pair of observations as frame indices into one episode. The previous
/// observation goes through the online branch, the current one through the target branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairFrames {
    pub prev: StackIndices,
    pub cur: StackIndices,
}

/// The real pair `(O_{t-1}, O_t)`; `None` for t = 0 (no previous observation).
pub fn real_pair(t: usize) -> Option<PairFrames> {
    (t >= 1).then(|| PairFrames {
        prev: stack_indices(t - 1),
        cur: stack_indices(t),
    })
}
