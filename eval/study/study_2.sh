#!/usr/bin/env bash
# Study 2 (docs/study-2.md), every stage in the plan's order; each resumes where it stopped, so
# run it again after an interruption or on the next session's machine. Wall-clock per stage is
# appended to runs/study-2/stages.tsv. Small results are copied into results/study-2/ and
# committed (that folder only) after every pre-training run, every pair of cells and every
# probe: run folders do not survive a change of machine.
#   eval/study/study_2.sh [LFS_BINARY]      (make study-2)
# STUDY2_COMMIT=0 copies without committing. LFS_COMMIT: the commit the binary was built at, for
# stages.tsv (default: the checkout's HEAD, which is that commit only when the binary is built
# from the checkout).
set -euo pipefail
LFS=${1:-target/release/lfs}
DIR=runs/study-2
RESULTS=results/study-2
SUITE=eval/suites/study-2.toml
PROBE_SET=runs/probe-set-fast/dataset
LFS_SEEDS="1 2 3 4 5 6"
BASELINE_SEEDS="1 2 3"
mkdir -p "$DIR" "$RESULTS"
[ -f "$DIR/stages.tsv" ] || printf 'stage\tstarted_utc\tseconds\tcommit\thost\n' > "$DIR/stages.tsv"

stage() {  # stage NAME COMMAND...: run it and record its wall-clock time
    local name=$1; shift
    local start; start=$(date +%s)
    echo "== study-2: $name"
    "$@"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$(date -u -d "@$start" +%FT%TZ)" "$(( $(date +%s) - start ))" \
        "${LFS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" "$(hostname)" >> "$DIR/stages.tsv"
}

commit() {  # commit MESSAGE: copy the small results and commit results/study-2 alone
    eval/study/copy_results.sh "$DIR" "$RESULTS"
    [ "${STUDY2_COMMIT:-1}" = 1 ] || return 0
    # Someone else's git command may hold the index for a moment: try again, and never let a
    # commit stop the study (the next one takes whatever this one left).
    for _ in 1 2 3 4 5; do
        git add "$RESULTS" 2>/dev/null && break
        sleep 2
    done
    for _ in 1 2 3 4 5; do
        git diff --cached --quiet -- "$RESULTS" && break   # nothing new: nothing to commit
        git commit -q -m "study-2: $1" -- "$RESULTS" 2>/dev/null && break
        sleep 2
    done
    return 0
}

pretrain() {  # pretrain NAME METHOD SEED [SET...]: pre-train, export, record the encoder's sha256
    local name=$1 method=$2 seed=$3; shift 3
    local run="$DIR/$name"
    # The export is written only once its pre-training has finished (set -e): a run without it
    # resumes from its checkpoint.
    if [ ! -f "$run/encoder.safetensors" ]; then
        # 2 threads: the plan's measured speed, and the same numbers on any machine.
        stage "pretrain-$name" env RAYON_NUM_THREADS=2 "$LFS" pretrain --config pipelines/mini.toml \
            --set "data.datasets=[\"$DIR/dataset\"]" --set "objective.method=$method" \
            --set "run.seed=$seed" "$@" --out-dir "$run"
        "$LFS" export "$run/checkpoint.safetensors" --out "$run/encoder.safetensors"
    fi
    local sha; sha=$(sha256sum "$run/encoder.safetensors" | cut -d' ' -f1)
    touch "$RESULTS/encoders.tsv"
    local known; known=$(awk -v n="$name" '$1 == n { print $2 }' "$RESULTS/encoders.tsv")
    if [ -z "$known" ]; then
        printf '%s\t%s\n' "$name" "$sha" >> "$RESULTS/encoders.tsv"
    elif [ "$known" != "$sha" ]; then
        echo "study-2: $run/encoder.safetensors has sha256 $sha, not the committed $known (regenerated on another machine?): record it in results/study-2/README.md" >&2
    fi
    commit "pre-training run $name done"
}

# The calibration gate: lfs-s1's mean share of synthetic pairs over updates 2001-6000.
synthetic_share() {
    python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
# A resumed run logs the updates after its checkpoint twice: the last line of each counts.
by_step = {}
for line in open(sys.argv[1]):
    row = json.loads(line)
    step, n = row.get("step"), row.get("pretrain/num_synthetic")
    if n is not None and 2000 < step <= 6000:
        by_step[step] = n / 64
print(f"{sum(by_step.values()) / len(by_step):.4f} {len(by_step)}" if by_step else "nan 0")
PY
}

probe() {  # probe NAME ENCODER [ARGS...]: probe on the fast probe set into results/study-2/probe/
    local name=$1 encoder=$2; shift 2
    mkdir -p "$RESULTS/probe"
    [ -f "$RESULTS/probe/$name.json" ] && return 0
    stage "probe-$name" sh -c "\"$LFS\" probe --encoder \"$encoder\" --dataset $PROBE_SET --out \"$RESULTS/probe/$name.json\" $* > \"$RESULTS/probe/$name.md\""
    commit "probe of $name"
}

# ---- stage 0: the videos (study-mini's: seed 0) and the probe set
[ -d "$DIR/videos" ] && [ -f "$DIR/dataset/meta/info.json" ] || {
    stage collect "$LFS" collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes 100 \
        --video-frames 250 --render-quality fast --seed 0 --out "$DIR/videos"
    stage ingest "$LFS" ingest "$DIR/videos" --out "$DIR/dataset"
}
[ -f "$PROBE_SET/meta/info.json" ] || stage probe-set make probe-set LFS="$LFS"

# ---- stage 1: LFS, one pre-training run per SAC seed; lfs-s1 first, through the gate
for seed in $LFS_SEEDS; do
    pretrain "lfs-s$seed" lfs "$seed" --set objective.lnc.r=0.2
    if [ "$seed" = 1 ]; then
        read -r share n <<< "$(synthetic_share "$DIR/lfs-s1")"
        echo "study-2: lfs-s1's synthetic share over updates 2001-6000: $share ($n updates)"
        if ! python3 -c "import sys; sys.exit(0 if 0.07 <= $share <= 0.15 else 1)"; then
            echo "study-2: the calibration gate failed (share $share outside [0.07, 0.15]): stop, and amend r as docs/study-2.md says" >&2
            exit 3
        fi
    fi
done

# ---- stage 2: the primary's SAC cells, two at a time, committed pair by pair, seed by seed:
# a seed's four cells (random and lfs, both tasks) finish together, so that whatever is
# committed when a session ends is whole units of the test. Cell index = encoder * 12 + task * 6
# + seed index (encoder-major, then task, then seed: random 0-11, lfs 12-23).
for k in 0 1 2 3 4 5; do
    for pair in "$k $((6 + k))" "$((12 + k)) $((18 + k))"; do
        read -r i j <<< "$pair"
        stage "cells-$i-$j" sh -c "
            \"$LFS\" suite run $SUITE --out $DIR/suite --job-index $i & a=\$!
            \"$LFS\" suite run $SUITE --out $DIR/suite --job-index $j & b=\$!
            wait \$a; ra=\$?; wait \$b; rb=\$?; exit \$(( ra | rb ))"
        commit "cells $i and $j"
    done
done
"$LFS" report "$DIR/suite" --out "$DIR/report"
commit "the primary's 24 cells and lfs report"

# ---- stage 3: ATC and CURL, three pre-training runs each
for method in atc curl; do
    for seed in $BASELINE_SEEDS; do
        pretrain "$method-s$seed" "$method" "$seed"
    done
done

# ---- stage 4: the probe of every encoder
for seed in $LFS_SEEDS; do
    probe "lfs-s$seed" "$DIR/lfs-s$seed/encoder.safetensors"
    probe "random-s$seed" random --random-seed "$seed"
done
for method in atc curl; do
    for seed in $BASELINE_SEEDS; do
        probe "$method-s$seed" "$DIR/$method-s$seed/encoder.safetensors"
    done
done
python3 eval/study/probe_runs.py "$RESULTS/probe" > "$RESULTS/probe/secondary.md"
# descriptive (docs/study-2.md): each LFS run's probe beside its two SAC returns
python3 eval/study/probe_vs_sac.py "$RESULTS/probe" "$RESULTS/report/results.csv" > "$RESULTS/probe/probe-vs-sac.md"
commit "the secondary comparisons (probe)"
echo "study-2: stages 0-4 done; docs/study-2.md decides whether lfs-no-fm (S4) fits the budget: sum $DIR/stages.tsv"
