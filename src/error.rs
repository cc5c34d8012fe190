//! The library's error type. Binaries wrap it in `anyhow` with context.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A source video or image folder that could not be decoded.
    #[error("{path}: {reason}")]
    Decode { path: PathBuf, reason: String },
    /// A dataset shard or metadata file that is missing or malformed.
    #[error("{path}: {reason}")]
    Shard { path: PathBuf, reason: String },
    #[error("config: {0}")]
    Config(String),
    /// A DMControl environment worker that failed to start, crashed or rejected a request.
    #[error("environment {task}: {reason}")]
    Env { task: String, reason: String },
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

pub type Result<T, E = Error> = std::result::Result<T, E>;
