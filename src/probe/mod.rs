//! Linear probe: how much of a quantity (a DMControl state, a reward) a frozen encoder's features
//! hold linearly, measured by ridge regression and held-out R².
//!
//! The numerical core of `lfs probe`, on a 2-core CPU and features as wide as the encoder's
//! representation (39,200 for drqv2's), so everything runs in the dual (kernel) form:
//! - [`folds`]: group k-fold over episodes (frames of one episode never straddle a split);
//! - [`gram`]: the Gram matrix `X Xᵀ` (f32 GEMM, faer) and its centring with a subset's mean;
//! - [`targets`]: targets standardised on the training rows, constant dimensions left out;
//! - [`ridge`]: ridge with an unpenalised intercept, λ chosen by cross-validation from one
//!   eigendecomposition per fold, refit, prediction;
//! - [`r2`]: held-out R² per target dimension and a bootstrap over held-out episodes.
//!
//! eval/probe_reference.py is the protocol again in numpy (primal form, `numpy.linalg.solve`);
//! tests/probe.rs checks the two agree.
//!
//! Around it, `lfs probe` itself: [`split`] turns a task's episodes into rows (frame stacks with
//! the state and reward of their last frame), fitted-on and held-out by episode; [`probe_split`]
//! encodes them and probes the state and the reward; [`run`] does it task by task on a dataset
//! recorded by `lfs collect`; [`online`] is the small probe `lfs pretrain` logs as it trains.

pub mod folds;
pub mod gram;
pub mod online;
pub mod r2;
pub mod ridge;
pub mod run;
pub mod split;
pub mod targets;

use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use folds::{group_folds, GroupFolds};
pub use r2::{held_out_r2, r2_scores, GroupBootstrapConfig, GroupSums, HeldOutR2, R2Interval, R2Scores};
pub use ridge::{fit, CvScore, Lambda, LambdaSelection, RidgeConfig, RidgeFit, RidgeModel};
pub use run::{probe_dataset, ProbeEvent, ProbeReport, ProbeRun};
pub use split::{ProbeRows, ProbeSplit, SplitConfig};

use crate::nn::Encoder;
use crate::rl_loop::{FrozenFeatures, Representation};
use crate::{Error, Result};

/// A row-major matrix borrowed from a caller's buffer: `num_rows × num_cols`, row `i` at
/// `data[i * num_cols..(i + 1) * num_cols]`.
#[derive(Debug, Clone, Copy)]
pub struct RowMajor<'a, T> {
    data: &'a [T],
    num_rows: usize,
    num_cols: usize,
}

impl<'a, T> RowMajor<'a, T> {
    /// A view of `data` as `num_rows × num_cols`; [`Error::Shape`] unless the length fits.
    pub fn new(data: &'a [T], num_rows: usize, num_cols: usize) -> Result<Self> {
        if num_rows.checked_mul(num_cols) != Some(data.len()) {
            return Err(Error::Shape(format!(
                "probe: a {num_rows} × {num_cols} matrix needs {} values, got {}",
                num_rows.saturating_mul(num_cols),
                data.len()
            )));
        }
        Ok(RowMajor {
            data,
            num_rows,
            num_cols,
        })
    }

    pub fn num_rows(&self) -> usize {
        self.num_rows
    }

    pub fn num_cols(&self) -> usize {
        self.num_cols
    }

    /// All values, row after row.
    pub fn data(&self) -> &'a [T] {
        self.data
    }

    /// Row `i` (`num_cols` values).
    pub fn row(&self, i: usize) -> &'a [T] {
        &self.data[i * self.num_cols..(i + 1) * self.num_cols]
    }
}

/// [`Error::Shape`] unless `what` has `expected` rows.
fn check_rows(what: &str, got: usize, expected: usize) -> Result<()> {
    if got != expected {
        return Err(Error::Shape(format!(
            "probe: {what} has {got} rows, expected {expected}"
        )));
    }
    Ok(())
}

/// Observations encoded at once.
const ENCODE_BATCH: usize = 128;

/// Everything that decides a probe's numbers (recorded in `probe.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    pub split: SplitConfig,
    pub ridge: RidgeConfig,
    /// The intervals: resamples of the held-out episodes.
    pub bootstrap: GroupBootstrapConfig,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        Self {
            split: SplitConfig {
                test_fraction: 0.25,
                frame_stride: 4,
                min_test_episodes: 4,
                min_train_episodes: 10,
            },
            ridge: RidgeConfig::default(),
            bootstrap: GroupBootstrapConfig::default(),
        }
    }
}

impl ProbeConfig {
    /// Errors for settings that cannot work, naming the setting.
    pub fn validate(&self) -> Result<()> {
        let s = &self.split;
        if !(s.test_fraction > 0.0 && s.test_fraction < 1.0) {
            return Err(Error::Config(format!(
                "probe: the held-out share must be in (0, 1), got {}",
                s.test_fraction
            )));
        }
        if s.frame_stride == 0 {
            return Err(Error::Config("probe: the frame stride must be >= 1".into()));
        }
        if s.min_train_episodes < 2 * self.ridge.num_folds {
            return Err(Error::Config(format!(
                "probe: {} folds need at least {} fitted-on episodes (2 per fold), the minimum is {}",
                self.ridge.num_folds,
                2 * self.ridge.num_folds,
                s.min_train_episodes
            )));
        }
        if self.bootstrap.num_resamples == 0 {
            return Err(Error::Config("probe: the bootstrap needs at least 1 resample".into()));
        }
        self.ridge.validate()
    }
}

/// Something that turns observations into feature rows: a frozen encoder, or the encoder a
/// pre-training run is training.
pub trait Features {
    /// Features per observation.
    fn dim(&self) -> usize;
    /// (n, dim) f32 row-major features of `n` (9, 84, 84) uint8 observations.
    fn features(&self, obs: &[u8], n: usize) -> Result<Vec<f32>>;
}

impl Features for Encoder {
    fn dim(&self) -> usize {
        self.repr_dim()
    }

    fn features(&self, obs: &[u8], n: usize) -> Result<Vec<f32>> {
        Ok(self.encode(obs, n, false)?.h.flatten_all()?.to_vec1::<f32>()?)
    }
}

impl Features for FrozenFeatures {
    fn dim(&self) -> usize {
        self.repr_dim()
    }

    fn features(&self, obs: &[u8], n: usize) -> Result<Vec<f32>> {
        Ok(self.encode(obs, n)?.flatten_all()?.to_vec1::<f32>()?)
    }
}

/// (n, dim) features of every row, encoded in batches; `on_rows` hears how many rows each batch
/// encoded.
pub fn encode_rows<F: Features + ?Sized>(
    features: &F,
    rows: &ProbeRows,
    on_rows: &mut dyn FnMut(usize),
) -> Result<Vec<f32>> {
    let n = rows.len();
    let obs_len = rows.obs.len() / n.max(1);
    let mut out = Vec::with_capacity(n * features.dim());
    for start in (0..n).step_by(ENCODE_BATCH) {
        let b = ENCODE_BATCH.min(n - start);
        out.extend(features.features(&rows.obs[start * obs_len..(start + b) * obs_len], b)?);
        on_rows(b);
    }
    Ok(out)
}

/// One target's probe: the penalty cross-validation chose and the held-out score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetProbe {
    /// The dimensions scored (`reward` for the reward); dimensions constant over the fitted-on
    /// rows are left out (their indices are in `fit.excluded_dims`).
    pub names: Vec<String>,
    /// The chosen λ, the cross-validated R² of every candidate, the dimensions kept.
    pub fit: LambdaSelection,
    /// Held-out R², mean over the dimensions and per dimension, with intervals.
    pub held_out: HeldOutR2,
    /// Per held-out episode, the sums R² is made of: two encoders probed on the same probe set
    /// share the episodes and targets, so a paired bootstrap of their difference can resample
    /// the same episodes for both (eval/probe_compare.py).
    pub held_out_episodes: Vec<EpisodeSums>,
}

/// One held-out episode's sums over its rows, per kept target dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSums {
    pub episode: u64,
    pub rows: usize,
    /// Σ y, Σ y², Σ (y − ŷ)² per dimension.
    pub sum_y: Vec<f64>,
    pub sum_y2: Vec<f64>,
    pub sum_sq_err: Vec<f64>,
}

/// [`EpisodeSums`] of every group of `groups`, in ascending group order; `y` and `predicted` are
/// (n, k) row-major.
fn episode_sums(y: &[f64], predicted: &[f64], k: usize, groups: &[u64]) -> Vec<EpisodeSums> {
    let mut by_group: std::collections::BTreeMap<u64, EpisodeSums> = std::collections::BTreeMap::new();
    for (i, &g) in groups.iter().enumerate() {
        let e = by_group.entry(g).or_insert_with(|| EpisodeSums {
            episode: g,
            rows: 0,
            sum_y: vec![0.0; k],
            sum_y2: vec![0.0; k],
            sum_sq_err: vec![0.0; k],
        });
        e.rows += 1;
        for c in 0..k {
            let (t, p) = (y[i * k + c], predicted[i * k + c]);
            e.sum_y[c] += t;
            e.sum_y2[c] += t * t;
            e.sum_sq_err[c] += (t - p) * (t - p);
        }
    }
    by_group.into_values().collect()
}

/// One task's probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskProbe {
    pub task: String,
    pub train_episodes: usize,
    pub test_episodes: usize,
    pub train_rows: usize,
    pub test_rows: usize,
    /// The standardised state of the stack's last frame.
    pub state: TargetProbe,
    /// The reward of the step that led to it.
    pub reward: TargetProbe,
    /// Wall-clock seconds: encoding, fitting both targets and scoring.
    pub seconds: f64,
}

/// Encodes a task's rows with `features` and probes the state and the reward.
pub fn probe_split<F: Features + ?Sized>(
    features: &F,
    split: &ProbeSplit,
    cfg: &ProbeConfig,
    on_rows: &mut dyn FnMut(usize),
) -> Result<TaskProbe> {
    let start = Instant::now();
    let dim = features.dim();
    let train_x = encode_rows(features, &split.train, on_rows)?; // (n_train, dim)
    let test_x = encode_rows(features, &split.test, on_rows)?; // (n_test, dim)
    let train_x = RowMajor::new(&train_x, split.train.len(), dim)?;
    let test_x = RowMajor::new(&test_x, split.test.len(), dim)?;
    let groups = |rows: &ProbeRows| rows.episodes.iter().map(|&e| u64::from(e)).collect::<Vec<u64>>();
    let (train_groups, test_groups) = (groups(&split.train), groups(&split.test));
    let target = |names: &[String], train_y: &[f64], test_y: &[f64]| -> Result<TargetProbe> {
        let k = names.len();
        let fitted = fit(
            train_x,
            RowMajor::new(train_y, split.train.len(), k)?,
            &train_groups,
            &cfg.ridge,
        )?;
        let predicted = fitted.model.predict(test_x)?; // (n_test, kept)
        let kept = fitted.model.kept_targets(RowMajor::new(test_y, split.test.len(), k)?)?;
        let num_kept = fitted.model.kept_dims.len();
        let held_out = held_out_r2(
            RowMajor::new(&kept, split.test.len(), num_kept)?,
            RowMajor::new(&predicted, split.test.len(), num_kept)?,
            &test_groups,
            &cfg.bootstrap,
        )?;
        Ok(TargetProbe {
            names: fitted.model.kept_dims.iter().map(|&i| names[i].clone()).collect(),
            fit: fitted.selection,
            held_out,
            held_out_episodes: episode_sums(&kept, &predicted, num_kept, &test_groups),
        })
    };
    let state = target(&split.state_names, &split.train.state, &split.test.state)?;
    let reward = target(&["reward".to_string()], &split.train.reward, &split.test.reward)?;
    Ok(TaskProbe {
        task: split.task.clone(),
        train_episodes: split.train.num_episodes(),
        test_episodes: split.test.num_episodes(),
        train_rows: split.train.len(),
        test_rows: split.test.len(),
        state,
        reward,
        seconds: start.elapsed().as_secs_f64(),
    })
}
