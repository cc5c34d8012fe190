"""Open an `lfs ingest` dataset with the readers users reach for and report what they see.

Run by tests/ingest.rs (`python_readers_open_the_dataset`) with the project venv:
    .venv/bin/python eval/check_dataset.py <DATASET_DIR>
Prints one JSON object. Nothing here imports lfs: it is an independent reader.
"""

import glob
import io
import json
import sys

import duckdb
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
from PIL import Image


def main(root: str) -> None:
    files = sorted(glob.glob(f"{root}/data/*/*.parquet"))
    out = {"data_files": len(files)}

    # pyarrow: schema and the first frame's PNG.
    table = pq.read_table(files)
    out["pyarrow"] = {
        "rows": table.num_rows,
        "schema": {f.name: str(f.type) for f in table.schema},
    }
    first = table.column("observation.image")[0].as_py()
    img = Image.open(io.BytesIO(first["bytes"]))
    out["first_image"] = {"size": list(img.size), "mode": img.mode, "sum": int(sum(img.convert("RGB").tobytes()))}
    meta = pq.ParquetFile(files[0]).metadata.row_group(0)
    image_col = next(meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == "observation.image.bytes")
    out["image_column"] = {
        "compression": image_col.compression,
        "has_dictionary": image_col.has_dictionary_page,
        "has_statistics": image_col.is_stats_set,
    }
    out["row_groups"] = sum(pq.ParquetFile(f).metadata.num_row_groups for f in files)

    # pandas: frames, tasks (indexed by the task string, as LeRobot loads them), episodes.
    df = pd.read_parquet(files[0])
    tasks = pd.read_parquet(f"{root}/meta/tasks.parquet")
    episodes = pd.concat(pd.read_parquet(f) for f in sorted(glob.glob(f"{root}/meta/episodes/*/*.parquet")))
    out["pandas"] = {
        "rows_first_file": len(df),
        "tasks_index_name": tasks.index.name,
        "tasks": {str(t): int(i) for t, i in tasks["task_index"].items()},
        "episodes": len(episodes),
        "episode_columns": list(episodes.columns),
    }

    # polars: sortedness by (episode_index, frame_index).
    frames = pl.read_parquet(f"{root}/data/*/*.parquet", columns=["episode_index", "frame_index", "index"])
    key = frames["episode_index"] * 1_000_000 + frames["frame_index"]
    out["polars"] = {
        "rows": frames.height,
        "sorted": bool(key.is_sorted()),
        "index_is_row_number": bool((frames["index"] == pl.Series(range(frames.height))).all()),
    }

    # DuckDB over the glob LeRobot uses.
    con = duckdb.connect()
    n, eps, lo, hi = con.execute(
        f"select count(*), count(distinct episode_index), min(index), max(index) from read_parquet('{root}/data/*/*.parquet')"
    ).fetchone()
    out["duckdb"] = {"rows": n, "episodes": eps, "min_index": lo, "max_index": hi}

    # Hugging Face datasets (what LeRobot loads the frames with): the image column must come
    # back as an Image feature without being told.
    try:
        from datasets import Dataset
    except ImportError:
        out["datasets"] = None
    else:
        d = Dataset.from_parquet(files)
        out["datasets"] = {
            "rows": len(d),
            "image_feature": type(d.features["observation.image"]).__name__,
            "first_image_size": list(d[0]["observation.image"].size),
            # Every column's feature as `datasets` names it: List(Value('float32')) for the state.
            "features": {name: str(f) for name, f in d.features.items()},
        }

    with open(f"{root}/meta/info.json") as f:
        out["info"] = json.load(f)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
