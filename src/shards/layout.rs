//! Where things live in a dataset folder (LeRobot v3.0 layout) and the small JSON files.
//!
//! ```text
//! data/chunk-000/file-000.parquet          frames, sorted by (episode_index, frame_index)
//! meta/episodes/chunk-000/file-000.parquet one row per episode (one file per ingest run)
//! meta/tasks.parquet                       task strings (pandas index `task`) -> task_index
//! meta/info.json                           LeRobot's dataset info (totals, features, paths)
//! meta/stats.json                          per-feature min/max/mean/std/count
//! meta/lfs.json                            this tool's own settings: frame codec, size, crop,
//!                                          render quality (LeRobot warns on unknown info keys)
//! ```

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
}

pub const LFS_DATASET_VERSION: u32 = 1;
