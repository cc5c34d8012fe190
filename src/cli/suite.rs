//! `lfs suite run SUITE --out DIR [-j N | --gpu-memory-per-cell MIB] [--job-index I]`, `lfs suite status DIR`,
//! `lfs suite sbatch SUITE --out DIR [--partition P --time T --cpus-per-task C --mem M]`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use indicatif::ProgressBar;

use super::progress::{say, terminal_bar};
use lfs::rl_loop::LoopEvent;
use lfs::suite::gpu_share::{GpuMemory, GpuShare, ShareRule};
use lfs::suite::runner::{self, CellOutcome, PoolEvent};
use lfs::suite::sbatch::{self, SbatchOptions};
use lfs::suite::status;
use lfs::suite::{Cell, CellRecord, CellState, SuiteFile};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: SuiteCommand,
}

#[derive(clap::Subcommand)]
pub enum SuiteCommand {
    /// Run every unfinished cell in a local pool of processes, or one cell (--job-index, or
    /// SLURM_ARRAY_TASK_ID / JOB_COMPLETION_INDEX from a scheduler). Finished cells are
    /// skipped, unfinished ones resume from their checkpoints, failed ones are retried.
    Run {
        /// Suite file, e.g. eval/suites/tiny.toml.
        suite: PathBuf,
        /// Output directory: cells/<index>-<encoder>-<task>-s<seed>/ per cell.
        #[arg(long)]
        out: PathBuf,
        /// Cells run at once by the local pool. Default: one per core (per `threads_per_cell`
        /// cores when the suite pins threads), each with one thread, and for cells on a GPU
        /// what its memory holds: one cell is measured once warm, then the GPU is filled
        /// (`nvidia-smi`); the first lines say.
        #[arg(short = 'j', long)]
        jobs: Option<usize>,
        /// MiB of GPU memory one cell takes, instead of measuring it (not with -j, which
        /// fixes the number of cells).
        #[arg(long, value_name = "MIB", conflicts_with = "jobs")]
        gpu_memory_per_cell: Option<u64>,
        /// Run this cell only, in this process.
        #[arg(long)]
        job_index: Option<usize>,
    },
    /// Print a table of done / running / failed / interrupted / pending cells.
    Status {
        /// A suite's output directory.
        dir: PathBuf,
    },
    /// Write the SLURM job-array script of a suite (one task per cell) and print its sbatch line.
    Sbatch {
        suite: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        partition: Option<String>,
        /// Time limit per cell, e.g. 24:00:00.
        #[arg(long)]
        time: Option<String>,
        #[arg(long, default_value_t = 2)]
        cpus_per_task: usize,
        /// Memory per cell, e.g. 8G.
        #[arg(long)]
        mem: Option<String>,
        /// At most this many cells at once.
        #[arg(long)]
        max_parallel: Option<usize>,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        SuiteCommand::Run {
            suite,
            out,
            jobs,
            gpu_memory_per_cell,
            job_index,
        } => {
            let file = SuiteFile::load(&suite)?;
            let index = match job_index {
                Some(i) => Some(i),
                None => runner::index_from_env()?,
            };
            match index {
                Some(index) => run_one(&file, &out, index),
                None => {
                    let options = runner::PoolOptions {
                        jobs,
                        gpu_memory_per_cell_mib: gpu_memory_per_cell,
                    };
                    run_pool(&suite, &file, &out, options)
                }
            }
        }
        SuiteCommand::Status { dir } => {
            let rows = status::status(&dir)?;
            print!("{}", status::render(&rows));
            Ok(ExitCode::SUCCESS)
        }
        SuiteCommand::Sbatch {
            suite,
            out,
            partition,
            time,
            cpus_per_task,
            mem,
            max_parallel,
        } => {
            let file = SuiteFile::load(&suite)?;
            let opts = SbatchOptions {
                partition,
                time,
                cpus_per_task,
                mem,
                max_parallel,
            };
            let written = sbatch::write_sbatch(&suite, &file, &out, &opts)?;
            eprintln!("wrote {}; submit it with:", written.script.display());
            println!("{}", written.command);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One cell in this process: lines, not a bar (its output goes to a log or the scheduler's file).
fn run_one(file: &SuiteFile, out: &std::path::Path, index: usize) -> anyhow::Result<ExitCode> {
    if let Some(threads) = file.threads_per_cell {
        // Before any thread pool starts: candle and rayon read it on first use.
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
    let cells = Cell::all(file);
    let name = cells.get(index).map(Cell::name).unwrap_or_default();
    let mut on_event = |event: LoopEvent| match event {
        LoopEvent::Started(start) => eprintln!("cell {name}: {}, encoder {}", start.how(), start.encoder),
        LoopEvent::Evaluation(row) => eprintln!("cell {name}: {}", row.line()),
        LoopEvent::EpisodeLost { error } => eprintln!("cell {name}: warning: an episode was lost: {error}"),
        _ => {}
    };
    let outcome = runner::run_cell(file, out, index, &mut on_event).with_context(|| format!("cell {index} {name}"))?;
    match outcome {
        CellOutcome::Finished(summary) => eprintln!("cell {name}: done, {} frames", summary.frames_done),
        CellOutcome::AlreadyDone => eprintln!("cell {name}: already done"),
        CellOutcome::Busy => {
            eprintln!("cell {name}: another process is running it; leaving it alone");
            return Ok(ExitCode::from(runner::BUSY_EXIT_CODE as u8));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `GPU 0: 1 cell at once until it is warm, then as many as its memory holds (79.0 GiB free of 80.0)`.
fn gpu_share_line(share: &GpuShare, reading: Option<GpuMemory>) -> String {
    let gib = |mib: u64| mib as f64 / 1024.0;
    let memory = reading
        .map(|m| format!(" ({:.1} GiB free of {:.1})", gib(m.free_mib()), gib(m.total_mib)))
        .unwrap_or_default();
    let cells = |n: usize| format!("{n} cell{}", if n == 1 { "" } else { "s" });
    let how = match (&share.rule, share.per_cell_mib) {
        (ShareRule::Fixed, _) => format!("{} at once (-j)", cells(share.cap)),
        (ShareRule::Unreadable(why), _) => format!(
            "{} at once: its memory cannot be read ({why}); -j N or --gpu-memory-per-cell MIB overrides",
            cells(share.cap)
        ),
        (ShareRule::Given { per_cell_mib }, _) => format!(
            "{} at once, {:.1} GiB each (--gpu-memory-per-cell)",
            cells(share.cap),
            gib(*per_cell_mib)
        ),
        (ShareRule::Measured, None) => format!(
            "{} at once until it is warm, then as many as its memory holds",
            cells(share.cap)
        ),
        (ShareRule::Measured, Some(per_cell)) => format!(
            "up to {} at once, {:.1} GiB each as measured",
            cells(share.cap),
            gib(per_cell)
        ),
    };
    format!("GPU {}: {how}{memory}", share.ordinal)
}

/// `; about … left` for a pool of `jobs` (nothing when there is no pace or no work left).
fn time_left(out: &std::path::Path, jobs: usize) -> String {
    let rows = status::status(out).unwrap_or_default();
    let not_done = rows.iter().filter(|r| r.shown != status::Shown::Done).count();
    match status::TimeLeft::of(&rows) {
        Some(left) => {
            let left = status::TimeLeft {
                at_once: jobs.min(not_done).max(1),
                ..left
            };
            format!("; {left}")
        }
        None => String::new(),
    }
}

/// `cell …: done, 20000 frames in 812 s (24.6 frames/s); about … left` or `cell …: FAILED at
/// frame 4000: …`, for a pool running `at_once` cells.
fn cell_ended_line(cell: &Cell, record: &CellRecord, out: &std::path::Path, at_once: usize) -> String {
    match record.state {
        CellState::Done => format!(
            "cell {}: done, {} frames in {:.0} s ({:.1} frames/s){}",
            cell.name(),
            record.frames_done,
            record.wall_clock_s,
            record.frames_per_s,
            time_left(out, at_once)
        ),
        _ => format!(
            "cell {}: FAILED at frame {}: {}",
            cell.name(),
            record.frames_done,
            record.error.as_deref().unwrap_or("unknown error")
        ),
    }
}

fn run_pool(
    suite: &std::path::Path,
    file: &SuiteFile,
    out: &std::path::Path,
    options: runner::PoolOptions,
) -> anyhow::Result<ExitCode> {
    let budget = file.num_train_frames.0;
    let mut bar: Option<ProgressBar> = None;
    let mut frames_before = 0u64;
    let mut finished_frames = 0u64;
    let mut at_once = 1;
    let mut pool_jobs = 1;
    let mut on_event = |event: PoolEvent| match event {
        PoolEvent::Started {
            todo,
            done,
            total,
            jobs,
            threads_per_cell,
        } => {
            at_once = jobs;
            pool_jobs = jobs;
            eprintln!(
                "lfs suite {}: {total} cells, {done} done, {todo} to run, {jobs} at once, {threads_per_cell} threads each → {}",
                file.name,
                out.display()
            );
            if todo > 0 {
                bar = terminal_bar(
                    todo as u64 * budget,
                    "suite [{elapsed_precise}] {wide_bar} {pos}/{len} frames, {per_sec}, ETA {eta} {msg}",
                );
            }
        }
        PoolEvent::GpuShare { share, reading } => {
            say(&bar, gpu_share_line(share, reading));
            at_once = pool_jobs.min(share.cap).max(1);
        }
        PoolEvent::CellRequeued { cell, share } => say(
            &bar,
            format!(
                "cell {}: out of GPU memory; back in the queue (it resumes), GPU {} now takes at most {} cells",
                cell.name(),
                share.ordinal,
                share.cap
            ),
        ),
        PoolEvent::CellStarted { cell } => say(&bar, format!("cell {}: started", cell.name())),
        PoolEvent::CellBusy { cell } => say(&bar, format!("cell {}: another process holds it; skipped", cell.name())),
        PoolEvent::CellEnded { cell, record } => {
            finished_frames += budget;
            frames_before = 0;
            say(&bar, cell_ended_line(cell, record, out, at_once));
        }
        PoolEvent::Progress { frames } => {
            frames_before = frames;
            if let Some(b) = &bar {
                b.set_position(finished_frames + frames_before);
            }
        }
    };
    let summary = runner::run_pool(suite, file, out, options, &mut on_event)?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    eprintln!(
        "lfs suite {}: {} done, {} failed, {} held by other processes; `lfs suite status {}` for the table",
        file.name,
        summary.done,
        summary.failed,
        summary.busy,
        out.display()
    );
    if summary.failed > 0 {
        eprintln!("run the same command again to retry the failed cells");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
