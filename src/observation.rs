//! Observations (docs/design.md §1): the last [`FRAME_STACK`] frames of an episode, channel-first and
//! oldest first, `O_t = [F_{t-2}, F_{t-1}, F_t]`; at an episode start the first frame fills the
//! missing slots, as dm_control's frame-stack wrappers do.
//!
//! Two views of the same rule: a stored episode gives the frame indices of `O_t`
//! ([`stack_indices`], gathered by [`stack_frames`]); a live environment gives one frame at a
//! time ([`FrameStack`]). Both hold frames as (3, h, w) uint8, converted once by
//! [`hwc_to_chw`] from the (h, w, 3) that decoders and MuJoCo produce.

use std::collections::VecDeque;

/// Frame height and width in pixels of the environments' frames.
pub const FRAME_SIZE: usize = 84;
/// Bytes in one (84, 84, 3) RGB frame.
pub const FRAME_BYTES: usize = FRAME_SIZE * FRAME_SIZE * 3;

/// Frames per observation.
pub const FRAME_STACK: usize = 3;

/// The frame indices of one observation, oldest first.
pub type StackIndices = [usize; FRAME_STACK];

/// Frame indices of `O_t`, with indices before the episode start clamped to frame 0.
pub fn stack_indices(t: usize) -> StackIndices {
    [t.saturating_sub(2), t.saturating_sub(1), t]
}

/// A stored episode's frames, channel-first: what [`stack_frames`] gathers from.
pub trait StoredFrames {
    /// Frame `t` as (3, h, w) uint8.
    fn frame(&self, t: usize) -> &[u8];
}

/// Writes the stacked observation (9, h, w) uint8 of frames `frames` of `episode` into `out`.
pub fn stack_frames(episode: &impl StoredFrames, frames: StackIndices, out: &mut [u8]) {
    for (slot, &t) in frames.iter().enumerate() {
        let frame = episode.frame(t);
        let n = frame.len();
        out[slot * n..(slot + 1) * n].copy_from_slice(frame);
    }
}

/// The last [`FRAME_STACK`] frames of a live episode, oldest first (the environment's
/// (84, 84, 3) frames, stored channel-first).
#[derive(Debug, Clone, Default)]
pub struct FrameStack {
    /// Channel-first (3, 84, 84) frames, oldest at the front.
    frames: VecDeque<Vec<u8>>,
}

impl FrameStack {
    pub fn new() -> Self {
        Self {
            frames: VecDeque::with_capacity(FRAME_STACK),
        }
    }

    /// Starts an episode with its first (84, 84, 3) HWC frame.
    pub fn reset(&mut self, first_frame: &[u8]) {
        let chw = env_frame_to_chw(first_frame);
        self.frames.clear();
        for _ in 0..FRAME_STACK {
            self.frames.push_back(chw.clone());
        }
    }

    /// Adds the (84, 84, 3) HWC frame of the latest step, dropping the oldest.
    pub fn push(&mut self, frame: &[u8]) {
        if self.frames.len() == FRAME_STACK {
            self.frames.pop_front();
        }
        self.frames.push_back(env_frame_to_chw(frame));
    }

    /// The observation as (9, 84, 84) uint8, channels oldest frame first; empty before the
    /// first [`FrameStack::reset`].
    pub fn observation(&self) -> Vec<u8> {
        let mut obs = Vec::with_capacity(FRAME_STACK * FRAME_BYTES);
        for frame in &self.frames {
            obs.extend_from_slice(frame);
        }
        obs
    }
}

/// One environment frame, (84, 84, 3) -> (3, 84, 84).
pub fn env_frame_to_chw(frame: &[u8]) -> Vec<u8> {
    assert_eq!(frame.len(), FRAME_BYTES, "frames are 84x84 RGB");
    let mut chw = vec![0u8; FRAME_BYTES];
    hwc_to_chw(frame, FRAME_SIZE, FRAME_SIZE, &mut chw);
    chw
}

/// (h, w, 3) -> (3, h, w), uint8.
pub fn hwc_to_chw(hwc: &[u8], w: usize, h: usize, chw: &mut [u8]) {
    let plane = w * h;
    let (r, gb) = chw[..3 * plane].split_at_mut(plane);
    let (g, b) = gb.split_at_mut(plane);
    // Zipped iterators: no bounds checks in the loop.
    for (((px, r), g), b) in hwc[..3 * plane].chunks_exact(3).zip(r).zip(g).zip(b) {
        *r = px[0];
        *g = px[1];
        *b = px[2];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hwc_to_chw_splits_channels_into_planes() {
        // 2×1 image: pixels (1,2,3) and (4,5,6).
        let mut out = [0u8; 6];
        hwc_to_chw(&[1, 2, 3, 4, 5, 6], 2, 1, &mut out);
        assert_eq!(out, [1, 4, 2, 5, 3, 6]);
    }

    #[test]
    fn stack_indices_repeat_the_first_frame() {
        assert_eq!(stack_indices(0), [0, 0, 0]);
        assert_eq!(stack_indices(1), [0, 0, 1]);
        assert_eq!(stack_indices(5), [3, 4, 5]);
    }
}
