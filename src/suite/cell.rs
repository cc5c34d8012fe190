//! A cell of a suite: one (encoder, task, seed) run of `lfs eval`, with a stable index, its
//! own folder `cells/<index>-<encoder>-<task>-s<seed>/` and its record `cell.json`.
//!
//! `cell.json` is what `lfs suite status` and `lfs report` read; its fields are the contract
//! between them (docs/design.md §11).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::env::Task;
use crate::fsutil::{self, FileLock};
use crate::suite::suite_file::{EncoderRow, SuiteFile};
use crate::{Error, Result};

/// The folder of all cells inside a suite's output directory.
pub const CELLS_DIR: &str = "cells";
/// A cell's record.
pub const CELL_FILE: &str = "cell.json";
/// The lock a cell's process holds while it runs (released by the kernel when it dies).
pub const LOCK_FILE: &str = ".lock";
/// The output of a cell's process when the local pool runs it.
pub const LOG_FILE: &str = "log.txt";

/// One (encoder, task, seed) of a suite.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Position in encoder-major, then task, then seed order: stable for a given suite file,
    /// and the SLURM array index.
    pub index: usize,
    pub encoder: EncoderRow,
    pub task: Task,
    pub seed: u64,
}

impl Cell {
    /// Every cell of `suite`, in index order.
    pub fn all(suite: &SuiteFile) -> Vec<Cell> {
        let mut cells = Vec::new();
        for encoder in &suite.encoders {
            for &task in &suite.tasks {
                for &seed in &suite.seeds {
                    cells.push(Cell {
                        index: cells.len(),
                        encoder: encoder.for_seed(seed),
                        task,
                        seed,
                    });
                }
            }
        }
        cells
    }

    /// `003-random-walker_walk-s2`.
    pub fn name(&self) -> String {
        format!("{:03}-{}-{}-s{}", self.index, self.encoder.name, self.task, self.seed)
    }

    pub fn dir(&self, out: &Path) -> PathBuf {
        out.join(CELLS_DIR).join(self.name())
    }
}

/// Where a cell is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellState {
    /// Never started.
    Pending,
    /// Its process holds the lock (or held it and was killed: see [`CellRecord::interrupted`]).
    Running,
    /// Reached its budget.
    Done,
    /// Stopped with an error (recorded), or killed; the next `lfs suite run` retries it.
    Failed,
}

impl CellState {
    pub fn name(self) -> &'static str {
        match self {
            CellState::Pending => "pending",
            CellState::Running => "running",
            CellState::Done => "done",
            CellState::Failed => "failed",
        }
    }
}

/// `cell.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRecord {
    pub index: usize,
    /// The encoder row's label.
    pub encoder: String,
    /// The row's source: `random`, or the export file.
    pub encoder_source: String,
    /// `sac`: frozen-encoder SAC (`lfs eval`); `train`: end-to-end (`lfs train`).
    pub agent: String,
    pub task: Task,
    pub seed: u64,
    pub state: CellState,
    /// Why it failed (the error chain), when it did.
    pub error: Option<String>,
    /// Processes that started it.
    pub attempts: u32,
    pub frames_done: u64,
    pub num_train_frames: u64,
    /// Wall-clock seconds over all attempts.
    pub wall_clock_s: f64,
    /// `frames_done / wall_clock_s`.
    pub frames_per_s: f64,
    /// The host and pid of the last attempt.
    pub host: Option<String>,
    pub pid: Option<u32>,
}

impl CellRecord {
    /// A cell that never ran.
    pub fn pending(cell: &Cell, source: &str, num_train_frames: u64) -> Self {
        CellRecord {
            index: cell.index,
            encoder: cell.encoder.name.clone(),
            encoder_source: source.to_string(),
            agent: cell.encoder.agent().into(),
            task: cell.task,
            seed: cell.seed,
            state: CellState::Pending,
            error: None,
            attempts: 0,
            frames_done: 0,
            num_train_frames,
            wall_clock_s: 0.0,
            frames_per_s: 0.0,
            host: None,
            pid: None,
        }
    }

    /// The record in `dir`, if there is one.
    pub fn read(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(CELL_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Error::checkpoint(&path, format!("malformed cell record: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::checkpoint(&path, e.to_string())),
        }
    }

    /// Writes the record atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(CELL_FILE);
        let text = serde_json::to_string_pretty(self)?;
        fsutil::write_bytes_atomic(&path, format!("{text}\n").as_bytes())
            .map_err(|e| Error::checkpoint(&path, format!("writing: {e}")))
    }

    /// A record that says running while no process holds the cell's lock: the process died
    /// without a word (SIGKILL, the scheduler's time limit, a lost node).
    pub fn interrupted(&self, dir: &Path) -> bool {
        self.state == CellState::Running && !CellLock::is_held(dir)
    }
}

/// The exclusive lock a cell's process holds while it runs ([`FileLock`] on `.lock`).
pub struct CellLock {
    _lock: FileLock,
}

impl CellLock {
    /// Takes the lock, or `None` when another process runs the cell.
    pub fn acquire(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(LOCK_FILE);
        FileLock::try_acquire(&path)
            .map(|lock| lock.map(|l| CellLock { _lock: l }))
            .map_err(|e| Error::checkpoint(&path, format!("locking: {e}")))
    }

    /// Whether some process runs the cell in `dir` now.
    pub fn is_held(dir: &Path) -> bool {
        FileLock::is_held(&dir.join(LOCK_FILE))
    }
}
