//! The feature cache held on the run's device (issue 52): the same rows as the host cache
//! ([`CachedFeatures`](super::CachedFeatures), one row of `repr` encoder features per stored
//! observation, f32 or f16), kept in one preallocated ring on the device
//! ([`DeviceRows`]) instead of host memory. A batch is then one small upload of row numbers and
//! one gather on the device, where the host cache gathers 2 × B rows on the host and uploads
//! them (40 MB at B = 128 on every update), and a new observation's features are written where
//! they were computed instead of being read back to the host.
//!
//! f16 rows refuse what the host cache refuses (a value that is not finite or beyond ±65504):
//! the values that do not fit are counted on the device and the count is read once per
//! episode ([`DeviceFeatureCache::check`], when the next one starts), so such a run stops at most
//! an episode later than the host cache would, with the same advice (a run's last episode is
//! not checked: no episode starts after it). The rows themselves are the host cache's: f32
//! copied exactly, f16 rounded to the nearest half, both sides by IEEE round-to-nearest-even.

use candle_core::{DType, Device, Tensor};

use super::device_rows::DeviceRows;
use super::feature_cache::FeatureDtype;
use crate::{Error, Result};

/// The cache's rows on the device, one per stored observation.
pub struct DeviceFeatureCache {
    /// (R, repr), f32 or f16 as `dtype` says.
    rows: DeviceRows,
    dtype: FeatureDtype,
    /// f16: values stored that f16 cannot hold, counted on the device since the last check;
    /// () (a scalar f32).
    unfit: Option<Tensor>,
}

impl DeviceFeatureCache {
    /// `rows` rows of `repr` features as `dtype` on `device`, allocated now.
    pub fn new(rows: usize, repr: usize, dtype: FeatureDtype, device: &Device) -> Result<Self> {
        Ok(Self {
            rows: DeviceRows::new(rows, repr, storage_dtype(dtype), device, "device feature cache")?,
            dtype,
            unfit: None,
        })
    }

    /// Rows allocated (R).
    pub fn capacity(&self) -> usize {
        self.rows.capacity()
    }

    /// "feature cache on the device: R rows of repr f16 (G GB)", for the run's first message.
    pub fn describe(&self) -> String {
        let (r, repr, dtype) = (self.capacity(), self.rows.width(), self.dtype);
        let gb = (r * repr * dtype.bytes_per_value()) as f64 / 1e9;
        format!(
            "feature cache on the device: {r} rows of {repr} {} ({gb:.2} GB)",
            dtype.name()
        )
    }

    /// Stored episodes.
    pub fn num_episodes(&self) -> usize {
        self.rows.num_episodes()
    }

    /// Empties the cache for a checkpoint's replay, whose oldest episode is `first_episode`.
    pub fn clear(&mut self, first_episode: u64) {
        self.rows.clear(first_episode);
        self.unfit = None;
    }

    /// Drops the episodes the replay dropped: those numbered below `replay_first_episode`.
    pub fn drop_before(&mut self, replay_first_episode: u64) {
        self.rows.drop_before(replay_first_episode);
    }

    /// Starts the replay's newest episode, the replay's oldest being `replay_first_episode`.
    pub fn start_episode(&mut self, replay_first_episode: u64) {
        self.rows.start_episode(replay_first_episode);
    }

    /// Stores `h` (m, repr) f32 as the newest episode's next m observations' features.
    pub fn push(&mut self, h: &Tensor) -> Result<()> {
        let (m, repr) = h.dims2()?;
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
        self.rows.push(&h.to_dtype(storage_dtype(self.dtype))?)
    }

    /// The newest observation's features, (1, repr) f32: what the agent acts on.
    pub fn latest(&self) -> Result<Tensor> {
        let row = self.rows.latest()?;
        Ok(self.rows.tensor().narrow(0, row, 1)?.to_dtype(DType::F32)?)
    }

    /// The features of O_t and O_{t+n} for each drawn (episode position, t) of the replay
    /// (`Transitions::locations`): (len, repr) f32 each, gathered on the device.
    pub fn gather(&self, locations: &[(usize, usize)], n: usize) -> Result<(Tensor, Tensor)> {
        let len = locations.len();
        let mut index = Vec::with_capacity(2 * len);
        for offset in [0, n] {
            for &(e, t) in locations {
                index.push(self.rows.row(e, t + offset)? as u32);
            }
        }
        let index = Tensor::from_vec(index, 2 * len, self.rows.tensor().device())?;
        // (2·len, repr): O_t's rows then O_{t+n}'s.
        let both = self.rows.tensor().index_select(&index, 0)?.to_dtype(DType::F32)?;
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
    use std::collections::VecDeque;

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
