"""dm_control driven directly, the way DrQ-v2's dmc.py does it: the reference for the parity test.

Reads a JSON list of episodes on stdin:

    [{"task": "walker_run", "seed": 3, "actions": [[...], ...], "action_repeat": 2,
      "render_quality": "default"}, ...]

and writes, for each episode, a fresh environment's rewards, discounts, last flags, 84x84
RGB frames (hex, reset frame first), states (hex of little-endian float64, reset state first:
every observation that is not an image, flattened with numpy and concatenated in the
observation dict's order) and the state's fields (`[key, shape]` per observation, in that
order) as JSON on stdout. Nothing here is shared with
python/dmc_worker.py, not even the task table: a task name is resolved against dm_control's own
lists (`suite.ALL_TASKS`, `manipulation.ALL`) or, for URLB's Jaco reach tasks, URLB's recipe
(`jaco_env`), the camera is DrQ-v2's rule for the suite (camera 0; 2 for quadruped) and the one
image observation of a composer task. Each episode
gets a freshly loaded environment seeded through `load`, actions go through dm_control's own
`action_scale.Wrapper`, and pixels come from dm_control's `pixels.Wrapper` (suite), which keeps
the task's own observations beside the pixels.
"""

import json
import sys

import numpy as np
from dm_control import composer, manipulation, suite
from dm_control.suite.wrappers import action_scale, pixels

# URLB's Jaco reach tasks (rll-research/url_benchmark @bb98f0c, custom_dmc_tasks/jaco.py `TASKS`):
# the Duplo brick's spawn box, one point each.
URLB_JACO = {
    "jaco_reach_top_left": (-0.09, 0.09, 0.001),
    "jaco_reach_top_right": (0.09, 0.09, 0.001),
    "jaco_reach_bottom_left": (-0.09, -0.09, 0.001),
    "jaco_reach_bottom_right": (0.09, -0.09, 0.001),
}


def jaco_env(point, seed):
    """URLB's `make(task, 'pixels', seed)`: dm_control's Reach with VISION observations, a Duplo
    brick spawned at `point`, the hand's spawn box and arm offset of reach_duplo, 10 s episodes."""
    from dm_control.entities import props
    from dm_control.manipulation import reach
    from dm_control.manipulation.shared import arenas, constants, observations, robots, workspaces

    obs = observations.VISION
    workspace = reach._ReachWorkspace(
        target_bbox=workspaces.BoundingBox(lower=point, upper=point),
        tcp_bbox=workspaces.BoundingBox(lower=(-0.1, -0.1, 0.2), upper=(0.1, 0.1, 0.4)),
        arm_offset=robots.ARM_OFFSET,
    )
    task = reach.Reach(
        arena=arenas.Standard(),
        arm=robots.make_arm(obs_settings=obs),
        hand=robots.make_hand(obs_settings=obs),
        prop=props.Duplo(observable_options=observations.make_options(obs, observations.FREEPROP_OBSERVABLES)),
        obs_settings=obs,
        workspace=workspace,
        control_timestep=constants.CONTROL_TIMESTEP,
    )
    return composer.Environment(task, time_limit=10.0, random_state=seed)


def resolve(task):
    """(domain, task, camera) from dm_control's own task lists; ("manipulation", name, None) or
    ("jaco", name, None) for a composer task."""
    if task in URLB_JACO:
        return "jaco", task, None
    for domain, name in suite.ALL_TASKS:
        if f"{domain}_{name}" == task:
            return domain, name, 2 if domain == "quadruped" else 0
    if f"{task}_vision" in manipulation.ALL:
        return "manipulation", f"{task}_vision", None
    raise ValueError(f"{task!r} is neither a dm_control suite task nor a manipulation task")


def make_env(task, seed, render_quality, render=True):
    """The task's environment with actions in [-1, 1]; `render=False` skips the pixels
    wrapper of suite tasks (returns alone need no frames)."""
    domain, name, camera = resolve(task)
    if domain in ("manipulation", "jaco"):
        env = jaco_env(URLB_JACO[name], seed) if domain == "jaco" else manipulation.load(name, seed=seed)
        images = [k for k, v in env.observation_spec().items() if v.dtype == np.uint8]
        assert len(images) == 1, f"{name}: expected one image observation, got {images}"
        pixels_key = images[0]
    else:
        env = suite.load(domain, name, task_kwargs={"random": seed})
        if render_quality == "fast":
            env.physics.model.vis.quality.shadowsize = 0
            env.physics.model.vis.quality.offsamples = 0
        pixels_key = None
        if render:
            env = pixels.Wrapper(env, pixels_only=False,
                                 render_kwargs={"height": 84, "width": 84, "camera_id": camera})
            pixels_key = "pixels"
    env = action_scale.Wrapper(env, minimum=-1.0, maximum=+1.0)
    return env, pixels_key


def frame_of(time_step, key):
    frame = time_step.observation[key]
    # composer adds a leading buffer dimension of 1
    return np.asarray(frame).reshape(84, 84, 3)


def state_fields(env):
    """[key, shape] of every observation that is not an image (uint8 in the spec), in order."""
    return [[k, list(v.shape)] for k, v in env.observation_spec().items() if v.dtype != np.uint8]


def state_of(time_step, fields):
    parts = [np.asarray(time_step.observation[k], dtype=np.float64).reshape(-1) for k, _ in fields]
    return np.concatenate(parts).astype("<f8").tobytes().hex()


def run_episode(ep):
    if ep.get("render_quality", "default") != "default" and resolve(ep["task"])[0] in ("manipulation", "jaco"):
        raise ValueError("the reference renders composer tasks at default quality only")
    env, key = make_env(ep["task"], ep["seed"], ep.get("render_quality", "default"))
    repeat = ep.get("action_repeat", 2)
    fields = state_fields(env)
    ts = env.reset()
    out = {"rewards": [], "discounts": [], "lasts": [], "frames": [frame_of(ts, key).tobytes().hex()],
           "states": [state_of(ts, fields)], "state_fields": fields}
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
        out["states"].append(state_of(ts, fields))
        if ts.last():
            break
    return out


def main():
    episodes = json.load(sys.stdin)
    json.dump([run_episode(ep) for ep in episodes], sys.stdout)


if __name__ == "__main__":
    main()
