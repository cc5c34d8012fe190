//! Loading an ingested dataset into memory as contiguous uint8 frame arrays (the trainer's
//! start-up path: episodes are read in parallel, one Parquet row-group range each).

use std::path::{Path, PathBuf};

use arrow_array::{
    Array, BinaryArray, FixedSizeBinaryArray, Float32Array, Int64Array, ListArray, RecordBatch, StructArray,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;
use parquet::arrow::ProjectionMask;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::episodes::EpisodeRecord;
use super::files::{committed_data_path, read_all_episodes, read_lfs_meta};
use super::layout::{FrameCodec, LfsMeta, IMAGE_KEY, LFS_META_PATH, REWARD_KEY, STATE_KEY, TASKS_PATH};
use super::open_parquet;
use super::state::EpisodeState;
use super::tasks::read_tasks;
use crate::env::RenderQuality;
use crate::observation::{hwc_to_chw, StoredFrames};
use crate::{Error, Result};

/// One episode's frames, decoded, channel-first per frame.
#[derive(Debug, Clone)]
pub struct Episode {
    pub episode_index: u64,
    pub task: String,
    pub task_index: u32,
    /// From the `lfs collect` sidecar; None for other videos.
    pub render_quality: Option<RenderQuality>,
    pub num_frames: usize,
    pub height: usize,
    pub width: usize,
    /// (num_frames, 3, height, width), uint8 RGB.
    pub frames: Vec<u8>,
    /// The state at every frame (`observation.state`), named by the task's `state_names`; None
    /// for an episode recorded without state (or in a dataset without state columns).
    pub state: Option<EpisodeState>,
    /// (num_frames,) the reward of the agent step that led to each frame (`reward`); frame 0
    /// has none and holds NaN. None for an episode without rewards (and one of a single frame).
    pub rewards: Option<Vec<f32>>,
}

impl Episode {
    /// Frame `t` as (3, height, width) uint8.
    pub fn frame(&self, t: usize) -> &[u8] {
        let n = 3 * self.height * self.width;
        &self.frames[t * n..(t + 1) * n]
    }
}

impl StoredFrames for Episode {
    fn frame(&self, t: usize) -> &[u8] {
        Episode::frame(self, t)
    }
}

/// An ingested dataset on disk: its settings, tasks and episode table.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub root: PathBuf,
    pub meta: LfsMeta,
    pub tasks: Vec<String>,
    pub episodes: Vec<EpisodeRecord>,
}

/// A reader of the columns lfs reads from the data file `path` (the image's bytes, not its path),
/// over only the row groups that overlap rows [offset, offset + n), and how many rows of its
/// first batch come before `offset`.
fn episode_rows(path: &Path, offset: usize, n: usize) -> Result<(ParquetRecordBatchReader, usize)> {
    let builder = open_parquet(path)?;
    let parquet_schema = builder.parquet_schema();
    let wanted: Vec<usize> = parquet_schema
        .columns()
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            let parts = c.path().parts();
            parts[0] == "frame_index"
                || parts[0] == "episode_index"
                || parts[0] == STATE_KEY
                || parts[0] == REWARD_KEY
                || (parts[0] == IMAGE_KEY && parts.last().is_some_and(|p| p != "path"))
        })
        .map(|(i, _)| i)
        .collect();
    let mask = ProjectionMask::leaves(parquet_schema, wanted);
    let mut groups = Vec::new();
    let mut first_row = None;
    let mut row = 0usize;
    for (i, rg) in builder.metadata().row_groups().iter().enumerate() {
        let rows = rg.num_rows() as usize;
        if row + rows > offset && row < offset + n {
            groups.push(i);
            first_row.get_or_insert(row);
        }
        row += rows;
    }
    let skip = offset - first_row.unwrap_or(offset);
    Ok((builder.with_projection(mask).with_row_groups(groups).build()?, skip))
}

impl Dataset {
    /// Read the dataset's metadata (not its frames).
    pub fn open(root: &Path) -> Result<Self> {
        let meta = read_lfs_meta(root)?.ok_or_else(|| {
            Error::shard(
                root,
                format!("not an lfs dataset: {LFS_META_PATH} is missing (run `lfs ingest` first)"),
            )
        })?;
        let episodes = read_all_episodes(root)?;
        let tasks = if episodes.is_empty() {
            Vec::new()
        } else {
            read_tasks(&root.join(TASKS_PATH))?
        };
        for r in &episodes {
            if !tasks.contains(&r.task) {
                return Err(Error::shard(
                    root.join(TASKS_PATH),
                    format!("task {:?} of episode {} is not listed", r.task, r.episode_index),
                ));
            }
        }
        Ok(Self {
            root: root.to_path_buf(),
            meta,
            tasks,
            episodes,
        })
    }

    pub fn num_frames(&self) -> u64 {
        self.episodes.iter().map(|r| r.length as u64).sum()
    }

    /// Whether the data files have the `observation.state` and `reward` columns (datasets an
    /// older lfs ingested do not; `state_columns` in lfs.json).
    pub fn has_state_columns(&self) -> bool {
        self.meta.state_columns
    }

    /// Names of `task`'s state values, if its episodes carry state.
    pub fn state_names(&self, task: &str) -> Option<&[String]> {
        self.meta.state_names.get(task).map(Vec::as_slice)
    }

    /// An error, for a consumer that needs state, when no episode of the dataset has any: it
    /// says whether the dataset lacks the columns or its videos came without state.
    pub fn require_state(&self) -> Result<()> {
        let version = env!("CARGO_PKG_VERSION");
        if !self.meta.state_columns {
            return Err(Error::shard(
                &self.root,
                format!(
                    "dataset has no state columns: an lfs older than the state columns ingested it ({LFS_META_PATH} \
                     has no `state_columns`); ingest its videos again into a new dataset with this lfs ({version})"
                ),
            ));
        }
        if self.meta.state_names.is_empty() {
            return Err(Error::shard(
                &self.root,
                "dataset has no state: none of its episodes came with a sidecar carrying `states` (recorded by an \
                 `lfs collect` that records state)",
            ));
        }
        Ok(())
    }

    /// A content id for provenance: SHA-256 (first 16 hex digits) over the frame settings and
    /// every episode's source hash, in episode order.
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        h.update(format!(
            "{:?} {}x{} {:?}\n",
            self.meta.frame_codec, self.meta.width, self.meta.height, self.meta.crop
        ));
        for r in &self.episodes {
            h.update(format!("{} {} {}\n", r.episode_index, r.task, r.source.sha256));
        }
        hex::encode(&h.finalize()[..8])
    }

    /// Decode every episode into memory (parallel across episodes).
    pub fn load_episodes(&self) -> Result<Vec<Episode>> {
        self.episodes.par_iter().map(|r| self.load_episode(r)).collect()
    }

    /// Decode one episode.
    pub fn load_episode(&self, record: &EpisodeRecord) -> Result<Episode> {
        // A kill between an ingest's commit point and its data file's rename leaves the file
        // staged; it is complete, and the next ingest renames it.
        let path =
            committed_data_path(&self.root, record.data_file).unwrap_or_else(|| record.data_file.data_path(&self.root));
        let (w, h) = (self.meta.width as usize, self.meta.height as usize);
        let frame_len = w * h * 3;
        let n = record.length as usize;
        // Rows of this episode inside its file: files hold whole episodes, in order.
        let file_start = self
            .episodes
            .iter()
            .filter(|e| e.data_file == record.data_file)
            .map(|e| e.dataset_from_index)
            .min()
            .unwrap_or(record.dataset_from_index);
        let offset = (record.dataset_from_index - file_start) as usize;

        let (reader, skip) = episode_rows(&path, offset, n)?;

        let mut frames = vec![0u8; n * frame_len];
        let state_names = self.state_names(&record.task);
        let mut labels = LabelColumns::default();
        let mut seen = 0usize;
        let mut to_skip = skip;
        for batch in reader {
            let batch = batch.map_err(|e| Error::shard(&path, format!("corrupt data: {e}")))?;
            let start = to_skip.min(batch.num_rows());
            to_skip -= start;
            let take = (batch.num_rows() - start).min(n - seen);
            if take == 0 {
                continue;
            }
            let batch = batch.slice(start, take);
            self.check_rows(&batch, record, seen, &path)?;
            decode_frames(
                &batch,
                self.meta.frame_codec,
                w,
                h,
                &mut frames[seen * frame_len..(seen + take) * frame_len],
                &path,
            )?;
            labels.push(&batch, state_names.map(<[String]>::len), &path)?;
            seen += take;
        }
        if seen != n {
            return Err(Error::shard(
                &path,
                format!("episode {} has {seen} rows, its table says {n}", record.episode_index),
            ));
        }
        let (state, rewards) = labels.finish(state_names, n, record.episode_index, &path)?;
        Ok(Episode {
            episode_index: record.episode_index as u64,
            task: record.task.clone(),
            task_index: self.tasks.iter().position(|t| *t == record.task).unwrap_or(0) as u32,
            render_quality: record.render_quality,
            num_frames: n,
            height: h,
            width: w,
            frames,
            state,
            rewards,
        })
    }

    fn check_rows(&self, batch: &RecordBatch, record: &EpisodeRecord, first: usize, path: &Path) -> Result<()> {
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
                .ok_or_else(|| Error::shard(path, format!("missing int64 column {name:?}")))
        };
        let (ep, fi) = (col("episode_index")?, col("frame_index")?);
        for i in 0..batch.num_rows() {
            if ep.value(i) != record.episode_index || fi.value(i) != (first + i) as i64 {
                return Err(Error::shard(
                    path,
                    format!(
                        "row {} holds episode {} frame {}, expected episode {} frame {}",
                        record.dataset_from_index as usize + first + i,
                        ep.value(i),
                        fi.value(i),
                        record.episode_index,
                        first + i
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The `observation.state` and `reward` columns of an episode's rows, gathered batch by batch.
#[derive(Default)]
struct LabelColumns {
    /// The non-null state rows, row-major.
    state: Vec<f32>,
    state_rows: usize,
    null_state_rows: usize,
    /// One per row, NaN where null.
    rewards: Vec<f32>,
    any_reward: bool,
}

impl LabelColumns {
    /// Appends `batch`'s rows; state rows must be `dim` wide (the task's names in lfs.json).
    fn push(&mut self, batch: &RecordBatch, dim: Option<usize>, path: &Path) -> Result<()> {
        if let Some(column) = batch.column_by_name(STATE_KEY) {
            let list = column
                .as_any()
                .downcast_ref::<ListArray>()
                .ok_or_else(|| Error::shard(path, format!("column {STATE_KEY:?} is not a list")))?;
            for i in 0..list.len() {
                if list.is_null(i) {
                    self.null_state_rows += 1;
                    continue;
                }
                let row = list.value(i);
                let row = row
                    .as_any()
                    .downcast_ref::<Float32Array>()
                    .filter(|r| r.null_count() == 0)
                    .ok_or_else(|| Error::shard(path, format!("{STATE_KEY:?} rows must be lists of float32")))?;
                if dim != Some(row.len()) {
                    return Err(Error::shard(
                        path,
                        format!(
                            "a state row has {} values, {LFS_META_PATH} names {} for its task",
                            row.len(),
                            dim.unwrap_or(0)
                        ),
                    ));
                }
                self.state.extend_from_slice(row.values());
                self.state_rows += 1;
            }
        }
        if let Some(column) = batch.column_by_name(REWARD_KEY) {
            let rewards = column
                .as_any()
                .downcast_ref::<Float32Array>()
                .ok_or_else(|| Error::shard(path, format!("column {REWARD_KEY:?} is not float32")))?;
            self.any_reward |= rewards.null_count() < rewards.len();
            self.rewards.extend(rewards.iter().map(|r| r.unwrap_or(f32::NAN)));
        }
        Ok(())
    }

    /// The episode's state (all `n` rows or none) and rewards.
    fn finish(
        self,
        names: Option<&[String]>,
        n: usize,
        episode_index: i64,
        path: &Path,
    ) -> Result<(Option<EpisodeState>, Option<Vec<f32>>)> {
        let state = match (self.state_rows, names) {
            (0, _) => None,
            (rows, Some(names)) if rows == n && self.null_state_rows == 0 => Some(EpisodeState {
                names: names.to_vec(),
                values: self.state,
            }),
            (rows, _) => {
                return Err(Error::shard(
                    path,
                    format!("episode {episode_index} has state on {rows} of its {n} rows"),
                ))
            }
        };
        Ok((state, self.any_reward.then_some(self.rewards)))
    }
}

/// Decode the image column of `batch` into `dst`, channel-first: (rows, 3, h, w).
fn decode_frames(
    batch: &RecordBatch,
    codec: FrameCodec,
    w: usize,
    h: usize,
    dst: &mut [u8],
    path: &Path,
) -> Result<()> {
    let frame_len = w * h * 3;
    let column = batch
        .column_by_name(IMAGE_KEY)
        .ok_or_else(|| Error::shard(path, format!("missing column {IMAGE_KEY:?}")))?;
    for (i, out) in dst.chunks_exact_mut(frame_len).enumerate() {
        match codec {
            FrameCodec::Png => {
                let bytes = column
                    .as_any()
                    .downcast_ref::<StructArray>()
                    .and_then(|s| s.column_by_name("bytes"))
                    .and_then(|b| b.as_any().downcast_ref::<BinaryArray>())
                    .ok_or_else(|| Error::shard(path, "image column is not a {bytes, path} struct"))?;
                let img = image::load_from_memory_with_format(bytes.value(i), image::ImageFormat::Png)
                    .map_err(|e| Error::shard(path, format!("frame {i}: bad PNG: {e}")))?
                    .into_rgb8();
                if img.dimensions() != (w as u32, h as u32) {
                    return Err(Error::shard(
                        path,
                        format!("frame {i} is {:?}, dataset says {w}x{h}", img.dimensions()),
                    ));
                }
                hwc_to_chw(img.as_raw(), w, h, out);
            }
            FrameCodec::Raw => {
                let raw = column
                    .as_any()
                    .downcast_ref::<FixedSizeBinaryArray>()
                    .filter(|a| a.value_length() as usize == frame_len)
                    .ok_or_else(|| Error::shard(path, format!("image column is not FixedSizeBinary({frame_len})")))?;
                hwc_to_chw(raw.value(i), w, h, out);
            }
        }
    }
    Ok(())
}
