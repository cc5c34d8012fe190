//! `lfs train` (docs/design.md §7): the RL loop ([`crate::rl_loop`]) with the encoder trained
//! online by `aux.method` (and the critic, with `aux.critic_gradient`). `spec.encoder` is its
//! initialisation (`Random`: the run's seed, as `lfs pretrain` initialises it; `Exported`: an
//! `lfs export` file, to fine-tune a pre-trained encoder). With `aux.method = none` and no
//! critic gradient the encoder stays as initialised, as constants.

use std::path::Path;

use candle_core::Tensor;

use super::config::TrainConfig;
use super::online_encoder::OnlineEncoder;
use crate::config::StageConfig;
use crate::data::PairBatch;
use crate::device::Backend;
use crate::nn::encoder_file::ExportFile;
use crate::objectives::{Trainer, UpdateMetrics};
use crate::rl::{DeviceFrames, ReplayBuffer, Transitions};
use crate::rl_loop::{
    self, CriticFeatures, EncoderChoice, EncoderProvenance, FrozenFeatures, LoopEvent, LoopSpec, LoopSummary,
    Representation, RepresentationState, Stage, ValueComparison,
};
use crate::run_dir::kind;
use crate::Result;

/// Validates everything, then trains into `out_dir` (resuming a checkpoint there).
pub fn run(
    cfg: &TrainConfig,
    spec: &LoopSpec,
    out_dir: &Path,
    on_event: &mut dyn FnMut(LoopEvent),
) -> Result<LoopSummary> {
    cfg.validate()?;
    let backend = Backend::new(&cfg.run.device.open(cfg.run.precision)?);
    let representation: Box<dyn Representation> = if cfg.encoder_changes() {
        Box::new(OnlineRepresentation::new(cfg, &spec.encoder, &backend)?)
    } else {
        Box::new(FrozenFeatures::new(&spec.encoder, cfg.run.seed, &backend)?)
    };
    let mut cfg = cfg.clone();
    let render_source = rl_loop::resolve_render_quality(&mut cfg.env, representation.as_ref(), spec)?;
    let stage = Stage {
        command: "train",
        checkpoint_kind: kind::TRAIN_CHECKPOINT,
        toml: cfg.to_toml()?,
        resume_key: cfg.resume_key()?,
        saved_resume_key: |toml| TrainConfig::from_toml_str(toml, &[])?.resume_key(),
        value_comparison: ValueComparison::new(&cfg.aux.value_comparison),
        backend,
        rl: cfg.rl(),
    };
    rl_loop::run(stage, spec, representation, render_source, out_dir, on_event)
}

/// `lfs train`'s representation: the encoder its objective (or the critic) trains online, named
/// by its objective and initialisation.
pub struct OnlineRepresentation {
    encoder: OnlineEncoder,
    /// `online:<method>[+critic]:init=<random:seed | the export's sha256>`, and the render
    /// quality of the videos an exported initialisation was pre-trained on.
    provenance: EncoderProvenance,
}

impl OnlineRepresentation {
    /// The online encoder on `backend`, initialised as `init` says.
    pub fn new(cfg: &TrainConfig, init: &EncoderChoice, backend: &Backend) -> Result<Self> {
        let mut encoder = OnlineEncoder::new(cfg, backend)?;
        let (init, render_quality) = match init {
            EncoderChoice::Random => (format!("random:{}", cfg.run.seed), None),
            EncoderChoice::Exported(path) => {
                let export = ExportFile::read(path)?;
                let trained_offset = export.frozen_encoder()?.config.input_offset;
                if cfg.aux.model.encoder.input_offset != trained_offset {
                    return Err(crate::Error::Config(format!(
                        "{}: its encoder was trained on pixels / 255 + {trained_offset}, and aux.model.encoder.input_offset is {}",
                        path.display(),
                        cfg.aux.model.encoder.input_offset
                    )));
                }
                encoder.load_encoder(&export.file.tensors, path)?;
                let quality = export.training_render_quality();
                (export.sha256, quality)
            }
        };
        let critic = if cfg.aux.critic_gradient { "+critic" } else { "" };
        Ok(Self {
            encoder,
            provenance: EncoderProvenance {
                id: format!("online:{}{critic}:init={init}", cfg.aux.method.name()),
                render_quality,
            },
        })
    }
}

impl Representation for OnlineRepresentation {
    fn provenance(&self) -> &EncoderProvenance {
        &self.provenance
    }

    fn repr_dim(&self) -> usize {
        self.encoder.repr_dim()
    }

    fn encode(&self, obs: &[u8], n: usize) -> Result<Tensor> {
        self.encoder.encode(obs, n)
    }

    fn critic_trains_encoder(&self) -> bool {
        self.encoder.critic_trains_encoder()
    }

    fn encode_for_critic(&self, obs: &[u8], n: usize) -> Result<Option<CriticFeatures>> {
        match self.encoder.critic_trains_encoder() {
            true => self.encoder.encode_for_critic(obs, n).map(Some),
            false => Ok(None),
        }
    }

    fn encodes_batches_only(&self) -> bool {
        // The critic's gradient, or nothing, trains the encoder (DrQ-v2's setting), or an
        // auxiliary objective draws its pairs through ReplayPairs, which reads the device's
        // frames (Algorithm 1's LFS). TACO's objective reads sequences of pixels: the loop keeps
        // its batches on the host (action_sequence > 0).
        true
    }

    fn encode_tensor(&self, obs: &Tensor) -> Result<Tensor> {
        self.encoder.encode_tensor(obs)
    }

    fn encode_tensor_for_critic(&self, obs: &Tensor) -> Result<Option<CriticFeatures>> {
        match self.encoder.critic_trains_encoder() {
            true => self.encoder.encode_tensor_for_critic(obs).map(Some),
            false => Ok(None),
        }
    }

    fn critic_step(&mut self, features: &CriticFeatures, dh: &Tensor) -> Result<()> {
        self.encoder.critic_step(features, dh)
    }

    fn agent_objective_step(&mut self, features: &CriticFeatures, dh: &Tensor) -> Result<()> {
        self.encoder.agent_objective_step(features, dh)
    }

    fn aux_update(
        &mut self,
        batch: &Transitions,
        replay: &ReplayBuffer,
        device_frames: Option<&DeviceFrames>,
    ) -> Result<Option<UpdateMetrics>> {
        self.encoder.update(batch, replay, device_frames)
    }

    fn aux_step(&self) -> Option<u64> {
        self.encoder.trainer().map(Trainer::step)
    }

    fn last_selected_synthetic(&self) -> Option<&PairBatch> {
        self.encoder.trainer().and_then(Trainer::last_selected_synthetic)
    }

    fn state(&self) -> Result<Option<RepresentationState>> {
        let (tensors, counters) = self.encoder.state()?;
        Ok(Some(RepresentationState { tensors, counters }))
    }

    fn load_state(&mut self, state: &RepresentationState, what: &Path) -> Result<()> {
        self.encoder.load_state(&state.tensors, &state.counters, what)
    }
}
