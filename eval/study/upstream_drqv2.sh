#!/usr/bin/env bash
# Issue 55: upstream DrQ-v2's own train.py (facebookresearch/drqv2 @c0c650b, packed by
# eval/gpu/pack-drqv2.sh into .gpu-carry/drqv2) on this machine's CPU, beside the replay
# ablation's drqv2 arm: cartpole_swingup, upstream's settings, 20K frames, one thread, one
# seed after another. The plan: results/upstream-drqv2/README.md.
#
# Resumable at episode ends (upstream's own snapshot, save_snapshot=true). The small files
# (eval.csv, train.csv, the log, hydra's config, restarts.tsv) are copied to
# results/upstream-drqv2/<task>-s<seed>/ and committed (that folder alone) whenever an
# evaluation is added and when the run ends.
#   nice -n 19 eval/study/upstream_drqv2.sh PYTHON [SEED...]      (default: seed 1)
# PYTHON needs torch, torchvision, hydra-core 1.3.2, omegaconf 2.3.0, termcolor, opencv,
# imageio, tensorboard, mujoco 3.17.0 and dm-control 1.0.50
# (eval/study/requirements-upstream-drqv2.txt).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=${1:?usage: upstream_drqv2.sh PYTHON [SEED...]}
shift
SEEDS=${*:-1}
TASK=cartpole_swingup
FRAMES=20010  # upstream's loop stops before evaluating at num_train_frames; +10 keeps the 20K one
CODE=.gpu-carry/drqv2
DIR=runs/upstream-drqv2
RESULTS=results/upstream-drqv2
. eval/study/commit.sh

grep -q 'weights_only=False' "$CODE/train.py" 2>/dev/null ||
    { echo "upstream_drqv2: no $CODE with harness patch 5 (resume); run eval/gpu/pack-drqv2.sh" >&2; exit 2; }
"$PY" -c 'import torch, hydra, dm_control, mujoco, cv2, imageio' ||
    { echo "upstream_drqv2: $PY lacks upstream's packages (eval/study/requirements-upstream-drqv2.txt)" >&2; exit 2; }
mkdir -p "$DIR" "$RESULTS"
cp "$CODE/harness.patch" "$CODE/SOURCE" "$RESULTS/"
"$PY" -m pip freeze --disable-pip-version-check > "$RESULTS/python.txt" 2>/dev/null || true

copy() {  # copy RUN OUT: the run's small files
    for f in eval.csv train.csv stdout.log; do
        [ -f "$1/$f" ] && cp "$1/$f" "$2/$f"
    done
    [ -d "$1/.hydra" ] && mkdir -p "$2/hydra" && cp "$1"/.hydra/*.yaml "$2/hydra/"
    return 0
}

for seed in $SEEDS; do
    name=$TASK-s$seed
    run=$ROOT/$DIR/$name
    out=$RESULTS/$name
    [ -f "$out/done.tsv" ] && { echo "upstream_drqv2: $name done"; continue; }
    mkdir -p "$run" "$out"
    [ -f "$out/restarts.tsv" ] || printf 'started_utc\tresumed_at_frame\thost\n' > "$out/restarts.tsv"
    frame=0
    [ -f "$run/snapshot.pt" ] && frame=$(cd "$CODE" && "$PY" -c 'import sys, torch
print(2 * torch.load(sys.argv[1], weights_only=False)["_global_step"])' "$run/snapshot.pt" 2>/dev/null || echo '?')
    printf '%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$frame" "$(hostname)" >> "$out/restarts.tsv"
    echo "== upstream drqv2: $name (from frame $frame, $(date -u +%FT%TZ))"
    start=$(date +%s)
    (cd "$CODE" && exec env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MUJOCO_GL=egl "$PY" train.py \
        task@_global_=$TASK seed="$seed" num_train_frames=$FRAMES device=cpu \
        save_snapshot=true save_video=false use_tb=false hydra.run.dir="$run") >> "$run/stdout.log" 2>&1 &
    pid=$!
    lines() { if [ -f "$1" ]; then wc -l < "$1"; else echo 0; fi; }
    evals=$(lines "$out/eval.csv")
    while kill -0 "$pid" 2>/dev/null; do
        sleep 60
        now=$(lines "$run/eval.csv")
        if [ "$now" != "$evals" ]; then
            evals=$now
            copy "$run" "$out"
            commit_results "$out" "upstream drqv2: $name, evaluation $((now - 1))"
        fi
    done
    wait "$pid" || { rc=$?; copy "$run" "$out"; commit_results "$out" "upstream drqv2: $name stopped ($rc)"; echo "upstream_drqv2: $name exited $rc" >&2; exit "$rc"; }
    copy "$run" "$out"
    printf 'finished_utc\tseconds_last_start\n%s\t%s\n' "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" > "$out/done.tsv"
    commit_results "$out" "upstream drqv2: $name done"
done
