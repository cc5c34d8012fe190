//! TACO (Zheng et al. 2023, "TACO: Temporal Latent Action-Driven Contrastive Loss"; `agents/
//! taco.py`, FrankZheng2022/TACO @84c38e3), one of the paper's end-to-end baselines
//! (docs/design.md §14): DrQ-v2 whose critic takes latent actions ([`ActionEncoding`]), plus an
//! objective trained after every agent update on the shared encoder: with z = proj_s(encoder(·)),
//! the bilinear InfoNCE between proj_sa(z_t, u_{t:t+K}) and z_{t+K} (u the K actions' latent),
//! CURL's InfoNCE between two shifts of O_t, and the K-step sequence's prediction of the n-step
//! reward. It needs actions: an end-to-end agent, never an objective for action-free videos.
//!
//! Its optimisers, as TACO's: the critic's loss steps the critic, the action encoder and (the
//! caller's) encoder; the TACO loss steps the heads, the action encoder and the encoder again,
//! each through Adams of their own.

mod agent;
mod config;

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor, D};
use candle_nn::Linear;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::agent_state::{self, check_finite, Optimised};
use super::batch::{Batch, SequenceViews};
use super::drqv2::{DrQv2Agent, DrQv2Config, DrQv2Metrics};
use super::latent_actions::LatentActions;
use super::mlp::{join, linear, Trunk, TrunkOutput};
use crate::device::read_scalar_list;
use crate::nn::projector::init_linear;
use crate::nn::{Adam, Params};
use crate::objectives::infonce::bilinear_info_nce;
use crate::{Error, Result};
pub use agent::TacoSums;
pub use config::{TacoConfig, TACO_TABLE};

/// TACO's own settings (its `cfgs/agent/taco.yaml`), beside DrQ-v2's in `[agent.taco]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TacoSettings {
    /// K: the actions of a sequence and the step of its future observation O_{t+K} (3).
    pub multistep: usize,
    /// L, the latent action's dimensions; 0: TACO's heuristic ⌊1.25·A⌋ + 1.
    pub latent_action_dim: usize,
    /// CURL's InfoNCE between two shifts of O_t (true).
    pub curl: bool,
    /// The sequence's prediction of the n-step reward, MSE (true).
    pub reward: bool,
    /// Hidden units of proj_sa and the reward head (1024).
    pub hidden_dim: usize,
}

impl Default for TacoSettings {
    fn default() -> Self {
        Self {
            multistep: 3,
            latent_action_dim: 0,
            curl: true,
            reward: true,
            hidden_dim: 1024,
        }
    }
}

impl TacoSettings {
    /// Checks ranges; errors name the field under `section`.
    pub fn validate(&self, section: &str) -> Result<()> {
        if self.multistep == 0 || self.hidden_dim == 0 {
            return Err(Error::Config(format!(
                "{section}: multistep and hidden_dim must be >= 1"
            )));
        }
        Ok(())
    }

    /// L for actions of `action_dim`.
    pub fn latent_dim(&self, action_dim: usize) -> usize {
        match self.latent_action_dim {
            0 => action_dim * 5 / 4 + 1, // int(A · 1.25) + 1
            l => l,
        }
    }
}

/// What one update reports: DrQ-v2's metrics and the TACO loss's terms.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TacoMetrics {
    #[serde(flatten)]
    pub agent: DrQv2Metrics,
    #[serde(rename = "train/taco_loss")]
    pub taco_loss: f64,
    #[serde(rename = "train/curl_loss", skip_serializing_if = "Option::is_none")]
    pub curl_loss: Option<f64>,
    #[serde(rename = "train/reward_loss", skip_serializing_if = "Option::is_none")]
    pub reward_loss: Option<f64>,
}

/// TACO's heads (its `TACO` module): proj_s `Linear(repr → F) → LayerNorm → Tanh`, proj_sa and
/// the reward head `Linear(F + K·L → hidden) → ReLU → Linear(hidden → F | 1)`, and W (F, F).
/// PyTorch names `proj_s.{0,1}`, `proj_sa.{0,2}`, `reward.{0,2}`, `W`.
#[derive(Debug, Clone)]
pub struct TacoHeads {
    proj_s: Trunk,
    proj_sa: [Linear; 2],
    reward: [Linear; 2],
    w: Tensor,
}

impl TacoHeads {
    /// Registers the heads in `params` for features of `repr_dim`, latents of `feature_dim` and
    /// action sequences of `seq_dim` = K·L. W starts uniform in [0, 1), as TACO's `torch.rand`.
    pub fn new<R: Rng + ?Sized>(
        repr_dim: usize,
        feature_dim: usize,
        seq_dim: usize,
        hidden_dim: usize,
        params: &mut Params,
        rng: &mut R,
    ) -> Result<Self> {
        let two = |name: &str, out: usize, params: &mut Params, rng: &mut R| -> Result<[Linear; 2]> {
            Ok([
                init_linear(feature_dim + seq_dim, hidden_dim, 1.0, &join(name, "0"), params, rng)?,
                init_linear(hidden_dim, out, 1.0, &join(name, "2"), params, rng)?,
            ])
        };
        let proj_s = Trunk::new(repr_dim, feature_dim, TrunkOutput::LayerNormTanh, "proj_s", params, rng)?;
        let proj_sa = two("proj_sa", feature_dim, params, rng)?;
        let reward = two("reward", 1, params, rng)?;
        let w: Vec<f32> = (0..feature_dim * feature_dim).map(|_| rng.random::<f32>()).collect();
        let w = params.insert("W", Tensor::from_vec(w, (feature_dim, feature_dim), params.device())?)?;
        Ok(Self {
            proj_s,
            proj_sa,
            reward,
            w,
        })
    }

    /// `Linear → ReLU → Linear`. Shapes: x (b, F + K·L) -> (b, out).
    fn two_layer(layers: &[Linear; 2], x: &Tensor) -> Result<Tensor> {
        linear(&layers[1], &linear(&layers[0], x)?.relu()?)
    }
}

/// The TACO loss and its terms.
pub struct TacoLosses {
    /// taco + curl + reward.
    pub total: Tensor,
    pub taco: Tensor,
    pub curl: Option<Tensor>,
    pub reward: Option<Tensor>,
}

/// The agent: DrQ-v2 with latent actions, TACO's heads, and the Adams of the TACO loss.
pub struct TacoAgent {
    core: DrQv2Agent,
    settings: TacoSettings,
    heads: TacoHeads,
    heads_params: Params,
    /// TACO's `taco_opt` over its heads, and over the action encoder (one Adam per store: the
    /// same per-parameter steps as one Adam over both).
    heads_opt: Adam,
    act_tok_opt: Adam,
}

/// Checkpoint names of the heads and of the TACO loss's Adams.
const HEADS: &str = "taco";
const HEADS_OPT: &str = "taco_opt";
const ACT_TOK_TACO_OPT: &str = "act_tok_taco_opt";

/// The DrQ-v2 core's action encoder, which a TACO agent's core always has.
fn latent_actions(core: &DrQv2Agent) -> Result<&LatentActions> {
    core.latent_actions()
        .ok_or_else(|| Error::Shape("taco: no action encoder".into()))
}

impl TacoAgent {
    /// Fresh networks for `repr_dim` features and `action_dim` actions.
    pub fn new<R: Rng + ?Sized>(
        cfg: &DrQv2Config,
        settings: &TacoSettings,
        repr_dim: usize,
        action_dim: usize,
        device: &Device,
        rng: &mut R,
    ) -> Result<Self> {
        settings.validate("agent.taco")?;
        let (latent, k) = (settings.latent_dim(action_dim), settings.multistep);
        let core = DrQv2Agent::with_latent_actions(cfg, repr_dim, action_dim, Some((latent, k)), device, rng)?;
        let mut heads_params = Params::new(device);
        let heads = TacoHeads::new(
            repr_dim,
            cfg.feature_dim,
            latent * k,
            settings.hidden_dim,
            &mut heads_params,
            rng,
        )?;
        let act_tok = latent_actions(&core)?;
        Ok(Self {
            heads_opt: Adam::new(cfg.optimizer.clone(), &heads_params),
            act_tok_opt: Adam::new(cfg.optimizer.clone(), &act_tok.params),
            core,
            settings: settings.clone(),
            heads,
            heads_params,
        })
    }

    /// DrQ-v2's half: acting, its update, min Q, its settings.
    pub fn core(&self) -> &DrQv2Agent {
        &self.core
    }

    pub fn settings(&self) -> &TacoSettings {
        &self.settings
    }

    /// Every parameter store by checkpoint prefix: the DrQ-v2 networks' and the heads'.
    pub fn param_stores(&self) -> Vec<(&'static str, &Params)> {
        let mut stores = self.core.param_stores().to_vec();
        stores.push((HEADS, &self.heads_params));
        stores
    }

    /// The TACO loss on the batch's views and its n-step `reward` (b, 1): with
    /// z = proj_s(features), u = the action sequence's latent (b, K·L),
    /// - taco: InfoNCE of proj_sa(z_anchor, u) W z_futureᵀ (future: O_{t+K}),
    /// - curl: InfoNCE of z_anchor W z_positiveᵀ (two shifts of O_t),
    /// - reward: MSE of the reward head on (z_anchor, u) against `reward`;
    ///
    /// the positive and future branches are constants (TACO computes them under no_grad).
    pub fn taco_losses(&self, views: &SequenceViews, reward: &Tensor) -> Result<TacoLosses> {
        let h = &self.heads;
        let z_anchor = h.proj_s.forward(&views.anchor)?; // (b, F)
        let constant = |x: &Tensor| -> Result<Tensor> { Ok(h.proj_s.detached().forward(&x.detach())?.detach()) };
        let u = latent_actions(&self.core)?
            .encoding
            .encode_sequence(&views.action_seq)?; // (b, K·L)
        let zu = Tensor::cat(&[&z_anchor, &u], D::Minus1)?; // (b, F + K·L)
        let taco = bilinear_info_nce(&TacoHeads::two_layer(&h.proj_sa, &zu)?, &h.w, &constant(&views.future)?)?;
        let curl = match self.settings.curl {
            true => Some(bilinear_info_nce(&z_anchor, &h.w, &constant(&views.positive)?)?),
            false => None,
        };
        let reward = match self.settings.reward {
            true => Some(TacoHeads::two_layer(&h.reward, &zu)?.sub(reward)?.sqr()?.mean_all()?),
            false => None,
        };
        let mut total = taco.clone();
        for term in curl.iter().chain(&reward) {
            total = (total + term)?;
        }
        Ok(TacoLosses {
            total,
            taco,
            curl,
            reward,
        })
    }

    /// DrQ-v2's update at agent step `step` (critic with latent actions, actor, target), with
    /// the critic loss's gradient with respect to `batch.obs` when it tracks one. The TACO
    /// loss's terms are filled in by [`TacoAgent::update_taco`].
    pub fn update<R: Rng + ?Sized>(
        &mut self,
        batch: &Batch,
        step: u64,
        rng: &mut R,
    ) -> Result<(TacoMetrics, Option<Tensor>)> {
        let (agent, obs_grad) = self.core.update(batch, step, rng)?;
        let metrics = TacoMetrics {
            agent,
            ..TacoMetrics::default()
        };
        Ok((metrics, obs_grad))
    }

    /// The TACO loss's update on the views of the batch [`TacoAgent::update`] just took (made
    /// with the encoder after its critic step, as TACO's `update_taco` follows `update_critic`),
    /// and the batch's n-step `reward` (b, 1): steps the heads and the action encoder, fills
    /// the loss's terms into `metrics`, and returns its gradient with respect to the anchor's
    /// features (b, repr) when they track one (for the encoder's own step).
    pub fn update_taco(
        &mut self,
        views: &SequenceViews,
        reward: &Tensor,
        metrics: &mut TacoMetrics,
    ) -> Result<Option<Tensor>> {
        let losses = self.taco_losses(views, reward)?;
        // One read of the losses (a GPU stops once for them): TACO's, the total, then CURL's
        // and the reward's when the config has them.
        let optional = [&losses.curl, &losses.reward];
        let mut read = vec![&losses.taco, &losses.total];
        read.extend(optional.iter().filter_map(|l| l.as_ref()));
        let values = read_scalar_list(&read)?;
        let mut rest = values[2..].iter().copied();
        metrics.taco_loss = values[0];
        metrics.curl_loss = losses.curl.as_ref().and_then(|_| rest.next());
        metrics.reward_loss = losses.reward.as_ref().and_then(|_| rest.next());
        check_finite("taco loss", values[1])?;
        let grads = losses.total.backward()?;
        self.heads_opt.step(&self.heads_params, &grads)?;
        let act_tok = &latent_actions(&self.core)?.params;
        self.act_tok_opt.step(act_tok, &grads)?;
        Ok(match views.anchor.track_op() {
            true => grads.get(&views.anchor).cloned(),
            false => None,
        })
    }

    // ---- checkpoints

    /// DrQ-v2's state, the heads (`taco.…`) and the TACO loss's Adams (`taco_opt.…`,
    /// `act_tok_taco_opt.…`).
    pub fn state(&self) -> Result<(BTreeMap<String, Tensor>, HashMap<String, String>)> {
        let (mut tensors, mut meta) = self.core.state()?;
        let act_tok = &latent_actions(&self.core)?.params;
        let (t, m) = agent_state::save(
            &[(HEADS, &self.heads_params)],
            &[
                Optimised::new(HEADS_OPT, &self.heads_opt, &self.heads_params),
                Optimised::new(ACT_TOK_TACO_OPT, &self.act_tok_opt, act_tok),
            ],
        )?;
        tensors.extend(t);
        meta.extend(m);
        Ok((tensors, meta))
    }

    /// Restores [`TacoAgent::state`]; errors name a missing or mis-shaped tensor.
    pub fn load_state(&mut self, tensors: &BTreeMap<String, Tensor>, meta: &HashMap<String, String>) -> Result<()> {
        self.core.load_state(tensors, meta)?;
        agent_state::load_params(&[(HEADS, &self.heads_params)], tensors)?;
        agent_state::load_optimiser(HEADS_OPT, &mut self.heads_opt, &self.heads_params, tensors, meta)?;
        let act_tok = &latent_actions(&self.core)?.params;
        agent_state::load_optimiser(ACT_TOK_TACO_OPT, &mut self.act_tok_opt, act_tok, tensors, meta)
    }

    /// Replaces the networks' parameters (`actor.…`, `critic.…`, `critic_target.…`,
    /// `act_tok.…`, `taco.…`), keeping the optimisers (reference tests).
    pub fn load_networks(&self, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
        self.core.load_networks(tensors)?;
        agent_state::load_params(&[(HEADS, &self.heads_params)], tensors)
    }
}
