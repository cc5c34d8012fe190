//! `lfs suite sbatch`: the SLURM job-array script that runs a suite, one array task per cell.
//! Each task runs `lfs suite run SUITE --out DIR`, which takes its cell from
//! `SLURM_ARRAY_TASK_ID`, so the suite runs unchanged under the scheduler.

use std::path::{Path, PathBuf};

use crate::fsutil;
use crate::suite::cell::Cell;
use crate::suite::runner::{absolute, prepare};
use crate::suite::suite_file::SuiteFile;
use crate::{Error, Result};

/// Where the script and the scheduler's output files go, inside the suite directory.
pub const SLURM_DIR: &str = "slurm";

/// The scheduler settings of the array (`#SBATCH` lines); `None` leaves the cluster's default.
#[derive(Debug, Clone, Default)]
pub struct SbatchOptions {
    pub partition: Option<String>,
    /// `--time`, e.g. `12:00:00`.
    pub time: Option<String>,
    pub cpus_per_task: usize,
    /// `--mem`, e.g. `8G`.
    pub mem: Option<String>,
    /// At most this many array tasks at once (`--array=0-N%M`).
    pub max_parallel: Option<usize>,
}

/// The script and the line that submits it.
#[derive(Debug, Clone)]
pub struct Sbatch {
    pub script: PathBuf,
    pub command: String,
}

/// Writes `out/slurm/<name>.sbatch` for the suite at `suite_path` and returns it with its
/// `sbatch` line. Paths in the script are absolute; the tasks run in the directory this is
/// called from, so the suite file's relative paths mean the same there.
pub fn write_sbatch(suite_path: &Path, suite: &SuiteFile, out: &Path, opts: &SbatchOptions) -> Result<Sbatch> {
    if opts.cpus_per_task == 0 {
        return Err(Error::Config("--cpus-per-task must be >= 1".into()));
    }
    prepare(suite, out)?;
    let cells = Cell::all(suite).len();
    let exe = std::env::current_exe().map_err(|e| Error::Config(format!("locating the lfs executable: {e}")))?;
    let out_abs = absolute(out)?;
    let cwd = std::env::current_dir().map_err(|e| Error::Config(format!("the working directory: {e}")))?;
    let suite_abs = absolute(suite_path)?;
    let array = match opts.max_parallel {
        Some(m) => format!("0-{}%{m}", cells - 1),
        None => format!("0-{}", cells - 1),
    };
    let mut s = String::from("#!/bin/bash\n");
    s.push_str(&format!(
        "# lfs suite {}: {cells} cells (scale: {}), one array task each.\n",
        suite.name, suite.scale
    ));
    s.push_str(&format!("#SBATCH --job-name=lfs-{}\n", suite.name));
    s.push_str(&format!("#SBATCH --array={array}\n"));
    s.push_str(&format!("#SBATCH --cpus-per-task={}\n", opts.cpus_per_task));
    if let Some(p) = &opts.partition {
        s.push_str(&format!("#SBATCH --partition={p}\n"));
    }
    if let Some(t) = &opts.time {
        s.push_str(&format!("#SBATCH --time={t}\n"));
    }
    if let Some(m) = &opts.mem {
        s.push_str(&format!("#SBATCH --mem={m}\n"));
    }
    s.push_str(&format!("#SBATCH --chdir={}\n", quote(&cwd)));
    s.push_str(&format!(
        "#SBATCH --output={}\n",
        quote(&out_abs.join(SLURM_DIR).join("%A_%a.out"))
    ));
    s.push_str("set -eu\n");
    s.push_str("export MUJOCO_GL=\"${MUJOCO_GL:-egl}\"\n");
    let threads = match suite.threads_per_cell {
        Some(n) => n.to_string(),
        None => "${SLURM_CPUS_PER_TASK:-1}".to_string(),
    };
    s.push_str(&format!("export RAYON_NUM_THREADS={threads}\n"));
    s.push_str(&format!(
        "exec {} suite run {} --out {}\n",
        quote(&exe),
        quote(&suite_abs),
        quote(&out_abs)
    ));
    let script = out_abs.join(SLURM_DIR).join(format!("{}.sbatch", suite.name));
    fsutil::write_bytes_atomic(&script, s.as_bytes())
        .map_err(|e| Error::checkpoint(&script, format!("writing: {e}")))?;
    let command = format!("sbatch {}", quote(&script));
    Ok(Sbatch { script, command })
}

/// A path as one shell word.
fn quote(path: &Path) -> String {
    let text = path.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-%+=:,".contains(c))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}
