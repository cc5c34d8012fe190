//! Frame mask (paper §3.1, Eq. 2, appendix "PyTorch-style pseudo code for frame mask";
//! docs/design.md §2): from five consecutive frames F_{t-4} … F_t of one episode, drop F_{t-2}:
//! synthetic previous `[F_{t-4}, F_{t-3}, F_{t-1}]`, synthetic current `[F_{t-3}, F_{t-1}, F_t]`
//! (oldest first, the paper's Eq. 2 reversed to the channel order of docs/design.md §1).

use super::pair_frames::PairFrames;

/// The synthetic pair ending at frame t; `None` when t < 4 (five real frames are needed, so no
/// synthetic pair uses the repeated first frame).
pub fn frame_mask_pair(t: usize) -> Option<PairFrames> {
    (t >= 4).then(|| PairFrames {
        prev: [t - 4, t - 3, t - 1],
        cur: [t - 3, t - 1, t],
    })
}
