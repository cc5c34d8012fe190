//! `lfs suite status DIR`: where every cell of a suite's output directory is.

use std::path::Path;

use crate::suite::cell::{Cell, CellRecord, CellState};
use crate::suite::runner::SUITE_FILE;
use crate::suite::suite_file::SuiteFile;
use crate::{Error, Result};

/// A cell's state as `status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    Done,
    Running,
    Failed,
    /// Recorded as running, but no process holds its lock: killed without a word. The next
    /// run resumes it, like a failed cell.
    Interrupted,
    Pending,
}

impl Shown {
    pub fn name(self) -> &'static str {
        match self {
            Shown::Done => "done",
            Shown::Running => "running",
            Shown::Failed => "failed",
            Shown::Interrupted => "interrupted",
            Shown::Pending => "pending",
        }
    }
}

/// One row of the status table.
#[derive(Debug, Clone)]
pub struct CellStatus {
    pub cell: Cell,
    pub shown: Shown,
    /// The record, when the cell has started once.
    pub record: Option<CellRecord>,
}

/// The state of every cell of the suite run into `out`.
pub fn status(out: &Path) -> Result<Vec<CellStatus>> {
    let suite_path = out.join(SUITE_FILE);
    if !suite_path.is_file() {
        return Err(Error::Config(format!(
            "{} is not a suite directory (no {SUITE_FILE}; `lfs suite run` writes it)",
            out.display()
        )));
    }
    let text = std::fs::read_to_string(&suite_path).map_err(|e| Error::checkpoint(&suite_path, e.to_string()))?;
    let suite: SuiteFile = toml::from_str(&text).map_err(|e| Error::checkpoint(&suite_path, e.to_string()))?;
    Cell::all(&suite)
        .into_iter()
        .map(|cell| {
            let dir = cell.dir(out);
            let record = CellRecord::read(&dir)?;
            let shown = shown(record.as_ref(), &dir);
            Ok(CellStatus { cell, shown, record })
        })
        .collect()
}

/// How a cell whose folder is `dir` is shown: pending until it has a record.
pub fn shown(record: Option<&CellRecord>, dir: &Path) -> Shown {
    match record {
        None => Shown::Pending,
        Some(r) if r.interrupted(dir) => Shown::Interrupted,
        Some(r) => match r.state {
            CellState::Pending => Shown::Pending,
            CellState::Running => Shown::Running,
            CellState::Done => Shown::Done,
            CellState::Failed => Shown::Failed,
        },
    }
}

/// How many cells are in each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateCounts {
    pub done: usize,
    pub running: usize,
    pub failed: usize,
    pub interrupted: usize,
    pub pending: usize,
}

impl StateCounts {
    pub fn of(shown: impl IntoIterator<Item = Shown>) -> Self {
        let mut counts = Self::default();
        for s in shown {
            *match s {
                Shown::Done => &mut counts.done,
                Shown::Running => &mut counts.running,
                Shown::Failed => &mut counts.failed,
                Shown::Interrupted => &mut counts.interrupted,
                Shown::Pending => &mut counts.pending,
            } += 1;
        }
        counts
    }

    pub fn total(&self) -> usize {
        self.done + self.running + self.failed + self.interrupted + self.pending
    }
}

impl std::fmt::Display for StateCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cells: {} done, {} running, {} failed, {} interrupted, {} pending",
            self.total(),
            self.done,
            self.running,
            self.failed,
            self.interrupted,
            self.pending
        )
    }
}

/// The table `lfs suite status` prints, and a count per state.
pub fn render(rows: &[CellStatus]) -> String {
    let mut text = format!(
        "{:>5}  {:<16} {:<18} {:>4}  {:<11} {:>17}  {:>8}  {}\n",
        "index", "encoder", "task", "seed", "state", "frames", "attempts", "error"
    );
    for row in rows {
        let (frames, attempts, error) = match &row.record {
            Some(r) => (
                format!("{}/{}", r.frames_done, r.num_train_frames),
                r.attempts.to_string(),
                r.error.clone().unwrap_or_default(),
            ),
            None => ("-".to_string(), "0".to_string(), String::new()),
        };
        let error: String = error.lines().next().unwrap_or_default().chars().take(100).collect();
        text.push_str(&format!(
            "{:>5}  {:<16} {:<18} {:>4}  {:<11} {:>17}  {:>8}  {}\n",
            row.cell.index,
            row.cell.encoder.name,
            row.cell.task.name(),
            row.cell.seed,
            row.shown.name(),
            frames,
            attempts,
            error
        ));
    }
    text.push_str(&format!("{}\n", StateCounts::of(rows.iter().map(|r| r.shown))));
    text
}
