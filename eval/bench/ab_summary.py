"""Medians of an alternated A/B's lines (results/sac-throughput/*/ab.sh: label, benchmark,
round, then the benchmark's JSON line), each timer before against after:

    python3 eval/bench/ab_summary.py results/sac-throughput/relu-mask/ab.txt [after|final]
"""
import json, statistics, sys
AFTER = sys.argv[2] if len(sys.argv) > 2 else "after"
rows = {}
for line in open(sys.argv[1]):
    parts = line.split(" ", 3)
    if len(parts) < 4 or not parts[3].startswith("{"):
        continue
    v, bench, _, js = parts
    r = json.loads(js)
    for k in ("update_seconds", "seconds_data", "seconds_forward", "seconds_backward", "aux_seconds", "sac_seconds"):
        if k in r:
            rows.setdefault((bench, k, v), []).append(r[k])
for bench, k in sorted({(b, k) for b, k, _ in rows}):
    a, b = rows[(bench, k, "before")], rows[(bench, k, AFTER)]
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{bench:9s} {k:17s} before {ma:.4f} (n={len(a)}, min {min(a):.4f})  {AFTER} {mb:.4f} (n={len(b)}, min {min(b):.4f})  {AFTER}/before {mb/ma:.3f}")
