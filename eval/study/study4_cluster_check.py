#!/usr/bin/env python3
"""Study 4's descriptive check of C2 (docs/study-4.md, "A known weakness of C2").

Only three ATC encoders exist, and the ATC cells of several seeds share one, so the seed-level
permutation test of C2 may treat correlated scores as independent. This check takes each ATC
encoder as one unit (the mean of its cells' scores) against each LFS seed (its own encoder) and
runs the exact two-sided permutation test of those 3 + n units' labels on the difference of
means. It is descriptive: the pre-registered verdict is lfs report's.

A cell's score is its mean evaluation return at the suite's budget (100,000 frames) divided by
DrQ-v2's 500K mean for the task (eval/reference/drqv2_published.csv), as lfs report scores it.

    python3 eval/study/study4_cluster_check.py [results/study-4]
"""

import csv
import itertools
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 100_000
TASK = "cartpole_swingup"


def expert_score():
    rows = csv.DictReader(open(ROOT / "eval/reference/drqv2_published.csv"))
    return statistics.mean(float(r["episode_reward"]) for r in rows if r["task"] == TASK and int(r["frame"]) == 500_000)


def scores(results):
    """{encoder: {seed: normalised score at the budget}} from the committed cells."""
    expert, out = expert_score(), {}
    for cell in sorted((results / "cells").glob("*/")):
        meta = json.loads((cell / "cell.json").read_text())
        encoder, seed = cell.name.split("-")[1], int(cell.name.rsplit("-s", 1)[1])
        at_budget = [float(r["episode_reward"]) for r in csv.DictReader(open(cell / "eval.csv")) if int(r["frame"]) == BUDGET]
        if meta.get("state") == "done" and at_budget:
            out.setdefault(encoder, {})[seed] = at_budget[-1] / expert
    return out


def exact_test(a, b):
    """p of the exact two-sided permutation test on mean(a) − mean(b), and the difference."""
    pooled, k = a + b, len(a)
    observed = statistics.mean(a) - statistics.mean(b)
    extreme = total = 0
    for idx in itertools.combinations(range(len(pooled)), k):
        chosen = set(idx)
        d = statistics.mean(pooled[i] for i in idx) - statistics.mean(pooled[i] for i in range(len(pooled)) if i not in chosen)
        total += 1
        extreme += abs(d) >= abs(observed) - 1e-12
    return extreme / total, observed, total


def main():
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "results/study-4"
    s = scores(results)
    lfs, atc = s.get("lfs", {}), s.get("atc", {})
    by_encoder = {}
    for seed, score in sorted(atc.items()):
        by_encoder.setdefault((seed - 1) % 3 + 1, []).append(score)
    print("# Study 4: C2 with ATC's encoders as units (descriptive)\n")
    print("| ATC encoder | seeds' scores | mean |\n|---|---|---|")
    for enc, xs in sorted(by_encoder.items()):
        print(f"| atc-s{enc} | {', '.join(f'{x:.3f}' for x in xs)} | {statistics.mean(xs):.3f} |")
    if len(by_encoder) < 2 or len(lfs) < 2:
        print("\nToo few cells for the test.")
        return
    p, d, splits = exact_test(list(lfs.values()), [statistics.mean(xs) for xs in by_encoder.values()])
    print(f"\nlfs (n = {len(lfs)} seeds) − atc ({len(by_encoder)} encoder means): mean difference {d:+.3f}, "
          f"exact two-sided permutation p = {p:.4f} ({splits} splits).")


if __name__ == "__main__":
    main()
