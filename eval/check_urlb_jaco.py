"""Our Jaco reach tasks against URLB's own: the worker's `jaco_reach_*` tasks (python/dmc_worker.py)
beside URLB's `MTReach` (custom_dmc_tasks/jaco.py of a url_benchmark checkout), both from the
same seed and the same random actions, compared frame by frame and reward by reward.

    .venv/bin/python eval/check_urlb_jaco.py PATH/TO/url_benchmark --seeds 1 7

URLB's module is imported from the checkout given (nothing of it is in this repository); its
`make(task, 'pixels', seed)` is driven as URLB's dmc.py drives it for pixels: front_close frames,
action repeat 2 (rewards summed), actions in [-1, 1] through dm_control's action_scale.Wrapper.
Prints one line per task and seed; exits 1 if any frame or reward differs.
"""

import argparse
import importlib.util
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import dmc_worker  # noqa: E402


def load_urlb_jaco(checkout):
    path = os.path.join(checkout, "custom_dmc_tasks", "jaco.py")
    spec = importlib.util.spec_from_file_location("urlb_jaco", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def urlb_frame(time_step):
    return np.asarray(time_step.observation["front_close"]).reshape(84, 84, 3)


def compare(urlb, task, seed):
    from dm_control.suite.wrappers import action_scale

    ours = dmc_worker.DmcTask("jaco_" + task)
    theirs = action_scale.Wrapper(urlb.make(task, "pixels", seed), minimum=-1.0, maximum=1.0)
    frame = ours.reset(seed)[4]
    ts = theirs.reset()
    frames_equal, rewards_equal, steps = int(np.array_equal(frame, urlb_frame(ts))), 0, 0
    returns = [0.0, 0.0]
    rng = np.random.default_rng(seed)
    while True:
        action = rng.uniform(-1.0, 1.0, ours.action_dim).astype(np.float32)
        reward, _, last, _, frame, _ = ours.step(action)
        their_reward = 0.0
        for _ in range(2):
            ts = theirs.step(action.astype(np.float64))
            their_reward += ts.reward or 0.0
            if ts.last():
                break
        steps += 1
        frames_equal += int(np.array_equal(frame, urlb_frame(ts)))
        rewards_equal += int(reward == their_reward)
        returns[0] += reward
        returns[1] += their_reward
        if last or ts.last():
            break
    same = frames_equal == steps + 1 and rewards_equal == steps and last and ts.last()
    print(
        f"jaco_{task} seed {seed}: {steps} agent steps, frames equal {frames_equal}/{steps + 1}, "
        f"rewards equal {rewards_equal}/{steps}, return {returns[0]:.6g} (URLB {returns[1]:.6g})",
        flush=True,
    )
    return same


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url_benchmark", help="a checkout of rll-research/url_benchmark")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    urlb = load_urlb_jaco(args.url_benchmark)
    ok = all(compare(urlb, task, seed) for task in dmc_worker.JACO_TARGETS for seed in args.seeds)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
