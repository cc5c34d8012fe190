"""Compare lfs's ATC / CURL loss curves with the PyTorch transcriptions (issue 14).

Reads bench-out/dynamics/runs/<method>-s<seed>/metrics.jsonl (lfs pretrain) and
bench-out/dynamics/torch/<method>-s<seed>.json (eval/bench/contrastive_torch.py), cuts each
curve into windows of WINDOW updates over the updates both sides ran, and prints per window:
the mean loss of each run, each side's mean over seeds, the seed-to-seed spread on each side
(max − min of the per-seed window means), the difference of the side means, and the band
|Δ| must stay within: max(3 × the larger side's spread, 0.05 nats). It also prints the mean
target cosine per window and the torch side's gradient norms. Writes the reference curve
(torch per-update losses, versions, settings) to bench-out/dynamics/reference.json.

    python3 eval/bench/contrastive_dynamics.py [bench-out/dynamics] [--window 50]
        [--reference eval/bench/dynamics_reference.json] [--store FILE]

The PyTorch side was run once and its curves stored in eval/bench/dynamics_reference.json
(with the versions and settings that produced them); `make bench-dynamics` runs only our side
and compares it with that file, `make bench-dynamics-reference` reruns the torch side.
"""
import glob
import json
import os
import re
import sys

WINDOW = 50
FLOOR = 0.05


def mean(xs):
    return sum(xs) / len(xs)


def stored_reference(path, method):
    """The torch curves of `method` from a stored reference file (what `--store` wrote)."""
    with open(path) as f:
        stored = json.load(f)["methods"].get(method, {}).get("reference", {})
    return {int(seed): {"loss": r["loss"], "cos": r["target_cosine"], "grad": r["grad_norm"], "meta": r["settings"]}
            for seed, r in stored.items()}


def main(root, reference=None, store=None):
    out = {"window": WINDOW, "floor_nats": FLOOR, "methods": {}}
    ok = True
    for method in ("atc", "curl"):
        ours, ref = {}, {}
        for path in glob.glob(f"{root}/runs/{method}-s*/metrics.jsonl"):
            seed = int(re.search(r"-s(\d+)/", path).group(1))
            rows = [json.loads(line) for line in open(path)]
            ours[seed] = {"loss": [r["pretrain/loss"] for r in rows], "cos": [r["pretrain/target_cosine"] for r in rows]}
        if reference:
            ref = stored_reference(reference, method)
        for path in [] if reference else glob.glob(f"{root}/torch/{method}-s*.json"):
            d = json.load(open(path))
            ref[d["seed"]] = {"loss": d["loss"], "cos": d["target_cosine"], "grad": d["grad_norm"], "meta": d}
        if not ours or not ref:
            print(f"{method}: missing runs (lfs seeds {sorted(ours)}, torch seeds {sorted(ref)})")
            continue
        n = min(len(r["loss"]) for r in list(ours.values()) + list(ref.values()))
        print(f"\n{method}: lfs seeds {sorted(ours)}, torch seeds {sorted(ref)}, updates compared {n}")
        print("window | lfs per seed | torch per seed | lfs mean | torch mean | Δ | band | cos lfs | cos torch")
        windows = []
        for w0 in range(0, n - WINDOW + 1, WINDOW):
            wm = lambda runs, key: {s: mean(r[key][w0:w0 + WINDOW]) for s, r in sorted(runs.items())}
            lo, to = wm(ours, "loss"), wm(ref, "loss")
            spread = lambda d: max(d.values()) - min(d.values()) if len(d) > 1 else float("nan")
            sp = [x for x in (spread(lo), spread(to)) if x == x]
            band = max(3 * max(sp), FLOOR) if sp else FLOOR
            delta = mean(list(lo.values())) - mean(list(to.values()))
            inside = abs(delta) <= band
            ok &= inside
            cl, ct = mean(list(wm(ours, "cos").values())), mean(list(wm(ref, "cos").values()))
            print(f"{w0 + 1}-{w0 + WINDOW} | {' '.join(f'{v:.3f}' for v in lo.values())} | "
                  f"{' '.join(f'{v:.3f}' for v in to.values())} | {mean(list(lo.values())):.3f} | "
                  f"{mean(list(to.values())):.3f} | {delta:+.3f} | {band:.3f}{'' if inside else ' OUTSIDE'} | "
                  f"{cl:.3f} | {ct:.3f}")
            windows.append({"updates": [w0 + 1, w0 + WINDOW], "lfs": lo, "torch": to, "delta": delta, "band": band})
        grads = [g for r in ref.values() for g in r["grad"]]
        print(f"torch grad norm: first update {[r['grad'][0] for r in ref.values()]}, "
              f"max {max(grads):.2f}, share of updates above 10: {sum(g > 10 for g in grads) / len(grads):.2f}")
        out["methods"][method] = {
            "windows": windows,
            "reference": {str(s): {"loss": r["loss"], "target_cosine": r["cos"], "grad_norm": r["grad"],
                                   "settings": {k: v for k, v in r["meta"].items()
                                                if k not in ("loss", "target_cosine", "target_norm", "grad_norm",
                                                             "accuracy")}}
                          for s, r in ref.items()},
        }
    with open(store or os.path.join(root, "reference.json"), "w") as f:
        json.dump(out, f)
    print("\nall windows inside their bands" if ok else "\nSOME WINDOWS OUTSIDE THEIR BANDS")
    return 0 if ok else 1


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("root", nargs="?", default="bench-out/dynamics")
    parser.add_argument("--window", type=int, default=WINDOW)
    parser.add_argument("--reference", help="compare against this stored reference instead of ROOT/torch")
    parser.add_argument("--store", help="write the reference curves here (default ROOT/reference.json)")
    args = parser.parse_args()
    WINDOW = args.window
    sys.exit(main(args.root, args.reference, args.store))
