#!/usr/bin/env python3
"""Power of study 4 if its budget gate stops it early: the designs the gate can leave.

Written 2026-11-29, after seed 1's cells were seen, to inform the decision on the gate (results/
study-4/README.md, "The budget so far"); it changes nothing in the plan (docs/study-4.md) and is
descriptive. The model, the statistic, the test and Holm's rule are power_study4.py's, imported
from it; only the designs differ. The gate stops the study seed by seed, so it leaves n whole
seeds of every arm, or n seeds of lfs and random with n - 1 of atc (seed n's atc cell not
started). The plan's rule then leaves seed n out of C2 only: C1 on n + n seeds, C2 on
(n - 1) + (n - 1).

    python3 eval/study/power_study4_gate.py [--reps 800] [--seed 0] > results/study-4/power-at-the-gate.md
"""

import argparse
import math
import random
import sys
import time

from power_study4 import ROOT, Patterns, Sources, holm, simulate_study

# (seeds of lfs and random, seeds of atc): what the gate can leave.
GATE_DESIGNS = ((2, 2), (3, 3), (5, 4), (5, 5), (6, 6))
DELTAS = (0.10, 0.15, 0.20, 0.30)
SIGMA_P_RATIO = 0.5
# power_study4.py's noise models (a) and (c), as this table names them.
MODEL_LABELS = {
    "a": "Normal, sigma = study 2's pooled within-arm SD at 20K frames",
    "c": "bimodal: DrQ-v2's 100K residuals resampled",
}


def rates(n1, n2, patterns, model, sigma_p, delta, reps, alpha, rng):
    """(C1 power, C2 power): rejected under Holm with a positive difference; C2 uses the first
    n2 seeds of lfs and atc."""
    hits = [0, 0]
    for _ in range(reps):
        s = simulate_study(n1, model, sigma_p, delta, rng)
        d1, p1 = patterns[n1].p_value(s["lfs"], s["random"], alpha, rng)
        d2, p2 = patterns[n2].p_value(s["lfs"][:n2], s["atc"][:n2], alpha, rng)
        r1, r2 = holm([p1, p2], alpha)
        hits[0] += r1 and d1 > 0
        hits[1] += r2 and d2 > 0
    return [h / reps for h in hits]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=800, help="simulated studies per table entry")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    started = time.process_time()

    sources = Sources(ROOT / "eval/reference/drqv2_published.csv", ROOT / "results/study-2/cells")
    models = {key: (sources.models[key][:4], label) for key, label in MODEL_LABELS.items()}
    patterns = {n: Patterns(n) for n in sorted({n for design in GATE_DESIGNS for n in design})}

    print("# Study 4: power of the designs its budget gate can leave\n")
    print(
        f"`python3 eval/study/power_study4_gate.py --reps {args.reps} --seed {args.seed}`, written after seed 1 was "
        "seen; descriptive, the plan unchanged. power_study4.py's model, IQM statistic, exact two-sided "
        f"permutation test and Holm over C1, C2 at family-wise alpha {args.alpha}; sigma_p = {SIGMA_P_RATIO} sigma "
        f"(the plan's second row). Monte Carlo SE <= {0.5 / math.sqrt(args.reps):.3f}. A design (n, m): C1 = lfs - "
        "random on n + n seeds, C2 = lfs - atc on m + m (the first m seeds). Smallest two-sided p of n + n seeds "
        "(the arms wholly separated): "
        + ", ".join(f"n = {n}: {patterns[n].smallest_p():.4f}" for n in patterns)
        + ". From n = 4 the IQM trims one score from each end of each arm, so swapping the two arms' trimmed "
        "extremes ties the observed split: 4 / C(2n, n), not 2 / C(2n, n). Holm's first step needs "
        f"p <= {args.alpha / 2}, its second p <= {args.alpha}.\n"
    )
    for key, (model, label) in models.items():
        print(f"## Noise model ({key}): {label} (sigma = {model[1]:.4f})\n")
        print("| seeds (C1, C2) | " + " | ".join(f"delta {d:.2f}" for d in DELTAS) + " |")
        print("|---" * (1 + len(DELTAS)) + "|")
        for n1, n2 in GATE_DESIGNS:
            cells = []
            for delta in DELTAS:
                rng = random.Random(f"{args.seed}-{key}-{n1}-{n2}-{delta}")
                r = rates(n1, n2, patterns, model, SIGMA_P_RATIO * model[1], delta, args.reps, args.alpha, rng)
                cells.append(f"{r[0]:.2f} / {r[1]:.2f}")
            print(f"| {n1}, {n2} | " + " | ".join(cells) + " |")
        print("\nCells: C1 power / C2 power.\n")
    print(f"runtime {time.process_time() - started:.1f} s CPU", file=sys.stderr)


if __name__ == "__main__":
    main()
