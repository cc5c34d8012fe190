"""Issue 54's speed check: one exploration update of lfs (examples/bench_explore.rs, as
`lfs explore` runs it) against the PyTorch transcription of its upstream
(eval/bench/explore_torch.py: denisyarats/proto's ProtoAgent.update, URLB's icm_apt), side by
side in interleaved rounds on the fixed cartpole replay of eval/bench/explore_dynamics.sh.

    python3 eval/bench/explore_speed.py --plan proto:64:40,apt:64:40 --rounds 3   # make bench-explore

A plan entry is method:batch:updates. Every round runs, for each entry, both sides as fresh
processes, in ABBA order over the rounds (ours first in odd rounds, torch first in even ones),
on the same number of threads (--threads, default every core: candle's rayon default and
torch.set_num_threads). A run's time is the mean seconds per update over its updates after the
first --warmup (Proto-RL alternates updates with and without its representation step, so a
mean over an even number of updates, not a median). The ratio is ours / torch within a round;
the table gives its median over the rounds with the min–max, and each side's per-round times.
Prints the CPU; writes every update's time to --out. Needs torch in --torch-python (make
setup-torch puts it in .venv).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import cpu_description, cpu_line  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one_run(side, method, batch, updates, frames, python, threads, seed):
    """Seconds per update of one process of `side`, from its JSON."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    sizes = ["--protos", "64", "--queue", "256"] if method == "proto" and batch < 512 else []
    common = ["--method", method, "--frames", frames, "--batch", str(batch), "--updates", str(updates),
              "--seed", str(seed), *sizes, "--out", out]
    if side == "ours":
        cmd = [os.path.join(ROOT, "target/release/examples/bench_explore"), *common]
        env = {**os.environ, "RAYON_NUM_THREADS": str(threads)}
    else:
        cmd = [python, "eval/bench/explore_torch.py", *common, "--threads", str(threads)]
        env = os.environ
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    with open(out) as f:
        result = json.load(f)
    os.unlink(out)
    return result["update_seconds"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--plan", default="proto:64:40,apt:64:40", help="method:batch:updates,...")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=4, help="updates left out of each run's mean (even)")
    p.add_argument("--threads", type=int, default=0, help="threads of each side (0: every core)")
    p.add_argument("--frames", default=os.path.join(ROOT, "bench-out/drqv2-dynamics/frames"))
    p.add_argument("--torch-python", default=os.path.join(ROOT, ".venv/bin/python"))
    p.add_argument("--out", default=os.path.join(ROOT, "bench-out/explore-speed.json"))
    a = p.parse_args()
    if not os.path.exists(os.path.join(a.frames, "episodes.json")):
        raise SystemExit(f"{a.frames}: no replay; run eval/bench/explore_dynamics.sh once (it collects it)")
    threads = a.threads or os.cpu_count() or 1
    plan = [(m, int(b), int(n)) for m, b, n in (item.split(":") for item in a.plan.split(","))]
    runs = {}  # (method, batch) -> {"ours": [[s per update] per round], "torch": [...]}
    for r in range(a.rounds):
        order = ["ours", "torch"] if r % 2 == 0 else ["torch", "ours"]
        for method, batch, updates in plan:
            for side in order:
                secs = one_run(side, method, batch, updates, a.frames, a.torch_python, threads, seed=r + 1)
                runs.setdefault((method, batch), {"ours": [], "torch": []})[side].append(secs)
                print(f"round {r + 1}/{a.rounds} {method} B={batch} {side}: "
                      f"{statistics.mean(secs[a.warmup:]):.4f} s/update", file=sys.stderr)
    cpu = cpu_description()
    with open(a.out, "w") as f:
        json.dump({"cpu": cpu, "threads": threads, "plan": a.plan, "rounds": a.rounds, "warmup": a.warmup,
                   "update_seconds": {f"{m}@{b}": v for (m, b), v in runs.items()}}, f, indent=1)
    print(f"cpu: {cpu_line(cpu)}; {threads} threads each side; {a.rounds} rounds, ABBA")
    print("| method | batch | torch s/update per round | lfs s/update per round | lfs / torch: median (min–max) |")
    print("|---|---|---|---|---|")
    for (method, batch), sides in runs.items():
        mean = {s: [statistics.mean(x[a.warmup:]) for x in sides[s]] for s in sides}
        ratios = [o / t for o, t in zip(mean["ours"], mean["torch"])]
        fmt = lambda xs: ", ".join(f"{x:.4f}" for x in xs)
        print(f"| {method} | {batch} | {fmt(mean['torch'])} | {fmt(mean['ours'])} | "
              f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()
