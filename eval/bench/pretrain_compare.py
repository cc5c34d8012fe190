"""`make bench-pretrain`: seconds per LFS update, candle (examples/bench_pretrain.rs) vs PyTorch
CPU (eval/bench/pretrain_torch.py), interleaved in one run, medians per batch size.

    python3 eval/bench/pretrain_compare.py --torch-python .venv-bench/bin/python \
        --plan 32:3,128:2,512:1 --repeats 2 --out bench-out/pretrain.json

Each (repeat, batch) runs candle then torch as fresh processes, each with one untimed warm-up
update followed by the planned timed updates. Both use every core (torch.set_num_threads =
os.cpu_count(); candle's gemm/rayon default). Prints a Markdown table for BENCHMARKS.md.
Plain Python 3 (no packages) so it runs without the torch venv; without torch it reports
candle alone.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd):
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--torch-python", default=os.path.join(ROOT, ".venv-bench/bin/python"))
    p.add_argument("--plan", default="32:3,128:2,512:1", help="batch:timed_updates,...")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default=os.path.join(ROOT, "bench-out/pretrain.json"))
    a = p.parse_args()
    plan = [tuple(int(x) for x in item.split(":")) for item in a.plan.split(",")]
    threads = os.cpu_count() or 1
    candle = [os.path.join(ROOT, "target/release/examples/bench_pretrain")]
    has_torch = os.path.exists(a.torch_python) and subprocess.run(
        [a.torch_python, "-c", "import torch"], capture_output=True).returncode == 0
    if not has_torch:
        print(f"NOTE: no torch at {a.torch_python}; timing candle only", file=sys.stderr)
    times = {}
    for rep in range(a.repeats):
        for batch, updates in plan:
            args = ["--batch", str(batch), "--updates", str(updates), "--warmup", "1"]
            t0 = time.time()
            rows = run(candle + args)
            if has_torch:
                rows += run([a.torch_python, "eval/bench/pretrain_torch.py", *args, "--threads", str(threads)])
            for r in rows:
                times.setdefault((r["impl"], batch), []).append(r["update_seconds"])
            print(f"repeat {rep + 1}/{a.repeats} batch {batch}: {time.time() - t0:.0f} s", file=sys.stderr)
    result = {"threads": threads, "machine": platform.processor() or platform.machine(), "plan": a.plan,
              "repeats": a.repeats, "seconds_per_update": {f"{k[0]}@{k[1]}": v for k, v in times.items()}}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"| batch | candle s/update (median, n) | torch s/update (median, n) | candle/torch time | candle updates/s | torch updates/s |")
    print("|---|---|---|---|---|---|")
    for batch, _ in plan:
        c = times.get(("candle", batch), [])
        t = times.get(("torch", batch), [])
        cm = statistics.median(c) if c else float("nan")
        tm = statistics.median(t) if t else float("nan")
        print(f"| {batch} | {cm:.3f} ({len(c)}) | {tm:.3f} ({len(t)}) | {cm / tm:.2f}x | {1 / cm:.3f} | {1 / tm:.3f} |")


if __name__ == "__main__":
    main()
