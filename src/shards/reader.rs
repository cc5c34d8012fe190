//! Loading an ingested dataset into memory as contiguous uint8 frame arrays (the trainer's
//! start-up path: episodes are read in parallel, one Parquet row-group range each).

use std::path::{Path, PathBuf};

use arrow_array::{Array, BinaryArray, FixedSizeBinaryArray, Int64Array, RecordBatch, StructArray};
use parquet::arrow::ProjectionMask;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::episodes::EpisodeRecord;
use super::layout::{FrameCodec, LfsMeta, IMAGE_KEY, LFS_META_PATH, TASKS_PATH};
use super::open_parquet;
use super::tasks::read_tasks;
use super::writer::{committed_data_path, read_all_episodes, read_lfs_meta};
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

        let builder = open_parquet(&path)?;
        let parquet_schema = builder.parquet_schema();
        let wanted: Vec<usize> = parquet_schema
            .columns()
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                let parts = c.path().parts();
                parts[0] == "frame_index"
                    || parts[0] == "episode_index"
                    || (parts[0] == IMAGE_KEY && parts.last().is_some_and(|p| p != "path"))
            })
            .map(|(i, _)| i)
            .collect();
        let mask = ProjectionMask::leaves(parquet_schema, wanted);
        // Only the row groups that overlap [offset, offset + n).
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
        let reader = builder.with_projection(mask).with_row_groups(groups).build()?;

        let mut frames = vec![0u8; n * frame_len];
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
            seen += take;
        }
        if seen != n {
            return Err(Error::shard(
                &path,
                format!("episode {} has {seen} rows, its table says {n}", record.episode_index),
            ));
        }
        Ok(Episode {
            episode_index: record.episode_index as u64,
            task: record.task.clone(),
            task_index: self.tasks.iter().position(|t| *t == record.task).unwrap_or(0) as u32,
            render_quality: record.render_quality,
            num_frames: n,
            height: h,
            width: w,
            frames,
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
