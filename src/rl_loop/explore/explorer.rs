//! The seam between `lfs explore`'s loop and an exploring method (docs/design.md §15): the
//! encoder the method trains, shared by every domain it explores, and the intrinsic reward
//! that replaces each batch's task reward. One folder per method implements it (Proto-RL in
//! `proto/`, APT in `apt/`); the agent that explores with that reward is a registered agent
//! (`rl/<agent>/`) on the encoder's detached features, as in both upstreams.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::Tensor;

use crate::nn::encoder::Encoded;
use crate::nn::Encoder;
use crate::rl::{Batch, ReplayBuffer, Transitions};
use crate::rl_loop::RepresentationState;
use crate::Result;

/// One intrinsic reward for a batch, with what the method measured on the way.
pub struct IntrinsicReward {
    /// r_intr: (b, 1), on the batch's device.
    pub reward: Tensor,
    /// The method's own terms (its representation loss when it stepped here, the reward's
    /// statistics), by name, for `explore.jsonl`.
    pub terms: BTreeMap<&'static str, f64>,
}

/// An exploring method: the encoder it trains and the reward it explores with.
pub trait Explorer {
    /// The online conv encoder (what the agents act through and what the run exports).
    fn encoder(&self) -> &Encoder;

    /// The representation update made before the batch is encoded (Proto-RL's clustering step
    /// on the batch's (O_t, O_t+1), so the features the agent learns from and the reward come
    /// from the updated encoder), on `domain`'s unshifted transitions `t` drawn from `replay`;
    /// its terms. Methods that update inside [`Explorer::intrinsic_reward`] return none.
    fn update_before_encoding(
        &mut self,
        _domain: usize,
        _t: &Transitions,
        _replay: &ReplayBuffer,
    ) -> Result<BTreeMap<&'static str, f64>> {
        Ok(BTreeMap::new())
    }

    /// Whether [`Explorer::intrinsic_reward`] steps the encoder through O_t's features, so the
    /// loop encodes the batch's O_t with its tape (once) and hands it over.
    fn wants_obs_tape(&self) -> bool {
        false
    }

    /// The intrinsic reward of `domain`'s batch: `batch.obs` and `batch.next_obs` are the
    /// encoder's features (b, repr) of the shifted pixels `obs` and `next_obs` (b, 9, 84, 84),
    /// `batch.action` (b, A) its actions, and `obs_encoded` is `obs` encoded with its tape when
    /// [`Explorer::wants_obs_tape`]. A method whose representation steps here (APT's ICM)
    /// trains the encoder through that tape; the batch's features are left as they are.
    fn intrinsic_reward(
        &mut self,
        domain: usize,
        batch: &Batch,
        obs_encoded: Option<&Encoded>,
        obs: &[u8],
        next_obs: &[u8],
    ) -> Result<IntrinsicReward>;

    /// Representation updates done (every domain's).
    fn updates(&self) -> u64;

    /// The training state a checkpoint keeps: networks, optimisers, per-domain buffers, RNG.
    fn state(&self) -> Result<RepresentationState>;

    /// Restores [`Explorer::state`]; `what` names the checkpoint in errors.
    fn load_state(&mut self, state: &RepresentationState, what: &Path) -> Result<()>;

    /// The encoder as `lfs export` writes one (`encoder.convnet.*`), taking `pixels / 255`
    /// like every other export (an input offset folded into the first conv's bias).
    fn export_tensors(&self) -> Result<BTreeMap<String, Tensor>>;
}
