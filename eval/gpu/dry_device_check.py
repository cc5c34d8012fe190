"""Stand-in for examples/device_check in a CPU dry run of eval/gpu/gpu-session.sh
(eval/gpu/gpu-session-dry.sh): device_check's bench is fixed at B=512, minutes per round on a
small CPU, so its bench lines are made here from lfs's own CPU benches at a small batch
(examples/bench_pretrain, examples/bench_sac: the same Trainer::update and SacAgent::update), in
device_check's format (the median of the timed updates and their spread, as Python's
statistics module gives them), each marked "dry": true. Without --bench-only, the real device_check's checks run first (no
bench).

    DRY_TARGET=target DRY_BATCH_LFS=16 DRY_BATCH_SAC=16,32 python3 eval/gpu/dry_device_check.py --device cpu --bench
"""
import json
import statistics
import os
import subprocess
import sys

TARGET = os.environ.get("DRY_TARGET", "target")
EX = os.path.join(TARGET, "release", "examples")


def lines(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def spread(v):
    """device_check's bench fields for the timed updates' seconds v."""
    t = sorted(v)
    q = statistics.quantiles(t, n=4) if len(t) > 1 else [t[0]] * 3
    return {"seconds": statistics.median(t), "updates": len(t), "median_s": statistics.median(t),
            "min_s": t[0], "max_s": t[-1], "q1_s": q[0], "q3_s": q[2]}


def main():
    argv = sys.argv[1:]
    if "--long" in argv or "--memory" in argv:
        # the real modes, --long at batch 8 (its real sizes take minutes a step on a small CPU)
        extra = ["--long-batch", "8"] if "--long" in argv else []
        sys.exit(subprocess.call([os.path.join(EX, "device_check")] + argv + extra))
    if "--bench-only" not in argv:
        code = subprocess.call([os.path.join(EX, "device_check"), "--device", "cpu"])
        if code != 0 or "--bench" not in argv:
            sys.exit(code)
    b = os.environ.get("DRY_BATCH_LFS", "16")
    rows = lines([os.path.join(EX, "bench_pretrain"), "--batch", b, "--updates", "3", "--warmup", "1"])
    parts = {k: statistics.median([r["seconds_" + k] for r in rows]) for k in ("data", "forward", "backward", "optimizer")}
    print(json.dumps({"bench": "lfs update", "batch": int(b), **spread([r["update_seconds"] for r in rows]),
                      **parts, "dry": True}), flush=True)
    for b in os.environ.get("DRY_BATCH_SAC", "16,32").split(","):
        rows = lines([os.path.join(EX, "bench_sac"), "--batch", b, "--updates", "3", "--warmup", "1"])
        print(json.dumps({"bench": "sac update, cached features", "batch": int(b),
                          **spread([r["update_seconds"] for r in rows]), "dry": True}), flush=True)


if __name__ == "__main__":
    main()
