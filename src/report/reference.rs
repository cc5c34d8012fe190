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
pub const PAPER_SCALE: &str = "the paper's Table 3: one frozen encoder shared by the nine tasks, pre-trained on \
     videos (LFS, ATC, CURL) or by 240K steps of reward-free exploration (Proto-RL, APT), then 500K frames of \
     SAC; DrQ-v2 end to end as the expert; 5 seeds, 10 evaluation episodes (docs/design.md §9)";

/// How a column of the paper's Table 3 got its encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pretraining {
    /// Pre-trained on the demonstration videos (LFS, ATC, CURL).
    Videos,
    /// Pre-trained by 240K steps of reward-free exploration, unsupervised RL (Proto-RL, APT).
    Exploration,
    /// No pre-training: DrQ-v2 trained end to end, the table's expert.
    EndToEnd,
}

impl Pretraining {
    /// The words a column header carries.
    pub fn label(self) -> &'static str {
        match self {
            Pretraining::Videos => "videos",
            Pretraining::Exploration => "URL 240K",
            Pretraining::EndToEnd => "end to end",
        }
    }
}

/// One method's column of the paper's Table 3.
#[derive(Debug, Clone, Copy)]
pub struct PaperColumn {
    pub method: &'static str,
    pub pretraining: Pretraining,
    /// (mean, std) over 5 seeds, in [`Task::DMC`] order.
    pub scores: [(f64, f64); 9],
    /// The table's own "Mean score" row (DrQ-v2's is printed as "-").
    pub mean: Option<f64>,
    /// The table's own "Mean expert-normalized score" row. The paper normalises by its own
    /// DrQ-v2 column (reach_duplo 173, not [`expert_score`]'s 146), so it differs from the
    /// mean of [`PaperColumn::normalised`] (a test holds both).
    pub normalised_mean: Option<f64>,
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

/// The paper's Table 3 (docs/design.md §9), its six columns as printed, rows in [`Task::DMC`]
/// order.
pub const PAPER_TABLE3: [PaperColumn; 6] = [
    PaperColumn {
        method: "LFS",
        pretraining: Pretraining::Videos,
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
        mean: Some(659.0),
        normalised_mean: Some(0.982),
    },
    PaperColumn {
        method: "ATC",
        pretraining: Pretraining::Videos,
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
        mean: Some(501.0),
        normalised_mean: Some(0.653),
    },
    PaperColumn {
        method: "CURL",
        pretraining: Pretraining::Videos,
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
        mean: Some(459.0),
        normalised_mean: Some(0.612),
    },
    PaperColumn {
        method: "Proto-RL",
        pretraining: Pretraining::Exploration,
        scores: [
            (2.0, 3.0),
            (562.0, 67.0),
            (367.0, 11.0),
            (19.0, 34.0),
            (298.0, 26.0),
            (553.0, 372.0),
            (949.0, 7.0),
            (899.0, 19.0),
            (801.0, 175.0),
        ],
        mean: Some(494.0),
        normalised_mean: Some(0.670),
    },
    PaperColumn {
        method: "APT",
        pretraining: Pretraining::Exploration,
        scores: [
            (1.0, 0.0),
            (668.0, 73.0),
            (187.0, 3.0),
            (56.0, 40.0),
            (310.0, 13.0),
            (915.0, 14.0),
            (932.0, 3.0),
            (696.0, 20.0),
            (467.0, 3.0),
        ],
        mean: Some(470.0),
        normalised_mean: Some(0.614),
    },
    PaperColumn {
        method: "DrQ-v2",
        pretraining: Pretraining::EndToEnd,
        scores: [
            (173.0, 21.0),
            (846.0, 17.0),
            (437.0, 136.0),
            (324.0, 186.0),
            (603.0, 33.0),
            (957.0, 37.0),
            (844.0, 174.0),
            (722.0, 359.0),
            (789.0, 124.0),
        ],
        mean: None,
        normalised_mean: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn column(method: &str) -> &'static PaperColumn {
        PAPER_TABLE3.iter().find(|p| p.method == method).unwrap()
    }

    #[test]
    fn table3_means_are_the_means_of_its_rows() {
        for p in PAPER_TABLE3.iter().filter(|p| p.mean.is_some()) {
            let mean = p.scores.iter().map(|s| s.0).sum::<f64>() / 9.0;
            assert_eq!(mean.round(), p.mean.unwrap(), "{}", p.method);
        }
    }

    /// The paper's normalised row is its per-task means over its own DrQ-v2 column (to the
    /// rounding of the printed means: within 0.004), not over [`expert_score`] (LFS: 0.997).
    #[test]
    fn table3_normalises_by_its_own_drqv2_column() {
        let drqv2 = column("DrQ-v2");
        for p in PAPER_TABLE3.iter().filter(|p| p.normalised_mean.is_some()) {
            let own: f64 = Task::DMC.iter().map(|t| p.score(*t).0 / drqv2.score(*t).0).sum::<f64>() / 9.0;
            let printed = p.normalised_mean.unwrap();
            assert!((own - printed).abs() < 0.004, "{}: {own} vs {printed}", p.method);
        }
        let lfs = column("LFS");
        let ours: f64 = Task::DMC.iter().map(|t| lfs.normalised(*t)).sum::<f64>() / 9.0;
        assert!((ours - 0.997).abs() < 0.001, "{ours}");
    }
}
