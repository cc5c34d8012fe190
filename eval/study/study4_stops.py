#!/usr/bin/env python3
"""What a session's end cut in study 4: for each cell whose newest attempt on the clock did not
finish, the attempt's start and last heartbeat (results/study-4/clock/), and from the run folder
(runs/study-4/suite/cells/) its last checkpoint's frame and time and the last frame it logged,
so the frames run again are known. Prints one line per cut cell, for results/study-4/README.md,
"Interrupted and resumed"; run it before restarting the driver (a restart moves the cells on).

    python3 eval/study/study4_stops.py [results/study-4] [runs/study-4/suite]
"""

import csv
import datetime
import json
import struct
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def newest_attempts(clock):
    """{cell index: the row of its newest attempt}, attempts ordered by their start."""
    newest = {}
    for path in sorted(clock.glob("cell-*.tsv")):
        for row in csv.DictReader(open(path), delimiter="\t"):
            cell = int(row["cell"])
            if cell not in newest or row["started_utc"] > newest[cell]["started_utc"]:
                newest[cell] = row
    return newest


def checkpoint_step(path):
    """The agent step a checkpoint was written at (its safetensors metadata's `lfs.step`)."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        return int(json.loads(f.read(header_len))["__metadata__"]["lfs.step"])


def utc(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%H:%M:%S")


def main():
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "results/study-4"
    suite = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "runs/study-4/suite"
    cut = {cell: row for cell, row in newest_attempts(results / "clock").items() if row["finished"] != "1"}
    if not cut:
        print("no cell's newest attempt is unfinished")
    for cell, row in sorted(cut.items()):
        found = list((suite / "cells").glob(f"{cell:03d}-*"))
        line = f"cell {cell}: attempt started {row['started_utc']}, last heartbeat {row['last_seen_utc']} ({int(row['seconds'])} s)"
        if len(found) != 1:
            print(f"{line}; run folder {suite / 'cells'}/{cell:03d}-*: {'missing' if not found else 'ambiguous'}")
            continue
        folder = found[0]
        repeat = tomllib.loads((folder / "config.resolved.toml").read_text())["env"]["action_repeat"]
        logged = [json.loads(l)["step"] for l in open(folder / "train.jsonl") if l.strip()]
        last_logged = f"frame {logged[-1] * repeat:,}" if logged else "nothing"
        checkpoint = folder / "checkpoint.safetensors"
        if checkpoint.exists():
            saved = f"checkpoint at frame {checkpoint_step(checkpoint) * repeat:,} ({utc(checkpoint.stat().st_mtime)} UTC)"
        else:
            saved = "no checkpoint (starts again)"
        print(f"{line}; {folder.name}: {saved}, last logged {last_logged}")


if __name__ == "__main__":
    main()
