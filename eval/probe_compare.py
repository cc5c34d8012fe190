"""Paired comparison of encoders probed by `lfs probe` on the same probe set: per task, the
difference in held-out R² (state and reward) between each encoder and a baseline, with a 95%
percentile interval from a paired bootstrap over the held-out episodes (the same resample of
episodes for both encoders, which share the episodes and targets).

    python3 eval/probe_compare.py results/probe/random.json results/probe/lfs.json ...
    # the first file is the baseline; a Markdown table on stdout

R² of a resample is computed from the per-episode sums `lfs probe` records
(`held_out_episodes`: Σy, Σy², Σ(y − ŷ)² per dimension), as sklearn's r2_score per dimension,
averaged over dimensions. Uses only the standard library.
"""

import json
import random
import sys


def sums(episodes, weights, c):
    n = sum(w * e["rows"] for e, w in zip(episodes, weights))
    sy = sum(w * e["sum_y"][c] for e, w in zip(episodes, weights))
    sy2 = sum(w * e["sum_y2"][c] for e, w in zip(episodes, weights))
    sse = sum(w * e["sum_sq_err"][c] for e, w in zip(episodes, weights))
    return n, sy2 - sy * sy / n, sse


def r2_mean(episodes, weights):
    """Mean over dimensions of R² of the rows of `episodes` taken `weights[i]` times. A dimension
    whose resampled rows are (nearly) constant, with a spread under 1e-9 of the whole held-out
    set's per row, scores 0, as sklearn's r2_score does for a constant target."""
    k = len(episodes[0]["sum_y"])
    ones = [1] * len(episodes)
    total = []
    for c in range(k):
        n_all, ss_all, _ = sums(episodes, ones, c)
        n, ss_tot, sse = sums(episodes, weights, c)
        if ss_tot <= 1e-9 * ss_all / n_all * n:
            total.append(1.0 if sse == 0 else 0.0)
        else:
            total.append(1.0 - sse / ss_tot)
    return sum(total) / k


def paired(base, other, resamples=10000, seed=0):
    """Difference other − base in mean R², and its 95% paired-bootstrap interval."""
    assert [e["episode"] for e in base] == [e["episode"] for e in other], "different held-out episodes"
    n = len(base)
    point = r2_mean(other, [1] * n) - r2_mean(base, [1] * n)
    rng = random.Random(seed)
    diffs = []
    for _ in range(resamples):
        w = [0] * n
        for _ in range(n):
            w[rng.randrange(n)] += 1
        diffs.append(r2_mean(other, w) - r2_mean(base, w))
    diffs.sort()
    return point, diffs[int(0.025 * resamples)], diffs[int(0.975 * resamples) - 1]


def main():
    reports = [json.load(open(p)) for p in sys.argv[1:]]
    names = [r["encoder"]["method"] or r["encoder"]["source"] for r in reports]
    base = reports[0]
    print(f"Difference in held-out R² against `{names[0]}` (paired bootstrap over held-out episodes, 95%):\n")
    print("| task | encoder | state R² | Δ state R² [95% CI] | reward R² | Δ reward R² [95% CI] |")
    print("|---|---|---|---|---|---|")
    for i, task in enumerate(base["tasks"]):
        for name, rep in zip(names[1:], reports[1:]):
            other = next(t for t in rep["tasks"] if t["task"] == task["task"])
            cells = []
            for target in ("state", "reward"):
                d, lo, hi = paired(task[target]["held_out_episodes"], other[target]["held_out_episodes"])
                mark = " *" if lo > 0 or hi < 0 else ""
                cells += [f"{other[target]['held_out']['mean']['point']:.3f}", f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]{mark}"]
            print(f"| {task['task']} | {name} | " + " | ".join(cells) + " |")
    print("\n`*`: the interval excludes 0.")


if __name__ == "__main__":
    main()
