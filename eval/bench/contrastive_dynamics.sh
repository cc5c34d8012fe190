#!/usr/bin/env bash
# Issue 14: ATC and CURL training dynamics, ours against a PyTorch transcription of each upstream
# reference (eval/bench/contrastive_torch.py). Both sides: the embedded sample (datasets/tiny),
# mixed batches of 64, 300 updates, pipelines/tiny.toml otherwise, seeds 1-3. Writes
# bench-out/dynamics/{runs,torch}/<method>-s<seed>/..., then eval/bench/contrastive_dynamics.py
# compares the window means (BENCHMARKS.md, "ATC and CURL dynamics against the references").
# About 25 minutes on a 2-core CPU. Re-running skips finished runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
LFS=${LFS:-target/release/lfs}
TORCH_PYTHON=${TORCH_PYTHON:-.venv-bench/bin/python}
OUT=${OUT:-bench-out/dynamics}
UPDATES=${UPDATES:-300}
SEEDS=${SEEDS:-"1 2 3"}
METHODS=${METHODS:-"atc curl"}
SIDES=${SIDES:-"lfs torch"}
mkdir -p "$OUT/logs" "$OUT/runs" "$OUT/torch"
[ -d "$OUT/tiny-ds" ] || "$LFS" ingest datasets/tiny/videos --out "$OUT/tiny-ds"
if [[ " $SIDES " == *" torch "* && ! -f "$OUT/frames/frames.npy" ]]; then
  .venv/bin/python eval/bench/dump_frames.py "$OUT/tiny-ds" "$OUT/frames"
fi
for method in $METHODS; do
  for seed in $SEEDS; do
    name="$method-s$seed"
    if [[ " $SIDES " == *" lfs "* && ! -f "$OUT/runs/$name/summary.json" ]]; then
      echo "== lfs $name"
      "$LFS" pretrain --config pipelines/tiny.toml --out-dir "$OUT/runs/$name" \
        --set "data.datasets=[\"$OUT/tiny-ds\"]" --set run.batch_size=64 --set "run.num_updates=$UPDATES" \
        --set "run.checkpoint_every_updates=$UPDATES" --set "objective.method=\"$method\"" --set "run.seed=$seed" \
        > "$OUT/logs/lfs-$name.log" 2>&1
    fi
    if [[ " $SIDES " == *" torch "* && ! -f "$OUT/torch/$name.json" ]]; then
      echo "== torch $name"
      "$TORCH_PYTHON" eval/bench/contrastive_torch.py --frames "$OUT/frames" --method "$method" --seed "$seed" \
        --updates "$UPDATES" --batch 64 --out "$OUT/torch/$name.json" > "$OUT/logs/torch-$name.log" 2>&1
    fi
  done
done
