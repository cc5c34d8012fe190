#!/usr/bin/env python3
"""Power of study 3's probe comparisons (docs/study-3.md, issue 57), from study 2's probe spreads.

Reads study 2's probe reports (`results/study-2/probe/<method>-s<seed>.json`): a run's score is
the mean over the nine tasks of its held-out state R² (`lfs probe`'s "mean over tasks"), the
score study 3 keeps. The SD between pre-training runs of each method (ddof = 1) and their pooled
SD set the noise of the model: each run's score ~ N(mu_arm, sigma^2), independent runs.

It simulates the plan's rule (eval/study/probe_study3.py applies it to the real runs):
- the difference test: the exact two-sided permutation test of the runs' arm labels on the
  difference of mean scores (every split of the pooled runs into groups of the two sizes;
  p = the share whose |difference| is at least the observed one), decided at 0.05 for a family
  of one comparison, and at 0.025 for the first step of Holm over two (the power of a comparison
  when the other one is null: the lower bound);
- the equivalence test (TOST) within +-delta: two exact one-sided permutation tests, each on
  the scores with the second arm shifted to the null's edge (`tost_p`), p = the larger of the
  two, decided at the same levels.

Power to decide "lfs better" when lfs's true advantage is d, and to decide "equivalent within
+-delta" when it is 0 (and delta / 2), for n + n runs. 2,000 simulations per row (seed 0), so
about +-0.01 Monte Carlo error. Also prints the smallest p each design allows and, for the
optional SAC replication, the power of `lfs report`'s seed-unit rule (IQM, exact permutation) on
cartpole_swingup alone from study 2's returns there.

    .venv/bin/python eval/study/power_probe.py [--sims 2000] [--seed 0]
"""

import argparse
import csv
import itertools
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "results/study-2/probe"
RESULTS = ROOT / "results/study-2/report/results.csv"
REFERENCE = ROOT / "eval/reference/drqv2_published.csv"


def run_scores():
    """{method: [nine-task mean held-out state R² per run]} of study 2."""
    scores = {}
    for path in sorted(PROBE.glob("*-s*.json")):
        method = path.stem.rpartition("-s")[0]
        tasks = json.loads(path.read_text())["tasks"]
        scores.setdefault(method, []).append(np.mean([t["state"]["held_out"]["mean"]["point"] for t in tasks]))
    return {m: np.array(v) for m, v in scores.items()}


class Splits:
    """Every split of n_a + n_b runs into groups of n_a and n_b, as a 0/1 matrix (splits x runs)."""

    def __init__(self, n_a, n_b):
        n = n_a + n_b
        rows = list(itertools.combinations(range(n), n_a))
        self.a = np.zeros((len(rows), n), dtype=np.float64)
        for i, chosen in enumerate(rows):
            self.a[i, list(chosen)] = 1.0
        self.n_a, self.n_b = n_a, n_b
        self.is_b = np.r_[np.zeros(n_a), np.ones(n_b)]
        self.b_in_a = self.a @ self.is_b  # how many of arm b's runs each split puts in group a

    def diffs(self, pooled):
        """mean(group a) - mean(group b) for every split."""
        sum_a = self.a @ pooled
        return sum_a / self.n_a - (pooled.sum() - sum_a) / self.n_b


def perm_p(splits, a, b):
    """Exact two-sided permutation p of the mean difference a - b."""
    d = splits.diffs(np.r_[a, b])
    observed = abs(a.mean() - b.mean())
    return np.mean(np.abs(d) >= observed - 1e-12)


def tost_p(splits, a, b, delta):
    """Exact permutation TOST of |mean(a) - mean(b)| < delta: max of the two one-sided p's.

    Lower test, H0: diff <= -delta. Under the shift model a and b - delta are exchangeable
    when diff = -delta; p_low = the share of splits of (a, b - delta) whose difference is at least
    the observed (diff + delta). Upper test, H0: diff >= +delta: a and b + delta; p_up = the
    share whose difference is at most the observed (diff - delta).
    """
    pooled = np.r_[a, b]
    d = a.mean() - b.mean()
    base = splits.diffs(pooled)
    # shifting arm b by s moves each split's difference by -s * (b_in_a / n_a - (n_b - b_in_a) / n_b)
    moved = splits.b_in_a / splits.n_a - (splits.n_b - splits.b_in_a) / splits.n_b
    low = base - delta * moved  # arm b shifted by -delta
    up = base + delta * moved  # arm b shifted by +delta
    p_low = np.mean(low >= d + delta - 1e-12)
    p_up = np.mean(up <= d - delta + 1e-12)
    return max(p_low, p_up)


def power_rows(sigma_a, sigma_b, sizes, diffs, deltas, sims, rng):
    rows = []
    for n in sizes:
        splits = Splits(n, n)
        for d in diffs:
            p = np.array([perm_p(splits, rng.normal(d, sigma_a, n), rng.normal(0, sigma_b, n)) for _ in range(sims)])
            rows.append(("difference", n, d, None, np.mean(p <= 0.05), np.mean(p <= 0.025)))
        for delta in deltas:
            for d in (0.0, delta / 2):
                p = np.array([tost_p(splits, rng.normal(d, sigma_a, n), rng.normal(0, sigma_b, n), delta) for _ in range(sims)])
                rows.append(("equivalence", n, d, delta, np.mean(p <= 0.05), np.mean(p <= 0.025)))
    return rows


def iqm(x):
    x = np.sort(x)
    cut = len(x) // 4
    return x[cut : len(x) - cut].mean()


def sac_cartpole(sims, rng):
    """The SAC replication: lfs vs random on cartpole_swingup, 6 + 6 seeds, lfs report's rule."""
    expert = np.mean([float(r["episode_reward"]) for r in csv.DictReader(open(REFERENCE))
                      if r["task"] == "cartpole_swingup" and int(r["frame"]) == 500_000])
    final = {}
    for r in csv.DictReader(open(RESULTS)):
        if r["task"] == "cartpole_swingup" and int(r["frame"]) == 20_000:
            final.setdefault(r["encoder"], []).append(float(r["episode_reward"]) / expert)
    lfs, rnd = np.array(final["lfs"]), np.array(final["random"])
    splits = Splits(6, 6)

    def p_iqm(a, b):
        pooled = np.r_[a, b]
        observed = abs(iqm(a) - iqm(b))
        mask = splits.a.astype(bool)
        d = np.array([iqm(pooled[m]) - iqm(pooled[~m]) for m in mask])
        return np.mean(np.abs(d) >= observed - 1e-12)

    print("\n## The SAC replication (cartpole_swingup alone, 6 + 6 seeds, IQM, exact permutation, two-sided 0.05)\n")
    sd_l, sd_r = lfs.std(ddof=1), rnd.std(ddof=1)
    print(f"Study 2 there (normalised by DrQ-v2's 500K score {expert:.1f}): lfs IQM {iqm(lfs):.3f} (SD {sd_l:.3f}), "
          f"random IQM {iqm(rnd):.3f} (SD {sd_r:.3f}); difference of IQMs {iqm(lfs) - iqm(rnd):+.3f}, "
          f"post-hoc p = {p_iqm(lfs, rnd):.4f} (924 splits).\n")
    print("| SD lfs | SD random | d = 0.05 | d = 0.075 | d = 0.10 | d = 0.167 (study 2's) |")
    print("|---|---|---|---|---|---|")
    n_sims = max(200, sims // 4)  # the IQM's splits are not a product: slower, so fewer draws
    for s_l, s_r in ((sd_l, sd_r), (0.086, 0.086)):
        cells = []
        for d in (0.05, 0.075, 0.10, 0.167):
            p = [p_iqm(rng.normal(d, s_l, 6), rng.normal(0, s_r, 6)) for _ in range(n_sims)]
            cells.append(f"{np.mean(np.array(p) <= 0.05):.2f}")
        print(f"| {s_l:.3f} | {s_r:.3f} | " + " | ".join(cells) + " |")
    print(f"\n({n_sims} simulations per row; the second row is study 2's pooled SD over both tasks, 0.086, in both arms.)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)

    scores = run_scores()
    print("## Study 2's probe scores (mean held-out state R² over nine tasks)\n")
    print("| method | runs | mean | SD over runs (ddof 1) |")
    print("|---|---|---|---|")
    for m, v in scores.items():
        print(f"| {m} | {len(v)} | {v.mean():.4f} | {v.std(ddof=1):.4f} |")
    dof = sum(len(v) - 1 for v in scores.values())
    pooled = np.sqrt(sum((len(v) - 1) * v.var(ddof=1) for v in scores.values()) / dof)
    largest = max(v.std(ddof=1) for v in scores.values())
    print(f"\nPooled SD over the four methods: {pooled:.4f} ({dof} df); the largest: {largest:.4f}.")

    print("\n## The smallest p each design allows (exact two-sided permutation test of the mean)\n")
    for n_a, n_b in ((3, 3), (6, 3), (6, 6), (8, 8), (10, 10), (12, 10)):
        count = len(list(itertools.combinations(range(n_a + n_b), n_a)))
        # equal sizes: the mirror split has the same |difference|; unequal: in general it does not
        smallest = 2 / count if n_a == n_b else 1 / count
        print(f"- {n_a} + {n_b}: {count} splits, smallest p {smallest:.5f}")

    sizes, diffs, deltas = (6, 8, 10), (0.005, 0.01, 0.02), (0.01, 0.015, 0.02)
    for label, s_a, s_b in (("pooled SD in both arms", pooled, pooled), ("the largest SD (atc's) in both arms", largest, largest)):
        print(f"\n## Power, {label} (sigma = {s_a:.4f}), {args.sims} simulations per row, seed {args.seed}\n")
        print("| test | runs per arm | true lfs − other | delta | power, family of 1 (0.05) | power, first Holm step of 2 (0.025) |")
        print("|---|---|---|---|---|---|")
        for test, n, d, delta, p05, p025 in power_rows(s_a, s_b, sizes, diffs, deltas, args.sims, rng):
            print(f"| {test} | {n} | {d:.4f} | {'' if delta is None else f'±{delta}'} | {p05:.2f} | {p025:.2f} |")
    sac_cartpole(args.sims, rng)


if __name__ == "__main__":
    main()
