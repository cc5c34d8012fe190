#!/usr/bin/env python3
"""Study 2's descriptive question (docs/study-2.md, "What is reported besides"): does a
better-probing LFS run give better SAC returns?

Each LFS pre-training run lfs-s<s> is the encoder of seed s's SAC cells, so each run has one
probe score (the mean over the nine tasks of its held-out state R², as in probe_runs.py, from
`<probe dir>/lfs-s<s>.json`), its probe's state R² on each SAC task, and one SAC return per task
(the last evaluation's, from `lfs report`'s results.csv). Prints them side by side and, per
task, Spearman's rank correlation over the runs (ties get their mean rank) of the return with
the probe score and with the same task's R². With six runs this is a description, not a test.
Markdown on stdout. Standard library only.

    python3 eval/study/probe_vs_sac.py results/study-2/probe results/study-2/report/results.csv
"""

import csv
import statistics
import sys
from pathlib import Path

from probe_runs import state_r2

METHOD = "lfs"


def ranks(xs):
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs, ys):
    """Spearman's ρ (Pearson's r of the ranks); None when either side is constant."""
    rx, ry = ranks(xs), ranks(ys)
    if len(set(rx)) < 2 or len(set(ry)) < 2:
        return None
    return statistics.correlation(rx, ry)


def final_returns(path):
    """METHOD's cells: {(task, seed): return at the cell's last evaluation}, and the set of
    those last evaluations' frames."""
    last = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["encoder"] != METHOD:
                continue
            key = (row["task"], int(row["seed"]))
            frame = int(row["frame"])
            if key not in last or frame > last[key][0]:
                last[key] = (frame, float(row["episode_reward"]))
    return {k: v[1] for k, v in last.items()}, {v[0] for v in last.values()}


def main():
    probe_dir, results = Path(sys.argv[1]), Path(sys.argv[2])
    probe, task_r2 = {}, {}  # seed -> nine-task mean; seed -> {task: R²}
    for path in sorted(probe_dir.glob(f"{METHOD}-s*.json")):
        seed = int(path.stem.rpartition("-s")[2])
        task_r2[seed] = state_r2(path)
        probe[seed] = statistics.mean(task_r2[seed].values())
    returns, frames = final_returns(results)
    tasks = sorted({t for t, _ in returns})
    seeds = sorted(probe)
    missing = sorted(set(probe) ^ {s for _, s in returns})
    if missing:
        sys.exit(f"{probe_dir} and {results}: seeds {missing} have a probe or SAC cells but not both")
    partial = sorted(f"{t} seed {s}" for s in seeds for t in tasks if (t, s) not in returns)
    if partial:
        sys.exit(f"{results}: no {METHOD} return for {', '.join(partial)}")
    unprobed = sorted(t for t in tasks if any(t not in task_r2[s] for s in seeds))
    if unprobed:
        sys.exit(f"{probe_dir}: the probes leave out the SAC tasks {unprobed}")
    frame = ", ".join(str(f) for f in sorted(frames))
    print(f"## Each {METHOD} run's probe score beside its SAC returns (frame {frame})\n")
    print("| run | probe score (mean state R², nine tasks) | " + " | ".join(f"{t}: state R², return" for t in tasks) + " |")
    print("|---" * (2 + len(tasks)) + "|")
    for s in sorted(seeds, key=lambda s: -probe[s]):
        cells = " | ".join(f"{task_r2[s][t]:.3f}, {returns[(t, s)]:.1f}" for t in tasks)
        print(f"| {METHOD}-s{s} | {probe[s]:.3f} | {cells} |")
    print(f"\nSpearman's ρ of each task's return over the {len(seeds)} runs (descriptive):\n")
    print("| task | with the probe score | with the task's own state R² |")
    print("|---|---|---|")
    shown = lambda rho: "undefined (a constant side)" if rho is None else f"{rho:+.2f}"
    for t in tasks:
        ret = [returns[(t, s)] for s in seeds]
        by_score = spearman([probe[s] for s in seeds], ret)
        by_task = spearman([task_r2[s][t] for s in seeds], ret)
        print(f"| {t} | {shown(by_score)} | {shown(by_task)} |")


if __name__ == "__main__":
    main()
