//! Probing one encoder on a dataset recorded by `lfs collect`: task by task, the episodes of a
//! task are decoded, encoded and probed, then dropped, so memory holds one task at a time.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::split::{load_episodes, split_episodes, FIRST_FRAME};
use super::{probe_split, ProbeConfig, ProbeSplit, TaskProbe};
use crate::device::Backend;
use crate::env::RenderQuality;
use crate::nn::encoder_file::ExportFile;
use crate::rl_loop::{EncoderChoice, FrozenFeatures, Representation};
use crate::shards::{Dataset, EpisodeRecord};
use crate::{Error, Result};

/// What to probe.
#[derive(Debug, Clone)]
pub struct ProbeRun {
    pub encoder: EncoderChoice,
    /// Seed of the random encoder's initialisation (`--encoder random`).
    pub random_seed: u64,
    pub dataset: PathBuf,
    /// Tasks to probe; None: every task of the dataset.
    pub tasks: Option<Vec<String>>,
    pub config: ProbeConfig,
    /// Probe an encoder pre-trained on videos of another render quality than the dataset's.
    pub allow_render_quality_mismatch: bool,
}

/// The encoder probed, as `probe.json` records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedEncoder {
    /// The export file's path as given, or `random`.
    pub source: String,
    /// The export's sha256, or `random:<seed>` (as `lfs eval` records it).
    pub id: String,
    /// The render quality of its pre-training videos, when known.
    pub render_quality: Option<RenderQuality>,
    /// The pre-training method and update the export was made at (`lfs.method`, `lfs.step`).
    pub method: Option<String>,
    pub step: Option<u64>,
}

/// The dataset probed on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedDataset {
    pub path: String,
    /// [`Dataset::id`]: a content id over its episodes.
    pub id: String,
    pub render_quality: Option<RenderQuality>,
}

/// `probe.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub encoder: ProbedEncoder,
    pub dataset: ProbedDataset,
    pub config: ProbeConfig,
    pub tasks: Vec<TaskProbe>,
    pub lfs_version: String,
    /// Wall-clock seconds of the whole probe, decoding included.
    pub seconds: f64,
}

/// Progress, for a bar or a log.
#[derive(Debug)]
pub enum ProbeEvent<'a> {
    /// Before the first task: the rows every task will encode, in all.
    Started {
        tasks: usize,
        rows: u64,
    },
    /// A task's episodes are decoded and its rows about to be encoded.
    TaskStarted {
        task: &'a str,
        episodes: usize,
    },
    /// Rows encoded.
    Rows(usize),
    TaskDone(&'a TaskProbe),
}

/// Probes `run.encoder` on every chosen task of `run.dataset`.
pub fn probe_dataset(run: &ProbeRun, on_event: &mut dyn FnMut(ProbeEvent)) -> Result<ProbeReport> {
    let start = Instant::now();
    let what = run.dataset.display().to_string();
    let dataset = Dataset::open(&run.dataset)?;
    if !dataset.has_state_columns() {
        return Err(Error::shard(
            &run.dataset,
            "has no recorded state to probe: record a probe set with `make probe-set` (or `lfs collect`, then \
             `lfs ingest`); videos from elsewhere carry no state",
        ));
    }
    let (features, encoder) = load_encoder(run)?;
    check_render_quality(&encoder, dataset.meta.render_quality, &run.dataset, run)?;
    let tasks = chosen_tasks(&dataset, run.tasks.as_deref(), &what)?;
    if let Some(task) = tasks.iter().find(|t| dataset.state_names(t).is_none()) {
        return Err(Error::shard(
            &run.dataset,
            format!("task {task} has no recorded state (its videos did not come from `lfs collect`)"),
        ));
    }
    let cfg = &run.config;
    // Every task is split before any is encoded: a task with too few episodes fails at once.
    let splits = tasks
        .iter()
        .map(|t| split_episodes(&dataset.episodes, t, &cfg.split, &what).map(|s| (t, s)))
        .collect::<Result<Vec<_>>>()?;
    let rows: u64 = splits
        .iter()
        .flat_map(|(_, s)| s.train.iter().chain(&s.test))
        .map(|r| rows_of(r, cfg.split.frame_stride))
        .sum();
    on_event(ProbeEvent::Started {
        tasks: tasks.len(),
        rows,
    });
    let mut probes = Vec::with_capacity(tasks.len());
    for (task, split) in splits {
        on_event(ProbeEvent::TaskStarted {
            task,
            episodes: split.train.len() + split.test.len(),
        });
        let rows = ProbeSplit::new(
            task,
            &load_episodes(&dataset, &split.train)?,
            &load_episodes(&dataset, &split.test)?,
            cfg.split.frame_stride,
            &what,
        )?;
        let probe = probe_split(&features, &rows, cfg, &mut |n| on_event(ProbeEvent::Rows(n)))?;
        on_event(ProbeEvent::TaskDone(&probe));
        probes.push(probe);
    }
    Ok(ProbeReport {
        encoder,
        dataset: ProbedDataset {
            path: what,
            id: dataset.id(),
            render_quality: dataset.meta.render_quality,
        },
        config: cfg.clone(),
        tasks: probes,
        lfs_version: env!("CARGO_PKG_VERSION").to_string(),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Rows the probe takes from an episode of `record.length` frames.
fn rows_of(record: &EpisodeRecord, stride: usize) -> u64 {
    let frames = record.length.max(0) as usize;
    frames.saturating_sub(FIRST_FRAME).div_ceil(stride.max(1)) as u64
}

/// The encoder's features and what `probe.json` records of it.
fn load_encoder(run: &ProbeRun) -> Result<(FrozenFeatures, ProbedEncoder)> {
    let features = FrozenFeatures::new(&run.encoder, run.random_seed, &Backend::default())?;
    let (source, method, step) = match &run.encoder {
        EncoderChoice::Random => ("random".to_string(), None, None),
        EncoderChoice::Exported(path) => {
            let export = ExportFile::read(path)?;
            let meta = |key: &str| export.file.metadata.get(key).cloned();
            (
                path.display().to_string(),
                meta("lfs.method"),
                meta("lfs.step").and_then(|s| s.parse().ok()),
            )
        }
    };
    let provenance = features.provenance().clone();
    Ok((
        features,
        ProbedEncoder {
            source,
            id: provenance.id,
            render_quality: provenance.render_quality,
            method,
            step,
        },
    ))
}

/// An encoder pre-trained on videos of one render quality is not probed on frames of another
/// unless asked (as `lfs eval` refuses to render at another quality).
fn check_render_quality(
    encoder: &ProbedEncoder,
    dataset: Option<RenderQuality>,
    path: &Path,
    run: &ProbeRun,
) -> Result<()> {
    match (encoder.render_quality, dataset) {
        (Some(trained), Some(probed)) if trained != probed && !run.allow_render_quality_mismatch => {
            Err(Error::Config(format!(
                "the encoder {} was pre-trained on videos rendered at quality {:?}, and the dataset {} was \
                 rendered at {:?}; probe it on a probe set of its own quality (make probe-set \
                 PROBE_RENDER_QUALITY={}), or pass --allow-render-quality-mismatch",
                encoder.source,
                trained.name(),
                path.display(),
                probed.name(),
                trained.name()
            )))
        }
        _ => Ok(()),
    }
}

/// The tasks asked for, each checked to be in the dataset; all of them when none are asked for.
fn chosen_tasks(dataset: &Dataset, asked: Option<&[String]>, what: &str) -> Result<Vec<String>> {
    match asked {
        None => Ok(dataset.tasks.clone()),
        Some(asked) => asked
            .iter()
            .map(|t| {
                if dataset.tasks.contains(t) {
                    Ok(t.clone())
                } else {
                    Err(Error::Config(format!(
                        "{what} has no task {t:?}; it has {}",
                        dataset.tasks.join(", ")
                    )))
                }
            })
            .collect(),
    }
}
