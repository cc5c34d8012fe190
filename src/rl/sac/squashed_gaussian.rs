//! The actor's tanh-squashed Gaussian (Proto-RL's `Actor.forward` + `utils.SquashedNormal`):
//! the policy head's raw output (b, 2A) splits into μ and a raw log-std; the log-std is
//! squashed by tanh into [log_std_min, log_std_max]; a reparameterised sample x = μ + σ·ε goes
//! through tanh, and its log-density subtracts the tanh Jacobian in the numerically stable form
//! log(1 − tanh²x) = 2·(ln 2 − x − softplus(−2x)).

use candle_core::{Tensor, D};

use crate::Result;

/// A batch of squashed Gaussians, (b, A) each.
#[derive(Debug, Clone)]
pub struct SquashedGaussian {
    /// Mean of the Gaussian before the tanh.
    pub mu: Tensor,
    /// Its log standard deviation, already squashed into [log_std_min, log_std_max].
    pub log_std: Tensor,
}

/// A reparameterised sample and its log-density.
#[derive(Debug, Clone)]
pub struct Sample {
    /// tanh(μ + σ·ε), in (−1, 1): (b, A).
    pub action: Tensor,
    /// Σ over the action dimensions of log π(action): (b, 1).
    pub log_prob: Tensor,
}

impl SquashedGaussian {
    /// Shapes: head (b, 2A) -> μ (b, A), log σ (b, A) (first half μ, as `chunk(2, dim=-1)`).
    pub fn from_head(head: &Tensor, log_std_min: f64, log_std_max: f64) -> Result<Self> {
        let a = head.dim(1)? / 2;
        let mu = head.narrow(1, 0, a)?; // (b, A)
        let raw = head.narrow(1, a, a)?.tanh()?; // (b, A) in (−1, 1)
        let log_std = ((raw + 1.0)? * (0.5 * (log_std_max - log_std_min)))? + log_std_min;
        Ok(Self { mu, log_std: log_std? })
    }

    /// The sample for standard normal noise `eps` (b, A), differentiable in μ and log σ.
    pub fn rsample(&self, eps: &Tensor) -> Result<Sample> {
        let x = (&self.mu + self.log_std.exp()?.mul(eps)?)?; // (b, A)
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        // Normal log-density of x: −ε²/2 − log σ − ½ log 2π.
        let normal = ((eps.sqr()? * -0.5)? - &self.log_std)? - half_log_2pi;
        // log|d tanh(x)/dx| = 2·(ln 2 − x − softplus(−2x)).
        let log_det = ((softplus(&(&x * -2.0)?)? + &x)?.neg()? + std::f64::consts::LN_2)? * 2.0;
        let log_prob = (normal? - log_det?)?.sum_keepdim(D::Minus1)?; // (b, 1)
        Ok(Sample {
            action: x.tanh()?,
            log_prob,
        })
    }

    /// The deterministic action tanh(μ) used for evaluation: (b, A).
    pub fn mean_action(&self) -> Result<Tensor> {
        Ok(self.mu.tanh()?)
    }
}

/// softplus(x) = log(1 + eˣ) = max(x, 0) + log(1 + e^(−|x|)), stable for large |x|.
fn softplus(x: &Tensor) -> Result<Tensor> {
    Ok((x.relu()? + (x.abs()?.neg()?.exp()? + 1.0)?.log()?)?)
}
