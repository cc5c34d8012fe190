#!/usr/bin/env bash
# Issue 10: does pre-training stall at the clustering objective's fixed point (loss = ln 512)?
# Round-robin (single-task) vs mixed batches on the embedded sample and on a larger collected
# set, at batch 16, 64 and 512; lfs and lfs-no-fm. Results: bench-out/batching/runs/*/metrics.jsonl,
# summarised by eval/bench/task_batching_summary.py (BENCHMARKS.md, "Collapse and task batching").
# About 75 minutes on a 2-core CPU (collecting the larger set included). Re-running skips
# finished runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
LFS=${LFS:-target/release/lfs}
OUT=${OUT:-bench-out/batching}
mkdir -p "$OUT/logs" "$OUT/runs"
run() { # name config overrides...
  local name=$1 cfg=$2; shift 2
  [ -f "$OUT/runs/$name/summary.json" ] && return 0
  echo "== $name"
  "$LFS" pretrain --config "$cfg" --out-dir "$OUT/runs/$name" "$@" > "$OUT/logs/$name.log" 2>&1
}
[ -d "$OUT/tiny-ds" ] || "$LFS" ingest datasets/tiny/videos --out "$OUT/tiny-ds"
TINY="data.datasets=[\"$OUT/tiny-ds\"]"
# The larger set: 3 tasks x 12 random-policy episodes x 250 frames, fast rendering.
[ -d "$OUT/ds36" ] || {
  "$LFS" collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes 12 --video-frames 250 \
    --render-quality fast --out "$OUT/videos36" > "$OUT/logs/collect.log" 2>&1
  "$LFS" ingest "$OUT/videos36" --out "$OUT/ds36"
}
LARGE="data.datasets=[\"$OUT/ds36\"]"
for tb in round-robin mixed; do
  B="data.task_batching=\"$tb\""
  run "tiny-b16-lfs-$tb" pipelines/tiny.toml --set "$TINY" --set "$B" --set run.num_updates=600
  run "tiny-b64-lfs-$tb" pipelines/tiny.toml --set "$TINY" --set "$B" --set run.num_updates=400 --set run.batch_size=64
  run "tiny-b64-lfs-no-fm-$tb" pipelines/tiny.toml --set "$TINY" --set "$B" --set run.num_updates=400 --set run.batch_size=64 --set 'objective.method="lfs-no-fm"'
  run "tiny-b512-lfs-$tb" pipelines/tiny.toml --set "$TINY" --set "$B" --set run.num_updates=100 --set run.batch_size=512
  run "large-b64-lfs-$tb" pipelines/mini.toml --set "$LARGE" --set "$B" --set run.num_updates=600
  run "large-b512-lfs-$tb" pipelines/mini.toml --set "$LARGE" --set "$B" --set run.num_updates=100 --set run.batch_size=512
done
python3 eval/bench/task_batching_summary.py "$OUT/runs"
