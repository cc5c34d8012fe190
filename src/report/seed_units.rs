//! A primary comparison whose units are seeds (`[primary] unit = "seed"`, issue 35).
//!
//! When every run of seed s uses seed s's own pre-trained encoder (a suite source with
//! `{seed}`), a method's runs on different tasks that share a seed share one pre-training run:
//! they are not independent draws, and resampling runs within each task (rliable's stratified
//! bootstrap) would leave the pre-training run's variance out. Here the unit is the seed, its
//! scores on every task together:
//! - the decision is an exact two-sided permutation test: under "no difference", the method
//!   labels of the units are exchangeable, so the observed difference of the aggregate is
//!   compared with its value under every split of the pooled units into groups of the same
//!   sizes (all of them up to [`MAX_EXACT_SPLITS`], a seeded sample beyond);
//! - the interval resamples each method's units with replacement (a cluster bootstrap), and is
//!   descriptive: with a handful of units a percentile interval is narrower than it should be.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::aggregate::{percentile_interval, Aggregate, BootstrapConfig, Estimate, ScoreTable};
use super::scores::{MethodScores, RunScore};
use crate::env::Task;

/// Splits enumerated exactly; more are sampled (C(20, 10) = 184,756 are enumerated).
pub const MAX_EXACT_SPLITS: u64 = 1_000_000;

/// Random splits drawn when there are more than [`MAX_EXACT_SPLITS`].
const SAMPLED_SPLITS: usize = 200_000;

/// One seed of one method: its expert-normalised score on every task of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedUnit {
    pub seed: u64,
    /// One score per task, in the order of the comparison's tasks.
    pub scores: Vec<f64>,
}

/// A method's units over `tasks`, and the seeds left out because they miss a task (or run
/// it twice).
#[derive(Debug, Clone, PartialEq)]
pub struct MethodUnits {
    pub units: Vec<SeedUnit>,
    pub incomplete: Vec<u64>,
}

/// The seeds of `m` with exactly one normalised score on each of `tasks`.
pub fn units_of(m: &MethodScores, tasks: &[Task]) -> MethodUnits {
    // Per task, its runs with normalised scores; empty for a task without any.
    let runs: Vec<Vec<RunScore>> = tasks
        .iter()
        .map(|task| m.normalised_runs(*task).unwrap_or_default())
        .collect();
    let mut seeds: Vec<u64> = runs.iter().flatten().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let (mut units, mut incomplete) = (Vec::new(), Vec::new());
    for seed in seeds {
        let scores: Option<Vec<f64>> = runs
            .iter()
            .map(|task_runs| {
                let mut of_seed = task_runs.iter().filter(|r| r.seed == seed);
                match (of_seed.next(), of_seed.next()) {
                    (Some(run), None) => Some(run.score),
                    _ => None,
                }
            })
            .collect();
        match scores {
            Some(scores) => units.push(SeedUnit { seed, scores }),
            None => incomplete.push(seed),
        }
    }
    MethodUnits { units, incomplete }
}

/// The runs of `units` as a score table over `num_tasks` tasks.
fn table<'a>(units: impl Iterator<Item = &'a SeedUnit>, num_tasks: usize) -> ScoreTable {
    let mut tasks = vec![Vec::new(); num_tasks];
    for unit in units {
        for (t, score) in unit.scores.iter().enumerate() {
            tasks[t].push(*score);
        }
    }
    ScoreTable { tasks }
}

/// The aggregate of the units of `a` less that of `b`'s, over `num_tasks` tasks: the one
/// statistic the difference, the permutation test's splits and the bootstrap's replicates take.
fn difference_of<'a>(
    a: impl Iterator<Item = &'a SeedUnit>,
    b: impl Iterator<Item = &'a SeedUnit>,
    num_tasks: usize,
    aggregate: Aggregate,
) -> f64 {
    aggregate.of(&table(a, num_tasks)) - aggregate.of(&table(b, num_tasks))
}

fn num_tasks(a: &[SeedUnit], b: &[SeedUnit]) -> usize {
    a.first().or(b.first()).map_or(0, |u| u.scores.len())
}

/// The aggregate of a's units less b's.
pub fn difference(a: &[SeedUnit], b: &[SeedUnit], aggregate: Aggregate) -> f64 {
    difference_of(a.iter(), b.iter(), num_tasks(a, b), aggregate)
}

/// The outcome of the permutation test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PermutationTest {
    /// Two-sided: the share of splits whose |difference| is at least the observed one.
    pub p_value: f64,
    /// Splits compared (the observed one included).
    pub splits: u64,
    /// Whether every split was enumerated.
    pub exact: bool,
    /// With every split enumerated, the smallest p any assignment of the method labels to these
    /// pooled units could give: the share of splits as extreme as the most extreme one. Above
    /// the level, no outcome on these units could have been decided, whatever the scores' order.
    pub smallest_p: Option<f64>,
}

/// C(n, k), saturating.
fn binomial(n: u64, k: u64) -> u64 {
    (0..k.min(n - k)).fold(1u64, |c, i| c.saturating_mul(n - i) / (i + 1))
}

/// The exact two-sided permutation test of the units' method labels on the difference of
/// `aggregate` (a seeded sample of `SAMPLED_SPLITS` splits beyond `max_exact`, with the
/// observed split counted: p = (1 + extreme) / (1 + sampled)).
pub fn permutation_test(
    a: &[SeedUnit],
    b: &[SeedUnit],
    aggregate: Aggregate,
    max_exact: u64,
    seed: u64,
) -> PermutationTest {
    let pooled: Vec<&SeedUnit> = a.iter().chain(b).collect();
    let (n, k) = (pooled.len(), a.len());
    let observed = difference(a, b, aggregate).abs();
    // Whether a split's |difference| is as extreme as `d`: one equal to it up to rounding counts.
    let as_extreme = |x: f64, d: f64| x >= d - 1e-12 * d.max(1.0);
    let num_tasks = num_tasks(a, b);
    let mut in_a = vec![false; n];
    let split_difference = |in_a: &[bool]| -> f64 {
        let side = |want: bool| {
            pooled
                .iter()
                .zip(in_a)
                .filter(move |(_, &x)| x == want)
                .map(|(u, _)| *u)
        };
        difference_of(side(true), side(false), num_tasks, aggregate).abs()
    };
    let total = binomial(n as u64, k as u64);
    if total <= max_exact {
        // Every k-subset of 0..n in lexicographic order; |difference| of each split.
        let mut chosen: Vec<usize> = (0..k).collect();
        let mut splits: Vec<f64> = Vec::with_capacity(total as usize);
        loop {
            in_a.iter_mut().for_each(|x| *x = false);
            chosen.iter().for_each(|&i| in_a[i] = true);
            splits.push(split_difference(&in_a));
            let Some(i) = (0..k).rev().find(|&i| chosen[i] < n - k + i) else {
                break;
            };
            chosen[i] += 1;
            for j in i + 1..k {
                chosen[j] = chosen[j - 1] + 1;
            }
        }
        // The share of splits at least as extreme as `d`, up to rounding.
        let share_beyond = |d: f64| splits.iter().filter(|&&x| as_extreme(x, d)).count() as f64 / total as f64;
        let most_extreme = splits.iter().copied().fold(0.0, f64::max);
        return PermutationTest {
            p_value: share_beyond(observed),
            splits: total,
            exact: true,
            smallest_p: Some(share_beyond(most_extreme)),
        };
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    let mut extreme = 1u64; // the observed split
    for _ in 0..SAMPLED_SPLITS {
        order.shuffle(&mut rng);
        in_a.iter_mut().for_each(|x| *x = false);
        order[..k].iter().for_each(|&i| in_a[i] = true);
        if as_extreme(split_difference(&in_a), observed) {
            extreme += 1;
        }
    }
    PermutationTest {
        p_value: extreme as f64 / (SAMPLED_SPLITS + 1) as f64,
        splits: SAMPLED_SPLITS as u64 + 1,
        exact: false,
        smallest_p: None,
    }
}

/// The difference with the percentile interval of a bootstrap that resamples a's units and
/// b's units independently, with replacement (a first in each replicate).
pub fn unit_bootstrap(a: &[SeedUnit], b: &[SeedUnit], aggregate: Aggregate, cfg: &BootstrapConfig) -> Estimate {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let num_tasks = num_tasks(a, b);
    let mut draw =
        |units: &'_ [SeedUnit]| -> Vec<usize> { (0..units.len()).map(|_| rng.random_range(0..units.len())).collect() };
    let replicates = (0..cfg.reps)
        .map(|_| {
            let (ra, rb) = (draw(a), draw(b));
            difference_of(
                ra.iter().map(|&i| &a[i]),
                rb.iter().map(|&i| &b[i]),
                num_tasks,
                aggregate,
            )
        })
        .collect();
    percentile_interval(difference(a, b, aggregate), replicates, cfg.confidence)
}
