"""Compare lfs's Proto-RL (or APT) exploration updates with the PyTorch transcription of upstream's.

Reads bench-out/explore-dynamics/<method>/ours/s<seed>.json (lfs's side, the same flags and JSON
as eval/bench/explore_torch.py) and .../torch/s<seed>.json (eval/bench/explore_torch.py), or
the torch side from a stored reference (--reference). Every metric is a list of the values of
the updates that compute it (Proto-RL's representation, actor and alpha losses come every
second agent step, so their lists are half as long). For each metric both sides have, cuts the
curves into windows of WINDOW values and prints per window each side's per-seed means, the
difference of the side means, and the band |difference| must stay within:
max(3 x the larger side's seed-to-seed spread (max - min of the per-seed window means),
FLOOR x max(1, |torch mean|)), as eval/bench/drqv2_dynamics.py does. Exits 1 if a window is
outside.

    python3 eval/bench/explore_dynamics.py proto [bench-out/explore-dynamics/proto] [--reference FILE] [--store FILE]

--store writes the torch runs (every value) and their window summaries (per-seed means, mean,
spread) to FILE: eval/bench/{proto,apt}_dynamics_reference.json.
"""
import glob
import json
import re
import sys

WINDOW = 50
FLOOR = 0.05
METRICS = {
    "proto": ["repr_loss", "intr_reward", "critic_loss", "critic_q1", "critic_target_q", "actor_loss", "alpha_loss",
              "actor_entropy", "alpha"],
    "apt": ["icm_loss", "intr_reward", "critic_loss", "critic_q1", "critic_target_q", "actor_loss"],
}


def mean(xs):
    return sum(xs) / len(xs)


def load(pattern):
    runs = {}
    for path in glob.glob(pattern):
        runs[int(re.search(r"s(\d+)\.json$", path).group(1))] = json.load(open(path))
    return runs


def windows(runs, metric, n):
    """[(first, last, {seed: window mean})] over the first n values of every run."""
    return [(w0 + 1, w0 + WINDOW, {s: mean(r["metrics"][metric][w0:w0 + WINDOW]) for s, r in sorted(runs.items())})
            for w0 in range(0, n - WINDOW + 1, WINDOW)]


def spread(d):
    return max(d.values()) - min(d.values())


def summary(runs, method):
    out = {}
    for metric in METRICS[method]:
        if all(metric in r["metrics"] for r in runs.values()):
            n = min(len(r["metrics"][metric]) for r in runs.values())
            out[metric] = [{"values": f"{a}-{b}", "per_seed": {str(s): v for s, v in d.items()},
                            "mean": mean(list(d.values())), "spread": spread(d)} for a, b, d in windows(runs, metric, n)]
    return out


def main(method, root, reference=None, store=None):
    torch = json.load(open(reference))["runs"] if reference else load(f"{root}/torch/s*.json")
    torch = {int(k): v for k, v in torch.items()}
    if store:
        if not torch:
            raise SystemExit(f"no torch runs under {root}/torch")
        settings = {k: v for k, v in next(iter(torch.values())).items() if k not in ("metrics", "seed", "seconds")}
        with open(store, "w") as f:
            json.dump({"source": f"eval/bench/explore_torch.py --method {method} (eval/bench/explore_dynamics.sh)",
                       "settings": settings, "window": WINDOW, "windows": summary(torch, method),
                       "runs": {str(s): r for s, r in sorted(torch.items())}}, f)
        print(f"stored the torch runs of seeds {sorted(torch)} in {store}")
    ours = load(f"{root}/ours/s*.json")
    if not ours:
        print(f"no runs of ours under {root}/ours: nothing to compare")
        return 0 if store else 1
    print(f"ours seeds {sorted(ours)}, torch seeds {sorted(torch)}, window {WINDOW}")
    ok = True
    both = list(ours.values()) + list(torch.values())
    for metric in [m for m in METRICS[method] if all(m in r["metrics"] for r in both)]:
        n = min(len(r["metrics"][metric]) for r in both)
        print(f"\n{metric} ({n} values)\nvalues | ours per seed | torch per seed | ours mean | torch mean | delta | band")
        for (a, b, lo), (_, _, to) in zip(windows(ours, metric, n), windows(torch, metric, n)):
            band = max(3 * max(spread(lo), spread(to)), FLOOR * max(1.0, abs(mean(list(to.values())))))
            delta = mean(list(lo.values())) - mean(list(to.values()))
            inside = abs(delta) <= band
            ok &= inside
            print(f"{a}-{b} | {' '.join(f'{v:.4f}' for v in lo.values())} | {' '.join(f'{v:.4f}' for v in to.values())} | "
                  f"{mean(list(lo.values())):.4f} | {mean(list(to.values())):.4f} | {delta:+.4f} | "
                  f"{band:.4f}{'' if inside else ' OUTSIDE'}")
    print("\nevery window inside its band" if ok else "\nSOME WINDOW OUTSIDE ITS BAND")
    return 0 if ok else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    opt = lambda name: args[args.index(name) + 1] if name in args else None
    pos = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or not args[i - 1].startswith("--"))]
    if not pos or pos[0] not in METRICS:
        raise SystemExit(__doc__)
    method = pos[0]
    sys.exit(main(method, pos[1] if len(pos) > 1 else f"bench-out/explore-dynamics/{method}", opt("--reference"),
                  opt("--store")))
