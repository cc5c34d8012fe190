//! The metrics log of every training stage: JSONL, one object per update (or evaluation), each
//! with an integer `step`. Updates return a metrics struct and the loop writes it here (algorithm
//! code never prints). On resume the log is cut back to the checkpoint's step, so a
//! resumed run's log equals an uninterrupted one.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{Error, Result};

/// Appends metrics to a JSONL file.
pub struct MetricsLog {
    path: PathBuf,
    file: std::fs::File,
}

impl MetricsLog {
    /// Opens `path` for appending, first dropping any lines with `step > keep_through_step`
    /// (a run killed after its last checkpoint logged updates that will be redone).
    pub fn open(path: &Path, keep_through_step: u64) -> Result<Self> {
        let err = |e: std::io::Error| Error::checkpoint(path, format!("metrics log: {e}"));
        if path.exists() {
            let reader = std::io::BufReader::new(std::fs::File::open(path).map_err(err)?);
            let mut kept = String::new();
            for line in reader.lines() {
                let line = line.map_err(err)?;
                let step = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v.get("step").and_then(|s| s.as_u64()));
                if matches!(step, Some(s) if s <= keep_through_step) {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
            crate::fsutil::write_bytes_atomic(path, kept.as_bytes()).map_err(err)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends one record; it must serialise to a JSON object with a `step`.
    pub fn write<M: Serialize>(&mut self, metrics: &M) -> Result<()> {
        let line = serde_json::to_string(metrics)?;
        writeln!(self.file, "{line}").map_err(|e| Error::checkpoint(&self.path, format!("metrics log: {e}")))
    }
}
