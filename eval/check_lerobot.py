"""Open an `lfs ingest` dataset with LeRobot itself (not run by CI: LeRobot needs torch).

    python -m venv /tmp/lerobot-venv && /tmp/lerobot-venv/bin/pip install lerobot==0.4.4
    HF_HUB_OFFLINE=1 /tmp/lerobot-venv/bin/python eval/check_lerobot.py DATASET_DIR
"""

import json
import sys

from lerobot.datasets.lerobot_dataset import LeRobotDataset


def main(root: str) -> None:
    ds = LeRobotDataset(repo_id="local/lfs-dataset", root=root)
    first, last = ds[0], ds[len(ds) - 1]
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
