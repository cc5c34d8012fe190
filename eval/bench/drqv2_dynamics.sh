#!/usr/bin/env bash
# Issue 31: DrQ-v2's training dynamics (AGENT=taco: TACO's), ours against the PyTorch
# transcription of its update (eval/bench/drqv2_torch.py), on the same fixed replay: 10
# random-policy cartpole_swingup episodes of 250 agent steps (`lfs collect`, seeds 7000-7009,
# fast rendering), batch 64, 3-step returns, 300 updates from agent step 2000 (sigma from the
# easy schedule), seeds 1-3 on each side. Writes bench-out/<agent>-dynamics/{ours,torch}/
# s<seed>.json, then eval/bench/drqv2_dynamics.py compares the window means (BENCHMARKS.md,
# "DrQ-v2 and TACO"). About 20 minutes (DrQ-v2) or 40 (TACO) on an idle 2-core CPU. Re-running
# skips finished runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
LFS=${LFS:-target/release/lfs}
BENCH=${BENCH:-target/release/examples/bench_drqv2}
TORCH_PYTHON=${TORCH_PYTHON:-.venv-bench/bin/python}
AGENT=${AGENT:-drqv2}
OUT=${OUT:-bench-out/$AGENT-dynamics}
TACO_FLAG=$([ "$AGENT" = taco ] && echo --taco || true)
UPDATES=${UPDATES:-300}
SEEDS=${SEEDS:-"1 2 3"}
SIDES=${SIDES:-"ours torch"}
export MUJOCO_GL=${MUJOCO_GL:-egl}
mkdir -p "$OUT/ours" "$OUT/torch"
if [ ! -f "$OUT/frames/episodes.json" ]; then
  "$LFS" collect --tasks cartpole_swingup --episodes 10 --video-frames 251 --seed 7000 \
    --render-quality fast --out "$OUT/videos"
  "$LFS" ingest "$OUT/videos" --out "$OUT/dataset"
  .venv/bin/python eval/bench/dump_frames.py "$OUT/dataset" "$OUT/frames"
fi
for seed in $SEEDS; do
  if [[ " $SIDES " == *" ours "* && ! -f "$OUT/ours/s$seed.json" ]]; then
    echo "== ours s$seed"
    "$BENCH" --frames "$OUT/frames" --seed "$seed" --batch 64 --nstep 3 --updates "$UPDATES" $TACO_FLAG \
      --out "$OUT/ours/s$seed.json"
  fi
  if [[ " $SIDES " == *" torch "* && ! -f "$OUT/torch/s$seed.json" ]]; then
    echo "== torch s$seed"
    "$TORCH_PYTHON" eval/bench/drqv2_torch.py --frames "$OUT/frames" --seed "$seed" --batch 64 --nstep 3 \
      --updates "$UPDATES" --threads 2 $TACO_FLAG --out "$OUT/torch/s$seed.json"
  fi
done
