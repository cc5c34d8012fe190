//! One dm_control worker process and the protocol it speaks (see `python/dmc_worker.py`).

use std::collections::VecDeque;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Env, EnvSpec, RenderQuality, Task, TimeStep, DEFAULT_ACTION_REPEAT, FRAME_BYTES, FRAME_SIZE};
use crate::{Error, Result};

/// The worker's source, embedded so that `lfs` runs from any directory (`python -c`).
pub const WORKER_SOURCE: &str = include_str!("../../python/dmc_worker.py");

/// Environment variable naming the Python interpreter that has dm_control installed.
pub const PYTHON_ENV_VAR: &str = "LFS_PYTHON";

/// The venv `make setup` creates, relative to the working directory (the repository root).
const DEFAULT_PYTHON: &str = ".venv/bin/python";

/// How much of a worker's stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// How long a worker may take to import dm_control, load its task and render a first frame.
/// Generous: many workers starting at once on a loaded 2-core machine take tens of seconds.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(300);

/// Default [`DmcConfig::reply_timeout`].
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// dm_control seeds a numpy `RandomState`, which only takes 32-bit seeds.
pub const MAX_SEED: u64 = u32::MAX as u64;

/// Larger replies than this mean the stream is out of sync, not a real message.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// The interpreter to run workers with: `$LFS_PYTHON` if set, else `.venv/bin/python` in the
/// working directory, else the venv of the checkout `lfs` was built from (so a development
/// build works from any directory), else `.venv/bin/python` (reported as missing on use).
pub fn default_python() -> PathBuf {
    if let Some(python) = std::env::var_os(PYTHON_ENV_VAR) {
        return PathBuf::from(python);
    }
    let local = PathBuf::from(DEFAULT_PYTHON);
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_PYTHON);
    if !local.exists() && checkout.exists() {
        return checkout;
    }
    local
}

/// Everything that decides what a worker simulates and renders.
#[derive(Debug, Clone, PartialEq)]
pub struct DmcConfig {
    pub task: Task,
    /// Env steps per agent step (docs/design.md §8: 2).
    pub action_repeat: u32,
    pub render_quality: RenderQuality,
    /// End every episode after at most this many env steps, as the task's time limit does
    /// (`env.episode_frames`); `None`: the task's own limit alone.
    pub episode_frames: Option<u32>,
    /// Python interpreter with python/requirements.txt installed.
    pub python: PathBuf,
    /// A reset or step that takes longer than this means the worker hung: it is killed and
    /// the episode is lost. Steps take milliseconds to a second.
    pub reply_timeout: Duration,
}

impl DmcConfig {
    /// docs/design.md §8 defaults for `task`, with the interpreter from [`default_python`].
    pub fn new(task: Task) -> Self {
        Self {
            task,
            action_repeat: DEFAULT_ACTION_REPEAT,
            render_quality: RenderQuality::Default,
            episode_frames: None,
            python: default_python(),
            reply_timeout: DEFAULT_REPLY_TIMEOUT,
        }
    }
}

/// A worker process that has been spawned but has not said hello yet. Spawning several and
/// then waiting lets their (slow) start-ups overlap.
pub struct PendingWorker {
    config: DmcConfig,
    process: WorkerProcess,
}

impl PendingWorker {
    /// Waits for the worker's hello: the task is loaded and has rendered a frame.
    pub fn finish(mut self) -> Result<DmcEnv> {
        let hello = match self.process.read_message(STARTUP_TIMEOUT) {
            Ok(body) => body,
            Err(reason) => return Err(self.process.death_error(&self.config, "failed to start", &reason)),
        };
        let spec: EnvSpec = match hello.split_first() {
            Some((b'H', json)) => serde_json::from_slice(json).map_err(|e| Error::Env {
                task: self.config.task.to_string(),
                reason: format!("unreadable hello from the worker: {e}"),
            })?,
            _ => return Err(self.process.protocol_error(&self.config, "expected a hello message")),
        };
        let expected = (
            self.config.task,
            self.config.action_repeat,
            self.config.render_quality,
            self.config.episode_frames,
        );
        if (spec.task, spec.action_repeat, spec.render_quality, spec.episode_frames) != expected
            || (spec.height, spec.width) != (FRAME_SIZE, FRAME_SIZE)
        {
            return Err(Error::Env {
                task: self.config.task.to_string(),
                reason: format!("worker loaded {spec:?}, asked for {expected:?}"),
            });
        }
        Ok(DmcEnv {
            config: self.config,
            spec,
            process: self.process,
            dead: false,
            awaiting_reply: false,
        })
    }
}

/// One dm_control task in a worker process.
pub struct DmcEnv {
    config: DmcConfig,
    spec: EnvSpec,
    process: WorkerProcess,
    /// The process has exited (or was killed); every request fails until it is replaced.
    dead: bool,
    /// A request was sent and its reply not read yet.
    awaiting_reply: bool,
}

impl DmcEnv {
    /// Spawns a worker and waits until it has loaded the task.
    pub fn spawn(config: DmcConfig) -> Result<Self> {
        Self::start(config)?.finish()
    }

    /// Spawns a worker without waiting for it; see [`PendingWorker::finish`].
    pub fn start(config: DmcConfig) -> Result<PendingWorker> {
        let process = WorkerProcess::spawn(&config)?;
        Ok(PendingWorker { config, process })
    }

    pub fn config(&self) -> &DmcConfig {
        &self.config
    }

    /// The worker's process id (tests kill it to check crash handling).
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// True once the worker process has died; the environment must be replaced.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Sends a reset without waiting for the reply (see [`DmcEnv::receive`]).
    pub fn send_reset(&mut self, seed: u64) -> Result<()> {
        if seed > MAX_SEED {
            return Err(self.error(format!(
                "seed {seed} is out of range: dm_control seeds numpy's RandomState, which takes 0..=2^32-1"
            )));
        }
        let mut body = Vec::with_capacity(9);
        body.push(b'R');
        body.extend_from_slice(&seed.to_le_bytes());
        self.send(&body)
    }

    /// Sends one agent step without waiting for the reply. The action must have `action_dim`
    /// finite values in [-1, 1]; anything else is refused here, before the worker sees it.
    pub fn send_step(&mut self, action: &[f32]) -> Result<()> {
        if action.len() != self.spec.action_dim {
            return Err(self.error(format!(
                "action has {} values, the task takes {}",
                action.len(),
                self.spec.action_dim
            )));
        }
        if let Some(bad) = action.iter().find(|a| !(-1.0..=1.0).contains(*a)) {
            return Err(self.error(format!("action value {bad} is outside [-1, 1]")));
        }
        let mut body = Vec::with_capacity(1 + 4 * action.len());
        body.push(b'S');
        for a in action {
            body.extend_from_slice(&a.to_le_bytes());
        }
        self.send(&body)
    }

    /// Reads the reply to the last request: reward, discount, last flag, env steps, the frame,
    /// then one f64 per [`EnvSpec::state_names`] entry.
    pub fn receive(&mut self) -> Result<TimeStep> {
        self.awaiting_reply = false;
        let body = self.read_reply()?;
        const FRAME_START: usize = 8 + 8 + 1 + 4;
        let state_start = FRAME_START + FRAME_BYTES;
        let state_dim = self.spec.state_names.len();
        match body.split_first() {
            Some((b'O', rest)) if rest.len() == state_start + 8 * state_dim => {
                let f64_at = |i: usize| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&rest[i..i + 8]);
                    f64::from_le_bytes(b)
                };
                let mut steps = [0u8; 4];
                steps.copy_from_slice(&rest[17..FRAME_START]);
                Ok(TimeStep {
                    reward: f64_at(0),
                    discount: f64_at(8),
                    last: rest[16] != 0,
                    env_steps: u32::from_le_bytes(steps),
                    frame: rest[FRAME_START..state_start].to_vec(),
                    state: (0..state_dim).map(|i| f64_at(state_start + 8 * i)).collect(),
                })
            }
            _ => Err(self.unexpected(&body)),
        }
    }

    /// Makes the physics state invalid (NaN positions), so that the next step raises
    /// dm_control's own `PhysicsError`. For tests of the error path.
    pub fn poison(&mut self) -> Result<()> {
        self.send(b"N")?;
        self.awaiting_reply = false;
        let body = self.read_reply()?;
        if body.as_slice() == b"P" {
            Ok(())
        } else {
            Err(self.unexpected(&body))
        }
    }

    fn send(&mut self, body: &[u8]) -> Result<()> {
        if self.dead {
            return Err(self.error("the worker has died; the environment must be restarted".into()));
        }
        if self.awaiting_reply {
            return Err(self.error("a request was sent before the previous reply was read".into()));
        }
        match self.process.write_message(body) {
            Ok(()) => {
                self.awaiting_reply = true;
                Ok(())
            }
            Err(reason) => Err(self.died(&reason)),
        }
    }

    /// The reply body; `b'E'` replies (the worker refused or dm_control raised) become errors
    /// with the worker's message, and a closed pipe becomes a death error.
    fn read_reply(&mut self) -> Result<Vec<u8>> {
        if self.dead {
            return Err(self.error("the worker has died; the environment must be restarted".into()));
        }
        let body = self
            .process
            .read_message(self.config.reply_timeout)
            .map_err(|reason| self.died(&reason))?;
        if let Some((b'E', message)) = body.split_first() {
            return Err(self.error(format!("the worker refused: {}", String::from_utf8_lossy(message))));
        }
        Ok(body)
    }

    fn died(&mut self, reason: &str) -> Error {
        self.dead = true;
        self.process.death_error(&self.config, "worker died", reason)
    }

    fn unexpected(&mut self, body: &[u8]) -> Error {
        // The stream can no longer be trusted: treat the worker as dead so it gets replaced.
        self.dead = true;
        let _ = self.process.child.kill();
        let head: Vec<u8> = body.iter().take(16).copied().collect();
        self.error(format!(
            "unexpected reply from the worker ({} bytes, starting {head:?})",
            body.len()
        ))
    }

    fn error(&self, reason: String) -> Error {
        Error::Env {
            task: self.config.task.to_string(),
            reason,
        }
    }
}

impl Env for DmcEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64) -> Result<TimeStep> {
        self.send_reset(seed)?;
        self.receive()
    }

    fn step(&mut self, action: &[f32]) -> Result<TimeStep> {
        self.send_step(action)?;
        self.receive()
    }
}

impl Drop for DmcEnv {
    fn drop(&mut self) {
        // The process itself is shut down when `self.process` drops, right after.
        if !self.dead && !self.awaiting_reply {
            let _ = self.process.write_message(b"Q");
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The child process, its pipes, and the last few KiB of its stderr.
struct WorkerProcess {
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    /// Messages read from the worker's stdout by a reader thread, so that waiting for one can
    /// time out (a hung worker must not hang `lfs`).
    replies: Receiver<std::result::Result<Vec<u8>, String>>,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    stderr_thread: Option<JoinHandle<()>>,
    python: PathBuf,
}

impl WorkerProcess {
    fn spawn(config: &DmcConfig) -> Result<Self> {
        let mut command = Command::new(&config.python);
        command
            .arg("-c")
            .arg(WORKER_SOURCE)
            .args(["--task", config.task.name()])
            .args(["--action-repeat", &config.action_repeat.to_string()])
            .args(["--render-quality", config.render_quality.name()])
            .args(["--size", &FRAME_SIZE.to_string()])
            .args(["--episode-frames", &config.episode_frames.unwrap_or(0).to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Headless rendering: Mesa's EGL works without a GPU or a display. A user's own choice
        // (osmesa, glfw) wins.
        if std::env::var_os("MUJOCO_GL").is_none() {
            command.env("MUJOCO_GL", "egl");
        }
        let mut child = command.spawn().map_err(|e| Error::Env {
            task: config.task.to_string(),
            reason: format!(
                "cannot run the Python interpreter {}: {e}; run `make setup` to create .venv, or point \
                 {PYTHON_ENV_VAR} (or --python) at a Python with python/requirements.txt installed",
                config.python.display()
            ),
        })?;
        // Invariant: all three pipes were requested with Stdio::piped() just above.
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut stderr = child.stderr.take().expect("piped stderr");
        let stderr_tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_BYTES)));
        let tail = Arc::clone(&stderr_tail);
        // Drain stderr continuously (a full pipe would block the worker) and keep its tail.
        let stderr_thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut tail) = tail.lock() {
                    tail.extend(&buf[..n]);
                    let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                    tail.drain(..excess);
                }
            }
        });
        let (sender, replies) = mpsc::channel();
        // Ends at the first error, which includes the end of output when the worker exits.
        std::thread::spawn(move || loop {
            let message = read_message(&mut stdout);
            let failed = message.is_err();
            if sender.send(message).is_err() || failed {
                break;
            }
        });
        Ok(Self {
            child,
            stdin: Some(BufWriter::new(stdin)),
            replies,
            stderr_tail,
            stderr_thread: Some(stderr_thread),
            python: config.python.clone(),
        })
    }

    fn write_message(&mut self, body: &[u8]) -> std::result::Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("the worker's stdin is closed")?;
        let len = u32::try_from(body.len()).map_err(|_| "request too large")?;
        let write = |w: &mut BufWriter<ChildStdin>| -> std::io::Result<()> {
            w.write_all(&len.to_le_bytes())?;
            w.write_all(body)?;
            w.flush()
        };
        write(stdin).map_err(|e| format!("cannot write to the worker: {e}"))
    }

    /// The next message, or an error if the worker closed its output or sent nothing within
    /// `timeout` (then it is killed: its state is unknown).
    fn read_message(&mut self, timeout: Duration) -> std::result::Result<Vec<u8>, String> {
        match self.replies.recv_timeout(timeout) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                Err(format!(
                    "no reply within {} s; the worker was killed",
                    timeout.as_secs_f64()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => Err("the worker closed its output".to_string()),
        }
    }

    /// Describes a dead worker: the exit status (signal names for kills and segfaults) and
    /// the tail of its stderr, which holds Python's traceback.
    fn death_error(&mut self, config: &DmcConfig, what: &str, reason: &str) -> Error {
        let status = self.wait_for_exit(Duration::from_secs(5));
        let stderr = self.stderr_text();
        let mut message = format!("{what}: {reason} ({})", describe_status(status));
        if stderr.contains("ModuleNotFoundError") || stderr.contains("ImportError") {
            message.push_str(&format!(
                "; a Python dependency is missing from {}: run `make setup`, or point {PYTHON_ENV_VAR} (or \
                 --python) at a Python with python/requirements.txt installed",
                self.python.display()
            ));
        }
        if stderr.trim().is_empty() {
            message.push_str("; the worker wrote nothing to stderr");
        } else {
            message.push_str(&format!("; worker stderr:\n{}", stderr.trim_end()));
        }
        Error::Env {
            task: config.task.to_string(),
            reason: message,
        }
    }

    fn protocol_error(&mut self, config: &DmcConfig, reason: &str) -> Error {
        let _ = self.child.kill();
        self.death_error(config, "protocol error", reason)
    }

    /// Waits up to `limit` for the process to exit, then kills it. Also waits for the stderr
    /// thread so the tail is complete.
    fn wait_for_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    let _ = self.child.kill();
                    break self.child.wait().ok();
                }
                Err(_) => break None,
            }
        };
        if let Some(thread) = self.stderr_thread.take() {
            let _ = thread.join();
        }
        status
    }

    fn stderr_text(&self) -> String {
        match self.stderr_tail.lock() {
            Ok(tail) => String::from_utf8_lossy(&tail.iter().copied().collect::<Vec<u8>>()).into_owned(),
            Err(_) => String::new(),
        }
    }

    /// Closes stdin (the worker exits on end of input), waits briefly, then kills.
    fn shut_down(&mut self) {
        self.stdin = None;
        self.wait_for_exit(Duration::from_secs(2));
    }
}

/// Reads one length-prefixed message.
fn read_message(stdout: &mut BufReader<ChildStdout>) -> std::result::Result<Vec<u8>, String> {
    let mut header = [0u8; 4];
    stdout.read_exact(&mut header).map_err(|e| match e.kind() {
        ErrorKind::UnexpectedEof => "the worker closed its output".to_string(),
        _ => format!("cannot read from the worker: {e}"),
    })?;
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_MESSAGE_BYTES {
        return Err(format!(
            "the worker sent a {len}-byte message: its output is out of sync"
        ));
    }
    let mut body = vec![0u8; len];
    stdout
        .read_exact(&mut body)
        .map_err(|e| format!("truncated message from the worker: {e}"))?;
    Ok(body)
}

fn describe_status(status: Option<ExitStatus>) -> String {
    match status {
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(signal)) => format!("killed by signal {signal} ({})", signal_name(signal)),
            _ => status.to_string(),
        },
        None => "exit status unknown".to_string(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        2 => "SIGINT",
        6 => "SIGABRT",
        7 => "SIGBUS",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// Checks that `python` exists before anything is spawned, for a clearer message in the CLI.
pub fn check_python(python: &Path) -> Result<()> {
    if python.components().count() > 1 && !python.exists() {
        return Err(Error::Env {
            task: "(all)".into(),
            reason: format!(
                "Python interpreter {} not found: run `make setup` to create .venv, or set {PYTHON_ENV_VAR} \
                 (or --python)",
                python.display()
            ),
        });
    }
    Ok(())
}
