//! One training batch of encoded transitions, what every agent's update takes.

use candle_core::Tensor;

use super::Transitions;
use crate::Result;

/// Encoded transitions with their (n-step) targets' ingredients.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Encoder features of the observations O_t: (b, repr).
    pub obs: Tensor,
    /// a_t: (b, A) in [−1, 1].
    pub action: Tensor,
    /// Σ_{i<n} γⁱ r_{t+i}, each r summed over the action repeat: (b, 1).
    pub reward: Tensor,
    /// γⁿ, what the bootstrapped value is discounted by: (b, 1).
    pub discount: Tensor,
    /// Encoder features of O_{t+n}, what the target bootstraps from: (b, repr).
    pub next_obs: Tensor,
}

/// What TACO's loss reads of a batch's transitions besides (O_t, a_t): three more shifted
/// encodings, made after the encoder's critic step, and the K actions from a_t.
#[derive(Debug, Clone)]
pub struct SequenceViews {
    /// Features of another shift of O_t, tracking the encoder's gradient: (b, repr).
    pub anchor: Tensor,
    /// Features of a third shift of O_t: (b, repr), constants.
    pub positive: Tensor,
    /// Features of a shift of O_{t+K}: (b, repr), constants.
    pub future: Tensor,
    /// a_t … a_{t+K−1}: (b, K, A).
    pub action_seq: Tensor,
}

impl Batch {
    /// The sampled transitions `t` with their observations encoded as `obs` and `next_obs`
    /// (b, repr); actions, rewards and discounts on their device.
    pub fn of(t: &Transitions, obs: Tensor, next_obs: Tensor) -> Result<Self> {
        let (b, device) = (t.len, obs.device().clone());
        let action_dim = t.action.len() / b.max(1);
        Ok(Self {
            action: Tensor::from_slice(&t.action, (b, action_dim), &device)?,
            reward: Tensor::from_slice(&t.reward, (b, 1), &device)?,
            discount: Tensor::from_slice(&t.discount, (b, 1), &device)?,
            obs,
            next_obs,
        })
    }
}
