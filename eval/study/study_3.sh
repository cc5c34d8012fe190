#!/usr/bin/env bash
# Study 3 (docs/study-3.md), every stage in the plan's order; each resumes where it stopped, so
# run it again after an interruption or on the next session's machine. Wall-clock per stage is
# appended to runs/study-3/stages.tsv. Small results are copied into results/study-3/ and
# committed (that folder only) after every pre-training run, probe and pair of cells: run
# folders do not survive a change of machine, and a run whose probe is committed is not run again.
#   eval/study/study_3.sh [LFS_BINARY]      (make study-3)
# The study keeps one binary: the first call records its sha256 and commit
# (results/study-3/binary.tsv; LFS_COMMIT, default the checkout's HEAD, is the commit it was
# built at), and later calls refuse another. STUDY3_COMMIT=0 copies without committing.
set -euo pipefail
LFS=${1:-target/release/lfs}
DIR=runs/study-3
DATA=runs/study-2  # study 2's videos and dataset, at study 2's path (the resolved configs match)
RESULTS=results/study-3
SUITE=eval/suites/study-3-sac.toml
PROBE_SET=runs/probe-set-fast/dataset
STUDY2=results/study-2
export MUJOCO_GL=${MUJOCO_GL:-egl}
mkdir -p "$DIR" "$RESULTS/probe" "$RESULTS/check" "$RESULTS/encoders"

# ---- the one binary
sha=$(sha256sum "$LFS" | cut -d' ' -f1)
if [ -f "$RESULTS/binary.tsv" ]; then
    known=$(awk -F'\t' 'NR == 2 { print $1 }' "$RESULTS/binary.tsv")
    LFS_COMMIT=$(awk -F'\t' 'NR == 2 { print $2 }' "$RESULTS/binary.tsv")
    if [ "$known" != "$sha" ]; then
        echo "study-3: $LFS has sha256 $sha, not the study's binary $known (built at $LFS_COMMIT): the study runs on one binary (docs/study-3.md)" >&2
        exit 2
    fi
else
    LFS_COMMIT=${LFS_COMMIT:-$(git rev-parse --short HEAD)}
    printf 'sha256\tcommit\tpath\trecorded_utc\n%s\t%s\t%s\t%s\n' "$sha" "$LFS_COMMIT" "$LFS" "$(date -u +%FT%TZ)" > "$RESULTS/binary.tsv"
fi
# A new machine starts from the committed stage times, so that the budget rule sums them all.
[ -f "$DIR/stages.tsv" ] || { [ -f "$RESULTS/stages.tsv" ] && cp "$RESULTS/stages.tsv" "$DIR/stages.tsv"; } || true
[ -f "$DIR/stages.tsv" ] || printf 'stage\tstarted_utc\tseconds\tcommit\thost\n' > "$DIR/stages.tsv"

stage() {  # stage NAME COMMAND...: run it and record its wall-clock time
    local name=$1; shift
    local start; start=$(date +%s)
    echo "== study-3: $name ($(date -u +%FT%TZ))"
    "$@"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$(date -u -d "@$start" +%FT%TZ)" "$(( $(date +%s) - start ))" \
        "$LFS_COMMIT" "$(hostname)" >> "$DIR/stages.tsv"
}

commit() {  # commit MESSAGE: copy the small results and commit results/study-3 alone
    eval/study/copy_results.sh "$DIR" "$RESULTS" > /dev/null
    [ "${STUDY3_COMMIT:-1}" = 1 ] || return 0
    # Someone else's git command may hold the index for a moment: try again, and never let a
    # commit stop the study (the next one takes whatever this one left).
    for _ in 1 2 3 4 5; do
        git add "$RESULTS" 2>/dev/null && break
        sleep 3
    done
    for _ in 1 2 3 4 5; do
        git diff --cached --quiet -- "$RESULTS" && break   # nothing new: nothing to commit
        git commit -q -m "study-3: $1" -- "$RESULTS" 2>/dev/null && break
        sleep 3
    done
    return 0
}

probe() {  # probe NAME ENCODER [ARGS...]: probe on the probe set into results/study-3/probe/
    local name=$1 encoder=$2; shift 2
    [ -f "$RESULTS/probe/$name.json" ] && return 0
    stage "probe-$name" sh -c "\"$LFS\" probe --encoder \"$encoder\" --dataset $PROBE_SET --out \"$RESULTS/probe/$name.json.tmp\" $* > \"$RESULTS/probe/$name.md\""
    mv "$RESULTS/probe/$name.json.tmp" "$RESULTS/probe/$name.json"
    commit "probe of $name"
}

pretrain() {  # pretrain NAME METHOD SEED [SET...]: pre-train, export, record the sha256, probe
    local name=$1 method=$2 seed=$3; shift 3
    local run="$DIR/$name"
    # Done before (maybe on another machine): its probe is committed; R's cells may still need
    # its encoder, which the committed encoder-only export provides (named in the cells).
    [ -f "$RESULTS/probe/$name.json" ] && return 0
    # The export is written only once its pre-training has finished (set -e): a run without it
    # resumes from its checkpoint.
    if [ ! -f "$run/encoder.safetensors" ]; then
        # 2 threads: study 2's measured speed, and the same numbers on any machine. The three
        # arms' commands differ in objective.method alone (lfs-no-fm and lfs-no-lnc ignore LNC's r).
        stage "pretrain-$name" env RAYON_NUM_THREADS=2 "$LFS" pretrain --config pipelines/mini.toml \
            --set "data.datasets=[\"$DATA/dataset\"]" --set "objective.method=$method" \
            --set "run.seed=$seed" --set objective.lnc.r=0.2 "$@" --out-dir "$run"
        "$LFS" export "$run/checkpoint.safetensors" --out "$run/encoder.safetensors"
    fi
    if [ ! -f "$RESULTS/encoders/$name.safetensors" ]; then
        "$LFS" export "$run/checkpoint.safetensors" --encoder-only --out "$RESULTS/encoders/$name.safetensors"
        rm -f "$RESULTS/encoders/$name.example.safetensors"  # its check batch (880 KB): not committed
    fi
    local sha; sha=$(sha256sum "$run/encoder.safetensors" | cut -d' ' -f1)
    touch "$RESULTS/encoders.tsv"
    local known; known=$(awk -v n="$name" '$1 == n { print $2 }' "$RESULTS/encoders.tsv")
    if [ -z "$known" ]; then
        printf '%s\t%s\n' "$name" "$sha" >> "$RESULTS/encoders.tsv"
    elif [ "$known" != "$sha" ]; then
        echo "study-3: $run/encoder.safetensors has sha256 $sha, not the committed $known: record it in results/study-3/README.md" >&2
    fi
    commit "pre-training run $name done"
    probe "$name" "$run/encoder.safetensors"
}

stages_hours() {  # the sum of stages.tsv's seconds, in hours
    awk -F'\t' 'NR > 1 { s += $3 } END { printf "%.2f", s / 3600 }' "$DIR/stages.tsv"
}

gate() {  # gate NAME LIMIT_HOURS: the plan's budget rule, decided once and recorded in gates.tsv
    local name=$1 limit=$2
    touch "$RESULTS/gates.tsv"
    local known; known=$(awk -F'\t' -v n="$name" '$1 == n { print $2 }' "$RESULTS/gates.tsv")
    if [ -z "$known" ]; then
        local hours; hours=$(stages_hours)
        known=$(awk -v h="$hours" -v l="$limit" 'BEGIN { print (h <= l) ? "run" : "skip" }')
        printf '%s\t%s\tstages.tsv sums to %s h; the plan runs it at most at %s h\t%s\n' \
            "$name" "$known" "$hours" "$limit" "$(date -u +%FT%TZ)" >> "$RESULTS/gates.tsv"
        commit "budget rule for $name: $known"
    fi
    echo "study-3: $name: $known ($(awk -F'\t' -v n="$name" '$1 == n { print $3 }' "$RESULTS/gates.tsv"))"
    [ "$known" = run ]
}

# ---- stage 0: study 2's videos and probe set
[ -d "$DATA/videos" ] && [ -f "$DATA/dataset/meta/info.json" ] || {
    stage collect "$LFS" collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes 100 \
        --video-frames 250 --render-quality fast --seed 0 --out "$DATA/videos"
    stage ingest "$LFS" ingest "$DATA/videos" --out "$DATA/dataset"
}
# -o: the study's binary, not a build of whatever the checkout holds now
[ -f "$PROBE_SET/meta/info.json" ] || stage probe-set make -o build -o setup probe-set LFS="$LFS"

# ---- stage 0: the reuse check (docs/study-3.md), decided once
if [ ! -f "$RESULTS/check/reuse.json" ]; then
    run="$DIR/check-lfs-s1"
    [ -f "$run/summary.json" ] || \
        stage check-pretrain-lfs-s1 env RAYON_NUM_THREADS=2 "$LFS" pretrain --config pipelines/mini.toml \
            --set "data.datasets=[\"$DATA/dataset\"]" --set "objective.method=lfs" \
            --set "run.seed=1" --set objective.lnc.r=0.2 --set run.num_updates=500 --out-dir "$run"
    head -n 501 "$STUDY2/pretrain/lfs-s1/updates.csv" > "$RESULTS/check/study2-lfs-s1-updates-1-500.csv"
    updates_ok=true
    python3 eval/study/compare_updates.py "$RESULTS/check/study2-lfs-s1-updates-1-500.csv" "$run/metrics.jsonl" \
        > "$RESULTS/check/updates.json" || updates_ok=false
    rm "$RESULTS/check/study2-lfs-s1-updates-1-500.csv"
    dataset_ok=$(python3 -c 'import json, sys; print(str(json.load(open(sys.argv[1])) == json.load(open(sys.argv[2]))).lower())' \
        "$DATA/dataset/meta/info.json" "$STUDY2/dataset_info.json")
    cp "$DATA/dataset/meta/info.json" "$RESULTS/check/dataset_info.json"
    # the probe: recorded, not part of the gate
    probe study2-lfs-s1 "$STUDY2/encoders/lfs-s1.safetensors"
    [ -f "$RESULTS/check/random-s1.json" ] || {
        stage probe-check-random-s1 sh -c "\"$LFS\" probe --encoder random --random-seed 1 --dataset $PROBE_SET --out \"$RESULTS/check/random-s1.json\" > \"$RESULTS/check/random-s1.md\""
    }
    python3 - "$STUDY2/probe" "$RESULTS" > "$RESULTS/check/probe.json" <<'PY'
import json, sys
from pathlib import Path
study2, results = Path(sys.argv[1]), Path(sys.argv[2])
def r2(path):
    return {t["task"]: t["state"]["held_out"]["mean"]["point"] for t in json.loads(path.read_text())["tasks"]}
out = {}
for name, ours in (("lfs-s1", results / "probe/study2-lfs-s1.json"), ("random-s1", results / "check/random-s1.json")):
    a, b = r2(study2 / f"{name}.json"), r2(ours)
    out[name] = {"equal": a == b, "largest_difference": max(abs(a[t] - b.get(t, float("nan"))) for t in a)}
print(json.dumps(out, indent=1))
PY
    reuse=false
    [ "$updates_ok" = true ] && [ "$dataset_ok" = true ] && reuse=true
    printf '{"reuse": %s, "dataset_info_equal": %s, "updates_1_500_identical": %s, "binary_commit": "%s", "decided_utc": "%s"}\n' \
        "$reuse" "$dataset_ok" "$updates_ok" "$LFS_COMMIT" "$(date -u +%FT%TZ)" > "$RESULTS/check/reuse.json"
    commit "the reuse check: reuse=$reuse"
fi
reuse=$(python3 -c 'import json, sys; print(str(json.load(open(sys.argv[1]))["reuse"]).lower())' "$RESULTS/check/reuse.json")
echo "study-3: reuse of study 2's six LFS runs: $reuse"
for s in 1 2 3 4 5 6; do  # study 2's LFS encoders, probed with this binary (the arm, or described)
    probe "study2-lfs-s$s" "$STUDY2/encoders/lfs-s$s.safetensors"
done

# ---- P1: lfs against lfs-no-fm, in the order that keeps the arms balanced
if [ "$reuse" = true ]; then
    for s in 1 2 3 4 5 6; do pretrain "lfs-no-fm-s$s" lfs-no-fm "$s"; done
    for s in 7 8 9 10; do
        pretrain "lfs-s$s" lfs "$s"
        pretrain "lfs-no-fm-s$s" lfs-no-fm "$s"
    done
else
    for k in 1 2 3 4 5 6 7 8 9 10; do
        pretrain "lfs-s$((k + 6))" lfs "$((k + 6))"
        pretrain "lfs-no-fm-s$k" lfs-no-fm "$k"
    done
fi

# ---- P2: lfs-no-lnc, if the budget rule allows
if gate P2 12; then
    for s in 1 2 3 4 5 6 7 8 9 10; do pretrain "lfs-no-lnc-s$s" lfs-no-lnc "$s"; done
fi

# ---- R: the SAC replication on cartpole_swingup, if the budget rule allows
if gate R 16; then
    for s in 7 8 9 10 11 12; do
        pretrain "lfs-s$s" lfs "$s"   # done already but for s11, s12 with reuse
        # A run done on another machine: the committed encoder-only export serves its cells
        # (its sha256 differs from the full export's; the cell records which it ran on).
        if [ ! -f "$DIR/lfs-s$s/encoder.safetensors" ]; then
            mkdir -p "$DIR/lfs-s$s"
            cp "$RESULTS/encoders/lfs-s$s.safetensors" "$DIR/lfs-s$s/encoder.safetensors"
            echo "study-3: lfs-s$s's cells run on results/study-3/encoders/lfs-s$s.safetensors (encoder only): record it in results/study-3/README.md" >&2
        fi
    done
    # Cell index = encoder * 6 + seed index (random 0-5, lfs 6-11): a seed's two cells together,
    # so that what a session's end leaves committed is whole units of the test.
    for k in 0 1 2 3 4 5; do
        stage "cells-$k-$((6 + k))" sh -c "
            \"$LFS\" suite run $SUITE --out $DIR/suite --job-index $k & a=\$!
            \"$LFS\" suite run $SUITE --out $DIR/suite --job-index $((6 + k)) & b=\$!
            wait \$a; ra=\$?; wait \$b; rb=\$?; exit \$(( ra | rb ))"
        commit "cells $k and $((6 + k))"
    done
    [ -f "$DIR/report/report.md" ] || "$LFS" report "$DIR/suite" --out "$DIR/report"
    commit "the replication's 12 cells and lfs report"
fi

# ---- the verdicts
python3 eval/study/probe_study3.py "$RESULTS" --final > "$RESULTS/verdicts.md"
commit "the verdicts (probe_study3.py)"
cat "$RESULTS/verdicts.md"
echo "study-3: done"
