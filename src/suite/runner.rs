//! Running a suite's cells: one cell in this process ([`run_cell`], what a SLURM array task
//! does), or all of them through a local pool of `lfs suite run --job-index` processes
//! ([`run_pool`]). Either way a cell resumes from its checkpoint, a finished cell is skipped,
//! and a failed one is recorded and retried on the next run.

use std::collections::{BTreeMap, VecDeque};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::device::DeviceChoice;
use crate::fsutil;
use crate::rl_loop::train;
use crate::rl_loop::{eval, LoopConfig};
use crate::rl_loop::{EncoderChoice, LoopEvent, LoopSpec, LoopSummary};
use crate::suite::cell::{Cell, CellLock, CellRecord, CellState, LOG_FILE};
use crate::suite::gpu_share::{self, GpuMemory, GpuShare, ShareRule};
use crate::suite::suite_file::{RowCommand, SuiteFile};
use crate::{Error, Result};

/// The suite as last run into a directory; later runs must match it but for the budget.
pub const SUITE_FILE: &str = "suite.toml";
/// The SAC config every cell runs (before its seed), as the last run resolved it.
pub const SAC_FILE: &str = "sac.resolved.toml";

/// The exit status of `lfs suite run --job-index I` when another process holds the cell: the
/// pool leaves that cell's record alone.
pub const BUSY_EXIT_CODE: i32 = 3;

/// The environment variables a scheduler sets to a job array task's index: SLURM's, then
/// Kubernetes' indexed jobs'.
pub const INDEX_ENV_VARS: [&str; 2] = ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"];

/// The job index a scheduler gave this process, if any.
pub fn index_from_env() -> Result<Option<usize>> {
    for var in INDEX_ENV_VARS {
        if let Ok(value) = std::env::var(var) {
            return value
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| Error::Config(format!("{var}={value:?} is not a job index")));
        }
    }
    Ok(None)
}

/// Writes the suite and its resolved SAC config into `out`, and returns that config; refuses a
/// suite that differs from the one whose cells are there in anything but the frame budget
/// (raising the budget extends the cells, which resume from their checkpoints).
pub fn prepare(suite: &SuiteFile, out: &Path) -> Result<LoopConfig> {
    // Every encoder row must point at something, and every train row's config load, before
    // anything is written.
    for row in &suite.encoders {
        for &seed in &suite.seeds {
            row.for_seed(seed).choice()?;
        }
        for &task in &suite.tasks {
            match row.command {
                RowCommand::Train => suite.train_config(row, task).map(drop)?,
                RowCommand::Eval => suite.sac_config(Some(task)).map(drop)?,
            }
        }
    }
    let sac = suite.sac_config(None)?;
    let suite_path = out.join(SUITE_FILE);
    let sac_path = out.join(SAC_FILE);
    let another = |what: &str| {
        Error::Config(format!(
            "{} holds another suite ({what} differs from this one's, beyond the budget): use another --out, or the suite file it was run with",
            out.display()
        ))
    };
    if let Some(text) = read_if_exists(&suite_path)? {
        let mut before: SuiteFile =
            toml::from_str(&text).map_err(|e| Error::checkpoint(&suite_path, format!("malformed: {e}")))?;
        before.num_train_frames = suite.num_train_frames;
        if &before != suite {
            return Err(another(SUITE_FILE));
        }
    }
    if let Some(text) = read_if_exists(&sac_path)? {
        let before = LoopConfig::from_toml_str(&text, &[])
            .map_err(|e| Error::checkpoint(&sac_path, format!("malformed: {e}")))?;
        if before.resume_key()? != sac.resume_key()? {
            return Err(another(SAC_FILE));
        }
    }
    let files = [
        (
            suite_path,
            toml::to_string(suite).map_err(|e| Error::Config(e.to_string()))?,
        ),
        (sac_path, sac.to_toml()?),
    ];
    for (path, text) in files {
        if read_if_exists(&path)?.as_deref() != Some(text.as_str()) {
            // Every cell of a job array writes them as it starts, at the same moment.
            fsutil::write_bytes_atomic_shared(&path, text.as_bytes())
                .map_err(|e| Error::checkpoint(&path, format!("writing: {e}")))?;
        }
    }
    Ok(sac)
}

fn read_if_exists(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::checkpoint(path, e.to_string())),
    }
}

/// What became of a cell this process was asked to run.
#[derive(Debug)]
pub enum CellOutcome {
    /// It ran to its budget now.
    Finished(LoopSummary),
    /// It had already finished.
    AlreadyDone,
    /// Another process holds its lock.
    Busy,
}

/// Runs cell `index` of `suite` in this process, into `out/cells/<name>/`, keeping its
/// `cell.json` current; an error is recorded there before it is returned.
pub fn run_cell(
    suite: &SuiteFile,
    out: &Path,
    index: usize,
    on_event: &mut dyn FnMut(LoopEvent),
) -> Result<CellOutcome> {
    let cells = Cell::all(suite);
    let cell = cells.get(index).ok_or_else(|| {
        Error::Config(format!(
            "job index {index} is out of range: the suite has {} cells (0..={})",
            cells.len(),
            cells.len() - 1
        ))
    })?;
    prepare(suite, out)?;
    let dir = cell.dir(out);
    let Some(_lock) = CellLock::acquire(&dir)? else {
        return Ok(CellOutcome::Busy);
    };
    let budget = suite.num_train_frames.0;
    let mut record = match CellRecord::read(&dir)? {
        Some(r) => r,
        None => CellRecord::pending(cell, &cell.encoder.source, budget),
    };
    if record.state == CellState::Done && record.frames_done >= budget {
        return Ok(CellOutcome::AlreadyDone);
    }
    record.state = CellState::Running;
    record.error = None;
    record.attempts += 1;
    record.host = hostname();
    record.pid = Some(std::process::id());
    record.write(&dir)?;

    let started = Instant::now();
    let wall_before = record.wall_clock_s;
    let result = (|| {
        let spec = LoopSpec {
            task: cell.task,
            encoder: cell.encoder.choice()?,
            allow_render_quality_mismatch: suite.allow_render_quality_mismatch,
            save_video: false,
        };
        if let EncoderChoice::Exported(path) = &spec.encoder {
            record.encoder_source = path.display().to_string();
        }
        let mut note = |event: LoopEvent| {
            if let LoopEvent::Episode(log) = &event {
                record.frames_done = log.frame;
                record.wall_clock_s = wall_before + started.elapsed().as_secs_f64();
                // Progress only: a record that cannot be written now is written at the end.
                let _ = record.write(&dir);
            }
            on_event(event);
        };
        match cell.encoder.command {
            RowCommand::Eval => {
                let mut sac = suite.sac_config(Some(cell.task))?;
                sac.run.seed = cell.seed;
                eval::run(&sac, &spec, &dir, &mut note)
            }
            RowCommand::Train => {
                let mut train = suite.train_config(&cell.encoder, cell.task)?;
                train.run.seed = cell.seed;
                train::run(&train, &spec, &dir, &mut note)
            }
        }
    })();
    record.wall_clock_s = wall_before + started.elapsed().as_secs_f64();
    record_result(&mut record, &dir, result)
}

/// Writes how the cell's run ended into its record (done with its pace, or failed with the
/// error), then passes that end on.
fn record_result(record: &mut CellRecord, dir: &Path, result: Result<LoopSummary>) -> Result<CellOutcome> {
    match result {
        Ok(summary) => {
            record.state = CellState::Done;
            record.frames_done = summary.frames_done;
            record.frames_per_s = record.frames_done as f64 / record.wall_clock_s.max(1e-9);
            record.write(dir)?;
            Ok(CellOutcome::Finished(summary))
        }
        Err(err) => {
            record.state = CellState::Failed;
            record.error = Some(err.to_string());
            record.write(dir)?;
            Err(err)
        }
    }
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
}

/// What the pool reports to its caller.
#[derive(Debug)]
pub enum PoolEvent<'a> {
    Started {
        todo: usize,
        done: usize,
        total: usize,
        jobs: usize,
        threads_per_cell: usize,
    },
    /// How many cells a GPU takes at once, at the start and whenever that changes; `reading`
    /// is the memory read for the decision, if any.
    GpuShare {
        share: &'a GpuShare,
        reading: Option<GpuMemory>,
    },
    /// A cell's process started.
    CellStarted { cell: &'a Cell },
    /// A cell's process ended; its record as it left it.
    CellEnded { cell: &'a Cell, record: &'a CellRecord },
    /// A cell ran out of GPU memory and is back in the queue (it resumes from its checkpoint);
    /// its GPU takes no more cells than `share.cap` from now on.
    CellRequeued { cell: &'a Cell, share: &'a GpuShare },
    /// Another process holds this cell's lock; the pool leaves it alone.
    CellBusy { cell: &'a Cell },
    /// About once a second: frames done over the cells this run works on.
    Progress { frames: u64 },
}

/// How the pool ended.
#[derive(Debug, Default)]
pub struct PoolSummary {
    pub done: usize,
    pub failed: usize,
    pub busy: usize,
}

/// How many cells run at once, and with how many threads each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolShape {
    pub jobs: usize,
    pub threads_per_cell: usize,
}

impl PoolShape {
    /// `jobs` (-j) and `threads_per_cell` (the suite's) where given. Otherwise one cell per
    /// core, one thread each (or per `threads_per_cell` threads): on 2 cores two 1-thread cells
    /// finish 1.6× the cells per hour of one 2-thread cell, their workers included (BENCHMARKS.md,
    /// issue 30), since an update gains little from a second thread. Threads not pinned: the
    /// cores divided among the cells that run at once. Cells on a GPU are limited further by
    /// its memory ([`GpuShare`]).
    pub fn choose(cores: usize, jobs: Option<usize>, threads_per_cell: Option<usize>, cells: usize) -> PoolShape {
        let cores = cores.max(1);
        let jobs = jobs.unwrap_or((cores / threads_per_cell.unwrap_or(1).max(1)).max(1));
        let threads_per_cell = threads_per_cell.unwrap_or((cores / jobs.min(cells.max(1))).max(1));
        PoolShape { jobs, threads_per_cell }
    }
}

/// The local pool's settings (`lfs suite run`'s flags).
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolOptions {
    /// `-j`: cells at once, memory unread. Default: [`PoolShape::choose`], and on a GPU what
    /// its memory holds.
    pub jobs: Option<usize>,
    /// `--gpu-memory-per-cell`: a GPU cell's footprint in MiB, instead of measuring it.
    pub gpu_memory_per_cell_mib: Option<u64>,
}

/// Where a cell runs, and the frame after which its first episode with updates ends: a cell
/// past it (and past where it resumed) holds its full GPU footprint.
#[derive(Debug, Clone, Copy)]
struct Placement {
    gpu: Option<usize>,
    seed_frames: u64,
}

fn placement(suite: &SuiteFile, cell: &Cell) -> Result<Placement> {
    let run = match cell.encoder.command {
        RowCommand::Eval => suite.sac_config(Some(cell.task))?.run,
        RowCommand::Train => suite.train_config(&cell.encoder, cell.task)?.run,
    };
    run.device.ensure_built()?;
    run.precision.check(&run.device)?;
    Ok(Placement {
        gpu: match run.device {
            DeviceChoice::Cpu => None,
            DeviceChoice::Cuda(ordinal) => Some(ordinal),
        },
        seed_frames: run.num_seed_frames.0,
    })
}

/// A cell the pool has started.
struct Running<'a> {
    cell: &'a Cell,
    child: Child,
    place: Placement,
    /// Warm once its record's frames pass this.
    warm_after: u64,
    warm: bool,
}

/// The GPUs the queued cells use, each with its share rule and first reading.
fn gpu_shares(
    gpus: impl IntoIterator<Item = usize>,
    max_cells: usize,
    options: &PoolOptions,
) -> Vec<(GpuShare, Option<GpuMemory>)> {
    let mut ordinals: Vec<usize> = gpus.into_iter().collect();
    ordinals.sort_unstable();
    ordinals.dedup();
    ordinals
        .into_iter()
        .map(|ordinal| {
            if options.jobs.is_some() {
                return (GpuShare::new(ordinal, max_cells, ShareRule::Fixed, None), None);
            }
            match gpu_share::read_gpu_memory(ordinal) {
                Ok(first) => {
                    let rule = match options.gpu_memory_per_cell_mib {
                        Some(per_cell_mib) => ShareRule::Given { per_cell_mib },
                        None => ShareRule::Measured,
                    };
                    (GpuShare::new(ordinal, max_cells, rule, Some(first)), Some(first))
                }
                Err(why) => (
                    GpuShare::new(ordinal, max_cells, ShareRule::Unreadable(why), None),
                    None,
                ),
            }
        })
        .collect()
}

/// How often the pool reads a GPU's memory while its cells run (only while the reading can
/// change the number of cells).
const GPU_READING_EVERY: Duration = Duration::from_secs(5);

/// Times a cell that ran out of GPU memory goes back in the queue before it counts as failed.
const OUT_OF_MEMORY_RETRIES: u32 = 2;

/// Runs every unfinished cell of the suite at `suite_path` in child processes
/// (`<this executable> suite run <suite> --out <out> --job-index I`), each with its output in
/// its cell's `log.txt`; how many at once: [`PoolShape`] and, for cells on a GPU,
/// [`GpuShare`]. Children die with the pool (`PR_SET_PDEATHSIG`), so a killed pool leaves no
/// cell running unsupervised; run it again to resume.
pub fn run_pool(
    suite_path: &Path,
    suite: &SuiteFile,
    out: &Path,
    options: PoolOptions,
    on_event: &mut dyn FnMut(PoolEvent),
) -> Result<PoolSummary> {
    if options.jobs == Some(0) {
        return Err(Error::Config("-j must be >= 1".into()));
    }
    if options.gpu_memory_per_cell_mib == Some(0) {
        return Err(Error::Config("--gpu-memory-per-cell must be >= 1 (MiB)".into()));
    }
    let cells = Cell::all(suite);
    // Before anything is written: a cell on a GPU this build cannot open is refused here.
    let placements = cells
        .iter()
        .map(|cell| placement(suite, cell))
        .collect::<Result<Vec<_>>>()?;
    prepare(suite, out)?;
    let exe = std::env::current_exe().map_err(|e| Error::Config(format!("locating the lfs executable: {e}")))?;
    let budget = suite.num_train_frames.0;
    let mut todo = Vec::new();
    let mut summary = PoolSummary::default();
    for (cell, place) in cells.iter().zip(placements) {
        match CellRecord::read(&cell.dir(out))? {
            Some(r) if r.state == CellState::Done && r.frames_done >= budget => summary.done += 1,
            _ => todo.push((cell, place)),
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shape = PoolShape::choose(cores, options.jobs, suite.threads_per_cell, todo.len());
    let (jobs, threads) = (shape.jobs, shape.threads_per_cell);
    on_event(PoolEvent::Started {
        todo: todo.len(),
        done: summary.done,
        total: cells.len(),
        jobs,
        threads_per_cell: threads,
    });
    let first_readings = gpu_shares(todo.iter().filter_map(|(_, p)| p.gpu), jobs, &options);
    for (share, reading) in first_readings.iter().map(|(s, r)| (s, *r)) {
        on_event(PoolEvent::GpuShare { share, reading });
    }
    let pool = Pool {
        suite_path,
        out,
        exe,
        budget,
        jobs,
        threads,
        queue: todo.into_iter().collect(),
        running: Vec::new(),
        // By ordinal: every queued GPU cell's GPU has one.
        shares: first_readings
            .into_iter()
            .map(|(share, _)| (share.ordinal, share))
            .collect(),
        requeued: vec![0u32; cells.len()],
        last_reading: None,
        summary,
    };
    pool.run(on_event)
}

/// The pool as it runs: what each cell's process is started with, the cells queued and
/// running, each GPU's share, and the tally so far.
struct Pool<'a> {
    suite_path: &'a Path,
    out: &'a Path,
    exe: PathBuf,
    budget: u64,
    jobs: usize,
    threads: usize,
    queue: VecDeque<(&'a Cell, Placement)>,
    running: Vec<Running<'a>>,
    /// By ordinal.
    shares: BTreeMap<usize, GpuShare>,
    /// Times each cell (by index) went back in the queue out of GPU memory.
    requeued: Vec<u32>,
    /// When a GPU's memory was last read.
    last_reading: Option<Instant>,
    summary: PoolSummary,
}

impl Pool<'_> {
    /// Starts, settles and reports cells until none is queued or running; the tally.
    fn run(mut self, on_event: &mut dyn FnMut(PoolEvent)) -> Result<PoolSummary> {
        let mut last_progress = Instant::now();
        loop {
            self.start_queued(on_event)?;
            if self.running.is_empty() {
                break;
            }
            self.reap_ended(on_event)?;
            if last_progress.elapsed() >= Duration::from_secs(1) {
                self.report_progress(on_event);
                last_progress = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(self.summary)
    }

    /// Starts queued cells while fewer than `jobs` run and the next one's GPU takes another; a
    /// cell another process holds leaves the queue as busy.
    fn start_queued(&mut self, on_event: &mut dyn FnMut(PoolEvent)) -> Result<()> {
        while self.running.len() < self.jobs {
            let Some(&(cell, place)) = self.queue.front() else {
                break;
            };
            if let Some(ordinal) = place.gpu {
                if cells_on(&self.running, ordinal) >= self.shares[&ordinal].cap {
                    break;
                }
            }
            self.queue.pop_front();
            if CellLock::is_held(&cell.dir(self.out)) {
                self.summary.busy += 1;
                on_event(PoolEvent::CellBusy { cell });
                continue;
            }
            let frames_before = CellRecord::read(&cell.dir(self.out))?.map_or(0, |r| r.frames_done);
            let child = spawn_cell(&self.exe, self.suite_path, self.out, cell, self.threads)?;
            on_event(PoolEvent::CellStarted { cell });
            self.running.push(Running {
                cell,
                child,
                place,
                warm_after: frames_before.max(place.seed_frames),
                warm: false,
            });
        }
        Ok(())
    }

    /// Settles every cell whose process has ended: done, failed, busy, or (out of GPU memory,
    /// retries left) back at the front of the queue with its GPU's cap lowered.
    fn reap_ended(&mut self, on_event: &mut dyn FnMut(PoolEvent)) -> Result<()> {
        let mut i = 0;
        while i < self.running.len() {
            let status = self.running[i]
                .child
                .try_wait()
                .map_err(|e| Error::Config(format!("waiting for a cell process: {e}")))?;
            match status {
                None => i += 1,
                Some(status) if status.code() == Some(BUSY_EXIT_CODE) => {
                    // Another process took the cell between our check and the child's start.
                    let ended = self.running.swap_remove(i);
                    self.summary.busy += 1;
                    on_event(PoolEvent::CellBusy { cell: ended.cell });
                }
                Some(status) => {
                    let ended = self.running.swap_remove(i);
                    let cell = ended.cell;
                    let record = settle(cell, self.out, self.budget, status)?;
                    on_event(PoolEvent::CellEnded { cell, record: &record });
                    let out_of_memory = record.state == CellState::Failed
                        && record.error.as_deref().is_some_and(gpu_share::is_out_of_memory);
                    match (ended.place.gpu, record.state) {
                        (_, CellState::Done) => self.summary.done += 1,
                        (Some(ordinal), _) if out_of_memory && self.requeued[cell.index] < OUT_OF_MEMORY_RETRIES => {
                            self.requeued[cell.index] += 1;
                            let still = cells_on(&self.running, ordinal);
                            let share = self.shares.get_mut(&ordinal).expect("a GPU cell's GPU has a share");
                            share.out_of_memory(still);
                            self.queue.push_front((cell, ended.place));
                            on_event(PoolEvent::CellRequeued { cell, share });
                        }
                        _ => self.summary.failed += 1,
                    }
                }
            }
        }
        Ok(())
    }

    /// Reports the frames the running cells have done, marks those past their `warm_after`
    /// warm, and reads a GPU's memory where that can change its cap (at most every
    /// [`GPU_READING_EVERY`]).
    fn report_progress(&mut self, on_event: &mut dyn FnMut(PoolEvent)) {
        let mut frames = 0;
        for r in &mut self.running {
            let done = CellRecord::read(&r.cell.dir(self.out))
                .ok()
                .flatten()
                .map_or(0, |rec| rec.frames_done);
            frames += done;
            r.warm |= done > r.warm_after;
        }
        on_event(PoolEvent::Progress { frames });
        // nvidia-smi costs tens of ms of a core: every few seconds is enough.
        let reading_due = self.last_reading.is_none_or(|t| t.elapsed() >= GPU_READING_EVERY);
        for share in self.shares.values_mut() {
            let on_it = self.running.iter().filter(|r| r.place.gpu == Some(share.ordinal));
            let (count, warm) = on_it.fold((0, 0), |(n, w), r| (n + 1, w + usize::from(r.warm)));
            if reading_due && share.wants_reading(count, warm) {
                self.last_reading = Some(Instant::now());
                // A failed reading leaves the cap where it is until the next one.
                if let Ok(reading) = gpu_share::read_gpu_memory(share.ordinal) {
                    if share.observe(reading, count) {
                        on_event(PoolEvent::GpuShare {
                            share,
                            reading: Some(reading),
                        });
                    }
                }
            }
        }
    }
}

/// How many of the running cells are on GPU `ordinal`.
fn cells_on(running: &[Running], ordinal: usize) -> usize {
    running.iter().filter(|r| r.place.gpu == Some(ordinal)).count()
}

fn spawn_cell(exe: &Path, suite_path: &Path, out: &Path, cell: &Cell, threads: usize) -> Result<Child> {
    let dir = cell.dir(out);
    std::fs::create_dir_all(&dir).map_err(|e| Error::checkpoint(&dir, e.to_string()))?;
    let log_path = dir.join(LOG_FILE);
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| Error::checkpoint(&log_path, e.to_string()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| Error::checkpoint(&log_path, e.to_string()))?;
    let mut command = Command::new(exe);
    command
        .arg("suite")
        .arg("run")
        .arg(suite_path)
        .arg("--out")
        .arg(out)
        .arg("--job-index")
        .arg(cell.index.to_string())
        .env("RAYON_NUM_THREADS", threads.to_string())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    // The scheduler variables are this process's, not the cell's: the flag names the cell.
    for var in INDEX_ENV_VARS {
        command.env_remove(var);
    }
    die_with_parent(&mut command);
    command
        .spawn()
        .map_err(|e| Error::Config(format!("starting {} for cell {}: {e}", exe.display(), cell.name())))
}

#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

/// The record of a cell whose process has exited: what it wrote, or `failed` with the exit
/// status when it died without saying (a signal, a crash).
fn settle(cell: &Cell, out: &Path, budget: u64, status: ExitStatus) -> Result<CellRecord> {
    let dir = cell.dir(out);
    let mut record = CellRecord::read(&dir)?.unwrap_or_else(|| CellRecord::pending(cell, &cell.encoder.source, budget));
    let finished = record.state == CellState::Done && record.frames_done >= budget;
    if status.success() && finished {
        return Ok(record);
    }
    if record.state != CellState::Failed {
        record.state = CellState::Failed;
        record.error = Some(format!(
            "the cell's process {} (see {})",
            describe(status),
            dir.join(LOG_FILE).display()
        ));
        record.write(&dir)?;
    }
    Ok(record)
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => format!("ended: {status}"),
    }
}

/// The absolute form of `path` (relative to the working directory), for scripts that run
/// elsewhere.
pub fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::PoolShape;

    #[test]
    fn the_default_pool_runs_a_cell_per_core() {
        let shape = |cores, jobs, threads, cells| {
            let s = PoolShape::choose(cores, jobs, threads, cells);
            (s.jobs, s.threads_per_cell)
        };
        // One cell per core, one thread each; fewer cells than cores share them out.
        assert_eq!(shape(2, None, None, 24), (2, 1));
        assert_eq!(shape(16, None, None, 100), (16, 1));
        assert_eq!(shape(2, None, None, 1), (2, 2));
        // Pinned threads count as given; -j as given, the cores divided among the cells.
        assert_eq!(shape(8, None, Some(2), 100), (4, 2));
        assert_eq!(shape(8, None, Some(3), 100), (2, 3));
        assert_eq!(shape(2, Some(2), None, 24), (2, 1));
        assert_eq!(shape(2, Some(2), None, 1), (2, 2));
        assert_eq!(shape(1, None, None, 3), (1, 1));
    }
}
