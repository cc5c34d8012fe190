//! Published numbers the report sets beside ours, each with its source: the expert scores that
//! normalise returns (docs/design.md §8) and the paper's Table 3 (docs/design.md §9).

use crate::env::Task;

/// Where [`expert_score`] comes from, as the report states it.
pub const EXPERT_SOURCE: &str = "DrQ-v2's score at 500K frames from DrQ-v2's published curves \
     (docs/design.md §8, the paper's normalisation)";

/// The expert score of `task`: DrQ-v2 at 500K frames (docs/design.md §8). A normalised score is
/// `episode_reward / expert_score`.
pub fn expert_score(task: Task) -> f64 {
    match task {
        Task::ReachDuplo => 146.0,
        Task::CartpoleSwingup => 846.0,
        Task::WalkerRun => 437.0,
        Task::ReacherHard => 324.0,
        Task::CheetahRun => 603.0,
        Task::WalkerStand => 957.0,
        Task::BallInCupCatch => 844.0,
        Task::WalkerWalk => 722.0,
        Task::FingerSpin => 789.0,
    }
}

/// How the paper's Table 3 was measured, stated wherever its numbers appear.
pub const PAPER_SCALE: &str = "the paper's Table 3: frozen encoder pre-trained on videos, 500K frames of SAC, \
     5 seeds, 10 evaluation episodes (docs/design.md §9)";

/// One method's column of the paper's Table 3.
#[derive(Debug, Clone, Copy)]
pub struct PaperColumn {
    pub method: &'static str,
    /// (mean, std) over 5 seeds, in [`Task::ALL`] order.
    pub scores: [(f64, f64); 9],
    /// The table's own "mean" row.
    pub mean: f64,
}

impl PaperColumn {
    /// The (mean, std) the paper reports for `task`.
    pub fn score(&self, task: Task) -> (f64, f64) {
        // every task is in Task::ALL, so the fallback is never taken
        let i = Task::ALL.iter().position(|t| *t == task).unwrap_or_default();
        self.scores[i]
    }
}

/// The paper's Table 3 (docs/design.md §9), rows in [`Task::ALL`] order.
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

/// Whether `task`'s videos were used for pre-training (docs/design.md §8).
pub fn is_seen(task: Task) -> bool {
    Task::SEEN.contains(&task)
}
