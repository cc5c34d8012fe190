//! DrQ-v2's `utils.TruncatedNormal` (facebookresearch/drqv2 @c0c650b): a Normal(μ, σ) whose
//! samples are μ + clip(σ·ε, ±c) clamped into (−1, 1) with a straight-through gradient, so the
//! gradient of a sample with respect to μ is the identity wherever it lands. Not a truncated
//! density: `log_prob` and `entropy` are the Normal's, as DrQ-v2 logs them.

use candle_core::{Tensor, D};

use crate::Result;

/// The bounds samples are clamped to: (−1 + 1e-6, 1 − 1e-6).
const LOW: f64 = -1.0;
const HIGH: f64 = 1.0;
const EPS: f64 = 1e-6;
/// [`TruncatedNormal::sample`]'s clamp, lower and upper.
pub(crate) const SAMPLE_BOUNDS: (f64, f64) = (LOW + EPS, HIGH - EPS);

/// A batch of Normal(μ, σ) policies with one σ: μ (b, A).
#[derive(Debug, Clone)]
pub struct TruncatedNormal {
    /// The mean, already squashed by tanh: (b, A).
    pub mu: Tensor,
    /// σ, DrQ-v2's scheduled standard deviation.
    pub std: f64,
}

impl TruncatedNormal {
    /// The sample for standard normal noise `eps` (b, A): μ + σ·ε, with σ·ε clipped to ±`clip`
    /// when given (DrQ-v2's `stddev_clip` for the critic's target and the actor's loss; none
    /// when acting), then clamped into (−1, 1) straight-through.
    pub fn sample(&self, eps: &Tensor, clip: Option<f64>) -> Result<Tensor> {
        let noise = (eps * self.std)?; // (b, A)
        let noise = match clip {
            Some(c) => noise.clamp(-c, c)?,
            None => noise,
        };
        straight_through_clamp(&(&self.mu + noise)?, SAMPLE_BOUNDS.0, SAMPLE_BOUNDS.1)
    }

    /// The deterministic action: μ (evaluation).
    pub fn mean(&self) -> &Tensor {
        &self.mu
    }

    /// Σ over the action dimensions of the Normal log-density at `x` (b, A): (b, 1).
    pub fn log_prob(&self, x: &Tensor) -> Result<Tensor> {
        let var = self.std * self.std;
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        let z = (x.sub(&self.mu)?.sqr()? * (-0.5 / var))?; // (b, A)
        Ok((z - (self.std.ln() + half_log_2pi))?.sum_keepdim(D::Minus1)?)
    }

    /// The Normal's entropy summed over `action_dim` dimensions: A·(½ + ½ ln 2π + ln σ).
    pub fn entropy(&self, action_dim: usize) -> f64 {
        action_dim as f64 * (0.5 + 0.5 * (2.0 * std::f64::consts::PI).ln() + self.std.ln())
    }
}

/// `x` clamped into [lo, hi] in value, the identity in gradient: DrQ-v2's
/// `x - x.detach() + clamped_x.detach()`, evaluated in that order so the value is exactly the
/// clamped one.
fn straight_through_clamp(x: &Tensor, lo: f64, hi: f64) -> Result<Tensor> {
    let zero = x.sub(&x.detach())?; // 0, with x's gradient
    Ok((zero + x.clamp(lo, hi)?.detach())?)
}
