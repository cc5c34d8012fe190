"""The uniform random policy's return on a DMControl task, with dm_control driven directly: the
floor the CI learning test compares SAC against (tests/sac.rs).

    .venv/bin/python eval/random_policy.py walker_stand --action-repeat 4 --episodes 10
    # {"task": "walker_stand", "action_repeat": 4, "returns": [...], "mean": ..., "std": ...}

Episode i uses dm_control's task seed 1000 + i and numpy's generator seeded with i; each action
is drawn uniformly from [-1, 1]^|A| and held for the action repeat, as `lfs eval` holds an
agent's action. Task names resolve through dm_control's own lists (eval/dmc_reference.py).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmc_reference import make_env  # noqa: E402  (dm_control's own loaders, no lfs code)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("task")
    parser.add_argument("--action-repeat", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args()
    returns = []
    for i in range(args.episodes):
        env, _ = make_env(args.task, 1000 + i, "fast", render=False)
        rng = np.random.default_rng(i)
        spec = env.action_spec()
        ts, total, k, action = env.reset(), 0.0, 0, None
        while not ts.last():
            if k % args.action_repeat == 0:
                action = rng.uniform(-1.0, 1.0, size=spec.shape)
            ts = env.step(action)
            total += ts.reward or 0.0
            k += 1
        returns.append(total)
    print(json.dumps({
        "task": args.task,
        "action_repeat": args.action_repeat,
        "returns": returns,
        "mean": float(np.mean(returns)),
        "std": float(np.std(returns)),
    }))


if __name__ == "__main__":
    main()
