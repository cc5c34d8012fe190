//! DrQ-v2's published learning curves (facebookresearch/drqv2 @c0c650b, `curves/dmc_<task>.csv`;
//! the rows lfs ships and their provenance: eval/reference/README.md), embedded: the report
//! draws them as "DrQ-v2, published" beside a suite's DrQ-v2 runs (docs/design.md §13), and
//! their 500K-frame means are the expert scores ([`super::reference::expert_score`]).

use std::collections::BTreeMap;

use crate::env::Task;

/// The label of the published curves in figures and tables.
pub const LABEL: &str = "DrQ-v2, published";

/// Where they come from, as the report states it.
pub const SOURCE: &str = "facebookresearch/drqv2 @c0c650b, curves/dmc_<task>.csv (its authors' runs: \
     DrQ-v2's own protocol, 10 evaluation episodes per point, 8 to 10 seeds)";

/// The simulator difference, stated beside every comparison with the published curves
/// (docs/design.md §8).
pub const SIMULATOR: &str = "The published runs used DrQ-v2's 2021 simulator (dm_control from git, MuJoCo 2.0 \
     through mujoco-py 2.0.2.13); ours use mujoco 3.17.0 and dm-control 1.0.50, so the physics and the rendering \
     differ as well as the code";

/// The shipped rows: `task,seed,frame,episode_reward`.
const CSV: &str = include_str!("../../eval/reference/drqv2_published.csv");

/// DrQ-v2's published evaluation returns on `task` by frame, one per seed (empty for a task
/// it did not run: the Jaco tasks).
pub fn drqv2_returns(task: Task) -> BTreeMap<u64, Vec<f64>> {
    let mut by_frame: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for line in CSV.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        // Invariant: the embedded file has four fields per row (a test reads every row).
        if let [name, _seed, frame, ret] = fields[..] {
            if name == task.name() {
                if let (Ok(frame), Ok(ret)) = (frame.parse(), ret.parse()) {
                    by_frame.entry(frame).or_default().push(ret);
                }
            }
        }
    }
    by_frame
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::reference::expert_score;

    #[test]
    fn every_row_is_read_and_the_expert_scores_are_the_500k_means() {
        let rows = CSV.lines().skip(1).count();
        let read: usize = Task::DMC
            .iter()
            .map(|&t| drqv2_returns(t).values().map(Vec::len).sum::<usize>())
            .sum();
        assert_eq!(read, rows, "a row of the embedded file was not read");
        for task in Task::DMC {
            let returns = drqv2_returns(task);
            let at_500k = &returns[&500_000];
            let mean = at_500k.iter().sum::<f64>() / at_500k.len() as f64;
            assert_eq!(Some(mean.round()), expert_score(task), "{task}: {at_500k:?}");
            // Every 20K frames from 0 to 100K, each seed once.
            let frames: Vec<u64> = returns.keys().copied().collect();
            assert_eq!(frames, [0, 20_000, 40_000, 60_000, 80_000, 100_000, 500_000], "{task}");
            assert!(returns.values().all(|v| v.len() == at_500k.len()), "{task}");
        }
        assert!(drqv2_returns(Task::JacoReachTopLeft).is_empty());
    }
}
