//! The library's error type. Binaries wrap it in `anyhow` with context.
//!
//! Each kind says what went wrong, not where it was noticed: a bad input file names the file
//! (`Decode`, `Encode`, `Shard`, `Checkpoint`), a bad setting is `Config`, a run that cannot go
//! on is `Training`, buffers of the wrong size handed between modules are `Shape`, and
//! benchmark cells that cannot be reported side by side are `CellMismatch`.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A source video or image folder that could not be decoded.
    #[error("{path}: {reason}")]
    Decode { path: PathBuf, reason: String },
    /// A video or picture that could not be encoded or written (`lfs collect`, `--save-video`,
    /// contact sheets).
    #[error("{path}: {reason}")]
    Encode { path: PathBuf, reason: String },
    /// A dataset shard, sidecar or metadata file that is missing, malformed or not writable.
    #[error("{path}: {reason}")]
    Shard { path: PathBuf, reason: String },
    /// A checkpoint, exported encoder or run file that is missing, malformed, not writable, or
    /// belongs to another run.
    #[error("{path}: {reason}")]
    Checkpoint { path: PathBuf, reason: String },
    /// A setting (config file, `--set`, command-line value) that is invalid.
    #[error("config: {0}")]
    Config(String),
    /// A training run that cannot go on (a non-finite loss, a failed numeric step).
    #[error("training: {0}")]
    Training(String),
    /// Tensors or buffers whose shapes do not fit each other (a caller's mistake).
    #[error("shape: {0}")]
    Shape(String),
    /// A DMControl environment worker that failed to start, crashed or rejected a request.
    #[error("environment {task}: {reason}")]
    Env { task: String, reason: String },
    /// A benchmark-suite cell (`cells/<name>/`: cell.json, eval.csv, run.json, the resolved
    /// config) that is missing or malformed (`lfs report`).
    #[error("{path}: {reason}")]
    Cell { path: PathBuf, reason: String },
    /// Benchmark cells that differ in a setting that makes their scores incomparable (render
    /// quality, feature cache, budget): which setting, which values, which cells.
    #[error("cells differ in a setting that matters: {0}")]
    CellMismatch(String),
    /// A picture of `lfs report` that could not be drawn or encoded.
    #[error("plot: {0}")]
    Plot(String),
    /// A checkpoint tensor that is missing or has the wrong shape.
    #[error("checkpoint tensor {key}: expected {expected}, got {got}")]
    CheckpointMismatch { key: String, expected: String, got: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

impl Error {
    /// [`Error::Shard`] for `path`.
    pub fn shard(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Shard {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// [`Error::Checkpoint`] for `path`.
    pub fn checkpoint(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Checkpoint {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// [`Error::Cell`] for `path`.
    pub fn cell(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Cell {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// [`Error::Decode`] for `path`.
    pub fn decode(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Decode {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
