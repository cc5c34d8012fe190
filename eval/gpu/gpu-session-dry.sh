#!/usr/bin/env bash
# Dry run of eval/gpu/gpu-session.sh on the CPU, at tiny sizes: proves the script, its stages,
# its markers and eval/gpu/session_summary.py, not any speed. device_check's bench (fixed at
# B=512) is replaced by eval/gpu/dry_device_check.py (lfs's CPU benches at B=16, in
# device_check's format; its checks are the real ones); the lfs binary is the CPU build's.
#
#   eval/gpu/gpu-session-dry.sh        (after cargo build --release --locked --examples, and
#                                       eval/gpu/pack-drqv2.sh for the drqv2 stage)
#   DRY_PYTHON   a python with torch (and, for the drqv2 stage, upstream drqv2's packages:
#                torchvision, tensorboard, opencv, imageio, dm-control)   default .venv-bench/bin/python
#   OUT          where the raw files go (default gpu-check-out/dry)
#   DRY_LFS      the lfs binary (default target/release/lfs)
#   GPU_SESSION_STAGES as gpu-session.sh (default here: its default list and drqv2)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
W=$(mktemp -d /tmp/lfs-session-dry.XXXXXX)
trap 'rm -rf "$W"' EXIT
printf '#!/bin/sh\nexec python3 %s/eval/gpu/dry_device_check.py "$@"\n' "$ROOT" > "$W/device_check"
chmod +x "$W/device_check"
for ex in device_check bench_pretrain bench_sac; do
    [ -x target/release/examples/$ex ] || { echo "no target/release/examples/$ex: cargo build --release --locked --examples" >&2; exit 1; }
done
[ -x target/release/lfs ] || { echo "no target/release/lfs: make build" >&2; exit 1; }
export OUT=${OUT:-gpu-check-out/dry}
export GPU_SESSION_DEVICE=cpu
export GPU_SESSION_STAGES=${GPU_SESSION_STAGES:-info parity rounds parts e2e anchors history drqv2}
export GPU_SESSION_BUDGET=${GPU_SESSION_BUDGET:-7200}
export GPU_SESSION_TIMEOUT_SCALE=${GPU_SESSION_TIMEOUT_SCALE:-8}  # a shared 2-core CPU, not a GPU
export GPU_SESSION_DEVICE_CHECK=$W/device_check
export GPU_SESSION_LFS=${DRY_LFS:-$ROOT/target/release/lfs}  # DRY_LFS: a copy, so that builds may go on meanwhile
export GPU_SESSION_PYTHON=${DRY_PYTHON:-$ROOT/.venv-bench/bin/python}
export LFS_PYTHON=${LFS_PYTHON:-$ROOT/.venv/bin/python}
export DRY_BATCH_LFS=16 DRY_BATCH_SAC=16,32
export GPU_SESSION_BATCH_LFS=16 GPU_SESSION_BATCH_SAC=16,32 GPU_SESSION_BATCH_PIXELS=16 GPU_SESSION_BATCH_DRQV2=16
export GPU_SESSION_UPDATES=3 GPU_SESSION_WARMUP=1
export GPU_SESSION_E2E_FRAMES=2000 GPU_SESSION_E2E_SET="agent.batch_size=16"
# upstream's replay shards its episodes over its loader's workers, and each worker needs one:
# at least as many seed episodes (1000 frames each) as workers
export GPU_SESSION_DRQV2_FRAMES=3000 GPU_SESSION_DRQV2_SET="agent.batch_size=16 run.num_seed_frames=2000"
export GPU_SESSION_DRQV2_UPSTREAM_ARGS="batch_size=16 num_seed_frames=2000 replay_buffer_num_workers=2"
export GPU_SESSION_DRQV2_PRECISIONS=${GPU_SESSION_DRQV2_PRECISIONS:-"default fp32"}
exec eval/gpu/gpu-session.sh
