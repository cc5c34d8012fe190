//! APT as URLB's `icm_apt` explores (docs/design.md §15): the encoder learns ICM's forward and
//! inverse dynamics, and the agent (DrQ-v2's DDPG, `rl/drqv2/`, on the detached features)
//! explores with the particle-based entropy of the ICM's embedding. Transcribed from
//! rll-research/url_benchmark @bb98f0c `agent/icm_apt.py` (`ICMAPTAgent.update_icm` l.76-94,
//! `compute_intr_reward` l.96-100, `update` l.102-148) and `utils.py` (`PBE`, `RMS`); the
//! float64 reference of one update is `eval/reference/apt_reference.py`.
//!
//! One encoder (`encoder.convnet.*`, on `obs / 255 − 0.5`, with its own Adam: upstream's
//! `encoder_opt`) is shared by every domain explored; each domain has its own ICM (its nets take
//! and predict that domain's actions), the ICM's Adam (`icm_opt`) and PBE's running mean.

pub mod icm;
pub mod pbe;

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Tensor, Var};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use self::icm::{Icm, IcmDims};
use self::pbe::{pbe_reward, PbeSettings, RunningMeanStd};
use super::explorer::{Explorer, IntrinsicReward};
use crate::device::Backend;
use crate::nn::checkpoint::strip_prefix;
use crate::nn::encoder::Encoded;
use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::{Adam, AdamConfig, Encoder, EncoderConfig, Params};
use crate::rl::Batch;
use crate::rl_loop::RepresentationState;
use crate::{Error, Result};

/// The ICM's module name inside each domain's store (URLB's `self.icm`).
const ICM_PREFIX: &str = "icm";

/// APT's settings (`agent/icm_apt.yaml`; the defaults are its values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AptConfig {
    /// `icm_rep_dim`: the ICM trunk's embedding (512).
    pub icm_rep_dim: usize,
    /// `hidden_dim` of the ICM's forward and inverse models (1024).
    pub icm_hidden_dim: usize,
    /// `knn_k`: neighbours per embedding, the zero self-distance among them (12).
    pub knn_k: usize,
    /// `knn_avg`: average the k distances (true) rather than take the k-th.
    pub knn_avg: bool,
    /// `knn_rms`: divide the distances by their running mean (false for `icm_apt`).
    pub knn_rms: bool,
    /// `knn_clip`: subtracted from the distances, floored at 0, when ≥ 0 (0.0).
    pub knn_clip: f64,
    /// The ICM's and the encoder's Adams (`lr` 1e-4, torch's defaults otherwise).
    pub optimizer: AdamConfig,
}

impl Default for AptConfig {
    fn default() -> Self {
        Self {
            icm_rep_dim: 512,
            icm_hidden_dim: 1024,
            knn_k: 12,
            knn_avg: true,
            knn_rms: false,
            knn_clip: 0.0,
            optimizer: AdamConfig::default(),
        }
    }
}

impl AptConfig {
    /// Checks ranges; errors name the config section `section`.
    pub fn validate(&self, section: &str) -> Result<()> {
        for (field, value) in [
            ("icm_rep_dim", self.icm_rep_dim),
            ("icm_hidden_dim", self.icm_hidden_dim),
            ("knn_k", self.knn_k),
        ] {
            if value == 0 {
                return Err(Error::Config(format!("{section}.{field} must be >= 1")));
            }
        }
        if !self.knn_clip.is_finite() {
            return Err(Error::Config(format!("{section}.knn_clip must be finite")));
        }
        self.optimizer.validate(&format!("{section}.optimizer"))
    }

    fn pbe(&self) -> PbeSettings {
        PbeSettings {
            knn_k: self.knn_k,
            knn_avg: self.knn_avg,
            knn_rms: self.knn_rms,
            knn_clip: self.knn_clip,
        }
    }
}

/// One domain's ICM: its networks, `icm_opt` and PBE's running mean.
struct DomainIcm {
    /// `icm.*`.
    params: Params,
    icm: Icm,
    adam: Adam,
    rms: RunningMeanStd,
}

/// APT's representation and reward (URLB's `ICMAPTAgent` without its DDPG part).
pub struct Apt {
    cfg: AptConfig,
    /// `encoder.convnet.*`.
    encoder_params: Params,
    encoder: Encoder,
    /// `encoder_opt`.
    encoder_adam: Adam,
    /// [`EncoderConfig::input_offset`], folded into the export's first bias.
    input_offset: f64,
    domains: Vec<DomainIcm>,
    /// ICM updates done, every domain's.
    updates: u64,
}

/// What one [`Apt::update`] computed.
pub struct AptUpdate {
    /// The ICM loss before the step: mean forward_error + mean backward_error.
    pub loss: f64,
    /// ‖e′ − forward_net(e, a)‖₂: (b, 1).
    pub forward_error: Tensor,
    /// ‖a − backward_net(e, e′)‖₂: (b, 1).
    pub backward_error: Tensor,
    /// The gradients the two Adams stepped on, by parameter name (`encoder.convnet.*`,
    /// `icm.*`).
    pub grads: BTreeMap<String, Tensor>,
    /// d loss / d h: (b, repr).
    pub grad_h: Tensor,
    /// The intrinsic reward, PBE of the stepped trunk on the pre-step h: (b, 1).
    pub reward: Tensor,
}

/// The names of one domain's entries in [`Apt::state`].
fn domain_prefix(domain: usize) -> String {
    format!("domain{domain}.")
}

/// The counters of [`Apt::state`].
mod counters {
    pub const DOMAINS: &str = "domains";
    pub const UPDATES: &str = "updates";
    pub const ENCODER_ADAM_STEP: &str = "encoder_adam_step";
    /// Per domain, after its prefix.
    pub const ICM_ADAM_STEP: &str = "icm_adam_step";
    pub const RMS_MEAN: &str = "pbe_rms.mean";
    pub const RMS_VAR: &str = "pbe_rms.var";
    pub const RMS_COUNT: &str = "pbe_rms.count";
}

impl Apt {
    /// A fresh encoder (`EncoderConfig`'s init: orthogonal, gain √2, zero biases) and one ICM
    /// per entry of `action_dims` (`utils.weight_init`), all on `backend`, drawn from `rng` in
    /// that order.
    pub fn new(
        cfg: &AptConfig,
        encoder_cfg: &EncoderConfig,
        action_dims: &[usize],
        backend: &Backend,
        rng: &mut ChaCha8Rng,
    ) -> Result<Self> {
        cfg.validate("apt")?;
        if action_dims.is_empty() || action_dims.contains(&0) {
            return Err(Error::Config(format!(
                "apt: action sizes {action_dims:?}: one per domain, each >= 1"
            )));
        }
        let mut encoder_params = Params::new(backend.clone());
        let encoder = Encoder::new(encoder_cfg, ENCODER_PREFIX, &mut encoder_params, rng)?;
        let encoder_adam = Adam::new(cfg.optimizer.clone(), &encoder_params);
        let repr_dim = encoder.repr_dim();
        let domains = action_dims
            .iter()
            .map(|&action_dim| {
                let mut params = Params::new(backend.clone());
                let dims = IcmDims {
                    repr_dim,
                    action_dim,
                    rep_dim: cfg.icm_rep_dim,
                    hidden_dim: cfg.icm_hidden_dim,
                };
                let icm = Icm::new(dims, ICM_PREFIX, &mut params, rng)?;
                let adam = Adam::new(cfg.optimizer.clone(), &params);
                Ok(DomainIcm {
                    params,
                    icm,
                    adam,
                    rms: RunningMeanStd::default(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            cfg: cfg.clone(),
            encoder_params,
            encoder,
            encoder_adam,
            input_offset: encoder_cfg.input_offset,
            domains,
            updates: 0,
        })
    }

    pub fn config(&self) -> &AptConfig {
        &self.cfg
    }

    /// The encoder's parameters (`encoder.convnet.*`): an optimiser step or
    /// [`Params::load_from`] on them is seen by [`Apt::encoder`].
    pub fn encoder_params(&self) -> &Params {
        &self.encoder_params
    }

    /// `domain`'s ICM parameters (`icm.*`).
    pub fn icm_params(&self, domain: usize) -> Result<&Params> {
        Ok(&self.domain(domain)?.params)
    }

    fn domain(&self, domain: usize) -> Result<&DomainIcm> {
        self.domains
            .get(domain)
            .ok_or_else(|| Error::Shape(format!("apt: domain {domain} of {}", self.domains.len())))
    }

    /// `ICMAPTAgent.update` (l.102-148) up to the reward, for `domain`'s batch: `obs` (b, 9, H,
    /// W) the shifted pixels of O_t, `next_h` (b, repr) the features of the shifted O_t+n
    /// (constants, as upstream's `torch.no_grad()` encoding), `action` (b, A).
    ///
    /// 1. h = conv(obs) with its tape; 2. `update_icm` (l.76-94): the ICM loss on (h, a, next_h),
    ///    one step of `icm_opt` and of `encoder_opt` (the conv gradients through the encoder's
    ///    own backward from d loss / d h); 3. `compute_intr_reward` (l.96-100): PBE of the
    ///    stepped trunk on the pre-step h.
    pub fn update(&mut self, domain: usize, obs: &[u8], next_h: &Tensor, action: &Tensor) -> Result<AptUpdate> {
        let encoded = self.encoder.encode(obs, action.dim(0)?, true)?;
        self.update_encoded(domain, &encoded, next_h, action)
    }

    /// [`Apt::update`] on `obs` already encoded with its tape by this explorer's encoder (the
    /// loop's batch encoding, [`Explorer::wants_obs_tape`]).
    pub fn update_encoded(
        &mut self,
        domain: usize,
        encoded: &Encoded,
        next_h: &Tensor,
        action: &Tensor,
    ) -> Result<AptUpdate> {
        let b = action.dim(0)?;
        let pbe = self.cfg.pbe();
        let encoder = &self.encoder;
        let n_domains = self.domains.len();
        let d = self
            .domains
            .get_mut(domain)
            .ok_or_else(|| Error::Shape(format!("apt: domain {domain} of {n_domains}")))?;
        let device = d.params.device().clone();
        // h as a leaf of the ICM's graph: d loss / d h is what the encoder's backward takes.
        let h = Var::from_tensor(&encoded.h.to_device(&device)?)?; // (b, repr)
        let next_h = next_h.detach().to_device(&device)?; // (b, repr)
        let action = action.detach().to_device(&device)?; // (b, A)
        let losses = d.icm.loss(h.as_tensor(), &action, &next_h)?;
        let loss = f64::from(losses.loss.to_scalar::<f32>()?);
        if !loss.is_finite() {
            return Err(Error::Training(format!("apt: ICM loss {loss} in domain {domain}")));
        }
        let store = losses.loss.backward()?;
        let grad_h = store
            .get(h.as_tensor())
            .ok_or_else(|| Error::Training("apt: the ICM loss has no gradient for h".into()))?
            .clone(); // (b, repr)
        let mut grads: BTreeMap<String, Tensor> = d
            .params
            .iter()
            .filter_map(|(name, var)| store.get(var.as_tensor()).map(|g| (name.clone(), g.clone())))
            .collect();
        // icm_opt.step(), then encoder_opt.step() (independent: the two share no parameter).
        d.adam.step(&d.params, &store)?;
        let rows: Vec<usize> = (0..b).collect();
        let encoder_grads: BTreeMap<String, Tensor> = encoder.backward(encoded, &rows, &grad_h)?.into_iter().collect();
        self.encoder_adam.step_named(&self.encoder_params, &encoder_grads)?;
        grads.extend(encoder_grads);
        // The reward: the updated trunk (its tensors are views of the stepped Vars) on h.
        let rep = d.icm.trunk(&h.as_detached_tensor())?; // (b, rep)
        let rep_dim = rep.dim(1)?;
        let rep = rep.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?; // b·rep
        let reward = pbe_reward(&rep, b, rep_dim, &pbe, &mut d.rms)?; // (b)
        let reward: Vec<f32> = reward.into_iter().map(|r| r as f32).collect();
        let reward = Tensor::from_vec(reward, (b, 1), &device)?; // (b, 1)
        self.updates += 1;
        Ok(AptUpdate {
            loss,
            forward_error: losses.forward_error.detach(),
            backward_error: losses.backward_error.detach(),
            grads,
            grad_h,
            reward,
        })
    }

    /// The encoder's tensors with the input offset folded into the first conv's bias:
    /// conv(x + o) = conv(x) + o·Σ_{c,i,j} W[·, c, i, j] exactly, the convs having no padding,
    /// so b′ = b + o·Σ W (o = −0.5: b′ = b − 0.5·Σ W) and the export takes `pixels / 255`.
    fn folded_encoder(&self) -> Result<BTreeMap<String, Tensor>> {
        let mut tensors = self.encoder_params.snapshot()?;
        let names = self.encoder.param_names();
        let (Some(weight_name), Some(bias_name)) = (names.first(), names.get(1)) else {
            return Err(Error::Shape("apt: an encoder without layers".into()));
        };
        let (Some(weight), Some(bias)) = (tensors.get(weight_name), tensors.get(bias_name)) else {
            return Err(Error::Shape(format!("apt: no {weight_name} or {bias_name} to export")));
        };
        let o = weight.dim(0)?;
        // (o, c, 3, 3) -> (o, c·9) -> Σ over the row: (o), in f64.
        let sums = weight.to_dtype(DType::F64)?.reshape((o, ()))?.sum(1)?;
        let folded = (bias.to_dtype(DType::F64)? + sums.affine(self.input_offset, 0.0)?)?.to_dtype(DType::F32)?; // (o)
        tensors.insert(bias_name.clone(), folded);
        Ok(tensors)
    }
}

impl Explorer for Apt {
    fn encoder(&self) -> &Encoder {
        &self.encoder
    }

    /// [`Apt::update`] on the batch (h′ = `batch.next_obs`), its reward on the batch's device.
    fn wants_obs_tape(&self) -> bool {
        true
    }

    fn intrinsic_reward(
        &mut self,
        domain: usize,
        batch: &Batch,
        obs_encoded: Option<&Encoded>,
        obs: &[u8],
        _next_obs: &[u8],
    ) -> Result<IntrinsicReward> {
        let update = match obs_encoded {
            Some(encoded) => self.update_encoded(domain, encoded, &batch.next_obs, &batch.action)?,
            None => self.update(domain, obs, &batch.next_obs, &batch.action)?,
        };
        let mean = |t: &Tensor| -> Result<f64> { Ok(f64::from(t.mean_all()?.to_scalar::<f32>()?)) };
        let terms = BTreeMap::from([
            ("icm_loss", update.loss),
            ("forward_error", mean(&update.forward_error)?),
            ("backward_error", mean(&update.backward_error)?),
            ("intrinsic_reward", mean(&update.reward)?),
        ]);
        Ok(IntrinsicReward {
            reward: update.reward.to_device(batch.obs.device())?,
            terms,
        })
    }

    fn updates(&self) -> u64 {
        self.updates
    }

    /// Tensors: `encoder.convnet.*`, `adam.{exp_avg,exp_avg_sq}.encoder.convnet.*` and per
    /// domain d `domain{d}.icm.*`, `domain{d}.adam.{exp_avg,exp_avg_sq}.icm.*`. Counters: the
    /// domains, the updates, each Adam's step count, each domain's PBE running mean.
    fn state(&self) -> Result<RepresentationState> {
        let mut tensors = self.encoder_params.snapshot()?;
        tensors.extend(self.encoder_adam.state_tensors(&self.encoder_params)?);
        let mut counters = BTreeMap::from([
            (counters::DOMAINS.to_string(), self.domains.len().to_string()),
            (counters::UPDATES.to_string(), self.updates.to_string()),
            (
                counters::ENCODER_ADAM_STEP.to_string(),
                self.encoder_adam.step.to_string(),
            ),
        ]);
        for (i, d) in self.domains.iter().enumerate() {
            let prefix = domain_prefix(i);
            let own = d.params.snapshot()?.into_iter().chain(d.adam.state_tensors(&d.params)?);
            tensors.extend(own.map(|(k, v)| (format!("{prefix}{k}"), v)));
            for (key, value) in [
                (counters::ICM_ADAM_STEP, d.adam.step.to_string()),
                (counters::RMS_MEAN, d.rms.mean.to_string()),
                (counters::RMS_VAR, d.rms.var.to_string()),
                (counters::RMS_COUNT, d.rms.count.to_string()),
            ] {
                counters.insert(format!("{prefix}{key}"), value);
            }
        }
        Ok(RepresentationState { tensors, counters })
    }

    fn load_state(&mut self, state: &RepresentationState, what: &Path) -> Result<()> {
        let in_file = |e: Error| Error::checkpoint(what, format!("apt: {e}"));
        let counter = |key: &str| -> Result<&String> {
            state
                .counters
                .get(key)
                .ok_or_else(|| Error::checkpoint(what, format!("apt: no `{key}` in the explorer's state")))
        };
        let parse_u64 = |key: &str| -> Result<u64> {
            counter(key)?
                .parse()
                .map_err(|_| Error::checkpoint(what, format!("apt: `{key}` is not a count")))
        };
        let parse_f64 = |key: &str| -> Result<f64> {
            counter(key)?
                .parse()
                .map_err(|_| Error::checkpoint(what, format!("apt: `{key}` is not a number")))
        };
        let domains = parse_u64(counters::DOMAINS)?;
        if domains != self.domains.len() as u64 {
            return Err(Error::checkpoint(
                what,
                format!("apt: {domains} domains saved, this run explores {}", self.domains.len()),
            ));
        }
        self.encoder_params.load_from(&state.tensors).map_err(in_file)?;
        self.encoder_adam
            .load_state(
                &self.encoder_params,
                &state.tensors,
                parse_u64(counters::ENCODER_ADAM_STEP)?,
            )
            .map_err(in_file)?;
        for (i, d) in self.domains.iter_mut().enumerate() {
            let prefix = domain_prefix(i);
            let own = strip_prefix(&state.tensors, &prefix);
            d.params.load_from(&own).map_err(in_file)?;
            let step = parse_u64(&format!("{prefix}{}", counters::ICM_ADAM_STEP))?;
            d.adam.load_state(&d.params, &own, step).map_err(in_file)?;
            d.rms = RunningMeanStd {
                mean: parse_f64(&format!("{prefix}{}", counters::RMS_MEAN))?,
                var: parse_f64(&format!("{prefix}{}", counters::RMS_VAR))?,
                count: parse_f64(&format!("{prefix}{}", counters::RMS_COUNT))?,
            };
        }
        self.updates = parse_u64(counters::UPDATES)?;
        Ok(())
    }

    fn export_tensors(&self) -> Result<BTreeMap<String, Tensor>> {
        self.folded_encoder()
    }
}
