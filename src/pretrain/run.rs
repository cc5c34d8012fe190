//! The pre-training run: load datasets, resume from `<out_dir>/checkpoint.safetensors` if it
//! exists, loop `Trainer::update`, log every update to `metrics.jsonl`, checkpoint every K
//! updates and at the end. Progress is reported through a callback; nothing here prints.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use candle_core::Device;
use serde::Serialize;

use super::collapse::{Collapse, CollapseMonitor, CollapseSigns};
use super::config::{Method, PretrainConfig};
use crate::data::episode_lengths::{MIN_FRAMES_FOR_REAL_PAIR, MIN_FRAMES_FOR_SYNTHETIC_PAIR};
use crate::data::{episode_lengths, TaskEpisodeLengths};
use crate::data::{PairSampler, SamplerConfig};
use crate::device::{room_for, video_frames_on_host};
use crate::fsutil::write_bytes_atomic;
use crate::log_files::{MetricsLog, Mirror};
use crate::nn::checkpoint;
use crate::nn::checkpoint::{THIS_VERSION, VERSION_KEY};
use crate::objectives::{Trainer, UpdateMetrics};
use crate::probe::online::{OnlineProbe, ProbeLine};
use crate::run_dir::{self, kind};
use crate::shards::{Dataset, Episode, RenderQualities};
use crate::tensorboard::EventFile;
use crate::{Error, Result};

/// File names inside a run directory (the run folder's contract: [`crate::run_dir`]).
pub use crate::run_dir::{CHECKPOINT_FILE, CONFIG_FILE, DATASETS_FILE, METRICS_FILE, SUMMARY_FILE};

/// The pair sampler over pre-training videos for `cfg` (its task batching); errors unless the
/// frames fit `model.encoder.image_size`. On a GPU `device` it keeps the frames there, where
/// they leave room to train (`LFS_GPU_PATHS_ON_CPU=video-frames` takes the GPU's way on the CPU; its `describe_frames` says where).
pub fn video_pair_sampler<'a>(
    cfg: &PretrainConfig,
    episodes: &'a [Episode],
    device: &Device,
) -> Result<PairSampler<'a>> {
    let mut sampler = PairSampler::new(
        episodes,
        SamplerConfig {
            task_batching: cfg.data.task_batching,
        },
    )?;
    let (_, h, w) = sampler.obs_shape();
    let size = cfg.model.encoder.image_size;
    if (h, w) != (size, size) {
        return Err(Error::Config(format!(
            "frames are {h}x{w} but model.encoder.image_size = {size}"
        )));
    }
    if !video_frames_on_host(device) {
        // A device without room for them beside the training, or that refuses them, keeps the
        // host's way (the run says so when it starts).
        let bytes: usize = episodes.iter().map(|e| e.frames.len()).sum();
        match room_for(device, bytes as u64) {
            Ok(()) => {
                let _ = sampler.keep_frames_on(device);
            }
            Err(note) => sampler.keep_frames_on_host(note),
        }
    }
    Ok(sampler)
}

/// Everything needed to resume ([`Trainer::state`], its counters as `lfs.step`,
/// `lfs.adam_step`, `lfs.rng`) plus the method and config, and `provenance` entries.
fn save_checkpoint(
    trainer: &Trainer,
    cfg: &PretrainConfig,
    path: &Path,
    provenance: &BTreeMap<String, String>,
) -> Result<()> {
    let (tensors, counters) = trainer.state()?;
    let mut meta: HashMap<String, String> = provenance.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    meta.extend(counters.into_iter().map(|(k, v)| (format!("lfs.{k}"), v)));
    meta.insert(kind::KEY.into(), kind::PRETRAIN_CHECKPOINT.into());
    meta.insert("lfs.method".into(), cfg.objective.method.name().into());
    meta.insert(run_dir::meta::CONFIG.into(), cfg.to_toml()?);
    checkpoint::save_atomic(path, &tensors, &meta)
}

/// Restores into `trainer` a checkpoint [`save_checkpoint`] wrote for the same settings.
fn load_checkpoint(trainer: &mut Trainer, cfg: &PretrainConfig, path: &Path) -> Result<()> {
    let file = checkpoint::load(path)?;
    let err = |reason: String| Error::checkpoint(path, reason);
    checkpoint::check_same_version(&file)?;
    let saved = PretrainConfig::from_toml_str(file.meta(run_dir::meta::CONFIG)?, &[])
        .map_err(|e| err(format!("its config: {e}")))?;
    let (saved_key, now_key) = (saved.resume_key()?, cfg.resume_key()?);
    if saved_key != now_key {
        return Err(err(format!(
            "was written with different settings ({}; only run.num_updates, run.checkpoint_every_updates, \
             run.tensorboard, run.device, run.precision, [collapse] and [probe] may change on resume); \
             use a new --out-dir or delete the checkpoint",
            crate::config::checkpoint_vs_now(&saved_key, &now_key)
        )));
    }
    let counters = ["step", "adam_step", "rng"]
        .into_iter()
        .map(|k| Ok((k.to_string(), file.meta(&format!("lfs.{k}"))?.to_string())))
        .collect::<Result<BTreeMap<_, _>>>()?;
    trainer.load_state(&file.tensors, &counters, path)
}

/// Provenance of one input dataset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetInfo {
    pub path: PathBuf,
    /// The dataset's content id.
    pub id: String,
    pub num_episodes: usize,
    pub num_frames: usize,
    pub tasks: Vec<String>,
    /// The render qualities of its episodes. Recorded as the one quality they share:
    /// `"default"` / `"fast"` for `lfs collect` datasets, null for ingested videos.
    pub render_quality: RenderQualities,
}

/// Episodes of every dataset, in memory, and their provenance.
pub struct LoadedData {
    pub episodes: Vec<Episode>,
    pub datasets: Vec<DatasetInfo>,
}

/// Loads every dataset of `paths` and refuses to mix render qualities.
pub fn load_datasets(paths: &[PathBuf]) -> Result<LoadedData> {
    if paths.is_empty() {
        return Err(Error::Config(
            "data.datasets is empty: name at least one ingested dataset".to_string(),
        ));
    }
    let mut episodes = Vec::new();
    let mut datasets = Vec::new();
    for path in paths {
        let dataset = Dataset::open(path)?;
        let eps = dataset.load_episodes()?;
        datasets.push(describe(path, dataset.id(), &eps));
        episodes.extend(eps);
    }
    check_render_quality(&datasets)?;
    Ok(LoadedData { episodes, datasets })
}

/// Provenance of an in-memory set of episodes.
pub fn describe(path: &Path, id: String, episodes: &[Episode]) -> DatasetInfo {
    let tasks: BTreeSet<String> = episodes.iter().map(|e| e.task.clone()).collect();
    DatasetInfo {
        path: path.to_path_buf(),
        id,
        num_episodes: episodes.len(),
        num_frames: episodes.iter().map(|e| e.num_frames).sum(),
        tasks: tasks.into_iter().collect(),
        // A dataset with several qualities is reported by `check_render_quality` below.
        render_quality: episodes.iter().map(|e| e.render_quality).collect(),
    }
}

/// Errors when the datasets were rendered at different qualities (issue 3: a run trains on
/// one render quality; comparing encoders across qualities would be meaningless).
pub fn check_render_quality(datasets: &[DatasetInfo]) -> Result<()> {
    // None when some dataset mixes qualities itself.
    let distinct: Option<BTreeSet<_>> = datasets.iter().map(|d| d.render_quality.single()).collect();
    if distinct.is_none_or(|d| d.len() > 1) {
        let list: Vec<String> = datasets
            .iter()
            .map(|d| format!("{} ({})", d.path.display(), d.render_quality))
            .collect();
        return Err(Error::Config(format!(
            "refusing to mix render qualities across datasets: {}",
            list.join(", ")
        )));
    }
    Ok(())
}

/// What the loop reports to its caller (a progress bar, a test).
#[derive(Debug)]
pub enum RunEvent<'m> {
    Started {
        /// Where the batches are made: "frames on the host", or on the device and how much.
        frames: String,
        start_step: u64,
        num_updates: u64,
        resumed: bool,
    },
    Update(&'m UpdateMetrics),
    Checkpoint {
        step: u64,
        path: &'m Path,
    },
    /// The representation has looked collapsed for `collapse.window_updates` updates.
    Collapse(&'m Collapse),
    /// Before training: tasks with episodes too short to give every pair the method draws
    /// (each task still has some; a task with none is refused).
    ShortEpisodes(&'m [TaskEpisodeLengths]),
    /// The online probe's result (also written to `metrics.jsonl`).
    Probe(&'m ProbeLine),
}

/// Where the run ended.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub checkpoint: PathBuf,
    pub steps_done: u64,
    pub resumed_from: Option<u64>,
    pub last_metrics: Option<UpdateMetrics>,
    /// The collapse in force at the last update of this invocation, if any.
    pub collapse: Option<Collapse>,
}

/// Loads `cfg.data.datasets` and trains into `out_dir`.
pub fn run(cfg: &PretrainConfig, out_dir: &Path, on_event: &mut dyn FnMut(RunEvent)) -> Result<RunSummary> {
    let device = cfg.device()?; // a device that cannot open is refused before the datasets load
    let data = load_datasets(&cfg.data.datasets)?;
    run_on_device(cfg, &device, &data.episodes, &data.datasets, out_dir, on_event)
}

/// Trains on in-memory episodes (what [`run`] does after loading; tests call it directly).
pub fn run_on_episodes(
    cfg: &PretrainConfig,
    episodes: &[Episode],
    datasets: &[DatasetInfo],
    out_dir: &Path,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<RunSummary> {
    // Opened before anything is written: a device that cannot open costs nothing.
    run_on_device(cfg, &cfg.device()?, episodes, datasets, out_dir, on_event)
}

/// [`run_on_episodes`] on `device`, `cfg.run.device` opened once by the caller.
fn run_on_device(
    cfg: &PretrainConfig,
    device: &Device,
    episodes: &[Episode],
    datasets: &[DatasetInfo],
    out_dir: &Path,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<RunSummary> {
    check_render_quality(datasets)?;
    let short = check_episode_lengths(cfg.objective.method, episodes)?;
    if !short.is_empty() {
        on_event(RunEvent::ShortEpisodes(&short));
    }
    let io_err = |path: &Path, e: std::io::Error| Error::checkpoint(path, e.to_string());
    std::fs::create_dir_all(out_dir).map_err(|e| io_err(out_dir, e))?;
    let _claim = crate::fsutil::claim_dir(out_dir, "pretrain")?;
    let mut sampler = video_pair_sampler(cfg, episodes, device)?;
    let probe = OnlineProbe::new(&cfg.probe)?;
    let mut trainer = Trainer::new(&cfg.trainer_config(), device)?;
    let checkpoint = out_dir.join(CHECKPOINT_FILE);
    let resumed_from = if checkpoint.exists() {
        check_same_datasets(&checkpoint, datasets)?;
        load_checkpoint(&mut trainer, cfg, &checkpoint)?;
        Some(trainer.step())
    } else {
        None
    };
    let provenance = write_provenance(cfg, datasets, out_dir)?;
    let mut log = open_metrics_log(cfg, out_dir, resumed_from.map(|_| trainer.step()))?;
    on_event(RunEvent::Started {
        frames: sampler.describe_frames(),
        start_step: trainer.step(),
        num_updates: cfg.run.num_updates,
        resumed: resumed_from.is_some(),
    });
    let mut last_metrics = None;
    let mut monitor = CollapseMonitor::new(
        &cfg.collapse,
        cfg.objective.method.clusters().then_some(cfg.model.num_prototypes),
    );
    if trainer.step() == 0 && cfg.run.num_updates > 0 {
        probe_now(probe.as_ref(), &trainer, &mut log, on_event)?;
    }
    while trainer.step() < cfg.run.num_updates {
        let metrics = trainer.update(&mut sampler)?;
        log.write(&metrics)?;
        on_event(RunEvent::Update(&metrics));
        if cfg.probe.enabled() && trainer.step() % cfg.probe.every_updates == 0 {
            probe_now(probe.as_ref(), &trainer, &mut log, on_event)?;
        }
        if let Some(collapse) = monitor.observe(&CollapseSigns::of(&metrics)) {
            on_event(RunEvent::Collapse(&collapse));
        }
        let step = trainer.step();
        if step % cfg.run.checkpoint_every_updates == 0 || step == cfg.run.num_updates {
            save_checkpoint(&trainer, cfg, &checkpoint, &provenance)?;
            on_event(RunEvent::Checkpoint {
                step,
                path: &checkpoint,
            });
        }
        last_metrics = Some(metrics);
    }
    if !checkpoint.exists() {
        // A resumed run that was already complete still leaves its checkpoint in place.
        save_checkpoint(&trainer, cfg, &checkpoint, &provenance)?;
    }
    let summary = RunSummary {
        checkpoint,
        steps_done: trainer.step(),
        resumed_from,
        collapse: None,
        last_metrics,
    };
    finish_summary(out_dir, &monitor, summary)
}

/// The online probe's line at the trainer's step, logged and reported, when there is a probe.
fn probe_now(
    probe: Option<&OnlineProbe>,
    trainer: &Trainer,
    log: &mut MetricsLog,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<()> {
    if let Some(probe) = probe {
        let line = probe.probe(trainer.online_encoder(), trainer.step())?;
        log.write(&line)?;
        on_event(RunEvent::Probe(&line));
    }
    Ok(())
}

/// The run's summary with its collapse verdict (the monitor's at the last metrics), written as
/// `summary.json`; or the one the run ended with, kept, when nothing trained in this invocation.
fn finish_summary(out_dir: &Path, monitor: &CollapseMonitor, mut summary: RunSummary) -> Result<RunSummary> {
    let summary_path = out_dir.join(SUMMARY_FILE);
    // Nothing trained in this invocation (a finished run run again): the summary the run ended
    // with stays as it is, its last metrics and collapse verdict included.
    let keep_summary = summary.last_metrics.is_none() && summary_path.exists();
    summary.collapse = match (&summary.last_metrics, keep_summary) {
        (_, true) => read_summary_collapse(&summary_path)?,
        (Some(m), false) => monitor.current(&CollapseSigns::of(m)),
        (None, false) => None,
    };
    if !keep_summary {
        write_summary(&summary_path, &summary)?;
    }
    Ok(summary)
}

/// The run's provenance: `config.toml` and `datasets.json` beside the checkpoint, and the
/// metadata the checkpoint carries inside it.
fn write_provenance(
    cfg: &PretrainConfig,
    datasets: &[DatasetInfo],
    out_dir: &Path,
) -> Result<BTreeMap<String, String>> {
    let io_err = |path: &Path, e: std::io::Error| Error::checkpoint(path, e.to_string());
    let datasets_json = serde_json::to_string_pretty(datasets)?;
    let config_path = out_dir.join(CONFIG_FILE);
    write_bytes_atomic(&config_path, cfg.to_toml()?.as_bytes()).map_err(|e| io_err(&config_path, e))?;
    let datasets_path = out_dir.join(DATASETS_FILE);
    write_bytes_atomic(&datasets_path, datasets_json.as_bytes()).map_err(|e| io_err(&datasets_path, e))?;
    let mut provenance = BTreeMap::new();
    provenance.insert(crate::run_dir::meta::DATASETS.to_string(), datasets_json);
    provenance.insert(VERSION_KEY.to_string(), THIS_VERSION.to_string());
    Ok(provenance)
}

/// `metrics.jsonl`, and TensorBoard's copy, opened for appending: cut back to `resumed_at`
/// (the checkpoint's step), or started over without a checkpoint.
fn open_metrics_log(cfg: &PretrainConfig, out_dir: &Path, resumed_at: Option<u64>) -> Result<MetricsLog> {
    let log_path = out_dir.join(METRICS_FILE);
    if resumed_at.is_none() && log_path.exists() {
        // A run without a checkpoint starts over: nothing it logged survives (the initial
        // probe's line has step 0, which the cut-back below would keep).
        std::fs::remove_file(&log_path).map_err(|e| Error::checkpoint(&log_path, e.to_string()))?;
    }
    let events = match cfg.run.tensorboard {
        true => Some(EventFile::open_shared(out_dir, |p| {
            resumed_at.is_some_and(|s| p.x <= s)
        })?),
        false => None,
    };
    Ok(MetricsLog::open(&log_path, resumed_at.unwrap_or(0))?
        .mirrored(events.map(|events| Mirror { events, x: "step" })))
}

/// Refuses a task whose every episode is too short for a pair the method draws, naming the
/// task and its counts; returns the tasks that only have some such episodes (a warning).
fn check_episode_lengths(method: Method, episodes: &[Episode]) -> Result<Vec<TaskEpisodeLengths>> {
    let lengths = episode_lengths(episodes);
    let unusable: Vec<String> = lengths
        .iter()
        .filter_map(|t| {
            let (short, need, kind) = if t.without_real_pair == t.episodes {
                (t.without_real_pair, MIN_FRAMES_FOR_REAL_PAIR, "a real pair")
            } else if method.uses_synthetic_pairs() && t.without_synthetic_pair == t.episodes {
                (
                    t.without_synthetic_pair,
                    MIN_FRAMES_FOR_SYNTHETIC_PAIR,
                    "a synthetic pair",
                )
            } else {
                return None;
            };
            Some(format!(
                "task {}: {short} of {} episodes are shorter than the {need} frames {kind} needs",
                t.task, t.episodes
            ))
        })
        .collect();
    if !unusable.is_empty() {
        return Err(Error::Config(format!(
            "{} cannot train on these datasets: {}",
            method.name(),
            unusable.join("; ")
        )));
    }
    // Worth a warning: episodes too short for a pair this method draws.
    let short = |t: &TaskEpisodeLengths| {
        t.without_real_pair > 0 || (method.uses_synthetic_pairs() && t.without_synthetic_pair > 0)
    };
    Ok(lengths.into_iter().filter(short).collect())
}

/// `summary.json`: the run's report, written atomically at the end of every invocation that
/// trained.
fn write_summary(path: &Path, summary: &RunSummary) -> Result<()> {
    let json = serde_json::json!({
        "steps_done": summary.steps_done,
        "resumed_from": summary.resumed_from,
        "last_metrics": summary.last_metrics,
        "collapse": summary.collapse,
    });
    let text = serde_json::to_string_pretty(&json)?;
    write_bytes_atomic(path, text.as_bytes()).map_err(|e| Error::checkpoint(path, e.to_string()))
}

/// The collapse verdict of an earlier `summary.json`.
fn read_summary_collapse(path: &Path) -> Result<Option<Collapse>> {
    let bad = |reason: String| Error::checkpoint(path, format!("unreadable run summary: {reason}"));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    serde_json::from_value(json["collapse"].clone()).map_err(|e| bad(e.to_string()))
}

/// A checkpoint resumes only on the datasets it was trained on (same content ids, same order).
fn check_same_datasets(checkpoint: &Path, datasets: &[DatasetInfo]) -> Result<()> {
    let meta = crate::nn::checkpoint::read_metadata(checkpoint)?;
    let saved: Vec<String> = meta
        .get(crate::run_dir::meta::DATASETS)
        .and_then(|j| serde_json::from_str::<serde_json::Value>(j).ok())
        .and_then(|v| {
            v.as_array()
                .map(|a| a.iter().filter_map(|d| d["id"].as_str().map(str::to_string)).collect())
        })
        .unwrap_or_default();
    let now: Vec<String> = datasets.iter().map(|d| d.id.clone()).collect();
    if saved != now {
        return Err(Error::checkpoint(
            checkpoint,
            format!(
                "was trained on datasets {saved:?}, these are {now:?} (new videos ingested?); use a new --out-dir or delete the checkpoint"
            ),
        ));
    }
    Ok(())
}
