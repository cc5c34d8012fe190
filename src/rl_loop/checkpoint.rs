//! The loop's checkpoint (`checkpoint.safetensors`): the agent's state, the replay's episodes
//! (and its sampler's counters with `drqv2` sampling), the representation's training state, the counters and the RNG, written atomically at episode
//! ends; and the checks that make a resumed run the same run. Each part has its own section of
//! tensor names and metadata keys, named once here.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};

use super::representation::RepresentationState;
use super::stage::{LoopSpec, Stage};
use super::workspace::Workspace;
use crate::nn::checkpoint::{self, rng_from_string, rng_to_string, SafetensorsFile};
use crate::rl::StoredEpisode;
use crate::rl::{Agent, AgentState};
use crate::run_dir::{self, kind};
use crate::{Error, Result};

/// The representation's training state: tensors under `aux.`, counters under `lfs.aux_`.
const REPRESENTATION: Section = Section {
    tensors: "aux.",
    meta: "lfs.aux_",
};

/// The replay's episodes: `replay.<index, 6 digits>.<field>`.
const REPLAY: &str = "replay.";
/// Fields of one stored episode: its frames (u8), actions (transitions, action_dim) and rewards.
const REPLAY_FRAMES: &str = "frames";
const REPLAY_ACTIONS: &str = "actions";
const REPLAY_REWARDS: &str = "rewards";

/// Metadata keys of the loop's counters and identity.
mod key {
    pub const TASK: &str = "lfs.task";
    pub const ENCODER: &str = "lfs.encoder";
    pub const STEP: &str = "lfs.step";
    pub const EPISODE: &str = "lfs.episode";
    pub const EVALUATIONS: &str = "lfs.evaluations";
    pub const LAST_EVAL_STEP: &str = "lfs.last_eval_step";
    pub const RNG: &str = "lfs.rng";
    pub const VALUE_COMPARISON: &str = "lfs.value_comparison";
    /// The replay sampler's state (JSON), `drqv2` sampling only: a uniformly sampled run's
    /// checkpoint has no such key, as before the setting existed.
    pub const REPLAY_SAMPLING: &str = "lfs.replay_sampling";
}

/// A part of the checkpoint: a prefix of tensor names and one of metadata keys.
struct Section {
    tensors: &'static str,
    meta: &'static str,
}

impl Section {
    fn put(
        &self,
        state: RepresentationState,
        tensors: &mut BTreeMap<String, Tensor>,
        meta: &mut std::collections::HashMap<String, String>,
    ) {
        tensors.extend(
            state
                .tensors
                .into_iter()
                .map(|(k, v)| (format!("{}{k}", self.tensors), v)),
        );
        meta.extend(
            state
                .counters
                .into_iter()
                .map(|(k, v)| (format!("{}{k}", self.meta), v)),
        );
    }

    fn take(&self, file: &SafetensorsFile) -> RepresentationState {
        RepresentationState {
            tensors: file.strip_prefix(self.tensors),
            counters: file
                .metadata
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(self.meta).map(|k| (k.to_string(), v.clone())))
                .collect(),
        }
    }
}

/// A resumed run must be the same run: same kind of file, config (but budget and checkpoint
/// cadence), task and encoder.
pub(super) fn check_resumable(file: &SafetensorsFile, stage: &Stage, spec: &LoopSpec, encoder_id: &str) -> Result<()> {
    let err = |reason: String| {
        Error::checkpoint(
            &file.path,
            format!("{reason}; use a new --out-dir or delete the checkpoint"),
        )
    };
    let found = file.meta(run_dir::kind::KEY)?;
    if found != stage.checkpoint_kind {
        return Err(err(format!(
            "is an `lfs {found}` file, not an `lfs {}` checkpoint",
            stage.command
        )));
    }
    checkpoint::check_same_version(file)?;
    let saved =
        (stage.saved_resume_key)(file.meta(run_dir::meta::CONFIG)?).map_err(|e| err(format!("its config: {e}")))?;
    if saved != stage.resume_key {
        return Err(err(format!(
            "was written with a different config ({}; only run.num_train_frames, run.checkpoint_every_frames, run.tensorboard, run.device and run.precision may change on resume)",
            crate::config::checkpoint_vs_now(&saved, &stage.resume_key)
        )));
    }
    if file.meta(key::TASK)? != spec.task.name() {
        return Err(err(format!(
            "was trained on task {}, not {}",
            file.meta(key::TASK)?,
            spec.task
        )));
    }
    if file.meta(key::ENCODER)? != encoder_id {
        return Err(err(format!(
            "was trained with encoder {}, not {encoder_id}",
            file.meta(key::ENCODER)?
        )));
    }
    Ok(())
}

impl<A: Agent> Workspace<A> {
    pub(super) fn save_checkpoint(&self, path: &Path) -> Result<()> {
        let AgentState { mut tensors, mut meta } = self.agent.state()?;
        tensors.extend(self.replay_tensors()?);
        meta.insert(kind::KEY.into(), self.stage.checkpoint_kind.into());
        meta.insert(run_dir::meta::CONFIG.into(), self.stage.toml.clone());
        if let Some(state) = self.representation.state()? {
            REPRESENTATION.put(state, &mut tensors, &mut meta);
        }
        meta.insert(key::TASK.into(), self.spec.task.name().into());
        meta.insert(key::ENCODER.into(), self.representation.id().to_string());
        meta.insert(key::STEP.into(), self.step.to_string());
        meta.insert(key::EPISODE.into(), self.episode.to_string());
        meta.insert(key::EVALUATIONS.into(), self.evaluations.to_string());
        if let Some(step) = self.last_eval_step {
            meta.insert(key::LAST_EVAL_STEP.into(), step.to_string());
        }
        meta.insert(key::RNG.into(), rng_to_string(&self.rng));
        if let Some(window) = &self.value_comparison {
            meta.insert(key::VALUE_COMPARISON.into(), serde_json::to_string(window)?);
        }
        if let Some(sampling) = self.replay.sampling_state() {
            meta.insert(key::REPLAY_SAMPLING.into(), serde_json::to_string(&sampling)?);
        }
        meta.insert(checkpoint::VERSION_KEY.into(), checkpoint::THIS_VERSION.into());
        checkpoint::save_atomic(path, &tensors, &meta)
    }

    /// The replay's episodes as tensors (host memory): `replay.<i>.frames`, `.actions`, `.rewards`.
    fn replay_tensors(&self) -> Result<BTreeMap<String, Tensor>> {
        let mut tensors = BTreeMap::new();
        for (i, episode) in self.replay.episodes().iter().enumerate() {
            let n = episode.num_transitions();
            let name = |field: &str| format!("{REPLAY}{i:06}.{field}");
            tensors.insert(
                name(REPLAY_FRAMES),
                Tensor::from_slice(&episode.frames, episode.frames.len(), &Device::Cpu)?,
            );
            tensors.insert(
                name(REPLAY_ACTIONS),
                Tensor::from_slice(&episode.actions, (n, self.action_dim), &Device::Cpu)?,
            );
            tensors.insert(
                name(REPLAY_REWARDS),
                Tensor::from_slice(&episode.rewards, n, &Device::Cpu)?,
            );
        }
        Ok(tensors)
    }

    pub(super) fn restore(&mut self, file: &SafetensorsFile) -> Result<()> {
        let err = |reason: String| Error::checkpoint(&file.path, reason);
        let number = |key: &str| -> Result<u64> { file.meta(key)?.parse().map_err(|e| err(format!("`{key}`: {e}"))) };
        self.agent.load_state(&file.tensors, &file.metadata)?;
        self.representation.load_state(&REPRESENTATION.take(file), &file.path)?;
        self.replay.restore(replay_episodes(file)?)?;
        if self.replay.sampling_state().is_some() {
            let state = serde_json::from_str(file.meta(key::REPLAY_SAMPLING)?)
                .map_err(|e| err(format!("`{}`: {e}", key::REPLAY_SAMPLING)))?;
            self.replay.restore_sampling(state)?;
        }
        if let Some(frames) = &mut self.device_frames {
            frames.clear(self.replay.first_episode());
            for episode in self.replay.episodes() {
                frames.start_episode(self.replay.first_episode());
                frames.push(&episode.frames)?;
            }
        }
        if self.stage.rl.replay.feature_cache {
            // The cache is not stored: the frozen encoder recomputes it exactly.
            if let Some(cache) = &mut self.device_cache {
                cache.clear(self.replay.first_episode());
            }
            for e in 0..self.replay.episodes().len() {
                let obs = self.replay.observations_without_features(e);
                let flat: Vec<u8> = obs.concat();
                // h (observations, repr)
                let h = self.encode(&flat, obs.len())?;
                match &mut self.device_cache {
                    Some(cache) => {
                        cache.start_episode(self.replay.first_episode());
                        cache.push(&h)?;
                    }
                    None => self.replay.fill_features(e, &h.flatten_all()?.to_vec1::<f32>()?)?,
                }
            }
        }
        self.step = number(key::STEP)?;
        self.episode = number(key::EPISODE)?;
        self.evaluations = number(key::EVALUATIONS)?;
        self.last_eval_step = match file.metadata.contains_key(key::LAST_EVAL_STEP) {
            true => Some(number(key::LAST_EVAL_STEP)?),
            false => None,
        };
        self.rng = rng_from_string(file.meta(key::RNG)?).map_err(|e| err(format!("`{}`: {e}", key::RNG)))?;
        if self.value_comparison.is_some() {
            self.value_comparison = Some(
                serde_json::from_str(file.meta(key::VALUE_COMPARISON)?)
                    .map_err(|e| err(format!("`{}`: {e}", key::VALUE_COMPARISON)))?,
            );
        }
        Ok(())
    }
}

/// The replay's episodes in the checkpoint, in order.
fn replay_episodes(file: &SafetensorsFile) -> Result<Vec<StoredEpisode>> {
    let mut episodes = BTreeMap::<String, StoredEpisode>::new();
    for (name, t) in &file.tensors {
        let Some((index, field)) = name.strip_prefix(REPLAY).and_then(|rest| rest.split_once('.')) else {
            continue;
        };
        let entry = episodes.entry(index.to_string()).or_default();
        match field {
            REPLAY_FRAMES => entry.frames = t.to_dtype(DType::U8)?.to_vec1::<u8>()?,
            REPLAY_ACTIONS => entry.actions = t.flatten_all()?.to_vec1::<f32>()?,
            REPLAY_REWARDS => entry.rewards = t.to_vec1::<f32>()?,
            other => {
                return Err(Error::checkpoint(&file.path, format!("unknown replay field {other}")));
            }
        }
    }
    Ok(episodes.into_values().collect())
}
