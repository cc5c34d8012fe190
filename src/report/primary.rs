//! The verdict of a suite's pre-registered primary comparison (`[primary]` in its suite file,
//! [`PrimaryComparison`]), computed by `lfs report` from the declaration alone (issue 35): the
//! difference of one aggregate of expert-normalised scores between two methods at the suite's
//! frame budget, its interval, and the decision rule fixed in the file: the stratified
//! bootstrap's interval with runs as units, or the permutation test of
//! [`super::seed_units`] with seeds as units.

use std::collections::BTreeSet;
use std::path::Path;

use super::aggregate::{self, Aggregate, BootstrapConfig, Estimate, ScoreTable};
use super::scores::{BudgetScores, MethodScores};
use super::seed_units::{self, PermutationTest};
use crate::env::Task;
use crate::suite::runner::SUITE_FILE;
use crate::suite::{PrimaryAggregate, PrimaryComparison, PrimaryUnit, SuiteFile};
use crate::Result;

/// What the decision rule says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The interval of a − b lies above 0 (runs as units), or the test rejects "no difference"
    /// with a − b > 0 (seeds as units).
    ABetter,
    /// The same below 0.
    BBetter,
    /// Neither.
    NoDifference,
    /// A method has no run at the budget on any task the other has runs on.
    NoRuns,
}

/// One comparison of the declared ones (`a` against one of `b`), as computed.
#[derive(Debug, Clone)]
pub struct PrimaryVerdict {
    pub declared: PrimaryComparison,
    /// The method of `declared.b` this comparison is against.
    pub b: String,
    /// The frame budget the scores are taken at (the suite's `num_train_frames`).
    pub budget: u64,
    /// The tasks both methods have runs on at that budget.
    pub tasks: Vec<Task>,
    /// Runs of a over those tasks.
    pub runs_a: usize,
    /// Runs of b over those tasks.
    pub runs_b: usize,
    /// a − b with its interval (NaN without runs).
    pub difference: Estimate,
    /// With seeds as units: the seeds compared and the test.
    pub seed_test: Option<SeedTest>,
    /// Holm's step-down p-value over the declared family, when `b` names several methods: the
    /// verdict is decided on it.
    pub holm_p: Option<f64>,
    /// With seeds as units and every split enumerated, a lower bound on the p-value the verdict
    /// is decided on (Holm's in a family), over every assignment of the method labels to these
    /// scores: above the level, these seeds could not have decided anything.
    pub smallest_p: Option<f64>,
    pub verdict: Verdict,
}

/// The seeds a seed-unit comparison used and its permutation test.
#[derive(Debug, Clone)]
pub struct SeedTest {
    pub seeds_a: Vec<u64>,
    pub seeds_b: Vec<u64>,
    /// Seeds left out because they miss one of the tasks: a's, then b's.
    pub incomplete_a: Vec<u64>,
    pub incomplete_b: Vec<u64>,
    pub test: PermutationTest,
}

impl PrimaryVerdict {
    /// The sentence the report prints.
    pub fn sentence(&self) -> String {
        let (a, b) = (&self.declared.a, &self.b);
        match self.verdict {
            Verdict::ABetter => format!("{a} is better than {b} at this scale"),
            Verdict::BBetter => format!("{b} is better than {a} at this scale"),
            Verdict::NoDifference => format!("no difference between {a} and {b} detected at this scale"),
            Verdict::NoRuns => format!("not decided: {a} and {b} have no runs on a common task at this budget"),
        }
    }

    /// Whether no outcome on these seeds could have been decided at the declared level.
    pub fn undecidable(&self) -> bool {
        self.smallest_p.is_some_and(|p| p > 1.0 - self.declared.confidence)
    }
}

fn aggregate_of(declared: PrimaryAggregate) -> Aggregate {
    match declared {
        PrimaryAggregate::Iqm => Aggregate::Iqm,
        PrimaryAggregate::Mean => Aggregate::Mean,
        PrimaryAggregate::Median => Aggregate::Median,
    }
}

/// The suite's declared primary comparison, if its folder holds a suite file that has one.
pub fn declared(suite_dir: &Path) -> Result<Option<(PrimaryComparison, u64)>> {
    let path = suite_dir.join(SUITE_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let suite = SuiteFile::load(&path)?;
    Ok(suite.primary.map(|p| (p, suite.num_train_frames.0)))
}

/// Applies the declared rule to the scores at its budget: one verdict per method of `b`, in its
/// order, decided on Holm's step-down p-values when there are several.
pub fn decide(declared: &PrimaryComparison, scores: &BudgetScores, bootstrap: &BootstrapConfig) -> Vec<PrimaryVerdict> {
    let mut verdicts: Vec<PrimaryVerdict> = declared
        .b
        .iter()
        .map(|b| decide_one(declared, b, scores, bootstrap))
        .collect();
    if verdicts.len() > 1 {
        // NoRuns comparisons have no p-value; they count as p = 1 in the family.
        let p: Vec<f64> = verdicts
            .iter()
            .map(|v| v.seed_test.as_ref().map_or(1.0, |t| t.test.p_value))
            .collect();
        let alpha = 1.0 - declared.confidence;
        for (v, adjusted) in verdicts.iter_mut().zip(holm(&p)) {
            v.holm_p = Some(adjusted);
            if v.verdict != Verdict::NoRuns {
                v.verdict = verdict_of(adjusted, alpha, v.difference.point);
            }
        }
        // A Holm-adjusted p is at least the comparison's own p and at least the family's size
        // times its smallest p; each p is at least its own smallest possible one (decide_one's;
        // 1 without a test). Unknown (a sampled test) where any of them is.
        let own: Option<Vec<f64>> = verdicts
            .iter()
            .map(|v| if v.seed_test.is_some() { v.smallest_p } else { Some(1.0) })
            .collect();
        let first_step = own.map(|own| own.len() as f64 * own.into_iter().fold(1.0, f64::min));
        for v in verdicts.iter_mut().filter(|v| v.seed_test.is_some()) {
            v.smallest_p = first_step.zip(v.smallest_p).map(|(first, p)| p.max(first).min(1.0));
        }
    }
    verdicts
}

/// Holm's step-down adjusted p-values, in the order given: the i-th smallest p times the
/// number of hypotheses not yet rejected (m − i + 1, i from 1), made non-decreasing along that
/// order and capped at 1.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// The seed-unit rule: rejected at `alpha`, in the direction of the difference.
fn verdict_of(p_value: f64, alpha: f64, difference: f64) -> Verdict {
    match p_value <= alpha {
        true if difference > 0.0 => Verdict::ABetter,
        true if difference < 0.0 => Verdict::BBetter,
        _ => Verdict::NoDifference,
    }
}

/// `declared.a` against `b_name` alone.
fn decide_one(
    declared: &PrimaryComparison,
    b_name: &str,
    scores: &BudgetScores,
    bootstrap: &BootstrapConfig,
) -> PrimaryVerdict {
    let find = |name: &str| scores.methods.iter().find(|m| m.method == name);
    let empty = MethodScores::empty("");
    let (a, b) = (find(&declared.a).unwrap_or(&empty), find(b_name).unwrap_or(&empty));
    let normalised_tasks =
        |m: &MethodScores| -> BTreeSet<Task> { m.tasks().filter(|t| m.normalised(*t).is_some()).collect() };
    let tasks: Vec<Task> = normalised_tasks(a)
        .intersection(&normalised_tasks(b))
        .copied()
        .collect();
    let table = |m: &MethodScores| ScoreTable {
        tasks: tasks.iter().filter_map(|t| m.normalised(*t)).collect(),
    };
    let (ta, tb) = (table(a), table(b));
    let cfg = BootstrapConfig {
        confidence: declared.confidence,
        ..*bootstrap
    };
    let aggregate = aggregate_of(declared.aggregate);
    let Decision {
        difference,
        seed_test,
        verdict,
    } = match declared.unit {
        _ if tasks.is_empty() => Decision::no_runs(),
        PrimaryUnit::Run => run_decision(&ta, &tb, aggregate, &cfg),
        PrimaryUnit::Seed => seed_decision(a, b, &tasks, aggregate, &cfg),
    };
    // With seeds as units, the runs of the seeds compared (a left-out seed's runs are not).
    let (runs_a, runs_b) = match &seed_test {
        Some(t) => (t.seeds_a.len() * tasks.len(), t.seeds_b.len() * tasks.len()),
        None => (ta.num_runs(), tb.num_runs()),
    };
    PrimaryVerdict {
        declared: declared.clone(),
        b: b_name.to_string(),
        budget: scores.budget,
        tasks,
        runs_a,
        runs_b,
        smallest_p: seed_test.as_ref().and_then(|t| t.test.smallest_p),
        difference,
        seed_test,
        holm_p: None,
        verdict,
    }
}

/// What a decision rule gives: a − b with its interval (NaN without runs), the seed-unit test
/// if any, and the verdict.
struct Decision {
    difference: Estimate,
    seed_test: Option<SeedTest>,
    verdict: Verdict,
}

impl Decision {
    /// Nothing to compare.
    fn no_runs() -> Self {
        Decision {
            difference: Estimate {
                point: f64::NAN,
                lower: f64::NAN,
                upper: f64::NAN,
            },
            seed_test: None,
            verdict: Verdict::NoRuns,
        }
    }
}

/// The run-unit rule: the stratified bootstrap's interval of a − b, decided by which side of 0
/// it lies on.
fn run_decision(ta: &ScoreTable, tb: &ScoreTable, aggregate: Aggregate, cfg: &BootstrapConfig) -> Decision {
    let d = aggregate::difference_estimate(ta, tb, aggregate, cfg);
    let verdict = if d.lower > 0.0 {
        Verdict::ABetter
    } else if d.upper < 0.0 {
        Verdict::BBetter
    } else {
        Verdict::NoDifference
    };
    Decision {
        difference: d,
        seed_test: None,
        verdict,
    }
}

/// The seed-unit rule over the seeds with runs on every one of `tasks`: the seeds' bootstrap
/// interval of a − b, decided by the permutation test at level 1 − `cfg.confidence`.
fn seed_decision(
    a: &MethodScores,
    b: &MethodScores,
    tasks: &[Task],
    aggregate: Aggregate,
    cfg: &BootstrapConfig,
) -> Decision {
    let (ua, ub) = (seed_units::units_of(a, tasks), seed_units::units_of(b, tasks));
    if ua.units.is_empty() || ub.units.is_empty() {
        return Decision::no_runs();
    }
    let d = seed_units::unit_bootstrap(&ua.units, &ub.units, aggregate, cfg);
    let test = seed_units::permutation_test(&ua.units, &ub.units, aggregate, seed_units::MAX_EXACT_SPLITS, cfg.seed);
    let verdict = verdict_of(test.p_value, 1.0 - cfg.confidence, d.point);
    let seeds = |u: &seed_units::MethodUnits| u.units.iter().map(|u| u.seed).collect();
    let seed_test = SeedTest {
        seeds_a: seeds(&ua),
        seeds_b: seeds(&ub),
        incomplete_a: ua.incomplete,
        incomplete_b: ub.incomplete,
        test,
    };
    Decision {
        difference: d,
        seed_test: Some(seed_test),
        verdict,
    }
}

/// The report's section on the declared comparisons (Markdown): the declaration once, then each
/// comparison's test, difference and verdict.
pub fn markdown(verdicts: &[PrimaryVerdict]) -> String {
    let mut md = String::from("## Pre-registered primary comparison\n\n");
    if let [first, ..] = verdicts {
        md.push_str(&declaration(first));
    }
    for v in verdicts {
        md.push_str(&comparison(v));
    }
    md
}

/// What was declared, and its rule, for `a` against the first `b` (and the family's Holm rule).
fn declaration(v: &PrimaryVerdict) -> String {
    let p = &v.declared;
    let family = p.b.len();
    let agg = aggregate_of(p.aggregate).name();
    // In a family the rule is stated once, for each of its methods.
    let b = if family > 1 { "the other method" } else { v.b.as_str() };
    let rule = match p.unit {
        PrimaryUnit::Run => format!(
            "with its {conf}% stratified-bootstrap percentile interval (each method's runs resampled \
             independently within each task). Rule: {a} is better if the interval lies above 0, {b} if it \
             lies below 0, otherwise no difference is detected",
            a = p.a,
            conf = 100.0 * p.confidence,
        ),
        PrimaryUnit::Seed => format!(
            "with seeds as the units (a seed's runs on every task together: they share its pre-trained \
             encoder). Rule: the exact two-sided permutation test of the seeds' method labels on this \
             difference; {a} is better if p ≤ {alpha} and the difference is above 0, {b} if p ≤ {alpha} and \
             it is below 0, otherwise no difference is detected. The interval, {conf}% percentile of a \
             bootstrap of each method's seeds, is descriptive",
            a = p.a,
            alpha = format_level(1.0 - p.confidence),
            conf = 100.0 * p.confidence,
        ),
    };
    let (what, rule) = if family > 1 {
        let each: Vec<String> = p.b.iter().map(|b| format!("**{} − {b}**", p.a)).collect();
        (
            each.join(" and "),
            format!(
                "{rule}. The {family} comparisons are one family: each is decided on its Holm step-down \
                 p-value (the i-th smallest p times {family} − i + 1, made non-decreasing), which holds the \
                 family-wise level at {}",
                format_level(1.0 - p.confidence)
            ),
        )
    } else {
        (format!("**{} − {b}**", p.a), rule)
    };
    format!(
        "Declared in the suite file before its results (`[primary]`): {what}, the difference of the {agg} \
         of expert-normalised scores at {budget} frames over the tasks both have runs on, {rule}.\n\n",
        budget = v.budget,
    )
}

/// One comparison's test, difference and verdict (under a heading of its own in a family).
fn comparison(v: &PrimaryVerdict) -> String {
    let p = &v.declared;
    let tasks: Vec<String> = v.tasks.iter().map(ToString::to_string).collect();
    let mut md = String::new();
    if p.b.len() > 1 {
        md.push_str(&format!("### {} − {}\n\n", p.a, v.b));
    }
    if let Some(t) = &v.seed_test {
        let list = |seeds: &[u64]| seeds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        md.push_str(&format!(
            "p = {:.4} ({} {} splits of the {} + {} seeds; {a}: seeds {}; {b}: seeds {}).\n\n",
            t.test.p_value,
            if t.test.exact { "all" } else { "a seeded sample of" },
            t.test.splits,
            t.seeds_a.len(),
            t.seeds_b.len(),
            list(&t.seeds_a),
            list(&t.seeds_b),
            a = p.a,
            b = v.b,
        ));
        if let Some(holm_p) = v.holm_p {
            md.push_str(&format!("Holm-adjusted p = {holm_p:.4}.\n\n"));
        }
        for (name, left_out) in [(&p.a, &t.incomplete_a), (&v.b, &t.incomplete_b)] {
            if !left_out.is_empty() {
                md.push_str(&format!(
                    "Left out of {name}: seeds {} (not one run on each task at this budget).\n\n",
                    list(left_out)
                ));
            }
        }
    }
    if v.verdict != Verdict::NoRuns {
        md.push_str(&format!(
            "{a} − {b} = {:+.3} [{:+.3}, {:+.3}] ({} and {} runs; tasks: {}).\n\n",
            v.difference.point,
            v.difference.lower,
            v.difference.upper,
            v.runs_a,
            v.runs_b,
            tasks.join(", "),
            a = p.a,
            b = v.b,
        ));
    }
    md.push_str(&format!("**Verdict: {}.**\n\n", v.sentence()));
    if let (true, Some(smallest)) = (v.undecidable(), v.smallest_p) {
        md.push_str(&format!(
            "These seeds could not have decided it: however their scores had fallen between the two \
             methods, the {which} would be at least {smallest:.4}, above {alpha}. Only more seeds can decide \
             this comparison.\n\n",
            which = if v.holm_p.is_some() { "Holm-adjusted p" } else { "p" },
            alpha = format_level(1.0 - p.confidence),
        ));
    }
    md
}

/// 0.05 rather than 0.050000000000000044.
fn format_level(alpha: f64) -> String {
    format!("{:.6}", alpha)
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::holm;

    /// Holm's step-down worked by hand: sorted p 0.01, 0.03, 0.04 times 3, 2, 1 are 0.03, 0.06,
    /// 0.04; made non-decreasing along that order, the last becomes 0.06. 0.6 and 0.7 times 2
    /// and 1 cap at 1. One hypothesis keeps its p.
    #[test]
    fn holm_matches_the_hand_computation() {
        for (p, want) in [
            (vec![0.01, 0.04, 0.03], vec![0.03, 0.06, 0.06]),
            (vec![0.5, 0.001, 0.2, 0.3], vec![0.6, 0.004, 0.6, 0.6]),
            (vec![0.6, 0.7], vec![1.0, 1.0]),
            (vec![0.02], vec![0.02]),
        ] {
            let adjusted = holm(&p);
            assert_eq!(adjusted.len(), want.len());
            for (ours, want) in adjusted.iter().zip(&want) {
                assert!((ours - want).abs() < 1e-12, "{p:?}: {adjusted:?}");
            }
        }
    }
}
