"""Medians per kernel of ab.txt (ab.sh's output): encoder passes, the LFS update, the SAC update from pixels."""
import collections
import json
import statistics
import sys

times = collections.defaultdict(list)
losses = collections.defaultdict(list)
for line in open(sys.argv[1] if len(sys.argv) > 1 else "ab.txt"):
    tag, _, rest = line.partition("} ")
    tag = json.loads(tag + "}")
    row = json.loads(rest)
    k = tag["kernel"]
    if "workload" in row:
        times[(f"encoder {row['workload']}, B=128", k)].append(row["seconds"])
    elif "pixels" in row:
        times[("SAC update from pixels, B=128", k)].append(row["update_seconds"])
    else:
        times[("LFS update, B=128", k)].append(row["update_seconds"])
        losses[k].append(row["loss"])
print("| workload | avx2 s: median (n) | avx512 s: median (n) | avx512 / avx2 |")
print("|---|---|---|---|")
for w in sorted({w for w, _ in times}):
    a, b = times[(w, "avx2")], times[(w, "avx512")]
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {w} | {ma:.4f} ({len(a)}) | {mb:.4f} ({len(b)}) | {mb / ma:.3f}× |")
print("LFS losses identical on both kernels:", losses["avx2"] == losses["avx512"], f"({len(losses['avx2'])} updates each)")
