#!/usr/bin/env bash
# Copy a study's small results into the repository: the report, each done cell's CSVs and
# logs, each pre-training's config, per-update curve (CSV) and online probe (CSV, when it ran
# one), the dataset's info and the stage timings. Checkpoints, videos and shards stay in the
# run folder.
#   eval/study/copy_results.sh runs/study-mini results/study-mini
set -euo pipefail
shopt -s nullglob  # a study without cells yet copies none
DIR=$1
OUT=$2
mkdir -p "$OUT/cells" "$OUT/pretrain"
[ -f "$DIR/stages.tsv" ] && cp "$DIR/stages.tsv" "$OUT/"  # study 4 keeps a clock instead
[ -f "$DIR/dataset/meta/info.json" ] && cp "$DIR/dataset/meta/info.json" "$OUT/dataset_info.json"
[ -d "$DIR/report" ] && rm -rf "$OUT/report" && cp -r "$DIR/report" "$OUT/report"
for cell in "$DIR"/suite/cells/*/; do
    name=$(basename "$cell")
    # Finished cells only: a running one's files are still growing.
    grep -q '"state": "done"' "$cell/cell.json" 2>/dev/null || continue
    mkdir -p "$OUT/cells/$name"
    for f in cell.json run.json config.resolved.toml eval.csv train.jsonl log.txt; do
        [ -f "$cell/$f" ] && cp "$cell/$f" "$OUT/cells/$name/"
    done
done
for run in "$DIR"/*/; do
    [ -f "$run/metrics.jsonl" ] || continue
    method=$(basename "$run")
    mkdir -p "$OUT/pretrain/$method"
    cp "$run/config.resolved.toml" "$run/summary.json" "$OUT/pretrain/$method/" 2>/dev/null || true
    # One row per update: what the report's N picture and the compute table are made of. The
    # online probe's lines (`probe/*`, no `pretrain/*` key) are no update: they go to probe.csv,
    # one row per probe, when the run probed.
    rm -f "$OUT/pretrain/$method/probe.csv"
    python3 - "$run/metrics.jsonl" "$OUT/pretrain/$method/probe.csv" > "$OUT/pretrain/$method/updates.csv" <<'PY'
import csv, json, sys
keys = ["loss", "num_synthetic", "num_real", "lnc_d", "clip_low", "clip_high",
        "sinkhorn_entropy", "target_cosine", "update_seconds"]
out = csv.writer(sys.stdout, lineterminator="\n")
out.writerow(["step"] + keys)
probes = []
with open(sys.argv[1]) as f:
    for line in f:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut short by a killed run: its update is logged again on resume
        if "probe/state_r2" in row:
            probes.append(row)
            continue
        out.writerow([row["step"]] + [row.get("pretrain/" + k, "") for k in keys])
if probes:
    tasks = sorted({t for row in probes for t in row.get("probe/tasks", {})})
    blank = lambda x: "" if x is None else x  # an undefined R² is logged as null
    with open(sys.argv[2], "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["step", "state_r2", "reward_r2"]
                   + [f"{t}/{k}" for t in tasks for k in ("state_r2", "reward_r2")])
        for row in probes:
            per_task = row.get("probe/tasks", {})
            w.writerow([row["step"], blank(row["probe/state_r2"]), blank(row["probe/reward_r2"])]
                       + [blank(per_task.get(t, {}).get(k)) for t in tasks for k in ("state_r2", "reward_r2")])
PY
done
echo "study results copied to $OUT"
