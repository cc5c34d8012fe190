#!/usr/bin/env bash
# The paper's pre-training in one GPU lease (issue 75): the paper's dataset collected straight
# into Parquet frame shards (`lfs collect --dataset`: no FFmpeg, which a lent machine lacks),
# `lfs pretrain --config pipelines/paper.toml` on it (frames resident on the GPU), the export,
# a contact sheet, and the run's small files under $OUT with each stage's seconds.
#
#   eval/gpu/paper-pretrain.sh [LFS]
# LFS: default the carried CUDA build when .gpu-carry/e2e.tar.xz is here (unpacked into
# $PP_WORK/carry with its environment, eval/gpu/carry-env.sh: what a lent machine runs, carrying
# .gpu-carry), else target/release/lfs.
#
# Every stage resumes: run the same command again (a second command of the device tool on the
# same warm machine, or after an interruption) and it goes on where the first stopped. The
# pre-training stage is stopped when the command has run PP_COMMAND_SECONDS (570: the device
# tool's 10 minutes less the copies; a run killed then resumes from its last checkpoint, every
# 1,000 updates), so that what a command did comes back under $OUT.
#
# Sizes (the paper's by default) and where:
#   PP_DEVICE (cuda), PP_EPISODES (320 per task), PP_FRAMES (250 per episode), PP_UPDATES
#   (60000), PP_BATCH (512), PP_WORKERS (one dm_control worker per core), PP_RENDER (default),
#   PP_COMMAND_SECONDS (570), PP_WORK (runs/paper-pretrain: the dataset and the run, kept
#   between commands), OUT (paper-pretrain-out).
# How its encoder is to be read (the probe rule, fixed before any run): docs/paper-scale.md.
# Dry run on the CPU at tiny sizes (the same stages; results/paper-pretrain-dry-2026-11-28):
#   PP_DEVICE=cpu PP_EPISODES=2 PP_FRAMES=20 PP_UPDATES=4 PP_BATCH=16 \
#     OUT=results/paper-pretrain-dry-2026-11-28 eval/gpu/paper-pretrain.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
LFS=${1:-}
DEVICE=${PP_DEVICE:-cuda}
EPISODES=${PP_EPISODES:-320}
FRAMES=${PP_FRAMES:-250}
UPDATES=${PP_UPDATES:-60000}
BATCH=${PP_BATCH:-512}
WORKERS=${PP_WORKERS:-$(nproc)}
RENDER=${PP_RENDER:-default}
COMMAND_SECONDS=${PP_COMMAND_SECONDS:-570}
STARTED=$(date +%s)
WORK=${PP_WORK:-runs/paper-pretrain}
OUT=${OUT:-paper-pretrain-out}
export MUJOCO_GL=${MUJOCO_GL:-egl}
if [ -z "$LFS" ] && [ -f .gpu-carry/e2e.tar.xz ]; then
    # The carried CUDA build and its environment (unpacked again by each command: seconds).
    . eval/gpu/carry-env.sh
    WORK="$WORK/carry" carry_env
    LFS=$WORK/carry/bin/lfs
fi
LFS=${LFS:-target/release/lfs}
DATASET=$WORK/dataset
RUN=$WORK/run
mkdir -p "$WORK" "$OUT"
STAGES=$OUT/stages.tsv
[ -f "$STAGES" ] || printf 'stage\tstarted_utc\tseconds\texit\n' > "$STAGES"

stage() {  # stage NAME COMMAND...: runs it, its output to $OUT/NAME.log, a row in stages.tsv
    local name=$1 start rc
    shift
    echo "== $name: $*"
    start=$(date +%s)
    "$@" >> "$OUT/$name.log" 2>&1 && rc=0 || rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$(date -u -d "@$start" +%FT%TZ)" "$(( $(date +%s) - start ))" "$rc" >> "$STAGES"
    tail -n 3 "$OUT/$name.log"
    return "$rc"
}

"$LFS" --version | tee "$OUT/version.txt"
{
    echo "device $DEVICE, $EPISODES episodes x $FRAMES frames per task, render $RENDER, $WORKERS workers"
    echo "pretrain: pipelines/paper.toml, $UPDATES updates at batch $BATCH, stopped at $COMMAND_SECONDS s into a command"
    nproc
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    fi
} | tee "$OUT/machine.txt"

# 1. The paper's dataset: the three seen tasks, the uniform random policy, straight to shards.
# Stopped at the command's end too (committed every minute: a second command goes on).
set +e
stage collect timeout --signal=KILL "$COMMAND_SECONDS" "$LFS" collect --tasks reach_duplo,walker_run,cartpole_swingup \
    --episodes "$EPISODES" --video-frames "$FRAMES" --render-quality "$RENDER" \
    --workers "$WORKERS" --dataset "$DATASET"
collected=$?
set -e
if [ "$collected" -eq 137 ]; then
    echo "collect: stopped at the command's end; run this command again to go on"
    exit 0
elif [ "$collected" -ne 0 ]; then
    exit "$collected"
fi

# 2. Pre-training, bounded per command; a second command resumes from the last checkpoint.
left=$(( COMMAND_SECONDS - ($(date +%s) - STARTED) ))
if [ "$left" -lt 60 ]; then
    echo "pretrain: $left s left in this command; run it again to pre-train"
    exit 0
fi
set +e
stage pretrain timeout --signal=KILL "$left" "$LFS" pretrain --config pipelines/paper.toml \
    --set "data.datasets=[\"$DATASET\"]" --set run.num_updates="$UPDATES" --set run.batch_size="$BATCH" \
    --device "$DEVICE" --out-dir "$RUN"
pretrained=$?
set -e
cp "$RUN/metrics.jsonl" "$RUN/summary.json" "$RUN/config.resolved.toml" "$OUT/" 2>/dev/null || true
if [ "$pretrained" -ne 0 ]; then
    last=$(tail -n 1 "$RUN/metrics.jsonl" 2>/dev/null | grep -o '"step":[0-9]*' || echo '"step":0')
    echo "pretrain stopped (exit $pretrained) at ${last#*:} of $UPDATES updates (its last logged step; a run resumes from its last checkpoint): run this command again to go on"
    exit 0
fi

# 3. The export, and what the encoder saw.
stage export "$LFS" export "$RUN/checkpoint.safetensors" --out "$RUN/encoder.safetensors"
stage inspect "$LFS" inspect "$DATASET" --contact-sheet "$OUT/contact-sheet.png"
cp "$RUN/encoder.safetensors" "$OUT/"
sha256sum "$OUT/encoder.safetensors" | tee "$OUT/encoder.sha256"
echo "done: $OUT"
