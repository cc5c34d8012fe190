//! Where the agent's features come from: the loop's seam for encoders. `lfs eval` gives it a
//! [`FrozenFeatures`] (an export or the random encoder, as constants); `lfs train` an encoder
//! that an auxiliary objective, or the critic, trains online (`crate::rl_loop::train::OnlineRepresentation`).
//! A new way to make features is a new implementation of [`Representation`], not new arms in
//! the loop.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::data::PairBatch;
use crate::device::Backend;
use crate::env::RenderQuality;
use crate::nn::encoder::Encoded;
use crate::nn::encoder_file::ExportFile;
use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::{Encoder, EncoderConfig, Params};
use crate::objectives::UpdateMetrics;
use crate::rl::{Batch, DeviceFrames, ReplayBuffer, Transitions};
use crate::{Error, Result};

/// Which encoder the agent sees the task through (for `lfs train`: its initialisation).
#[derive(Debug, Clone, PartialEq)]
pub enum EncoderChoice {
    /// An `lfs export` file.
    Exported(std::path::PathBuf),
    /// A randomly initialised encoder, seeded by the run's seed: the floor every method must
    /// beat.
    Random,
}

/// An observation batch encoded with its tape kept, for the critic's gradient.
pub struct CriticFeatures {
    pub encoded: Encoded,
}

impl CriticFeatures {
    /// h (n, repr) as a leaf for the agent's losses: the gradient they leave on it is what the
    /// encoder's own backward takes from there (the critic's step, TACO's objective step).
    pub fn leaf(&self) -> Result<Tensor> {
        Ok(candle_core::Var::from_tensor(&self.encoded.h)?.as_tensor().clone())
    }
}

/// A representation's training state in a checkpoint: tensors and string counters, each under
/// the loop's own prefix for it (see `super::checkpoint`).
#[derive(Debug, Default)]
pub struct RepresentationState {
    pub tensors: BTreeMap<String, Tensor>,
    pub counters: BTreeMap<String, String>,
}

/// What a run records of its encoder (`run.json`, the checkpoint) and a resumed run must match.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderProvenance {
    /// The export's sha256, `random:<seed>`, or (`lfs train`) the objective and the
    /// initialisation.
    pub id: String,
    /// The render quality of the videos the encoder was pre-trained on, when known.
    pub render_quality: Option<RenderQuality>,
}

/// The features the agent acts and learns on.
pub trait Representation {
    fn provenance(&self) -> &EncoderProvenance;

    /// [`EncoderProvenance::id`].
    fn id(&self) -> &str {
        &self.provenance().id
    }

    /// [`EncoderProvenance::render_quality`].
    fn training_render_quality(&self) -> Option<RenderQuality> {
        self.provenance().render_quality
    }

    /// Features per observation.
    fn repr_dim(&self) -> usize;

    /// Shapes: obs (n, 9, 84, 84) u8 -> h (n, repr), constants.
    fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor>;

    /// Whether nothing but the encoder reads a training batch's pixels (its forward, and the
    /// critic's gradient through it), or an auxiliary objective reads them as pairs through
    /// [`Representation::aux_update`]'s device frames (no intrinsic reward): then the replay's
    /// frames may live on the run's device, batches be made there and encoded by
    /// [`Representation::encode_tensor`] and [`Representation::encode_tensor_for_critic`].
    fn encodes_batches_only(&self) -> bool {
        false
    }

    /// Shapes: obs (n, 9, 84, 84) u8 already on the run's device -> h (n, repr), constants.
    fn encode_tensor(&self, _obs: &Tensor) -> Result<Tensor> {
        Err(crate::Error::Training(
            "this representation encodes pixels from host memory only".into(),
        ))
    }

    /// [`Representation::encode_for_critic`] of pixels already on the run's device.
    fn encode_tensor_for_critic(&self, _obs: &Tensor) -> Result<Option<CriticFeatures>> {
        Ok(None)
    }

    /// Whether the critic's gradient trains the encoder: then
    /// [`Representation::encode_for_critic`] gives features with their tape, and the agent is
    /// built for them ([`crate::rl::Features::encoder_tape`]).
    fn critic_trains_encoder(&self) -> bool {
        false
    }

    /// The features with their tape, when the critic's gradient trains the encoder; None when
    /// nothing the critic does reaches it.
    fn encode_for_critic(&self, _obs: &[u8], _n: usize) -> Result<Option<CriticFeatures>> {
        Ok(None)
    }

    /// One step of the encoder on the critic loss's gradient `dh` (n, repr) with respect to
    /// `features.encoded.h`.
    fn critic_step(&mut self, _features: &CriticFeatures, _dh: &Tensor) -> Result<()> {
        Err(Error::Training(
            "this encoder does not train on the critic's gradient".into(),
        ))
    }

    /// One step of the encoder on the gradient `dh` (n, repr) of the agent's own objective (TACO's
    /// loss) with respect to `features.encoded.h`, through an Adam of its own.
    fn agent_objective_step(&mut self, _features: &CriticFeatures, _dh: &Tensor) -> Result<()> {
        Err(Error::Training(
            "this encoder does not train on the agent's objective".into(),
        ))
    }

    /// One update of an auxiliary objective on the SAC batch's (unshifted) transitions, before
    /// SAC reads the batch (Algorithm 1); None without one.
    fn aux_update(
        &mut self,
        _batch: &Transitions,
        _replay: &ReplayBuffer,
        _device_frames: Option<&DeviceFrames>,
    ) -> Result<Option<UpdateMetrics>> {
        Ok(None)
    }

    /// The batch's O_t encoded with its tape, when [`Representation::intrinsic_reward`] trains
    /// the encoder through it (APT's ICM), so the batch is encoded once; None otherwise.
    fn encode_with_tape(&self, _obs: &[u8], _n: usize) -> Result<Option<Encoded>> {
        Ok(None)
    }

    /// The reward the agent learns from in place of the task's, for a representation that makes
    /// its own (`lfs explore`'s intrinsic reward): (b, 1) for the batch whose features are
    /// `batch.obs` and `batch.next_obs`, encoded from the shifted pixels `obs` and `next_obs`
    /// (b, 9, 84, 84); `obs_encoded` is what [`Representation::encode_with_tape`] gave for
    /// `obs`. None keeps the task's reward.
    fn intrinsic_reward(
        &mut self,
        _batch: &Batch,
        _obs_encoded: Option<&Encoded>,
        _obs: &[u8],
        _next_obs: &[u8],
    ) -> Result<Option<Tensor>> {
        Ok(None)
    }

    /// Auxiliary updates done, when there is an objective (`aux.jsonl` is cut back to it).
    fn aux_step(&self) -> Option<u64> {
        None
    }

    /// The synthetic observations the objective's last update kept (the value comparison).
    fn last_selected_synthetic(&self) -> Option<&PairBatch> {
        None
    }

    /// The training state a checkpoint keeps; None when there is none (constants).
    fn state(&self) -> Result<Option<RepresentationState>> {
        Ok(None)
    }

    /// Restores [`Representation::state`]; `what` names the checkpoint in errors.
    fn load_state(&mut self, _state: &RepresentationState, _what: &Path) -> Result<()> {
        Ok(())
    }
}

/// The encoder as constants, its identity, and the render quality of its training videos
/// (`lfs eval`, and `lfs train` when nothing trains the encoder).
pub struct FrozenFeatures {
    encoder: Encoder,
    /// sha256 of the export file, or `random:<seed>`; the render quality of its training videos.
    provenance: EncoderProvenance,
}

impl FrozenFeatures {
    /// `choice` loaded as constants on `backend`: an export file, or the paper's encoder
    /// orthogonally initialised from `seed` (the same values on every device).
    pub fn new(choice: &EncoderChoice, seed: u64, backend: &Backend) -> Result<Self> {
        match choice {
            EncoderChoice::Random => {
                let cfg = EncoderConfig::default();
                let mut params = Params::new(&Device::Cpu);
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                Encoder::new(&cfg, ENCODER_PREFIX, &mut params, &mut rng)?;
                let host = Encoder::from_tensors(&cfg, ENCODER_PREFIX, &params.snapshot()?)?;
                Ok(Self {
                    encoder: host.to_backend(backend)?,
                    provenance: EncoderProvenance {
                        id: format!("random:{seed}"),
                        render_quality: None,
                    },
                })
            }
            EncoderChoice::Exported(path) => {
                let export = ExportFile::read(path)?;
                Ok(Self {
                    encoder: export.frozen_encoder()?.encoder.to_backend(backend)?,
                    provenance: EncoderProvenance {
                        render_quality: export.training_render_quality(),
                        id: export.sha256,
                    },
                })
            }
        }
    }
}

impl Representation for FrozenFeatures {
    fn provenance(&self) -> &EncoderProvenance {
        &self.provenance
    }

    fn repr_dim(&self) -> usize {
        self.encoder.repr_dim()
    }

    fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor> {
        Ok(self.encoder.encode(obs, n, false)?.h)
    }

    fn encodes_batches_only(&self) -> bool {
        true
    }

    fn encode_tensor(&self, obs: &Tensor) -> Result<Tensor> {
        Ok(self.encoder.encode_tensor(obs, false)?.h)
    }
}
