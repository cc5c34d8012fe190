"""Summarises eval/bench/task_batching.sh: per run, the means over its last 25 updates of the
loss, the Sinkhorn assignment entropy and the target projections' mean pairwise cosine, and
when the collapse monitor (src/pretrain/collapse.rs, default settings) would report: the first
update of a 100-update window where the loss and the entropy are within 0.01 of ln K and the
cosine is at least 0.999.

    python3 eval/bench/task_batching_summary.py bench-out/batching/runs
"""
import json
import math
import os
import sys

LN_K = math.log(512)


def collapse(rows, window=100, margin=0.01, max_cosine=0.999):
    since = None
    for r in rows:
        h = r.get("pretrain/sinkhorn_entropy")
        trivial = h is not None and abs(r["pretrain/loss"] - LN_K) < margin and abs(h - LN_K) < margin
        if not (trivial and r["pretrain/target_cosine"] >= max_cosine):
            since = None
            continue
        since = since or r["step"]
        if r["step"] + 1 >= since + window:
            return f"since {since} (reported at {r['step']})"
    return "no"


def main(root):
    print("| run | updates | loss | entropy | target cosine | collapse reported |")
    print("|---|---|---|---|---|---|")
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "metrics.jsonl")
        if not os.path.exists(path):
            continue
        rows = [json.loads(line) for line in open(path)]
        last = rows[-25:]
        mean = lambda k: sum(r[k] for r in last) / len(last)
        print(f"| {name} | {rows[-1]['step']} | {mean('pretrain/loss'):.4f} | "
              f"{mean('pretrain/sinkhorn_entropy'):.4f} | {mean('pretrain/target_cosine'):.4f} | {collapse(rows)} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench-out/batching/runs")
