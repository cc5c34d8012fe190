"""What a glob reader sees in an `lfs ingest` dataset, next to what its episodes index says.

Run by tests/ingest.rs (the kill test) with the project venv, after each SIGKILL:
    .venv/bin/python eval/check_index_matches_data.py <DATASET_DIR>
Prints one JSON object: `data` = rows per episode_index that pyarrow.dataset finds over
`data/*/*.parquet` (what LeRobot, DuckDB and pandas globs read), `index` = `length` per
episode_index in `meta/episodes/*/*.parquet`. A consistent dataset has data == index.
Nothing here imports lfs: it is an independent reader.
"""

import glob
import json
import sys

import pyarrow.compute as pc
import pyarrow.dataset as pds
import pyarrow.parquet as pq


def rows_per_episode(files: list[str]) -> dict[str, int]:
    if not files:
        return {}
    table = pds.dataset(files, format="parquet").to_table(columns=["episode_index"])
    counts = pc.value_counts(table.column("episode_index")).to_pylist()
    return {str(c["values"]): int(c["counts"]) for c in counts}


def indexed_lengths(files: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in files:
        t = pq.read_table(f, columns=["episode_index", "length"])
        for ep, n in zip(t.column("episode_index").to_pylist(), t.column("length").to_pylist()):
            out[str(ep)] = int(n)
    return out


def main(root: str) -> None:
    data = sorted(glob.glob(f"{root}/data/*/*.parquet"))
    index = sorted(glob.glob(f"{root}/meta/episodes/*/*.parquet"))
    print(json.dumps({"data": rows_per_episode(data), "index": indexed_lengths(index), "data_files": len(data)}))


if __name__ == "__main__":
    main(sys.argv[1])
