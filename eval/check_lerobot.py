"""Open an `lfs ingest` dataset with LeRobot itself (not run by CI: LeRobot needs torch).

    make check-lerobot     # the embedded sample twice, in its own venv (.venv-lerobot)
    HF_HUB_OFFLINE=1 .venv-lerobot/bin/python eval/check_lerobot.py DATASET_DIR [--fps N]

Fails (exit 1) unless LeRobot loads every frame and episode that meta/info.json declares.
Measured with lerobot 0.4.4: the sample's 450 frames, 9 episodes, 3 tasks, images (3, 84, 84).

Frame rates: LeRobot reads one per dataset (meta/info.json `fps`) and turns time queries
(`delta_timestamps`) into frame offsets with it.
  without --fps: the sample's sources are at 12.5, 20 and 50 fps; `lfs ingest` keeps each
    source's frames, and info.json's fps is null: LeRobot reports no rate and refuses a
    time query, instead of answering it with a rate two of the three tasks do not have;
  --fps N (a dataset made with `lfs ingest --fps N`): LeRobot's rate is N, every timestamp is
    frame_index / N, and a query 2/N s back returns the frame two before, within each episode.
"""

import json
import sys

import torch

from lerobot.datasets.lerobot_dataset import LeRobotDataset


def check_rate(root: str, fps) -> dict:
    """What LeRobot makes of the dataset's frame rate (see the module's text)."""
    ds = LeRobotDataset(repo_id="local/lfs-dataset", root=root)
    back = {"observation.image": [-2 / (fps or 1), 0.0]}
    if fps is None:
        assert ds.fps is None, f"info.json's fps should be null for sources at several rates, LeRobot read {ds.fps}"
        try:
            LeRobotDataset(repo_id="local/lfs-dataset", root=root, delta_timestamps=back)
        except TypeError as e:
            return {"fps": None, "time_query": f"refused ({e})"}
        raise AssertionError("a time query on a dataset without one rate must be refused")
    assert ds.fps == fps, (ds.fps, fps)
    frame_index = torch.as_tensor(ds.hf_dataset["frame_index"]).double()
    timestamp = torch.as_tensor(ds.hf_dataset["timestamp"]).double()
    worst = float((timestamp - frame_index / fps).abs().max())
    assert worst < 1e-4, f"timestamps are not frame_index / {fps}: off by up to {worst} s"
    # LeRobot checks the query against its rate (check_delta_timestamps) and maps it to frames.
    queried = LeRobotDataset(repo_id="local/lfs-dataset", root=root, delta_timestamps=back)
    checked = 0
    for i in range(len(ds)):
        if int(ds[i]["frame_index"]) < 2:
            continue
        stack = queried[i]["observation.image"]
        assert torch.equal(stack[0], ds[i - 2]["observation.image"]), f"frame {i}: 2/{fps} s back is not frame {i - 2}"
        assert torch.equal(stack[1], ds[i]["observation.image"]), f"frame {i}"
        checked += 1
    return {"fps": ds.fps, "max_timestamp_error_s": worst, "time_queries_checked": checked}


def main(root: str, fps) -> None:
    ds = LeRobotDataset(repo_id="local/lfs-dataset", root=root)
    first, last = ds[0], ds[len(ds) - 1]
    # What LeRobot loaded must be what the dataset declares (meta/info.json, written by lfs).
    with open(f"{root}/meta/info.json") as f:
        info = json.load(f)
    assert len(ds) == info["total_frames"], (len(ds), info["total_frames"])
    assert ds.num_episodes == info["total_episodes"], (ds.num_episodes, info["total_episodes"])
    assert list(first["observation.image"].shape)[0] == 3, first["observation.image"].shape
    assert int(last["episode_index"]) == info["total_episodes"] - 1
    print(json.dumps({
        "frames": len(ds),
        "episodes": ds.num_episodes,
        "rate": check_rate(root, fps),
        "tasks": {str(t): int(i) for t, i in ds.meta.tasks["task_index"].items()},
        "image_shape": list(first["observation.image"].shape),
        "image_range": [float(first["observation.image"].min()), float(first["observation.image"].max())],
        "first_task": first["task"],
        "last": {"episode_index": int(last["episode_index"]), "frame_index": int(last["frame_index"]), "task": last["task"]},
        "stats_keys": sorted(ds.meta.stats),
    }))


if __name__ == "__main__":
    args = sys.argv[1:]
    fps = int(args[args.index("--fps") + 1]) if "--fps" in args else None
    main(args[0], fps)
