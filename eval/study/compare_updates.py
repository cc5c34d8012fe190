"""Whether a pre-training run reproduces a committed one update for update: every column of the
committed `updates.csv` (eval/study/copy_results.sh's) but the timing, compared exactly.

    python3 eval/study/compare_updates.py results/study-mini/pretrain/lfs/updates.csv runs/x/lfs/metrics.jsonl
"""

import csv
import json
import sys

TIMING = {"update_seconds"}


def main():
    committed, log = sys.argv[1], sys.argv[2]
    with open(committed) as f:
        rows = list(csv.DictReader(f))
    keys = [k for k in rows[0] if k != "step" and k not in TIMING]
    ours = {}
    with open(log) as f:
        for line in f:
            row = json.loads(line)
            if "pretrain/loss" in row:  # update lines; the online probe's lines have no loss
                ours[row["step"]] = row
    differing = []
    for row in rows:
        step = int(row["step"])
        mine = ours.get(step)
        if mine is None:
            differing.append(f"update {step}: missing")
            continue
        for k in keys:
            # copy_results.sh wrote each value with Python's str of the JSON number, and an empty
            # field for a metric the method does not log (atc and curl have no LNC)
            value = mine.get("pretrain/" + k)
            if row[k] != ("" if value is None else str(value)):
                differing.append(f"update {step}: {k} {row[k]} vs {mine.get('pretrain/' + k)}")
    extra = sorted(set(ours) - {int(r["step"]) for r in rows})
    print(json.dumps({
        "committed": committed, "log": log, "updates_compared": len(rows), "columns": keys,
        "differing": len(differing), "first_differences": differing[:5], "updates_only_in_log": len(extra),
    }, indent=1))
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
