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
use super::scores::MethodScores;
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
    let mut seeds: Vec<u64> = m.seeds_by_task.values().flatten().copied().collect();
    seeds.sort_unstable();
    seeds.dedup();
    let (mut units, mut incomplete) = (Vec::new(), Vec::new());
    for seed in seeds {
        let scores: Option<Vec<f64>> = tasks
            .iter()
            .map(|task| {
                let normalised = m.normalised(*task)?;
                let runs = m.seeds_by_task.get(task)?;
                let mut of_seed = runs.iter().zip(normalised).filter(|(s, _)| **s == seed);
                match (of_seed.next(), of_seed.next()) {
                    (Some((_, score)), None) => Some(score),
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

/// The aggregate of a's units less b's.
pub fn difference(a: &[SeedUnit], b: &[SeedUnit], aggregate: Aggregate) -> f64 {
    let num_tasks = a.first().or(b.first()).map_or(0, |u| u.scores.len());
    aggregate.of(&table(a.iter(), num_tasks)) - aggregate.of(&table(b.iter(), num_tasks))
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
    // Differences equal to the observed one up to rounding count as extreme.
    let tolerance = 1e-12 * observed.max(1.0);
    let num_tasks = pooled.first().map_or(0, |u| u.scores.len());
    let mut in_a = vec![false; n];
    let split_difference = |in_a: &[bool]| -> f64 {
        let side = |want: bool| {
            table(
                pooled.iter().zip(in_a).filter(|(_, &x)| x == want).map(|(u, _)| *u),
                num_tasks,
            )
        };
        (aggregate.of(&side(true)) - aggregate.of(&side(false))).abs()
    };
    let total = binomial(n as u64, k as u64);
    if total <= max_exact {
        // Every k-subset of 0..n in lexicographic order.
        let mut chosen: Vec<usize> = (0..k).collect();
        let mut extreme = 0u64;
        loop {
            in_a.iter_mut().for_each(|x| *x = false);
            chosen.iter().for_each(|&i| in_a[i] = true);
            if split_difference(&in_a) >= observed - tolerance {
                extreme += 1;
            }
            let Some(i) = (0..k).rev().find(|&i| chosen[i] < n - k + i) else {
                break;
            };
            chosen[i] += 1;
            for j in i + 1..k {
                chosen[j] = chosen[j - 1] + 1;
            }
        }
        return PermutationTest {
            p_value: extreme as f64 / total as f64,
            splits: total,
            exact: true,
        };
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    let mut extreme = 1u64; // the observed split
    for _ in 0..SAMPLED_SPLITS {
        order.shuffle(&mut rng);
        in_a.iter_mut().for_each(|x| *x = false);
        order[..k].iter().for_each(|&i| in_a[i] = true);
        if split_difference(&in_a) >= observed - tolerance {
            extreme += 1;
        }
    }
    PermutationTest {
        p_value: extreme as f64 / (SAMPLED_SPLITS + 1) as f64,
        splits: SAMPLED_SPLITS as u64 + 1,
        exact: false,
    }
}

/// The difference with the percentile interval of a bootstrap that resamples a's units and
/// b's units independently, with replacement (a first in each replicate).
pub fn unit_bootstrap(a: &[SeedUnit], b: &[SeedUnit], aggregate: Aggregate, cfg: &BootstrapConfig) -> Estimate {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut draw = |units: &[SeedUnit]| -> Vec<SeedUnit> {
        (0..units.len())
            .map(|_| units[rng.random_range(0..units.len())].clone())
            .collect()
    };
    let replicates = (0..cfg.reps)
        .map(|_| {
            let ra = draw(a);
            let rb = draw(b);
            difference(&ra, &rb, aggregate)
        })
        .collect();
    percentile_interval(difference(a, b, aggregate), replicates, cfg.confidence)
}
