//! Stacked observations from an environment's frames (SPEC §1).

use std::collections::VecDeque;

use super::{FRAME_BYTES, FRAME_SIZE};
use crate::data::frame_stack::FRAME_STACK;

/// The last [`FRAME_STACK`] frames of an episode, oldest first: `O_t = [F_{t-2}, F_{t-1}, F_t]`.
/// At an episode start the first frame fills every slot, as dm_control's frame-stack wrappers
/// do.
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
        let chw = hwc_to_chw(first_frame);
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
        self.frames.push_back(hwc_to_chw(frame));
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

/// (h, w, 3) -> (3, h, w).
fn hwc_to_chw(frame: &[u8]) -> Vec<u8> {
    assert_eq!(frame.len(), FRAME_BYTES, "frames are 84x84 RGB");
    let plane = FRAME_SIZE * FRAME_SIZE;
    let mut chw = vec![0u8; FRAME_BYTES];
    for (pixel, rgb) in frame.chunks_exact(3).enumerate() {
        for (c, &value) in rgb.iter().enumerate() {
            chw[c * plane + pixel] = value;
        }
    }
    chw
}
