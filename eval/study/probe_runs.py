#!/usr/bin/env python3
"""Study 2's secondary comparisons (docs/study-2.md): the probe over pre-training runs.

Each encoder's score is the mean over the nine tasks of its held-out state R² (`lfs probe`'s
"mean over tasks"), read from `<dir>/<method>-s<seed>.json`. For lfs against each other method
(random, atc, curl, and lfs-no-fm when present), the exact two-sided permutation test of the
runs' method labels on the difference of mean scores (every split of the pooled runs into
groups of the two sizes; p = the share of splits whose |difference| is at least the observed
one), then Holm's step-down over the comparisons at a family-wise 0.05. Descriptive: each
method's mean and SD (ddof = 1) over its runs, and the per-task differences of the means.
Markdown on stdout. Standard library only.

    python3 eval/study/probe_runs.py results/study-2/probe
"""

import collections
import itertools
import json
import statistics
import sys
from pathlib import Path

BASE = "lfs"
OTHERS = ["random", "atc", "curl", "lfs-no-fm"]
LEVEL = 0.05


def state_r2(path):
    """{task: held-out state R²} of one probe report."""
    report = json.loads(Path(path).read_text())
    return {t["task"]: t["state"]["held_out"]["mean"]["point"] for t in report["tasks"]}


def permutation_p(a, b):
    pooled = a + b
    observed = abs(statistics.mean(a) - statistics.mean(b))
    tolerance = 1e-12 * max(observed, 1.0)
    extreme = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(a)):
        picked = set(chosen)
        xa = [pooled[i] for i in chosen]
        xb = [pooled[i] for i in range(len(pooled)) if i not in picked]
        total += 1
        extreme += abs(statistics.mean(xa) - statistics.mean(xb)) >= observed - tolerance
    return extreme / total, total


def holm(pvalues):
    """Holm-adjusted p-values, in the input's order."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def main():
    folder = Path(sys.argv[1])
    runs = collections.defaultdict(dict)  # method -> {seed: {task: r2}}
    for path in sorted(folder.glob("*-s*.json")):
        method, _, seed = path.stem.rpartition("-s")
        runs[method][int(seed)] = state_r2(path)
    tasks = sorted({t for by_seed in runs.values() for r2 in by_seed.values() for t in r2})
    for method, by_seed in runs.items():
        for seed, r2 in by_seed.items():
            missing = sorted(set(tasks) - set(r2))
            if missing:
                sys.exit(f"{folder / f'{method}-s{seed}.json'}: no probe of {', '.join(missing)} (every encoder is probed on the same tasks)")
    score = {m: [statistics.mean(r2[t] for t in tasks) for _, r2 in sorted(by_seed.items())] for m, by_seed in runs.items()}

    print("## Probe over pre-training runs: mean held-out state R² over the nine tasks\n")
    print("| method | runs (seeds) | per run | mean | SD over runs |")
    print("|---|---|---|---|---|")
    for m in [BASE] + OTHERS:
        if m in score:
            sd = statistics.stdev(score[m]) if len(score[m]) > 1 else float("nan")
            seeds = ", ".join(str(s) for s in sorted(runs[m]))
            per_run = ", ".join(f"{x:.3f}" for x in score[m])
            print(f"| {m} | {len(score[m])} ({seeds}) | {per_run} | {statistics.mean(score[m]):.3f} | {sd:.3f} |")

    compared = [m for m in OTHERS if m in score and BASE in score]
    tests = [permutation_p(score[BASE], score[m]) for m in compared]
    adjusted = holm([p for p, _ in tests])
    print(f"\n## Pre-registered secondary comparisons (exact permutation tests, Holm over {len(compared)}, family-wise {LEVEL})\n")
    print("| comparison | difference of means | p | splits | Holm-adjusted p | decision |")
    print("|---|---|---|---|---|---|")
    for m, (p, splits), p_adj in zip(compared, tests, adjusted):
        d = statistics.mean(score[BASE]) - statistics.mean(score[m])
        if p_adj <= LEVEL:
            decision = f"{BASE} better" if d > 0 else f"{m} better"
        else:
            decision = "no difference detected"
        print(f"| {BASE} − {m} | {d:+.4f} | {p:.4f} | {splits} | {p_adj:.4f} | **{decision}** |")

    print("\n## Per task (descriptive): difference of the methods' mean state R² over their runs\n")
    print("| task | " + " | ".join(f"{BASE} − {m}" for m in compared) + " |")
    print("|---" * (1 + len(compared)) + "|")
    for t in tasks:
        mean_of = lambda m: statistics.mean(r2[t] for r2 in runs[m].values())
        print(f"| {t} | " + " | ".join(f"{mean_of(BASE) - mean_of(m):+.3f}" for m in compared) + " |")


if __name__ == "__main__":
    main()
