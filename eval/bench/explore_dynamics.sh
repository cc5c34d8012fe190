#!/usr/bin/env bash
# Issue 54: Proto-RL's and APT's exploration updates, ours against the PyTorch transcriptions of
# denisyarats/proto and URLB's icm_apt (eval/bench/explore_torch.py), on one fixed replay: the 10
# random-policy cartpole_swingup episodes of eval/bench/drqv2_dynamics.sh (`lfs collect`, seeds
# 7000-7009, fast rendering; reused when that script made them), batch 64, 300 updates from
# agent step 2000, seeds 1-3 on each side. Proto-RL with 64 prototypes and a queue of 256
# (upstream's ratios to its batch: explore_torch.py's docstring); APT with upstream's sizes.
# Writes bench-out/explore-dynamics/<method>/{ours,torch}/s<seed>.json; then
# eval/bench/explore_dynamics.py compares the window means. Our side is examples/bench_explore
# (the flags of explore_torch.py; `make bench-dynamics-explore`). The torch side
# runs on THREADS threads (1: on a shared, busy 2-core machine, three 2-thread runs went several
# times slower than three 1-thread runs) and records its seconds per run in the JSON (and in
# the stored references). Re-running skips finished runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
LFS=${LFS:-target/release/lfs}
BENCH=${BENCH:-target/release/examples/bench_explore}
TORCH_PYTHON=${TORCH_PYTHON:-.venv-bench/bin/python}
METHODS=${METHODS:-"proto apt"}
OUT=${OUT:-bench-out/explore-dynamics}
FRAMES=${FRAMES:-bench-out/drqv2-dynamics/frames}
UPDATES=${UPDATES:-300}
SEEDS=${SEEDS:-"1 2 3"}
SIDES=${SIDES:-"ours torch"}
export MUJOCO_GL=${MUJOCO_GL:-egl}
if [ ! -f "$FRAMES/episodes.json" ]; then
  videos=$(dirname "$FRAMES")/videos dataset=$(dirname "$FRAMES")/dataset
  "$LFS" collect --tasks cartpole_swingup --episodes 10 --video-frames 251 --seed 7000 \
    --render-quality fast --out "$videos"
  "$LFS" ingest "$videos" --out "$dataset"
  .venv/bin/python eval/bench/dump_frames.py "$dataset" "$FRAMES"
fi
for method in $METHODS; do
  sizes=$([ "$method" = proto ] && echo "--protos 64 --queue 256" || true)
  mkdir -p "$OUT/$method/ours" "$OUT/$method/torch"
  for seed in $SEEDS; do
    if [[ " $SIDES " == *" ours "* && ! -f "$OUT/$method/ours/s$seed.json" ]]; then
      [ -x "$BENCH" ] || { echo "no $BENCH: run with SIDES=torch" >&2; exit 1; }
      echo "== $method ours s$seed"
      "$BENCH" --method "$method" --frames "$FRAMES" --seed "$seed" --batch 64 --updates "$UPDATES" $sizes \
        --out "$OUT/$method/ours/s$seed.json"
    fi
    if [[ " $SIDES " == *" torch "* && ! -f "$OUT/$method/torch/s$seed.json" ]]; then
      echo "== $method torch s$seed"
      "$TORCH_PYTHON" eval/bench/explore_torch.py --method "$method" --frames "$FRAMES" --seed "$seed" --batch 64 \
        --updates "$UPDATES" $sizes --threads "${THREADS:-1}" --out "$OUT/$method/torch/s$seed.json"
    fi
  done
done
