#!/usr/bin/env bash
# Copy a study's small results into the repository: the report, each done cell's CSVs and
# logs, each pre-training's config and per-update curve (CSV), the dataset's info and the stage
# timings. Checkpoints, videos and shards stay in the run folder.
#   eval/study/copy_results.sh runs/study-mini results/study-mini
set -euo pipefail
shopt -s nullglob  # a study without cells yet copies none
DIR=$1
OUT=$2
mkdir -p "$OUT/cells" "$OUT/pretrain"
cp "$DIR/stages.tsv" "$OUT/"
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
    # One row per update: what the report's N picture and the compute table are made of.
    python3 - "$run/metrics.jsonl" > "$OUT/pretrain/$method/updates.csv" <<'PY'
import csv, json, sys
keys = ["loss", "num_synthetic", "num_real", "lnc_d", "clip_low", "clip_high",
        "sinkhorn_entropy", "target_cosine", "update_seconds"]
out = csv.writer(sys.stdout, lineterminator="\n")
out.writerow(["step"] + keys)
with open(sys.argv[1]) as f:
    for line in f:
        row = json.loads(line)
        out.writerow([row["step"]] + [row.get("pretrain/" + k, "") for k in keys])
PY
done
echo "study results copied to $OUT"
