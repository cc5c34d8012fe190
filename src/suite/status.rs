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
    /// The suite's frame budget for every cell.
    pub num_train_frames: u64,
}

impl CellStatus {
    /// Frames this cell has still to train.
    pub fn frames_left(&self) -> u64 {
        let done = self.record.as_ref().map_or(0, |r| r.frames_done);
        self.num_train_frames.saturating_sub(done)
    }
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
            Ok(CellStatus {
                cell,
                shown,
                record,
                num_train_frames: suite.num_train_frames.0,
            })
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
    if let Some(left) = TimeLeft::of(rows) {
        text.push_str(&format!("{left}\n"));
    }
    text
}

/// What is left of a suite at the pace of its done cells.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeLeft {
    /// Frames still to train, over every cell not done.
    pub frames: u64,
    /// The done cells' frames per wall-clock second, per cell (their frames over their
    /// seconds, summed over them).
    pub frames_per_s: f64,
    /// The cells running now, each at that pace (one when none is).
    pub at_once: usize,
}

impl TimeLeft {
    /// None while no cell is done (no pace yet) or when every cell is.
    pub fn of(rows: &[CellStatus]) -> Option<Self> {
        let done: Vec<&CellRecord> = rows
            .iter()
            .filter(|r| r.shown == Shown::Done)
            .filter_map(|r| r.record.as_ref())
            .collect();
        let seconds: f64 = done.iter().map(|r| r.wall_clock_s).sum();
        let frames: u64 = rows
            .iter()
            .filter(|r| r.shown != Shown::Done)
            .map(CellStatus::frames_left)
            .sum();
        if seconds <= 0.0 || frames == 0 {
            return None;
        }
        Some(TimeLeft {
            frames,
            frames_per_s: done.iter().map(|r| r.frames_done).sum::<u64>() as f64 / seconds,
            at_once: rows.iter().filter(|r| r.shown == Shown::Running).count().max(1),
        })
    }

    pub fn seconds(&self) -> f64 {
        self.frames as f64 / self.frames_per_s / self.at_once as f64
    }
}

impl std::fmt::Display for TimeLeft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let minutes = (self.seconds() / 60.0).round() as u64;
        write!(
            f,
            "about {} h {:02} min left: {} frames at the done cells' {:.1} frames/s per cell, {} at once",
            minutes / 60,
            minutes % 60,
            self.frames,
            self.frames_per_s,
            self.at_once
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::suite_file::SuiteFile;

    fn rows() -> Vec<CellStatus> {
        let suite: SuiteFile = toml::from_str(
            "name = \"t\"\nscale = \"tiny\"\nsac_config = \"pipelines/sac/tiny.toml\"\n\
             num_train_frames = 20000\ntasks = [\"walker_stand\"]\nseeds = [1, 2, 3, 4]\n\
             [[encoders]]\nname = \"random\"\nsource = \"random\"\n",
        )
        .unwrap();
        let cells = Cell::all(&suite);
        // Two done (20000 frames in 1000 s and in 3000 s), one running at 5000, one not started.
        let record = |cell: &Cell, state, frames_done, wall_clock_s| {
            let mut r = CellRecord::pending(cell, "random", 20000);
            r.state = state;
            r.frames_done = frames_done;
            r.wall_clock_s = wall_clock_s;
            r
        };
        vec![
            (Shown::Done, Some(record(&cells[0], CellState::Done, 20000, 1000.0))),
            (Shown::Done, Some(record(&cells[1], CellState::Done, 20000, 3000.0))),
            (Shown::Running, Some(record(&cells[2], CellState::Running, 5000, 400.0))),
            (Shown::Pending, None),
        ]
        .into_iter()
        .zip(cells)
        .map(|((shown, record), cell)| CellStatus {
            cell,
            shown,
            record,
            num_train_frames: 20000,
        })
        .collect()
    }

    #[test]
    fn time_left_is_the_frames_left_at_the_done_cells_pace() {
        let rows = rows();
        let left = TimeLeft::of(&rows).unwrap();
        // 15000 + 20000 frames left; 40000 frames in 4000 s: 10 frames/s; one running.
        assert_eq!(left.frames, 35000);
        assert_eq!(left.frames_per_s, 10.0);
        assert_eq!(left.at_once, 1);
        assert_eq!(left.seconds(), 3500.0);
        assert_eq!(
            left.to_string(),
            "about 0 h 58 min left: 35000 frames at the done cells' 10.0 frames/s per cell, 1 at once"
        );
        let text = render(&rows);
        assert!(
            text.contains("4 cells: 2 done, 1 running, 0 failed, 0 interrupted, 1 pending\n"),
            "{text}"
        );
        assert!(text.ends_with("1 at once\n"), "{text}");
        // No pace before a cell is done.
        assert_eq!(TimeLeft::of(&rows[2..]), None);
    }
}
