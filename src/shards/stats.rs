//! Per-feature statistics (LeRobot's `stats.json`): computed per episode at write time,
//! stored in the episodes table, and merged for the whole dataset.

use serde_json::{json, Value};

/// min/max/mean/std over `count` samples, one entry per channel (3 for the image, 1 for
/// scalar columns). Image statistics are on the [0, 1] scale, as LeRobot computes them.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureStats {
    pub min: Vec<f64>,
    pub max: Vec<f64>,
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub count: u64,
}

impl FeatureStats {
    /// Statistics of scalar samples.
    pub fn of_scalars(values: impl IntoIterator<Item = f64>) -> Self {
        let mut acc = Accumulator::new(1);
        for v in values {
            acc.push(0, v);
        }
        acc.finish()
    }

    /// Per-channel statistics of HWC uint8 RGB frames, scaled to [0, 1]. `count` is the
    /// number of frames (LeRobot's convention), not of pixels.
    pub fn of_rgb_frames(frames: &[u8], num_frames: usize) -> Self {
        let mut min = [u8::MAX; 3];
        let mut max = [0u8; 3];
        let mut sum = [0u64; 3];
        let mut sum_sq = [0u64; 3];
        for px in frames.chunks_exact(3) {
            for c in 0..3 {
                let v = px[c];
                min[c] = min[c].min(v);
                max[c] = max[c].max(v);
                sum[c] += u64::from(v);
                sum_sq[c] += u64::from(v) * u64::from(v);
            }
        }
        let n = (frames.len() / 3).max(1) as f64;
        let mean: Vec<f64> = sum.iter().map(|&s| s as f64 / n / 255.0).collect();
        let std = (0..3)
            .map(|c| {
                let m = sum[c] as f64 / n;
                ((sum_sq[c] as f64 / n - m * m).max(0.0)).sqrt() / 255.0
            })
            .collect();
        Self {
            min: min.iter().map(|&v| f64::from(v) / 255.0).collect(),
            max: max.iter().map(|&v| f64::from(v) / 255.0).collect(),
            mean,
            std,
            count: num_frames as u64,
        }
    }

    /// Merge statistics of disjoint sample sets (pooled mean and variance, weighted by count).
    pub fn merge(parts: &[&FeatureStats]) -> Option<Self> {
        let first = parts.first()?;
        let channels = first.mean.len();
        let total: u64 = parts.iter().map(|p| p.count).sum();
        if total == 0 {
            return Some((*first).clone());
        }
        let mut out = Self {
            min: vec![f64::INFINITY; channels],
            max: vec![f64::NEG_INFINITY; channels],
            mean: vec![0.0; channels],
            std: vec![0.0; channels],
            count: total,
        };
        for c in 0..channels {
            let mean: f64 = parts.iter().map(|p| p.mean[c] * p.count as f64).sum::<f64>() / total as f64;
            let second: f64 = parts
                .iter()
                .map(|p| (p.std[c] * p.std[c] + p.mean[c] * p.mean[c]) * p.count as f64)
                .sum::<f64>()
                / total as f64;
            out.mean[c] = mean;
            out.std[c] = (second - mean * mean).max(0.0).sqrt();
            out.min[c] = parts.iter().map(|p| p.min[c]).fold(f64::INFINITY, f64::min);
            out.max[c] = parts.iter().map(|p| p.max[c]).fold(f64::NEG_INFINITY, f64::max);
        }
        Some(out)
    }

    /// LeRobot's JSON shape: image statistics are (3, 1, 1) arrays, scalars are (1,).
    pub fn to_json(&self, image: bool) -> Value {
        let shape = |v: &[f64]| -> Value {
            if image {
                Value::from(v.iter().map(|x| json!([[x]])).collect::<Vec<_>>())
            } else {
                json!(v)
            }
        };
        json!({
            "min": shape(&self.min),
            "max": shape(&self.max),
            "mean": shape(&self.mean),
            "std": shape(&self.std),
            "count": [self.count],
        })
    }
}

/// Streaming mean/variance (Welford) per channel.
struct Accumulator {
    n: u64,
    min: Vec<f64>,
    max: Vec<f64>,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl Accumulator {
    fn new(channels: usize) -> Self {
        Self {
            n: 0,
            min: vec![f64::INFINITY; channels],
            max: vec![f64::NEG_INFINITY; channels],
            mean: vec![0.0; channels],
            m2: vec![0.0; channels],
        }
    }

    fn push(&mut self, c: usize, v: f64) {
        if c == 0 {
            self.n += 1;
        }
        let n = self.n as f64;
        let delta = v - self.mean[c];
        self.mean[c] += delta / n;
        self.m2[c] += delta * (v - self.mean[c]);
        self.min[c] = self.min[c].min(v);
        self.max[c] = self.max[c].max(v);
    }

    fn finish(self) -> FeatureStats {
        let n = self.n.max(1) as f64;
        FeatureStats {
            std: self.m2.iter().map(|m| (m / n).sqrt()).collect(),
            min: self.min,
            max: self.max,
            mean: self.mean,
            count: self.n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_stats_equal_stats_of_the_union() {
        // Population statistics by hand: [1, 2, 3, 4, 10] -> mean 4, var (9+4+1+0+36)/5 = 10.
        let all = FeatureStats::of_scalars([1.0, 2.0, 3.0, 4.0, 10.0]);
        assert!((all.mean[0] - 4.0).abs() < 1e-12);
        assert!((all.std[0] - 10f64.sqrt()).abs() < 1e-12);
        let a = FeatureStats::of_scalars([1.0, 2.0]);
        let b = FeatureStats::of_scalars([3.0, 4.0, 10.0]);
        let merged = FeatureStats::merge(&[&a, &b]).unwrap();
        assert_eq!(merged.count, 5);
        assert!((merged.mean[0] - all.mean[0]).abs() < 1e-12);
        assert!((merged.std[0] - all.std[0]).abs() < 1e-12);
        assert_eq!((merged.min[0], merged.max[0]), (1.0, 10.0));
    }

    #[test]
    fn rgb_stats_are_per_channel_on_the_unit_scale() {
        // Two pixels: (0, 255, 51) and (255, 255, 153).
        let s = FeatureStats::of_rgb_frames(&[0, 255, 51, 255, 255, 153], 1);
        assert_eq!(s.min, vec![0.0, 1.0, 0.2]);
        assert_eq!(s.max, vec![1.0, 1.0, 0.6]);
        assert!((s.mean[0] - 0.5).abs() < 1e-12 && (s.mean[2] - 0.4).abs() < 1e-12);
        assert!((s.std[0] - 0.5).abs() < 1e-12 && s.std[1].abs() < 1e-12);
        assert_eq!(s.count, 1);
    }
}
