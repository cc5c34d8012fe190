//! Proto-RL as an exploring method (denisyarats/proto @e9899b4, `proto.py`; docs/design.md
//! §15). Its representation loss is LFS's clustering loss on real pairs, so the encoder,
//! projector, predictor, prototypes, EMA target and Adam are the objective engine's
//! ([`Trainer`] with `lfs-no-fm`), stepped every `update_every_steps` agent steps on the SAC
//! batch's (O_t, O_t+1) before the batch is encoded (`ProtoAgent.update`, l.336-374); the
//! intrinsic reward is the kNN distance over a queue of projections ([`queue`]); the exploring
//! agent is §6's SAC (`kind = "sac"`) on the updated encoder's detached features.

pub mod queue;

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::explorer::{Explorer, IntrinsicReward};
use crate::device::Backend;
use crate::nn::checkpoint::{rng_from_string, rng_to_string, strip_prefix};
use crate::nn::encoder::Encoded;
use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::prototypes::l2_normalize;
use crate::nn::{AdamConfig, Encoder, EncoderConfig};
use crate::objectives::lfs::ClusteringConfig;
use crate::objectives::{Method, ModelConfig, ObjectiveConfig, Trainer, TrainerConfig};
use crate::rl::{Batch, ReplayBuffer, Transitions};
use crate::rl_loop::train::online_encoder::ReplayPairs;
use crate::rl_loop::RepresentationState;
use crate::{Error, Result};
use queue::KnnQueue;

/// `[explore.proto]`: Proto-RL's `config.yaml` values by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProtoConfig {
    /// Projector g's output, the predictor's output and the prototypes' size (128, `proj_dim`).
    pub latent_dim: usize,
    /// Hidden units of the predictor (512, `hidden_dim` of `proto.predictor`).
    pub predictor_hidden_dim: usize,
    /// K prototypes (512, `num_protos`).
    pub num_prototypes: usize,
    /// T of the online softmax and the Sinkhorn targets (0.1).
    pub temperature: f64,
    /// Sinkhorn iterations (3, hard-coded in `Proto.sinkhorn`).
    pub sinkhorn_iters: usize,
    /// η of the encoder target's EMA (0.05, `encoder_target_tau`).
    pub encoder_target_tau: f64,
    /// The kNN's k (3, `topk`).
    pub topk: usize,
    /// Queue rows per domain (2048, `queue_size`); a multiple of `num_prototypes`.
    pub queue_size: usize,
    /// A representation update every this many agent updates (2, `encoder_update_frequency`;
    /// the first SAC update is at an even agent step, as upstream's 1000 seed steps make it).
    pub update_every_steps: u64,
    /// Adam over the encoder, projector, predictor and prototypes (`proto_opt`, lr 1e-4).
    pub optimizer: AdamConfig,
}

impl Default for ProtoConfig {
    fn default() -> Self {
        Self {
            latent_dim: 128,
            predictor_hidden_dim: 512,
            num_prototypes: 512,
            temperature: 0.1,
            sinkhorn_iters: 3,
            encoder_target_tau: 0.05,
            topk: 3,
            queue_size: 2048,
            update_every_steps: 2,
            optimizer: AdamConfig {
                lr: 1e-4,
                ..AdamConfig::default()
            },
        }
    }
}

impl ProtoConfig {
    /// Checks ranges against the SAC batch size (the batch the representation trains on).
    pub fn validate(&self, batch_size: usize) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.num_prototypes == 0 || !self.queue_size.is_multiple_of(self.num_prototypes) {
            return bad(format!(
                "explore.proto.queue_size = {} must be a multiple of explore.proto.num_prototypes = {} (each batch enqueues one row per prototype)",
                self.queue_size, self.num_prototypes
            ));
        }
        if self.topk == 0 || self.topk > self.queue_size {
            return bad(format!(
                "explore.proto.topk = {} must be in 1..={}",
                self.topk, self.queue_size
            ));
        }
        if self.update_every_steps == 0 {
            return bad("explore.proto.update_every_steps must be >= 1".into());
        }
        if batch_size < 2 {
            return bad(format!(
                "agent.batch_size = {batch_size}: the clustering loss needs >= 2"
            ));
        }
        self.optimizer.validate("explore.proto.optimizer")
    }

    /// The objective engine's config: `lfs-no-fm` at Proto-RL's sizes, on M = the SAC batch.
    pub fn trainer_config(&self, encoder: &EncoderConfig, seed: u64, batch_size: usize, pad: usize) -> TrainerConfig {
        TrainerConfig {
            seed,
            batch_size,
            random_shift_pad: pad,
            model: ModelConfig {
                encoder: encoder.clone(),
                latent_dim: self.latent_dim,
                predictor_hidden_dim: self.predictor_hidden_dim,
                num_prototypes: self.num_prototypes,
            },
            optimizer: self.optimizer.clone(),
            objective: ObjectiveConfig {
                method: Method::LfsNoFm,
                ema_tau: self.encoder_target_tau,
                clustering: ClusteringConfig {
                    temperature: self.temperature,
                    sinkhorn_iters: self.sinkhorn_iters,
                },
                ..ObjectiveConfig::default()
            },
        }
    }
}

/// The checkpoint names of Proto-RL's state.
mod state {
    pub const TRAINER: &str = "trainer.";
    pub const QUEUE: &str = "queue.";
    pub const QUEUE_PTR: &str = "queue_ptr.";
    pub const CALLS: &str = "calls.";
    pub const RNG: &str = "proto_rng";
}

/// Proto-RL's encoder, heads and per-domain queues.
pub struct Proto {
    cfg: ProtoConfig,
    trainer: Trainer,
    /// One queue per domain: a state is compared with its own domain's recent states.
    queues: Vec<KnnQueue>,
    /// Per domain: SAC updates seen, whose parity picks the representation updates.
    calls: Vec<u64>,
    /// Draws the queue's candidates.
    rng: ChaCha8Rng,
}

impl Proto {
    /// Fresh networks from `seed` (as `lfs pretrain` initialises them), for `num_domains`
    /// domains and SAC batches of `batch_size`, shifted by `pad`.
    pub fn new(
        cfg: &ProtoConfig,
        encoder: &EncoderConfig,
        seed: u64,
        batch_size: usize,
        pad: usize,
        num_domains: usize,
        backend: &Backend,
    ) -> Result<Self> {
        let trainer = Trainer::new(&cfg.trainer_config(encoder, seed, batch_size, pad), backend.clone())?;
        Ok(Self {
            cfg: cfg.clone(),
            trainer,
            queues: (0..num_domains)
                .map(|_| KnnQueue::new(cfg.queue_size, cfg.latent_dim))
                .collect(),
            calls: vec![0; num_domains],
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5052_4f54_4f00),
        })
    }

    /// The objective engine (its networks under `online.*` / `target.*` names).
    pub fn trainer(&self) -> &Trainer {
        &self.trainer
    }

    /// The queue of `domain`.
    pub fn queue(&self, domain: usize) -> &KnnQueue {
        &self.queues[domain]
    }

    /// The prototypes re-normalised in place (upstream's `C = normalize(C)` at the top of
    /// `compute_reward`), read back as (K, latent) host rows.
    pub fn normalized_prototypes(&self) -> Result<Vec<f32>> {
        let var = self.var("protos.weight")?;
        var.set(&l2_normalize(&var.as_detached_tensor())?)?;
        Ok(var
            .as_tensor()
            .to_device(&Device::Cpu)?
            .flatten_all()?
            .to_vec1::<f32>()?)
    }

    fn var(&self, name: &str) -> Result<&candle_core::Var> {
        self.trainer
            .online_params()
            .get(name)
            .ok_or_else(|| Error::Shape(format!("proto: no online parameter {name}")))
    }

    /// z = normalize(g(h)) of features h (b, repr), as (b, latent) host rows.
    pub fn projections(&self, h: &Tensor) -> Result<Vec<f32>> {
        let w = self.var("projector.weight")?.as_tensor(); // (latent, repr)
        let b = self.var("projector.bias")?.as_tensor(); // (latent)
        let y = h.matmul(&w.t()?)?.broadcast_add(b)?; // (b, latent)
        Ok(l2_normalize(&y)?
            .to_device(&Device::Cpu)?
            .flatten_all()?
            .to_vec1::<f32>()?)
    }
}

impl Explorer for Proto {
    fn encoder(&self) -> &Encoder {
        self.trainer.online_encoder()
    }

    /// `update_repr` at every `update_every_steps`-th SAC update: one clustering step of the
    /// encoder, projector, predictor and prototypes on the batch's (O_t, O_t+1), shifted by
    /// the engine, then the target's EMA.
    fn update_before_encoding(
        &mut self,
        domain: usize,
        t: &Transitions,
        replay: &ReplayBuffer,
    ) -> Result<BTreeMap<&'static str, f64>> {
        let call = self.calls[domain];
        self.calls[domain] += 1;
        if !call.is_multiple_of(self.cfg.update_every_steps) {
            return Ok(BTreeMap::new());
        }
        let enc = &self.trainer.config().model.encoder;
        let mut source = ReplayPairs {
            real: t,
            replay,
            device: None,
            obs_shape: (enc.in_channels, enc.image_size, enc.image_size),
        };
        let m = self.trainer.update(&mut source)?;
        let mut terms = BTreeMap::from([("repr_loss", m.loss)]);
        if let Some(e) = m.sinkhorn_entropy {
            terms.insert("sinkhorn_entropy", e);
        }
        Ok(terms)
    }

    /// `compute_reward` on the batch's next observations, encoded by the updated encoder.
    fn intrinsic_reward(
        &mut self,
        domain: usize,
        batch: &Batch,
        _obs_encoded: Option<&Encoded>,
        _obs: &[u8],
        _next_obs: &[u8],
    ) -> Result<IntrinsicReward> {
        let protos = self.normalized_prototypes()?; // (K, latent)
        let z = self.projections(&batch.next_obs)?; // (b, latent)
        let candidates = KnnQueue::draw_candidates(&z, &protos, self.cfg.latent_dim, &mut self.rng);
        let out = self.queues[domain].push_and_reward(&z, &candidates, self.cfg.topk)?;
        let b = out.reward.len();
        let mean = out.reward.iter().map(|r| f64::from(*r)).sum::<f64>() / b.max(1) as f64;
        Ok(IntrinsicReward {
            reward: Tensor::from_vec(out.reward, (b, 1), batch.obs.device())?,
            terms: BTreeMap::from([("intrinsic_reward", mean)]),
        })
    }

    fn updates(&self) -> u64 {
        self.trainer.step()
    }

    fn state(&self) -> Result<RepresentationState> {
        let (tensors, counters) = self.trainer.state()?;
        let mut state = RepresentationState {
            tensors: tensors
                .into_iter()
                .map(|(k, v)| (format!("{}{k}", state::TRAINER), v))
                .collect(),
            counters: counters
                .into_iter()
                .map(|(k, v)| (format!("{}{k}", state::TRAINER), v))
                .collect(),
        };
        for (d, q) in self.queues.iter().enumerate() {
            state.tensors.insert(
                format!("{}{d}", state::QUEUE),
                Tensor::from_slice(&q.rows, (q.size, q.dim), &Device::Cpu)?,
            );
            state
                .counters
                .insert(format!("{}{d}", state::QUEUE_PTR), q.ptr.to_string());
            state
                .counters
                .insert(format!("{}{d}", state::CALLS), self.calls[d].to_string());
        }
        state.counters.insert(state::RNG.into(), rng_to_string(&self.rng));
        Ok(state)
    }

    fn load_state(&mut self, saved: &RepresentationState, what: &Path) -> Result<()> {
        let err = |m: String| Error::checkpoint(what, m);
        let counters: BTreeMap<String, String> = saved
            .counters
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(state::TRAINER).map(|k| (k.to_string(), v.clone())))
            .collect();
        self.trainer
            .load_state(&strip_prefix(&saved.tensors, state::TRAINER), &counters, what)?;
        let counter = |key: String| -> Result<u64> {
            saved
                .counters
                .get(&key)
                .ok_or_else(|| err(format!("no `{key}` in Proto-RL's state")))?
                .parse()
                .map_err(|e| err(format!("`{key}`: {e}")))
        };
        for d in 0..self.queues.len() {
            let key = format!("{}{d}", state::QUEUE);
            let rows = saved
                .tensors
                .get(&key)
                .ok_or_else(|| err(format!("no `{key}` in Proto-RL's state")))?
                .flatten_all()?
                .to_vec1::<f32>()?;
            if rows.len() != self.queues[d].rows.len() {
                return Err(err(format!(
                    "`{key}` has {} values, the queue {}",
                    rows.len(),
                    self.queues[d].rows.len()
                )));
            }
            self.queues[d].rows = rows;
            self.queues[d].ptr = counter(format!("{}{d}", state::QUEUE_PTR))? as usize;
            self.calls[d] = counter(format!("{}{d}", state::CALLS))?;
        }
        let rng = saved
            .counters
            .get(state::RNG)
            .ok_or_else(|| err(format!("no `{}` in Proto-RL's state", state::RNG)))?;
        self.rng = rng_from_string(rng).map_err(|e| err(format!("`{}`: {e}", state::RNG)))?;
        Ok(())
    }

    fn export_tensors(&self) -> Result<BTreeMap<String, Tensor>> {
        let mut tensors = self
            .trainer
            .online_params()
            .subset(&format!("{ENCODER_PREFIX}."))
            .snapshot()?;
        for t in tensors.values_mut() {
            *t = t.to_device(&Device::Cpu)?;
        }
        Ok(tensors)
    }
}
