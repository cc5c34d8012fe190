//! Where things live in a dataset folder (LeRobot v3.0 layout) and the small JSON files.
//!
//! ```text
//! data/chunk-000/file-000.parquet          frames, sorted by (episode_index, frame_index)
//! meta/episodes/chunk-000/file-000.parquet one row per episode (one file per ingest run)
//! meta/tasks.parquet                       task strings (pandas index `task`) -> task_index
//! meta/info.json                           LeRobot's dataset info (totals, features, paths)
//! meta/stats.json                          per-feature min/max/mean/std/count
//! meta/lfs.json                            this tool's own settings: frame codec, size, crop,
//!                                          render quality, state columns and names per task
//!                                          (LeRobot warns on unknown info keys)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::env::RenderQuality;
use crate::video::Crop;

pub const CODEBASE_VERSION: &str = "v3.0";
pub const INFO_PATH: &str = "meta/info.json";
pub const STATS_PATH: &str = "meta/stats.json";
pub const TASKS_PATH: &str = "meta/tasks.parquet";
pub const LFS_META_PATH: &str = "meta/lfs.json";
pub const EPISODES_DIR: &str = "meta/episodes";
pub const DATA_DIR: &str = "data";
/// Template LeRobot formats with `chunk_index` and `file_index`.
pub const DATA_PATH_TEMPLATE: &str = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet";
/// The image feature's key (LeRobot's convention for a single camera).
pub const IMAGE_KEY: &str = "observation.image";
/// The per-frame state feature's key (LeRobot's name for proprioception).
pub const STATE_KEY: &str = "observation.state";
/// The per-frame reward feature's key: the reward of the agent step that led to the frame
/// (LeRobot's `next.reward` of row t is our `reward` of row t + 1).
pub const REWARD_KEY: &str = "reward";
/// Files per chunk folder (LeRobot's default).
pub const CHUNKS_SIZE: u32 = 1000;
/// A data file is closed once it reaches this size (LeRobot's default).
pub const DATA_FILE_SIZE_MB: u64 = 100;

/// (chunk, file) index pair of a Parquet file in a chunked folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId {
    pub chunk: u32,
    pub file: u32,
}

impl FileId {
    pub fn next(self) -> Self {
        if self.file + 1 >= CHUNKS_SIZE {
            Self {
                chunk: self.chunk + 1,
                file: 0,
            }
        } else {
            Self {
                chunk: self.chunk,
                file: self.file + 1,
            }
        }
    }

    fn relative(self, dir: &str) -> String {
        format!("{dir}/chunk-{:03}/file-{:03}.parquet", self.chunk, self.file)
    }

    pub fn data_path(self, root: &Path) -> PathBuf {
        root.join(self.relative(DATA_DIR))
    }

    pub fn episodes_path(self, root: &Path) -> PathBuf {
        root.join(self.relative(EPISODES_DIR))
    }

    /// Parse `chunk-XXX/file-YYY.parquet` from the last two components of `path`.
    pub fn parse(path: &Path) -> Option<Self> {
        let file = path
            .file_name()?
            .to_str()?
            .strip_prefix("file-")?
            .strip_suffix(".parquet")?;
        let chunk = path.parent()?.file_name()?.to_str()?.strip_prefix("chunk-")?;
        Some(Self {
            chunk: chunk.parse().ok()?,
            file: file.parse().ok()?,
        })
    }
}

/// How frames are stored in the image column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FrameCodec {
    /// PNG bytes in LeRobot's image struct `{bytes, path}`: loadable by LeRobot and `datasets`.
    Png,
    /// Raw HWC uint8 in a FixedSizeBinary column: fastest, NOT loadable by LeRobot.
    Raw,
}

/// `meta/lfs.json`: what this tool needs to read the dataset back and to refuse mixing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LfsMeta {
    /// Format version of this file.
    pub lfs_dataset_version: u32,
    pub frame_codec: FrameCodec,
    pub width: u32,
    pub height: u32,
    pub crop: Crop,
    /// DMControl render quality (`default` | `fast`) when the sources came from `lfs collect`.
    pub render_quality: Option<RenderQuality>,
    /// The data files have the `observation.state` and `reward` columns. Absent (false) in
    /// datasets made before they existed: those keep their schema when appended to, and their
    /// lfs.json stays without these two fields, so the older lfs still opens them (a dataset
    /// with the columns has fields it does not know, and it refuses that one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub state_columns: bool,
    /// Task -> names of its state's values, for the tasks whose episodes carry state (every
    /// episode of a task with state has these names).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub state_names: BTreeMap<String, Vec<String>>,
    /// `lfs ingest --fps N`: every source was resampled to N frames per second. Absent: each
    /// source keeps its own frames and rate (and an older lfs still opens the dataset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fps: Option<u32>,
}

pub const LFS_DATASET_VERSION: u32 = 1;
