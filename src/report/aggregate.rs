//! Aggregate scores with uncertainty, as rliable computes them (Agarwal et al., *Deep RL at the
//! Edge of the Statistical Precipice*, 2021; `rliable.metrics` and
//! `rliable.library.get_interval_estimates`).
//!
//! Scores are normalised scores arranged per task, one per run (rliable's `(num_runs,
//! num_tasks)` matrix; here a task may have fewer runs than another, which a partly finished
//! suite needs, and every statistic reduces to rliable's when the table is rectangular):
//! - IQM: `scipy.stats.trim_mean(scores, 0.25, axis=None)`: all runs of all tasks pooled,
//!   sorted, `floor(0.25·n)` dropped from each end, the rest averaged.
//! - mean: the mean over tasks of the per-task means; median: the median of the per-task means.
//! - optimality gap: `1 − mean(min(score, 1))` over all runs of all tasks.
//!
//! Intervals are rliable's defaults: a stratified bootstrap (runs resampled with replacement
//! within each task, tasks kept), percentile intervals (NumPy's linearly interpolated
//! percentiles of the replicates), 95%, 50000 replications. The fixture
//! tests/fixtures/report/rliable_reference.py checks the numbers against rliable itself.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Normalised scores of one method: one vector of runs per task.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScoreTable {
    pub tasks: Vec<Vec<f64>>,
}

impl ScoreTable {
    /// A table from rliable's `(num_runs, num_tasks)` layout.
    pub fn from_runs_by_task(rows: &[Vec<f64>]) -> Self {
        let num_tasks = rows.first().map_or(0, Vec::len);
        let tasks = (0..num_tasks).map(|t| rows.iter().map(|r| r[t]).collect()).collect();
        ScoreTable { tasks }
    }

    pub fn num_runs(&self) -> usize {
        self.tasks.iter().map(Vec::len).sum()
    }

    /// Tasks with at least one run (the others take no part in any statistic).
    fn nonempty(&self) -> impl Iterator<Item = &Vec<f64>> {
        self.tasks.iter().filter(|t| !t.is_empty())
    }

    /// A table of the same shape, every score 0 (a bootstrap replicate's buffer).
    fn zeroed(&self) -> Self {
        ScoreTable {
            tasks: self.tasks.iter().map(|t| vec![0.0; t.len()]).collect(),
        }
    }

    fn task_means(&self) -> Vec<f64> {
        self.nonempty().map(|t| mean(t)).collect()
    }
}

/// The four aggregates of rliable's `metrics` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    Iqm,
    Median,
    Mean,
    OptimalityGap,
}

impl Aggregate {
    /// In the order rliable's plots show them.
    pub const ALL: [Aggregate; 4] = [
        Aggregate::Median,
        Aggregate::Iqm,
        Aggregate::Mean,
        Aggregate::OptimalityGap,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Aggregate::Iqm => "IQM",
            Aggregate::Median => "median",
            Aggregate::Mean => "mean",
            Aggregate::OptimalityGap => "optimality gap",
        }
    }

    /// The statistic of `table` (NaN for an empty table).
    pub fn of(self, table: &ScoreTable) -> f64 {
        match self {
            Aggregate::Iqm => iqm(table),
            Aggregate::Median => aggregate_median(table),
            Aggregate::Mean => aggregate_mean(table),
            Aggregate::OptimalityGap => optimality_gap(table, 1.0),
        }
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// The 25% trimmed mean of all runs of all tasks pooled (`scipy.stats.trim_mean`, which
/// rounds the number cut from each end down).
pub fn iqm(table: &ScoreTable) -> f64 {
    let mut all: Vec<f64> = table.tasks.iter().flatten().copied().collect();
    all.sort_by(f64::total_cmp);
    let cut = all.len() / 4;
    mean(&all[cut..all.len() - cut])
}

/// The mean over tasks of the per-task mean scores (`rliable.metrics.aggregate_mean`).
pub fn aggregate_mean(table: &ScoreTable) -> f64 {
    mean(&table.task_means())
}

/// The median over tasks of the per-task mean scores (`rliable.metrics.aggregate_median`).
pub fn aggregate_median(table: &ScoreTable) -> f64 {
    let mut means = table.task_means();
    means.sort_by(f64::total_cmp);
    let n = means.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => means[n / 2],
        _ => (means[n / 2 - 1] + means[n / 2]) / 2.0,
    }
}

/// `gamma − mean(min(score, gamma))` over all runs (`rliable.metrics.aggregate_optimality_gap`).
pub fn optimality_gap(table: &ScoreTable, gamma: f64) -> f64 {
    let all: Vec<f64> = table.tasks.iter().flatten().map(|s| s.min(gamma)).collect();
    gamma - mean(&all)
}

/// A point estimate and its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub point: f64,
    pub lower: f64,
    pub upper: f64,
}

/// How the intervals are drawn (rliable's `get_interval_estimates` arguments).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BootstrapConfig {
    /// Bootstrap replications (rliable's default 50000).
    pub reps: usize,
    /// Coverage of the interval (rliable's default 0.95).
    pub confidence: f64,
    /// Seed of the resampling.
    pub seed: u64,
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        BootstrapConfig {
            reps: 50_000,
            confidence: 0.95,
            seed: 0,
        }
    }
}

/// Point estimates and stratified-bootstrap percentile intervals of `aggregates` on `table`,
/// all computed on the same replicates (as rliable does with a `func` returning several).
pub fn interval_estimates(table: &ScoreTable, aggregates: &[Aggregate], cfg: &BootstrapConfig) -> Vec<Estimate> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut replicates = vec![Vec::with_capacity(cfg.reps); aggregates.len()];
    let mut resampled = table.zeroed();
    for _ in 0..cfg.reps {
        resample_within_tasks(table, &mut resampled, &mut rng);
        for (agg, values) in aggregates.iter().zip(&mut replicates) {
            values.push(agg.of(&resampled));
        }
    }
    aggregates
        .iter()
        .zip(replicates)
        .map(|(agg, values)| percentile_interval(agg.of(table), values, cfg.confidence))
        .collect()
}

/// One stratified-bootstrap draw: each task's runs of `table`, with replacement, into the task
/// of `out` (same shape).
fn resample_within_tasks(table: &ScoreTable, out: &mut ScoreTable, rng: &mut ChaCha8Rng) {
    for (task, slots) in table.tasks.iter().zip(&mut out.tasks) {
        for slot in slots.iter_mut() {
            *slot = task[rng.random_range(0..task.len())];
        }
    }
}

/// `point` with the percentile interval of its bootstrap replicates at `confidence`.
pub(crate) fn percentile_interval(point: f64, mut replicates: Vec<f64>, confidence: f64) -> Estimate {
    replicates.sort_by(f64::total_cmp);
    let alpha = (1.0 - confidence) / 2.0;
    Estimate {
        point,
        lower: percentile(&replicates, 100.0 * alpha),
        upper: percentile(&replicates, 100.0 * (1.0 - alpha)),
    }
}

/// rliable's probability of improvement P(X > Y) (`rliable.metrics.probability_of_improvement`):
/// per task, the Mann-Whitney U statistic of X's runs against Y's (a pair counts 1 when X's
/// score is higher, ½ when equal) over the number of pairs, then the mean over tasks. Tasks
/// where either table has no run take no part (rliable's tables are rectangular); NaN when no
/// task has both.
pub fn probability_of_improvement(x: &ScoreTable, y: &ScoreTable) -> f64 {
    let per_task: Vec<f64> = x
        .tasks
        .iter()
        .zip(&y.tasks)
        .filter(|(xs, ys)| !xs.is_empty() && !ys.is_empty())
        .map(|(xs, ys)| {
            let u: f64 = xs
                .iter()
                .flat_map(|a| ys.iter().map(move |b| (a, b)))
                .map(|(a, b)| match a.total_cmp(b) {
                    std::cmp::Ordering::Greater => 1.0,
                    std::cmp::Ordering::Equal => 0.5,
                    std::cmp::Ordering::Less => 0.0,
                })
                .sum();
            u / (xs.len() * ys.len()) as f64
        })
        .collect();
    if per_task.is_empty() {
        f64::NAN
    } else {
        mean(&per_task)
    }
}

/// P(X > Y) with its stratified-bootstrap percentile interval, as rliable's
/// `get_interval_estimates` on a pair: each replicate resamples X's runs and Y's runs
/// independently, with replacement, within each task.
pub fn improvement_estimate(x: &ScoreTable, y: &ScoreTable, cfg: &BootstrapConfig) -> Estimate {
    pair_estimate(x, y, cfg, probability_of_improvement)
}

/// The difference `aggregate(x) − aggregate(y)` with its stratified-bootstrap percentile
/// interval: each replicate resamples X's runs and Y's runs independently, with replacement,
/// within each task (rliable's `get_interval_estimates` on a pair, with
/// `func = lambda x, y: aggregate(x) - aggregate(y)`). Both tables hold the same tasks.
pub fn difference_estimate(x: &ScoreTable, y: &ScoreTable, aggregate: Aggregate, cfg: &BootstrapConfig) -> Estimate {
    pair_estimate(x, y, cfg, |x, y| aggregate.of(x) - aggregate.of(y))
}

/// `statistic(x, y)` with the percentile interval of rliable's pair bootstrap (X's and Y's
/// runs resampled independently within each task, X first in each replicate).
fn pair_estimate(
    x: &ScoreTable,
    y: &ScoreTable,
    cfg: &BootstrapConfig,
    statistic: impl Fn(&ScoreTable, &ScoreTable) -> f64,
) -> Estimate {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let (mut rx, mut ry) = (x.zeroed(), y.zeroed());
    let mut values = Vec::with_capacity(cfg.reps);
    for _ in 0..cfg.reps {
        resample_within_tasks(x, &mut rx, &mut rng);
        resample_within_tasks(y, &mut ry, &mut rng);
        values.push(statistic(&rx, &ry));
    }
    percentile_interval(statistic(x, y), values, cfg.confidence)
}

/// NumPy's default (`method="linear"`) percentile `p` (0..=100) of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let t = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * t
}
