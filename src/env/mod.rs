//! DeepMind Control environments from Rust.
//!
//! dm_control runs in Python worker processes (`python/dmc_worker.py`, embedded in the binary)
//! that speak a length-prefixed binary protocol on stdin/stdout; [`DmcEnv`] is one worker,
//! [`EnvPool`] runs N of them in parallel and restarts the ones that die. Their frames become
//! the stacked observations of docs/design.md §1 through [`crate::observation::FrameStack`].
//!
//! Everything follows docs/design.md §8: 84×84 RGB frames, action repeat 2 (rewards summed), actions in
//! [-1, 1], camera 0 for suite tasks and `front_close` for reach_duplo and the Jaco tasks.

mod dmc;
mod pool;

use std::fmt;
use std::str::FromStr;

pub use dmc::{
    check_python, default_python, DmcConfig, DmcEnv, PendingWorker, MAX_SEED, PYTHON_ENV_VAR, WORKER_SOURCE,
};
pub use pool::{EnvCommand, EnvPool, InFlight, PoolReply};

use crate::Result;

pub use crate::observation::{FRAME_BYTES, FRAME_SIZE};
/// Agent steps repeat each action this many env steps unless told otherwise (docs/design.md §8).
pub const DEFAULT_ACTION_REPEAT: u32 = 2;

/// The tasks of the paper: its nine DMControl tasks (docs/design.md §8) and URLB's four Jaco
/// reach tasks (its Table 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    ReachDuplo,
    CartpoleSwingup,
    WalkerRun,
    ReacherHard,
    CheetahRun,
    WalkerStand,
    BallInCupCatch,
    WalkerWalk,
    FingerSpin,
    JacoReachBottomLeft,
    JacoReachBottomRight,
    JacoReachTopLeft,
    JacoReachTopRight,
}

/// Which of the paper's tables a task belongs to, and so how its returns are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Benchmark {
    /// The nine DMControl tasks (Table 3, Figure 4): returns up to 1000, normalised by an expert.
    Dmc,
    /// URLB's Jaco reach tasks (Table 2): raw returns, at most 250 (a reward of at most 1 per
    /// control step of a 10 s episode).
    UrlbJaco,
}

impl Task {
    /// All thirteen: the DMControl tasks in the paper's Table 3 order, then the Jaco tasks.
    pub const ALL: [Task; 13] = {
        let mut all = [Task::ReachDuplo; 13];
        let mut i = 0;
        while i < all.len() {
            all[i] = if i < Task::DMC.len() {
                Task::DMC[i]
            } else {
                Task::JACO[i - Task::DMC.len()]
            };
            i += 1;
        }
        all
    };
    /// The nine DMControl tasks, seen tasks first, in the paper's Table 3 order.
    pub const DMC: [Task; 9] = [
        Task::ReachDuplo,
        Task::CartpoleSwingup,
        Task::WalkerRun,
        Task::ReacherHard,
        Task::CheetahRun,
        Task::WalkerStand,
        Task::BallInCupCatch,
        Task::WalkerWalk,
        Task::FingerSpin,
    ];
    /// URLB's Jaco reach tasks in the paper's Table 2 order.
    pub const JACO: [Task; 4] = [
        Task::JacoReachBottomLeft,
        Task::JacoReachBottomRight,
        Task::JacoReachTopLeft,
        Task::JacoReachTopRight,
    ];
    /// The tasks whose videos are used for pre-training.
    pub const SEEN: [Task; 3] = [Task::ReachDuplo, Task::WalkerRun, Task::CartpoleSwingup];

    /// The name used on the command line, in folder names and by the worker.
    pub fn name(self) -> &'static str {
        match self {
            Task::ReachDuplo => "reach_duplo",
            Task::CartpoleSwingup => "cartpole_swingup",
            Task::WalkerRun => "walker_run",
            Task::ReacherHard => "reacher_hard",
            Task::CheetahRun => "cheetah_run",
            Task::WalkerStand => "walker_stand",
            Task::BallInCupCatch => "ball_in_cup_catch",
            Task::WalkerWalk => "walker_walk",
            Task::FingerSpin => "finger_spin",
            Task::JacoReachBottomLeft => "jaco_reach_bottom_left",
            Task::JacoReachBottomRight => "jaco_reach_bottom_right",
            Task::JacoReachTopLeft => "jaco_reach_top_left",
            Task::JacoReachTopRight => "jaco_reach_top_right",
        }
    }

    /// The camera the frames come from.
    pub fn camera(self) -> &'static str {
        match self.benchmark() {
            Benchmark::UrlbJaco => "front_close",
            Benchmark::Dmc if self == Task::ReachDuplo => "front_close",
            Benchmark::Dmc => "0",
        }
    }

    pub fn benchmark(self) -> Benchmark {
        if Task::JACO.contains(&self) {
            Benchmark::UrlbJaco
        } else {
            Benchmark::Dmc
        }
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Task {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Task::ALL.into_iter().find(|t| t.name() == s.trim()).ok_or_else(|| {
            let known: Vec<&str> = Task::ALL.iter().map(|t| t.name()).collect();
            format!("unknown task {s:?}; known tasks: {}", known.join(", "))
        })
    }
}

/// How MuJoCo renders the frames. Recorded with every dataset and run: the two give visibly
/// different pixels, so pre-training and evaluation must not mix them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum RenderQuality {
    /// dm_control's own settings (shadows, 4× multisampling): what published numbers use.
    #[default]
    Default,
    /// No shadows and no multisampling (`model.vis.quality.shadowsize = 0`, `offsamples = 0`):
    /// several times cheaper with software rendering.
    Fast,
}

impl RenderQuality {
    /// Both, the default first.
    pub const ALL: [RenderQuality; 2] = [RenderQuality::Default, RenderQuality::Fast];

    /// The name used on the command line, in sidecars and in datasets.
    pub fn name(self) -> &'static str {
        match self {
            RenderQuality::Default => "default",
            RenderQuality::Fast => "fast",
        }
    }

    /// `"default" or "fast"`, for messages.
    pub fn names() -> String {
        let quoted: Vec<String> = RenderQuality::ALL.iter().map(|q| format!("{:?}", q.name())).collect();
        quoted.join(" or ")
    }
}

impl fmt::Display for RenderQuality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RenderQuality {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        RenderQuality::ALL
            .into_iter()
            .find(|q| q.name() == s)
            .ok_or_else(|| format!("unknown render quality {s:?}; known: {}", RenderQuality::names()))
    }
}

/// What a loaded environment is, as its worker reported it at start-up.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EnvSpec {
    pub task: Task,
    /// Camera name or index the frames are rendered from.
    pub camera: String,
    /// Number of action dimensions; every action is in [-1, 1].
    pub action_dim: usize,
    /// Env steps per agent step.
    pub action_repeat: u32,
    pub render_quality: RenderQuality,
    /// The episode's cut, in env steps, when one was asked for (`--episode-frames`); `None`: the
    /// task's own time limit alone.
    #[serde(default)]
    pub episode_frames: Option<u32>,
    pub height: usize,
    pub width: usize,
    /// Seconds of simulated time per env step.
    pub control_timestep: f64,
    /// Version of the `mujoco` Python package the worker runs.
    pub mujoco: String,
    /// Version of the `dm_control` Python package the worker runs.
    pub dm_control: String,
    /// Names of the values of [`TimeStep::state`]: the task's non-image observations flattened
    /// in C order, in the observation dict's order; a scalar is its key (`height`), an array of
    /// n values is `key[0]` .. `key[n-1]`. Empty from a worker that reports no state.
    #[serde(default)]
    pub state_names: Vec<String>,
}

impl EnvSpec {
    /// Seconds of simulated time per agent step (one video frame).
    pub fn agent_timestep(&self) -> f64 {
        self.control_timestep * f64::from(self.action_repeat)
    }
}

/// What one reset or agent step returns.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeStep {
    /// (84, 84, 3) uint8 RGB, row-major (HWC), as MuJoCo rendered it.
    pub frame: Vec<u8>,
    /// Sum of the rewards over the action repeat (0 after a reset).
    pub reward: f64,
    /// Product of the discounts over the action repeat (1 after a reset).
    pub discount: f64,
    /// The episode ended within this agent step; the next call must be a reset.
    pub last: bool,
    /// Env steps actually taken (fewer than the action repeat when the episode ended early).
    pub env_steps: u32,
    /// The task's physical state after this step: dm_control's proprioceptive observation (what
    /// state-based SAC sees) flattened, one value per [`EnvSpec::state_names`] entry.
    pub state: Vec<f64>,
}

/// A DMControl-style environment: reset with a seed, then step with actions in [-1, 1].
///
/// The same seed and the same actions give the same episode (rewards and frames).
pub trait Env {
    fn spec(&self) -> &EnvSpec;
    /// Starts a new episode; the returned step carries the first frame.
    fn reset(&mut self, seed: u64) -> Result<TimeStep>;
    /// One agent step (`action_repeat` env steps, fewer if the episode ends).
    fn step(&mut self, action: &[f32]) -> Result<TimeStep>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_is_listed_once_and_parses_from_its_name() {
        let names: std::collections::BTreeSet<&str> = Task::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names.len(), 13);
        for task in Task::ALL {
            assert_eq!(task.name().parse::<Task>(), Ok(task));
        }
        assert!(Task::DMC.iter().all(|t| t.benchmark() == Benchmark::Dmc));
        assert!(Task::JACO
            .iter()
            .all(|t| t.benchmark() == Benchmark::UrlbJaco && t.camera() == "front_close"));
        assert_eq!(Task::ALL[..9], Task::DMC);
        assert_eq!(Task::ALL[9..], Task::JACO);
    }
}
