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

    python3 eval/study/power.py [--frames 20000] [--alpha 0.05] [--power 0.8]
"""

import argparse
import collections
import csv
import math
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=ROOT / "results/study-mini/report/results.csv")
    ap.add_argument("--published", default=ROOT / "eval/reference/drqv2_published.csv")
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--power", type=float, default=0.8)
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


if __name__ == "__main__":
    main()
