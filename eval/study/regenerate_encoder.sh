#!/usr/bin/env bash
# Regenerate one of the study-mini encoders with the study's own commands (study_mini.sh), and
# keep a copy of every checkpoint it writes (every 500 updates) for the probe's curve. The study
# ran its own binary and pipelines/mini.toml; a later tree's mini.toml may hold sections that
# binary refuses, so pass the binary and the config of the commit the binary was built from
# (results/probe/README.md: 8b0e105's, `git show 8b0e105:pipelines/mini.toml`).
#   eval/study/regenerate_encoder.sh METHOD LFS_BINARY MINI_TOML [DIR]
# then: python3 eval/study/compare_updates.py results/study-mini/pretrain/METHOD/updates.csv DIR/METHOD/metrics.jsonl
set -euo pipefail
METHOD=$1 LFS=$2 CONFIG=$3 DIR=${4:-runs/study-mini-regen}
mkdir -p "$DIR"
[ -d "$DIR/dataset" ] || {
    "$LFS" collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes 100 \
        --video-frames 250 --render-quality fast --seed 0 --out "$DIR/videos"
    "$LFS" ingest "$DIR/videos" --out "$DIR/dataset"
}
mkdir -p "$DIR/$METHOD/snapshots"
keep_checkpoints() {  # copies checkpoint.safetensors to snapshots/step-<lfs.step> as it changes
    while true; do
        c="$DIR/$METHOD/checkpoint.safetensors"
        if [ -f "$c" ]; then
            step=$(python3 -c 'import json,struct,sys; f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]; print(json.loads(f.read(n))["__metadata__"]["lfs.step"])' "$c" 2>/dev/null || echo x)
            s="$DIR/$METHOD/snapshots/step-$step.safetensors"
            if [ "$step" != x ] && [ ! -f "$s" ]; then cp "$c" "$s.tmp" && mv "$s.tmp" "$s"; fi
        fi
        sleep 5
    done
}
keep_checkpoints & watcher=$!
trap 'kill $watcher 2>/dev/null || true' EXIT
# 2 threads: the study's numbers on any machine.
env RAYON_NUM_THREADS=2 "$LFS" pretrain --config "$CONFIG" \
    --set "data.datasets=[\"$DIR/dataset\"]" --set "objective.method=$METHOD" --out-dir "$DIR/$METHOD"
sleep 12
"$LFS" export "$DIR/$METHOD/checkpoint.safetensors" --out "$DIR/$METHOD/encoder.safetensors"
