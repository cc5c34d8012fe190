//! Proto-RL's intrinsic reward (denisyarats/proto @e9899b4 `proto.py`, `Proto.compute_reward`,
//! l.139-164): a queue of recent normalised projections, one row per prototype drawn from the
//! batch by that prototype's softmax over the batch, and each sample's reward the distance to
//! its k-th nearest queue row (the queue as it is after this batch's rows went in, zero rows
//! never written included, as upstream).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::{Error, Result};

/// One domain's queue of normalised projections: `size` rows of `dim`, written at `ptr`.
#[derive(Debug, Clone, PartialEq)]
pub struct KnnQueue {
    /// (size, dim) row-major; zeros until written (`proto.queue`, a zero buffer upstream).
    pub rows: Vec<f32>,
    pub size: usize,
    pub dim: usize,
    /// The next row to write (`queue_ptr`).
    pub ptr: usize,
}

/// The reward of one batch, and what led to it.
#[derive(Debug, Clone)]
pub struct KnnReward {
    /// (b) the distance of each sample to its k-th nearest queue row.
    pub reward: Vec<f32>,
    /// The batch row each prototype enqueued (K).
    pub candidates: Vec<usize>,
}

impl KnnQueue {
    pub fn new(size: usize, dim: usize) -> Self {
        Self {
            rows: vec![0.0; size * dim],
            size,
            dim,
            ptr: 0,
        }
    }

    /// For each prototype k, the batch row drawn from p_k = softmax_i(z_i · c_k) (upstream's
    /// `pyd.Categorical(softmax((z Cᵀ)ᵀ, dim=1)).sample()`, no temperature). Shapes: z (b, dim)
    /// unit rows, protos (K, dim) unit rows.
    pub fn draw_candidates(z: &[f32], protos: &[f32], dim: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
        let b = z.len() / dim;
        let mut scores = vec![0f64; b];
        protos
            .chunks_exact(dim)
            .map(|c| {
                for (i, zi) in z.chunks_exact(dim).enumerate() {
                    scores[i] = zi.iter().zip(c).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
                }
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                let mut u = rng.random::<f64>() * total;
                for (i, w) in weights.iter().enumerate() {
                    if u < *w {
                        return i;
                    }
                    u -= w;
                }
                b - 1
            })
            .collect()
    }

    /// Writes `z[candidates]` at `ptr` (wrapping by the queue's size), then each sample's
    /// distance to its `topk`-th nearest row of the whole queue. Shapes: z (b, dim).
    pub fn push_and_reward(&mut self, z: &[f32], candidates: &[usize], topk: usize) -> Result<KnnReward> {
        let (dim, b) = (self.dim, z.len() / self.dim);
        if candidates.len() > self.size || !self.size.is_multiple_of(candidates.len().max(1)) {
            return Err(Error::Shape(format!(
                "proto queue: {} rows of {} enqueued per batch must divide it",
                candidates.len(),
                self.size
            )));
        }
        if topk == 0 || topk > self.size {
            return Err(Error::Shape(format!("proto queue: topk {topk} of {} rows", self.size)));
        }
        for (j, &row) in candidates.iter().enumerate() {
            let dst = (self.ptr + j) % self.size;
            self.rows[dst * dim..(dst + 1) * dim].copy_from_slice(&z[row * dim..(row + 1) * dim]);
        }
        self.ptr = (self.ptr + candidates.len()) % self.size;
        let mut dist = vec![0f32; self.size];
        let reward = (0..b)
            .map(|i| {
                let zi = &z[i * dim..(i + 1) * dim];
                for (d, q) in dist.iter_mut().zip(self.rows.chunks_exact(dim)) {
                    *d = zi.iter().zip(q).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt();
                }
                // The topk-th smallest (upstream: torch.topk(largest=False)[0][:, -1]).
                let (_, kth, _) = dist.select_nth_unstable_by(topk - 1, f32::total_cmp);
                *kth
            })
            .collect();
        Ok(KnnReward {
            reward,
            candidates: candidates.to_vec(),
        })
    }
}
