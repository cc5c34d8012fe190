"""Open an `lfs ingest` dataset with LeRobot itself (not run by CI: LeRobot needs torch).

    make check-lerobot     # the embedded sample, in its own venv (.venv-lerobot)
    HF_HUB_OFFLINE=1 .venv-lerobot/bin/python eval/check_lerobot.py DATASET_DIR

Fails (exit 1) unless LeRobot loads every frame and episode that meta/info.json declares.
Measured with lerobot 0.4.4: the sample's 450 frames, 9 episodes, 3 tasks, images (3, 84, 84).
"""

import json
import sys

from lerobot.datasets.lerobot_dataset import LeRobotDataset


def main(root: str) -> None:
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
        "fps": ds.fps,
        "tasks": {str(t): int(i) for t, i in ds.meta.tasks["task_index"].items()},
        "image_shape": list(first["observation.image"].shape),
        "image_range": [float(first["observation.image"].min()), float(first["observation.image"].max())],
        "first_task": first["task"],
        "last": {"episode_index": int(last["episode_index"]), "frame_index": int(last["frame_index"]), "task": last["task"]},
        "stats_keys": sorted(ds.meta.stats),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
