#!/usr/bin/env python3
"""Smallest difference a study design detects, from study-mini's raw files (issue 35's power
analysis, groundwork for docs/study-2.md).

Reads results/study-mini/report/results.csv (every evaluation of every cell) and
eval/reference/drqv2_published.csv (expert score = DrQ-v2's mean over seeds at 500K frames, the
normalisation `lfs report` uses). A run's score is its last evaluation at or before FRAMES,
divided by the task's expert score.

Model: score = task effect + method effect + pre-training-run effect + seed noise. The seed
noise's SD (sigma_s) is pooled over every (method, task) cell of study-mini (ddof = 1). The
pre-training-run SD (sigma_p) cannot be estimated from study-mini (one pre-training run per
method), so it is a stated assumption, given as a multiple of sigma_s. For a comparison of two
methods A and B on T tasks, n SAC seeds per task and method, spread evenly over k pre-training
runs per method, the standard error of the mean difference over tasks is

    SE = sqrt(2 * (sigma_s**2 / (n * T) + sigma_p**2 / k))

(a pre-training run's effect is shared by all tasks and seeds that use it, so more tasks do
not average it away). The minimal detectable difference at a two-sided level alpha with power
1 - beta is (z_{1-alpha/2} + z_{1-beta}) * SE (normal approximation).

The seed-unit design of docs/study-2.md (`--simulate`): each SAC seed s of a method uses its
own pre-training run s on every task, so a method's k units are (pre-training run + SAC seed)
with T task scores each, and the decision is the exact two-sided permutation test of the units'
method labels on the difference of the IQM of all runs (the `[primary]` rule with
`unit = "seed"`). Its power is simulated under the same normal model (unit effect ~ N(0,
sigma_p^2) shared by its T scores, each score's own noise ~ N(0, sigma_s^2)) for true
differences delta.

    python3 eval/study/power.py [--frames 20000] [--alpha 0.05] [--power 0.8]
    python3 eval/study/power.py --simulate 1000 [--seed 0]
"""

import argparse
import collections
import csv
import itertools
import math
import random
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def expert_scores(path):
    at_500k = collections.defaultdict(list)
    for row in csv.DictReader(open(path)):
        if int(row["frame"]) == 500_000:
            at_500k[row["task"]].append(float(row["episode_reward"]))
    return {task: statistics.mean(v) for task, v in at_500k.items()}


def final_scores(path, frames):
    """{(encoder, task): [normalised-later raw score per seed]} from results.csv."""
    last = {}
    for row in csv.DictReader(open(path)):
        frame = int(row["frame"])
        if frame > frames:
            continue
        key = (row["encoder"], row["task"], row["seed"])
        if key not in last or frame > last[key][0]:
            last[key] = (frame, float(row["episode_reward"]))
    cells = collections.defaultdict(list)
    for (encoder, task, _seed), (_frame, score) in sorted(last.items()):
        cells[(encoder, task)].append(score)
    return cells


def iqm(xs):
    """scipy.stats.trim_mean(xs, 0.25), as rliable's IQM over all runs of all tasks."""
    s = sorted(xs)
    cut = int(0.25 * len(s))
    return statistics.mean(s[cut : len(s) - cut])


def permutation_power(units, tasks, sigma_s, sigma_p, delta, reps, alpha, rng):
    """Share of simulated studies in which a (true advantage delta) is decided better than b
    by the exact permutation test of `units` units per method, each with `tasks` scores."""
    splits = list(itertools.combinations(range(2 * units), units))
    wins = 0
    for _ in range(reps):
        scores = []
        for method_shift in (delta, 0.0):
            for _unit in range(units):
                shared = rng.gauss(0.0, sigma_p)
                scores.append([method_shift + shared + rng.gauss(0.0, sigma_s) for _t in range(tasks)])

        def difference(a_units):
            chosen = set(a_units)
            a = [x for i in a_units for x in scores[i]]
            b = [x for i in range(2 * units) if i not in chosen for x in scores[i]]
            return iqm(a) - iqm(b)

        observed = difference(tuple(range(units)))
        extreme = sum(1 for split in splits if abs(difference(split)) >= abs(observed) - 1e-12)
        if extreme / len(splits) <= alpha and observed > 0:
            wins += 1
    return wins / reps


def simulate(sigma_s_observed, args):
    rng = random.Random(args.seed)
    print(
        f"\nseed-unit design, exact permutation test on the IQM difference, two-sided alpha {args.alpha}; "
        f"power from {args.simulate} simulated studies per entry (Monte Carlo SE <= {0.5 / math.sqrt(args.simulate):.3f}):"
    )
    deltas = (0.05, 0.075, 0.10, 0.15)
    print("| units k per method (= SAC seeds = pre-training runs) | tasks T | SAC cells | sigma_s | sigma_p | " + " | ".join(f"delta {d}" for d in deltas) + " |")
    print("|---" * (5 + len(deltas)) + "|")
    for units, tasks in [(6, 2), (5, 3), (4, 3)]:
        for sigma_s in (sigma_s_observed, 0.10):
            for ratio in (0.0, 0.5, 1.0):
                power = [
                    permutation_power(units, tasks, sigma_s, ratio * sigma_s, d, args.simulate, args.alpha, rng)
                    for d in deltas
                ]
                print(
                    f"| {units} | {tasks} | {2 * units * tasks} | {sigma_s:.3f} | {ratio} sigma_s | "
                    + " | ".join(f"{p:.2f}" for p in power)
                    + " |"
                )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=ROOT / "results/study-mini/report/results.csv")
    ap.add_argument("--published", default=ROOT / "eval/reference/drqv2_published.csv")
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--power", type=float, default=0.8)
    ap.add_argument("--simulate", type=int, default=0, help="studies per entry of the seed-unit simulation (0: skip)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    expert = expert_scores(args.published)
    cells = final_scores(args.results, args.frames)
    print(f"study-mini, last evaluation at or before {args.frames} frames, expert-normalised:")
    print("| method | task | n | mean | SD (ddof=1) |")
    print("|---|---|---|---|---|")
    pooled_ss, pooled_df = 0.0, 0
    for (encoder, task), raw in sorted(cells.items()):
        scores = [s / expert[task] for s in raw]
        sd = statistics.stdev(scores)
        pooled_ss += sd**2 * (len(scores) - 1)
        pooled_df += len(scores) - 1
        print(f"| {encoder} | {task} | {len(scores)} | {statistics.mean(scores):.3f} | {sd:.3f} |")
    sigma_s = math.sqrt(pooled_ss / pooled_df)
    print(f"\npooled seed SD sigma_s = {sigma_s:.4f} ({pooled_df} degrees of freedom)")

    nd = statistics.NormalDist()
    z = nd.inv_cdf(1 - args.alpha / 2) + nd.inv_cdf(args.power)
    print(
        f"\nminimal detectable difference in mean expert-normalised score (two-sided alpha "
        f"{args.alpha}, power {args.power}; z = {z:.2f}):"
    )
    print("| tasks T | seeds n per task and method | pre-training runs k per method | sigma_p = 0 | sigma_p = 0.5 sigma_s | sigma_p = sigma_s |")
    print("|---|---|---|---|---|---|")
    for tasks, seeds, runs in [(2, 3, 1), (4, 4, 2), (4, 6, 2), (6, 4, 2), (6, 6, 3), (8, 4, 2), (9, 3, 3)]:
        mdd = []
        for ratio in (0.0, 0.5, 1.0):
            se = math.sqrt(2 * (sigma_s**2 / (seeds * tasks) + (ratio * sigma_s) ** 2 / runs))
            mdd.append(z * se)
        print(f"| {tasks} | {seeds} | {runs} | " + " | ".join(f"{m:.3f}" for m in mdd) + " |")
    means = collections.defaultdict(dict)
    for (encoder, task), raw in cells.items():
        means[encoder][task] = statistics.mean(raw) / expert[task]
    observed = ", ".join(
        f"{a} - {b} {statistics.mean(means[a][t] - means[b][t] for t in means[a]):+.3f}"
        for a, b in [("lfs", "random"), ("atc", "lfs"), ("curl", "lfs")]
        if a in means and b in means
    )
    print(f"\nSAC cells per method: T x n. study-mini's differences in the mean over its tasks: {observed}.")
    if args.simulate:
        simulate(sigma_s, args)


if __name__ == "__main__":
    main()
