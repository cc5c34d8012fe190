"""Compare lfs's DrQ-v2 (or TACO) updates with the PyTorch transcription of DrQ-v2's (TACO's).

Reads bench-out/<agent>-dynamics/ours/s<seed>.json (examples/bench_drqv2.rs --frames) and
bench-out/<agent>-dynamics/torch/s<seed>.json (eval/bench/drqv2_torch.py --frames), or the torch
side from a stored reference (--reference). For each metric (critic loss, Q1, the target, the
actor loss; TACO's loss and its CURL and reward terms when the runs have them), cuts the curves into windows of WINDOW updates and prints per window each side's
mean over seeds, the seed-to-seed spread on each side (max - min of the per-seed window means),
the difference of the side means, and the band |difference| must stay within:
max(3 x the larger side's spread, FLOOR x max(1, |torch mean|)). Exits 1 if a window is outside.

    python3 eval/bench/drqv2_dynamics.py [bench-out/drqv2-dynamics] [--reference FILE] [--store FILE]

The torch side was run once and stored in eval/bench/<agent>_dynamics_reference.json (with its
settings and versions): `make bench-dynamics-drqv2` (`-taco`) runs only our side and compares
it with that file; `make bench-dynamics-drqv2-reference` (`-taco-reference`) reruns the torch
side and stores it.
"""
import glob
import json
import re
import sys

WINDOW = 50
FLOOR = 0.05
METRICS = ["critic_loss", "critic_q1", "critic_target_q", "actor_loss", "taco_loss", "curl_loss", "reward_loss"]


def mean(xs):
    return sum(xs) / len(xs)


def load(pattern):
    runs = {}
    for path in glob.glob(pattern):
        d = json.load(open(path))
        runs[int(re.search(r"s(\d+)\.json$", path).group(1))] = d
    return runs


def main(root, reference=None, store=None):
    ours = load(f"{root}/ours/s*.json")
    torch = json.load(open(reference))["runs"] if reference else load(f"{root}/torch/s*.json")
    torch = {int(k): v for k, v in torch.items()}
    if not ours or not torch:
        raise SystemExit(f"missing runs: ours {sorted(ours)}, torch {sorted(torch)}")
    n = min(len(r["metrics"]["critic_loss"]) for r in list(ours.values()) + list(torch.values()))
    print(f"ours seeds {sorted(ours)}, torch seeds {sorted(torch)}, updates compared {n}, window {WINDOW}")
    ok = True
    for metric in [m for m in METRICS if all(m in r["metrics"] for r in list(ours.values()) + list(torch.values()))]:
        print(f"\n{metric}\nupdates | ours per seed | torch per seed | ours mean | torch mean | delta | band")
        for w0 in range(0, n - WINDOW + 1, WINDOW):
            wm = lambda runs: {s: mean(r["metrics"][metric][w0:w0 + WINDOW]) for s, r in sorted(runs.items())}
            lo, to = wm(ours), wm(torch)
            spread = lambda d: max(d.values()) - min(d.values())
            band = max(3 * max(spread(lo), spread(to)), FLOOR * max(1.0, abs(mean(list(to.values())))))
            delta = mean(list(lo.values())) - mean(list(to.values()))
            inside = abs(delta) <= band
            ok &= inside
            print(f"{w0 + 1}-{w0 + WINDOW} | {' '.join(f'{v:.3f}' for v in lo.values())} | "
                  f"{' '.join(f'{v:.3f}' for v in to.values())} | {mean(list(lo.values())):.3f} | "
                  f"{mean(list(to.values())):.3f} | {delta:+.3f} | {band:.3f}{'' if inside else ' OUTSIDE'}")
    if store:
        with open(store, "w") as f:
            json.dump({"source": "eval/bench/drqv2_torch.py --frames (eval/bench/drqv2_dynamics.sh)",
                       "runs": {str(s): r for s, r in sorted(torch.items())}}, f)
        print(f"\nstored the torch runs in {store}")
    print("\nevery window inside its band" if ok else "\nSOME WINDOW OUTSIDE ITS BAND")
    return 0 if ok else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    opt = lambda name: args[args.index(name) + 1] if name in args else None
    pos = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or not args[i - 1].startswith("--"))]
    sys.exit(main(pos[0] if pos else "bench-out/drqv2-dynamics", opt("--reference"), opt("--store")))
