//! Per-observation rows kept on the run's device beside the replay (issue 52): what the feature
//! cache ([`DeviceFeatureCache`](super::DeviceFeatureCache)) and the replay's frames
//! ([`DeviceFrames`](super::DeviceFrames)) keep there, one row per stored observation or frame,
//! episode after episode, in one preallocated tensor.
//!
//! The rows are a ring: row `g` of the run (counted from 0 over every row stored) lives at
//! (g − base) mod R. Episodes leave oldest first, as the replay drops them, so the live rows
//! are always one run of the ring; when a new row would overwrite a live one the ring doubles
//! (the live rows gathered in order, `base` moved to the oldest), which a run whose first size
//! holds its replay never does.

use std::collections::VecDeque;

use candle_core::{DType, Device, Tensor};

use crate::{Error, Result};

/// The rows of one stored episode.
#[derive(Debug, Clone, Copy)]
struct EpisodeRows {
    /// The run's number of its first row (g above).
    first: u64,
    /// Rows stored.
    len: u64,
}

/// Rows of `width` values on a device, and which stored episode each belongs to.
pub struct DeviceRows {
    /// (R, width).
    rows: Tensor,
    width: usize,
    /// Row g lives at (g − base) mod R.
    base: u64,
    /// The number g of the next row stored.
    next: u64,
    /// The stored episodes, oldest first, as the replay holds them.
    episodes: VecDeque<EpisodeRows>,
    /// The replay's number of `episodes[0]` (episodes dropped so far).
    first_episode: u64,
}

impl DeviceRows {
    /// `rows` rows of `width` values of `dtype` on `device` (zeros), allocated now so that a GPU
    /// shared by several runs sees them from the first step. `what` names them in errors.
    pub fn new(rows: usize, width: usize, dtype: DType, device: &Device, what: &str) -> Result<Self> {
        if rows == 0 || width == 0 {
            return Err(Error::Shape(format!("{what}: {rows} rows of {width} values")));
        }
        Ok(Self {
            rows: Tensor::zeros((rows, width), dtype, device)?,
            width,
            base: 0,
            next: 0,
            episodes: VecDeque::new(),
            first_episode: 0,
        })
    }

    /// Rows allocated (R).
    pub fn capacity(&self) -> usize {
        self.rows.dim(0).unwrap_or(0)
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// The whole (R, width) tensor, for gathers at [`DeviceRows::row`]'s positions.
    pub fn tensor(&self) -> &Tensor {
        &self.rows
    }

    /// Stored episodes.
    pub fn num_episodes(&self) -> usize {
        self.episodes.len()
    }

    /// Empties the store; the replay's oldest stored episode is number `first_episode` (a
    /// checkpoint's replay, whose rows the caller then stores again).
    pub fn clear(&mut self, first_episode: u64) {
        self.episodes.clear();
        self.first_episode = first_episode;
        self.base = self.next;
    }

    /// Drops the episodes the replay dropped: those numbered below `replay_first_episode`.
    pub fn drop_before(&mut self, replay_first_episode: u64) {
        while self.first_episode < replay_first_episode && self.episodes.pop_front().is_some() {
            self.first_episode += 1;
        }
    }

    /// Starts the replay's newest episode, the replay's oldest being number
    /// `replay_first_episode`.
    pub fn start_episode(&mut self, replay_first_episode: u64) {
        self.drop_before(replay_first_episode);
        if self.episodes.is_empty() {
            self.first_episode = replay_first_episode;
        }
        self.episodes.push_back(EpisodeRows {
            first: self.next,
            len: 0,
        });
    }

    /// Stores `rows` (m, width), of the store's dtype and device, as the newest episode's next
    /// m rows.
    pub fn push(&mut self, rows: &Tensor) -> Result<()> {
        let (m, width) = rows.dims2()?;
        if width != self.width || rows.dtype() != self.rows.dtype() {
            return Err(Error::Shape(format!(
                "device rows: {m} rows of {width} {:?}, expected rows of {} {:?}",
                rows.dtype(),
                self.width,
                self.rows.dtype()
            )));
        }
        if self.episodes.is_empty() {
            return Err(Error::Shape("device rows: a row before an episode started".into()));
        }
        while self.live() + m as u64 > self.capacity() as u64 {
            self.grow()?;
        }
        // The m rows from row (next − base) mod R on, in two pieces when they wrap.
        let r = self.capacity();
        let start = self.position(self.next);
        let head = m.min(r - start);
        self.rows.slice_set(&rows.narrow(0, 0, head)?.contiguous()?, 0, start)?;
        if head < m {
            self.rows
                .slice_set(&rows.narrow(0, head, m - head)?.contiguous()?, 0, 0)?;
        }
        self.next += m as u64;
        if let Some(newest) = self.episodes.back_mut() {
            newest.len += m as u64;
        }
        Ok(())
    }

    /// The position in the tensor of row `i` of stored episode `e` (its position in the
    /// replay, oldest 0).
    pub fn row(&self, e: usize, i: usize) -> Result<usize> {
        let episode = self.episodes.get(e).ok_or_else(|| {
            Error::Shape(format!(
                "device rows: episode {e} of the replay is not stored ({} are)",
                self.episodes.len()
            ))
        })?;
        if i as u64 >= episode.len {
            return Err(Error::Shape(format!(
                "device rows: row {i} of an episode of {} rows",
                episode.len
            )));
        }
        Ok(self.position(episode.first + i as u64))
    }

    /// The position of the newest row.
    pub fn latest(&self) -> Result<usize> {
        match self.live() {
            0 => Err(Error::Shape("device rows: none stored".into())),
            _ => Ok(self.position(self.next - 1)),
        }
    }

    /// Rows stored in the live episodes.
    fn live(&self) -> u64 {
        self.episodes.front().map_or(0, |oldest| self.next - oldest.first)
    }

    fn position(&self, g: u64) -> usize {
        ((g - self.base) % self.capacity() as u64) as usize
    }

    /// Doubles R: the live rows gathered oldest first to rows 0.., `base` the oldest.
    fn grow(&mut self) -> Result<()> {
        let r = self.capacity();
        let oldest = self.episodes.front().map_or(self.next, |e| e.first);
        let order: Vec<u32> = (oldest..self.next).map(|g| self.position(g) as u32).collect();
        let live = order.len();
        let index = Tensor::from_vec(order, live, self.rows.device())?;
        // (live, width) then (2R − live, width) zeros.
        let kept = self.rows.index_select(&index, 0)?;
        let rest = Tensor::zeros((2 * r - live, self.width), self.rows.dtype(), self.rows.device())?;
        self.rows = Tensor::cat(&[&kept, &rest], 0)?;
        self.base = oldest;
        Ok(())
    }
}
