//! The replay's frames kept on the run's device too (issue 52), for pixel batches encoded by a
//! frozen encoder (`pipelines/sac/paper.toml`): each (3, h, w) uint8 frame is uploaded once,
//! when it is stored, into a preallocated ring ([`DeviceRows`]), and a batch is stacked and
//! randomly shifted there by one gather. On the host path the same batch costs a stack of 2 × B
//! observations on the host (65 MB at B = 512), a shift, and their upload on every update.
//!
//! The gather is [`FrameStore::gather`]'s: frames [F_{t−2}, F_{t−1}, F_t] (clamped at the
//! episode's start) cropped as [`RandomShift`](crate::data::RandomShift) crops them at the
//! offsets it draws, so a batch's bytes are the host path's. The host replay keeps its frames (checkpoints and the agent's own
//! observation read them); these are a copy.

use candle_core::{DType, Device, Tensor};

use super::device_rows::DeviceRows;
use crate::data::{FrameStore, PairBatch, PairFrames, RandomShift};
use crate::observation::{stack_indices, StackIndices};
use crate::{Error, Result};

/// Frames on the device, one row of c·h·w bytes each.
pub struct DeviceFrames {
    rows: DeviceRows,
    /// A frame's (c, h, w).
    shape: (usize, usize, usize),
}

impl DeviceFrames {
    /// `rows` frames of shape (c, h, w) on `device`, allocated now.
    pub fn new(rows: usize, (c, h, w): (usize, usize, usize), device: &Device) -> Result<Self> {
        Ok(Self {
            rows: DeviceRows::new(rows, c * h * w, DType::U8, device, "device frames")?,
            shape: (c, h, w),
        })
    }

    /// "frames on the device: R frames (G GB)", for the run's first message.
    pub fn describe(&self) -> String {
        let r = self.rows.capacity();
        let gb = (r * self.rows.width()) as f64 / 1e9;
        format!("replay frames on the device: {r} frames ({gb:.2} GB)")
    }

    /// Stored episodes.
    pub fn num_episodes(&self) -> usize {
        self.rows.num_episodes()
    }

    /// Empties the store for a checkpoint's replay, whose oldest episode is `first_episode`.
    pub fn clear(&mut self, first_episode: u64) {
        self.rows.clear(first_episode);
    }

    /// Drops the episodes the replay dropped: those numbered below `replay_first_episode`.
    pub fn drop_before(&mut self, replay_first_episode: u64) {
        self.rows.drop_before(replay_first_episode);
    }

    /// Starts the replay's newest episode, the replay's oldest being `replay_first_episode`.
    pub fn start_episode(&mut self, replay_first_episode: u64) {
        self.rows.start_episode(replay_first_episode);
    }

    /// Uploads `frames` (m frames of c·h·w bytes, channel-first) as the newest episode's next m.
    pub fn push(&mut self, frames: &[u8]) -> Result<()> {
        let width = self.rows.width();
        if frames.is_empty() || !frames.len().is_multiple_of(width) {
            return Err(Error::Shape(format!(
                "device frames: {} bytes are not whole frames of {width}",
                frames.len()
            )));
        }
        let m = frames.len() / width;
        let rows = Tensor::from_slice(frames, (m, width), self.rows.tensor().device())?;
        self.rows.push(&rows)
    }

    /// The frames as a [`FrameStore`] (shared, not copied; a later growth of the ring leaves it
    /// as it was).
    pub fn store(&self) -> Result<FrameStore> {
        FrameStore::new(self.rows.tensor().clone(), self.shape)
    }

    /// Frames `stack` of the replay's stored episode `e` (its position) as rows of the store.
    fn rows_of(&self, e: usize, stack: StackIndices) -> Result<StackIndices> {
        let mut rows = stack;
        for f in rows.iter_mut() {
            *f = self.rows.row(e, *f)?;
        }
        Ok(rows)
    }

    /// Pairs of observations (`pairs`: the replay's episode position and the pair's frames in
    /// it) as frames of the store, unshifted, gathered when the encoder reads them: what an
    /// auxiliary objective draws from the replay (`ReplayPairs`) when the frames live here.
    pub fn pairs(&self, pairs: &[(usize, PairFrames)], obs_shape: (usize, usize, usize)) -> Result<PairBatch> {
        let picks = pairs.iter().map(|(e, frames)| {
            Ok(PairFrames {
                prev: self.rows_of(*e, frames.prev)?,
                cur: self.rows_of(*e, frames.cur)?,
            })
        });
        PairBatch::of_frames(obs_shape, &self.store()?, picks)
    }

    /// The stacked observations O_t and O_{t+n} of each drawn (episode position, t) of the
    /// replay (`Transitions::locations`), each shifted by its crop offset (dy, dx) in
    /// [0, 2·pad]² of `shift` (`offsets`: O_t's offsets, then O_{t+n}'s, as the host path draws
    /// them): (len, 9, h, w) u8 each, on the device.
    pub fn gather_shifted(
        &self,
        locations: &[(usize, usize)],
        n: usize,
        offsets: &[(usize, usize)],
        shift: &RandomShift,
    ) -> Result<(Tensor, Tensor)> {
        let len = locations.len();
        if offsets.len() != 2 * len {
            return Err(Error::Shape(format!(
                "device frames: {} crop offsets for 2 × {len} observations",
                offsets.len()
            )));
        }
        // O_t's stacks, then O_{t+n}'s, as rows of the store, and their shifts.
        let mut frames = Vec::with_capacity(2 * len);
        for j in 0..2 * len {
            let (e, t) = locations[j % len];
            let t = if j < len { t } else { t + n };
            frames.push(self.rows_of(e, stack_indices(t))?);
        }
        let both = self.store()?.gather(&frames, &shift.shifts_of(offsets))?; // (2·len, 9, h, w)
        Ok((both.narrow(0, 0, len)?, both.narrow(0, len, len)?))
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::observation::FRAME_STACK;
    use crate::rl::ReplayBuffer;

    #[test]
    fn gathers_the_host_replays_stacked_and_shifted_batches() {
        // Frames of (3, 5, 6) numbered through their bytes; a replay of 12 transitions that
        // drops episodes; a store of 8 frames that must grow.
        let (c, h, w) = (3, 5, 6);
        let frame_len = c * h * w;
        let frame = |g: usize| -> Vec<u8> { (0..frame_len).map(|i| ((g * 31 + i * 7) % 251) as u8).collect() };
        let mut replay = ReplayBuffer::new(12, frame_len, 1, 0, Default::default());
        let mut frames = DeviceFrames::new(8, (c, h, w), &Device::Cpu).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut g = 0;
        for length in [5usize, 3, 6, 2, 7] {
            replay.start_episode(&frame(g)).unwrap();
            frames.start_episode(replay.first_episode());
            frames.push(&frame(g)).unwrap();
            g += 1;
            for _ in 0..length {
                replay.add(&[0.5], 1.0, &frame(g)).unwrap();
                frames.drop_before(replay.first_episode());
                frames.push(&frame(g)).unwrap();
                g += 1;
            }
            assert_eq!(frames.num_episodes(), replay.episodes().len());
            for (pad, nstep) in [(2, 1), (0, 2)] {
                let returns = crate::rl::NStep {
                    n: nstep,
                    discount: 0.9,
                };
                let shift = RandomShift { pad };
                let mut t = replay.sample(16, returns, &mut rng).unwrap();
                let dims = (16, FRAME_STACK * c, h, w);
                let mut draw = ChaCha8Rng::seed_from_u64(g as u64);
                let offsets = [shift.draw_offsets(16, &mut draw), shift.draw_offsets(16, &mut draw)].concat();
                let mut host = ChaCha8Rng::seed_from_u64(g as u64);
                shift.apply_batch(&mut t.obs, dims, &mut host);
                shift.apply_batch(&mut t.next_obs, dims, &mut host);
                let (obs, next) = frames.gather_shifted(&t.locations, nstep, &offsets, &shift).unwrap();
                assert_eq!(obs.dims(), [16, 9, h, w]);
                assert_eq!(obs.flatten_all().unwrap().to_vec1::<u8>().unwrap(), t.obs, "pad {pad}");
                assert_eq!(
                    next.flatten_all().unwrap().to_vec1::<u8>().unwrap(),
                    t.next_obs,
                    "pad {pad}"
                );
            }
        }
    }
}
