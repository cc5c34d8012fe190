#!/usr/bin/env python3
"""Compares two trees of lfs run folders file by file, timings masked (eval/check/unchanged.sh).

    python3 eval/check/compare_runs.py A_DIR B_DIR

Equal means: the same files; JSON and JSONL equal value for value, CSV cell for cell, once every
key or column that holds a time (seconds, per_s, hours, elapsed, wall, started/finished stamps)
is dropped; safetensors files equal in their tensors' bytes and their metadata (times dropped);
everything else byte for byte. Logs of the commands (*.log) and TensorBoard event files (wall
times in every record) are skipped. Exits 1 and lists the differences when there are any.
"""
import csv
import io
import json
import re
import struct
import sys
from pathlib import Path

TIMING = re.compile(r"(second|per_s|hours|elapsed|wall|_time|time_|started|finished|duration|utc|date|host)", re.I)
SKIP = re.compile(r"(\.log$|events\.out\.tfevents|\.lock$|claim)")


def mask(value):
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items() if not TIMING.search(k)}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def jsonl(path):
    return [mask(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def csv_rows(path):
    rows = list(csv.reader(io.StringIO(path.read_text())))
    if not rows:
        return rows
    keep = [i for i, name in enumerate(rows[0]) if not TIMING.search(name)]
    return [[r[i] for i in keep if i < len(r)] for r in rows]


def safetensors(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    meta = {k: v for k, v in meta.items() if not TIMING.search(k)}
    # The embedded config/JSON strings may carry times too.
    for k, v in list(meta.items()):
        try:
            meta[k] = mask(json.loads(v))
        except (ValueError, TypeError):
            pass
    return header, meta, data[8 + n :]


def same(a: Path, b: Path) -> bool:
    suffix = a.suffix
    if suffix == ".jsonl":
        return jsonl(a) == jsonl(b)
    if suffix == ".json":
        return mask(json.loads(a.read_text())) == mask(json.loads(b.read_text()))
    if suffix == ".csv":
        return csv_rows(a) == csv_rows(b)
    if suffix == ".safetensors":
        return safetensors(a) == safetensors(b)
    return a.read_bytes() == b.read_bytes()


def main():
    a_root, b_root = Path(sys.argv[1]), Path(sys.argv[2])
    files = lambda root: {p.relative_to(root) for p in root.rglob("*") if p.is_file() and not SKIP.search(p.name)}
    a, b = files(a_root), files(b_root)
    problems = [f"only in {a_root}: {p}" for p in sorted(a - b)] + [f"only in {b_root}: {p}" for p in sorted(b - a)]
    compared = 0
    for rel in sorted(a & b):
        compared += 1
        if not same(a_root / rel, b_root / rel):
            problems.append(f"differs: {rel}")
    print(f"{a_root} vs {b_root}: {compared} files compared, {len(problems)} differences")
    for p in problems:
        print("  " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
