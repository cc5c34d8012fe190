#!/usr/bin/env python3
"""Study 4's per-seed curves, and study 2's 20K-frame scores of the same encoders beside them
(docs/study-4.md, "What is reported besides": descriptive, no test).

Study 4's lfs and random cells of seeds 1-6 run the encoders study 2's cartpole_swingup cells of
the same seeds ran, with the same SAC config but for the budget and the evaluation cadence
(study 2: 20,000 frames, 5 episodes every 5,000; study 4: 100,000 frames, 10 episodes every
20,000). So study 2's score at 20K and study 4's at 20K are two evaluations of runs with the same
encoder and SAC seed, and study 4's at 100K says how far the same run went. Only cells whose
`cell.json` says done are read.

    python3 eval/study/study4_beside_study2.py [results/study-4] > table.md
"""

import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASK = "cartpole_swingup"
STUDY2_CELLS = ROOT / "results/study-2/cells"
STUDY4_FRAMES = (0, 20_000, 40_000, 60_000, 80_000, 100_000)


def returns(cell):
    """{frame: mean evaluation return} from a cell's eval.csv."""
    return {int(r["frame"]): float(r["episode_reward"]) for r in csv.DictReader(open(cell / "eval.csv"))}


def done_cells(results):
    """[(arm, seed, cell folder)] of study 4's finished cells, in cell order."""
    out = []
    for cell in sorted((results / "cells").glob(f"*-{TASK}-s*/")):
        if json.loads((cell / "cell.json").read_text()).get("state") == "done":
            out.append((cell.name.split("-")[1], int(cell.name.rsplit("-s", 1)[1]), cell))
    return out


def study2_at_20k(arm, seed):
    """Study 2's return at 20K frames for the arm and seed, or None (no such cell: atc, seeds 7-8)."""
    cells = list(STUDY2_CELLS.glob(f"*-{arm}-{TASK}-s{seed}"))
    return returns(cells[0]).get(20_000) if len(cells) == 1 else None


def main():
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "results/study-4"
    cells = done_cells(results)
    if not cells:
        sys.exit(f"{results / 'cells'}: no finished study-4 cell")
    fmt = lambda x: "–" if x is None else f"{x:.1f}"
    print(f"# Study 4 per seed, with study 2's score of the same encoder and seed ({TASK})\n")
    print("Returns (mean over the evaluation's episodes). Study 2: 5 episodes at 20K frames; study 4: 10 "
          "episodes at each frame below. `–`: no such study-2 cell (atc; lfs seeds 7-8, study 3's "
          "encoders) or no evaluation.\n")
    print("| arm | seed | study 2 at 20K | " + " | ".join(f"study 4 at {f // 1000}K" for f in STUDY4_FRAMES) + " |")
    print("|---" * (3 + len(STUDY4_FRAMES)) + "|")
    for arm, seed, cell in cells:
        curve = returns(cell)
        print(f"| {arm} | {seed} | {fmt(study2_at_20k(arm, seed))} | "
              + " | ".join(fmt(curve.get(f)) for f in STUDY4_FRAMES) + " |")


if __name__ == "__main__":
    main()
