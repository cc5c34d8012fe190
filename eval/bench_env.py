"""dm_control in-process: the baseline of `make bench-env`.

Runs the worker's own `DmcTask` (python/dmc_worker.py) in this process, without the protocol,
so the Rust side can compare its pool against it in the same run:

    python eval/bench_env.py walker_run default     # then, per line on stdin: N
    -> per line on stdout: wall seconds and CPU seconds (all threads) taken by N agent steps
       (uniform random actions)

Episodes that end are reset (next seed), as the pool benchmark does.
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from dmc_worker import DmcTask  # noqa: E402


def main():
    task_name, quality = sys.argv[1], sys.argv[2]
    task = DmcTask(task_name, action_repeat=2, render_quality=quality)
    seed = 0
    task.reset(seed)
    rng = np.random.default_rng(0)
    print("ready", flush=True)
    for line in sys.stdin:
        steps = int(line)
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(steps):
            action = rng.uniform(-1.0, 1.0, task.action_dim).astype(np.float32)
            _, _, last, _, frame, _ = task.step(action)
            if last:
                seed += 1
                task.reset(seed)
        print(time.perf_counter() - start, time.process_time() - cpu_start, flush=True)


if __name__ == "__main__":
    main()
