//! The verdict of a suite's pre-registered primary comparison (`[primary]` in its suite file,
//! [`PrimaryComparison`]), computed by `lfs report` from the declaration alone (issue 35): the
//! difference of one aggregate of expert-normalised scores between two methods at the suite's
//! frame budget, its stratified-bootstrap interval, and the decision rule fixed in the file.

use std::collections::BTreeSet;
use std::path::Path;

use super::aggregate::{self, Aggregate, BootstrapConfig, Estimate, ScoreTable};
use super::scores::{BudgetScores, MethodScores};
use crate::env::Task;
use crate::suite::runner::SUITE_FILE;
use crate::suite::{PrimaryAggregate, PrimaryComparison, SuiteFile};
use crate::Result;

/// What the decision rule says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The interval of a − b lies above 0.
    ABetter,
    /// The interval of a − b lies below 0.
    BBetter,
    /// The interval holds 0.
    NoDifference,
    /// A method has no run at the budget on any task the other has runs on.
    NoRuns,
}

/// The declared comparison, as computed.
#[derive(Debug, Clone)]
pub struct PrimaryVerdict {
    pub declared: PrimaryComparison,
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
    pub verdict: Verdict,
}

impl PrimaryVerdict {
    /// The sentence the report prints.
    pub fn sentence(&self) -> String {
        let (a, b) = (&self.declared.a, &self.declared.b);
        match self.verdict {
            Verdict::ABetter => format!("{a} is better than {b} at this scale"),
            Verdict::BBetter => format!("{b} is better than {a} at this scale"),
            Verdict::NoDifference => format!("no difference between {a} and {b} detected at this scale"),
            Verdict::NoRuns => format!("not decided: {a} and {b} have no runs on a common task at this budget"),
        }
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

/// Applies the declared rule to the scores at its budget.
pub fn decide(declared: &PrimaryComparison, scores: &BudgetScores, bootstrap: &BootstrapConfig) -> PrimaryVerdict {
    let find = |name: &str| scores.methods.iter().find(|m| m.method == name);
    let empty = MethodScores {
        method: String::new(),
        by_task: Default::default(),
    };
    let (a, b) = (find(&declared.a).unwrap_or(&empty), find(&declared.b).unwrap_or(&empty));
    let normalised_tasks = |m: &MethodScores| -> BTreeSet<Task> {
        m.by_task
            .keys()
            .filter(|t| m.normalised(**t).is_some())
            .copied()
            .collect()
    };
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
    let (difference, verdict) = if tasks.is_empty() {
        let nan = Estimate {
            point: f64::NAN,
            lower: f64::NAN,
            upper: f64::NAN,
        };
        (nan, Verdict::NoRuns)
    } else {
        let d = aggregate::difference_estimate(&ta, &tb, aggregate_of(declared.aggregate), &cfg);
        let verdict = if d.lower > 0.0 {
            Verdict::ABetter
        } else if d.upper < 0.0 {
            Verdict::BBetter
        } else {
            Verdict::NoDifference
        };
        (d, verdict)
    };
    PrimaryVerdict {
        declared: declared.clone(),
        budget: scores.budget,
        tasks,
        runs_a: ta.num_runs(),
        runs_b: tb.num_runs(),
        difference,
        verdict,
    }
}

/// The report's section on it (Markdown).
pub fn markdown(v: &PrimaryVerdict) -> String {
    let p = &v.declared;
    let agg = aggregate_of(p.aggregate).name();
    let tasks: Vec<String> = v.tasks.iter().map(ToString::to_string).collect();
    let mut md = String::from("## Pre-registered primary comparison\n\n");
    md.push_str(&format!(
        "Declared in the suite file before its results (`[primary]`): **{a} − {b}**, the difference of the {agg} \
         of expert-normalised scores at {budget} frames over the tasks both have runs on, with its {conf}% \
         stratified-bootstrap percentile interval (each method's runs resampled independently within each \
         task). Rule: {a} is better if the interval lies above 0, {b} if it lies below 0, otherwise no \
         difference is detected.\n\n",
        a = p.a,
        b = p.b,
        budget = v.budget,
        conf = 100.0 * p.confidence,
    ));
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
            b = p.b,
        ));
    }
    md.push_str(&format!("**Verdict: {}.**\n\n", v.sentence()));
    md
}
