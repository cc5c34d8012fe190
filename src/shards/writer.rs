//! Appending episodes to a dataset, crash-safely.
//!
//! Commit protocol. Frames go to a data file under a hidden temporary name
//! (`data/chunk-XXX/.file-YYY.parquet.tmp`: no glob for `*.parquet` matches it). A *commit*
//! closes and syncs it, then rewrites this run's episodes file atomically, listing the new
//! episodes: that rename is the commit point. Only then is the data file renamed to its final
//! name. So a reader that globs `data/*/*.parquet` (pyarrow, DuckDB, LeRobot) never sees a row
//! the index does not list, however the writer dies. A kill between the two renames leaves
//! indexed episodes whose data file is still *staged* under the temporary name: our reader
//! reads it there, and the next [`DatasetWriter::open`] (under the ingest lock, before
//! anything else) finishes the rename. `tasks.parquet`, `stats.json`, `lfs.json` and
//! `info.json` are derived from the episodes tables and rewritten after a commit (and at
//! open). Temporary files no episode refers to, and data files of older versions that no
//! episodes table references, are deleted at open; the sources they held are ingested again.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{
    ArrayRef, BinaryArray, FixedSizeBinaryArray, Float32Array, Int64Array, RecordBatch, StringArray, StructArray,
};
use arrow_buffer::Buffer;
use arrow_schema::{DataType, SchemaRef};
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ExtendedColorType, ImageEncoder};
use parquet::arrow::ArrowWriter;
use serde_json::json;

use super::episodes::{write_episodes, EpisodeRecord, SourceInfo};
use super::files::{
    chunked_files, lock_dataset, publish_staged, read_all_episodes, read_lfs_meta, remove_temp_files, LOCK_FILE,
};
use super::layout::*;
use super::render_quality::render_quality_conflict;
use super::schema::{data_schema, image_columns, lerobot_features, state_type, StateFeature};
use super::state::EpisodeState;
use super::stats::FeatureStats;
use super::{tasks, writer_props};
use crate::env::RenderQuality;
use crate::fsutil::{self, FileLock};
use crate::video::Crop;
use crate::{Error, Result};

/// Encoded frames of one episode.
#[derive(Debug, Clone)]
pub enum EncodedFrames {
    /// One PNG per frame.
    Png(Vec<Vec<u8>>),
    /// (n, h, w, 3) uint8, contiguous.
    Raw(Vec<u8>),
}

impl EncodedFrames {
    pub fn len(&self, frame_len: usize) -> usize {
        match self {
            Self::Png(v) => v.len(),
            Self::Raw(v) => v.len() / frame_len.max(1),
        }
    }
}

/// Encode HWC RGB frames for the image column. PNG uses fast deflate with adaptive
/// filtering: measured on 84x84 DMControl-like frames, the Sub filter alone made shards 33%
/// larger and loading 10% slower (more to inflate).
pub fn encode_frames(frames: &[u8], width: u32, height: u32, codec: FrameCodec) -> Result<EncodedFrames> {
    let frame_len = (width * height * 3) as usize;
    match codec {
        FrameCodec::Raw => Ok(EncodedFrames::Raw(frames.to_vec())),
        FrameCodec::Png => {
            let pngs = frames
                .chunks_exact(frame_len)
                .map(|f| {
                    let mut buf = Vec::with_capacity(frame_len / 2);
                    PngEncoder::new_with_quality(&mut buf, CompressionType::Fast, FilterType::Adaptive)
                        .write_image(f, width, height, ExtendedColorType::Rgb8)
                        .map(|()| buf)
                })
                .collect::<Result<Vec<_>, _>>()
                // Encoding into memory fails only for frames that do not fit width × height.
                .map_err(|e| Error::Shape(format!("PNG encoding failed: {e}")))?;
            Ok(EncodedFrames::Png(pngs))
        }
    }
}

/// An episode's row identifiers in the dataset.
struct EpisodeRows {
    episode_index: i64,
    task_index: i64,
    /// 0..n.
    frame_index: Vec<i64>,
    /// The dataset's global row numbers.
    index: Vec<i64>,
}

/// An episode ready to be appended.
#[derive(Debug, Clone)]
pub struct NewEpisode {
    pub task: String,
    pub source: SourceInfo,
    /// From the `lfs collect` sidecar; None for other videos.
    pub render_quality: Option<RenderQuality>,
    pub sidecar: Option<String>,
    /// From the sidecar's `state_names` and `states`: one row per frame.
    pub state: Option<EpisodeState>,
    /// From the sidecar's `rewards`: one per agent step (frames − 1); frame t + 1 gets
    /// `rewards[t]`.
    pub rewards: Option<Vec<f32>>,
    pub timestamps: Vec<f32>,
    pub frames: EncodedFrames,
    /// Per-channel statistics of the frames, computed where they were decoded.
    pub image_stats: FeatureStats,
}

/// The settings a dataset is created with; an existing dataset must match them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterSettings {
    pub frame_codec: FrameCodec,
    pub width: u32,
    pub height: u32,
    pub crop: Crop,
    /// Every source resampled to this rate (`lfs ingest --fps`), or each at its own.
    pub fps: Option<u32>,
}

struct OpenDataFile {
    id: FileId,
    tmp: PathBuf,
    path: PathBuf,
    writer: ArrowWriter<File>,
}

/// Appends episodes to a new or existing dataset.
pub struct DatasetWriter {
    root: PathBuf,
    settings: WriterSettings,
    schema: SchemaRef,
    /// The render quality of the episodes that have one (they all share it).
    render_quality: Option<RenderQuality>,
    /// The data files have `observation.state` and `reward` (false for datasets made before).
    state_columns: bool,
    /// Task -> state names, of the tasks with state (recorded in lfs.json).
    state_names: BTreeMap<String, Vec<String>>,
    /// Episodes committed by earlier runs.
    earlier: Vec<EpisodeRecord>,
    /// This run's episodes, committed or in the open data file.
    run: Vec<EpisodeRecord>,
    run_meta_file: FileId,
    tasks: Vec<String>,
    open: Option<OpenDataFile>,
    next_data_file: FileId,
    next_episode: i64,
    next_index: i64,
    last_commit: Instant,
    /// Commit at least this often, so a crash loses little work.
    pub commit_every: Duration,
    _lock: FileLock,
}

/// The `observation.state` column of an `n`-frame episode: its rows, or n nulls.
fn state_column(state: Option<&EpisodeState>, n: usize) -> ArrayRef {
    let mut b = ListBuilder::new(Float32Builder::new()).with_field(match state_type() {
        DataType::List(field) => field,
        _ => unreachable!("the state column is a list"),
    });
    for t in 0..n {
        match state {
            Some(s) => {
                b.values().append_slice(s.row(t));
                b.append(true);
            }
            None => b.append(false),
        }
    }
    Arc::new(b.finish())
}

/// A list of state names for a message: the first few and how many.
fn brief_names(names: &[String]) -> String {
    const SHOWN: usize = 4;
    let head = names[..names.len().min(SHOWN)].join(", ");
    let more = if names.len() > SHOWN { ", …" } else { "" };
    format!("[{head}{more}] ({} values)", names.len())
}

/// The distinct frame rates of the episodes' sources (`source/fps`), increasing.
pub fn source_rates<'a>(records: impl IntoIterator<Item = &'a EpisodeRecord>) -> Vec<f64> {
    let mut rates: Vec<f64> = records.into_iter().map(|r| r.source.fps).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    rates
}

/// info.json's `fps`: the `--fps` rate; else the sources' one rate (an integer when it is one:
/// LeRobot's type; 12.5 stays 12.5); else, for sources at several rates, null, which LeRobot
/// cannot take for a rate (it reads one per dataset), so no reader is told a wrong one.
pub fn info_fps(resampled_to: Option<u32>, source_rates: &[f64]) -> serde_json::Value {
    match (resampled_to, source_rates) {
        (Some(n), _) => json!(n),
        (None, [rate]) if rate.fract() == 0.0 => json!(*rate as i64),
        (None, [rate]) => json!(rate),
        _ => serde_json::Value::Null,
    }
}

/// Refuses to scatter a dataset's files into a folder that holds something else.
fn refuse_foreign_folder(root: &Path) -> Result<()> {
    let foreign: Vec<String> = fs::read_dir(root)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| !matches!(n.as_str(), "data" | "meta" | LOCK_FILE))
        .collect();
    match foreign.is_empty() {
        true => Ok(()),
        false => Err(Error::shard(
            root,
            format!(
                "exists and is not an lfs dataset (no {LFS_META_PATH}; holds {}); choose a new or empty folder",
                foreign.join(", ")
            ),
        )),
    }
}

/// Refuses a run whose frames (rate, codec, size, crop) differ from the dataset's.
fn check_same_frames(root: &Path, meta: &LfsMeta, settings: &WriterSettings) -> Result<()> {
    if meta.fps != settings.fps {
        let rate = |fps: Option<u32>| match fps {
            Some(n) => format!("frames resampled to {n} fps (--fps {n})"),
            None => "each source's frames at its own rate (no --fps)".to_string(),
        };
        return Err(Error::Config(format!(
            "{} holds {}; this run asks for {}: ingest into another --out",
            root.display(),
            rate(meta.fps),
            rate(settings.fps)
        )));
    }
    let have = (meta.frame_codec, meta.width, meta.height, meta.crop);
    let want = (settings.frame_codec, settings.width, settings.height, settings.crop);
    if have != want {
        return Err(Error::Config(format!(
            "{} holds {}x{} {:?} frames (crop {:?}); this run asks for {}x{} {:?} (crop {:?}): ingest into another --out",
            root.display(), meta.width, meta.height, meta.frame_codec, meta.crop,
            settings.width, settings.height, settings.frame_codec, settings.crop
        )));
    }
    Ok(())
}

/// What an interrupted run left: staged data files the index lists get their final names;
/// temporary files, and data files no committed episode points at (a run died before
/// committing), are deleted.
fn finish_interrupted_run(root: &Path, earlier: &[EpisodeRecord]) -> Result<()> {
    publish_staged(root, earlier)?;
    remove_temp_files(root)?;
    let referenced: std::collections::HashSet<FileId> = earlier.iter().map(|r| r.data_file).collect();
    for (id, path) in &chunked_files(&root.join(DATA_DIR))? {
        if !referenced.contains(id) {
            fs::remove_file(path)?;
        }
    }
    Ok(())
}

impl DatasetWriter {
    /// Open the dataset at `root` for appending, creating it if needed. Cleans up what an
    /// interrupted run left behind.
    pub fn open(root: &Path, settings: WriterSettings) -> Result<Self> {
        fs::create_dir_all(root)?;
        let existing = read_lfs_meta(root)?;
        if existing.is_none() {
            refuse_foreign_folder(root)?;
        }
        let lock = lock_dataset(root)?;
        if let Some(meta) = &existing {
            check_same_frames(root, meta, &settings)?;
        }

        let earlier = read_all_episodes(root)?;
        finish_interrupted_run(root, &earlier)?;
        let next_data_file = earlier
            .iter()
            .map(|r| r.data_file)
            .max()
            .map_or(FileId { chunk: 0, file: 0 }, FileId::next);
        let run_meta_file = chunked_files(&root.join(EPISODES_DIR))?
            .last()
            .map_or(FileId { chunk: 0, file: 0 }, |(id, _)| id.next());
        let mut tasks = Vec::new();
        for r in &earlier {
            if !tasks.contains(&r.task) {
                tasks.push(r.task.clone());
            }
        }
        // Keep the task_index already on disk when there is one.
        if let Ok(on_disk) = tasks::read_tasks(&root.join(TASKS_PATH)) {
            if tasks.iter().all(|t| on_disk.contains(t)) {
                tasks = on_disk;
            }
        }
        let frame_len = (settings.width * settings.height * 3) as usize;
        // A new dataset gets the state columns; an existing one keeps the schema it has, so all
        // its data files share one.
        let state_columns = existing.as_ref().is_none_or(|m| m.state_columns);
        let (render_quality, state_names) =
            existing.map_or_else(Default::default, |m| (m.render_quality, m.state_names));
        let w = Self {
            root: root.to_path_buf(),
            settings,
            schema: data_schema(settings.frame_codec, frame_len, state_columns),
            render_quality,
            state_columns,
            state_names,
            next_episode: earlier.last().map_or(0, |r| r.episode_index + 1),
            next_index: earlier.iter().map(|r| r.dataset_to_index).max().unwrap_or(0),
            earlier,
            run: Vec::new(),
            run_meta_file,
            tasks,
            open: None,
            next_data_file,
            last_commit: Instant::now(),
            commit_every: Duration::from_secs(60),
            _lock: lock,
        };
        if !w.earlier.is_empty() {
            // A crash between the commit point and the derived files leaves them stale.
            w.write_derived()?;
        }
        Ok(w)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Episodes committed before this run.
    pub fn earlier(&self) -> &[EpisodeRecord] {
        &self.earlier
    }

    /// Episodes appended by this run so far.
    pub fn appended(&self) -> &[EpisodeRecord] {
        &self.run
    }

    /// Why an episode of render quality `quality` cannot join this dataset, if it cannot.
    pub fn render_quality_conflict(&self, quality: Option<RenderQuality>) -> Option<String> {
        render_quality_conflict(self.render_quality, quality)
    }

    /// Whether the data files have the `observation.state` and `reward` columns. Without them
    /// (a dataset an older lfs made), appended episodes' state and rewards are not stored.
    pub fn has_state_columns(&self) -> bool {
        self.state_columns
    }

    /// Why an episode of `task` with `state` cannot join this dataset, if it cannot: the
    /// task's episodes must agree on the state names.
    pub fn state_names_conflict(&self, task: &str, state: Option<&EpisodeState>) -> Option<String> {
        let (have, new) = (self.state_names.get(task)?, &state?.names);
        (have != new).then(|| {
            format!(
                "state_names {} differ from those of task {task:?} in this dataset {}; a task's episodes must record the same state",
                brief_names(new),
                brief_names(have)
            )
        })
    }

    fn frame_len(&self) -> usize {
        (self.settings.width * self.settings.height * 3) as usize
    }

    /// Append one episode (its frames become rows `next_index..`). Returns its episode index.
    pub fn append(&mut self, ep: NewEpisode) -> Result<i64> {
        let n = self.check(&ep)?;
        if self.render_quality.is_none() {
            self.render_quality = ep.render_quality;
        }
        let rows = EpisodeRows {
            episode_index: self.next_episode,
            task_index: self.task_index(&ep.task),
            frame_index: (0..n as i64).collect(),
            index: (self.next_index..self.next_index + n as i64).collect(),
        };
        let batch = RecordBatch::try_new(self.schema.clone(), self.columns(&ep, &rows)?)?;

        let data_file = self.ensure_open()?;
        let open = self.open.as_mut().expect("opened just above");
        open.writer.write(&batch)?;
        // One episode per row group: a reader can fetch an episode with one row-group read.
        open.writer.flush()?;

        let stats = self.stats(&ep, &rows);
        if let (true, Some(state)) = (self.state_columns, &ep.state) {
            self.state_names.insert(ep.task.clone(), state.names.clone());
        }
        let from = self.next_index;
        self.run.push(EpisodeRecord {
            episode_index: rows.episode_index,
            task: ep.task,
            length: n as i64,
            data_file,
            dataset_from_index: from,
            dataset_to_index: from + n as i64,
            meta_file: self.run_meta_file,
            source: ep.source,
            render_quality: ep.render_quality,
            sidecar: ep.sidecar,
            stats,
        });
        self.next_episode += 1;
        self.next_index += n as i64;

        let full = self
            .open
            .as_ref()
            .is_some_and(|o| o.writer.bytes_written() as u64 >= DATA_FILE_SIZE_MB << 20);
        if full || self.last_commit.elapsed() >= self.commit_every {
            self.commit()?;
        }
        Ok(rows.episode_index)
    }

    /// The episode's frame count, or why it cannot join this dataset (naming its source).
    fn check(&self, ep: &NewEpisode) -> Result<usize> {
        let n = ep.frames.len(self.frame_len());
        if n == 0 || n != ep.timestamps.len() {
            return Err(Error::shard(
                &ep.source.path,
                format!("{} frames but {} timestamps", n, ep.timestamps.len()),
            ));
        }
        if let Some(reason) = self.render_quality_conflict(ep.render_quality) {
            return Err(Error::shard(&ep.source.path, reason));
        }
        if let Some(why) = super::state::count_mismatch(ep.state.as_ref(), ep.rewards.as_deref(), n) {
            return Err(Error::shard(&ep.source.path, why));
        }
        if let Some(reason) = self.state_names_conflict(&ep.task, ep.state.as_ref()) {
            return Err(Error::shard(&ep.source.path, reason));
        }
        Ok(n)
    }

    /// `task`'s index, added to the task list when new.
    fn task_index(&mut self, task: &str) -> i64 {
        let i = match self.tasks.iter().position(|t| t == task) {
            Some(i) => i,
            None => {
                self.tasks.push(task.to_string());
                self.tasks.len() - 1
            }
        };
        i as i64
    }

    /// The episode's rows as the schema's columns (n rows each).
    fn columns(&self, ep: &NewEpisode, rows: &EpisodeRows) -> Result<Vec<ArrayRef>> {
        let n = rows.frame_index.len();
        let image: ArrayRef = match &ep.frames {
            EncodedFrames::Png(pngs) => {
                let bytes = BinaryArray::from_iter_values(pngs.iter());
                let paths = StringArray::new_null(n);
                let DataType::Struct(fields) = self.schema.field(0).data_type().clone() else {
                    unreachable!("the PNG image column is a struct")
                };
                Arc::new(StructArray::new(fields, vec![Arc::new(bytes), Arc::new(paths)], None))
            }
            EncodedFrames::Raw(raw) => Arc::new(FixedSizeBinaryArray::try_new(
                self.frame_len() as i32,
                Buffer::from_vec(raw.clone()),
                None,
            )?),
        };
        let mut columns: Vec<ArrayRef> = vec![
            image,
            Arc::new(Float32Array::from(ep.timestamps.clone())),
            Arc::new(Int64Array::from(rows.frame_index.clone())),
            Arc::new(Int64Array::from(vec![rows.episode_index; n])),
            Arc::new(Int64Array::from(rows.index.clone())),
            Arc::new(Int64Array::from(vec![rows.task_index; n])),
        ];
        if self.state_columns {
            columns.push(state_column(ep.state.as_ref(), n));
            // Frame 0 has no step that led to it.
            let reward: Float32Array = match &ep.rewards {
                Some(r) => std::iter::once(None).chain(r.iter().copied().map(Some)).collect(),
                None => Float32Array::new_null(n),
            };
            columns.push(Arc::new(reward));
        }
        Ok(columns)
    }

    /// The episode's per-feature statistics (`meta/episodes`' `stats/…` columns).
    fn stats(&self, ep: &NewEpisode, rows: &EpisodeRows) -> Vec<(String, FeatureStats)> {
        let n = rows.frame_index.len();
        let as_f64 = |v: &[i64]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        let mut stats = vec![
            (IMAGE_KEY.to_string(), ep.image_stats.clone()),
            (
                "timestamp".into(),
                FeatureStats::of_scalars(ep.timestamps.iter().map(|&t| f64::from(t))),
            ),
            (
                "frame_index".into(),
                FeatureStats::of_scalars(as_f64(&rows.frame_index)),
            ),
            (
                "episode_index".into(),
                FeatureStats::of_scalars(vec![rows.episode_index as f64; n]),
            ),
            ("index".into(), FeatureStats::of_scalars(as_f64(&rows.index))),
            (
                "task_index".into(),
                FeatureStats::of_scalars(vec![rows.task_index as f64; n]),
            ),
        ];
        if self.state_columns {
            // Over the frames that have a reward (none for an episode without): count n − 1.
            let rewards = ep.rewards.iter().flatten().map(|&r| f64::from(r));
            stats.push((REWARD_KEY.to_string(), FeatureStats::of_scalars(rewards)));
        }
        stats
    }

    fn ensure_open(&mut self) -> Result<FileId> {
        if let Some(open) = &self.open {
            return Ok(open.id);
        }
        let id = self.next_data_file;
        self.next_data_file = id.next();
        let path = id.data_path(&self.root);
        fsutil::ensure_parent(&path)?;
        let tmp = fsutil::temp_path(&path);
        let file = File::create(&tmp)?;
        let props = writer_props(&image_columns(self.settings.frame_codec));
        let writer = ArrowWriter::try_new(file, self.schema.clone(), Some(props))?;
        self.open = Some(OpenDataFile { id, tmp, path, writer });
        Ok(id)
    }

    /// Make everything appended so far durable and visible: the data file is synced under its
    /// staged name, the episodes index lists it (the commit point), then it is renamed into
    /// place. No glob reader ever sees rows the index does not list.
    pub fn commit(&mut self) -> Result<()> {
        let staged = match self.open.take() {
            Some(open) => {
                open.writer.close()?;
                File::open(&open.tmp)?.sync_all()?;
                Some((open.tmp, open.path))
            }
            None => None,
        };
        if !self.run.is_empty() {
            // lfs.json first: a reader needs it to decode the frames the episodes point at.
            self.write_lfs_meta()?;
            write_episodes(&self.run_meta_file.episodes_path(&self.root), &self.run)?;
        }
        if let Some((tmp, path)) = staged {
            fs::rename(&tmp, &path)?;
        }
        if !self.run.is_empty() {
            self.write_derived()?;
        }
        self.last_commit = Instant::now();
        Ok(())
    }

    /// Commit and release the dataset.
    pub fn finish(mut self) -> Result<()> {
        self.commit()
    }

    fn write_lfs_meta(&self) -> Result<()> {
        let meta = LfsMeta {
            lfs_dataset_version: LFS_DATASET_VERSION,
            frame_codec: self.settings.frame_codec,
            width: self.settings.width,
            height: self.settings.height,
            crop: self.settings.crop,
            render_quality: self.render_quality,
            state_columns: self.state_columns,
            state_names: self.state_names.clone(),
            fps: self.settings.fps,
        };
        fsutil::write_bytes_atomic(&self.root.join(LFS_META_PATH), &serde_json::to_vec_pretty(&meta)?)?;
        Ok(())
    }

    /// What info.json says about `observation.state`: its width when every task with state
    /// has the same, its names when they all have the same; None without the state columns.
    fn state_feature(&self) -> Option<StateFeature<'_>> {
        if !self.state_columns {
            return None;
        }
        let mut tasks = self.state_names.values();
        let Some(first) = tasks.next() else {
            return Some(StateFeature { dim: None, names: None });
        };
        let rest: Vec<&Vec<String>> = tasks.collect();
        let same_width = rest.iter().all(|n| n.len() == first.len());
        let same_names = rest.iter().all(|n| *n == first);
        Some(StateFeature {
            dim: same_width.then_some(first.len()),
            names: same_names.then_some(first.as_slice()),
        })
    }

    /// tasks.parquet, stats.json and info.json, from the committed episodes.
    fn write_derived(&self) -> Result<()> {
        let committed: Vec<&EpisodeRecord> = self.earlier.iter().chain(self.run.iter()).collect();
        tasks::write_tasks(&self.root.join(TASKS_PATH), &self.tasks)?;

        // By key, over the episodes with samples of it: episodes without a reward (count 0)
        // add nothing, and a feature no episode has a sample of is left out.
        let mut stats = serde_json::Map::new();
        let mut keys: Vec<&str> = Vec::new();
        for (key, _) in committed.iter().flat_map(|r| &r.stats) {
            if !keys.contains(&key.as_str()) {
                keys.push(key);
            }
        }
        for key in keys {
            let parts: Vec<&FeatureStats> = committed
                .iter()
                .flat_map(|r| &r.stats)
                .filter(|(k, s)| k == key && s.count > 0)
                .map(|(_, s)| s)
                .collect();
            if let Some(merged) = FeatureStats::merge(&parts) {
                stats.insert(key.to_string(), merged.to_json(key == IMAGE_KEY));
            }
        }
        fsutil::write_bytes_atomic(&self.root.join(STATS_PATH), &serde_json::to_vec_pretty(&stats)?)?;

        // LeRobot reads one rate per dataset, so info.json never claims one the frames do not
        // have: the --fps rate, else the sources' rate when they share one, else null.
        let fps = info_fps(self.settings.fps, &source_rates(committed.iter().copied()));
        let total_frames: i64 = committed.iter().map(|r| r.length).sum();
        let info = json!({
            "codebase_version": CODEBASE_VERSION,
            "robot_type": null,
            "total_episodes": committed.len(),
            "total_frames": total_frames,
            "total_tasks": self.tasks.len(),
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": DATA_FILE_SIZE_MB,
            "video_files_size_in_mb": 500,
            "fps": fps,
            "splits": {"train": format!("0:{}", committed.len())},
            "data_path": DATA_PATH_TEMPLATE,
            "video_path": null,
            "features": lerobot_features(
                self.settings.frame_codec,
                self.settings.width,
                self.settings.height,
                self.state_feature(),
            ),
        });
        fsutil::write_bytes_atomic(&self.root.join(INFO_PATH), &serde_json::to_vec_pretty(&info)?)?;
        Ok(())
    }
}
