//! The log files of every training stage: JSONL, one object per update (or episode) with an integer
//! `step` ([`MetricsLog`]), and CSV tables whose rows start with an integer key ([`CsvLog`],
//! `eval.csv`). Updates return a metrics struct and the loop writes it here (algorithm code never
//! prints). On resume a log is cut back to the checkpoint's step or frame, so a resumed run's
//! logs equal an uninterrupted one's. A JSONL log may be mirrored into the run's TensorBoard
//! event file ([`Mirror`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::tensorboard::SharedEventFile;
use crate::{Error, Result};

/// Appends metrics to a JSONL file.
pub struct MetricsLog {
    path: PathBuf,
    file: std::fs::File,
    mirror: Option<Mirror>,
}

/// Where a JSONL log's lines also go: the run's TensorBoard event file, each line's numbers at
/// the value of its field `x` (`step`, or `train/frame` where DrQ-v2 logs against frames; the
/// line's own `step` counter is then left out, as the x replaces it).
pub struct Mirror {
    pub events: SharedEventFile,
    pub x: &'static str,
}

impl MetricsLog {
    /// Opens `path` for appending, first dropping any lines with `step > keep_through_step`
    /// (a run killed after its last checkpoint logged updates that will be redone).
    pub fn open(path: &Path, keep_through_step: u64) -> Result<Self> {
        let step = |line: &str| {
            serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v.get("step").and_then(|s| s.as_u64()))
        };
        let file = reopen_cut_back(
            path,
            "metrics log",
            None,
            |line| matches!(step(line), Some(s) if s <= keep_through_step),
        )?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            mirror: None,
        })
    }

    /// The same log, its lines also written to `mirror` (none: JSONL only).
    pub fn mirrored(self, mirror: Option<Mirror>) -> Self {
        Self { mirror, ..self }
    }

    /// Appends one record; it must serialise to a JSON object with a `step` (and the mirror's
    /// `x`).
    pub fn write<M: Serialize>(&mut self, metrics: &M) -> Result<()> {
        let line = serde_json::to_string(metrics)?;
        writeln!(self.file, "{line}").map_err(|e| Error::checkpoint(&self.path, format!("metrics log: {e}")))?;
        if let Some(mirror) = &self.mirror {
            // Parsed back from the line, so TensorBoard shows exactly what the JSONL holds.
            let value: serde_json::Value = serde_json::from_str(&line)?;
            let x = value.get(mirror.x).and_then(|x| x.as_u64()).ok_or_else(|| {
                Error::checkpoint(
                    &self.path,
                    format!("metrics log: a line without an integer `{}`", mirror.x),
                )
            })?;
            mirror.events.borrow_mut().write_json(x, &value, &[mirror.x, "step"])?;
        }
        Ok(())
    }
}

/// A CSV table with a header whose rows start with an integer key (a frame).
pub struct CsvLog {
    path: PathBuf,
    file: std::fs::File,
}

impl CsvLog {
    /// Opens `path` for appending under `header`, first dropping the rows whose key is greater
    /// than `keep_through`, or every row when it is `None` (they will be written again), and
    /// any row with fewer fields than the header (torn by a kill).
    pub fn open(path: &Path, header: &str, keep_through: Option<u64>) -> Result<Self> {
        let key = |line: &str| line.split(',').next().and_then(|k| k.parse::<u64>().ok());
        // A row torn by a kill mid-write has fewer fields than the header: dropped.
        let fields = header.split(',').count();
        let whole = |line: &str| line.split(',').count() == fields;
        let file = reopen_cut_back(path, "log", Some(header), |line| {
            whole(line) && matches!((key(line), keep_through), (Some(k), Some(through)) if k <= through)
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends one row (synced: a row is a result).
    pub fn append(&mut self, row: &str) -> Result<()> {
        writeln!(self.file, "{row}")
            .and_then(|_| self.file.sync_data())
            .map_err(|e| Error::checkpoint(&self.path, e.to_string()))
    }
}

/// Rewrites `path` atomically with `header` (if any) and the existing lines after it that
/// `keep` accepts, then opens it for appending; errors name the file and `what` it is.
fn reopen_cut_back(
    path: &Path,
    what: &str,
    header: Option<&str>,
    keep: impl Fn(&str) -> bool,
) -> Result<std::fs::File> {
    let err = |e: std::io::Error| Error::checkpoint(path, format!("{what}: {e}"));
    let mut kept = header.map(|h| format!("{h}\n")).unwrap_or_default();
    if path.exists() {
        let text = std::fs::read_to_string(path).map_err(err)?;
        for line in text.lines().skip(usize::from(header.is_some())) {
            if keep(line) {
                kept.push_str(line);
                kept.push('\n');
            }
        }
    }
    if header.is_some() || path.exists() {
        crate::fsutil::write_bytes_atomic(path, kept.as_bytes()).map_err(err)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopening_drops_rows_past_the_checkpoint_and_rows_torn_by_a_kill() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("eval.csv");
        let header = "frame,step,episode,episode_reward,total_time";
        // A kill mid-append left "4000,2000,4" (three of five fields, no newline).
        std::fs::write(
            &csv,
            format!("{header}\n0,0,0,1.5,2.0\n2000,1000,2,3.5,9.0\n4000,2000,4"),
        )
        .unwrap();
        let mut log = CsvLog::open(&csv, header, Some(4000)).unwrap();
        log.append("4000,2000,4,7.5,20.0").unwrap();
        let text = std::fs::read_to_string(&csv).unwrap();
        assert_eq!(
            text,
            format!("{header}\n0,0,0,1.5,2.0\n2000,1000,2,3.5,9.0\n4000,2000,4,7.5,20.0\n")
        );
        CsvLog::open(&csv, header, Some(0)).unwrap();
        assert_eq!(
            std::fs::read_to_string(&csv).unwrap(),
            format!("{header}\n0,0,0,1.5,2.0\n")
        );

        let jsonl = dir.path().join("metrics.jsonl");
        std::fs::write(
            &jsonl,
            "{\"step\":1,\"loss\":2.0}\n{\"step\":2,\"loss\":1.5}\n{\"step\":3,\"lo",
        )
        .unwrap();
        MetricsLog::open(&jsonl, 3).unwrap();
        assert_eq!(
            std::fs::read_to_string(&jsonl).unwrap(),
            "{\"step\":1,\"loss\":2.0}\n{\"step\":2,\"loss\":1.5}\n"
        );
    }
}
