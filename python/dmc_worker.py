"""One DeepMind Control task behind a length-prefixed binary protocol on stdin/stdout.

`lfs` (src/env/dmc.rs) spawns one of these per environment:

    python -c <this file> --task walker_run --action-repeat 2 --render-quality default [--episode-frames N]

Every message, both ways, is `u32 length` (little-endian) followed by `length` bytes whose
first byte says what it is:

    requests   b'R' u64 seed               reset the episode with this seed
               b'S' f32 * action_dim       one agent step (action in [-1, 1])
               b'N'                        poison the physics state (tests: a real PhysicsError)
               b'Q'                        quit
    replies    b'H' utf-8 JSON             hello, sent once the task is loaded; its
                                           "state_names" name the state values below
               b'O' f64 reward, f64 discount, u8 last, u32 env_steps, 84*84*3 uint8 RGB (HWC),
                    f64 * len(state_names) state
               b'P'                        the physics state was poisoned
               b'E' utf-8 message          the request failed; the process stays usable

The task is loaded the way DrQ-v2's dmc.py does it (the published numbers' protocol): suite
tasks through `suite.load`, reach_duplo through `manipulation.load('reach_duplo_vision')`, the
four Jaco reach tasks as URLB builds them (see `load_jaco`), actions mapped from [-1, 1] onto the action spec exactly like `action_scale.Wrapper`, rewards
summed over the action repeat. eval/dmc_reference.py drives dm_control that way directly, and
the parity test checks both agree.

The state of an `O` reply is the task's physical state as state-based agents see it: the time
step's observation dict (of the reset, or of the last env step of the action repeat) with its
image observations left out, each entry flattened in C order and concatenated in the dict's
order. Its names in the hello: a scalar entry is its key (`height`), an entry of n values is
`key[0]` .. `key[n-1]` (composer's leading buffer dimension of 1 included in the flattening).

`--episode-frames N` ends every episode after at most N env steps, the way the task's own time
limit ends it (dm_control's truncation: the last step keeps its discount); the task's own limit
still ends it first when shorter.

`DmcTask` is importable (eval/bench_env.py runs it in-process to measure what the protocol
costs).
"""

import argparse
import json
import os
import struct
import sys

# The task name lfs uses -> (domain, task, camera). reach_duplo and the Jaco tasks are composer
# tasks.
TASKS = {
    "reach_duplo": ("manipulation", "reach_duplo_vision", "front_close"),
    "jaco_reach_top_left": ("jaco", "reach_top_left", "front_close"),
    "jaco_reach_top_right": ("jaco", "reach_top_right", "front_close"),
    "jaco_reach_bottom_left": ("jaco", "reach_bottom_left", "front_close"),
    "jaco_reach_bottom_right": ("jaco", "reach_bottom_right", "front_close"),
    "cartpole_swingup": ("cartpole", "swingup", 0),
    "walker_run": ("walker", "run", 0),
    "reacher_hard": ("reacher", "hard", 0),
    "cheetah_run": ("cheetah", "run", 0),
    "walker_stand": ("walker", "stand", 0),
    "ball_in_cup_catch": ("ball_in_cup", "catch", 0),
    "walker_walk": ("walker", "walk", 0),
    "finger_spin": ("finger", "spin", 0),
}
RENDER_QUALITIES = ("default", "fast")

# URLB's Jaco reach tasks (rll-research/url_benchmark @bb98f0c, custom_dmc_tasks/jaco.py): the
# brick's (x, y); it rests at z = 0.001 with a uniformly random rotation about z.
JACO_TARGETS = {
    "reach_top_left": (-0.09, 0.09),
    "reach_top_right": (0.09, 0.09),
    "reach_bottom_left": (-0.09, -0.09),
    "reach_bottom_right": (0.09, -0.09),
}


def load_jaco(task, seed):
    """One of URLB's Jaco reach tasks: dm_control's `reach_duplo_vision` with the brick's spawn box
    shrunk to one point, in a 10 s composer environment (URLB's `make` for pixels)."""
    from dm_control import composer
    from dm_control.entities import props
    from dm_control.manipulation import reach
    from dm_control.manipulation.shared import arenas, constants, observations, robots, workspaces

    x, y = JACO_TARGETS[task]
    z = reach._PROP_Z_OFFSET
    workspace = reach._DUPLO_WORKSPACE._replace(
        target_bbox=workspaces.BoundingBox(lower=(x, y, z), upper=(x, y, z))
    )
    settings = observations.VISION
    brick = props.Duplo(
        observable_options=observations.make_options(settings, observations.FREEPROP_OBSERVABLES)
    )
    reach_task = reach.Reach(
        arena=arenas.Standard(),
        arm=robots.make_arm(obs_settings=settings),
        hand=robots.make_hand(obs_settings=settings),
        prop=brick,
        obs_settings=settings,
        workspace=workspace,
        control_timestep=constants.CONTROL_TIMESTEP,
    )
    # 10 s: manipulation.load's and URLB's time limit (250 control steps of 40 ms).
    return composer.Environment(reach_task, time_limit=10.0, random_state=seed)


class DmcTask:
    """A dm_control task with action repeat, [-1, 1] actions, 84x84 camera frames and the flattened
    state (`reset` and `step` return reward, discount, last, env_steps, frame, state bytes;
    `state_names` is known from the first reset on)."""

    def __init__(self, task, action_repeat=2, render_quality="default", size=84, episode_frames=0):
        import numpy as np

        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
        if render_quality not in RENDER_QUALITIES:
            raise ValueError(f"unknown render quality {render_quality!r}")
        if action_repeat < 1:
            raise ValueError(f"action repeat must be >= 1, got {action_repeat}")
        if episode_frames < 0:
            raise ValueError(f"episode frames must be >= 0 (0: the task's own limit), got {episode_frames}")
        self._np = np
        self.name = task
        self.domain, self.task, self.camera = TASKS[task]
        self.action_repeat = action_repeat
        self.render_quality = render_quality
        self.size = size
        # 0: the task's own time limit alone.
        self.episode_frames = episode_frames
        self._frames = 0
        if self.domain in ("manipulation", "jaco"):
            if self.domain == "jaco":
                self.env = load_jaco(self.task, seed=0)
            else:
                from dm_control import manipulation

                self.env = manipulation.load(self.task, seed=0)
            # The camera observable would render at every control step; the frame is rendered
            # once per agent step below instead (the same pixels: same camera, same state).
            self.env.task.observables[self.camera].enabled = False
            self._random = self.env.random_state
        else:
            from dm_control import suite

            self.env = suite.load(self.domain, self.task, task_kwargs={"random": 0})
            self._random = self.env.task.random
        spec = self.env.action_spec()
        # action_scale.Wrapper's map from [-1, 1] onto the spec, op for op, so that the same
        # float32 action gives bit-identical float64 controls.
        self._orig_dtype = spec.dtype
        self._orig_minimum = spec.minimum
        self._scale = (spec.maximum - spec.minimum) / (1.0 - (-1.0))
        self.action_dim = int(spec.shape[0])
        self._needs_reset = True
        # The observation keys that make up the state, and their flattened names; set from the
        # first reset's time step (see `_state`).
        self._state_keys = None
        self.state_names = None

    def hello(self):
        import importlib.metadata

        import mujoco

        return {
            "task": self.name,
            "domain": self.domain,
            "camera": str(self.camera),
            "action_dim": self.action_dim,
            "action_repeat": self.action_repeat,
            "render_quality": self.render_quality,
            "episode_frames": self.episode_frames or None,
            "height": self.size,
            "width": self.size,
            "control_timestep": float(self.env.control_timestep()),
            "mujoco": mujoco.__version__,
            # dm_control has no __version__; its distribution metadata has the version.
            "dm_control": importlib.metadata.version("dm-control"),
            "mujoco_gl": os.environ.get("MUJOCO_GL", ""),
            "state_names": self.state_names,
        }

    def _apply_render_quality(self):
        # Takes effect when the render context is made, which happens on the first render of a
        # physics; composer recompiles the physics at every reset, so this runs after each one.
        if self.render_quality == "fast":
            quality = self.env.physics.model.vis.quality
            quality.shadowsize = 0
            quality.offsamples = 0

    def frame(self):
        return self.env.physics.render(self.size, self.size, camera_id=self.camera)

    def _state(self, observation):
        """The non-image observations of a time step, flattened in C order and concatenated
        in the dict's order, as little-endian float64 bytes."""
        np = self._np
        if self._state_keys is None:
            keys, names = [], []
            for key, value in observation.items():
                value = np.asarray(value)
                # An image: (h, w, 3) uint8, with composer's leading buffer dimension if any.
                if value.dtype == np.uint8 and value.ndim >= 3:
                    continue
                keys.append(key)
                if value.ndim == 0:
                    names.append(key)
                else:
                    names.extend(f"{key}[{i}]" for i in range(value.size))
            self._state_keys, self.state_names = keys, names
        values = [np.asarray(observation[key], dtype="<f8").ravel() for key in self._state_keys]
        state = np.concatenate(values) if values else np.zeros(0, dtype="<f8")
        if state.size != len(self.state_names):
            raise RuntimeError(
                f"the observation has {state.size} state values, the hello named {len(self.state_names)}"
            )
        return state.tobytes()

    def reset(self, seed):
        # Re-seeding the task's own generator in place is what a fresh `load(..., seed)` does:
        # eval/dmc_reference.py builds a fresh environment per episode and the parity test
        # checks they agree.
        self._random.seed(seed)
        ts = self.env.reset()
        self._apply_render_quality()
        self._needs_reset = False
        self._frames = 0
        return 0.0, 1.0, False, 0, self.frame(), self._state(ts.observation)

    def step(self, action):
        np = self._np
        if self._needs_reset:
            raise RuntimeError("step before reset (or after the last step of an episode)")
        action = np.asarray(action, dtype=np.float32)
        if action.shape != (self.action_dim,):
            raise ValueError(f"action has shape {action.shape}, expected ({self.action_dim},)")
        if not np.all(np.isfinite(action)) or np.any(np.abs(action) > 1.0):
            raise ValueError(f"action outside [-1, 1]: {action.tolist()}")
        # DrQ-v2's ActionDTypeWrapper (float32 -> spec dtype) then action_scale.Wrapper.
        action = action.astype(np.float64)
        action = (self._orig_minimum + self._scale * (action - (-1.0))).astype(self._orig_dtype, copy=False)
        reward, discount, last, env_steps = 0.0, 1.0, False, 0
        try:
            for _ in range(self.action_repeat):
                ts = self.env.step(action)
                env_steps += 1
                self._frames += 1
                reward += ts.reward or 0.0
                discount *= ts.discount
                if ts.last() or self._frames == self.episode_frames:
                    last = True
                    break
        except BaseException:
            self._needs_reset = True
            raise
        self._needs_reset = last
        return reward, discount, last, env_steps, self.frame(), self._state(ts.observation)

    def poison(self):
        """Make the physics state invalid so that the next step raises dm_control's PhysicsError."""
        self.env.physics.data.qpos[:] = float("nan")


def _read_exact(stream, n):
    data = stream.read(n)
    if data is None or len(data) < n:
        return None
    return data


def _send(stream, payload):
    stream.write(struct.pack("<I", len(payload)))
    stream.write(payload)
    stream.flush()


def serve(args):
    # The protocol owns the real stdout; anything a library prints goes to stderr instead, where
    # lfs keeps the tail for its error messages.
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    proto_in = sys.stdin.buffer

    try:
        env = DmcTask(args.task, args.action_repeat, args.render_quality, args.size, args.episode_frames)
        # Render once so a broken OpenGL set-up fails at start-up, not in the first episode.
        env.reset(0)
    except Exception as exc:
        import traceback

        traceback.print_exc()
        print(f"dmc_worker: cannot load task {args.task}: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(3)
    _send(proto_out, b"H" + json.dumps(env.hello()).encode())

    action_fmt = f"<{env.action_dim}f"
    while True:
        header = _read_exact(proto_in, 4)
        if header is None:
            return  # lfs closed the pipe: nothing more to do
        (length,) = struct.unpack("<I", header)
        body = _read_exact(proto_in, length)
        if body is None or length == 0:
            print("dmc_worker: truncated request", file=sys.stderr)
            sys.exit(4)
        op = body[:1]
        try:
            if op == b"R":
                (seed,) = struct.unpack("<Q", body[1:9])
                result = env.reset(seed)
            elif op == b"S":
                if len(body) != 1 + 4 * env.action_dim:
                    raise ValueError(f"action has {(len(body) - 1) // 4} values, expected {env.action_dim}")
                result = env.step(struct.unpack(action_fmt, body[1:]))
            elif op == b"N":
                env.poison()
                _send(proto_out, b"P")
                continue
            elif op == b"Q":
                return
            else:
                raise ValueError(f"unknown request {op!r}")
        except Exception as exc:
            _send(proto_out, b"E" + f"{type(exc).__name__}: {exc}".encode())
            continue
        reward, discount, last, env_steps, frame, state = result
        _send(proto_out, b"O" + struct.pack("<ddBI", reward, discount, last, env_steps) + frame.tobytes() + state)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--action-repeat", type=int, default=2)
    parser.add_argument("--render-quality", default="default", choices=RENDER_QUALITIES)
    parser.add_argument("--size", type=int, default=84)
    parser.add_argument("--episode-frames", type=int, default=0)
    serve(parser.parse_args())


if __name__ == "__main__":
    main()
