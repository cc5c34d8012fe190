"""candle vs PyTorch CPU in one run, interleaved; per (workload, batch) each side's median and
the median of the same-repeat ratios, with every repeat's ratio and each side's per-repeat
medians (its spread).

    python3 eval/bench/compare.py --suite pretrain --plan 32:4,128:3,512:2 --repeats 3   # make bench-pretrain
    python3 eval/bench/compare.py --suite encoder --plan 32:5,128:3,512:3 --repeats 3   # make bench-encoder
    python3 eval/bench/compare.py --suite e2e --plan 128:3,512:2 --repeats 3   # make bench-e2e
    python3 eval/bench/compare.py --suite sac-features --plan 128:8,512:4 --repeats 3    # make bench-sac
    python3 eval/bench/compare.py --suite drqv2 --plan 256:3,512:2 --repeats 3   # make bench-drqv2
    python3 eval/bench/compare.py --suite taco --plan 256:3 --repeats 3   # make bench-drqv2

Suites:
- pretrain: seconds per LFS update, examples/bench_pretrain.rs vs eval/bench/pretrain_torch.py
  (plan entries batch:timed_updates; two untimed warm-up updates each: the first updates of
  a process at a new batch size still grow its heap).
- sac: seconds per full frozen-encoder SAC update on pixels (shift, two encoder passes,
  critic, actor, alpha, target), examples/bench_sac.rs --pixels vs eval/bench/sac_torch.py.
- sac-features: the same update on cached features (the feature cache of sac/mini.toml: no
  shift, no encoder), examples/bench_sac.rs vs eval/bench/sac_torch.py --features.
- e2e: seconds per agent step of `lfs train` after the seed frames (docs/design.md §7: sample
  B transitions, one LFS update on them and B frame-mask candidates, then one SAC update on
  pixels encoded by the updated encoder), examples/bench_e2e.rs vs eval/bench/e2e_torch.py.
  Besides the whole step, rows for its two halves: the LFS update, and the SAC half (shift,
  two encoder passes, update) split by kind of step: even agent steps also update the actor,
  alpha and the target critic, odd ones the critic alone.
- drqv2: seconds per DrQ-v2 update as `lfs train` runs it with `[agent] kind = "drqv2"` (shift,
  the encoder's pass over obs with its tape and over next obs without, critic, actor, target,
  the encoder's step on the critic's gradient; docs/design.md §13), examples/bench_drqv2.rs vs
  eval/bench/drqv2_torch.py --bench (DrQ-v2's update, facebookresearch/drqv2 @c0c650b).
- taco: the same for TACO's update (DrQ-v2's, then its loss's on three more encodings of the
  batch), examples/bench_drqv2.rs --taco vs eval/bench/drqv2_torch.py --bench --taco.
- encoder: the paper's encoder's forward and forward+backward, examples/bench_conv.rs (`ops`:
  Encoder::forward under candle's autograd, `tape`: the pre-trainer's own calls) vs
  eval/bench/encoder_torch.py (plan entries batch:repeats inside each process).

Each (repeat, batch) runs candle then torch as fresh processes; both use every core
(torch.set_num_threads = os.cpu_count(); candle's rayon default), or --threads each (candle:
RAYON_NUM_THREADS). Prints the CPU (ratios differ between CPUs) and a Markdown table for
BENCHMARKS.md, and writes every time and the CPU (`cpu`) to --out. Plain Python 3 (no
packages), so it runs without the torch venv; without torch it reports candle alone.
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


def run(cmd, env=None):
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def commands(suite, batch, n, torch_python, threads):
    """(candle command, torch command) for one batch size."""
    if suite in ("pretrain", "sac", "sac-features", "e2e", "drqv2", "taco"):
        args = ["--batch", str(batch), "--updates", str(n), "--warmup", "2"]
        bench = "drqv2" if suite == "taco" else suite.split("-")[0]
        candle_extra = {"sac": ["--pixels"], "taco": ["--taco"]}.get(suite, [])
        torch_extra = {"sac-features": ["--features"], "drqv2": ["--bench"], "taco": ["--bench", "--taco"]}.get(suite, [])
        return ([os.path.join(ROOT, f"target/release/examples/bench_{bench}"), *args, *candle_extra],
                [torch_python, f"eval/bench/{bench}_torch.py", *args, *torch_extra, "--threads", str(threads)])
    args = ["--batch", str(batch), "--repeats", str(n)]
    return ([os.path.join(ROOT, "target/release/examples/bench_conv"), *args, "--no-stock"],
            [torch_python, "eval/bench/encoder_torch.py", *args, "--threads", str(threads)])


# The e2e suite's rows, in table order: the whole step, then its parts (see the docstring).
E2E_WORKLOADS = ["step", "step: LFS update", "step: SAC, even step (critic, actor, alpha, target)",
                 "step: SAC, odd step (critic)"]


def records(r):
    """[(impl, workload, seconds)] of one JSON line from any suite."""
    if "aux_seconds" in r:  # e2e
        sac = E2E_WORKLOADS[2] if r["actor_update"] else E2E_WORKLOADS[3]
        return [(r["impl"], E2E_WORKLOADS[0], r["update_seconds"]), (r["impl"], E2E_WORKLOADS[1], r["aux_seconds"]),
                (r["impl"], sac, r["sac_seconds"])]
    return [(r["impl"], r.get("workload", "update"), r.get("seconds", r.get("update_seconds")))]


def cpu_description():
    """The CPU the ratios were measured on, from /proc/cpuinfo (Linux; elsewhere the platform's
    word): vendor, family, model and name, logical CPUs, and the vector extensions that decide
    which kernels run on either side. Ratios differ between CPUs (BENCHMARKS.md, "On a Zen 3
    without AVX-512")."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return {"name": platform.processor() or platform.machine()}
    flags = set(fields.get("flags", "").split())
    vector = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return {"vendor": fields.get("vendor_id"), "family": fields.get("cpu family"), "model": fields.get("model"),
            "name": fields.get("model name"), "logical_cpus": os.cpu_count(), "vector": vector}


def cpu_line(cpu):
    """One line of `cpu_description`'s record, for the log above the table."""
    if "family" not in cpu:
        return cpu["name"]
    vector = " ".join(cpu["vector"]) or "none of AVX2, FMA, AVX-512"
    return (f"{cpu['name']} (family {cpu['family']}, model {cpu['model']}), "
            f"{cpu['logical_cpus']} logical CPUs, vector extensions: {vector}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--suite", choices=["pretrain", "encoder", "sac", "sac-features", "e2e", "drqv2", "taco"],
                   default="pretrain")
    p.add_argument("--torch-python", default=os.path.join(ROOT, ".venv-bench/bin/python"))
    p.add_argument("--plan", default="32:4,128:3,512:2", help="batch:n,... (n: timed updates or repeats)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds (>= 3 for a ratio to quote)")
    p.add_argument("--out", default=None, help="default bench-out/<suite>.json")
    p.add_argument("--threads", type=int, default=0, help="threads of each side (0: every core, candle's default)")
    a = p.parse_args()
    out_path = a.out or os.path.join(ROOT, f"bench-out/{a.suite}.json")
    plan = [tuple(int(x) for x in item.split(":")) for item in a.plan.split(",")]
    threads = a.threads or os.cpu_count() or 1
    candle_env = {**os.environ, "RAYON_NUM_THREADS": str(threads)} if a.threads else None
    has_torch = os.path.exists(a.torch_python) and subprocess.run(
        [a.torch_python, "-c", "import torch"], capture_output=True).returncode == 0
    if not has_torch:
        print(f"NOTE: no torch at {a.torch_python}; timing candle only", file=sys.stderr)
    times = {}  # (impl, workload, batch) -> [seconds]
    by_round = {}  # (impl, workload, batch) -> {repeat: [seconds]}: the same-round ratios
    gflop = {}  # (workload, batch) -> GFLOP of the work (encoder suite: from the reported GFLOP/s)
    for rep in range(a.repeats):
        for batch, n in plan:
            candle_cmd, torch_cmd = commands(a.suite, batch, n, a.torch_python, threads)
            t0 = time.time()
            rows = run(candle_cmd, candle_env) + (run(torch_cmd) if has_torch else [])
            for r in rows:
                for imp, workload, secs in records(r):
                    times.setdefault((imp, workload, batch), []).append(secs)
                    by_round.setdefault((imp, workload, batch), {}).setdefault(rep, []).append(secs)
                    if "gflops" in r:
                        gflop[(workload, batch)] = r["gflops"] * secs
            print(f"repeat {rep + 1}/{a.repeats} batch {batch}: {time.time() - t0:.0f} s", file=sys.stderr)
    result = {"suite": a.suite, "threads": threads, "machine": platform.processor() or platform.machine(),
              "cpu": cpu_description(),
              "plan": a.plan, "repeats": a.repeats,
              "seconds": {f"{k[0]}/{k[1]}@{k[2]}": v for k, v in times.items()},
              "seconds_by_repeat": {f"{k[0]}/{k[1]}@{k[2]}": [v.get(r, []) for r in range(a.repeats)]
                                    for k, v in by_round.items()}}
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)

    med = {k: statistics.median(v) for k, v in times.items()}
    # Each side's median per repeat (its spread), and the ratio within each repeat: the table's
    # ratio is the median of those same-round ratios, never one side's pooled median against
    # the other's.
    round_med = {k: [statistics.median(v[r]) for r in sorted(v)] for k, v in by_round.items()}
    spread = lambda k: (f" [{min(round_med[k]):.4f}–{max(round_med[k]):.4f}]"
                        if len(round_med.get(k, [])) > 1 else "")

    def ratios(imp, workload, batch):
        c, t = by_round.get((imp, workload, batch), {}), by_round.get(("torch", workload, batch), {})
        return [statistics.median(c[r]) / statistics.median(t[r]) for r in sorted(c) if r in t]
    candle_impls = sorted({k[0] for k in times if k[0] != "torch"})
    workloads = sorted({k[1] for k in times}, key=lambda w: (E2E_WORKLOADS.index(w) if w in E2E_WORKLOADS else -1, w))
    rate = lambda imp, w, b: f" ({gflop[(w, b)] / med[(imp, w, b)]:.0f} GFLOP/s)" if (w, b) in gflop else ""
    head = ("| workload | batch | torch s (n) [per-repeat medians] | "
            + " | ".join(f"{i} s (n) [per-repeat medians] | {i}/torch, median of same-repeat ratios (each)"
                         for i in candle_impls) + " |")
    print(f"cpu: {cpu_line(result['cpu'])}; {threads} threads each side")
    print(head)
    print("|" + "---|" * (3 + 2 * len(candle_impls)))
    for workload in workloads:
        for batch, _ in plan:
            t = med.get(("torch", workload, batch), float("nan"))
            n_t = len(times.get(("torch", workload, batch), []))
            cells = [workload, str(batch),
                     f"{t:.4f} ({n_t}){spread(('torch', workload, batch))}{rate('torch', workload, batch) if n_t else ''}"]
            for i in candle_impls:
                c = med.get((i, workload, batch), float("nan"))
                rs = ratios(i, workload, batch)
                ratio = (f"**{statistics.median(rs):.2f}x** ({', '.join(f'{r:.2f}' for r in rs)})" if rs else "-")
                cells += [f"{c:.4f} ({len(times.get((i, workload, batch), []))}){spread((i, workload, batch))}"
                          f"{rate(i, workload, batch)}", ratio]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
