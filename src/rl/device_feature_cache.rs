//! The feature cache held on the run's device (issue 52): the same rows as the host cache
//! ([`CachedFeatures`](super::CachedFeatures), one row of `repr` encoder features per stored
//! observation, f32 or f16), kept in one preallocated device tensor instead of host memory.
//! A batch is then one small upload of row numbers and one gather on the device, where the
//! host cache gathers 2 × B rows on the host and uploads them (40 MB at B = 128 on every
//! update), and a new observation's features are written where they were computed instead of
//! being read back to the host.
//!
//! Rows are a ring: observation `g` of the run (counted from 0 over every stored observation,
//! episode after episode) lives at row (g − base) mod R. Episodes leave oldest first, as the
//! replay drops them, so the live rows are always one run of the ring; when a new row would
//! overwrite a live one the ring doubles (the live rows gathered in order, `base` moved to
//! the oldest), which a run whose first size holds its replay never does.
//!
//! f16 rows refuse what the host cache refuses (a value that is not finite or beyond ±65504):
//! the values that do not fit are counted on the device and the count is read once per
//! episode ([`DeviceFeatureCache::check`]), so such a run stops at most an episode later than the
//! host cache would, with the same message. The rows themselves are the host cache's: f32
//! copied exactly, f16 rounded to the nearest half, both sides by IEEE round-to-nearest-even.

use std::collections::VecDeque;

use candle_core::{DType, Device, Tensor};

use super::feature_cache::FeatureDtype;
use crate::{Error, Result};

/// The rows of one stored episode's observations O_0 … O_n.
#[derive(Debug, Clone, Copy)]
struct EpisodeRows {
    /// The run's number of its O_0 (g above).
    first: u64,
    /// Observations stored.
    len: u64,
}

/// The cache's rows on the device, and which stored episode each belongs to.
pub struct DeviceFeatureCache {
    /// (R, repr), f32 or f16 as `dtype` says.
    rows: Tensor,
    repr: usize,
    dtype: FeatureDtype,
    /// Observation g lives at row (g − base) mod R.
    base: u64,
    /// The number g of the next observation stored.
    next: u64,
    /// The stored episodes, oldest first, as the replay holds them.
    episodes: VecDeque<EpisodeRows>,
    /// The replay's number of `episodes[0]` (episodes dropped so far).
    first_episode: u64,
    /// f16: values stored that f16 cannot hold, counted on the device since the last check;
    /// () (a scalar f32).
    unfit: Option<Tensor>,
}

impl DeviceFeatureCache {
    /// `rows` rows of `repr` features as `dtype` on `device` (zeros), allocated now so that a
    /// GPU shared by several runs sees the whole cache from the first step.
    pub fn new(rows: usize, repr: usize, dtype: FeatureDtype, device: &Device) -> Result<Self> {
        if rows == 0 || repr == 0 {
            return Err(Error::Shape(format!(
                "device feature cache: {rows} rows of {repr} features"
            )));
        }
        Ok(Self {
            rows: Tensor::zeros((rows, repr), storage_dtype(dtype), device)?,
            repr,
            dtype,
            base: 0,
            next: 0,
            episodes: VecDeque::new(),
            first_episode: 0,
            unfit: None,
        })
    }

    /// Rows allocated (R).
    pub fn capacity(&self) -> usize {
        self.rows.dim(0).unwrap_or(0)
    }

    /// "feature cache on the device: R rows of repr f16 (G GB)", for the run's first message.
    pub fn describe(&self) -> String {
        let (r, dtype) = (self.capacity(), self.dtype);
        let gb = (r * self.repr * dtype.bytes_per_value()) as f64 / 1e9;
        format!(
            "feature cache on the device: {r} rows of {} {} ({gb:.2} GB)",
            self.repr,
            dtype.name()
        )
    }

    /// Stored episodes.
    pub fn num_episodes(&self) -> usize {
        self.episodes.len()
    }

    /// Empties the cache; the replay's oldest stored episode is number `first_episode` (a
    /// checkpoint's replay, whose features the caller then stores again).
    pub fn clear(&mut self, first_episode: u64) {
        self.episodes.clear();
        self.first_episode = first_episode;
        self.base = self.next;
        self.unfit = None;
    }

    /// Drops the episodes the replay dropped: those numbered below `replay_first_episode`.
    pub fn drop_before(&mut self, replay_first_episode: u64) {
        while self.first_episode < replay_first_episode && self.episodes.pop_front().is_some() {
            self.first_episode += 1;
        }
    }

    /// Starts the replay's newest episode (after its first frame), the replay's oldest being
    /// number `replay_first_episode`.
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

    /// Stores `h` (m, repr) f32 as the newest episode's next m observations' features.
    pub fn push(&mut self, h: &Tensor) -> Result<()> {
        let (m, repr) = h.dims2()?;
        if repr != self.repr {
            return Err(Error::Shape(format!(
                "device feature cache: rows of {repr} features, expected {}",
                self.repr
            )));
        }
        if self.episodes.is_empty() {
            return Err(Error::Shape(
                "device feature cache: features before an episode started".into(),
            ));
        }
        while self.live() + m as u64 > self.capacity() as u64 {
            self.grow()?;
        }
        let h = h.to_dtype(DType::F32)?.contiguous()?;
        if self.dtype == FeatureDtype::F16 {
            // Values f16 holds: finite and within ±65504 (a NaN compares false).
            let fit = h.abs()?.le(f16_max())?.to_dtype(DType::F32)?.sum_all()?;
            let unfit = fit.affine(-1.0, (m * repr) as f64)?;
            self.unfit = Some(match self.unfit.take() {
                Some(count) => (count + unfit)?,
                None => unfit,
            });
        }
        let stored = h.to_dtype(storage_dtype(self.dtype))?;
        // The m rows from row (next − base) mod R on, in two pieces when they wrap.
        let r = self.capacity();
        let start = ((self.next - self.base) % r as u64) as usize;
        let head = m.min(r - start);
        self.rows
            .slice_set(&stored.narrow(0, 0, head)?.contiguous()?, 0, start)?;
        if head < m {
            self.rows
                .slice_set(&stored.narrow(0, head, m - head)?.contiguous()?, 0, 0)?;
        }
        self.next += m as u64;
        if let Some(newest) = self.episodes.back_mut() {
            newest.len += m as u64;
        }
        Ok(())
    }

    /// The newest observation's features, (1, repr) f32: what the agent acts on.
    pub fn latest(&self) -> Result<Tensor> {
        if self.live() == 0 {
            return Err(Error::Shape("device feature cache: no observation stored".into()));
        }
        Ok(self.rows.narrow(0, self.row(self.next - 1), 1)?.to_dtype(DType::F32)?)
    }

    /// The features of O_t and O_{t+n} for each drawn (episode position, t) of the replay
    /// (`Transitions::locations`): (len, repr) f32 each, gathered on the device.
    pub fn gather(&self, locations: &[(usize, usize)], n: usize) -> Result<(Tensor, Tensor)> {
        let len = locations.len();
        let mut index = Vec::with_capacity(2 * len);
        for offset in [0, n] {
            for &(e, t) in locations {
                let episode = self.episodes.get(e).ok_or_else(|| {
                    Error::Shape(format!(
                        "device feature cache: episode {e} of the replay is not stored ({} are)",
                        self.episodes.len()
                    ))
                })?;
                let o = (t + offset) as u64;
                if o >= episode.len {
                    return Err(Error::Shape(format!(
                        "replay: observation {o} of an episode has no features"
                    )));
                }
                index.push(self.row(episode.first + o) as u32);
            }
        }
        let index = Tensor::from_vec(index, 2 * len, self.rows.device())?;
        // (2·len, repr): O_t's rows then O_{t+n}'s.
        let both = self.rows.index_select(&index, 0)?.to_dtype(DType::F32)?;
        Ok((both.narrow(0, 0, len)?, both.narrow(0, len, len)?))
    }

    /// f16: fails, as the host cache does, when a value stored since the last check does not
    /// fit (one device read).
    pub fn check(&mut self) -> Result<()> {
        let Some(unfit) = self.unfit.take() else {
            return Ok(());
        };
        let unfit = unfit.to_scalar::<f32>()?;
        if unfit > 0.0 {
            return Err(Error::Training(format!(
                "{unfit} encoder features do not fit the f16 feature cache (not finite, or beyond \
                 ±{}); set replay.feature_cache_dtype = \"f32\"",
                half::f16::MAX
            )));
        }
        Ok(())
    }

    /// Observations stored in the live episodes.
    fn live(&self) -> u64 {
        self.episodes.front().map_or(0, |oldest| self.next - oldest.first)
    }

    fn row(&self, g: u64) -> usize {
        ((g - self.base) % self.capacity() as u64) as usize
    }

    /// Doubles R: the live rows gathered oldest first to rows 0.., `base` the oldest.
    fn grow(&mut self) -> Result<()> {
        let r = self.capacity();
        let oldest = self.episodes.front().map_or(self.next, |e| e.first);
        let order: Vec<u32> = (oldest..self.next).map(|g| self.row(g) as u32).collect();
        let live = order.len();
        let index = Tensor::from_vec(order, live, self.rows.device())?;
        // (live, repr) then (2R − live, repr) zeros.
        let kept = self.rows.index_select(&index, 0)?;
        let rest = Tensor::zeros((2 * r - live, self.repr), self.rows.dtype(), self.rows.device())?;
        self.rows = Tensor::cat(&[&kept, &rest], 0)?;
        self.base = oldest;
        Ok(())
    }
}

fn storage_dtype(dtype: FeatureDtype) -> DType {
    match dtype {
        FeatureDtype::F32 => DType::F32,
        FeatureDtype::F16 => DType::F16,
    }
}

fn f16_max() -> f64 {
    f64::from(half::f16::MAX.to_f32())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rl::CachedFeatures;

    /// Row g's features: distinct values that f16 holds exactly for small g.
    fn features(g: usize, repr: usize) -> Vec<f32> {
        (0..repr).map(|j| (g * repr + j) as f32 * 0.25 - 3.0).collect()
    }

    #[test]
    fn gathers_what_the_host_cache_reads_through_evictions_and_growth() {
        let repr = 3;
        for dtype in [FeatureDtype::F32, FeatureDtype::F16] {
            // 4 rows: the run below needs 7 live at once, so the ring grows twice.
            let mut cache = DeviceFeatureCache::new(4, repr, dtype, &Device::Cpu).unwrap();
            let mut host: VecDeque<CachedFeatures> = VecDeque::new();
            let mut dropped = 0u64;
            let mut g = 0;
            for (episode, len) in [3usize, 2, 4, 1, 3, 5].into_iter().enumerate() {
                // The replay drops its oldest episode whenever it holds more than three.
                if host.len() == 3 {
                    host.pop_front();
                    dropped += 1;
                }
                cache.start_episode(dropped);
                host.push_back(CachedFeatures::new(dtype));
                // The first episode's rows go in at once (a checkpoint's), the others one by one.
                let chunks: Vec<usize> = if episode == 0 { vec![len] } else { vec![1; len] };
                for m in chunks {
                    let values: Vec<f32> = (g..g + m).flat_map(|i| features(i, repr)).collect();
                    cache
                        .push(&Tensor::from_vec(values.clone(), (m, repr), &Device::Cpu).unwrap())
                        .unwrap();
                    host.back_mut().unwrap().extend(&values).unwrap();
                    g += m;
                    let latest = cache.latest().unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
                    assert_eq!(latest, host.back().unwrap().last(repr));
                }
                assert_eq!(cache.num_episodes(), host.len());
                // Every (e, t) with t + 1 stored, against the host cache's rows.
                let locations: Vec<(usize, usize)> = host
                    .iter()
                    .enumerate()
                    .flat_map(|(e, h)| (0..h.len() / repr - 1).map(move |t| (e, t)))
                    .collect();
                if locations.is_empty() {
                    continue;
                }
                let (obs, next) = cache.gather(&locations, 1).unwrap();
                let (mut want_obs, mut want_next) = (Vec::new(), Vec::new());
                for &(e, t) in &locations {
                    host[e].read_into(t * repr..(t + 1) * repr, &mut want_obs);
                    host[e].read_into((t + 1) * repr..(t + 2) * repr, &mut want_next);
                }
                assert_eq!(obs.flatten_all().unwrap().to_vec1::<f32>().unwrap(), want_obs);
                assert_eq!(next.flatten_all().unwrap().to_vec1::<f32>().unwrap(), want_next);
            }
            assert_eq!(cache.capacity(), 16, "{}: 4 rows, doubled twice", dtype.name());
            // An observation past an episode's end is refused, not read from the next one.
            assert!(cache.gather(&[(0, 0)], 5).is_err());
        }
    }

    #[test]
    fn an_f16_cache_refuses_what_f16_cannot_hold_at_its_check() {
        let mut cache = DeviceFeatureCache::new(8, 2, FeatureDtype::F16, &Device::Cpu).unwrap();
        cache.start_episode(0);
        cache
            .push(&Tensor::new(&[[1.0f32, -65504.0]], &Device::Cpu).unwrap())
            .unwrap();
        cache.check().unwrap();
        for bad in [70000.0f32, f32::NAN, f32::INFINITY] {
            cache
                .push(&Tensor::new(&[[0.5f32, bad]], &Device::Cpu).unwrap())
                .unwrap();
            let error = cache.check().unwrap_err().to_string();
            assert!(error.contains("feature_cache_dtype = \"f32\""), "{bad}: {error}");
        }
        // An f32 cache holds them all.
        let mut cache = DeviceFeatureCache::new(8, 2, FeatureDtype::F32, &Device::Cpu).unwrap();
        cache.start_episode(0);
        cache
            .push(&Tensor::new(&[[70000.0f32, f32::INFINITY]], &Device::Cpu).unwrap())
            .unwrap();
        cache.check().unwrap();
    }
}
