//! One trainer for every method of docs/design.md §5: builds the online and EMA target networks,
//! draws a batch from a [`PairSource`] (real pairs, frame-mask synthetic pairs screened by LNC,
//! …), computes the method's loss, takes one Adam step and one EMA step, and returns the
//! update's metrics. The source is the caller's: video shards for `lfs pretrain`, an RL run's
//! replay buffer for `lfs train` (docs/design.md §7).
//!
//! Gradients come from two places. candle's autograd differentiates the head (predictor,
//! prototypes, the ATC/CURL heads) from the loss down to the online projection z, which is a
//! leaf here; the encoder and projector's gradients are computed by hand from dz
//! ([`EncoderProjector::backward`], the fast CPU path) and spliced into the same gradient store
//! ([`Trainer::backward`]) before one Adam step takes them all.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::config::{ModelConfig, ObjectiveConfig};
use super::objective::{Draw, Drawn, Objective, ObjectiveLoss, OnlinePass};
use super::spread::{spread_sums, Spread, SPREAD_SUMS};
use super::update_metrics::UpdateMetrics;
use crate::data::{PairBatch, PairSource, RandomShift};
use crate::device::{read_scalar_list, Backend};
use crate::nn::checkpoint::{rng_from_string, rng_to_string, strip_prefix};
use crate::nn::clip_grad::clip_grad_norm;
use crate::nn::ema::ema_update;
use crate::nn::kernels::conv_nhwc::OB;
use crate::nn::{Adam, AdamConfig, EncoderProjector, Params};
use crate::{Error, Result};

/// What the objective engine is built from: the model, optimizer and objective sections of a
/// config, with the run's seed, the batch size M and the shift padding. `lfs pretrain` makes it
/// from its whole config, `lfs train` from `[aux]` and the SAC batch (Algorithm 1 draws one
/// batch of M real transitions for both).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainerConfig {
    /// Seeds the initialisation and the engine's own RNG (sampling, shifts).
    pub seed: u64,
    /// M: real pairs per update.
    pub batch_size: usize,
    /// Random-shift padding of every pair, in pixels.
    pub random_shift_pad: usize,
    pub model: ModelConfig,
    pub optimizer: AdamConfig,
    pub objective: ObjectiveConfig,
}

impl TrainerConfig {
    /// Refuses settings the engine cannot train with, naming the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        let (obj, model) = (&self.objective, &self.model);
        if self.batch_size < 2 {
            return bad(format!("the batch size M = {} must be >= 2", self.batch_size));
        }
        if obj.method.uses_lnc() && obj.lnc.k >= self.batch_size {
            return bad(format!(
                "objective.lnc.k = {} must be < the batch size M = {}",
                obj.lnc.k, self.batch_size
            ));
        }
        if obj.lnc.k == 0 || obj.lnc.r < 0.0 || obj.lnc.c - obj.lnc.r / 2.0 < 0.0 {
            return bad(format!(
                "objective.lnc: need k >= 1, r >= 0, c - r/2 >= 0 (k {}, c {}, r {})",
                obj.lnc.k, obj.lnc.c, obj.lnc.r
            ));
        }
        for (name, tau) in [
            ("objective.ema_tau", obj.ema_tau),
            ("objective.atc.ema_tau", obj.atc.ema_tau),
            ("objective.curl.ema_tau", obj.curl.ema_tau),
        ] {
            if !(tau > 0.0 && tau <= 1.0) {
                return bad(format!("{name} = {tau} must be in (0, 1]"));
            }
        }
        if !(obj.atc.clip_grad_norm >= 0.0 && obj.atc.clip_grad_norm.is_finite()) {
            return bad(format!(
                "objective.atc.clip_grad_norm = {} must be >= 0 (0: no clipping)",
                obj.atc.clip_grad_norm
            ));
        }
        if !(0.0..=1.0).contains(&obj.no_lnc_synthetic_fraction) {
            return bad(format!(
                "objective.no_lnc_synthetic_fraction = {} must be in [0, 1]",
                obj.no_lnc_synthetic_fraction
            ));
        }
        if obj.clustering.temperature <= 0.0 || obj.cl_temperature <= 0.0 {
            return bad("temperatures must be > 0".into());
        }
        if model.encoder.in_channels != 9 {
            return bad(format!(
                "model.encoder.in_channels = {}: observations stack 3 RGB frames (9)",
                model.encoder.in_channels
            ));
        }
        if model.latent_dim == 0
            || model.predictor_hidden_dim == 0
            || model.num_prototypes == 0
            || obj.atc.hidden_dim == 0
        {
            return bad("model dimensions must be >= 1".into());
        }
        model.encoder.repr_dim()?;
        if model.encoder.num_filters % OB != 0 {
            return bad(format!(
                "model.encoder.num_filters = {}: the CPU conv kernels need a multiple of {OB}",
                model.encoder.num_filters
            ));
        }
        self.optimizer.validate("optimizer")
    }
}

/// The full training state.
pub struct Trainer {
    cfg: TrainerConfig,
    shift: RandomShift,
    online_params: Params,
    target_params: Params,
    /// f and g over `online_params` / `target_params`.
    online_net: EncoderProjector,
    target_net: EncoderProjector,
    /// The method: its head on the online network, its pairs and its loss.
    objective: Box<dyn Objective>,
    adam: Adam,
    rng: ChaCha8Rng,
    step: u64,
    /// The synthetic pairs LNC selected in the last update, shifted (LNC methods only).
    last_selected: Option<PairBatch>,
}

impl Trainer {
    /// Initialises the networks on `backend` (a `&Device`, or a [`Backend`]) from `cfg.seed`
    /// (orthogonal init, the same values on every device; target = copy of online).
    pub fn new(cfg: &TrainerConfig, backend: impl Into<Backend>) -> Result<Self> {
        cfg.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let mut online_params = Params::new(backend);
        let (encoder_cfg, latent) = (&cfg.model.encoder, cfg.model.latent_dim);
        let online_net = EncoderProjector::new(encoder_cfg, latent, &mut online_params, &mut rng)?;
        let mut objective = cfg.objective.build(&cfg.model, &mut online_params, &mut rng)?;
        // The target starts as an exact copy of the online encoder and projector.
        let (target_net, mut target_params) =
            EncoderProjector::from_tensors(encoder_cfg, latent, &online_params.snapshot()?, online_params.backend())?;
        // A head's target side (CURL's key LayerNorm) is an EMA copy as well.
        objective.attach_target(&mut target_params)?;
        let adam = Adam::new(cfg.optimizer.clone(), &online_params);
        Ok(Self {
            cfg: cfg.clone(),
            shift: RandomShift {
                pad: cfg.random_shift_pad,
            },
            online_params,
            target_params,
            online_net,
            target_net,
            objective,
            adam,
            rng,
            step: 0,
            last_selected: None,
        })
    }

    /// What it was built from.
    pub fn config(&self) -> &TrainerConfig {
        &self.cfg
    }

    /// Updates done so far.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Starts the online and target encoders from `tensors` (`encoder.*`, as `lfs export`
    /// writes them): pre-train, then fine-tune. Heads and projector keep their initialisation.
    /// Errors name `what` and the missing or mis-shaped tensor.
    pub fn load_encoder(&mut self, tensors: &BTreeMap<String, Tensor>, what: &Path) -> Result<()> {
        for params in [&self.online_params, &self.target_params] {
            params
                .subset("encoder.")
                .load_from(tensors)
                .map_err(|e| Error::checkpoint(what, e.to_string()))?;
        }
        Ok(())
    }

    /// The synthetic pairs LNC selected in the last update (N of them, as shifted for it);
    /// `None` before the first update and for methods without LNC.
    pub fn last_selected_synthetic(&self) -> Option<&PairBatch> {
        self.last_selected.as_ref()
    }

    /// The online encoder f (its tensors are the `encoder.*` entries of [`Trainer::online_params`]).
    pub fn online_encoder(&self) -> &crate::nn::Encoder {
        &self.online_net.encoder
    }

    pub fn online_params(&self) -> &Params {
        &self.online_params
    }

    pub fn target_params(&self) -> &Params {
        &self.target_params
    }

    /// One gradient update of the configured method on pairs drawn from `source`.
    pub fn update(&mut self, source: &mut dyn PairSource) -> Result<UpdateMetrics> {
        let start = Instant::now();
        let task = source.task_for_update(self.step);
        let task_name = task
            .and_then(|i| source.task_names().get(i).cloned())
            .unwrap_or_else(|| "mixed".to_string());
        let mut metrics = UpdateMetrics::new(self.step + 1, task_name);

        // ---- data: the training pairs (prev -> online, cur -> target)
        let draw = Draw {
            source,
            task,
            m: self.cfg.batch_size,
            shift: &self.shift,
            rng: &mut self.rng,
            online_net: &self.online_net,
        };
        let Drawn {
            batch,
            online,
            selected,
        } = self.objective.draw(draw, &mut metrics)?;
        if selected.is_some() {
            self.last_selected = selected;
        }
        metrics.num_real = batch.len - metrics.num_synthetic;

        // ---- loss: online z (a leaf; its gradient goes through EncoderProjector::backward)
        let data_done = self.part_done()?;
        let online = match online {
            Some(online) => online,
            None => OnlinePass {
                features: super::stacks::forward_stacks(&self.online_net, &batch.prev, batch.len, true)?,
                rows: (0..batch.len).collect(),
            },
        };
        let z_leaf = Var::from_tensor(&online.features.z_rows(&online.rows)?)?; // (M, latent)

        // The target branch builds no graph, so backward never reaches its parameters.
        let t = super::stacks::forward_stacks(&self.target_net, &batch.cur, batch.len, false)?.z; // (M, latent)
        let spread_sums = spread_sums(&t)?; // (3)
        let loss = self.loss(z_leaf.as_tensor(), &t, &spread_sums, &mut metrics)?;

        // ---- optimise: Adam on the online network, then EMA into the target
        let forward_done = self.part_done()?;
        let mut grads = self.backward(&loss, &z_leaf, &online)?;
        let clip = self.objective.clip_grad_norm();
        if clip > 0.0 {
            metrics.grad_norm = Some(clip_grad_norm(&self.online_params, &mut grads, clip)?);
        }
        let backward_done = self.part_done()?;
        self.adam.step(&self.online_params, &grads)?;
        ema_update(
            &self.online_params,
            &self.target_params,
            self.cfg.objective.target_tau(),
        )?;
        self.step += 1;
        let end = self.part_done()?;
        metrics.seconds_data = (data_done - start).as_secs_f64();
        metrics.seconds_forward = (forward_done - data_done).as_secs_f64();
        metrics.seconds_backward = (backward_done - forward_done).as_secs_f64();
        metrics.seconds_optimizer = (end - backward_done).as_secs_f64();
        metrics.update_seconds = (end - start).as_secs_f64();
        metrics.updates_per_s = 1.0 / metrics.update_seconds.max(1e-9);
        Ok(metrics)
    }

    /// The end of one part of an update (data, forward, backward, optimiser) for its timer. A
    /// GPU runs the launched work later, so a part's host timer stops at its launches, not at
    /// its end; `LFS_SYNC_PARTS=1` waits for the device at each part's end, so that each timer
    /// holds its own GPU work (a profiling mode: the waits cost the overlap they remove).
    fn part_done(&self) -> Result<Instant> {
        if crate::switches::sync_parts() {
            self.online_params.device().synchronize()?;
        }
        Ok(Instant::now())
    }

    /// The method's loss on the online projections `z` (M, latent) and the target ones `t`;
    /// errors if it is not finite. The loss, its terms and the target's `spread_sums` are read
    /// into `metrics` in one copy, the update's last read of the device (LNC's selection is the other).
    fn loss(&self, z: &Tensor, t: &Tensor, spread_sums: &Tensor, metrics: &mut UpdateMetrics) -> Result<Tensor> {
        let ObjectiveLoss { loss, sinkhorn_entropy } = self.objective.loss(z, t)?;
        let mut parts = vec![&loss, spread_sums];
        parts.extend(sinkhorn_entropy.as_ref());
        let read = read_scalar_list(&parts)?; // (1 + 3 [+ 1])
        let spread_at = 1..1 + SPREAD_SUMS;
        let spread = Spread::from_sums(read[spread_at.clone()].try_into().expect("three sums"), t.dim(0)?);
        metrics.target_cosine = spread.mean_pairwise_cosine;
        metrics.target_norm = spread.mean_norm;
        metrics.sinkhorn_entropy = read.get(spread_at.end).copied();
        metrics.loss = read[0];
        if !metrics.loss.is_finite() {
            return Err(Error::Training(format!(
                "update {}: loss is {}",
                self.step + 1,
                metrics.loss
            )));
        }
        Ok(loss)
    }

    /// The gradients of every online parameter: candle's autograd from the loss down to the
    /// leaf z (the head's parameters and dz), then the encoder and projector's gradients from dz
    /// by hand, spliced into the same store under their `Var`s.
    fn backward(&self, loss: &Tensor, z_leaf: &Var, online: &OnlinePass) -> Result<GradStore> {
        let mut grads = loss.backward()?; // the head's parameters and z
        let dz = grads
            .remove(z_leaf.as_tensor())
            .ok_or_else(|| Error::Training("the loss does not depend on the online features".into()))?;
        for (name, grad) in self.online_net.backward(&online.features, &online.rows, &dz)? {
            let var = self
                .online_params
                .get(&name)
                .ok_or_else(|| Error::Shape(format!("no online parameter {name}")))?;
            grads.insert(var.as_tensor(), grad);
        }
        Ok(grads)
    }

    // ---- checkpoints

    /// The training state: online, target and Adam moment tensors (`online.*`, `target.*`,
    /// `adam.*`) and the counters and RNG (`step`, `adam_step`, `rng`).
    pub fn state(&self) -> Result<(BTreeMap<String, Tensor>, BTreeMap<String, String>)> {
        let mut tensors = BTreeMap::new();
        for (k, v) in self.online_params.snapshot()? {
            tensors.insert(format!("online.{k}"), v);
        }
        for (k, v) in self.target_params.snapshot()? {
            tensors.insert(format!("target.{k}"), v);
        }
        tensors.extend(self.adam.state_tensors(&self.online_params)?);
        let counters = BTreeMap::from([
            ("step".to_string(), self.step.to_string()),
            ("adam_step".to_string(), self.adam.step.to_string()),
            ("rng".to_string(), rng_to_string(&self.rng)),
        ]);
        Ok((tensors, counters))
    }

    /// Restores [`Trainer::state`]; `what` names the file in errors.
    pub fn load_state(
        &mut self,
        tensors: &BTreeMap<String, Tensor>,
        counters: &BTreeMap<String, String>,
        what: &Path,
    ) -> Result<()> {
        let err = |reason: String| Error::checkpoint(what, reason);
        let get = |key: &str| {
            counters
                .get(key)
                .ok_or_else(|| err(format!("no `{key}` in the trainer's state")))
        };
        let parse = |key: &str| -> Result<u64> { get(key)?.parse::<u64>().map_err(|e| err(format!("`{key}`: {e}"))) };
        let step = parse("step")?;
        let adam_step = parse("adam_step")?;
        self.online_params.load_from(&strip_prefix(tensors, "online."))?;
        self.target_params.load_from(&strip_prefix(tensors, "target."))?;
        self.adam.load_state(&self.online_params, tensors, adam_step)?;
        self.rng = rng_from_string(get("rng")?).map_err(|e| err(format!("`rng`: {e}")))?;
        self.step = step;
        Ok(())
    }
}
