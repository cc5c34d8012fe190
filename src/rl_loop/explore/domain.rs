//! One explored domain's view of the shared exploring method: the loop's [`Representation`]
//! for that domain's workspace. Every domain encodes through the same encoder and reports the
//! method's terms to its own sums, which the driver logs at that domain's episode ends.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use candle_core::Tensor;

use super::explorer::Explorer;
use crate::nn::encoder::Encoded;
use crate::objectives::UpdateMetrics;
use crate::rl::{Batch, DeviceFrames, ReplayBuffer, Transitions};
use crate::rl_loop::{EncoderProvenance, Representation};
use crate::Result;

/// The exploring method, shared by the domains' workspaces.
pub type SharedExplorer = Rc<RefCell<Box<dyn Explorer>>>;

/// The method's terms since a domain's last episode end: sums and counts by name.
#[derive(Debug, Default, Clone)]
pub struct TermSums(pub BTreeMap<&'static str, (f64, u64)>);

impl TermSums {
    fn add(&mut self, terms: &BTreeMap<&'static str, f64>) {
        for (k, v) in terms {
            let e = self.0.entry(k).or_insert((0.0, 0));
            e.0 += v;
            e.1 += 1;
        }
    }

    /// Each term's mean, and how many batches gave it.
    pub fn means(&self) -> BTreeMap<String, serde_json::Value> {
        let mut out = BTreeMap::new();
        for (k, (sum, n)) in &self.0 {
            out.insert((*k).to_string(), serde_json::json!(sum / (*n).max(1) as f64));
        }
        out
    }
}

/// Domain `domain` of a shared explorer.
pub struct DomainRepresentation {
    pub explorer: SharedExplorer,
    pub domain: usize,
    pub provenance: EncoderProvenance,
    pub repr_dim: usize,
    /// This domain's terms since its last episode end.
    pub sums: Rc<RefCell<TermSums>>,
}

impl Representation for DomainRepresentation {
    fn provenance(&self) -> &EncoderProvenance {
        &self.provenance
    }

    fn repr_dim(&self) -> usize {
        self.repr_dim
    }

    fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor> {
        Ok(self.explorer.borrow().encoder().encode(obs, n, false)?.h.detach())
    }

    fn aux_update(
        &mut self,
        batch: &Transitions,
        replay: &ReplayBuffer,
        _device_frames: Option<&DeviceFrames>,
    ) -> Result<Option<UpdateMetrics>> {
        let terms = self
            .explorer
            .borrow_mut()
            .update_before_encoding(self.domain, batch, replay)?;
        self.sums.borrow_mut().add(&terms);
        Ok(None)
    }

    fn encode_with_tape(&self, obs: &[u8], n: usize) -> Result<Option<Encoded>> {
        let explorer = self.explorer.borrow();
        match explorer.wants_obs_tape() {
            true => Ok(Some(explorer.encoder().encode(obs, n, true)?)),
            false => Ok(None),
        }
    }

    fn intrinsic_reward(
        &mut self,
        batch: &Batch,
        obs_encoded: Option<&Encoded>,
        obs: &[u8],
        next_obs: &[u8],
    ) -> Result<Option<Tensor>> {
        let out = self
            .explorer
            .borrow_mut()
            .intrinsic_reward(self.domain, batch, obs_encoded, obs, next_obs)?;
        self.sums.borrow_mut().add(&out.terms);
        Ok(Some(out.reward))
    }
}
