#!/usr/bin/env python3
"""Power of study 4's design: frozen-encoder SAC on cartpole_swingup at 100,000 frames, three
arms (lfs, random, atc), n SAC seeds per arm, one run (cell) per seed = one unit.

Contrasts C1 = lfs - random and C2 = lfs - atc. A run's score is its evaluation return at 100K
frames divided by the expert score (DrQ-v2's published mean over seeds at 500K frames, from
eval/reference/drqv2_published.csv). Statistic per contrast: IQM(a's n scores) - IQM(b's n
scores), IQM = mean after cutting int(0.25 n) scores from each end (power.py's iqm). Test per
contrast: two-sided permutation test of the 2n arm labels on that statistic, exact when
C(2n, n) <= 20000 (p = count / total, the observed split included), otherwise Monte Carlo with
2000 uniform random relabellings (p = (1 + #{|d*| >= |d_obs|}) / (1 + R)). Holm's step-down over
C1 and C2 at family-wise alpha 0.05. A contrast's power = share of simulated studies in which
it is rejected under Holm with observed difference > 0.

Model: score = arm shift + pre-training-run effect + run noise. lfs's shift is delta, random's
and atc's 0 (the same delta for both contrasts). Every lfs and every random cell has its own
encoder, hence its own effect ~ N(0, sigma_p^2); only 3 ATC encoders exist, so the atc cell of
seed s uses encoder ((s - 1) mod 3) + 1 and shares its effect. sigma_p is an assumption: 0 or
0.5 sigma. Run noise, three models:
  (a) Normal, sigma = study 2's pooled within-arm SD (random and lfs, ddof 1) of cartpole_swingup
      at 20K frames (results/study-2/cells/*cartpole_swingup*/eval.csv, row frame 20000).
  (b) Normal, sigma = SD (ddof 1) of DrQ-v2's 10 published seeds at 100K frames.
  (c) Bimodal, non-parametric: a draw (with replacement) from DrQ-v2's 10 normalised 100K returns
      minus their mean. Assumed baseline level: the 0-shift arms sit at DrQ-v2's 100K mean, so
      score = mean_100K + shift + effect + draw, clipped to [0, 1.2] (sigma_p = 0.5 x the draws' SD).
(a) and (b) are shift-invariant, so their baseline level does not matter. Assumed also: seeds
independent, the same noise in every arm, and no arm-by-noise interaction.

Speed: a split's |d| depends only on which ranks of the pooled sorted 2n scores fall in each
arm's trimmed middle (and not on the sign), so the exact test evaluates each distinct pair of
trimmed rank sets once, weighted by how many splits share it; Monte Carlo draws uniform splits.
Counting stops once p > alpha is certain, which changes no Holm decision. Stdlib only;
deterministic given --seed (each table entry has its own generator, seeded from --seed and the
entry).

    python3 eval/study/power_study4.py [--reps 800] [--seed 0] > results/study-4/power.md
"""

import argparse
import csv
import itertools
import math
import random
import statistics
import sys
import time
from operator import itemgetter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASK = "cartpole_swingup"
ARMS = ("lfs", "random", "atc")
ATC_ENCODERS = 3
EXACT_LIMIT = 20000
MC_RELABELLINGS = 2000
CHUNK = 250
DELTAS = (0.10, 0.15, 0.20, 0.30)
DESIGNS = (4, 6, 8, 10)
SIGMA_P_RATIOS = (0.0, 0.5)


def published_returns(path, frame):
    """DrQ-v2's published returns on TASK at `frame`, in seed order."""
    rows = [r for r in csv.DictReader(open(path)) if r["task"] == TASK and int(r["frame"]) == frame]
    return [float(r["episode_reward"]) for r in sorted(rows, key=lambda r: int(r["seed"]))]


def study2_returns(cells, frame):
    """{arm: [raw return at `frame` per cell]} for study 2's cartpole_swingup cells."""
    out = {}
    for cell in sorted(Path(cells).glob(f"*-{TASK}-s*")):
        arm = cell.name.split("-")[1]
        row = next(r for r in csv.DictReader(open(cell / "eval.csv")) if int(r["frame"]) == frame)
        out.setdefault(arm, []).append(float(row["episode_reward"]))
    return out


def iqm(xs):
    s = sorted(xs)
    cut = int(0.25 * len(s))
    return statistics.mean(s[cut : len(s) - cut])


class Patterns:
    """The permutation null of the IQM difference for n units per arm, on ranks of the pooled
    sorted scores: one getter per distinct (trimmed ranks of arm a, trimmed ranks of arm b),
    which reads sum(a's trimmed) - sum(b's trimmed) from values + negated values."""

    def __init__(self, n):
        total, cut, counts = 2 * n, int(0.25 * n), {}
        for a in itertools.combinations(range(total), n):
            b = tuple(i for i in range(total) if i not in set(a))
            ta, tb = a[cut : n - cut], b[cut : n - cut]
            key = min(ta + tuple(total + j for j in tb), tb + tuple(total + j for j in ta))  # |d| is sign-free
            counts[key] = counts.get(key, 0) + 1
        self.n, self.splits, self.exact = n, math.comb(total, n), math.comb(total, n) <= EXACT_LIMIT
        getters = [itemgetter(*key) for key in counts]
        # exact: each distinct pattern once, with its count; Monte Carlo: one getter per split
        # (repeated by count), so a uniform draw from the list is a uniform relabelling
        self.exact_pairs = list(zip(getters, counts.values()))
        self.flat = [] if self.exact else [g for g, w in self.exact_pairs for _ in range(w)]
        self.trimmed = n - 2 * cut

    def smallest_p(self):
        """The p of two wholly separated arms of generic scores: the smallest this design gives.
        From n = 4 the IQM trims one score from each end of each arm, so the split that swaps the
        arms' trimmed extremes ties the observed one: 4 / C(2n, n), not 2 / C(2n, n)."""
        low = [math.sqrt(k + 2) for k in range(self.n)]
        high = [1000 + 7 * math.sqrt(k + 3) for k in range(self.n)]
        return self.p_value(high, low, 1.0, random.Random(0))[1]

    def p_value(self, a, b, alpha, rng):
        """(observed difference, p). Counting stops once p > alpha is certain (then p = 1.0 is
        returned): Holm never rejects such a p, so every decision is the full test's."""
        observed = iqm(a) - iqm(b)
        pooled = sorted(a + b)
        signed = pooled + [-x for x in pooled]
        threshold = abs(observed) * self.trimmed - 1e-9  # compare sums, not means
        if self.exact:
            pairs, limit = self.exact_pairs, alpha * self.splits
        else:
            pairs, limit = [(g, 1) for g in rng.choices(self.flat, k=MC_RELABELLINGS)], alpha * (1 + MC_RELABELLINGS) - 1
        extreme = 0
        for start in range(0, len(pairs), CHUNK):
            extreme += sum(w for g, w in pairs[start : start + CHUNK] if abs(sum(g(signed))) >= threshold)
            if extreme > limit:
                return observed, 1.0
        return observed, extreme / self.splits if self.exact else (1 + extreme) / (1 + MC_RELABELLINGS)


def holm(p_values, alpha):
    """Rejections of Holm's step-down procedure, in the order of p_values."""
    rejected = [False] * len(p_values)
    for step, i in enumerate(sorted(range(len(p_values)), key=lambda i: p_values[i])):
        if p_values[i] > alpha / (len(p_values) - step):
            break
        rejected[i] = True
    return rejected


def simulate_study(n, model, sigma_p, delta, rng):
    """One study's {arm: [n scores]} under noise model (kind, scale, residuals, base)."""
    kind, sigma, residuals, base = model
    atc_effects = [rng.gauss(0.0, sigma_p) for _ in range(ATC_ENCODERS)]
    scores = {}
    for arm in ARMS:
        shift = delta if arm == "lfs" else 0.0
        arm_scores = []
        for seed in range(1, n + 1):
            effect = atc_effects[(seed - 1) % ATC_ENCODERS] if arm == "atc" else rng.gauss(0.0, sigma_p)
            if kind == "normal":
                arm_scores.append(shift + effect + rng.gauss(0.0, sigma))
            else:
                arm_scores.append(min(1.2, max(0.0, base + shift + effect + rng.choice(residuals))))
        scores[arm] = arm_scores
    return scores


def rates(patterns, model, sigma_p, delta, reps, alpha, rng):
    """(C1 power, C2 power, C1 any rejection, C2 any rejection, family-wise any rejection)."""
    tallies = [0] * 5
    for _ in range(reps):
        s = simulate_study(patterns.n, model, sigma_p, delta, rng)
        (d1, p1), (d2, p2) = (patterns.p_value(s["lfs"], s[b], alpha, rng) for b in ("random", "atc"))
        r1, r2 = holm([p1, p2], alpha)
        for k, hit in enumerate((r1 and d1 > 0, r2 and d2 > 0, r1, r2, r1 or r2)):
            tallies[k] += hit
    return [t / reps for t in tallies]


class Sources:
    """The numbers the noise models come from, and the models: {key: (kind, sigma, residuals,
    base, label)} for (a), (b) and (c) of the docstring."""

    def __init__(self, published, cells):
        self.expert = statistics.mean(published_returns(published, 500_000))
        self.drq = [r / self.expert for r in published_returns(published, 100_000)]
        self.drq_mean, self.drq_sd = statistics.mean(self.drq), statistics.stdev(self.drq)
        self.study2 = {arm: [r / self.expert for r in raw] for arm, raw in study2_returns(cells, 20_000).items()}
        arms = self.pooled_arms = [self.study2["random"], self.study2["lfs"]]
        self.sigma_a = math.sqrt(sum(statistics.variance(x) * (len(x) - 1) for x in arms) / sum(len(x) - 1 for x in arms))
        self.residuals = [x - self.drq_mean for x in self.drq]
        self.models = {
            "a": ("normal", self.sigma_a, None, 0.0, "Normal, sigma = study 2's pooled within-arm SD at 20K frames"),
            "b": ("normal", self.drq_sd, None, 0.0, "Normal, sigma = SD of DrQ-v2's 10 seeds at 100K frames"),
            "c": ("resample", self.drq_sd, self.residuals, self.drq_mean, "bimodal: DrQ-v2's 100K residuals resampled, base = their mean, clipped to [0, 1.2]"),
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--published", default=ROOT / "eval/reference/drqv2_published.csv")
    ap.add_argument("--cells", default=ROOT / "results/study-2/cells")
    ap.add_argument("--reps", type=int, default=800, help="simulated studies per table entry")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    started = time.process_time()

    src = Sources(args.published, args.cells)
    expert, drq, drq_mean, drq_sd = src.expert, src.drq, src.drq_mean, src.drq_sd
    study2, pooled_arms, sigma_a, residuals = src.study2, src.pooled_arms, src.sigma_a, src.residuals
    models = src.models

    se_max = 0.5 / math.sqrt(args.reps)
    print(f"# Study 4 power: SAC on {TASK} at 100K frames, arms {', '.join(ARMS)}\n")
    print(
        f"`python3 eval/study/power_study4.py --reps {args.reps} --seed {args.seed}`. Contrasts C1 = lfs - random, "
        f"C2 = lfs - atc; IQM difference of the n runs per arm; two-sided permutation test of the 2n labels "
        f"(exact when C(2n, n) <= {EXACT_LIMIT}, i.e. n <= 8; Monte Carlo with {MC_RELABELLINGS} relabellings for n = 10); "
        f"Holm over C1, C2 at family-wise alpha {args.alpha}. Power = share of {args.reps} simulated studies per entry "
        f"in which the contrast is rejected with difference > 0; Monte Carlo SE <= {se_max:.3f} "
        f"(at power 0.8 or 0.2: {math.sqrt(0.16 / args.reps):.3f}; 95% half-width <= {1.96 * se_max:.3f}). "
        f"lfs and random cells each have their own encoder; atc cells share {ATC_ENCODERS} encoders "
        f"(seed s uses encoder ((s-1) mod 3)+1). Pre-training-run effect SD sigma_p in {{0, 0.5 sigma}}.\n"
    )
    patterns = {n: Patterns(n) for n in DESIGNS}
    level = {}
    for key, (kind, sigma, res, base, label) in models.items():
        model = (kind, sigma, res, base)
        print(f"## Noise model ({key}): {label} (sigma = {sigma:.4f})\n")
        print("| n per arm | sigma_p | " + " | ".join(f"delta {d:.2f}" for d in DELTAS) + " |")
        print("|---" * (2 + len(DELTAS)) + "|")
        for n in DESIGNS:
            for ratio in SIGMA_P_RATIOS:
                cells = []
                for delta in DELTAS + ((0.0,) if key in "ac" else ()):
                    rng = random.Random(f"{args.seed}-{key}-{n}-{ratio}-{delta}")
                    r = rates(patterns[n], model, ratio * sigma, delta, args.reps, args.alpha, rng)
                    if delta == 0.0:
                        level[(key, n, ratio)] = r
                    else:
                        cells.append(f"{r[0]:.2f} / {r[1]:.2f}")
                print(f"| {n} | {ratio} sigma | " + " | ".join(cells) + " |")
        print("\nCells: C1 power / C2 power.\n")

    print("## Level check at delta = 0 (all arms equal)\n")
    print("Rejection rates in either direction under Holm: C1 / C2 / either (family-wise).\n")
    print("| n per arm | sigma_p | model (a) | model (c) |")
    print("|---|---|---|---|")
    for n in DESIGNS:
        for ratio in SIGMA_P_RATIOS:
            cells = [" / ".join(f"{x:.3f}" for x in level[(key, n, ratio)][2:]) for key in "ac"]
            print(f"| {n} | {ratio} sigma | " + " | ".join(cells) + " |")
    print(f"\n(Monte Carlo SE of a rate near 0.05: {math.sqrt(0.05 * 0.95 / args.reps):.3f}.) With sigma_p > 0 the atc "
          f"arm's n scores share {ATC_ENCODERS} encoder effects, so under the null they are not exchangeable with lfs's; "
          "the permutation test of C2 ignores this clustering. Smallest attainable p: "
          + ", ".join(f"n = {n}: {2 / math.comb(2 * n, n) if patterns[n].exact else 1 / (1 + MC_RELABELLINGS):.4f}" for n in DESIGNS)
          + f"; Holm's first step needs p <= alpha/2 = {args.alpha / 2}, so a design whose smallest p exceeds it never rejects.\n")

    fmt = lambda xs: ", ".join(f"{x:.3f}" for x in xs)
    print("## Source numbers\n")
    print(
        f"Expert score = mean of DrQ-v2's {TASK} returns at 500K frames = {expert:.2f}. "
        f"DrQ-v2's 10 published returns at 100K frames, normalised (seeds 1-10): {fmt(drq)}; "
        f"mean {drq_mean:.3f}, SD {drq_sd:.3f}. "
        + "Study 2 at 20K frames, normalised: "
        + "; ".join(f"{arm} (n {len(x)}) mean {statistics.mean(x):.3f}, SD {statistics.stdev(x):.3f} [{fmt(x)}]" for arm, x in sorted(study2.items()))
        + f". Noise sigmas: (a) {sigma_a:.4f} (pooled random and lfs, ddof 1, "
        f"{sum(len(x) - 1 for x in pooled_arms)} df); (b) {drq_sd:.4f}; (c) resampled residuals "
        f"{fmt(residuals)} (SD {drq_sd:.4f}) around base {drq_mean:.3f}, sigma_p scaled from {drq_sd:.4f}."
    )
    print(f"runtime {time.process_time() - started:.1f} s CPU", file=sys.stderr)


if __name__ == "__main__":
    main()
