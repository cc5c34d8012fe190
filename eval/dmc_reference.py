"""dm_control driven directly, the way DrQ-v2's dmc.py does it: the reference for the parity test.

Reads a JSON list of episodes on stdin:

    [{"task": "walker_run", "seed": 3, "actions": [[...], ...], "action_repeat": 2,
      "render_quality": "default"}, ...]

and writes, for each episode, a fresh environment's rewards, discounts, last flags and 84x84
RGB frames (hex, reset frame first) as JSON on stdout. Nothing here is shared with
eval/dmc_worker.py except the task table: each episode gets a freshly loaded environment seeded
through `load`, actions go through dm_control's own `action_scale.Wrapper`, and pixels come
from dm_control's `pixels.Wrapper` (suite) or the task's camera observation (reach_duplo).
"""

import json
import os
import sys

import numpy as np
from dm_control import manipulation, suite
from dm_control.suite.wrappers import action_scale, pixels

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmc_worker import TASKS  # noqa: E402  (the name -> domain/task/camera table only)


def make_env(task, seed, render_quality):
    domain, name, camera = TASKS[task]
    if domain == "manipulation":
        env = manipulation.load(name, seed=seed)
        pixels_key = camera
    else:
        env = suite.load(domain, name, task_kwargs={"random": seed})
        if render_quality == "fast":
            env.physics.model.vis.quality.shadowsize = 0
            env.physics.model.vis.quality.offsamples = 0
        env = pixels.Wrapper(env, pixels_only=True,
                             render_kwargs={"height": 84, "width": 84, "camera_id": camera})
        pixels_key = "pixels"
    env = action_scale.Wrapper(env, minimum=-1.0, maximum=+1.0)
    return env, pixels_key


def frame_of(time_step, key):
    frame = time_step.observation[key]
    # composer adds a leading buffer dimension of 1
    return np.asarray(frame).reshape(84, 84, 3)


def run_episode(ep):
    if ep.get("render_quality", "default") != "default" and TASKS[ep["task"]][0] == "manipulation":
        raise ValueError("the reference renders reach_duplo at default quality only")
    env, key = make_env(ep["task"], ep["seed"], ep.get("render_quality", "default"))
    repeat = ep.get("action_repeat", 2)
    ts = env.reset()
    out = {"rewards": [], "discounts": [], "lasts": [], "frames": [frame_of(ts, key).tobytes().hex()]}
    for action in ep["actions"]:
        # DrQ-v2's ActionDTypeWrapper: the agent's float32 action, cast to the spec's float64.
        action = np.asarray(action, dtype=np.float32).astype(np.float64)
        reward, discount = 0.0, 1.0
        for _ in range(repeat):
            ts = env.step(action)
            reward += ts.reward or 0.0
            discount *= ts.discount
            if ts.last():
                break
        out["rewards"].append(reward)
        out["discounts"].append(discount)
        out["lasts"].append(bool(ts.last()))
        out["frames"].append(frame_of(ts, key).tobytes().hex())
        if ts.last():
            break
    return out


def main():
    episodes = json.load(sys.stdin)
    json.dump([run_episode(ep) for ep in episodes], sys.stdout)


if __name__ == "__main__":
    main()
