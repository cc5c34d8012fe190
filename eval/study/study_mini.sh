#!/usr/bin/env bash
# The study of docs/study-mini.md, every stage in order; each resumes where it stopped, so run
# it again after an interruption. Wall-clock per stage (every invocation) is appended to
# runs/study-mini/stages.tsv. Then the results are copied into results/study-mini/.
#   eval/study/study_mini.sh [LFS_BINARY]      (make study-mini)
set -euo pipefail
LFS=${1:-target/release/lfs}
DIR=runs/study-mini
RESULTS=results/study-mini
mkdir -p "$DIR"
[ -f "$DIR/stages.tsv" ] || printf 'stage\tstarted_utc\tseconds\tcommit\thost\n' > "$DIR/stages.tsv"

stage() {  # stage NAME COMMAND...: run it and record its wall-clock time
    local name=$1; shift
    local start; start=$(date +%s)
    echo "== study-mini: $name"
    "$@"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$(date -u -d "@$start" +%FT%TZ)" "$(( $(date +%s) - start ))" \
        "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$(hostname)" >> "$DIR/stages.tsv"
}

stage collect "$LFS" collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes 100 \
    --video-frames 250 --render-quality fast --seed 0 --out "$DIR/videos"
stage ingest "$LFS" ingest "$DIR/videos" --out "$DIR/dataset"
for method in lfs atc curl; do
    # 2 threads: the measured speed of docs/study-mini.md, and the same numbers on any machine.
    stage "pretrain-$method" env RAYON_NUM_THREADS=2 "$LFS" pretrain --config pipelines/mini.toml \
        --set "data.datasets=[\"$DIR/dataset\"]" --set "objective.method=$method" \
        --out-dir "$DIR/$method"
    "$LFS" export "$DIR/$method/checkpoint.safetensors" --out "$DIR/$method/encoder.safetensors"
done
stage suite "$LFS" suite run eval/suites/study-mini.toml --out "$DIR/suite" -j 2
"$LFS" report "$DIR/suite" --out "$DIR/report"
eval/study/copy_results.sh "$DIR" "$RESULTS"
