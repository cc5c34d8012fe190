"""Side by side: eval.csv returns and train.jsonl returns/losses of runs with the same seed."""
import json, sys
runs = sys.argv[1:]
def load(d):
    ev = [l.strip().split(",") for l in open(f"{d}/eval.csv")][1:]
    tr = [json.loads(l) for l in open(f"{d}/train.jsonl")]
    return {int(r[0]): float(r[3]) for r in ev}, tr
data = {r: load(r) for r in runs}
names = [r.rstrip("/").split("/")[-1] for r in runs]
print("| eval frame | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(runs))
frames = sorted(set().union(*[set(d[0]) for d in data.values()]))
for f in frames:
    print(f"| {f} | " + " | ".join(f"{data[r][0].get(f, float('nan')):.1f}" for r in runs) + " |")
print()
keys = ["train/episode_reward", "train/critic_loss", "train/actor_loss", "train/alpha", "train/critic_q1"]
print("| episode (frame) | " + " | ".join(f"{k[6:]} ({n})" for k in keys for n in names) + " |")
print("|---|" + "---|" * (len(keys) * len(runs)))
n = min(len(d[1]) for d in data.values())
for i in range(n):
    row = []
    for k in keys:
        for r in runs:
            v = data[r][1][i].get(k)
            row.append("–" if v is None else f"{v:.4g}")
    print(f"| {i + 1} ({data[runs[0]][1][i]['train/frame']}) | " + " | ".join(row) + " |")
