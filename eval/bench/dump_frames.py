"""Dump an `lfs ingest` dataset's frames to .npy for eval/bench/contrastive_torch.py.

Independent of lfs: reads the LeRobot parquet with pyarrow and decodes the PNG frames with PIL.
Writes <out>/frames.npy, (num_frames, 3, 84, 84) uint8 in dataset order (channel-first, as
lfs's Episode.frames), and <out>/episodes.json: one {"episode_index", "task_index", "start",
"length"} per episode, frames start..start+length of frames.npy, with the episode's "actions"
and "rewards" (length - 1 each) when its sidecar records them (videos made by `lfs collect`:
eval/bench/drqv2_torch.py replays them).

    .venv/bin/python eval/bench/dump_frames.py <DATASET_DIR> <OUT_DIR>
"""

import glob
import io
import json
import os
import sys

import numpy as np
import pyarrow.parquet as pq
from PIL import Image


def main(root: str, out: str) -> None:
    table = pq.read_table(sorted(glob.glob(f"{root}/data/*/*.parquet")))
    rows = table.select(["episode_index", "frame_index", "task_index"]).to_pylist()
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["episode_index"], rows[i]["frame_index"]))
    images = table.column("observation.image")
    frames = np.stack(
        [np.asarray(Image.open(io.BytesIO(images[i].as_py()["bytes"])).convert("RGB")).transpose(2, 0, 1) for i in order]
    )  # (N, 3, H, W)
    episodes = []
    for pos, i in enumerate(order):
        ep = rows[i]["episode_index"]
        if not episodes or episodes[-1]["episode_index"] != ep:
            episodes.append({"episode_index": ep, "task_index": rows[i]["task_index"], "start": pos, "length": 0})
        assert rows[i]["frame_index"] == episodes[-1]["length"], "frames of an episode must be contiguous"
        episodes[-1]["length"] += 1
    sidecars = {}
    for path in sorted(glob.glob(f"{root}/meta/episodes/*/*.parquet")):
        meta = pq.read_table(path, columns=["episode_index", "sidecar"]).to_pylist()
        sidecars.update({m["episode_index"]: json.loads(m["sidecar"]) for m in meta if m["sidecar"]})
    for ep in episodes:
        sidecar = sidecars.get(ep["episode_index"], {})
        if "actions" in sidecar and "rewards" in sidecar:
            assert len(sidecar["rewards"]) == ep["length"] - 1, "one reward per transition"
            ep["actions"], ep["rewards"] = sidecar["actions"], sidecar["rewards"]
    os.makedirs(out, exist_ok=True)
    np.save(f"{out}/frames.npy", frames)
    with open(f"{out}/episodes.json", "w") as f:
        json.dump(episodes, f)
    print(f"{frames.shape[0]} frames, {len(episodes)} episodes -> {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
