//! Published numbers the report sets beside ours, each with its source: the expert scores that
//! normalise returns (docs/design.md §8), the paper's Table 3 (docs/design.md §9) and its
//! Table 2 (URLB's Jaco reach tasks).

use crate::env::Task;

/// Where [`expert_score`] comes from, as the report states it.
pub const EXPERT_SOURCE: &str = "DrQ-v2's score at 500K frames from DrQ-v2's published curves \
     (docs/design.md §8, the paper's normalisation)";

/// The expert score of a DMControl task: DrQ-v2 at 500K frames (docs/design.md §8). A
/// normalised score is `episode_reward / expert_score`. The Jaco tasks have none: the paper
/// reports them raw (its Table 2).
pub fn expert_score(task: Task) -> Option<f64> {
    match task {
        Task::ReachDuplo => Some(146.0),
        Task::CartpoleSwingup => Some(846.0),
        Task::WalkerRun => Some(437.0),
        Task::ReacherHard => Some(324.0),
        Task::CheetahRun => Some(603.0),
        Task::WalkerStand => Some(957.0),
        Task::BallInCupCatch => Some(844.0),
        Task::WalkerWalk => Some(722.0),
        Task::FingerSpin => Some(789.0),
        Task::JacoReachBottomLeft | Task::JacoReachBottomRight | Task::JacoReachTopLeft | Task::JacoReachTopRight => {
            None
        }
    }
}

/// How the paper's Table 3 was measured, stated wherever its numbers appear.
pub const PAPER_SCALE: &str = "the paper's Table 3: frozen encoder pre-trained on videos, 500K frames of SAC, \
     5 seeds, 10 evaluation episodes (docs/design.md §9)";

/// One method's column of the paper's Table 3.
#[derive(Debug, Clone, Copy)]
pub struct PaperColumn {
    pub method: &'static str,
    /// (mean, std) over 5 seeds, in [`Task::DMC`] order.
    pub scores: [(f64, f64); 9],
    /// The table's own "mean" row.
    pub mean: f64,
}

impl PaperColumn {
    /// The (mean, std) the paper reports for a DMControl task; NaNs for a Jaco task.
    pub fn score(&self, task: Task) -> (f64, f64) {
        match Task::DMC.iter().position(|t| *t == task) {
            Some(i) => self.scores[i],
            None => (f64::NAN, f64::NAN),
        }
    }

    /// The paper's mean for `task` divided by its expert score (NaN for a Jaco task).
    pub fn normalised(&self, task: Task) -> f64 {
        expert_score(task).map_or(f64::NAN, |e| self.score(task).0 / e)
    }
}

/// The paper's Table 3 (docs/design.md §9), rows in [`Task::DMC`] order.
pub const PAPER_TABLE3: [PaperColumn; 3] = [
    PaperColumn {
        method: "LFS",
        scores: [
            (126.0, 20.0),
            (736.0, 104.0),
            (524.0, 28.0),
            (129.0, 104.0),
            (586.0, 26.0),
            (941.0, 32.0),
            (966.0, 10.0),
            (944.0, 20.0),
            (977.0, 4.0),
        ],
        mean: 659.0,
    },
    PaperColumn {
        method: "ATC",
        scores: [
            (2.0, 2.0),
            (428.0, 174.0),
            (196.0, 12.0),
            (45.0, 63.0),
            (292.0, 10.0),
            (933.0, 12.0),
            (888.0, 29.0),
            (805.0, 37.0),
            (917.0, 6.0),
        ],
        mean: 501.0,
    },
    PaperColumn {
        method: "CURL",
        scores: [
            (10.0, 9.0),
            (586.0, 70.0),
            (191.0, 8.0),
            (112.0, 83.0),
            (193.0, 13.0),
            (939.0, 16.0),
            (952.0, 18.0),
            (583.0, 13.0),
            (561.0, 8.0),
        ],
        mean: 459.0,
    },
];

/// How the paper's Table 2 was measured, stated wherever its numbers appear.
pub const PAPER_TABLE2_SCALE: &str = "the paper's Table 2: end to end from pixels on URLB's Jaco reach tasks, 100K \
     frames with task rewards (the unsupervised methods after 1M reward-free frames of pre-training), ± as \
     printed (the paper does not say what it is)";

/// The paper's budget for Table 2, in frames.
pub const PAPER_TABLE2_FRAMES: u64 = 100_000;

/// One method's column of the paper's Table 2.
#[derive(Debug, Clone, Copy)]
pub struct Table2Column {
    pub method: &'static str,
    /// Trained end to end with no pre-training (LFS, DrQ-v2), or fine-tuned after 1M frames of
    /// reward-free pre-training (the eight unsupervised RL methods, which the paper quotes).
    pub pretrained: bool,
    /// (mean, ±) in [`Task::JACO`] order.
    pub scores: [(f64, f64); 4],
    /// The table's own "Mean score" row.
    pub mean: f64,
}

impl Table2Column {
    /// The (mean, ±) the paper reports for a Jaco task; NaNs for another task.
    pub fn score(&self, task: Task) -> (f64, f64) {
        match Task::JACO.iter().position(|t| *t == task) {
            Some(i) => self.scores[i],
            None => (f64::NAN, f64::NAN),
        }
    }
}

const fn table2(method: &'static str, pretrained: bool, scores: [(f64, f64); 4], mean: f64) -> Table2Column {
    Table2Column {
        method,
        pretrained,
        scores,
        mean,
    }
}

/// The paper's Table 2, columns as printed, rows in [`Task::JACO`] order (bottom left, bottom
/// right, top left, top right).
pub const PAPER_TABLE2: [Table2Column; 10] = [
    table2(
        "LFS",
        false,
        [(59.0, 12.0), (142.0, 46.0), (154.0, 47.0), (113.0, 66.0)],
        117.0,
    ),
    table2(
        "DrQ-v2",
        false,
        [(23.0, 10.0), (23.0, 8.0), (40.0, 9.0), (37.0, 9.0)],
        31.0,
    ),
    table2(
        "ICM",
        true,
        [(65.0, 19.0), (88.0, 23.0), (76.0, 19.0), (87.0, 24.0)],
        79.0,
    ),
    table2(
        "Disagreement",
        true,
        [(42.0, 10.0), (58.0, 11.0), (89.0, 19.0), (49.0, 12.0)],
        60.0,
    ),
    table2("RND", true, [(46.0, 9.0), (44.0, 9.0), (59.0, 7.0), (47.0, 7.0)], 49.0),
    table2("APT", true, [(0.0, 0.0), (0.0, 0.0), (6.0, 4.0), (2.0, 1.0)], 2.0),
    table2(
        "Proto-RL",
        true,
        [(36.0, 13.0), (43.0, 10.0), (41.0, 10.0), (47.0, 12.0)],
        42.0,
    ),
    table2("SMM", true, [(1.0, 1.0), (1.0, 0.0), (2.0, 1.0), (4.0, 3.0)], 2.0),
    table2("DIAYN", true, [(8.0, 3.0), (4.0, 1.0), (20.0, 4.0), (22.0, 6.0)], 14.0),
    table2("APS", true, [(0.0, 0.0), (0.0, 0.0), (2.0, 1.0), (5.0, 1.0)], 2.0),
];

/// The most a Jaco task's return can be: one per control step of a 10 s episode at 40 ms per
/// step (the reward is at most 1), whatever the action repeat.
pub const JACO_MAX_RETURN: f64 = 250.0;

/// Whether `task`'s videos were used for pre-training (docs/design.md §8).
pub fn is_seen(task: Task) -> bool {
    Task::SEEN.contains(&task)
}
