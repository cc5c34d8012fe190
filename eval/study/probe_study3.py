#!/usr/bin/env python3
"""Study 3's verdicts (docs/study-3.md, issue 57), from the committed probe reports.

The score of a pre-training run is the mean over the nine tasks of its held-out state R²
(`lfs probe`'s "mean over tasks"), read from `<results>/probe/<run>.json`. The arms are the
plan's:
- lfs: study 2's six LFS encoders (`study2-lfs-s1`..`s6`, probed again here) and `lfs-s7`..`s10`
  when the reuse check passed (`<results>/check/reuse.json`), otherwise `lfs-s7`..`s16`;
- lfs-no-fm: `lfs-no-fm-s1`..`s10`; lfs-no-lnc: `lfs-no-lnc-s1`..`s10`.

For P1 (lfs − lfs-no-fm) and P2 (lfs − lfs-no-lnc):
- the difference test: the exact two-sided permutation test of the runs' arm labels on the
  difference of mean scores (every split of the pooled runs into groups of the two sizes; p =
  the share whose |difference| is at least the observed one);
- the equivalence test within ±DELTA: two exact one-sided permutation tests, each with the
  second arm's scores shifted to the edge of its null (H0: difference ≤ −DELTA, and ≥ +DELTA);
  p = the larger of the two;
- Holm's step-down over the comparisons in the family (P1, and P2 unless the plan's budget rule
  left it out: `<results>/gates.tsv`), for each kind of test apart, at a family-wise 0.05.
A comparison gets its verdict when every run of both arms has been probed; before that, the
numbers are printed as interim and no verdict is given. `--final` (the study's last stage) gives
the verdict on the runs that exist and names any that are missing. Then the SAC replication's
verdict from `lfs report` (`<results>/report/report.md`), when it exists. Markdown on stdout.
Standard library only.

    python3 eval/study/probe_study3.py results/study-3 [--final]
"""

import itertools
import json
import statistics
import sys
from pathlib import Path

DELTA = 0.02
LEVEL = 0.05
OTHERS = {"P1": "lfs-no-fm", "P2": "lfs-no-lnc"}


def arms(results):
    check = results / "check/reuse.json"
    reuse = json.loads(check.read_text())["reuse"] if check.exists() else None
    if reuse:
        lfs = [f"study2-lfs-s{s}" for s in range(1, 7)] + [f"lfs-s{s}" for s in range(7, 11)]
    else:
        lfs = [f"lfs-s{s}" for s in range(7, 17)]
    out = {"lfs": lfs}
    for other in OTHERS.values():
        out[other] = [f"{other}-s{s}" for s in range(1, 11)]
    return reuse, out


def state_r2(path):
    report = json.loads(path.read_text())
    return {t["task"]: t["state"]["held_out"]["mean"]["point"] for t in report["tasks"]}


class Splits:
    """Every split of the pooled runs (a first, then b) into groups of len(a) and len(b)."""

    def __init__(self, a, b):
        self.n_a, self.n_b = len(a), len(b)
        pooled = a + b
        total = sum(pooled)
        self.observed = statistics.mean(a) - statistics.mean(b)
        self.rows = []  # (difference of means, how many of b's runs the split puts in group a)
        for chosen in itertools.combinations(range(len(pooled)), self.n_a):
            sum_a = sum(pooled[i] for i in chosen)
            b_in_a = sum(1 for i in chosen if i >= self.n_a)
            self.rows.append((sum_a / self.n_a - (total - sum_a) / self.n_b, b_in_a))

    def moved(self, b_in_a):
        """How much a split's difference moves per unit shift of arm b's scores."""
        return b_in_a / self.n_a - (self.n_b - b_in_a) / self.n_b

    def difference_p(self):
        tol = 1e-12 * max(abs(self.observed), 1.0)
        return sum(abs(d) >= abs(self.observed) - tol for d, _ in self.rows) / len(self.rows)

    def equivalence_p(self, delta):
        """max of the two one-sided p's: H0 difference ≤ −delta (arm b shifted by −delta) and
        H0 difference ≥ +delta (arm b shifted by +delta)."""
        tol = 1e-12
        low = sum(d - delta * self.moved(k) >= self.observed + delta - tol for d, k in self.rows)
        up = sum(d + delta * self.moved(k) <= self.observed - delta + tol for d, k in self.rows)
        return max(low, up) / len(self.rows)


def holm(pvalues):
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def skipped(results):
    """Comparisons the plan's budget rule left out (gates.tsv: name, decision, reason)."""
    gates = results / "gates.tsv"
    if not gates.exists():
        return set()
    out = set()
    for line in gates.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[1] == "skip":
            out.add(fields[0])
    return out


def verdict(name, other, d, p_adj, eq_adj):
    different = p_adj <= LEVEL
    equivalent = eq_adj <= LEVEL
    winner = "lfs" if d > 0 else other
    if different and equivalent:
        return f"{winner} better, by less than {DELTA}"
    if different:
        return f"{winner} better"
    if equivalent:
        return f"equivalent within ±{DELTA}"
    return f"undecided: no difference detected, and equivalence within ±{DELTA} not shown"


def main():
    results = Path(sys.argv[1])
    final = "--final" in sys.argv[2:]
    reuse, arm_runs = arms(results)
    probes = results / "probe"
    r2 = {name: state_r2(probes / f"{name}.json") for names in arm_runs.values() for name in names
          if (probes / f"{name}.json").exists()}
    tasks = sorted({t for per_task in r2.values() for t in per_task})
    for name, per_task in r2.items():
        if set(per_task) != set(tasks):
            sys.exit(f"{probes / name}.json: not probed on every task ({', '.join(sorted(set(tasks) - set(per_task)))} missing)")
    score = {name: statistics.mean(per_task.values()) for name, per_task in r2.items()}

    print("# Study 3: the probe comparisons (docs/study-3.md)\n")
    print(f"Reuse of study 2's six LFS runs: **{ {True: 'yes', False: 'no', None: 'not yet checked'}[reuse] }** "
          "(`check/reuse.json`).\n")
    print("| arm | runs probed / planned | per run | mean | SD over runs (ddof 1) |")
    print("|---|---|---|---|---|")
    for arm, names in arm_runs.items():
        have = [n for n in names if n in score]
        values = [score[n] for n in have]
        per_run = ", ".join(f"{n.rpartition('-s')[2]}: {score[n]:.4f}" for n in have)
        mean = f"{statistics.mean(values):.4f}" if values else ""
        sd = f"{statistics.stdev(values):.4f}" if len(values) > 1 else ""
        print(f"| {arm} | {len(have)} / {len(names)} | {per_run} | {mean} | {sd} |")

    left_out = skipped(results)
    family = [c for c in OTHERS if c not in left_out]
    rows = []
    for c in family:
        other = OTHERS[c]
        a = [score[n] for n in arm_runs["lfs"] if n in score]
        b = [score[n] for n in arm_runs[other] if n in score]
        missing = [n for n in arm_runs["lfs"] + arm_runs[other] if n not in score]
        if len(a) < 2 or len(b) < 2:
            rows.append((c, other, None, missing))
            continue
        splits = Splits(a, b)
        rows.append((c, other, (splits.observed, splits.difference_p(), splits.equivalence_p(DELTA), len(splits.rows), len(a), len(b)), missing))
    complete = all(r[2] is not None and (not r[3] or final) for r in rows)
    tested = [r for r in rows if r[2] is not None]
    p_adj = holm([r[2][1] for r in tested])
    eq_adj = holm([r[2][2] for r in tested])

    title = "Verdicts" if complete else "Interim numbers (not the verdict: the plan's runs are not all probed)"
    print(f"\n## {title}: exact permutation tests, Holm over {len(family)} ({', '.join(family)}), family-wise {LEVEL}\n")
    if left_out:
        print(f"Left out by the plan's budget rule (`gates.tsv`): {', '.join(sorted(left_out))}.\n")
    print(f"| comparison | runs | difference of means | p | Holm p | equivalence p (±{DELTA}) | Holm p | splits | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (c, other, stats, missing), pa, ea in zip(tested, p_adj, eq_adj):
        d, p, eq, n_splits, n_a, n_b = stats
        word = f"**{verdict(c, other, d, pa, ea)}**" if complete else "(interim)"
        print(f"| {c}: lfs − {other} | {n_a} + {n_b} | {d:+.4f} | {p:.5f} | {pa:.5f} | {eq:.5f} | {ea:.5f} | {n_splits} | {word} |")
    for c, other, stats, missing in rows:
        if stats is None:
            print(f"| {c}: lfs − {other} | fewer than 2 runs probed in an arm | | | | | | | |")
    for c, other, stats, missing in rows:
        if missing:
            print(f"\n{c}: {'left out, missing' if final else 'not yet probed'}: {', '.join(missing)}.")

    if tested:
        print("\n## Per task (descriptive): difference of the arms' mean state R² over their runs\n")
        print("| task | " + " | ".join(f"lfs − {r[1]}" for r in tested) + " |")
        print("|---" * (1 + len(tested)) + "|")
        for t in tasks:
            mean_of = lambda arm: statistics.mean(r2[n][t] for n in arm_runs[arm] if n in r2)
            print(f"| {t} | " + " | ".join(f"{mean_of('lfs') - mean_of(r[1]):+.3f}" for r in tested) + " |")

    described = sorted(p.stem for p in probes.glob("*.json") if p.stem not in r2)
    study2 = results.parent / "study-2/probe"
    print("\n## Described, not tested: other probes, each the nine-task mean\n")
    print("| encoder | score | from |")
    print("|---|---|---|")
    for name in described:
        print(f"| {name} | {statistics.mean(state_r2(probes / f'{name}.json').values()):.4f} | this study (not in an arm) |")
    for path in sorted(study2.glob("*-s*.json")) if study2.is_dir() else []:
        if not path.stem.startswith("lfs-"):
            print(f"| {path.stem} | {statistics.mean(state_r2(path).values()):.4f} | study 2's report (binary b72d30e) |")

    report = results / "report/report.md"
    print("\n## The SAC replication (cartpole_swingup, lfs vs random, seeds 7-12; decided by `lfs report`)\n")
    if "R" in left_out:
        print("Left out by the plan's budget rule (`gates.tsv`).")
    elif report.exists():
        lines = [l for l in report.read_text().splitlines() if "p = " in l or "Verdict" in l]
        print("\n".join(lines) if lines else f"(no verdict line found in {report})")
    else:
        print("Not run yet.")


if __name__ == "__main__":
    main()
