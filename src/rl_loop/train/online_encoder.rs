//! The encoder of `lfs train` (docs/design.md §7, the paper's Algorithm 1): trained online, one
//! update per agent step, by an auxiliary objective — the objective engine [`Trainer`] that
//! `lfs pretrain` drives, reused as it is — and read by SAC through detached features, so the
//! SAC losses never reach it. The baselines that let the critic train the encoder
//! (`aux.critic_gradient`: SAC from pixels with `aux.method = none`, CURL end to end with
//! `aux.method = curl`) add the critic loss's gradient through the encoder's own backward and a
//! second Adam, as CURL's code keeps one optimiser for the critic (encoder included) and one for
//! its contrastive loss.
//!
//! The objective draws its pairs from the RL run itself ([`ReplayPairs`]):
//! - real pairs are the SAC batch's M transitions (O_t, O_{t+1}), as Algorithm 1 shares them;
//! - synthetic pairs are the frame-mask pairs of the replay's episodes: at every frame t ≥ 4 of
//!   a stored episode, the pair the 5-observation queue of Algorithm 1 yields at t
//!   (tests/observation_queue.rs; tests/data.rs checks the two agree). Kept as positions
//!   in the replay's frames rather than a second copy (40000 pairs of two 9×84×84 stacks would
//!   take ~5 GB), so the auxiliary buffer holds the pairs of the episodes the replay holds,
//!   the seed frames included.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::Tensor;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::TrainConfig;
use crate::data::episode_lengths::MIN_FRAMES_FOR_SYNTHETIC_PAIR;
use crate::data::sampler::locate;
use crate::data::{frame_mask_pair, PairBatch, PairFrames, PairKind, PairSource, Stacks};
use crate::device::Backend;
use crate::nn::checkpoint::strip_prefix;
use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::{Adam, Encoder, Params};
use crate::objectives::{Trainer, UpdateMetrics};
use crate::observation::{stack_indices, FRAME_SIZE, FRAME_STACK};
use crate::rl::{DeviceFrames, ReplayBuffer, Transitions};
use crate::rl_loop::CriticFeatures;
use crate::{Error, Result};

/// The sections of the online encoder's state (within the loop's representation section).
mod state {
    /// The objective's networks, Adam and RNG (`Trainer::state`).
    pub const OBJECTIVE: &str = "objective.";
    /// The encoder alone (`aux.method = none`).
    pub const ENCODER_ONLY: &str = "encoder_only.";
    /// The critic's Adam over the conv layers (`aux.critic_gradient`), and its step count.
    pub const CRITIC_ADAM: &str = "critic_adam.";
    pub const CRITIC_ADAM_STEP: &str = "critic_adam_step";
    /// The agent's own objective's Adam over the conv layers (TACO), and its step count.
    pub const AGENT_OBJECTIVE_ADAM: &str = "agent_objective_adam.";
    pub const AGENT_OBJECTIVE_ADAM_STEP: &str = "agent_objective_adam_step";
}

/// The encoder `lfs train` trains, and what trains it.
pub struct OnlineEncoder {
    networks: Networks,
    /// With `aux.critic_gradient`: the critic's gradient also trains the conv layers, through
    /// their own Adam (the agent's settings), as SAC from pixels and CURL do.
    critic: Option<CriticGradient>,
    /// With an agent that has an objective of its own (TACO): its gradient trains the conv
    /// layers through a second Adam (TACO's `taco_opt` beside its `encoder_opt`).
    agent_objective: Option<CriticGradient>,
}

enum Networks {
    /// The auxiliary objective's networks; the encoder is its online encoder.
    Objective(Box<Trainer>),
    /// No objective (`aux.method = none`): the encoder alone.
    EncoderOnly { params: Params, encoder: Encoder },
}

/// An Adam over the encoder's conv parameters (sharing their storage) for the critic's
/// gradient (or the agent's objective's).
struct CriticGradient {
    params: Params,
    adam: Adam,
}

impl OnlineEncoder {
    /// Fresh networks on `backend` from `cfg.run.seed`, as `lfs pretrain` would initialise them.
    pub fn new(cfg: &TrainConfig, backend: &Backend) -> Result<Self> {
        let networks = match cfg.aux.method.objective() {
            Some(_) => Networks::Objective(Box::new(Trainer::new(&cfg.trainer_config()?, backend)?)),
            None => {
                let mut params = Params::new(backend);
                let mut rng = ChaCha8Rng::seed_from_u64(cfg.run.seed);
                let encoder = Encoder::new(&cfg.aux.model.encoder, ENCODER_PREFIX, &mut params, &mut rng)?;
                Networks::EncoderOnly { params, encoder }
            }
        };
        let mut this = Self {
            networks,
            critic: None,
            agent_objective: None,
        };
        let adam = |this: &Self| {
            let params = this.params().subset(&format!("{ENCODER_PREFIX}."));
            let adam = Adam::new(cfg.agent.optimizer().clone(), &params);
            CriticGradient { params, adam }
        };
        if cfg.aux.critic_gradient {
            this.critic = Some(adam(&this));
        }
        if cfg.agent.action_sequence() > 0 {
            this.agent_objective = Some(adam(&this));
        }
        Ok(this)
    }

    fn encoder(&self) -> &Encoder {
        match &self.networks {
            Networks::Objective(trainer) => trainer.online_encoder(),
            Networks::EncoderOnly { encoder, .. } => encoder,
        }
    }

    /// Every trainable tensor: the objective's online networks, or the encoder's.
    fn params(&self) -> &Params {
        match &self.networks {
            Networks::Objective(trainer) => trainer.online_params(),
            Networks::EncoderOnly { params, .. } => params,
        }
    }

    /// The objective's trainer, when there is an objective.
    pub fn trainer(&self) -> Option<&Trainer> {
        match &self.networks {
            Networks::Objective(trainer) => Some(trainer),
            Networks::EncoderOnly { .. } => None,
        }
    }

    /// Whether the critic's gradient trains the encoder.
    pub fn critic_trains_encoder(&self) -> bool {
        self.critic.is_some()
    }

    /// The conv parameters (`encoder.*`) by name, as constants.
    pub fn encoder_tensors(&self) -> Result<BTreeMap<String, Tensor>> {
        self.params().subset(&format!("{ENCODER_PREFIX}.")).snapshot()
    }

    /// Shapes: obs (n, 9, 84, 84) uint8 -> (n, repr) constants.
    pub fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor> {
        Ok(self.encoder().encode(obs, n, false)?.h.detach())
    }

    /// Shapes: obs (n, 9, 84, 84) uint8 -> features whose `encoded.h` (n, repr) keeps its tape,
    /// for [`OnlineEncoder::critic_step`].
    pub fn encode_for_critic(&self, obs: &[u8], n: usize) -> Result<CriticFeatures> {
        Ok(CriticFeatures {
            encoded: self.encoder().encode(obs, n, true)?,
        })
    }

    /// [`OnlineEncoder::encode`] of pixels already on the run's device: (n, 9, 84, 84) u8.
    pub fn encode_tensor(&self, obs: &Tensor) -> Result<Tensor> {
        Ok(self.encoder().encode_tensor(obs, false)?.h.detach())
    }

    /// [`OnlineEncoder::encode_for_critic`] of pixels already on the run's device.
    pub fn encode_tensor_for_critic(&self, obs: &Tensor) -> Result<CriticFeatures> {
        Ok(CriticFeatures {
            encoded: self.encoder().encode_tensor(obs, true)?,
        })
    }

    /// One Adam step of the conv layers on the critic loss's gradient `dh` (n, repr) with
    /// respect to `features.encoded.h`. Errors unless `aux.critic_gradient` is on.
    pub fn critic_step(&mut self, features: &CriticFeatures, dh: &Tensor) -> Result<()> {
        let grads = self.conv_gradients(features, dh)?;
        let critic = self
            .critic
            .as_mut()
            .ok_or_else(|| Error::Training("critic_step without aux.critic_gradient".into()))?;
        critic.adam.step_named(&critic.params, &grads)
    }

    /// One Adam step of the conv layers on the agent's own objective's gradient `dh` (n, repr)
    /// with respect to `features.encoded.h` (TACO's loss), through its own Adam. Errors for an
    /// agent without one.
    pub fn agent_objective_step(&mut self, features: &CriticFeatures, dh: &Tensor) -> Result<()> {
        let grads = self.conv_gradients(features, dh)?;
        let objective = self
            .agent_objective
            .as_mut()
            .ok_or_else(|| Error::Training("agent_objective_step for an agent without an objective".into()))?;
        objective.adam.step_named(&objective.params, &grads)
    }

    /// The conv parameters' gradients of a loss whose gradient with respect to
    /// `features.encoded.h` is `dh` (n, repr), through the encoder's own backward.
    fn conv_gradients(&self, features: &CriticFeatures, dh: &Tensor) -> Result<BTreeMap<String, Tensor>> {
        let n = features.encoded.h.dim(0)?;
        let rows: Vec<usize> = (0..n).collect();
        Ok(self
            .encoder()
            .backward(&features.encoded, &rows, dh)?
            .into_iter()
            .collect())
    }

    pub fn repr_dim(&self) -> usize {
        self.encoder().repr_dim()
    }

    /// One update of the objective on the SAC batch `real` (unshifted: the objective shifts its
    /// own copy, as the pre-trainer does) and synthetic pairs from `replay`; None without an
    /// objective.
    pub fn update(
        &mut self,
        real: &Transitions,
        replay: &ReplayBuffer,
        device: Option<&DeviceFrames>,
    ) -> Result<Option<UpdateMetrics>> {
        let Networks::Objective(trainer) = &mut self.networks else {
            return Ok(None);
        };
        let mut source = ReplayPairs {
            real,
            replay,
            device,
            obs_shape: (3 * FRAME_STACK, FRAME_SIZE, FRAME_SIZE),
        };
        trainer.update(&mut source).map(Some)
    }

    /// Starts the encoder (and the objective's target encoder) from `tensors` (`encoder.*`,
    /// as `lfs export` writes them); errors name `what`.
    pub fn load_encoder(&mut self, tensors: &BTreeMap<String, Tensor>, what: &Path) -> Result<()> {
        match &mut self.networks {
            Networks::Objective(trainer) => trainer.load_encoder(tensors, what),
            Networks::EncoderOnly { params, .. } => params
                .load_from(tensors)
                .map_err(|e| Error::checkpoint(what, e.to_string())),
        }
    }

    /// The training state: tensors (`objective.*` or `encoder_only.*`, and `critic_adam.*`)
    /// and counters.
    pub fn state(&self) -> Result<(BTreeMap<String, Tensor>, BTreeMap<String, String>)> {
        let (mut tensors, mut counters) = match &self.networks {
            Networks::Objective(trainer) => {
                let (t, c) = trainer.state()?;
                (prefixed(t, state::OBJECTIVE), c)
            }
            Networks::EncoderOnly { params, .. } => {
                (prefixed(params.snapshot()?, state::ENCODER_ONLY), BTreeMap::new())
            }
        };
        let adams = [
            (&self.critic, state::CRITIC_ADAM, state::CRITIC_ADAM_STEP),
            (
                &self.agent_objective,
                state::AGENT_OBJECTIVE_ADAM,
                state::AGENT_OBJECTIVE_ADAM_STEP,
            ),
        ];
        for (adam, prefix, step) in adams {
            if let Some(a) = adam {
                tensors.extend(prefixed(a.adam.state_tensors(&a.params)?, prefix));
                counters.insert(step.into(), a.adam.step.to_string());
            }
        }
        Ok((tensors, counters))
    }

    /// Restores [`OnlineEncoder::state`]; `what` names the file in errors.
    pub fn load_state(
        &mut self,
        tensors: &BTreeMap<String, Tensor>,
        counters: &BTreeMap<String, String>,
        what: &Path,
    ) -> Result<()> {
        match &mut self.networks {
            Networks::Objective(trainer) => {
                trainer.load_state(&strip_prefix(tensors, state::OBJECTIVE), counters, what)?
            }
            Networks::EncoderOnly { params, .. } => params.load_from(&strip_prefix(tensors, state::ENCODER_ONLY))?,
        }
        let adams = [
            (&mut self.critic, state::CRITIC_ADAM, state::CRITIC_ADAM_STEP),
            (
                &mut self.agent_objective,
                state::AGENT_OBJECTIVE_ADAM,
                state::AGENT_OBJECTIVE_ADAM_STEP,
            ),
        ];
        for (adam, prefix, step) in adams {
            if let Some(a) = adam {
                let steps = counters
                    .get(step)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| Error::checkpoint(what, format!("no `{step}` in the encoder's state")))?;
                a.adam.load_state(&a.params, &strip_prefix(tensors, prefix), steps)?;
            }
        }
        Ok(())
    }
}

fn prefixed(tensors: BTreeMap<String, Tensor>, prefix: &str) -> BTreeMap<String, Tensor> {
    tensors.into_iter().map(|(k, v)| (format!("{prefix}{k}"), v)).collect()
}

/// The pairs of one `lfs train` update: the SAC batch's real pairs and the replay's synthetic
/// ones.
pub(crate) struct ReplayPairs<'r> {
    /// The SAC batch, unshifted: its (O_t, O_{t+1}) are the real pairs.
    pub(crate) real: &'r Transitions,
    pub(crate) replay: &'r ReplayBuffer,
    /// The replay's frames on the run's device, when a GPU keeps them there: the pairs are then
    /// frames of it, gathered when encoded (the same draws and bytes).
    pub(crate) device: Option<&'r DeviceFrames>,
    /// (c, h, w) of one observation.
    pub(crate) obs_shape: (usize, usize, usize),
}

impl PairSource for ReplayPairs<'_> {
    fn sample_pairs(
        &mut self,
        kind: PairKind,
        _task: Option<usize>,
        n: usize,
        rng: &mut ChaCha8Rng,
    ) -> Result<PairBatch> {
        let obs_shape = self.obs_shape;
        let obs_len = obs_shape.0 * obs_shape.1 * obs_shape.2;
        match kind {
            // The batch is a uniform draw already: its first n rows are one too.
            PairKind::Real if n <= self.real.len => match self.device {
                Some(frames) => {
                    let pairs: Vec<(usize, PairFrames)> = self.real.locations[..n]
                        .iter()
                        .map(|&(e, t)| {
                            let frames = PairFrames {
                                prev: stack_indices(t),
                                cur: stack_indices(t + self.real.nstep),
                            };
                            (e, frames)
                        })
                        .collect();
                    frames.pairs(&pairs, obs_shape)
                }
                None => Ok(PairBatch {
                    prev: Stacks::Host(self.real.obs[..n * obs_len].to_vec()),
                    cur: Stacks::Host(self.real.next_obs[..n * obs_len].to_vec()),
                    len: n,
                    obs_shape,
                }),
            },
            PairKind::Real => Err(Error::Shape(format!(
                "the objective asked for {n} real pairs, the SAC batch has {}",
                self.real.len
            ))),
            PairKind::Synthetic => match self.device {
                Some(frames) => frames.pairs(&synthetic_picks(self.replay, n, rng)?, obs_shape),
                None => synthetic_pairs(self.replay, n, rng, obs_shape),
            },
        }
    }

    fn task_for_update(&self, _step: u64) -> Option<usize> {
        None
    }

    fn task_names(&self) -> Vec<String> {
        vec![]
    }
}

/// `n` frame-mask pairs drawn uniformly, with replacement, over every frame t ≥ 4 of every
/// episode in `replay` (the one being recorded included).
pub fn synthetic_pairs<R: Rng + ?Sized>(
    replay: &ReplayBuffer,
    n: usize,
    rng: &mut R,
    obs_shape: (usize, usize, usize),
) -> Result<PairBatch> {
    let picks = synthetic_picks(replay, n, rng)?;
    PairBatch::stack(
        obs_shape,
        picks.into_iter().map(|(e, frames)| Ok((&replay.episodes()[e], frames))),
    )
}

/// The draws of [`synthetic_pairs`]: each pair's episode (its position in `replay`) and frames.
fn synthetic_picks<R: Rng + ?Sized>(replay: &ReplayBuffer, n: usize, rng: &mut R) -> Result<Vec<(usize, PairFrames)>> {
    // The first frame a pair ends at, and the pairs per episode: frames first … num_frames − 1.
    let first = MIN_FRAMES_FOR_SYNTHETIC_PAIR - 1;
    let counts: Vec<usize> = replay
        .episodes()
        .iter()
        .map(|e| e.num_frames().saturating_sub(first))
        .collect();
    let total: usize = counts.iter().sum();
    if total == 0 {
        return Err(Error::Shape(format!(
            "no synthetic pairs yet: no stored episode has {MIN_FRAMES_FOR_SYNTHETIC_PAIR} frames"
        )));
    }
    (0..n)
        .map(|_| {
            let (e, k) = locate(&counts, rng.random_range(0..total))
                .ok_or_else(|| Error::Shape("synthetic pair index out of range".to_string()))?;
            let t = first + k;
            let frames = frame_mask_pair(t).ok_or_else(|| Error::Shape(format!("no synthetic pair ends at {t}")))?;
            Ok((e, frames))
        })
        .collect()
}
