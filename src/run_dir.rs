//! The run folder's contract, in one place: the file names `lfs pretrain`, `lfs eval` and `lfs
//! train` write into their `--out-dir`, and the metadata keys every safetensors file lfs writes
//! carries (`lfs.kind` says which kind of file it is). Readers (`lfs report`, `lfs suite`,
//! `lfs export`, resume) name files and keys through these constants only.

use crate::{Error, Result};

/// The latest checkpoint of a run (every command).
pub const CHECKPOINT_FILE: &str = "checkpoint.safetensors";
/// The config the run resolved, overrides applied (every command).
pub const CONFIG_FILE: &str = "config.resolved.toml";
/// `lfs pretrain`: one line per update.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// `lfs pretrain`: the datasets it read, with their fingerprints.
pub const DATASETS_FILE: &str = "datasets.json";
/// `lfs pretrain`: how the last invocation ended (updates done, last metrics, collapse).
pub const SUMMARY_FILE: &str = "summary.json";
/// `lfs eval` / `lfs train`: one row per evaluation (DrQ-v2's columns).
pub const EVAL_CSV: &str = "eval.csv";
/// `lfs eval` / `lfs train`: one line per training episode.
pub const TRAIN_LOG: &str = "train.jsonl";
/// `lfs train`: one line per auxiliary update, the pre-trainer's metrics and the frame.
pub const AUX_LOG: &str = "aux.jsonl";
/// `lfs eval` / `lfs train`: task, encoder and its identity, render quality, feature cache.
pub const RUN_FILE: &str = "run.json";
/// `lfs train`: the paper's value comparison of synthetic and real observations.
pub const VALUE_COMPARISON_FILE: &str = "value_comparison.json";
/// `--save-video`: the evaluation videos, as DrQ-v2's `eval_video/`.
pub const VIDEO_DIR: &str = "eval_video";

/// The metadata key that names a safetensors file's kind, and the kinds.
pub mod kind {
    pub const KEY: &str = "lfs.kind";
    /// `lfs pretrain`'s checkpoint.
    pub const PRETRAIN_CHECKPOINT: &str = "checkpoint";
    /// `lfs export`'s encoder file, and the example beside it.
    pub const EXPORT: &str = "export";
    pub const EXPORT_EXAMPLE: &str = "export-example";
    /// `lfs eval`'s and `lfs train`'s checkpoints.
    pub const EVAL_CHECKPOINT: &str = "eval-checkpoint";
    pub const TRAIN_CHECKPOINT: &str = "train-checkpoint";
    /// One domain's loop state in an `lfs explore` checkpoint folder.
    pub const EXPLORE_CHECKPOINT: &str = "explore-checkpoint";
    /// The exploring method's state (the shared encoder) in an `lfs explore` checkpoint folder.
    pub const EXPLORER_STATE: &str = "explorer-state";
}

/// Metadata keys of the files above.
pub mod meta {
    /// The run's resolved config, as TOML (checkpoints, exports).
    pub const CONFIG: &str = "lfs.config";
    /// The datasets a pre-training run read, as JSON (checkpoints, exports).
    pub const DATASETS: &str = "lfs.datasets";
}

/// Refuses a file of another kind than `expected`, naming the file, its kind and `wanted` (what
/// the caller needs it to be, e.g. "an `lfs pretrain` checkpoint").
pub fn expect_kind(path: &std::path::Path, found: &str, expected: &str, wanted: &str) -> Result<()> {
    if found != expected {
        return Err(Error::checkpoint(
            path,
            format!("is an `lfs {found}` file, not {wanted}"),
        ));
    }
    Ok(())
}
