"""The linear probe's protocol in primal form with numpy (float64): the reference for src/probe/.

    .venv/bin/python eval/probe_reference.py case.json   # -> JSON on stdout

An independent transcription of the protocol documented in src/probe/ridge.rs and r2.rs, with a
different algorithm: the primal normal equations solved by `numpy.linalg.solve` for every fold
and every lambda (Rust uses the dual form, an f32 Gram matrix and one eigendecomposition per
fold). tests/probe.rs writes a small case, runs this script and compares.

Protocol:
- targets standardised with the training rows' mean and std (ddof 0); a dimension whose std is
  0 or at most 1e-10 |mean| is excluded;
- features centred with the training rows' mean; scale = trace(Xc Xc^T) / n (the mean squared
  norm of a centred row); lambda = c * scale for every c of the relative grid;
- group k-fold: the distinct groups sorted ascending, the group of rank r in fold r % num_folds;
- per fold, per lambda: ridge on the fold's training rows with the intercept unpenalised (X and
  Y centred with that fold's training means), W = (Xc^T Xc + lambda I)^-1 Xc^T Yc;
- CV R^2 per dimension: 1 - SS_res / SS_tot of the pooled out-of-fold predictions over all
  training rows; the chosen lambda has the best mean over dimensions (ties: the larger lambda);
- refit on all training rows, predict the test rows, R^2 per dimension as sklearn's r2_score
  (SS_tot about the test mean; SS_tot = 0 gives 1 if SS_res = 0, else 0).

Case file: {"num_folds", "relative_lambdas", "train": {"x", "y", "groups"}, "test": {"x", "y"}}
with x as lists of rows of float32 values (read back as float32, then widened to float64).
"""
import json
import sys

import numpy as np

ZERO_STD_RELATIVE = 1e-10


def ridge_weights(x, y, lam):
    """Primal ridge with an unpenalised intercept: (W, x_mean, y_mean)."""
    x_mean = x.mean(axis=0)
    y_mean = y.mean(axis=0)
    xc = x - x_mean
    a = xc.T @ xc + lam * np.eye(x.shape[1])
    w = np.linalg.solve(a, xc.T @ (y - y_mean))
    return w, x_mean, y_mean


def predict(model, x):
    w, x_mean, y_mean = model
    return (x - x_mean) @ w + y_mean


def r2_per_dim(y, pred):
    """sklearn.metrics.r2_score(y, pred, multioutput='raw_values') with force_finite=True."""
    ss_res = ((y - pred) ** 2).sum(axis=0)
    ss_tot = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
    out = np.empty(y.shape[1])
    for j in range(y.shape[1]):
        if ss_tot[j] == 0.0:
            out[j] = 1.0 if ss_res[j] == 0.0 else 0.0
        else:
            out[j] = 1.0 - ss_res[j] / ss_tot[j]
    return out


def main(path):
    with open(path) as f:
        case = json.load(f)
    x = np.asarray(case["train"]["x"], dtype=np.float32).astype(np.float64)
    y = np.asarray(case["train"]["y"], dtype=np.float64)
    groups = np.asarray(case["train"]["groups"])
    x_test = np.asarray(case["test"]["x"], dtype=np.float32).astype(np.float64)
    y_test = np.asarray(case["test"]["y"], dtype=np.float64)
    num_folds = case["num_folds"]
    rel = np.asarray(case["relative_lambdas"], dtype=np.float64)

    # standardised targets, constant dimensions out
    y_mean = y.mean(axis=0)
    y_std = y.std(axis=0)
    kept = [j for j in range(y.shape[1]) if y_std[j] > 0 and y_std[j] > ZERO_STD_RELATIVE * abs(y_mean[j])]
    excluded = [j for j in range(y.shape[1]) if j not in kept]
    ys = (y[:, kept] - y_mean[kept]) / y_std[kept]

    # lambda grid on the data's scale
    xc = x - x.mean(axis=0)
    scale = float((xc**2).sum() / x.shape[0])
    lams = rel * scale

    # group k-fold over sorted groups, round robin
    rank = {g: r for r, g in enumerate(sorted(set(groups.tolist())))}
    fold = np.array([rank[g] % num_folds for g in groups.tolist()])

    oof = np.zeros((len(lams), *ys.shape))
    for f in range(num_folds):
        train, val = fold != f, fold == f
        for i, lam in enumerate(lams):
            model = ridge_weights(x[train], ys[train], lam)
            oof[i, val] = predict(model, x[val])
    cv_r2 = np.stack([r2_per_dim(ys, oof[i]) for i in range(len(lams))])
    cv_mean = cv_r2.mean(axis=1)
    best = max(range(len(lams)), key=lambda i: (cv_mean[i], lams[i]))

    model = ridge_weights(x, ys, lams[best])
    pred = predict(model, x_test) * y_std[kept] + y_mean[kept]
    test_r2 = r2_per_dim(y_test[:, kept], pred)
    json.dump(
        {
            "kept_dims": kept,
            "excluded_dims": excluded,
            "kernel_scale": scale,
            "absolute_lambdas": lams.tolist(),
            "cv_r2": cv_r2.tolist(),
            "cv_mean_r2": cv_mean.tolist(),
            "chosen_index": best,
            "chosen_relative": float(rel[best]),
            "chosen_absolute": float(lams[best]),
            "test_predictions": pred.tolist(),
            "test_r2": test_r2.tolist(),
            "test_mean_r2": float(test_r2.mean()),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1])
