//! From done cells to the numbers the report shows: the score of every run at a budget, its
//! expert-normalised value, per-task learning curves, and the aggregate curve over frames.
//!
//! A run's score at a budget of B frames is its last evaluation at or before frame B (DrQ-v2's
//! `eval.csv` rows: the mean return of the evaluation episodes); a run whose own budget is
//! smaller than B has no score there.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::aggregate::{improvement_estimate, interval_estimates, Aggregate, BootstrapConfig, Estimate, ScoreTable};
use super::cells::Cell;
use super::reference::{expert_score, is_seen};
use crate::env::{Benchmark, Task};
use crate::rl_loop::EvalRow;

/// The done cells of one method, by task (tasks in the paper's order), as indices into the
/// suite's cells.
#[derive(Debug, Clone)]
pub struct MethodCells {
    pub method: String,
    pub by_task: BTreeMap<Task, Vec<usize>>,
}

/// Group the done cells by method, methods in the order of their first cell.
pub fn group_by_method(cells: &[Cell], agents_differ: bool) -> Vec<MethodCells> {
    let mut methods: Vec<MethodCells> = Vec::new();
    for (i, cell) in cells.iter().enumerate().filter(|(_, c)| c.is_done()) {
        let name = cell.method(agents_differ);
        let pos = match methods.iter().position(|m| m.method == name) {
            Some(pos) => pos,
            None => {
                methods.push(MethodCells {
                    method: name,
                    by_task: BTreeMap::new(),
                });
                methods.len() - 1
            }
        };
        methods[pos].by_task.entry(cell.meta.task).or_default().push(i);
    }
    methods
}

/// The cell's evaluation return at exactly `frame`, if it evaluated there.
pub fn eval_at_frame(cell: &Cell, frame: u64) -> Option<f64> {
    let evals = &cell.finished.as_ref()?.evals;
    evals.iter().find(|r| r.frame == frame).map(|r| r.episode_reward)
}

/// The evaluation a run is scored by at `budget` frames.
pub fn eval_at(cell: &Cell, budget: u64) -> Option<&EvalRow> {
    let finished = cell.finished.as_ref()?;
    if finished.settings.num_train_frames < budget {
        return None;
    }
    finished.evals.iter().rfind(|r| r.frame <= budget)
}

/// Mean and standard deviation over seeds (NumPy's default `ddof = 0`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeedStats {
    pub mean: f64,
    pub std: f64,
    pub n: usize,
}

impl SeedStats {
    pub fn of(xs: &[f64]) -> Option<Self> {
        if xs.is_empty() {
            return None;
        }
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        Some(SeedStats {
            mean,
            std: var.sqrt(),
            n,
        })
    }
}

/// Which DMControl tasks an aggregate is over. The Jaco tasks are in none of them: they have
/// no expert score and are reported raw, beside the paper's Table 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSet {
    All,
    /// Tasks whose videos the encoders were pre-trained on (`Task::SEEN`, docs/design.md §8).
    Seen,
    Unseen,
}

impl TaskSet {
    pub const ALL: [TaskSet; 3] = [TaskSet::All, TaskSet::Seen, TaskSet::Unseen];

    pub fn name(self) -> &'static str {
        match self {
            TaskSet::All => "all",
            TaskSet::Seen => "seen",
            TaskSet::Unseen => "unseen",
        }
    }

    pub fn contains(self, task: Task) -> bool {
        if task.benchmark() != Benchmark::Dmc {
            return false;
        }
        match self {
            TaskSet::All => true,
            TaskSet::Seen => is_seen(task),
            TaskSet::Unseen => !is_seen(task),
        }
    }
}

/// Every method's runs at one budget.
#[derive(Debug, Clone)]
pub struct BudgetScores {
    pub budget: u64,
    pub methods: Vec<MethodScores>,
}

/// One run's score at a budget, and the seed it ran with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunScore {
    pub seed: u64,
    pub score: f64,
}

/// One method's scores at a budget, by task, one per run (runs in cell order).
#[derive(Debug, Clone)]
pub struct MethodScores {
    pub method: String,
    pub runs_by_task: BTreeMap<Task, Vec<RunScore>>,
}

impl MethodScores {
    /// A method without any run.
    pub fn empty(method: &str) -> Self {
        Self {
            method: method.to_string(),
            runs_by_task: BTreeMap::new(),
        }
    }

    /// The tasks the method has runs on, in order.
    pub fn tasks(&self) -> impl Iterator<Item = Task> + '_ {
        self.runs_by_task.keys().copied()
    }

    /// The raw scores of `task`'s runs.
    pub fn raw(&self, task: Task) -> Option<Vec<f64>> {
        Some(self.runs_by_task.get(&task)?.iter().map(|r| r.score).collect())
    }

    pub fn stats(&self, task: Task) -> Option<SeedStats> {
        SeedStats::of(&self.raw(task)?)
    }

    pub fn normalised_stats(&self, task: Task) -> Option<SeedStats> {
        SeedStats::of(&self.normalised(task)?)
    }

    /// Scores divided by the task's expert score (docs/design.md §8); none for a Jaco task.
    pub fn normalised(&self, task: Task) -> Option<Vec<f64>> {
        Some(self.normalised_runs(task)?.iter().map(|r| r.score).collect())
    }

    /// [`MethodScores::normalised`] with each run's seed.
    pub fn normalised_runs(&self, task: Task) -> Option<Vec<RunScore>> {
        let expert = expert_score(task)?;
        let runs = self.runs_by_task.get(&task)?;
        Some(
            runs.iter()
                .map(|r| RunScore {
                    seed: r.seed,
                    score: r.score / expert,
                })
                .collect(),
        )
    }

    /// The normalised scores of the tasks in `set`, as rliable's table.
    pub fn table(&self, set: TaskSet) -> ScoreTable {
        let tasks = self
            .tasks()
            .filter(|t| set.contains(*t))
            .filter_map(|t| self.normalised(t))
            .collect();
        ScoreTable { tasks }
    }

    /// The mean over the tasks of `set` of the per-task mean raw scores, and how many tasks.
    pub fn mean_raw(&self, set: TaskSet) -> Option<(f64, usize)> {
        let means: Vec<f64> = self
            .runs_by_task
            .iter()
            .filter(|(t, runs)| set.contains(**t) && !runs.is_empty())
            .filter_map(|(t, _)| self.stats(*t).map(|s| s.mean))
            .collect();
        (!means.is_empty()).then(|| (means.iter().sum::<f64>() / means.len() as f64, means.len()))
    }
}

/// Scores of every method's done cells at `budget`.
pub fn scores_at(cells: &[Cell], methods: &[MethodCells], budget: u64) -> BudgetScores {
    let methods = methods
        .iter()
        .map(|m| {
            let mut scores = MethodScores::empty(&m.method);
            for (task, idx) in &m.by_task {
                let runs: Vec<RunScore> = idx
                    .iter()
                    .filter_map(|&i| {
                        eval_at(&cells[i], budget).map(|r| RunScore {
                            seed: cells[i].meta.seed,
                            score: r.episode_reward,
                        })
                    })
                    .collect();
                if !runs.is_empty() {
                    scores.runs_by_task.insert(*task, runs);
                }
            }
            scores
        })
        .collect();
    BudgetScores { budget, methods }
}

/// rliable's four aggregates with intervals, for every method and task set at one budget.
#[derive(Debug, Clone)]
pub struct BudgetAggregates {
    pub budget: u64,
    /// One row per method and task set; sets a method has no run in are left out.
    pub rows: Vec<AggregateRow>,
    /// Every other method against the floor (the suite's `random` encoder), when there is one.
    pub improvements: Vec<ImprovementRow>,
}

/// rliable's probability of improvement of one method over the floor, on one set of tasks.
#[derive(Debug, Clone)]
pub struct ImprovementRow {
    pub method: String,
    pub floor: String,
    pub set: TaskSet,
    /// Tasks both have runs on: the only ones compared.
    pub num_tasks: usize,
    /// P(method > floor) with its interval.
    pub estimate: Estimate,
}

/// rliable's aggregates of one method over one set of tasks.
#[derive(Debug, Clone)]
pub struct AggregateRow {
    pub method: String,
    pub set: TaskSet,
    /// In `Aggregate::ALL` order.
    pub estimates: Vec<Estimate>,
    pub num_runs: usize,
    pub num_tasks: usize,
}

/// rliable's aggregates with intervals of every method's normalised scores, over all tasks,
/// the seen and the unseen ones.
pub fn aggregates_at(scores: &BudgetScores, floor: Option<&str>, bootstrap: &BootstrapConfig) -> BudgetAggregates {
    let mut rows = Vec::new();
    for m in &scores.methods {
        for set in TaskSet::ALL {
            let table = m.table(set);
            if table.num_runs() == 0 {
                continue;
            }
            rows.push(AggregateRow {
                method: m.method.clone(),
                set,
                estimates: interval_estimates(&table, &Aggregate::ALL, bootstrap),
                num_runs: table.num_runs(),
                num_tasks: table.tasks.len(),
            });
        }
    }
    BudgetAggregates {
        budget: scores.budget,
        rows,
        improvements: floor.map_or_else(Vec::new, |floor| improvements_over(scores, floor, bootstrap)),
    }
}

/// P(method > floor) for every method but the floor, over all, the seen and the unseen tasks,
/// each on the tasks of the set that both have runs on (normalised scores).
fn improvements_over(scores: &BudgetScores, floor: &str, bootstrap: &BootstrapConfig) -> Vec<ImprovementRow> {
    let Some(base) = scores.methods.iter().find(|m| m.method == floor) else {
        return Vec::new();
    };
    let has_runs = |ms: &MethodScores, t: &Task| ms.runs_by_task.get(t).is_some_and(|runs| !runs.is_empty());
    let mut rows = Vec::new();
    for m in scores.methods.iter().filter(|m| m.method != floor) {
        for set in TaskSet::ALL {
            let shared: Vec<Task> = m
                .tasks()
                .filter(|t| set.contains(*t) && has_runs(m, t) && has_runs(base, t))
                .collect();
            if shared.is_empty() {
                continue;
            }
            let table = |ms: &MethodScores| ScoreTable {
                tasks: shared.iter().filter_map(|t| ms.normalised(*t)).collect(),
            };
            rows.push(ImprovementRow {
                method: m.method.clone(),
                floor: floor.to_string(),
                set,
                num_tasks: shared.len(),
                estimate: improvement_estimate(&table(m), &table(base), bootstrap),
            });
        }
    }
    rows
}

/// One point of a learning curve: raw values over runs (seeds) at one evaluation frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    pub frame: u64,
    pub stats: SeedStats,
    /// The mean with its 95% percentile-bootstrap interval over the runs (runs resampled with
    /// replacement): what the figures draw. Inside the runs' range, so a return's never dips
    /// below 0; with a handful of seeds it is narrow and only a rough guide.
    pub interval: Estimate,
}

/// The learning curve of one method on one task: at every evaluation frame, the runs' returns
/// there summarised.
pub fn task_curve(cells: &[Cell], idx: &[usize], bootstrap: &BootstrapConfig) -> Vec<CurvePoint> {
    let mut by_frame: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for &i in idx {
        for row in cells[i].finished.iter().flat_map(|f| &f.evals) {
            by_frame.entry(row.frame).or_default().push(row.episode_reward);
        }
    }
    curve_points(by_frame, bootstrap)
}

/// The mean N (synthetic pairs in the objective's batch) of one method on one task over
/// frames: at every evaluation frame, the runs' mean N over the interval ending there,
/// summarised. Empty for methods without an objective.
pub fn selected_curve(cells: &[Cell], idx: &[usize], bootstrap: &BootstrapConfig) -> Vec<CurvePoint> {
    let mut by_frame: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for &i in idx {
        for &(frame, n) in cells[i].finished.iter().flat_map(|f| &f.selected) {
            by_frame.entry(frame).or_default().push(n);
        }
    }
    curve_points(by_frame, bootstrap)
}

/// Each frame's values over runs as a [`CurvePoint`].
pub fn curve_points(by_frame: BTreeMap<u64, Vec<f64>>, bootstrap: &BootstrapConfig) -> Vec<CurvePoint> {
    by_frame
        .into_par_iter()
        .filter_map(|(frame, xs)| {
            let stats = SeedStats::of(&xs)?;
            let table = ScoreTable { tasks: vec![xs] };
            let interval = interval_estimates(&table, &[Aggregate::Mean], bootstrap)[0];
            Some(CurvePoint { frame, stats, interval })
        })
        .collect()
}

/// The IQM of normalised scores over frames, with its interval, for one method: at every
/// frame that all the method's runs on DMControl tasks were evaluated at (runs are only pooled
/// where each one contributes, so the curve does not jump when a short run drops out).
pub fn iqm_curve(cells: &[Cell], method: &MethodCells, bootstrap: &BootstrapConfig) -> Vec<(u64, Estimate)> {
    // (the task's expert score, its runs) for the tasks that have one
    let tasks: Vec<(f64, &Vec<usize>)> = method
        .by_task
        .iter()
        .filter_map(|(task, idx)| Some((expert_score(*task)?, idx)))
        .collect();
    let all: Vec<usize> = tasks.iter().flat_map(|(_, idx)| idx.iter()).copied().collect();
    let frame_sets: Vec<Vec<u64>> = all
        .iter()
        .map(|&i| {
            cells[i]
                .finished
                .iter()
                .flat_map(|f| &f.evals)
                .map(|r| r.frame)
                .collect()
        })
        .collect();
    let Some(first) = frame_sets.first() else {
        return Vec::new();
    };
    let common: Vec<u64> = first
        .iter()
        .copied()
        .filter(|f| frame_sets.iter().all(|s| s.contains(f)))
        .collect();
    common
        .into_par_iter()
        .map(|frame| {
            let tasks = tasks
                .iter()
                .map(|(expert, idx)| {
                    idx.iter()
                        .filter_map(|&i| cells[i].finished.as_ref())
                        .filter_map(|f| f.evals.iter().find(|r| r.frame == frame))
                        .map(|r| r.episode_reward / expert)
                        .collect()
                })
                .collect();
            let table = ScoreTable { tasks };
            (frame, interval_estimates(&table, &[Aggregate::Iqm], bootstrap)[0])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_curve_point_is_the_mean_with_its_bootstrap_interval_inside_the_runs() {
        // Returns 0, 0, 30 over three seeds: mean 10, std 14.1 (mean − std < 0). Resampling the
        // three with replacement gives a mean of 0 with probability (2/3)³ ≈ 0.30 and of 30 with
        // (1/3)³ ≈ 0.037, both above 2.5%: the 95% percentile interval is [0, 30].
        let points = curve_points(
            BTreeMap::from([(1000, vec![0.0, 0.0, 30.0])]),
            &BootstrapConfig::default(),
        );
        let p = points[0];
        assert_eq!(p.frame, 1000);
        assert!((p.stats.mean - 10.0).abs() < 1e-12 && p.stats.mean - p.stats.std < 0.0);
        assert_eq!(
            (p.interval.point, p.interval.lower, p.interval.upper),
            (10.0, 0.0, 30.0)
        );
    }
}
