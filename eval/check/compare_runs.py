#!/usr/bin/env python3
"""Compares two trees of lfs run folders file by file, timings masked (eval/check/unchanged.sh).

    python3 eval/check/compare_runs.py A_DIR B_DIR

Equal means: the same files; JSON and JSONL equal value for value, CSV cell for cell, once every
key or column that holds a time (seconds, per_s, hours, elapsed, wall, started/finished stamps)
is dropped; safetensors files equal in their tensors' bytes and their metadata (times dropped);
everything else byte for byte; the two trees' own paths (a file naming its run folder) read
as one, and so do the sha256s of files at the same place in both (an encoder whose metadata
names the run folder it was exported from has another hash, and the runs on it record that). Logs of the commands (*.log) and TensorBoard event files (wall times in every record)
are skipped. Exits 1 and lists the differences when there are any.
"""
import csv
import hashlib
import io
import json
import re
import struct
import sys
from pathlib import Path

TIMING = re.compile(r"(second|per_s|fps|hours|elapsed|wall|_time|time_|^time/|started|finished|duration|utc|date|host)", re.I)
SKIP = re.compile(r"(\.log$|events\.out\.tfevents|\.lock$|claim)")


def mask(value):
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items() if not TIMING.search(k)}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


ROOTS = []
SHAS = {}


def text(path):
    """The file's text with either tree's root written as <ROOT>, a tree file's sha256 as its path."""
    t = path.read_text()
    for root in ROOTS:
        t = t.replace(root, "<ROOT>")
    for sha, name in SHAS.items():
        t = t.replace(sha, name)
    return t


def jsonl(path):
    return [mask(json.loads(line)) for line in text(path).splitlines() if line.strip()]


def csv_rows(path):
    rows = list(csv.reader(io.StringIO(text(path))))
    if not rows:
        return rows
    keep = [i for i, name in enumerate(rows[0]) if not TIMING.search(name)]
    return [[r[i] for i in keep if i < len(r)] for r in rows]


def safetensors(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    raw = data[8 : 8 + n].decode()
    for root in ROOTS:
        raw = raw.replace(root.replace("/", "\\/"), "<ROOT>").replace(root, "<ROOT>")
    for sha, name in SHAS.items():
        raw = raw.replace(sha, name)
    header = json.loads(raw)
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
        return mask(json.loads(text(a))) == mask(json.loads(text(b)))
    if suffix == ".csv":
        return csv_rows(a) == csv_rows(b)
    if suffix == ".safetensors":
        return safetensors(a) == safetensors(b)
    if a.read_bytes() == b.read_bytes():
        return True
    try:
        return text(a) == text(b)
    except UnicodeDecodeError:
        return False


def main():
    a_root, b_root = Path(sys.argv[1]), Path(sys.argv[2])
    ROOTS.extend(sorted({str(a_root.resolve()), str(b_root.resolve()), str(a_root), str(b_root)}, key=len, reverse=True))
    files = lambda root: {p.relative_to(root) for p in root.rglob("*") if p.is_file() and not SKIP.search(p.name)}
    a, b = files(a_root), files(b_root)
    for root in (a_root, b_root):
        for rel in a & b:
            if rel.suffix == ".safetensors":
                SHAS[hashlib.sha256((root / rel).read_bytes()).hexdigest()] = f"<sha256 of {rel}>"
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
