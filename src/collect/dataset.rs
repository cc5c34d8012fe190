//! `lfs collect --dataset`: episodes straight into a dataset of Parquet frame shards, as
//! `lfs ingest` makes of the videos `lfs collect --out` writes (issue 75): the same frames (the
//! video path is lossless), task labels, sidecar facts (kept verbatim in the `sidecar` column,
//! `codec` saying no video was made), state and reward columns and `lfs.json`, with ingest's
//! defaults (84×84 PNG frames, each episode at its own rate), and no FFmpeg. Episodes are
//! encoded and appended on a thread of their own as they finish (so their indices follow the
//! workers' order) and committed at least every [`COMMIT_EVERY`]: a killed run loses at most
//! that much, and a second run finds the committed episodes by their sidecars and records the
//! rest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::{check_settings, parse_sidecar, CollectConfig, EpisodeSidecar, Sink, SOURCE};
use crate::env::Task;
use crate::observation::FRAME_SIZE;
use crate::shards::{
    encode_frames, DatasetWriter, EpisodeRecord, FeatureStats, FrameCodec, NewEpisode, SourceInfo, WriterSettings,
};
use crate::video::Crop;
use crate::{Error, Result};

/// The sidecar's `codec` for an episode collected straight into a dataset: no video was encoded.
pub const NO_VIDEO: &str = "none (lfs collect --dataset: no video)";

/// How often finished episodes are committed at the latest (`lfs ingest`'s default).
pub const COMMIT_EVERY: Duration = Duration::from_secs(60);

/// An open dataset, the episodes earlier runs committed to it by (task, episode), and the
/// thread that encodes and appends finished episodes (so the workers step on meanwhile).
pub struct DatasetSink {
    config: CollectConfig,
    earlier: BTreeMap<(Task, usize), (i64, EpisodeSidecar)>,
    /// Finished episodes to the writer thread; None once it has stopped.
    episodes: Option<SyncSender<Finished>>,
    writer: Option<JoinHandle<Result<()>>>,
}

/// A finished episode on its way to the writer thread.
struct Finished {
    sidecar: EpisodeSidecar,
    /// (84, 84, 3) RGB frames, the reset frame first.
    frames: Vec<Vec<u8>>,
}

impl DatasetSink {
    /// Creates the dataset or opens it to go on. A dataset holding an episode `lfs collect` did
    /// not record (another tool's, or a user's videos ingested) is refused: a second run could
    /// not tell which episodes it holds.
    pub fn open(config: &CollectConfig) -> Result<Self> {
        let settings = WriterSettings {
            frame_codec: FrameCodec::Png,
            width: FRAME_SIZE as u32,
            height: FRAME_SIZE as u32,
            crop: Crop::Center,
            fps: None,
        };
        let mut writer = DatasetWriter::open(&config.out_dir, settings)?;
        writer.commit_every = COMMIT_EVERY;
        let mut earlier = BTreeMap::new();
        for record in writer.earlier() {
            let sidecar = collected_sidecar(record).ok_or_else(|| {
                Error::Config(format!(
                    "{}: episode {} ({}) was not recorded by lfs collect; collect into another --dataset",
                    config.out_dir.display(),
                    record.episode_index,
                    record.source.path
                ))
            })?;
            earlier.insert((sidecar.task, sidecar.episode), (record.episode_index, sidecar));
        }
        // A few episodes in flight at most: the workers wait rather than memory grow.
        let (episodes, finished) = sync_channel::<Finished>(4);
        let root = config.out_dir.clone();
        let thread = std::thread::Builder::new()
            .name("collect-dataset".into())
            .spawn(move || -> Result<()> {
                for episode in finished {
                    append(&mut writer, &root, episode)?;
                }
                writer.finish()
            })
            .map_err(|e| Error::Config(format!("starting the dataset writer thread: {e}")))?;
        Ok(Self {
            config: config.clone(),
            earlier,
            episodes: Some(episodes),
            writer: Some(thread),
        })
    }

    /// Stops the writer thread once it has appended what it was sent and committed: its result.
    fn stop(&mut self) -> Result<()> {
        drop(self.episodes.take());
        match self.writer.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(Error::Config("the dataset writer thread panicked".into()))),
            None => Ok(()),
        }
    }
}

/// Appends the episode as `lfs ingest` appends a collected video: its sidecar parsed as ingest
/// parses one found beside a video.
fn append(writer: &mut DatasetWriter, root: &Path, Finished { sidecar, frames }: Finished) -> Result<()> {
    let name = format!("{}/{:05}", sidecar.task.name(), sidecar.episode);
    let found = parse_sidecar(sidecar.to_json()?, root.join(&name))?;
    let n = frames.len();
    // (n, 84, 84, 3) RGB, the frames in order.
    let rgb: Vec<u8> = frames.concat();
    if rgb.len() != n * FRAME_SIZE * FRAME_SIZE * 3 {
        return Err(Error::Shape(format!(
            "{name}: {} bytes for {n} frames of {FRAME_SIZE}x{FRAME_SIZE} RGB",
            rgb.len()
        )));
    }
    if let Some(reason) = writer.render_quality_conflict(found.render_quality) {
        return Err(Error::Config(format!("{}: {reason}", root.display())));
    }
    if let Some(reason) = writer.state_names_conflict(sidecar.task.name(), found.state.as_ref()) {
        return Err(Error::Config(format!("{}: {reason}", root.display())));
    }
    let episode = NewEpisode {
        task: sidecar.task.name().to_string(),
        source: SourceInfo {
            // No file: the episode's place in the collect run, under the dataset.
            path: root.join(&name).to_string_lossy().into_owned(),
            size_bytes: rgb.len() as i64,
            mtime_ns: 0,
            sha256: hex::encode(Sha256::digest(&rgb)),
            width: FRAME_SIZE as i64,
            height: FRAME_SIZE as i64,
            fps: 1.0 / sidecar.frame_seconds,
            codec: NO_VIDEO.to_string(),
            rotation: 0,
        },
        render_quality: found.render_quality,
        sidecar: Some(found.json),
        state: found.state,
        rewards: found.rewards,
        // Frame k at k frame intervals, as the lossless video's timestamps are.
        timestamps: (0..n).map(|k| (k as f64 * sidecar.frame_seconds) as f32).collect(),
        frames: encode_frames(&rgb, FRAME_SIZE as u32, FRAME_SIZE as u32, FrameCodec::Png)?,
        image_stats: FeatureStats::of_rgb_frames(&rgb, n),
    };
    writer.append(episode)?;
    Ok(())
}

/// The `lfs collect` sidecar of a dataset episode, if it has one.
fn collected_sidecar(record: &EpisodeRecord) -> Option<EpisodeSidecar> {
    let sidecar: EpisodeSidecar = serde_json::from_str(record.sidecar.as_deref()?).ok()?;
    (sidecar.source == SOURCE).then_some(sidecar)
}

impl Sink for DatasetSink {
    fn is_complete(&self, task: Task, episode: usize) -> Result<bool> {
        let Some((index, sidecar)) = self.earlier.get(&(task, episode)) else {
            return Ok(false);
        };
        let what = format!("{} (dataset episode {index})", self.config.out_dir.display());
        check_settings(&self.config, task, sidecar, &what)?;
        Ok(true)
    }

    fn codec(&self) -> &'static str {
        NO_VIDEO
    }

    /// Hands the episode to the writer thread (which appends it as `lfs ingest` appends a
    /// collected video); a writer that has stopped on an error gives that error here.
    fn write(&mut self, sidecar: EpisodeSidecar, frames: Vec<Vec<u8>>) -> Result<PathBuf> {
        let sent = match &self.episodes {
            Some(episodes) => episodes.send(Finished { sidecar, frames }).is_ok(),
            None => false,
        };
        if !sent {
            self.stop()?;
            return Err(Error::Config(format!(
                "{}: the dataset writer has stopped",
                self.config.out_dir.display()
            )));
        }
        Ok(self.config.out_dir.clone())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.stop()
    }
}
