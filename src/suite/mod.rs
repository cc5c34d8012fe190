//! `lfs suite`: many `lfs eval` runs — encoders × tasks × seeds — on one machine or a SLURM
//! cluster (docs/design.md §11). A suite file ([`SuiteFile`]) names them; every (encoder, task,
//! seed) is a [`Cell`] with a stable index and its own folder; [`runner`] runs cells in a local
//! process pool (sharing a GPU by [`gpu_share`]) or one per scheduler array task, [`status`] tells where they are, [`sbatch`]
//! writes the array script.

pub mod cell;
pub mod gpu_share;
pub mod runner;
pub mod sbatch;
pub mod status;
pub mod suite_file;

pub use cell::{Cell, CellRecord, CellState};
pub use suite_file::{EncoderRow, PrimaryAggregate, PrimaryComparison, PrimaryUnit, SuiteFile};
