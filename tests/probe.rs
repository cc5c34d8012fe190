//! The linear probe's numerical core (`lfs::probe`): ridge by group k-fold CV in the dual form
//! on synthetic data (exact linear targets, pure noise, constant dimensions, bad input), the
//! whole protocol against eval/probe_reference.py (numpy, primal form, `numpy.linalg.solve`),
//! and the held-out R² bootstrap over groups.

use std::process::Command;
use std::time::Instant;

use lfs::probe::{fit, held_out_r2, r2_scores, GroupBootstrapConfig, GroupSums, RidgeConfig, RidgeFit, RowMajor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use crate::common::{python, repo};

/// Synthetic probe data: features, targets and the group (episode) of each row.
struct Case {
    /// (n, d)
    x: Vec<f32>,
    /// (n, k)
    y: Vec<f64>,
    /// (n,)
    groups: Vec<u64>,
    d: usize,
    k: usize,
}

impl Case {
    fn n(&self) -> usize {
        self.groups.len()
    }

    fn x(&self) -> RowMajor<'_, f32> {
        RowMajor::new(&self.x, self.n(), self.d).unwrap()
    }

    fn y(&self) -> RowMajor<'_, f64> {
        RowMajor::new(&self.y, self.n(), self.k).unwrap()
    }
}

/// Features with a common offset of 0.5 (encoder features share a mean), `rows_per_group` rows
/// for each of `groups`: uniform in [-1, 1) if `mixing` is None, else uniform latents `z`
/// (rank) mixed to `z A` (`mixing` = A, (rank, d)), rank-deficient as encoder features are.
fn features(
    rng: &mut ChaCha8Rng,
    groups: std::ops::Range<u64>,
    rows_per_group: usize,
    d: usize,
    mixing: Option<&[f64]>,
) -> (Vec<f32>, Vec<u64>) {
    let group_ids: Vec<u64> = groups.flat_map(|g| std::iter::repeat_n(g, rows_per_group)).collect();
    let x = match mixing {
        None => (0..group_ids.len() * d)
            .map(|_| rng.random_range(-1.0f32..1.0) + 0.5)
            .collect(),
        Some(a) => {
            let rank = a.len() / d;
            (0..group_ids.len())
                .flat_map(|_| {
                    let z: Vec<f64> = (0..rank).map(|_| rng.random_range(-1.0..1.0)).collect();
                    (0..d)
                        .map(|j| ((0..rank).map(|r| z[r] * a[r * d + j]).sum::<f64>() + 0.5) as f32)
                        .collect::<Vec<_>>()
                })
                .collect()
        }
    };
    (x, group_ids)
}

/// `x w + b + noise · u` per target (`w` (d, k)), with `u` uniform in [-1, 1).
fn linear_targets(rng: &mut ChaCha8Rng, x: &[f32], d: usize, w: &[f64], bias: &[f64], noise: &[f64]) -> Vec<f64> {
    let k = bias.len();
    x.chunks(d)
        .flat_map(|row| {
            (0..k)
                .map(|c| {
                    let signal: f64 = row.iter().enumerate().map(|(j, &v)| f64::from(v) * w[j * k + c]).sum();
                    signal + bias[c] + noise[c] * rng.random_range(-1.0..1.0)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn random_weights(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// A train case and a test case with disjoint groups, targets from the same linear map of the
/// features; full-rank features if `rank` is None, else of that rank.
fn train_test(seed: u64, d: usize, rank: Option<usize>, groups: GroupCounts, noise: &[f64]) -> (Case, Case) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let k = noise.len();
    let w = random_weights(&mut rng, d * k);
    let mixing = rank.map(|r| random_weights(&mut rng, r * d));
    let bias: Vec<f64> = (0..k).map(|c| c as f64 * 3.0 - 1.0).collect();
    let mut make = |ids: std::ops::Range<u64>| {
        let (x, groups) = features(&mut rng, ids, groups.rows_per_group, d, mixing.as_deref());
        let y = linear_targets(&mut rng, &x, d, &w, &bias, noise);
        Case { x, y, groups, d, k }
    };
    let train = make(0..groups.train);
    let test = make(groups.train..groups.train + groups.test);
    (train, test)
}

/// Episodes on each side of a synthetic split, and rows per episode.
#[derive(Clone, Copy)]
struct GroupCounts {
    train: u64,
    test: u64,
    rows_per_group: usize,
}

const fn groups(train: u64, test: u64, rows_per_group: usize) -> GroupCounts {
    GroupCounts {
        train,
        test,
        rows_per_group,
    }
}

fn fit_and_score(train: &Case, test: &Case, cfg: &RidgeConfig) -> (RidgeFit, lfs::probe::R2Scores) {
    let fitted = fit(train.x(), train.y(), &train.groups, cfg).unwrap();
    let pred = fitted.model.predict(test.x()).unwrap();
    let kept = fitted.model.kept_targets(test.y()).unwrap();
    let k = fitted.model.kept_dims.len();
    let scores = r2_scores(
        RowMajor::new(&kept, test.n(), k).unwrap(),
        RowMajor::new(&pred, test.n(), k).unwrap(),
    )
    .unwrap();
    (fitted, scores)
}

// ---------------------------------------------------------------------------------------------
// synthetic data

/// Targets that are an exact linear function of the features are recovered on held-out
/// episodes: with fewer features than rows, and with more (of rank 20, as 240 rows cannot pin
/// down a general map of 400 features).
#[test]
fn exact_linear_targets_are_recovered() {
    for (d, rank) in [(40, None), (400, Some(20))] {
        let (train, test) = train_test(1, d, rank, groups(20, 6, 12), &[0.0, 0.0, 0.0]);
        let (fitted, scores) = fit_and_score(&train, &test, &RidgeConfig::default());
        assert!(scores.mean > 0.999, "d = {d}: held-out R² {:?}", scores);
        assert!(scores.per_dim.iter().all(|&r2| r2 > 0.999), "d = {d}: {scores:?}");
        let best_cv = fitted.selection.cv.iter().map(|s| s.mean_r2).fold(f64::MIN, f64::max);
        assert!(best_cv > 0.999, "d = {d}: best CV R² {best_cv}");
        assert!(
            fitted.selection.chosen.relative <= 1e-3,
            "d = {d}: {:?}",
            fitted.selection.chosen
        );
    }
}

/// Targets independent of the features: held-out R² near 0, and the chosen λ at the heavy end
/// of the grid (predicting the mean).
#[test]
fn pure_noise_targets_score_near_zero_with_a_large_lambda() {
    let (train, test) = train_test(2, 300, None, groups(20, 8, 15), &[0.0, 0.0]);
    // replace the targets by noise drawn independently of everything
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let noise = |n: usize, rng: &mut ChaCha8Rng| (0..n * 2).map(|_| rng.random_range(-1.0..1.0)).collect();
    let train = Case {
        y: noise(train.n(), &mut rng),
        ..train
    };
    let test = Case {
        y: noise(test.n(), &mut rng),
        ..test
    };
    let (fitted, scores) = fit_and_score(&train, &test, &RidgeConfig::default());
    assert!(scores.mean.abs() < 0.05, "held-out R² {scores:?}");
    let grid = &RidgeConfig::default().relative_lambdas;
    assert!(
        fitted.selection.chosen.relative >= grid[grid.len() - 3],
        "chose {:?}",
        fitted.selection.chosen
    );
    assert!(
        fitted.selection.cv.iter().all(|s| s.mean_r2 < 0.02),
        "{:?}",
        fitted.selection.cv
    );
}

/// A constant target dimension is excluded and reported; the others are probed and predicted in
/// their order.
#[test]
fn constant_target_dimensions_are_excluded() {
    let (mut train, test) = train_test(3, 20, None, groups(10, 4, 8), &[0.1, 0.0, 0.1]);
    // dimension 1 constant on the training rows (0.3 is not a binary fraction)
    for i in 0..train.n() {
        train.y[i * 3 + 1] = 0.3;
    }
    let (fitted, scores) = fit_and_score(&train, &test, &RidgeConfig::default());
    assert_eq!(fitted.selection.excluded_dims, vec![1]);
    assert_eq!(fitted.selection.kept_dims, vec![0, 2]);
    assert_eq!(fitted.model.num_targets, 3);
    assert_eq!(scores.per_dim.len(), 2);
    assert!(fitted.selection.cv.iter().all(|s| s.r2_per_dim.len() == 2));
    assert!(scores.mean > 0.9, "{scores:?}");
}

/// The dual coefficients mean what the model says: `Σ_i (x − x̄)·(x_i − x̄) α_i + intercept`
/// over the training rows (the cross Gram, here in f64) is `predict`'s `(x − x̄) W + intercept`.
#[test]
fn dual_coefficients_predict_through_the_cross_gram() {
    let (train, test) = train_test(9, 50, None, groups(10, 3, 6), &[0.3, 1.0]);
    let fitted = fit(train.x(), train.y(), &train.groups, &RidgeConfig::default()).unwrap();
    let model = &fitted.model;
    let pred = model.predict(test.x()).unwrap();
    let centred = |row: &[f32]| -> Vec<f64> {
        row.iter()
            .zip(&model.feature_mean)
            .map(|(&v, m)| f64::from(v) - m)
            .collect()
    };
    let train_rows: Vec<Vec<f64>> = train.x.chunks(train.d).map(centred).collect();
    for (t, row) in test.x.chunks(test.d).enumerate() {
        let x_t = centred(row);
        for c in 0..2 {
            let through_gram: f64 = train_rows
                .iter()
                .enumerate()
                .map(|(i, x_i)| x_i.iter().zip(&x_t).map(|(a, b)| a * b).sum::<f64>() * model.dual_coef[i * 2 + c])
                .sum::<f64>()
                + model.intercept[c];
            assert!(
                close(pred[t * 2 + c], through_gram, 1e-9),
                "{} vs {through_gram}",
                pred[t * 2 + c]
            );
        }
    }
}

/// Bad input fails with a message that says what to change.
#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let (train, _) = train_test(4, 10, None, groups(9, 1, 5), &[0.1]);
    let cfg = RidgeConfig::default(); // 5 folds: 10 groups needed
    let err = fit(train.x(), train.y(), &train.groups, &cfg).unwrap_err().to_string();
    assert!(
        err.contains("needs at least 2 groups (episodes) per fold, 10 in all, but the training rows come from 9"),
        "{err}"
    );
    assert!(err.contains("use fewer folds or more episodes"), "{err}");
    let three_folds = RidgeConfig {
        num_folds: 3,
        ..RidgeConfig::default()
    };
    assert!(fit(train.x(), train.y(), &train.groups, &three_folds).is_ok());

    let err = fit(train.x(), train.y(), &train.groups[1..], &three_folds)
        .unwrap_err()
        .to_string();
    assert!(err.contains("the group ids has 44 rows, expected 45"), "{err}");
    let constant = vec![2.5; train.n()];
    let err = fit(
        train.x(),
        RowMajor::new(&constant, train.n(), 1).unwrap(),
        &train.groups,
        &three_folds,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("none of the 1 target dimensions varies"), "{err}");
    let mut nan = train.x.clone();
    nan[3 * 10 + 2] = f32::NAN;
    let err = fit(
        RowMajor::new(&nan, train.n(), 10).unwrap(),
        train.y(),
        &train.groups,
        &three_folds,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("feature row 3 has a non-finite value"), "{err}");

    let fitted = fit(train.x(), train.y(), &train.groups, &three_folds).unwrap();
    let narrow = vec![0.0f32; 2 * 9];
    let err = fitted
        .model
        .predict(RowMajor::new(&narrow, 2, 9).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("fitted on 10 features, these rows have 9"), "{err}");
    assert!(RowMajor::new(&narrow, 3, 5).is_err());
}

// ---------------------------------------------------------------------------------------------
// the numpy reference

/// `|a − b| ≤ tol · (1 + |b|)`.
fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

/// The whole protocol against eval/probe_reference.py, which solves the primal normal
/// equations with `numpy.linalg.solve` for every fold and λ (float64): CV R² per λ and
/// dimension, the chosen λ, the held-out predictions and R² agree to 1e-6 (relative, or
/// absolute below 1). The case: 120 training rows from 12 episodes, 30 features with a common
/// offset, 3 noisy linear targets and a constant one, 4 folds, 40 test rows from 4 episodes.
#[test]
fn protocol_matches_the_numpy_primal_reference() {
    const TOL: f64 = 1e-6;
    let (mut train, test) = train_test(5, 30, None, groups(12, 4, 10), &[0.5, 2.0, 4.0, 0.0]);
    for i in 0..train.n() {
        train.y[i * 4 + 3] = -7.0; // constant: excluded on both sides
    }
    let cfg = RidgeConfig {
        num_folds: 4,
        ..RidgeConfig::default()
    };
    let (fitted, scores) = fit_and_score(&train, &test, &cfg);
    let pred = fitted.model.predict(test.x()).unwrap();

    let rows = |c: &Case| -> Vec<Vec<f32>> { c.x.chunks(c.d).map(<[f32]>::to_vec).collect() };
    let targets = |c: &Case| -> Vec<Vec<f64>> { c.y.chunks(c.k).map(<[f64]>::to_vec).collect() };
    let case = json!({
        "num_folds": cfg.num_folds,
        "relative_lambdas": cfg.relative_lambdas,
        "train": {"x": rows(&train), "y": targets(&train), "groups": train.groups},
        "test": {"x": rows(&test), "y": targets(&test)},
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("case.json");
    std::fs::write(&path, case.to_string()).unwrap();
    let out = Command::new(python())
        .arg(repo().join("eval/probe_reference.py"))
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reference: Value = serde_json::from_slice(&out.stdout).unwrap();

    let sel = &fitted.selection;
    assert_eq!(serde_json::to_value(&sel.kept_dims).unwrap(), reference["kept_dims"]);
    assert_eq!(
        serde_json::to_value(&sel.excluded_dims).unwrap(),
        reference["excluded_dims"]
    );
    assert!(close(
        sel.kernel_scale,
        reference["kernel_scale"].as_f64().unwrap(),
        TOL
    ));
    let cv_r2 = reference["cv_r2"].as_array().unwrap();
    for ((score, theirs), theirs_mean) in sel.cv.iter().zip(cv_r2).zip(f64s(&reference["cv_mean_r2"])) {
        let c = score.lambda.relative;
        assert!(
            close(score.mean_r2, theirs_mean, TOL),
            "c = {c}: {} vs {theirs_mean}",
            score.mean_r2
        );
        for (ours, theirs) in score.r2_per_dim.iter().zip(f64s(theirs)) {
            assert!(close(*ours, theirs, TOL), "c = {c}: {ours} vs {theirs}");
        }
    }
    assert_eq!(sel.chosen.relative, reference["chosen_relative"].as_f64().unwrap());
    assert!(close(
        sel.chosen.absolute,
        reference["chosen_absolute"].as_f64().unwrap(),
        TOL
    ));
    // the chosen λ is inside the grid, so the comparison is not between two edge cases
    let chosen = reference["chosen_index"].as_u64().unwrap() as usize;
    assert!(
        chosen > 0 && chosen < cfg.relative_lambdas.len() - 1,
        "chosen index {chosen}"
    );

    let their_pred: Vec<f64> = reference["test_predictions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(f64s)
        .collect();
    assert_eq!(pred.len(), their_pred.len());
    for (ours, theirs) in pred.iter().zip(&their_pred) {
        assert!(close(*ours, *theirs, TOL), "prediction {ours} vs {theirs}");
    }
    for (ours, theirs) in scores.per_dim.iter().zip(f64s(&reference["test_r2"])) {
        assert!(close(*ours, theirs, TOL), "test R² {ours} vs {theirs}");
    }
    assert!(close(scores.mean, reference["test_mean_r2"].as_f64().unwrap(), TOL));
}

// ---------------------------------------------------------------------------------------------
// the bootstrap over held-out groups

/// Held-out targets and noisy predictions of them: 10 groups of 7 rows, 3 dimensions.
fn held_out(seed: u64) -> (Vec<f64>, Vec<f64>, Vec<u64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let groups: Vec<u64> = (0..10u64).flat_map(|g| std::iter::repeat_n(100 - 3 * g, 7)).collect();
    let y: Vec<f64> = (0..groups.len() * 3).map(|_| rng.random_range(-2.0..2.0)).collect();
    let pred = y.iter().map(|v| v + rng.random_range(-1.0..1.0)).collect();
    (y, pred, groups)
}

/// The R² of a resample from per-group sums equals the R² of its rows written out.
#[test]
fn group_sums_give_the_r2_of_the_resampled_rows() {
    let (y, pred, groups) = held_out(6);
    let n = groups.len();
    let sums = GroupSums::new(
        RowMajor::new(&y, n, 3).unwrap(),
        RowMajor::new(&pred, n, 3).unwrap(),
        &groups,
    )
    .unwrap();
    assert_eq!(sums.num_groups(), 10);
    // multiplicities in ascending group id order: ids 73, 76, …, 100
    let multiplicity = [0u32, 3, 1, 0, 0, 2, 0, 1, 2, 1];
    let mut sorted_ids: Vec<u64> = groups.clone();
    sorted_ids.dedup();
    sorted_ids.sort();
    let (mut y_rows, mut pred_rows) = (Vec::new(), Vec::new());
    for (id, &times) in sorted_ids.iter().zip(&multiplicity) {
        for _ in 0..times {
            for i in (0..n).filter(|&i| groups[i] == *id) {
                y_rows.extend_from_slice(&y[i * 3..i * 3 + 3]);
                pred_rows.extend_from_slice(&pred[i * 3..i * 3 + 3]);
            }
        }
    }
    let rows = y_rows.len() / 3;
    let direct = r2_scores(
        RowMajor::new(&y_rows, rows, 3).unwrap(),
        RowMajor::new(&pred_rows, rows, 3).unwrap(),
    )
    .unwrap();
    let mut from_sums = [0.0; 3];
    sums.weighted_r2(&multiplicity, &mut from_sums);
    for (a, b) in from_sums.iter().zip(&direct.per_dim) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

/// Intervals hold the point estimate, are reproducible from the seed, collapse to 1 for exact
/// predictions, and need two groups.
#[test]
fn bootstrap_intervals_over_groups() {
    let (y, pred, groups) = held_out(7);
    let n = groups.len();
    let (y_m, p_m) = (RowMajor::new(&y, n, 3).unwrap(), RowMajor::new(&pred, n, 3).unwrap());
    let cfg = GroupBootstrapConfig {
        num_resamples: 2000,
        confidence: 0.95,
        seed: 11,
    };
    let a = held_out_r2(y_m, p_m, &groups, &cfg).unwrap();
    assert_eq!(a, held_out_r2(y_m, p_m, &groups, &cfg).unwrap());
    let point = r2_scores(y_m, p_m).unwrap();
    assert_eq!(a.mean.point, point.mean);
    assert_eq!((a.num_rows, a.num_groups), (70, 10));
    for (interval, p) in a
        .per_dim
        .iter()
        .chain([&a.mean])
        .zip(point.per_dim.iter().chain([&point.mean]))
    {
        assert_eq!(interval.point, *p);
        assert!(interval.low < *p && *p < interval.high, "{interval:?}");
        assert!(interval.high - interval.low < 0.5, "{interval:?}");
    }
    let other_seed = held_out_r2(
        y_m,
        p_m,
        &groups,
        &GroupBootstrapConfig {
            seed: 12,
            ..cfg.clone()
        },
    )
    .unwrap();
    assert_ne!(a.mean.low, other_seed.mean.low);
    assert!((a.mean.low - other_seed.mean.low).abs() < 0.05);

    // perfect predictions: every resample scores 1
    let exact = held_out_r2(y_m, y_m, &groups, &cfg).unwrap();
    assert_eq!((exact.mean.low, exact.mean.point, exact.mean.high), (1.0, 1.0, 1.0));

    let one_group = vec![5u64; n];
    let err = held_out_r2(y_m, p_m, &one_group, &cfg).unwrap_err().to_string();
    assert!(err.contains("needs at least 2 of them, got 1"), "{err}");
    let json = serde_json::to_value(&a).unwrap();
    assert!(json["per_dim"][2]["high"].is_f64() && json["bootstrap"]["num_resamples"] == 2000);
}

// ---------------------------------------------------------------------------------------------
// speed at the encoder's width

/// `fit` + `predict` at the size of a real probe: 1600 training rows (40 episodes), 400 test
/// rows, 39,200 features (drqv2's representation), 30 targets. Prints the time; run with
/// `cargo test --release --test integration probe::timing -- --ignored --nocapture`.
#[test]
#[ignore = "a timing, not a check: about 300 MB of features"]
fn timing_at_the_encoders_width() {
    let (train, test) = train_test(8, 39_200, None, groups(40, 10, 40), &[0.5; 30]);
    let start = Instant::now();
    let fitted = fit(train.x(), train.y(), &train.groups, &RidgeConfig::default()).unwrap();
    let fit_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let pred = fitted.model.predict(test.x()).unwrap();
    let predict_s = start.elapsed().as_secs_f64();
    assert_eq!(pred.len(), 400 * 30);
    eprintln!(
        "fit {fit_s:.2} s + predict {predict_s:.2} s (n_train 1600, n_test 400, d 39200, k 30, {} threads); chose {:?}",
        rayon::current_num_threads(),
        fitted.selection.chosen
    );
}
