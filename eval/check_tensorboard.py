"""Check a run directory's TensorBoard event file against its own logs, with TensorBoard's reader.

    python eval/check_tensorboard.py RUN_DIR

Loads RUN_DIR with the `tensorboard` package's EventAccumulator (every scalar kept, nothing
sampled away) and rebuilds from the run's logs the points it must hold:
  metrics.jsonl (lfs pretrain): every number of a line at its `step`;
  train.jsonl, aux.jsonl (lfs eval, lfs train): every number at the line's `train/frame`,
    its own `step` left out;
  eval.csv: `eval/<column>` at the row's frame.
Nested objects are `outer/inner` tags. Each tag must hold exactly those points, once each, with
the log's value as a float32. Prints one line per tag with its count; exits 1 on any difference.
"""

import csv
import json
import sys
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def numbers(prefix, value, out):
    if isinstance(value, dict):
        for key, inner in value.items():
            numbers(f"{prefix}/{key}" if prefix else key, inner, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out[prefix] = value


def expected_points(run):
    points = {}  # tag -> list of (x, value)

    def add(x, line, left_out):
        flat = {}
        numbers("", line, flat)
        for tag, value in flat.items():
            if tag not in left_out:
                points.setdefault(tag, []).append((x, value))

    for name, x_field in [("metrics.jsonl", "step"), ("train.jsonl", "train/frame"), ("aux.jsonl", "train/frame")]:
        path = run / name
        if path.exists():
            for line in path.read_text().splitlines():
                record = json.loads(line)
                add(record[x_field], record, {x_field, "step"})
    path = run / "eval.csv"
    if path.exists():
        with path.open() as f:
            for row in csv.DictReader(f):
                frame = int(row.pop("frame"))
                add(frame, {f"eval/{k}": float(v) for k, v in row.items()}, set())
    return points


def main():
    run = Path(sys.argv[1])
    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    seen = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    want = expected_points(run)
    problems = []
    for tag in sorted(set(seen) | set(want)):
        got = sorted(seen.get(tag, []))
        exp = sorted((x, float(np.float32(v))) for x, v in want.get(tag, []))
        if got != exp:
            first = next(((g, e) for g, e in zip(got, exp) if g != e), None)
            if first is None:  # one list extends the other
                longer, which = (got, "TensorBoard") if len(got) > len(exp) else (exp, "the logs")
                first = f"{which} also has {longer[min(len(got), len(exp))]}"
            else:
                first = f"(x, value) TensorBoard {first[0]} vs the logs {first[1]}"
            problems.append(f"{tag}: TensorBoard has {len(got)} points, the logs {len(exp)}; first difference: {first}")
        else:
            print(f"{tag}: {len(got)} points")
    if not want:
        problems.append(f"{run}: no logs to compare")
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
