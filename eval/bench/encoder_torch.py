"""The paper's encoder in PyTorch (CPU), the reference for `make bench-encoder`.

Conv(9→32, 3×3, stride 2) ReLU, then 3 × [Conv(32→32, 3×3) ReLU], input divided by 255 inside
(as lfs's encoder), orthogonal init: pretrain_torch.py's Encoder without its projector. Workloads as examples/bench_conv.rs: `forward` under
torch.no_grad(), and `forward_backward` = forward, loss Σ h·r, backward to the 8 parameters.
One untimed call of each first; medians of --repeats. One JSON line per (batch, workload).
With --autocast-bf16, also `forward_bf16`: the forward under torch.autocast("cpu", bfloat16),
PyTorch's bf16 beside examples/bench_bf16.rs's (BENCHMARKS.md, "A bf16 encoder forward").

    .venv-bench/bin/python eval/bench/encoder_torch.py --batch 32,128 --repeats 3 --threads 2
"""
import argparse
import json
import statistics
import time

import torch

from pretrain_torch import Encoder, weight_init

# Forward FLOPs per sample: 2 · o · (c·9) · (ho·wo) per layer (as examples/bench_conv.rs).
LAYERS = [(9, 41), (32, 39), (32, 37), (32, 35)]


def gflop(batch, workload):
    per_layer = [2 * 32 * c * 9 * s * s * batch / 1e9 for c, s in LAYERS]
    fwd = sum(per_layer)
    return 3 * fwd - per_layer[0] if workload == "forward_backward" else fwd  # no input grad at layer 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", default="32,128")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default)")
    p.add_argument("--autocast-bf16", action="store_true", help="also time the forward under bf16 autocast")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    enc = Encoder()  # pretrain_torch.py's: the same convnet, orthogonal init
    enc.apply(weight_init)
    convnet = enc.convnet

    def encode(obs):
        return convnet(obs / 255.0).flatten(1)

    for batch in [int(b) for b in a.batch.split(",")]:
        obs = torch.randint(0, 256, (batch, 9, 84, 84)).float()
        r = torch.rand(batch, 32 * 35 * 35) * 2 - 1

        def forward():
            with torch.no_grad():
                encode(obs)

        def forward_backward():
            convnet.zero_grad(set_to_none=True)
            (encode(obs) * r).sum().backward()
            assert all(p.grad is not None for p in convnet.parameters())

        def forward_bf16():
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                encode(obs)

        workloads = [("forward", forward), ("forward_backward", forward_backward)]
        if a.autocast_bf16:
            workloads.append(("forward_bf16", forward_bf16))
        for workload, fn in workloads:
            fn()  # warm-up
            times = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            secs = statistics.median(times)
            print(json.dumps({"impl": "torch", "batch": batch, "workload": workload, "seconds": round(secs, 4),
                              "gflops": round(gflop(batch, workload) / secs, 1), "repeats": a.repeats,
                              "threads": torch.get_num_threads()}), flush=True)


if __name__ == "__main__":
    main()
