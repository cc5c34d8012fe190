#!/usr/bin/env bash
# Behaviour unchanged by a refactoring: the same tiny runs with two lfs binaries (before, after),
# fixed seeds, then every file they wrote compared with timings masked (eval/check/compare_runs.py):
# `lfs ingest`, `lfs pretrain` + `lfs export` for every objective, `lfs eval` (SAC, DrQ-v2), `lfs train` for every
# agent kind and auxiliary method, `lfs explore` (Proto-RL, APT), `lfs probe`, `lfs report` on a committed results folder, and a
# run killed under the old binary and resumed by the new one against the new one uninterrupted.
#   eval/check/unchanged.sh BEFORE_LFS AFTER_LFS OUT_DIR      (~20 min on 2 quiet cores)
# Both binaries must read today's pipelines (a config field added since BEFORE is refused by it).
set -euo pipefail
BEFORE=$1 AFTER=$2 OUT=$3
export MUJOCO_GL=${MUJOCO_GL:-egl}
mkdir -p "$OUT"
DATA=$OUT/dataset
[ -f "$DATA/meta/info.json" ] || "$BEFORE" ingest datasets/tiny/videos --out "$DATA" > "$OUT/ingest.log"
# The probe reads recorded states: 16 short episodes of one task from `lfs collect` (it fits on
# 10 or more and holds out 4 or more).
PROBE_SET=$OUT/probe-set/dataset
[ -f "$PROBE_SET/meta/info.json" ] || {
    "$BEFORE" collect --tasks cartpole_swingup --episodes 16 --video-frames 60 --render-quality fast --seed 7 \
        --out "$OUT/probe-set/videos" > "$OUT/probe-set.log" 2>&1
    "$BEFORE" ingest "$OUT/probe-set/videos" --out "$PROBE_SET" >> "$OUT/probe-set.log" 2>&1
}

runs() {  # runs LFS DIR: every tiny run into DIR
    local lfs=$1 dir=$2
    mkdir -p "$dir"
    # lfs ingest itself, each binary's own dataset (the runs below all read the shared one).
    [ -f "$dir/ingest/meta/info.json" ] || "$lfs" ingest datasets/tiny/videos --out "$dir/ingest" > "$dir/ingest.log" 2>&1
    for m in lfs lfs-no-lnc lfs-no-fm lfs-cl atc curl; do
        [ -f "$dir/pretrain-$m/encoder.safetensors" ] && continue
        "$lfs" pretrain --config pipelines/tiny.toml --set "data.datasets=[\"$DATA\"]" \
            --set "objective.method=\"$m\"" --set run.num_updates=40 --set run.checkpoint_every_updates=20 \
            --out-dir "$dir/pretrain-$m" > "$dir/pretrain-$m.log" 2>&1
        "$lfs" export "$dir/pretrain-$m/checkpoint.safetensors" --out "$dir/pretrain-$m/encoder.safetensors" >> "$dir/pretrain-$m.log" 2>&1
    done
    local short=(--set run.num_train_frames=1200 --set run.num_seed_frames=400 --set run.eval_every_frames=600)
    [ -f "$dir/eval-sac/eval.csv" ] || "$lfs" eval --config pipelines/sac/tiny.toml --task cartpole_swingup --seed 1 \
        --encoder "$dir/pretrain-lfs/encoder.safetensors" "${short[@]}" --out-dir "$dir/eval-sac" > "$dir/eval-sac.log" 2>&1
    [ -f "$dir/eval-random/eval.csv" ] || "$lfs" eval --config pipelines/sac/tiny.toml --task cartpole_swingup --seed 2 \
        --encoder random "${short[@]}" --out-dir "$dir/eval-random" > "$dir/eval-random.log" 2>&1
    sed -n '/^\[aux\]/q;p' pipelines/drqv2/tiny.toml > "$dir/drqv2-eval.toml"
    [ -f "$dir/eval-drqv2/eval.csv" ] || "$lfs" eval --config "$dir/drqv2-eval.toml" --task cartpole_swingup --seed 1 \
        --encoder "$dir/pretrain-atc/encoder.safetensors" "${short[@]}" --out-dir "$dir/eval-drqv2" > "$dir/eval-drqv2.log" 2>&1
    for aux in lfs atc curl none; do
        [ -f "$dir/train-e2e-$aux/eval.csv" ] || "$lfs" train --config pipelines/e2e/tiny.toml --task walker_stand --seed 1 \
            --set "aux.method=\"$aux\"" "${short[@]}" --out-dir "$dir/train-e2e-$aux" > "$dir/train-e2e-$aux.log" 2>&1
    done
    for agent in drqv2 taco; do
        [ -f "$dir/train-$agent/eval.csv" ] || "$lfs" train --config "pipelines/$agent/tiny.toml" --task cartpole_swingup \
            --seed 1 "${short[@]}" --out-dir "$dir/train-$agent" > "$dir/train-$agent.log" 2>&1
    done
    for method in proto apt; do
        [ -f "$dir/explore-$method/encoder.safetensors" ] || "$lfs" explore --config "pipelines/explore/$method/tiny.toml" \
            --set run.num_train_frames=500 --set run.num_seed_frames=200 --set run.checkpoint_every_frames=250 \
            --set 'explore.tasks=["reach_duplo", "jaco_reach_top_left"]' --out-dir "$dir/explore-$method" > "$dir/explore-$method.log" 2>&1
    done
    [ -f "$dir/probe.json" ] || "$lfs" probe --encoder "$dir/pretrain-lfs/encoder.safetensors" --dataset "$PROBE_SET" --allow-render-quality-mismatch \
        --out "$dir/probe.json" > "$dir/probe.md" 2>"$dir/probe.log"
    [ -d "$dir/report-study-mini" ] || "$lfs" report results/study-mini --out "$dir/report-study-mini" > "$dir/report.log" 2>&1
    [ -d "$dir/report-drqv2-mini" ] || "$lfs" report results/drqv2-mini --out "$dir/report-drqv2-mini" >> "$dir/report.log" 2>&1
}

echo "== before: $BEFORE"; runs "$BEFORE" "$OUT/before"
echo "== after: $AFTER"; runs "$AFTER" "$OUT/after"

# A checkpoint written before resumes after: the old binary stops at frame 1000, the end of its
# first episode (a run that stops mid-episode resumes at a new episode, by design), the new one
# resumes it to 1400, and the result is the new one's uninterrupted run.
args=(--config pipelines/taco/tiny.toml --task cartpole_swingup --seed 1 --set run.num_train_frames=1400
    --set run.num_seed_frames=400 --set run.eval_every_frames=200 --set run.checkpoint_every_frames=400)
if [ ! -f "$OUT/resume/resumed/train-taco/eval.csv" ]; then
    rm -rf "$OUT/resume"; mkdir -p "$OUT/resume/resumed" "$OUT/resume/uninterrupted"
    "$BEFORE" train "${args[@]}" --set run.num_train_frames=1000 --out-dir "$OUT/resume/resumed/train-taco" > "$OUT/resume/before.log" 2>&1
    "$AFTER" train "${args[@]}" --out-dir "$OUT/resume/resumed/train-taco" > "$OUT/resume/after.log" 2>&1
    "$AFTER" train "${args[@]}" --out-dir "$OUT/resume/uninterrupted/train-taco" > "$OUT/resume/uninterrupted.log" 2>&1
fi

status=0
python3 eval/check/compare_runs.py "$OUT/before" "$OUT/after" || status=1
python3 eval/check/compare_runs.py "$OUT/resume/uninterrupted" "$OUT/resume/resumed" || status=1
exit $status
